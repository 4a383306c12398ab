// Per-thread (or per-CPU) perf_event_open sampling of user registers and a user-stack fragment,
// and the reader of the mmap'd rings they fill; never blocks or signals the sampled thread.
#pragma once

#include <linux/perf_event.h>
#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "stackfrag/base/result.hpp"
#include "stackfrag/events/events.hpp"

namespace sf::kernel {

enum class ClockKind : uint8_t { kTask, kCpu };   // PERF_COUNT_SW_TASK_CLOCK / _CPU_CLOCK

// The smallest period the kernel honours for its hrtimer-driven software clocks; a smaller one
// would be raised to this silently, so validate() refuses it instead.
inline constexpr uint64_t kMinPeriodNs = 10'000;
// The shortest period stackfrag samples at. Each sample costs the sampled CPU ~9-16 us in the
// kernel on this project's VM (bench_sample_cost), all of it in the timer's interrupt: at the
// kernel's 10 us floor the hrtimer fires again before its handler is done, and the CPU serves
// nothing else. The test suite's 10 us run left "soft lockup - CPU#0 stuck for 52s" in dmesg, a
// perf ioctl on the other CPU waiting for it, and every other JVM on the machine starved. 50 us
// leaves the sampled thread most of each period even where a sample costs 16 us.
inline constexpr uint64_t kMinSamplingPeriodNs = 50'000;
inline constexpr uint32_t kMaxStackBytes = 65528;

// Defaults chosen with bench/capture (docs/benchmarks.md): a 16 KB fragment makes each sample
// record ~16.5 KB, so 128 data pages (512 KB) hold ~31 samples, and waking the reader at half
// the ring leaves it ~1.5 ms at 10 kHz to run before anything is lost. 128 pages + the metadata
// page is exactly the default kernel.perf_event_mlock_kb (516).
struct SamplingConfig {
    ClockKind clock = ClockKind::kTask;
    uint64_t period_ns = 1'000'000;
    uint32_t stack_bytes = 16384;     // multiple of 8, 8..65528
    uint32_t ring_pages = 128;        // data pages; a power of two
    uint32_t wakeup_bytes = 0;        // watermark; 0 = half the ring
    // Clock ticks in kernel mode are sampled too (exclude_kernel = 0; needs perf_event_paranoid
    // <= 1, CAP_PERFMON or root: see probe_kernel_sampling). Such a sample still carries the user
    // registers and stack as the thread entered the kernel, and a kernel PERF_SAMPLE_IP.
    bool kernel = false;
};

// "100us", "1ms", "10ms", "2s", "500ns", or a bare number of nanoseconds.
Result<uint64_t> parse_interval(std::string_view text);
// kInvalidArgument naming the offending field ("period_ns", "stack_bytes", "ring_pages", ...).
Status validate(const SamplingConfig& config);

// The registers requested with PERF_SAMPLE_REGS_USER; they appear in a sample in the order of
// their bit numbers: AX, BX, BP, SP, IP, R13, R15.
uint64_t sample_regs_user_mask();
// Size in bytes of a sample record for `stack_bytes` of fragment (the kernel always reserves
// the full requested size; dyn_size says how much of it is valid).
size_t sample_record_bytes(uint32_t stack_bytes);

// Whether this process may count kernel-mode ticks of its own threads (opens and closes one
// non-sampling task-clock with exclude_kernel = 0): ok, or kPermission saying what would allow it.
Status probe_kernel_sampling();

// The ring memory this process has mapped for perf events, now and at its peak. The kernel pins it
// (it counts against kernel.perf_event_mlock_kb and RLIMIT_MEMLOCK), and with one ring per thread
// it grows with the number of threads, so the stop summary reports it.
struct RingMemory {
    uint64_t bytes = 0;
    uint64_t rings = 0;
    uint64_t peak_bytes = 0;
    uint64_t peak_rings = 0;   // the rings mapped when the peak was reached
};
RingMemory ring_memory();

// The perf_event_attr a config maps to: disabled, user-only (unless config.kernel), CLOCK_MONOTONIC time stamps,
// sample_id_all (so LOST/THROTTLE records carry tid and time). `inherit` is for per-CPU mode.
perf_event_attr make_attr(const SamplingConfig& config, bool inherit);

// The context-switch event (PERF_COUNT_SW_CONTEXT_SWITCHES) with `config`'s sample layout: every
// switch away from the thread is sampled (period 1). It fires in the scheduler, i.e. in kernel
// context, so it must count kernel events (exclude_kernel = 0, which needs perf_event_paranoid <= 1
// or CAP_PERFMON): with exclude_kernel the kernel drops every one of its samples. REGS_USER and
// STACK_USER still give what the decoder needs, the user registers and stack as the thread entered
// the kernel (the syscall that blocked, or the interrupt that preempted it); PERF_SAMPLE_IP is the
// scheduler's kernel address, which is how switch samples are told from clock samples in a ring
// they share (is_kernel_ip; a clock event excludes the kernel, so its IP is always a user one).
perf_event_attr make_switch_attr(const SamplingConfig& config);
// x86-64 kernel addresses are the upper half of the address space.
inline bool is_kernel_ip(uint64_t ip) { return (ip >> 63) != 0; }

// Maps a failed perf_event_open's errno to an Error that says what to do; `what` names the call
// and its target. Exposed for tools that open events themselves.
Error perf_open_error(int err, std::string what);
// Same for a failed mmap of a perf ring of `ring_bytes`.
Error perf_mmap_error(int err, std::string what, size_t ring_bytes);
// The CPUs currently online (from /sys/devices/system/cpu/online), for per-CPU mode.
Result<std::vector<int>> online_cpus();
// The kernel's CPU list format ("0-3,5,7-8", as in sysfs and /proc/PID/status's
// Cpus_allowed_list), in increasing order as written; empty text gives no CPU.
Result<std::vector<int>> parse_cpu_list(std::string_view list);
// The online CPUs the calling thread may run on (its affinity: taskset, numactl, a container's
// cpuset), which threads it creates inherit. sysfs lists the host's CPUs even inside a container
// limited to a few. Falls back to online_cpus() where the affinity cannot be read.
Result<std::vector<int>> cpus_allowed();

// Counts kept by a ring reader.
struct RingStats {
    uint64_t samples = 0;
    uint64_t lost_records = 0;        // PERF_RECORD_LOST records
    uint64_t lost_samples = 0;        // sum of their counts
    uint64_t throttle = 0;
    uint64_t unthrottle = 0;
    uint64_t other = 0;               // records of other types
    uint64_t malformed = 0;           // records whose size did not match their content
    uint64_t bytes = 0;               // record bytes consumed
    uint64_t stack_bytes = 0;         // sum of the samples' dyn_size (mean fragment = this / samples)
};

// A parsed PERF_RECORD_SAMPLE; `stack` points into the ring or the reader's scratch buffer and
// is valid only during the callback.
struct SampleView {
    uint64_t time_ns = 0;
    uint32_t pid = 0;
    uint32_t tid = 0;
    uint64_t ip = 0;
    bool has_regs = false;            // false when the kernel had no user registers (abi NONE)
    Registers regs;
    const uint8_t* stack = nullptr;   // bytes copied from regs.sp upwards
    uint64_t stack_size = 0;          // dyn_size: the valid bytes
    uint64_t stack_reserved = 0;      // the size asked for; more than stack_size where the copy stopped
};

struct LostView {
    uint64_t time_ns = 0;             // 0 when the record carries no time
    uint32_t tid = 0;
    uint64_t count = 0;
};

struct ThrottleView {
    uint64_t time_ns = 0;
    uint32_t tid = 0;
    bool throttled = true;            // false for UNTHROTTLE
};

class RingHandler {
public:
    virtual ~RingHandler() = default;
    virtual void on_sample(const SampleView& sample) = 0;
    virtual void on_lost(const LostView& lost) = 0;
    // The kernel stopped (or resumed) sampling because sampling took too much CPU time
    // (kernel.perf_cpu_time_max_percent); counted in RingStats either way.
    virtual void on_throttle(const ThrottleView&) {}
};

// The producer and consumer positions of one ring (data_head, data_tail: one cache line of its
// metadata page). A reader that looks at many rings every cycle keeps these side by side and
// drains only the rings that have news, touching nothing else of an idle ring.
class RingPositions {
public:
    RingPositions() = default;
    RingPositions(void* meta_page, const uint8_t* data, size_t data_size)
        : meta_(static_cast<perf_event_mmap_page*>(meta_page)), data_(data), data_size_(data_size) {}
    // The kernel published something since the consumer last moved the tail.
    bool has_news() const;
    // Asks the CPU for the positions' cache line ahead of has_news(): a reader that prefetches
    // every ring's line first has their misses overlap instead of taking them one after another.
    void prefetch() const;
    // Asks the CPU for the first line of the oldest unread record (after has_news() said there is
    // one), so that a reader draining several rings has the next ring's first miss overlap with
    // the current ring's work.
    void prefetch_oldest_record() const;

private:
    perf_event_mmap_page* meta_ = nullptr;
    const uint8_t* data_ = nullptr;
    size_t data_size_ = 0;
};

// Reads a perf mmap ring: acquire-load data_head, hand out records (copied to a scratch buffer
// when one wraps around the end of the ring, in the header or the payload), release-store
// data_tail after each. Works on any memory laid out as a perf ring (tests use synthetic ones).
// It parses the layout that make_attr() requests. One thread drains a given ring at a time.
class RingReader {
public:
    // `base` is the metadata page followed by `data_size` bytes (a power of two) of ring data
    // (at the metadata's data_offset when the kernel set it, else one page after `base`).
    // `sample_stack_bytes` is the configured STACK_USER size, used to size the scratch buffer.
    RingReader(void* base, size_t data_size, uint32_t sample_stack_bytes);
    // Delivers every complete record between data_tail and data_head; returns records consumed.
    // A record whose end lies beyond data_head stays in the ring for a later call.
    size_t drain(RingHandler& handler);
    // Bytes published by the kernel and not yet consumed.
    size_t pending_bytes() const;
    size_t data_size() const { return data_size_; }
    RingPositions positions() const { return RingPositions(base_, data_, data_size_); }
    const RingStats& stats() const { return stats_; }

private:
    const uint8_t* record_bytes(uint64_t offset, size_t size);
    void parse_sample(const uint8_t* record, size_t size, RingHandler& handler);
    void parse_lost(const uint8_t* record, size_t size, RingHandler& handler);
    void parse_throttle(const uint8_t* record, size_t size, bool throttled, RingHandler& handler);

