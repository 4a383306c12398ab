#include <pthread.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>

#include "stackfrag/kernel/perf_events.hpp"

namespace sf::kernel {

namespace {

// The kernel's struct sched_attr (glibc 2.36 has no wrapper for sched_setattr).
struct SchedAttr {
    uint32_t size;
    uint32_t sched_policy;
    uint64_t sched_flags;
    int32_t sched_nice;
    uint32_t sched_priority;
    uint64_t sched_runtime;
    uint64_t sched_deadline;
    uint64_t sched_period;
    uint32_t sched_util_min;
    uint32_t sched_util_max;
};

}  // namespace

const char* reader_priority_name(ReaderPriority priority) {
    switch (priority) {
        case ReaderPriority::kRealtime: return "SCHED_FIFO 1";
        case ReaderPriority::kShortSlice: return "short slice";
        case ReaderPriority::kUnchanged: return "unchanged";
    }
    return "unknown";
}

ReaderPriority raise_reader_priority() {
    sched_param param{};
    param.sched_priority = 1;
    if (pthread_setschedparam(pthread_self(), SCHED_FIFO, &param) == 0) return ReaderPriority::kRealtime;
    return lower_reader_priority();
}

bool reader_too_busy_for_real_time(uint64_t cpu_ns, uint64_t wall_ns) {
    return wall_ns >= 100'000'000 && cpu_ns * 2 > wall_ns;
}

bool reader_quiet_enough_for_real_time(uint64_t cpu_ns, uint64_t wall_ns) {
    return wall_ns >= 100'000'000 && cpu_ns * 4 < wall_ns;
}

ReaderPriority lower_reader_priority() {
    sched_param normal{};
    normal.sched_priority = 0;
    (void)pthread_setschedparam(pthread_self(), SCHED_OTHER, &normal);
    SchedAttr attr{};
    attr.size = sizeof attr;
    attr.sched_policy = SCHED_OTHER;
    attr.sched_runtime = 100'000;
    if (syscall(SYS_sched_setattr, 0, &attr, 0) == 0) return ReaderPriority::kShortSlice;
    return ReaderPriority::kUnchanged;
}

bool populate_for_write(void* p, size_t bytes) {
#ifndef MADV_POPULATE_WRITE
    constexpr int MADV_POPULATE_WRITE = 23;   // Linux 5.14; older headers lack the name
#endif
    if (bytes == 0) return true;   // nothing to map
    if (p == nullptr) return false;
    const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
    const uintptr_t begin = reinterpret_cast<uintptr_t>(p) & ~(page - 1);
    const uintptr_t end = (reinterpret_cast<uintptr_t>(p) + bytes + page - 1) & ~(page - 1);
    return madvise(reinterpret_cast<void*>(begin), end - begin, MADV_POPULATE_WRITE) == 0;
}

}  // namespace sf::kernel
