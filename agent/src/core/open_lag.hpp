// mode=thread: the threads' CPU time before their perf events opened (a Java thread until its
// ThreadStart, a JVM thread until the watcher finds it), by kind, for the stop summary.
#pragma once

#include <sys/types.h>

#include <array>
#include <cstdint>
#include <mutex>
#include <unordered_map>

#include "stackfrag/events/events.hpp"

namespace sf::agent {

class OpenLag {
public:
    // Right before the first ProcessCpu (at_start): each thread's CPU time so far, which coverage
    // counts as "before" already. Thread-safe, like the rest.
    void snapshot_existing();
    // `tid`'s event is about to open: its CPU time since the snapshot (or since it started) ran
    // unsampled. Call before the open, from any thread.
    void on_open(pid_t tid, ThreadKind kind);
    // `tid`'s event closes for good with the thread at `cpu_ns` of CPU time (a Java thread's
    // ThreadEnd): should the same thread get an event again (HotSpot's main thread comes back as
    // DestroyJavaVM), only the time since counts. A tid reused by a new thread, which has used less
    // CPU time, counts from 0.
    void on_end(pid_t tid, uint64_t cpu_ns);

    struct Totals {
        std::array<uint64_t, kThreadKinds> ns{};      // CPU time before the open, by kind
        std::array<uint64_t, kThreadKinds> threads{};  // opens counted
        uint64_t total_ns() const;
    };
    Totals totals() const;
    // on_open with the thread's CPU time given (tests).
    void add(pid_t tid, ThreadKind kind, uint64_t cpu_ns);

private:
    mutable std::mutex mutex_;
    std::unordered_map<pid_t, uint64_t> counted_until_;   // tid -> CPU time already accounted for
    Totals totals_;
};

}  // namespace sf::agent
