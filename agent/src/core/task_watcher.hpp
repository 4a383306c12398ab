// threads=all: finds the process's threads that are not Java threads (GC workers, compiler threads,
// the VM thread, native threads) in /proc/self/task, at start and after (every 100 ms, it looks
// whether the thread count changed); announces each with a ThreadInfo of its kind and, when given a
// sampler (mode=thread), opens its perf event.
#pragma once

#include <pthread.h>
#include <sys/types.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "event_queue.hpp"
#include "open_lag.hpp"
#include "sampler.hpp"
#include "stackfrag/base/result.hpp"

namespace sf::agent {

// One thread of /proc/self/task: its id and comm (15 bytes at most).
struct TaskEntry {
    pid_t tid = 0;
    std::string name;
};
// The process's threads now; empty when /proc is not readable.
std::vector<TaskEntry> list_tasks();

// Whether perf rings for the JVM's own threads can be had without taking locked memory from the
// Java threads' rings: with CAP_IPC_LOCK (root) or no RLIMIT_MEMLOCK the kernel does not limit
// them; otherwise kernel.perf_event_mlock_kb (per CPU) and RLIMIT_MEMLOCK are shared by every ring
// of the user. Empty when it can; else why not, for the log.
std::string ring_memory_limit();

// Whether a tick of the watcher reads /proc/self/task (a directory read and a lookup per thread):
// only when the thread count (the directory's link count, from one fstat) changed since the last
// scan, a thread awaits its second sighting, or `full_every_ns` passed since the last scan (a
// thread that ended while another started leaves the count as it was).
bool task_scan_due(uint64_t links, uint64_t links_at_last_scan, bool sightings_pending, uint64_t since_last_scan_ns,
                   uint64_t full_every_ns);

class TaskWatcher final : public ReaderCycleHook {
public:
    // `is_java`: whether a tid is a registered Java thread (any thread may call it). `sampler` null:
    // announce only (mode=cpu, whose inheriting events already sample every thread).
    // `full_scan_ms`: the longest time between two scans (see task_scan_due).
    TaskWatcher(EventQueue& queue, Sampler* sampler, std::function<bool(pid_t)> is_java, int full_scan_ms = 1000);
    ~TaskWatcher();
    TaskWatcher(const TaskWatcher&) = delete;
    TaskWatcher& operator=(const TaskWatcher&) = delete;

    // Before start(): told of each event about to open (mode=thread's accounting).
    void set_open_lag(OpenLag* lag) { open_lag_ = lag; }
    // One scan on the calling thread. The VM's own threads (GC, compiler, VM names) are announced at
    // first sight, any other at its second (a Java thread exists for a moment before its
    // ThreadStart registers it, and every new thread is named "java" until it names itself).
    void scan();
    // What the watcher's thread does every interval: a scan when task_scan_due says so (always
    // when the thread count cannot be had). Returns whether it scanned.
    bool tick();
    // Ticks every `interval_ms` from a thread of its own (every signal blocked) until stop().
    // After ride_on_reader(), the look at the thread count is the reader's, and the thread wakes
    // only when it finds a scan due (or a full scan's interval passed).
    Status start(int interval_ms = 100);
    // Before start(): the caller has the reader call on_reader_cycle (Sampler::set_cycle_hook).
    // In mode=cpu the watcher only announces, and its own tick ten times a second cost ~200 us a
    // wake-up on the VM for a look that almost always found nothing: 20 ms of a 10 s run.
    void ride_on_reader() { riding_ = true; }
    // On the reader: every `interval_ms` at most, the look tick() takes (the thread count, one
    // fstat); wakes the watcher's thread when a scan is due.
    void on_reader_cycle(uint64_t now_ns) override;
    uint64_t reader_looks() const { return reader_looks_.load(std::memory_order_relaxed); }
    void stop();

    size_t native_threads() const;   // announced and not seen ending
    uint64_t scans() const;          // full scans of /proc/self/task so far
    uint64_t ticks() const;
    // The watcher thread's CPU time after its last tick (0 before it ran).
    uint64_t cpu_ns() const { return cpu_ns_.load(std::memory_order_relaxed); }

private:
    static void* main(void* self);

    EventQueue& queue_;
    Sampler* sampler_;
    OpenLag* open_lag_ = nullptr;
    std::function<bool(pid_t)> is_java_;
    mutable std::mutex mutex_;        // the scan's state below; held through a scan
    std::mutex wake_mutex_;           // the thread's sleep: stop_, started_, scan_requested_
    std::condition_variable wakeup_;  // with wake_mutex_
    bool stop_ = false;
    bool started_ = false;
    bool scan_requested_ = false;
    bool riding_ = false;
    int interval_ms_ = 100;
    const uint64_t full_scan_ns_;
    pthread_t thread_{};
    // /proc/self/task, open for its link count; the count and the time at the last scan (the
    // watcher's thread writes them, the reader's look reads them), and whether a thread awaits
    // its second sighting.
    const int task_dir_;
    std::atomic<uint64_t> links_at_scan_{0};
    std::atomic<uint64_t> last_scan_ns_{0};
    std::atomic<bool> sightings_pending_{false};
    uint64_t last_reader_look_ns_ = 0;   // the reader's
    std::atomic<uint64_t> reader_looks_{0};
    uint64_t task_links() const;
    bool scan_due(uint64_t links, uint64_t now) const;
    std::atomic<uint64_t> scans_{0};
    std::atomic<uint64_t> ticks_{0};
    std::atomic<uint64_t> cpu_ns_{0};
    // Under mutex_ (scan() runs on one thread at a time, but native_threads() may ask meanwhile).
    std::unordered_map<pid_t, std::string> announced_;   // native threads: tid -> name
    std::unordered_map<pid_t, int> sightings_;           // seen, not yet announced
};

}  // namespace sf::agent
