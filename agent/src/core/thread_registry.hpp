// The Java threads the agent samples and which backend samples them: perf events, or the signal
// backend's CPU-time timers when asked for or once perf is denied. Plain state, no JVM needed.
#pragma once

#include <sys/types.h>

#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "options.hpp"
#include "oracle.hpp"
#include "stackfrag/base/result.hpp"

namespace sf::agent {

// The live registered threads (tid -> name) and those a perf event samples. Thread-safe.
class ThreadRegistry {
public:
    // False when `tid` is registered already (go_live's enumeration and ThreadStart may both see it).
    bool add(pid_t tid, std::string name);
    // Its name when it was registered; it is then forgotten, perf mark included.
    std::optional<std::string> remove(pid_t tid);
    // Whether `tid` is a registered (Java) thread.
    bool contains(pid_t tid) const;
    // A perf event samples `tid` (until remove).
    void set_on_perf(pid_t tid);
    // The registered threads no perf event samples, `except` left out (0: none).
    std::vector<pid_t> not_on_perf(pid_t except = 0) const;
    size_t size() const;

private:
    mutable std::mutex mutex_;
    std::unordered_map<pid_t, std::string> names_;
    std::unordered_set<pid_t> on_perf_;
};

// Which backend samples the threads registered from now on. Perf events by default; backend=signal
// from the start; backend=auto moves to signals once, at the first persistent perf denial. mode=jvmti
// opens no event and never falls back. Thread-safe.
class BackendSelection {
public:
    BackendSelection(SamplingBackend requested, SamplingMode mode) : requested_(requested), mode_(mode) {}

    // backend=signal asked for the timers from the start.
    bool signal_from_start() const { return requested_ == SamplingBackend::kSignal && mode_ != SamplingMode::kJvmti; }
    // A perf open failed with `denied` (nullopt: nothing persistent): true exactly once, when the
    // caller should now start the signal backend and move the threads registered so far to it.
    bool should_fall_back(const std::optional<Error>& denied);
    // The signal backend runs: threads registered from now on get timers. `why` is for the summary.
    void use_signal(std::string why);
    bool signal() const;
    // "perf", or "signal (why)".
    std::string text() const;

private:
    const SamplingBackend requested_;
    const SamplingMode mode_;
    mutable std::mutex mutex_;
    bool signal_ = false;          // under mutex_
    std::string reason_;           // under mutex_
    bool fallback_tried_ = false;  // under mutex_
};

// The timer sampler's settings (validate's oracle and/or the signal backend; one per process). For the
// signal backend's samples (`for_samples`) its buffer holds ~20 ms of ticks on each of `cpus` CPUs
// (the reader drains every 10 ms), 512 to 4096; without validate it keeps no room for
// AsyncGetCallTrace's frames. For validate with stack=auto (perf, mode=thread) it also keeps
// ~20 ms of ticks on every CPU (64 to 512) of entries that hold as much stack as perf copies at most, for the ticks of threads
// whose fragment stack=auto grew (OracleSampler::set_stack_bytes). The JavaVM and AsyncGetCallTrace
// are the caller's to fill in.
OracleSettings timer_settings(const AgentOptions& options, uint64_t cpus, bool for_samples);

}  // namespace sf::agent
