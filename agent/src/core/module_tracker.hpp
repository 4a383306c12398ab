// Announces the process's executable files (libjvm, libc, JNI libraries) as ModuleMap events, so
// that the decoder can unwind and name native frames; called again to catch libraries loaded later.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "event_sink.hpp"
#include "stackfrag/kernel/proc_maps.hpp"

namespace sf::agent {

class ModuleTracker {
public:
    // Emits a ModuleMap for every file mapping in `maps` not announced before (anonymous and special
    // mappings such as the CodeCache are left to CodeLoad/Stub events); returns how many.
    size_t announce(const std::vector<kernel::ExecutableMapping>& maps, uint64_t time_ns, EventSink& sink);
    // The same for this process's /proc/self/maps.
    size_t refresh(uint64_t time_ns, EventSink& sink);

    size_t announced() const { return announced_.size(); }

private:
    std::set<std::tuple<uint64_t, uint64_t, uint64_t, std::string>> announced_;
    std::map<std::string, std::string> build_ids_;   // per path: read once (a file maps several times)
};

}  // namespace sf::agent
