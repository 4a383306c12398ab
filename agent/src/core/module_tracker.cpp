#include "module_tracker.hpp"

#include <algorithm>

#include "stackfrag/base/elf_file.hpp"

namespace sf::agent {

size_t ModuleTracker::announce(const std::vector<kernel::ExecutableMapping>& maps, uint64_t time_ns,
                               EventSink& sink) {
    std::lock_guard<std::mutex> lock(mutex_);
    return announce_locked(maps, time_ns, sink);
}

size_t ModuleTracker::announce_locked(const std::vector<kernel::ExecutableMapping>& maps, uint64_t time_ns,
                                      EventSink& sink) {
    size_t added = 0;
    std::vector<Range> ranges;
    ranges.reserve(maps.size());
    for (const kernel::ExecutableMapping& mapping : maps) {
        ranges.emplace_back(mapping.begin, mapping.end);
        // Files, and this process's vDSO, whose bytes go with it: no file holds them.
        const bool vdso = kernel::is_own_vdso(mapping);
        if (!vdso && !mapping.is_file()) continue;
        if (!announced_.emplace(mapping.begin, mapping.end, mapping.offset, mapping.path).second) continue;
        ModuleMap module{time_ns, mapping.begin, mapping.end, mapping.offset, mapping.path, {}, {}};
        if (vdso) {
            module.image = kernel::copy_own_vdso(mapping);
            module.build_id = ElfFile(module.image).build_id();
        } else {
            // The build id goes with the path, so a replay elsewhere or after an upgrade can tell
            // whether the file it finds there is the one that was mapped.
            auto id = build_ids_.find(mapping.path);
            if (id == build_ids_.end()) id = build_ids_.emplace(mapping.path, ElfFile(mapping.path).build_id()).first;
            module.build_id = id->second;
        }
        sink.emit(std::move(module));
        ++added;
    }
    std::sort(ranges.begin(), ranges.end());
    executable_ = std::move(ranges);
    scans_.fetch_add(1, std::memory_order_release);
    return added;
}

size_t ModuleTracker::refresh(uint64_t time_ns, EventSink& sink) {
    std::lock_guard<std::mutex> lock(mutex_);   // read under it too: scans replace each other in order
    return announce_locked(kernel::read_executable_maps(0), time_ns, sink);
}

size_t ModuleTracker::try_refresh(uint64_t time_ns, EventSink& sink, bool& busy) {
    std::unique_lock<std::mutex> lock(mutex_, std::try_to_lock);
    busy = !lock.owns_lock();
    if (busy) return 0;
    return announce_locked(kernel::read_executable_maps(0), time_ns, sink);
}

bool ModuleTracker::executable_ranges(std::vector<Range>& ranges, uint64_t& generation) const {
    if (scans_.load(std::memory_order_acquire) == generation) return false;
    std::lock_guard<std::mutex> lock(mutex_);
    ranges = executable_;
    generation = scans_.load(std::memory_order_relaxed);
    return true;
}

bool in_ranges(const std::vector<std::pair<uint64_t, uint64_t>>& ranges, uint64_t ip) {
    auto after = std::upper_bound(ranges.begin(), ranges.end(), ip,
                                  [](uint64_t value, const std::pair<uint64_t, uint64_t>& range) { return value < range.first; });
    return after != ranges.begin() && ip < std::prev(after)->second;
}

}  // namespace sf::agent
