// Clock readings in nanoseconds: the event stream's time base (CLOCK_MONOTONIC), wall time, and
// the CPU time of a thread or of the whole process. All async-signal-safe (clock_gettime is);
// beside them, a thread's page-fault count (getrusage, not async-signal-safe).
#pragma once

#include <sys/resource.h>
#include <sys/time.h>
#include <sys/types.h>
#include <time.h>

#include <cstdint>
#include <optional>

namespace sf {

inline uint64_t timespec_ns(const timespec& ts) {
    return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000u + static_cast<uint64_t>(ts.tv_nsec);
}

inline uint64_t timeval_ns(const timeval& tv) {
    return static_cast<uint64_t>(tv.tv_sec) * 1'000'000'000u + static_cast<uint64_t>(tv.tv_usec) * 1000u;
}

// The clock's reading, 0 when it cannot be read.
inline uint64_t clock_ns(clockid_t clock) {
    timespec ts{};
    if (clock_gettime(clock, &ts) != 0) return 0;
    return timespec_ns(ts);
}

inline uint64_t monotonic_ns() { return clock_ns(CLOCK_MONOTONIC); }
inline uint64_t realtime_ns() { return clock_ns(CLOCK_REALTIME); }
inline uint64_t thread_cpu_ns() { return clock_ns(CLOCK_THREAD_CPUTIME_ID); }
inline uint64_t process_cpu_ns() { return clock_ns(CLOCK_PROCESS_CPUTIME_ID); }
// The CPU time of thread `tid` of this process (the kernel's MAKE_THREAD_CPUCLOCK(tid,
// CPUCLOCK_SCHED) clock id, what pthread_getcpuclockid builds, so no pthread_t is needed); nullopt
// when it has ended. A thread created but not yet run reads 0: alive, which 0 alone cannot say.
inline std::optional<uint64_t> thread_cpu_ns_if_alive(pid_t tid) {
    timespec ts{};
    if (clock_gettime(static_cast<clockid_t>((~static_cast<unsigned>(tid)) << 3) | 6, &ts) != 0) return std::nullopt;
    return timespec_ns(ts);
}
// The same, 0 when it has ended (or has not run yet).
inline uint64_t thread_cpu_ns_of(pid_t tid) { return thread_cpu_ns_if_alive(tid).value_or(0); }

// The calling thread's page faults so far (minor + major): where a thread's time goes into fresh
// pages (a buffer the allocator had given back), CPU time alone does not say. 0 when unknown.
inline uint64_t thread_page_faults() {
    rusage usage{};
    if (getrusage(RUSAGE_THREAD, &usage) != 0) return 0;
    return static_cast<uint64_t>(usage.ru_minflt) + static_cast<uint64_t>(usage.ru_majflt);
}

}  // namespace sf
