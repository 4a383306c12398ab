// A periodic job on a thread of its own that backs off while it finds nothing: the agent's code
// poll (redefined methods, nmethods no event announced, new libraries). The thread is the caller's
// (a JVMTI agent thread); this is its loop, its schedule and its stop, testable without a JVM.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>

namespace sf::agent {

class PeriodicPoll {
public:
    // Every `base` at first; each poll that finds nothing doubles the wait up to `max`, a finding
    // brings it back to `base`.
    PeriodicPoll(std::chrono::milliseconds base, std::chrono::milliseconds max) : base_(base), max_(max) {}

    // The wait after a poll that waited `current` and found (or did not find) something.
    static std::chrono::milliseconds next_interval(std::chrono::milliseconds current, bool found,
                                                   std::chrono::milliseconds base, std::chrono::milliseconds max);

    // The thread's loop: waits, runs `poll` (true: it found something), until stop(). After each
    // poll it records the thread's CPU time (cpu_ns).
    void run(const std::function<bool()>& poll);
    // The same; `on_wake` runs whenever wake() was called, at once and without moving the
    // schedule of `poll` (the live profile's requests for method names ride on this thread).
    void run(const std::function<bool()>& poll, const std::function<void()>& on_wake);
    // Any thread: has run() call its on_wake soon (once for any number of calls before it does).
    void wake();
    // The same, `delay` from now (or at an earlier time already asked for).
    void wake_in(std::chrono::milliseconds delay);
    // Ends run() at its next wait, or at once while it waits; may come before run() starts.
    void stop();

    // The polling thread's CPU time after its last poll.
    uint64_t cpu_ns() const { return cpu_ns_.load(); }
    // Polls done so far.
    uint64_t polls() const { return polls_.load(); }

private:
    const std::chrono::milliseconds base_;
    const std::chrono::milliseconds max_;
    std::mutex mutex_;
    std::condition_variable wakeup_;
    bool stop_ = false;   // under mutex_
    // When on_wake is due, if asked for; under mutex_.
    std::optional<std::chrono::steady_clock::time_point> wake_due_;
    std::atomic<uint64_t> cpu_ns_{0};
    std::atomic<uint64_t> polls_{0};
};

}  // namespace sf::agent
