#include <sched.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <fstream>
#include <string>
#include <string_view>

#include "stackfrag/kernel/perf_events.hpp"

namespace sf::kernel {

namespace {

std::string read_sysctl(const char* path) {
    std::ifstream in(path);
    std::string value;
    if (!(in >> value)) return "unreadable";
    return value;
}

}  // namespace

Error perf_open_error(int err, std::string what) {
    switch (err) {
        case EACCES:
        case EPERM:
            return sys_error(
                Errc::kPermission, err, std::move(what),
                "kernel.perf_event_paranoid is " +
                    read_sysctl("/proc/sys/kernel/perf_event_paranoid") +
                    "; user-only sampling of your own threads needs it at 2 or lower "
                    "(sysctl -w kernel.perf_event_paranoid=2) or CAP_PERFMON; the target must "
                    "also be ptrace-able by you (same user, kernel.yama.ptrace_scope)");
        case ENOENT:
        case EOPNOTSUPP:
        case ENODEV:
        case ENOSYS:
            return sys_error(Errc::kUnsupported, err, std::move(what),
                             "this kernel or machine does not support the event (software "
                             "clocks with user register and stack sampling, x86_64)");
        case EMFILE:
            return sys_error(Errc::kResourceLimit, err, std::move(what),
                             "one file descriptor is needed per sampled thread; raise "
                             "RLIMIT_NOFILE (ulimit -n)");
        case ENFILE:
            return sys_error(Errc::kResourceLimit, err, std::move(what),
                             "the system-wide file table is full (fs.file-max)");
        case ESRCH:
            return sys_error(Errc::kInvalidArgument, err, std::move(what),
                             "the thread or process does not exist (it may have just exited)");
        case EINVAL:
        case E2BIG:
            return sys_error(Errc::kInvalidArgument, err, std::move(what),
                             "the kernel refused the event attributes; check the period, "
                             "stack size and clock (kernel.perf_event_max_sample_rate is " +
                                 read_sysctl("/proc/sys/kernel/perf_event_max_sample_rate") +
                                 ")");
        case EBUSY:
            return sys_error(Errc::kResourceLimit, err, std::move(what),
                             "another user holds the PMU exclusively; retry later");
        default:
            return sys_error(Errc::kInternal, err, std::move(what));
    }
}

Error perf_mmap_error(int err, std::string what, size_t ring_bytes) {
    if (err == EPERM || err == ENOMEM) {
        return sys_error(Errc::kResourceLimit, err, std::move(what),
                         "the ring (" + std::to_string(ring_bytes / 1024) +
                             " KB + a page) exceeds what may be locked: raise "
                             "kernel.perf_event_mlock_kb (now " +
                             read_sysctl("/proc/sys/kernel/perf_event_mlock_kb") +
                             ", counted per user and CPU) or RLIMIT_MEMLOCK (ulimit -l), "
                             "grant CAP_IPC_LOCK, or use fewer ring_pages");
    }
    if (err == EINVAL) {
        return sys_error(Errc::kInvalidArgument, err, std::move(what),
                         "the ring must be a power of two pages, and an inherited event can "
                         "only be mapped when it is per-CPU");
    }
    return sys_error(Errc::kInternal, err, std::move(what));
}

Result<std::vector<int>> parse_cpu_list(std::string_view list) {
    std::vector<int> cpus;
    size_t pos = 0;
    while (pos < list.size()) {
        size_t comma = list.find(',', pos);
        if (comma == std::string_view::npos) comma = list.size();
        const std::string_view range = list.substr(pos, comma - pos);
        const size_t dash = range.find('-');
        const std::string_view first_text = range.substr(0, dash);
        const std::string_view last_text = dash == std::string_view::npos ? first_text : range.substr(dash + 1);
        int first = -1;
        int last = -1;
        const auto a = std::from_chars(first_text.data(), first_text.data() + first_text.size(), first);
        const auto b = std::from_chars(last_text.data(), last_text.data() + last_text.size(), last);
        if (a.ec != std::errc() || b.ec != std::errc() || a.ptr != first_text.data() + first_text.size() ||
            b.ptr != last_text.data() + last_text.size() || first < 0 || last < first) {
            std::string what = "'";   // appended, not concatenated: GCC 12 warns falsely (-Wrestrict) on "'" + string
            what.append(list).append("' is no CPU list");
            return make_error(Errc::kCorrupt, std::move(what), "expected a list such as 0-3,5");
        }
        for (int cpu = first; cpu <= last; ++cpu) cpus.push_back(cpu);
        pos = comma + 1;
    }
    return cpus;
}

Result<std::vector<int>> online_cpus() {
    const char* path = "/sys/devices/system/cpu/online";
    std::ifstream in(path);
    std::string list;
    if (!(in >> list)) {
        return make_error(Errc::kIo, std::string("cannot read ") + path,
                          "mount sysfs, or give the CPUs explicitly");
    }
    Result<std::vector<int>> cpus = parse_cpu_list(list);
    if (!cpus.ok()) return make_error(Errc::kCorrupt, std::string(path) + " holds '" + list + "'", "expected a list such as 0-3,5");
    if (cpus->empty()) return make_error(Errc::kCorrupt, std::string(path) + " is empty");
    return cpus;
}

Result<std::vector<int>> cpus_allowed() {
    Result<std::vector<int>> online = online_cpus();
    if (!online.ok()) return online;
    // The kernel wants a mask at least as large as its own (EINVAL otherwise), which may hold more
    // CPUs than the fixed cpu_set_t's 1,024: grown until it is.
    std::vector<int> allowed;
    for (int count = std::max(online->back() + 1, 1024); count <= (1 << 20) && allowed.empty(); count *= 2) {
        cpu_set_t* mask = CPU_ALLOC(count);
        if (mask == nullptr) break;
        const size_t bytes = CPU_ALLOC_SIZE(count);
        const bool read = sched_getaffinity(0, bytes, mask) == 0;
        const int err = errno;
        if (read) {
            for (int cpu : *online) {
                if (CPU_ISSET_S(static_cast<size_t>(cpu), bytes, mask)) allowed.push_back(cpu);
            }
        }
        CPU_FREE(mask);
        if (read || err != EINVAL) break;
    }
    if (allowed.empty()) return online;   // unreadable, or no allowed CPU online (a cpuset in flux)
    return allowed;
}

}  // namespace sf::kernel
