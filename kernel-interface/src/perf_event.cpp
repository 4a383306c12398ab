#include <linux/perf_event.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <string>
#include <utility>

#include "stackfrag/kernel/perf_events.hpp"

namespace sf::kernel {

namespace {

const char* clock_name(uint64_t config) {
    switch (config) {
        case PERF_COUNT_SW_TASK_CLOCK: return "task-clock";
        case PERF_COUNT_SW_CPU_CLOCK: return "cpu-clock";
        case PERF_COUNT_SW_CONTEXT_SWITCHES: return "context-switches";
        default: return "event";
    }
}

std::string describe_target(const perf_event_attr& attr, pid_t pid, int cpu) {
    std::string text = "perf_event_open(";
    text += attr.type == PERF_TYPE_SOFTWARE ? clock_name(attr.config) : "event";
    text += cpu < 0 ? ", thread " + std::to_string(pid)
                    : ", process " + std::to_string(pid) + " on cpu " + std::to_string(cpu);
    text += attr.type == PERF_TYPE_SOFTWARE && attr.config == PERF_COUNT_SW_CONTEXT_SWITCHES
                ? ", every switch)"
                : ", every " + std::to_string(attr.sample_period) + " ns)";
    return text;
}

}  // namespace

namespace {
// Process-wide and lock-free: rings are mapped and unmapped by the reader and by JVMTI callbacks.
std::atomic<uint64_t> g_ring_bytes{0};
std::atomic<uint64_t> g_rings{0};
std::atomic<uint64_t> g_peak_ring_bytes{0};
std::atomic<uint64_t> g_peak_rings{0};

void count_mapped(size_t bytes) {
    const uint64_t now = g_ring_bytes.fetch_add(bytes, std::memory_order_relaxed) + bytes;
    const uint64_t rings = g_rings.fetch_add(1, std::memory_order_relaxed) + 1;
    uint64_t peak = g_peak_ring_bytes.load(std::memory_order_relaxed);
    while (now > peak && !g_peak_ring_bytes.compare_exchange_weak(peak, now, std::memory_order_relaxed)) {
    }
    if (now >= peak) g_peak_rings.store(rings, std::memory_order_relaxed);
}

void count_unmapped(size_t bytes) {
    g_ring_bytes.fetch_sub(bytes, std::memory_order_relaxed);
    g_rings.fetch_sub(1, std::memory_order_relaxed);
}
}  // namespace

RingMemory ring_memory() {
    RingMemory memory;
    memory.bytes = g_ring_bytes.load(std::memory_order_relaxed);
    memory.rings = g_rings.load(std::memory_order_relaxed);
    memory.peak_bytes = g_peak_ring_bytes.load(std::memory_order_relaxed);
    memory.peak_rings = g_peak_rings.load(std::memory_order_relaxed);
    return memory;
}

Result<PerfEvent> PerfEvent::open_attr(const perf_event_attr& attr, pid_t pid, int cpu,
                                       uint32_t ring_pages) {
    const std::string what = describe_target(attr, pid, cpu);
    if (ring_pages == 0 || (ring_pages & (ring_pages - 1)) != 0) {
        return make_error(Errc::kInvalidArgument,
                          what + ": ring_pages " + std::to_string(ring_pages) +
                              " is not a power of two",
                          "give a power of two such as 64, 128 or 256");
    }
    perf_event_attr copy = attr;
    const long fd = syscall(SYS_perf_event_open, &copy, pid, cpu, -1, PERF_FLAG_FD_CLOEXEC);
    if (fd < 0) return perf_open_error(errno, what);

    PerfEvent event;
    event.fd_ = static_cast<int>(fd);
    event.target_ = pid;
    event.cpu_ = cpu;
    const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    const size_t data_bytes = static_cast<size_t>(ring_pages) * page;
    event.map_size_ = data_bytes + page;
    void* map = mmap(nullptr, event.map_size_, PROT_READ | PROT_WRITE, MAP_SHARED, event.fd_, 0);
    if (map == MAP_FAILED) {
        const int err = errno;
        event.map_size_ = 0;
        return perf_mmap_error(err, "mmap of the ring of " + what, data_bytes);
    }
    event.map_ = map;
    count_mapped(event.map_size_);
    const uint32_t stack_bytes =
        (attr.sample_type & PERF_SAMPLE_STACK_USER) != 0 ? attr.sample_stack_user : 0;
    event.ring_ = std::make_unique<RingReader>(map, data_bytes, stack_bytes);
    return event;
}

Status probe_kernel_sampling() {
    perf_event_attr attr;
    std::memset(&attr, 0, sizeof attr);
    attr.size = sizeof attr;
    attr.type = PERF_TYPE_SOFTWARE;
    attr.config = PERF_COUNT_SW_TASK_CLOCK;
    attr.disabled = 1;
    attr.exclude_kernel = 0;
    attr.exclude_hv = 1;
    const long fd = syscall(SYS_perf_event_open, &attr, 0, -1, -1, PERF_FLAG_FD_CLOEXEC);
    if (fd < 0) {
        Error error = perf_open_error(errno, "perf_event_open(task-clock, this thread, kernel mode included)");
        if (error.code == Errc::kPermission) {
            error.hint = "sampling kernel time needs kernel.perf_event_paranoid at 1 or lower "
                         "(sysctl -w kernel.perf_event_paranoid=1), CAP_PERFMON or root";
        }
        return error;
    }
    ::close(static_cast<int>(fd));
    return {};
}

Result<PerfEvent> PerfEvent::open_thread(pid_t tid, const SamplingConfig& config) {
    if (Status valid = validate(config); !valid) return std::move(valid).take_error();
    return open_attr(make_attr(config, false), tid, -1, config.ring_pages);
}

Result<PerfEvent> PerfEvent::open_cpu(pid_t pid, int cpu, const SamplingConfig& config) {
    if (Status valid = validate(config); !valid) return std::move(valid).take_error();
    if (cpu < 0) {
        return make_error(Errc::kInvalidArgument, "per-CPU event for process " +
                                                      std::to_string(pid) + ": cpu is " +
                                                      std::to_string(cpu),
                          "give a CPU number from online_cpus()");
    }
    return open_attr(make_attr(config, true), pid, cpu, config.ring_pages);
}

Result<PerfEvent> PerfEvent::open_thread_switches(pid_t tid, const SamplingConfig& config,
                                                  const PerfEvent* into) {
    if (Status valid = validate(config); !valid) return std::move(valid).take_error();
    const perf_event_attr attr = make_switch_attr(config);
    // The switch event counts in the kernel, which paranoid level 2 refuses to unprivileged users.
    const auto explain = [](Error error) {
        if (error.code == Errc::kPermission) {
            error.hint = "context-switch sampling counts in the kernel: it needs "
                         "kernel.perf_event_paranoid at 1 or lower (sysctl -w kernel.perf_event_paranoid=1) "
                         "or CAP_PERFMON; events=cpu alone works at 2";
        }
        return error;
    };
    if (into == nullptr) {
        Result<PerfEvent> own = open_attr(attr, tid, -1, config.ring_pages);
        if (!own.ok()) return explain(std::move(own).take_error());
        return own;
    }
    perf_event_attr copy = attr;
    const long fd = syscall(SYS_perf_event_open, &copy, tid, -1, -1, PERF_FLAG_FD_CLOEXEC);
    if (fd < 0) return explain(perf_open_error(errno, describe_target(attr, tid, -1)));
    PerfEvent event;
    event.fd_ = static_cast<int>(fd);
    event.target_ = tid;
    if (ioctl(event.fd_, PERF_EVENT_IOC_SET_OUTPUT, into->fd()) != 0) {
        return sys_error(Errc::kInternal, errno,
                         "directing the context switches of thread " + std::to_string(tid) +
                             " into its clock event's ring (PERF_EVENT_IOC_SET_OUTPUT)");
    }
    return event;
}

PerfEvent::PerfEvent(PerfEvent&& other) noexcept
    : fd_(std::exchange(other.fd_, -1)),
      target_(other.target_),
      cpu_(other.cpu_),
      map_(std::exchange(other.map_, nullptr)),
      map_size_(std::exchange(other.map_size_, 0)),
      ring_(std::move(other.ring_)) {}

PerfEvent& PerfEvent::operator=(PerfEvent&& other) noexcept {
    if (this != &other) {
        close();
        fd_ = std::exchange(other.fd_, -1);
        target_ = other.target_;
        cpu_ = other.cpu_;
        map_ = std::exchange(other.map_, nullptr);
        map_size_ = std::exchange(other.map_size_, 0);
        ring_ = std::move(other.ring_);
    }
    return *this;
}

PerfEvent::~PerfEvent() { close(); }

void PerfEvent::close() {
    ring_.reset();
    if (map_ != nullptr) {
        munmap(map_, map_size_);
        count_unmapped(map_size_);
    }
    map_ = nullptr;
    map_size_ = 0;
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
}

Status PerfEvent::enable() {
    if (ioctl(fd_, PERF_EVENT_IOC_ENABLE, 0) != 0) {
        return sys_error(Errc::kInternal, errno,
                         "enabling the perf event of thread " + std::to_string(target_));
    }
    return {};
}

Status PerfEvent::disable() {
    if (ioctl(fd_, PERF_EVENT_IOC_DISABLE, 0) != 0) {
        return sys_error(Errc::kInternal, errno,
                         "disabling the perf event of thread " + std::to_string(target_));
    }
    return {};
}

Result<uint64_t> PerfEvent::count() const {
    uint64_t value = 0;
    const ssize_t got = ::read(fd_, &value, sizeof value);
    if (got != static_cast<ssize_t>(sizeof value)) {
        return sys_error(Errc::kInternal, got < 0 ? errno : EIO,
                         "reading the count of the perf event of thread " + std::to_string(target_));
    }
    return value;
}

Status PerfEvent::set_period(uint64_t period_ns) {
    if (period_ns < kMinPeriodNs) {
        return make_error(Errc::kInvalidArgument,
                          "period_ns " + std::to_string(period_ns) + " is below 10us",
                          "the kernel's software clocks do not fire more often than every 10us");
    }
    if (ioctl(fd_, PERF_EVENT_IOC_PERIOD, &period_ns) != 0) {
        return sys_error(errno == EINVAL ? Errc::kInvalidArgument : Errc::kInternal, errno,
                         "setting the period of the perf event of thread " +
                             std::to_string(target_) + " to " + std::to_string(period_ns) + " ns");
    }
    return {};
}

}  // namespace sf::kernel
