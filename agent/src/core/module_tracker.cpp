#include "module_tracker.hpp"

namespace sf::agent {

size_t ModuleTracker::announce(const std::vector<kernel::ExecutableMapping>& maps, uint64_t time_ns,
                               EventSink& sink) {
    size_t added = 0;
    for (const kernel::ExecutableMapping& mapping : maps) {
        if (!mapping.is_file()) continue;
        if (!announced_.emplace(mapping.begin, mapping.end, mapping.offset, mapping.path).second) continue;
        sink.emit(ModuleMap{time_ns, mapping.begin, mapping.end, mapping.offset, mapping.path});
        ++added;
    }
    return added;
}

size_t ModuleTracker::refresh(uint64_t time_ns, EventSink& sink) {
    return announce(kernel::read_executable_maps(0), time_ns, sink);
}

}  // namespace sf::agent