    void* base_;
    const uint8_t* data_;
    size_t data_size_;
    RingStats stats_;
    std::vector<uint8_t> scratch_;
};

// One opened perf event with its ring. Events are created DISABLED: register the fd with a
// RingPoller first, then call enable(), so that no sample is taken before anyone can read it.
// The fd is O_CLOEXEC. Closing (destruction) unmaps the ring and stops sampling.
class PerfEvent {
public:
    // A sampling event for one thread (pid = tid, cpu = -1, inherit = 0).
    static Result<PerfEvent> open_thread(pid_t tid, const SamplingConfig& config);
    // One event for `cpu` sampling thread `pid` and the threads it creates afterwards
    // (inherit = 1; the kernel refuses to mmap an inherited event unless it is per-CPU).
    // Threads that already exist, other than `pid` itself, are not covered.
    static Result<PerfEvent> open_cpu(pid_t pid, int cpu, const SamplingConfig& config);
    // The context-switch event of one thread (make_switch_attr). With `into` (an event of the same
    // thread), its samples go to that event's ring (PERF_EVENT_IOC_SET_OUTPUT) and it has no ring
    // of its own; without, it gets its own ring like open_thread.
    static Result<PerfEvent> open_thread_switches(pid_t tid, const SamplingConfig& config,
                                                  const PerfEvent* into);
    // Opens `attr` as given (for tools and tests that need something make_attr() does not do).
    static Result<PerfEvent> open_attr(const perf_event_attr& attr, pid_t pid, int cpu,
                                       uint32_t ring_pages);

