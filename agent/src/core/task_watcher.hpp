// threads=all: finds the process's threads that are not Java threads (GC workers, compiler threads,
// the VM thread, native threads) in /proc/self/task, at start and every 100 ms after; announces each
// with a ThreadInfo of its kind and, when given a sampler (mode=thread), opens its perf event.
#pragma once

#include <pthread.h>
#include <sys/types.h>

#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "event_queue.hpp"
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

class TaskWatcher {
public:
    // `is_java`: whether a tid is a registered Java thread (any thread may call it). `sampler` null:
    // announce only (mode=cpu, whose inheriting events already sample every thread).
    TaskWatcher(EventQueue& queue, Sampler* sampler, std::function<bool(pid_t)> is_java);
    ~TaskWatcher();
    TaskWatcher(const TaskWatcher&) = delete;
    TaskWatcher& operator=(const TaskWatcher&) = delete;

    // One scan on the calling thread. The VM's own threads (GC, compiler, VM names) are announced at
    // first sight, any other at its second (a Java thread exists for a moment before its
    // ThreadStart registers it, and every new thread is named "java" until it names itself).
    void scan();
    // Scans every `interval_ms` from a thread of its own (every signal blocked) until stop().
    Status start(int interval_ms = 100);
    void stop();

    size_t native_threads() const;   // announced and not seen ending

private:
    static void* main(void* self);

    EventQueue& queue_;
    Sampler* sampler_;
    std::function<bool(pid_t)> is_java_;
    mutable std::mutex mutex_;
    std::condition_variable wakeup_;
    bool stop_ = false;
    bool started_ = false;
    int interval_ms_ = 100;
    pthread_t thread_{};
    // Under mutex_ (scan() runs on one thread at a time, but native_threads() may ask meanwhile).
    std::unordered_map<pid_t, std::string> announced_;   // native threads: tid -> name
    std::unordered_map<pid_t, int> sightings_;           // seen, not yet announced
};

}  // namespace sf::agent
