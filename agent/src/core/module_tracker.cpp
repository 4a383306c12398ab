#include "module_tracker.hpp"

#include "stackfrag/base/elf_file.hpp"

namespace sf::agent {

size_t ModuleTracker::announce(const std::vector<kernel::ExecutableMapping>& maps, uint64_t time_ns,
                               EventSink& sink) {
    size_t added = 0;
    for (const kernel::ExecutableMapping& mapping : maps) {
        if (!mapping.is_file()) continue;
        if (!announced_.emplace(mapping.begin, mapping.end, mapping.offset, mapping.path).second) continue;
        // The build id goes with the path, so a replay elsewhere or after an upgrade can tell
        // whether the file it finds there is the one that was mapped.
        auto id = build_ids_.find(mapping.path);
        if (id == build_ids_.end()) id = build_ids_.emplace(mapping.path, ElfFile(mapping.path).build_id()).first;
        sink.emit(ModuleMap{time_ns, mapping.begin, mapping.end, mapping.offset, mapping.path, id->second});
        ++added;
    }
    return added;
}

size_t ModuleTracker::refresh(uint64_t time_ns, EventSink& sink) {
    return announce(kernel::read_executable_maps(0), time_ns, sink);
}

}  // namespace sf::agent