    PerfEvent(PerfEvent&& other) noexcept;
    PerfEvent& operator=(PerfEvent&& other) noexcept;
    PerfEvent(const PerfEvent&) = delete;
    PerfEvent& operator=(const PerfEvent&) = delete;
    ~PerfEvent();

    int fd() const { return fd_; }
    pid_t target() const { return target_; }
    int cpu() const { return cpu_; }
    Status enable();
    Status disable();
    Status set_period(uint64_t period_ns);
    // The event's count so far (read(2), no read_format): for a clock event the nanoseconds of the
    // thread's (or CPU's) time it counted while enabled, whether or not a sample fell due.
    Result<uint64_t> count() const;
    // False for an event whose samples go to another event's ring (open_thread_switches).
    bool has_ring() const { return ring_ != nullptr; }
    RingReader& ring() { return *ring_; }
    const RingReader& ring() const { return *ring_; }

private:
    PerfEvent() = default;
    void close();
    int fd_ = -1;
    pid_t target_ = -1;
    int cpu_ = -1;
    void* map_ = nullptr;
    size_t map_size_ = 0;
    std::unique_ptr<RingReader> ring_;
};

// How promptly the ring-reading thread runs after a wakeup decides what is lost once the sampled
// threads keep every CPU busy: a ring lasts ~3 ms at 10 kHz, while a woken ordinary thread may
// wait for the next scheduler tick (4 ms at HZ=250). See docs/benchmarks.md.
enum class ReaderPriority : uint8_t {
    kRealtime,     // SCHED_FIFO priority 1 (root, CAP_SYS_NICE or RLIMIT_RTPRIO)
    kShortSlice,   // SCHED_OTHER with a 100us slice: EEVDF (Linux 6.12+) lets it preempt on wakeup
    kUnchanged,
};
const char* reader_priority_name(ReaderPriority priority);
// Raises the calling thread, which must sleep in RingPoller::wait() and do little per record
// (a real-time thread that spins starves the machine), to the best priority it may have.
ReaderPriority raise_reader_priority();
// Gives up real time: back to SCHED_OTHER, with the short slice where it may have it.
ReaderPriority lower_reader_priority();
// Whether a real-time reader that used `cpu_ns` of CPU time in `wall_ns` must give it up: busy for
// more than half of a window of at least 100 ms (at 10 us with tiny rings its wake-ups never end,
// and a real-time thread that never sleeps starves the sampled threads on its CPU).
bool reader_too_busy_for_real_time(uint64_t cpu_ns, uint64_t wall_ns);
// Whether a reader that gave real time up for being too busy may take it back: busy for less than a
// quarter of a window of at least 100 ms. The JVM's start is such a burst (the threads' events
// opened, fresh buffers faulted in), after which the reader needs its promptness again while JIT
// compiler threads keep every CPU busy.
bool reader_quiet_enough_for_real_time(uint64_t cpu_ns, uint64_t wall_ns);

// Maps the pages under [p, p + bytes) writable in one system call (MADV_POPULATE_WRITE, Linux 5.14+),
// before the reader copies a fragment into a buffer it just allocated: a page's first write costs
// ~13 us on a paravirtualised guest, populated first ~8.5 us in all (docs/benchmarks.md). Pages
// already there are left as they are; contents never change. False (errno set) where it could not:
// EINVAL from a kernel without the call, ENOMEM or EFAULT for memory that cannot be mapped.
bool populate_for_write(void* p, size_t bytes);

// What wait() learnt about one ring.
struct RingReady {
    uint64_t key = 0;
    bool hung_up = false;   // the thread exited: drain one last time, then close the event
};

// Waits for readable rings with epoll; the key identifies the ring to the caller. add() and
// remove() may be called from other threads while one thread waits.
class RingPoller {
public:
    static Result<RingPoller> create();
    RingPoller(RingPoller&& other) noexcept;
    RingPoller& operator=(RingPoller&& other) noexcept;
    RingPoller(const RingPoller&) = delete;
    RingPoller& operator=(const RingPoller&) = delete;
    ~RingPoller();

