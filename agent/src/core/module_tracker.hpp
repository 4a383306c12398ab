// Announces the process's executable files (libjvm, libc, JNI libraries) as ModuleMap events, so
// that the decoder can unwind and name native frames; called again to catch libraries loaded later.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "event_sink.hpp"
#include "stackfrag/kernel/proc_maps.hpp"

namespace sf::agent {

// Whether `ip` lies in one of `ranges` ([begin, end), sorted by address, not overlapping).
bool in_ranges(const std::vector<std::pair<uint64_t, uint64_t>>& ranges, uint64_t ip);

// Any thread: the code-poll thread refreshes periodically, the reader when a sample runs in code
// outside every executable mapping of the last scan (a library loaded since).
class ModuleTracker {
public:
    using Range = std::pair<uint64_t, uint64_t>;   // [begin, end)

    // Emits a ModuleMap for every file mapping in `maps` not announced before, and for this
    // process's vDSO with its bytes (anonymous and other special mappings such as the CodeCache are
    // left to CodeLoad/Stub events); returns how many. `maps`
    // becomes the last scan (executable_ranges).
    size_t announce(const std::vector<kernel::ExecutableMapping>& maps, uint64_t time_ns, EventSink& sink);
    // The same for this process's /proc/self/maps.
    size_t refresh(uint64_t time_ns, EventSink& sink);
    // refresh(), unless another thread is scanning right now (then nothing, at once): for the
    // reader, which must not wait. `busy` says which.
    size_t try_refresh(uint64_t time_ns, EventSink& sink, bool& busy);

    // Every executable mapping (file, anonymous or special) of the last scan, by address, into
    // `ranges` if the scan is newer than `generation` (updated); false if there is none newer.
    bool executable_ranges(std::vector<Range>& ranges, uint64_t& generation) const;

    // The CodeCache's reserved range: its code is announced by CodeLoad and Stub events, and it
    // grows by committing more of the range, so a new part is no cause for a rescan. Before the
    // reader starts.
    void set_code_cache(Range range) { code_cache_ = range; }
    // Whether `ip` lies in the CodeCache or in one of `ranges` (from executable_ranges).
    bool known_code(const std::vector<Range>& ranges, uint64_t ip) const {
        return (ip >= code_cache_.first && ip < code_cache_.second) || in_ranges(ranges, ip);
    }

    // Whether `ip` lies in the CodeCache or in an executable mapping of the last scan.
    bool covers(uint64_t ip) const {
        std::lock_guard<std::mutex> lock(mutex_);
        return known_code(executable_, ip);
    }

    size_t announced() const {
        std::lock_guard<std::mutex> lock(mutex_);
        return announced_.size();
    }

private:
    size_t announce_locked(const std::vector<kernel::ExecutableMapping>& maps, uint64_t time_ns, EventSink& sink);

    mutable std::mutex mutex_;
    std::set<std::tuple<uint64_t, uint64_t, uint64_t, std::string>> announced_;
    std::map<std::string, std::string> build_ids_;   // per path: read once (a file maps several times)
    std::vector<Range> executable_;                  // the last scan's
    std::atomic<uint64_t> scans_{0};                 // executable_'s generation
    Range code_cache_{0, 0};
};

}  // namespace sf::agent