    // Without `on_data` the ring is reported only when its thread hangs up, not at its
    // watermark: for a reader that drains it on a schedule fast enough for its fill rate. Its
    // watermark does not wake a waiting wait() either (it waits in a set of its own).
    Status add(int fd, uint64_t key, bool on_data = true);
    // Turns the watermark reports of an added ring on or off.
    Status set_on_data(int fd, bool on_data);
    // Succeeds also when wait() already dropped `fd` because its thread hung up.
    Status remove(int fd);
    // Waits up to timeout_ms (-1 = forever); appends the keys of ready rings. Returns the count
    // (0 on timeout, on wake() and on EINTR). A hung-up ring is reported once, then dropped
    // from the epoll set (it would otherwise be reported ready forever).
    Result<size_t> wait(int timeout_ms, std::vector<uint64_t>& ready_keys);
    Result<size_t> wait(int timeout_ms, std::vector<RingReady>& ready);
    // Makes a concurrent wait() return now (eventfd), e.g. to drain on request or shut down.
    Status wake();

private:
    struct State;
    RingPoller() = default;
    // Appends what epoll set `set` returned in the first `count` of the state's events.
    size_t collect(int set, int count, std::vector<RingReady>& ready);
    std::unique_ptr<State> state_;
};

}  // namespace sf::kernel
