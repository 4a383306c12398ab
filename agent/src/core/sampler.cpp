#include "sampler.hpp"

#include <signal.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "stackfrag/base/clock.hpp"
#include "log.hpp"
#include "own_threads.hpp"
#include "ring_schedule.hpp"
#include "spare_buffers.hpp"
#include "stackfrag/kernel/perf_events.hpp"
#include "stackfrag/kernel/proc_maps.hpp"
#include "stackfrag/profile/coverage.hpp"

namespace sf::agent {

namespace {
constexpr uint64_t kMaxInFlightHoldNs = 1'000'000'000;
// The JVM's start, sampled since the agent's load, is held until VMInit's scan has announced what
// its samples need (Sampler::hold_for_start). On a loaded machine that took more than a second
// (the demo on JDK 25 beside six busy loops: 2.8 s), and the samples released earlier failed for
// want of the VM's layout (no_code_map, 2,648 of ~26,000 samples in one run) or its methods
// (unknown_method). What the hold keeps grows with the JVM's CPU time, not the wait: ~75-100 MB at
// 100 us in mode=cpu however slow the start; the bound is for a start that runs long (another
// agent's VMInit at work), the time limit for one that never ends (a debugger at VMInit).
// A start with the heap pre-touched (-XX:+AlwaysPreTouch: the GC threads fault in every page of
// the heap before VMInit) runs as long as its heap is large: a 4 GB heap took 11-12 s on the 2-CPU
// VM and 24 s of CPU, and with a 10 s limit the held samples went out before the VM's layout and
// failed (no_code_map: 7,400-13,900 of ~23,000 samples, 7,700-17,400 more dropped by the full live
// queue). Past kStartHoldTrimBytes held, each further sample keeps only the top of its fragment
// (kTrimmedStartFragment: the frames that say where the time went), so that the byte bound
// holds four times as many samples as it would whole.
constexpr uint64_t kMaxStartHoldNs = 60'000'000'000;
constexpr uint64_t kMaxStartHoldBytes = 256ull << 20;
constexpr uint64_t kStartHoldTrimBytes = 128ull << 20;   // a start's usual hold at 100 us: 75-100 MB
// One wake-up policy for every ring: the reader runs on its own cadence and drains all rings with
// news in one batch, whatever their number; a ring's watermark (three quarters of it) is only the
// safety valve for a ring that fills faster than the cadence drains it (context-switch samples, a
// reader held up), and a watermark wake-up from a ring that the cadence drains in time anyway is
// waited on without a cycle (quiet_wake). Before, each ring woke the reader at half full, so a service with many busy
// threads woke it per ring, and every wake-up looked at every ring. The cadence is half the time a
// continuously running thread takes to fill its ring (15 ms at 1 kHz with the default ring, 6 ms
// at 10 kHz), so the valve stays shut, and at most 100 ms, which bounds how long the callbacks'
// events wait; the signal sampler's buffer (validate, backend=signal) has no wake-up of its own and
// keeps 10 ms. A cycle finds the reader's data cold (the JVM ran meanwhile): on the 2-CPU VM one
// cost ~80 µs with nothing to read, most of the reader's time at 100/s, so fewer is cheaper.
constexpr uint64_t kCadenceNs = 100'000'000;
constexpr uint64_t kTimerCadenceNs = 10'000'000;
// A mostly idle service pays the cycles and gets nothing for them: on a JVM whose 8 threads wake
// every 100 ms for a little work, the reader ran 193 cycles in 10 s at 1 ms (87 µs each, 16.7 ms,
// half the agent's cost there). After a quiet cycle -- only per-CPU rings (mode=cpu), which wake
// the reader at their watermark (three quarters), each filling at most a quarter of itself per
// cadence, and few events from the callbacks -- the cadence doubles, up to 8 times the usual and
// at most kQuietCadenceMaxNs, as far as the rings leave room for (quiet_room_shift: 2^s cadences'
// worth of data at most half a ring); a cycle that is not quiet goes back to the usual one. A
// ring that fills meanwhile still wakes the reader at its watermark. At 100/s a busy JVM's rings
// fill by a sixth per 100 ms cadence (xalan: 10-20 samples a CPU of ~30 KB each from the kernel),
// so its cycles can come every 200 ms; idle rings let them come every 400 ms. What waits longer
// is the callbacks' events (at most kQuietCadenceMaxNs; more than kQuietEventsMax in a cycle, a
// burst of new code, ends the stretch), the live profile's latest samples and the watcher's look
// for new native threads, which mostly idle code rarely makes. mode=thread keeps its cadence: a thread's
// ring is watched from the reader's next cycle on, and most rings there have no watermark.
constexpr unsigned kMaxQuietShift = 3;
constexpr uint64_t kQuietCadenceMaxNs = 400'000'000;
constexpr size_t kQuietEventsMax = 1024;
constexpr uint64_t kMinCadenceNs = 1'000'000;

uint64_t ring_bytes(const kernel::SamplingConfig& config) {
    return static_cast<uint64_t>(config.ring_pages) * static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
}

kernel::SamplingConfig with_safety_watermark(kernel::SamplingConfig config) {
    if (config.wakeup_bytes == 0) config.wakeup_bytes = static_cast<uint32_t>(ring_bytes(config) / 4 * 3);
    return config;
}

// The cadence for `limit_ns`: no longer than half the time one thread sampling without pause
// takes to fill its ring.
uint64_t cadence_ns(const kernel::SamplingConfig& config, uint64_t limit_ns) {
    const uint64_t records = ring_bytes(config) / std::max<uint64_t>(kernel::sample_record_bytes(config.stack_bytes), 1);
    const uint64_t half_fill_ns = records * config.period_ns / 2;
    return std::max(kMinCadenceNs, std::min(limit_ns, half_fill_ns));
}
// A cycle costs the reader ~60 us on the 2-CPU VM whatever it drains (the wake-up and context
// switch, the epoll calls, a cold line per ring, the callbacks' queue): at 1 kHz on httpserver
// half its time, six samples' worth each (docs/benchmarks.md, 2026-11-28). Half the fill time
// leaves the reader as long again to get to a ring as the cadence itself, which an ordinary
// thread on a loaded machine needs (a scheduler tick or more before it runs). A reader at
// SCHED_FIFO runs within microseconds of its timer and drains a ring within its cycle (~1 ms):
// it keeps this much of the thread's CPU time in hand and waits the rest, 21 ms instead of
// 15.5 ms at 1 kHz with the default ring, a quarter fewer cycles. Faster rates (fill times
// under twice this) keep half their fill time.
constexpr uint64_t kRealtimeSlackNs = 10'000'000;
// Pages for a ring of `stack_bytes` fragments that holds as much time of samples as the configured
// ring holds at the configured size (a power of two, at most `cap`).
uint32_t ring_pages_for(const kernel::SamplingConfig& configured, uint32_t stack_bytes, uint32_t cap) {
    const double scale = static_cast<double>(kernel::sample_record_bytes(stack_bytes)) /
                         static_cast<double>(kernel::sample_record_bytes(configured.stack_bytes));
    uint32_t pages = 1;
    while (pages < cap && pages < scale * configured.ring_pages) pages *= 2;
    return pages;
}
// A ring of fixed `stack_bytes` fragments (the profiler's own threads: 8 bytes) holds at least
// this much of its thread's time at the period: the reader's ring fills while the reader runs one
// cycle, which it cannot drain meanwhile, and at the start (the held samples released at VMInit,
// the threads' events opened) a cycle took 13 ms of CPU at 100 us, more than the 13.6 ms a ring
// scaled from the configured one holds there (4 pages): the reader lost its own samples
// (groundtruth, JDK 17: 9; with record=, whose compression runs in the cycle, 173 and 258 on xalan).
constexpr uint64_t kFixedRingMinNs = 100'000'000;
uint32_t fixed_ring_pages(const kernel::SamplingConfig& configured, uint32_t stack_bytes, uint32_t cap) {
    uint32_t pages = ring_pages_for(configured, stack_bytes, cap);
    const uint64_t samples = kFixedRingMinNs / std::max<uint64_t>(configured.period_ns, 1) + 1;
    const uint64_t bytes = samples * kernel::sample_record_bytes(stack_bytes);
    while (pages < cap && static_cast<uint64_t>(pages) * 4096 < bytes) pages *= 2;
    return pages;
}
constexpr size_t kMaxSpareStacks = 256;
std::vector<int> cpus_or_none(Result<std::vector<int>> cpus) { return cpus.ok() ? std::move(*cpus) : std::vector<int>{}; }
// set_lazy_rings: a small ring holds this many samples at its fragment size, so that a thread
// that runs now and then keeps its samples until the next cycle, and a thread that turns busy
// fills it past the watermark (three quarters), which wakes the reader to grow it, within about
// two samples. With 16 KB fragments that is 16 pages (64 KB) where the automatic ring at 100 us
// is 512 (2 MB): on a JVM with 2,000 mostly idle threads, 8 GB of pinned, zeroed ring memory.
constexpr uint64_t kSmallRingRecords = 3;
}  // namespace

unsigned quiet_room_shift(uint64_t drained, uint64_t ring_bytes, uint64_t elapsed_ns, uint64_t cadence_ns,
                          unsigned max_shift) {
    if (elapsed_ns == 0 || cadence_ns == 0) return 0;
    // drained * cadence / elapsed is a cadence's worth; 2^s of them at most ring_bytes / 2. In
    // long double: a ring's bytes times nanoseconds overflows 64 bits.
    const long double per_cadence = static_cast<long double>(drained) * cadence_ns / elapsed_ns;
    unsigned shift = 0;
    while (shift < max_shift && per_cadence * static_cast<long double>(uint64_t{4} << shift) <= ring_bytes) ++shift;
    return shift;
}

uint64_t reader_cadence_ns(const kernel::SamplingConfig& config, uint64_t limit_ns, bool realtime) {
    const uint64_t half = cadence_ns(config, limit_ns);
    if (!realtime) return half;
    const uint64_t records = ring_bytes(config) / std::max<uint64_t>(kernel::sample_record_bytes(config.stack_bytes), 1);
    const uint64_t fill_ns = records * config.period_ns;
    if (fill_ns < 2 * kRealtimeSlackNs) return half;
    return std::max(half, std::min(limit_ns, fill_ns - kRealtimeSlackNs));
}

namespace {
// set_module_tracker: a rescan of /proc/self/maps costs 0.1-1 ms of the reader. A sample outside
// every mapping found after a fresh scan (its library unmapped since) doubles the gap up to the max.
constexpr uint64_t kMinRescanGapNs = 20'000'000;
constexpr uint64_t kMaxRescanGapNs = 1'000'000'000;
// Errors that will not go away for the next thread either: stop trying after the first. A thread
// that exited before its event was opened (ESRCH) says nothing about the next one.
bool is_persistent(const Error& error) {
    return error.code == Errc::kPermission || error.code == Errc::kUnsupported ||
           (error.code == Errc::kInvalidArgument && error.sys_errno != ESRCH);
}
}  // namespace

enum class Sampler::RequestKind : uint8_t { kOpen, kEnd, kPeriod, kStack, kEndCpus, kWait, kClock };

namespace {
// Ring memory running out: how often the reader looks at which threads ran (a system call per
// thread, ring holders and waiting ones), and so how long a busy thread refused a ring waits.
constexpr uint64_t kScheduleWindowNs = 200'000'000;
// At most this many idle threads' rings make room for one busy thread's (a full ring is several
// small ones).
constexpr int kMaxTakesPerOpen = 16;
}  // namespace

struct Sampler::Request {
    using Kind = RequestKind;
    Kind kind = Kind::kOpen;
    pid_t tid = 0;
    std::unique_ptr<kernel::PerfEvent> event;      // owns the ring: the clock event, else the switch event
    std::unique_ptr<kernel::PerfEvent> switches;   // a switch event writing into `event`'s ring
    bool clock = true;                             // `event` is a clock event
    bool takes_switches = false;                   // the ring receives switch samples
    bool enable_on_open = false;   // opened before the reader ran: nobody could have read it
    uint64_t period_ns = 0;        // kPeriod
    uint32_t stack_bytes = 0;      // kStack; kOpen: the size opened (0: the configured one)
    uint32_t ring_pages = 0;       // kOpen with another size: the ring's pages
    bool fixed_stack = false;      // kOpen: stack_bytes is for good (add_thread's fixed_stack_bytes)
    bool small_ring = false;       // kOpen: a small ring (set_lazy_rings), ring_pages its size
    uint64_t posted_ns = 0;        // when post() queued it
    uint64_t cpu_at_open_ns = 0;   // kOpen: the thread's CPU time as its event opened
    uint64_t stack_top = 0;        // kOpen: the thread's stack top, when it registered itself (else 0)
    // kOpen: from before the event is enabled until the reader has added its ring, the ring's
    // samples are nowhere the reader looks; this keeps it from releasing past them meanwhile.
    std::unique_ptr<EventQueue::InFlight> not_yet_read;
};

struct Sampler::Ring {
    pid_t tid = 0;   // 0 for a per-CPU event
    std::unique_ptr<kernel::PerfEvent> event;
    std::unique_ptr<kernel::PerfEvent> switches;
    bool clock = true;
    bool takes_switches = false;
    uint32_t stack_bytes = 0;   // 0: the configured size
    uint32_t ring_pages = 0;    // 0: the configured size
    bool fixed_stack = false;   // opened with its own fragment size, which stack=auto leaves alone
    bool small_ring = false;    // set_lazy_rings: not grown to the full size yet
    uint64_t period_ns = 0;     // 0: the configured period (interval=auto changes it)
    bool period_changed = false;   // this event's period was changed (its ticks mix two periods)
    uint64_t cpu_at_open_ns = 0;   // the thread's CPU time as its clock event opened
    uint64_t stack_top = 0;        // the thread's stack top (0: unknown), see Converter::on_sample
    uint64_t copied_end = 0;       // a thread ring's: the highest end of its thread's copies so far
    // Ring memory running out (schedule_rings): when the ring opened, the thread's CPU time at the
    // last look, and how many looks in a row found it had not run a period.
    uint64_t opened_ns = 0;
    uint64_t cpu_at_look_ns = 0;
    uint32_t idle_looks = 0;
    SampleWatchCache watch_cache;   // the sample watch's facts of the thread (not of a per-CPU ring)
    Status enable() {
        Status enabled = event->enable();
        if (enabled.ok() && switches) enabled = switches->enable();
        return enabled;
    }
    void disable() {
        if (switches) (void)switches->disable();
        (void)event->disable();
    }
};

// Turns ring records into events for the reorder buffer, reusing the stack buffers of samples
// already written.
class Sampler::Converter final : public kernel::RingHandler {
public:
    explicit Converter(Sampler& sampler) : sampler_(sampler) {}
    void begin(Ring& ring, uint64_t now_ns) {
        ring_tid_ = ring.tid;
        now_ns_ = now_ns;
        takes_switches_ = ring.takes_switches;
        // Thread rings too: a thread's top may have come down to where its walks stop reading
        // (StackCutLearner, on the decoder thread). The copy holds still for the drain, so a
        // thread ring's own top is looked up once here, not per sample.
        if (sampler_.stack_tops_ != nullptr) sampler_.stack_tops_copy_.refresh(*sampler_.stack_tops_);
        stack_top_ = 0;
        if (ring.tid != 0) {
            const uint64_t shared = sampler_.stack_tops_copy_.top_of(static_cast<uint32_t>(ring.tid));
            stack_top_ = ring.stack_top == 0 ? shared : shared == 0 ? ring.stack_top : std::min(shared, ring.stack_top);
        }
        watch_cache_ = ring.tid != 0 ? &ring.watch_cache : nullptr;
        ring_ = &ring;
    }

    void on_sample(const kernel::SampleView& view) override {
        // Built in its reorder slot: nothing below adds to the reorder buffer.
        Sample& sample = sampler_.reorder_.add_sample(view.time_ns, now_ns_);
        sample.time_ns = view.time_ns;
        sample.pid = view.pid;
        sample.tid = view.tid;
        // A clock event that shares its ring with a switch event excludes the kernel (the agent
        // asks so), and the switch event samples in the scheduler: a kernel IP tells its samples
        // apart (make_switch_attr). Otherwise a kernel IP is a clock tick in kernel mode.
        const bool in_kernel = kernel::is_kernel_ip(view.ip);
        sample.source = !in_kernel        ? SampleSource::kPerf
                        : takes_switches_ ? SampleSource::kPerfSwitch
                                          : SampleSource::kPerfKernel;
        sample.regs = view.regs;
        if (sample.regs.ip == 0 && !kernel::is_kernel_ip(view.ip)) sample.regs.ip = view.ip;
        sample.stack_sp = sample.regs.sp;
        // Only the bytes the kernel wrote (dyn_size), into a buffer of a whole number of pages and
        // of at least the default fragment: buffers then come in a few sizes, a recycled one
        // mostly fits the next sample whatever its depth, and the allocator finds a freed one that
        // fits exactly instead of sorting its bins for every sample of its own size.
        // The kernel copies the configured size from sp up whatever lies above the thread's stack:
        // its thread descriptor, then the next mapping where the kernel merged it with this one
        // (thread stacks side by side). Nothing the decoder unwinds lies at or above the top, so a
        // thread whose top is known keeps only the bytes below it; a recording stores the same
        // fragment. On httpserver the workers' fragments shrink from ~16 KB to the few KB their
        // stacks use: less to copy here, to hand over, to store and to compress.
        // A per-CPU ring's samples are of every thread: their tops come from the threads that
        // registered themselves (Java threads at their start, the reader itself). Once the live
        // decoder has walked a thread's stack to its first frame, its top is where that walk
        // stopped reading (StackCutLearner): no thread descriptor or TLS above start_thread (~4 KB
        // a sample), nor the next thread's stack where the kernel merged the two mappings (up to
        // 59 KB on GC threads).
        size_t bytes = view.stack_size;
        const uint64_t top = ring_tid_ != 0 && static_cast<pid_t>(view.tid) == ring_tid_
                                 ? stack_top_
                                 : sampler_.stack_tops_copy_.top_of(view.tid);
        if (top != 0 && sample.stack_sp < top && top - sample.stack_sp < bytes) {
            bytes = static_cast<size_t>(top - sample.stack_sp);
        }
        if (bytes > kTrimmedStartFragment && sampler_.start_hold_.load(std::memory_order_relaxed) &&
            sampler_.stack_bytes_kept_ - sampler_.stack_bytes_released_ >= kStartHoldTrimBytes) {
            bytes = kTrimmedStartFragment;
            sampler_.start_fragments_trimmed_.fetch_add(1, std::memory_order_relaxed);
        }
        sampler_.stack_bytes_written_ += view.stack_size;
        sampler_.stack_bytes_kept_ += bytes;
        // The kernel's copy cannot take a fault: it stops at the first page with no page-table
        // entry, which inside a live stack is a page of frames never written (a large local
        // array: JDK 25's C2 thread generating its stubs at the start; 57 samples in 14 ms, each
        // ending 12 KB below its top, failed). Below the thread's known top the copy's end is
        // such a hole, not the stack's end, and so is one below where an earlier copy of the
        // thread's own ring reached: reading the page makes it readable to the next copies.
        // (A per-CPU ring's threads have theirs in a map: from the agent's load until VMInit every
        // thread is sampled so, the JVM's start with it.)
        const bool own_ring = ring_tid_ != 0 && static_cast<pid_t>(view.tid) == ring_tid_;
        if (const uint64_t end = sample.stack_sp + view.stack_size; view.stack_size != 0) {
            uint64_t* copied_end = nullptr;
            if (own_ring) {
                copied_end = &ring_->copied_end;
            } else {
                if (sampler_.copied_ends_.size() >= kMaxCopiedEnds) sampler_.copied_ends_.clear();
                copied_end = &sampler_.copied_ends_[view.tid];
            }
            const uint64_t known = top != 0 ? top : *copied_end;
            if (view.stack_size < view.stack_reserved && (end & 4095) == 0 && end < known &&
                end != sampler_.last_stack_hole_) {
                sampler_.last_stack_hole_ = end;
                if (kernel::fault_in_readable(end)) sampler_.stack_holes_faulted_.fetch_add(1, std::memory_order_relaxed);
            }
            *copied_end = std::max(*copied_end, end);
        }
        const size_t buffer_size = fragment_buffer_bytes(bytes);
        if (!take_spare(sampler_.spare_stacks_, buffer_size, sample.stack)) {
            (void)sampler_.writer_.spare_stack(sample.stack, buffer_size);   // one the live decoder is done with
        }
        if (sample.stack.capacity() < buffer_size) {
            sample.stack.reserve(buffer_size);
            // A new allocation: at the JVM's start, while the decoder thread meets everything for
            // the first time, the backlog goes into a few thousand pages never touched before.
            if (sampler_.populate_fresh_buffers_ && !kernel::populate_for_write(sample.stack.data(), bytes) &&
                errno == EINVAL) {
                sampler_.populate_fresh_buffers_ = false;   // a kernel before 5.14: not asked again
            }
        }
        // The copy's source is cold ring memory and its destination a buffer last touched on
        // the decoder's CPU: each page starts with a TLB miss that the hardware prefetcher does
        // not cross. Asked for at once, the pages' first lines arrive while the copy runs.
        for (size_t at = 4096; at < bytes; at += 4096) {
            __builtin_prefetch(view.stack + at);
            __builtin_prefetch(sample.stack.data() + at, 1);
        }
        sample.stack.assign(view.stack, view.stack + bytes);
        sampler_.hold_back_.late(view.time_ns, sampler_.released_until_, now_ns_);
        if (sampler_.sample_watch_) {
            sampler_.sample_watch_(sample, static_cast<pid_t>(sample.tid) == ring_tid_ ? watch_cache_ : nullptr);
        }
        if (!in_kernel && sample.regs.ip != 0) sampler_.check_code(sample.regs.ip, sample.time_ns, now_ns_);
    }

    void on_lost(const kernel::LostView& view) override {
        Lost lost;
        lost.time_ns = view.time_ns != 0 ? view.time_ns : now_ns_;
        lost.tid = view.tid != 0 ? view.tid : static_cast<uint32_t>(ring_tid_);
        lost.count = view.count;
        sampler_.reorder_.add(std::move(lost), now_ns_);
    }

private:
    Sampler& sampler_;
    pid_t ring_tid_ = 0;
    uint64_t now_ns_ = 0;
    bool takes_switches_ = false;
    uint64_t stack_top_ = 0;
    SampleWatchCache* watch_cache_ = nullptr;
    Ring* ring_ = nullptr;   // the ring begin() was given
};

Sampler::Sampler(const kernel::SamplingConfig& config, EventQueue& queue, StreamWriter& writer,
                 OracleSampler* oracle)
    : config_(with_safety_watermark(config)),
      queue_(queue),
      writer_(writer),
      oracle_(oracle),
      requests_(64),
      // Taken here, in the thread that loads the agent, whose affinity every JVM thread inherits.
      cpus_(cpus_or_none(kernel::cpus_allowed())),
      converter_(std::make_unique<Converter>(*this)) {}

Sampler::~Sampler() {
    if (!stopped_) stop(1000);
    Request* request = nullptr;
    while (requests_.pop(request)) delete request;
    delete open_error_.load();
}

Status Sampler::start() {
    started_ns_ = monotonic_ns();
    Result<kernel::RingPoller> poller = kernel::RingPoller::create();
    if (!poller.ok()) return std::move(poller).take_error();
    poller_.emplace(std::move(poller).value());

    // Asynchronous signals (SIGPROF of the oracle, SIGQUIT, ...) are for the JVM's threads; faults
    // stay deliverable so that a bug in the reader still produces the JVM's crash report.
    const int created = create_own_thread(&reader_, &Sampler::reader_main, this, "stackfrag-read");
    if (created != 0) return sys_error(Errc::kResourceLimit, created, "pthread_create(reader thread)");
    reader_started_.store(true, std::memory_order_release);
    return {};
}

void* Sampler::reader_main(void* self) {
    static_cast<Sampler*>(self)->run();
    return nullptr;
}

uint64_t Sampler::reader_cpu_now() const {
    const pid_t tid = reader_tid_.load(std::memory_order_acquire);
    return tid != 0 ? thread_cpu_ns_of(tid) : reader_cpu_ns_.load(std::memory_order_relaxed);
}

void Sampler::run() {
    reader_tid_.store(static_cast<pid_t>(syscall(SYS_gettid)), std::memory_order_release);
    // A ring lasts ~30 samples (half of that between two cycles): an ordinary reader that a loaded
    // machine keeps off the CPU for longer loses the rest, CPU time the kernel counted and no stack
    // explains (xalan, 1 ms, load ~10: 2.6 % of the process's CPU time lost in full rings). The
    // reader does bounded work per cycle and sleeps in epoll between them, so a real-time priority
    // (root, CAP_SYS_NICE, RLIMIT_RTPRIO), else a short EEVDF slice, costs the JVM nothing but
    // promptness; bench/capture: 0 lost at SCHED_FIFO 1 where an ordinary reader lost 0.3-3.5 %.
    if (realtime_reader_) reader_priority_.store(kernel::raise_reader_priority(), std::memory_order_relaxed);
    // Per-CPU rings sample the reader too: its fragments end at its stack's top like a Java thread's.
    const auto reader_tid = static_cast<uint32_t>(syscall(SYS_gettid));
    if (stack_tops_ != nullptr) {
        stack_tops_->remember(reader_tid, kernel::current_thread_stack_top(), monotonic_ns(), /*exact=*/true);
    }
    // Events opened before the start wait for the reader to enable them (enable_on_open): now, not
    // after the first cycle's wait (a whole cadence, 50-100 ms), which the threads ran unsampled:
    // at OnLoad that was the busiest part of the JVM's start, counted as time while sampling.
    apply_requests();
    uint64_t window_start = monotonic_ns(), window_cpu = thread_cpu_ns();
    const uint64_t with_timer = cadence_ns(config_, kTimerCadenceNs);
    const uint64_t rings_only = cadence_ns(config_, kCadenceNs);
    const uint64_t rings_only_realtime = reader_cadence_ns(config_, kCadenceNs, true);
    drains_began_ns_ = monotonic_ns();
    for (;;) {
        // Rings placed by needs_data_wakeups() hold at least twice rings_only (or have their
        // watermark), so the longer real-time cadence still leaves kRealtimeSlackNs of each
        // thread's CPU time in hand; a reader that gave up real-time priority is back at half.
        const bool realtime = reader_priority_.load(std::memory_order_relaxed) == kernel::ReaderPriority::kRealtime;
        const uint64_t cadence = oracle_.load(std::memory_order_acquire) != nullptr ? with_timer
                                 : realtime                                          ? rings_only_realtime
                                                                                     : rings_only;
        cadence_ns_.store(cadence, std::memory_order_relaxed);
        // The cadence reported is the usual one; a quiet stretch lengthens this wait only.
        uint64_t wait = cadence;
        if (quiet_shift_ != 0 && oracle_.load(std::memory_order_acquire) == nullptr) {
            wait = std::max(cadence, std::min(cadence << quiet_shift_, kQuietCadenceMaxNs));
            if (wait > cadence) ++lengthened_cycles_;
        }
        // The cadence counts from the last cycle's drains, not from its end: a ring fills from the
        // moment it was read, and a cycle that writes out a large batch (the first ones fault in
        // fresh buffers: 13 ms for 64 KB fragments at 1 ms) otherwise put its time on top of the
        // cadence. With the real-time cadence's 10 ms of slack, that lost records: the next drain
        // came 34 ms after the last one, to a ring that holds 31. A quarter of the cadence is still
        // waited after every cycle, so that cycles longer than the cadence never run back to back.
        const uint64_t now = monotonic_ns();
        const uint64_t due = std::max(now + cadence / 4, drains_began_ns_ + wait);
        const int timeout_ms = static_cast<int>((due - now + 999'999) / 1'000'000);
        if (!run_cycle(timeout_ms, due)) break;
        ++cycles_;
        quiet_shift_ = std::min(quiet_shift_ + 1, quiet_room_);   // 0: the cycle was not quiet
        // The thread's CPU clock is a system call: read once per window (the verdict needs a whole one).
        if (const uint64_t at = monotonic_ns(); at - window_start >= 100'000'000) {
            const kernel::ReaderPriority priority = reader_priority_.load(std::memory_order_relaxed);
            if (priority == kernel::ReaderPriority::kRealtime || busy_lowered_) {
                const uint64_t cpu = thread_cpu_ns();
                review_priority(priority, cpu - window_cpu, at - window_start);
                window_start = at;
                window_cpu = cpu;
            }
        }
        // A cycle that a watermark or wake() brought early leaves the schedule as it was.
        if (monotonic_ns() < due) ++early_cycles_;
    }
    published_cycles_.store(cycles_, std::memory_order_relaxed);
    published_early_cycles_.store(early_cycles_, std::memory_order_relaxed);
    published_quiet_wakes_.store(quiet_wakes_, std::memory_order_relaxed);
    published_lengthened_cycles_.store(lengthened_cycles_, std::memory_order_relaxed);
    published_ring_looks_.store(ring_looks_, std::memory_order_relaxed);
    published_ring_drains_.store(ring_drains_, std::memory_order_relaxed);
    published_stack_bytes_written_.store(stack_bytes_written_, std::memory_order_relaxed);
    published_stack_bytes_kept_.store(stack_bytes_kept_, std::memory_order_relaxed);
    published_late_samples_.store(hold_back_.late_samples(), std::memory_order_relaxed);
    published_late_max_delay_ns_.store(hold_back_.max_delay_ns(), std::memory_order_relaxed);
    published_holdback_ns_.store(hold_back_.ns(), std::memory_order_relaxed);
    waiting_at_stop_.store(waiting_.size(), std::memory_order_relaxed);
    reader_cpu_ns_.store(thread_cpu_ns());
    reader_tid_.store(0, std::memory_order_release);
    reader_page_faults_.store(thread_page_faults());
    if (stack_tops_ != nullptr) stack_tops_->forget(reader_tid, monotonic_ns());
}

Status Sampler::record_open_failure(Error error) {
    open_failures_.fetch_add(1, std::memory_order_relaxed);
    if (!is_persistent(error)) {
        if (error.code == Errc::kResourceLimit) {
            // No more ring memory may be locked: every thread after this one fails alike until a
            // ring closes. A service with hundreds of threads got a warning per thread; now one, and
            // the count in the stop summary.
            if (ring_limit_failures_.fetch_add(1, std::memory_order_relaxed) == 0) {
                SF_LOG_WARN("cannot sample a thread: %s; threads refused a ring from now on wait for one (the "
                            "reader gives them the rings of threads that stopped running) and are counted in the "
                            "stop summary, not logged one by one",
                            error.describe().c_str());
            } else {
                SF_LOG_DEBUG("cannot sample a thread: %s", error.describe().c_str());
            }
            return error;
        }
        SF_LOG(error.sys_errno == ESRCH ? LogLevel::kDebug : LogLevel::kWarn, "cannot sample a thread: %s",
               error.describe().c_str());
        return error;
    }
    auto* stored = new Error(error);
    Error* expected = nullptr;
    if (open_error_.compare_exchange_strong(expected, stored)) {
        open_failed_.store(true, std::memory_order_release);
        if (fallback_available_.load()) {
            SF_LOG_DEBUG("perf events are denied: %s", error.describe().c_str());
        } else {
            SF_LOG_ERROR("sampling is off, the JVM runs on without it: %s", error.describe().c_str());
        }
    } else {
        delete stored;
    }
    return error;
}

std::optional<Error> Sampler::open_error() const {
    const Error* error = open_error_.load(std::memory_order_acquire);
    return error != nullptr ? std::optional<Error>(*error) : std::nullopt;
}

Status Sampler::open_switches(pid_t tid, const kernel::SamplingConfig& config, Request& request) {
    if (!switch_events_ || switches_failed_.load(std::memory_order_acquire)) return {};
    Result<kernel::PerfEvent> event = kernel::PerfEvent::open_thread_switches(tid, config, request.event.get());
    if (!event.ok()) {
        Error error = std::move(event).take_error();
        if (error.sys_errno == ESRCH) return error;   // the thread is gone: nothing to sample
        if (!switches_failed_.exchange(true)) {
            SF_LOG_ERROR("off-CPU sampling (events=switch) is off, %s: %s",
                         request.event ? "on-CPU sampling goes on" : "nothing is sampled",
                         error.describe().c_str());
        }
        return request.event ? Status{} : Status(error);
    }
    auto opened = std::make_unique<kernel::PerfEvent>(std::move(event).value());
    if (request.event) {
        request.switches = std::move(opened);
    } else {
        request.event = std::move(opened);
        request.clock = false;
    }
    request.takes_switches = true;
    return {};
}

// The configuration for fragments of `bytes` (stack=auto's sizes): as much time of samples as the
// configured ring holds at the configured size, the pages growing with the record up to 4 MB (or
// the configured ring, if larger).
kernel::SamplingConfig Sampler::grown_config(uint32_t bytes, uint32_t max_pages) const {
    kernel::SamplingConfig config = config_;
    config.stack_bytes = bytes;
    config.ring_pages = std::max(config_.ring_pages, ring_pages_for(config_, bytes, std::max(config_.ring_pages, max_pages)));
    return config;
}

// The thread's clock event (if clock events are on) and switch event for `config`; on failure the
// request holds neither.
Status Sampler::open_events(pid_t tid, const kernel::SamplingConfig& config, Request& request) {
    Status opened;
    if (clock_events_) {
        Result<kernel::PerfEvent> event = kernel::PerfEvent::open_thread(tid, config);
        if (event.ok()) {
            request.event = std::make_unique<kernel::PerfEvent>(std::move(event).value());
        } else {
            opened = std::move(event).take_error();
        }
    }
    if (opened.ok()) opened = open_switches(tid, config, request);
    if (!opened.ok() || !request.event) {
        request.switches.reset();
        request.event.reset();
        request.clock = true;
        request.takes_switches = false;
        if (opened.ok()) opened = make_error(Errc::kInvalidArgument, "no event to sample thread " + std::to_string(tid));
    }
    return opened;
}

Status Sampler::add_thread(pid_t tid, uint32_t fixed_stack_bytes, uint32_t start_stack_bytes, bool started_vm) {
    if (open_failed_.load(std::memory_order_acquire)) return *open_error();
    auto request = std::make_unique<Request>();
    request->kind = Request::Kind::kOpen;
    request->tid = tid;
    request->not_yet_read = std::make_unique<EventQueue::InFlight>(queue_);
    request->cpu_at_open_ns = thread_cpu_ns_of(tid);
    if (tid == static_cast<pid_t>(syscall(SYS_gettid))) request->stack_top = kernel::current_thread_stack_top();
    kernel::SamplingConfig config = config_;
    std::optional<Error> large_refused;
    // The VM's starting thread is busy from the first moment: it opens at the full size. A ring
    // with switch samples (events=switch) opens small too: a parked thread switches once per wake-up,
    // and one that switches often fills it within a few switches, which wakes the reader at once
    // (such a ring never waits for the cadence) to grow it.
    const bool small = lazy_rings_ && fixed_stack_bytes == 0 && !started_vm;
    if (fixed_stack_bytes != 0) {
        if (!clock_events_) return {};   // off-CPU samples only: nothing to take for this thread
        config.stack_bytes = fixed_stack_bytes;
        config.ring_pages = fixed_ring_pages(config_, fixed_stack_bytes, std::max<uint32_t>(config_.ring_pages, 1024));
        config.wakeup_bytes = 0;
        config = with_safety_watermark(config);
        request->stack_bytes = fixed_stack_bytes;
        request->ring_pages = config.ring_pages;
        request->fixed_stack = true;
    } else if (start_stack_bytes > config_.stack_bytes && clock_events_ &&
               !stack_growth_failed_.load(std::memory_order_relaxed)) {
        // stack=auto's start size for a thread known to run deep: opened as set_stack would reopen
        // it (the same size, ring and watermark), one open and mmap less than opening it at the
        // configured size and reopening it at once.
        // The VM's starting thread runs through the reader's longest cycles (at 100 us, 13 ms of
        // CPU where the held samples are released and the threads' events opened): its ring holds
        // the configured ring's time (65528-byte fragments are ~4 times the size of 16384-byte ones).
        kernel::SamplingConfig large =
            small ? small_config(start_stack_bytes)
                  : grown_config(start_stack_bytes, started_vm ? std::min<uint32_t>(4 * config_.ring_pages, 65536) : 1024);
        Status opened = open_events(tid, large, *request);
        if (!opened.ok() && opened.error().sys_errno != ESRCH && !small && large.ring_pages != config_.ring_pages) {
            // The larger ring may be over perf_event_mlock_kb: the configured ring's size may still do.
            large.ring_pages = config_.ring_pages;
            if (kernel::validate(large).ok() && open_events(tid, large, *request).ok()) opened = Status{};
        }
        if (opened.ok()) {
            config = large;
            request->stack_bytes = large.stack_bytes;
            request->ring_pages = large.ring_pages;
            request->small_ring = small;
        } else if (opened.error().sys_errno != ESRCH) {
            large_refused = std::move(opened).take_error();
        }
    }
    if (!request->event && small) {   // the ring the clock event (or, without one, the switch event) opens
        config = small_config(config_.stack_bytes);
        request->ring_pages = config.ring_pages;
        request->small_ring = true;
    }
    if (!request->event && clock_events_) {
        Result<kernel::PerfEvent> event = kernel::PerfEvent::open_thread(tid, config);
        if (!event.ok()) {
            Error error = std::move(event).take_error();
            if (error.code == Errc::kResourceLimit && fixed_stack_bytes == 0) wait_for_ring(tid);
            return record_open_failure(std::move(error));
        }
        request->event = std::make_unique<kernel::PerfEvent>(std::move(event).value());
    }
    if (fixed_stack_bytes == 0 && !request->takes_switches) {
        if (Status switches = open_switches(tid, config, *request); !switches.ok()) {
            return clock_events_ ? switches : record_open_failure(std::move(switches).take_error());
        }
    }
    if (!request->event) return make_error(Errc::kInvalidArgument, "no event to sample thread " + std::to_string(tid));
    if (large_refused && !stack_growth_failed_.exchange(true, std::memory_order_relaxed)) {
        SF_LOG_WARN("stack=auto: cannot open thread %d's events with %u-byte fragments, so no thread's fragment grows "
                    "beyond %u bytes (raise kernel.perf_event_mlock_kb or ulimit -l, or give ring= smaller): %s",
                    tid, start_stack_bytes, config_.stack_bytes, large_refused->describe().c_str());
    }
    Status enabled = enable_or_defer(*request);
    if (!enabled.ok()) return record_open_failure(std::move(enabled).take_error());
    // No wake(): the reader adds the ring at its next cycle, well before the ring can fill, and a
    // service that starts threads often does not make it look at every other ring each time.
    requests_.push(request.release());
    threads_opened_.fetch_add(1, std::memory_order_relaxed);
    return {};
}

Status Sampler::add_cpus(pid_t tid) {
    if (open_failed_.load(std::memory_order_acquire)) return *open_error();
    // Only the CPUs the JVM may run on (cpus_): a container limited to 4 of a host's 64 CPUs would
    // otherwise pin 60 rings that no thread of it ever writes.
    if (cpus_.empty()) {
        Result<std::vector<int>> allowed = kernel::cpus_allowed();   // why they could not be read
        return record_open_failure(allowed.ok() ? make_error(Errc::kInternal, "no CPU to sample on")
                                                : std::move(allowed).take_error());
    }
    int opened = 0;
    std::optional<Error> last_error;
    for (int cpu : cpus_) {
        Result<kernel::PerfEvent> event = kernel::PerfEvent::open_cpu(tid, cpu, config_);
        if (!event.ok()) {
            last_error = std::move(event).take_error();
            if (is_persistent(*last_error)) break;
            continue;   // a CPU that went offline meanwhile
        }
        auto request = std::make_unique<Request>();
        request->kind = Request::Kind::kOpen;
        request->tid = 0;
        request->event = std::make_unique<kernel::PerfEvent>(std::move(event).value());
        if (!enable_or_defer(*request).ok()) continue;
        requests_.push(request.release());
        threads_opened_.fetch_add(1, std::memory_order_relaxed);
        ++opened;
    }
    if (opened == 0 && last_error) return record_open_failure(std::move(*last_error));
    return {};
}

Status Sampler::enable_or_defer(Request& request) {
    if (!reader_started_.load(std::memory_order_acquire)) {
        request.enable_on_open = true;
        return {};
    }
    Status enabled = request.event->enable();
    if (enabled.ok() && request.switches) enabled = request.switches->enable();
    return enabled;
}

void Sampler::end_thread(pid_t tid) {
    auto* request = new Request;
    request->kind = Request::Kind::kEnd;
    request->tid = tid;
    requests_.push(request);   // closed at the reader's next cycle (no wake-up, as for add_thread)
}

void Sampler::end_cpus() { post(Request::Kind::kEndCpus, 0, 0, 0); }

void Sampler::account_by_clock(pid_t tid) {
    auto* request = new Request;
    request->kind = Request::Kind::kClock;
    request->tid = tid;
    requests_.push(request);   // from the reader's next cycle (no wake-up, as for add_thread)
}

// What a kThreadClock sample's ip points at, so that the profile names it: a function of its own,
// which nothing calls.
extern "C" __attribute__((noinline, used)) void stackfrag_thread_cpu_by_clock() { __asm__ volatile(""); }

void Sampler::sample_clocks(uint64_t now_ns) {
    const uint64_t period = std::max<uint64_t>(config_.period_ns, 1);
    const uint64_t ip = reinterpret_cast<uint64_t>(&stackfrag_thread_cpu_by_clock);
    const auto pid = static_cast<uint32_t>(getpid());
    for (size_t i = 0; i < clock_threads_.size();) {
        ClockThread& t = clock_threads_[i];
        const std::optional<uint64_t> alive = thread_cpu_ns_if_alive(t.tid);
        if (!alive) {   // ended (its last partial period goes unseen, as a perf event's would)
            clock_threads_[i] = clock_threads_.back();
            clock_threads_.pop_back();
            continue;
        }
        const uint64_t cpu = *alive;
        const uint64_t periods = cpu > t.counted_ns ? (cpu - t.counted_ns) / period : 0;
        if (periods != 0) {
            // Spread over the time since the last look, as the thread's own event would have spread them.
            const uint64_t span = now_ns > t.last_ns ? now_ns - t.last_ns : 0;
            for (uint64_t k = 1; k <= periods; ++k) {
                const uint64_t time = t.last_ns + span * k / periods;
                Sample& sample = reorder_.add_sample(time, now_ns);
                sample.time_ns = time;
                sample.pid = pid;
                sample.tid = static_cast<uint32_t>(t.tid);
                sample.source = SampleSource::kThreadClock;
                sample.regs = Registers{};
                sample.regs.ip = ip;
                sample.stack_sp = 0;
                sample.stack.clear();
            }
            t.counted_ns += periods * period;
            clock_samples_.fetch_add(periods, std::memory_order_relaxed);
        }
        t.last_ns = now_ns;
        ++i;
    }
}

void Sampler::wait_for_ring(pid_t tid) {
    memory_short_.store(true, std::memory_order_relaxed);
    auto* request = new Request;
    request->kind = Request::Kind::kWait;
    request->tid = tid;
    requests_.push(request);   // the reader's next cycle; its schedule looks every kScheduleWindowNs
}

void Sampler::request_period(pid_t tid, uint64_t period_ns) { post(Request::Kind::kPeriod, tid, period_ns, 0); }

void Sampler::request_stack(pid_t tid, uint32_t bytes) { post(Request::Kind::kStack, tid, 0, bytes); }

// Applied at once, not at the next idle poll (50 ms at slow rates).
void Sampler::post(RequestKind kind, pid_t tid, uint64_t period_ns, uint32_t stack_bytes) {
    auto* request = new Request;
    request->kind = kind;
    request->tid = tid;
    request->period_ns = period_ns;
    request->stack_bytes = stack_bytes;
    request->posted_ns = monotonic_ns();
    requests_.push(request);
    wake();
}

void Sampler::wake() {
    if (reader_started_.load(std::memory_order_acquire)) (void)poller_->wake();
}

void Sampler::open_ring(Request& request) {
    std::unique_ptr<kernel::PerfEvent> event = std::move(request.event);
    const pid_t tid = request.tid;
    const uint64_t key = next_key_++;
    auto ring = std::make_unique<Ring>();
    ring->tid = tid;
    ring->event = std::move(event);
    ring->switches = std::move(request.switches);
    ring->clock = request.clock;
    ring->takes_switches = request.takes_switches;
    ring->fixed_stack = request.fixed_stack;
    ring->small_ring = request.small_ring;
    if (ring->small_ring) small_rings_.fetch_add(1, std::memory_order_relaxed);
    ring->stack_bytes = request.stack_bytes;
    ring->ring_pages = request.ring_pages;
    ring->cpu_at_open_ns = request.cpu_at_open_ns;
    ring->stack_top = request.stack_top;
    ring->opened_ns = monotonic_ns();
    ring->cpu_at_look_ns = request.cpu_at_open_ns;
    if (!ring->fixed_stack && ring->stack_bytes != 0) {
        SF_LOG_DEBUG("stack=auto: thread %d samples %u bytes of stack from its start (ring %u pages)", tid,
                     ring->stack_bytes, ring->ring_pages);
    }
    if (poller_) {
        Status added = poller_->add(ring->event->fd(), key, needs_data_wakeups(*ring));
        if (!added.ok()) SF_LOG_WARN("cannot wait on the ring of thread %d: %s", tid, added.error().describe().c_str());
    }
    if (tid != 0) {
        // A tid reused after a missed ThreadEnd: the old event can only be stale.
        auto previous = ring_of_tid_.find(tid);
        if (previous != ring_of_tid_.end()) close_ring(previous->second);
        ring_of_tid_[tid] = key;
    }
    watched_.push_back(Watched{ring->event->ring().positions(), ring.get(), &ring->event->ring(), key});
    rings_[key] = std::move(ring);
    SF_LOG_DEBUG("sampling %s %d", tid != 0 ? "thread" : "cpu ring", tid != 0 ? tid : static_cast<int>(key));
}

// A clock event is done with (its thread's end, a reopen, the stop): what it counted of the
// threads' CPU time against what came of it as samples, stored or lost. The difference is time
// that was counted but never reached a tick: the last partial period of each thread the event
// followed, and periods the kernel's timer skipped (its interrupt came more than a period late,
// and the kernel moves the timer on to the next period from now: one sample for several periods).
// A per-CPU event's count takes in the threads it inherited, live (read(2) sums them) or ended.
void Sampler::account_clock(const Ring& ring) {
    if (!ring.clock) return;
    Result<uint64_t> counted = ring.event->count();
    if (!counted.ok()) return;
    const kernel::RingStats& ring_stats = ring.event->ring().stats();
    const uint64_t period = ring.period_ns != 0 ? ring.period_ns : config_.period_ns;
    const uint64_t ticked = (ring_stats.samples + ring_stats.lost_samples) * period;
    clock_counted_ns_.fetch_add(*counted, std::memory_order_relaxed);
    clock_ticked_ns_.fetch_add(ticked, std::memory_order_relaxed);
    if (ring.tid == 0) {
        clock_cpu_events_.fetch_add(1, std::memory_order_relaxed);
        clock_cpu_counted_ns_.fetch_add(*counted, std::memory_order_relaxed);
        clock_cpu_ticked_ns_.fetch_add(ticked, std::memory_order_relaxed);
        return;
    }
    // One thread's event: all but its last partial period had a tick, unless the timer skipped some.
    if (!ring.period_changed && !ring.takes_switches && *counted > ticked + period) {
        clock_skipped_ns_.fetch_add(*counted - ticked - period, std::memory_order_relaxed);
    }
    // A thread still running (most have ended by the time their ring closes) also says how much of
    // its CPU time since the open the event did not count: the kernel's scheduling work at each of
    // its wake-ups (perf sees the thread only from the end of the context switch).
    const uint64_t cpu_now = thread_cpu_ns_of(ring.tid);
    if (cpu_now != 0 && ring.cpu_at_open_ns != 0 && cpu_now >= ring.cpu_at_open_ns + *counted) {
        clock_uncounted_ns_.fetch_add(cpu_now - ring.cpu_at_open_ns - *counted, std::memory_order_relaxed);
        clock_uncounted_threads_.fetch_add(1, std::memory_order_relaxed);
    }
}

void Sampler::close_ring(uint64_t key) {
    auto found = rings_.find(key);
    if (found == rings_.end()) return;
    Ring& ring = *found->second;
    ring.disable();
    drain_ring(ring, monotonic_ns());
    account_clock(ring);
    throttles_.fetch_add(ring.event->ring().stats().throttle, std::memory_order_relaxed);
    for (size_t i = 0; i < watched_.size(); ++i) {
        if (watched_[i].key != key) continue;
        watched_[i] = watched_.back();
        watched_.pop_back();
        break;
    }
    ring.switches.reset();   // before the ring it writes into
    if (poller_) (void)poller_->remove(ring.event->fd());
    if (ring.tid != 0) {
        auto by_tid = ring_of_tid_.find(ring.tid);
        if (by_tid != ring_of_tid_.end() && by_tid->second == key) ring_of_tid_.erase(by_tid);
    }
    rings_.erase(found);
    threads_closed_.fetch_add(1, std::memory_order_relaxed);
}

void Sampler::apply_requests() {
    Request* raw = nullptr;
    std::vector<pid_t> ended;
    while (requests_.pop(raw)) {
        std::unique_ptr<Request> request(raw);
        if (request->kind == Request::Kind::kOpen) {
            if (request->enable_on_open) {
                Status enabled = request->event->enable();
                if (enabled.ok() && request->switches) enabled = request->switches->enable();
                if (!enabled.ok()) SF_LOG_WARN("%s", enabled.error().describe().c_str());
            }
            open_ring(*request);
        } else if (request->kind == Request::Kind::kPeriod) {
            set_period(request->tid, request->period_ns);
        } else if (request->kind == Request::Kind::kEndCpus) {
            std::vector<uint64_t> cpu_rings;
            for (const auto& [key, ring] : rings_) {
                if (ring->tid == 0) cpu_rings.push_back(key);
            }
            for (uint64_t key : cpu_rings) close_ring(key);
        } else if (request->kind == Request::Kind::kStack) {
            set_stack(request->tid, request->stack_bytes);
            SF_LOG_DEBUG("stack=auto: thread %d's %u-byte request applied %.1f ms after it was made", request->tid,
                         request->stack_bytes, static_cast<double>(monotonic_ns() - request->posted_ns) / 1e6);
        } else if (request->kind == Request::Kind::kWait) {
            waiting_.insert_or_assign(request->tid, thread_cpu_ns_of(request->tid));
        } else if (request->kind == Request::Kind::kClock) {
            // Counted from now: what the thread ran before, no event of its own saw either.
            // (Once: a thread the spawner announced is found again by the thread watcher.) A thread
            // the spawner has just created may not have run yet (0 ns, seen under load: the live
            // decoder's whole CPU time then went uncounted): alive all the same.
            const std::optional<uint64_t> cpu = thread_cpu_ns_if_alive(request->tid);
            const bool known = std::any_of(clock_threads_.begin(), clock_threads_.end(),
                                           [&](const ClockThread& t) { return t.tid == request->tid; });
            if (cpu && !known) {
                clock_threads_.push_back(ClockThread{request->tid, *cpu, monotonic_ns()});
                clock_threads_added_.fetch_add(1, std::memory_order_relaxed);
            }
        } else {
            ended.push_back(request->tid);
        }
    }
    for (pid_t tid : ended) {
        waiting_.erase(tid);
        std::erase_if(clock_threads_, [tid](const ClockThread& t) { return t.tid == tid; });
        auto found = ring_of_tid_.find(tid);
        if (found != ring_of_tid_.end()) close_ring(found->second);
    }
}

void Sampler::set_period(pid_t tid, uint64_t period_ns) {
    auto found = ring_of_tid_.find(tid);
    if (found == ring_of_tid_.end()) return;   // ended meanwhile
    Ring& ring = *rings_.at(found->second);
    if (!ring.clock) return;
    Status set = ring.event->set_period(period_ns);
    if (!set.ok()) {
        SF_LOG_WARN("interval=auto: %s", set.error().describe().c_str());
        return;
    }
    ring.period_ns = period_ns;
    ring.period_changed = true;
    if (poller_) (void)poller_->set_on_data(ring.event->fd(), needs_data_wakeups(ring));
}

// A ring holding two reader cycles of samples at its period (at most one sample per period of
// wall time: a thread uses no more CPU time than that) is at most half full when the cycle drains
// it, so the watermark's wake-ups, one per watermark's worth of samples written whether or not the
// reader drained them meanwhile, are pure cost there: on httpserver at 1 kHz, ~2,500 per run that
// the reader answered by waiting on. Rings with switch samples (no bound on their rate), per-CPU
// rings, a grown fragment's ring that hit the page cap and a period interval=auto shortened keep them.
bool Sampler::needs_data_wakeups(const Ring& ring) const {
    if (ring.tid == 0 || !ring.clock || ring.takes_switches) return true;
    const uint64_t stack_bytes = ring.stack_bytes != 0 ? ring.stack_bytes : config_.stack_bytes;
    const uint64_t pages = ring.ring_pages != 0 ? ring.ring_pages : config_.ring_pages;
    const uint64_t period_ns = ring.period_ns != 0 ? ring.period_ns : config_.period_ns;
    const uint64_t records = pages * static_cast<uint64_t>(sysconf(_SC_PAGESIZE)) /
                             kernel::sample_record_bytes(static_cast<uint32_t>(stack_bytes));
    return records * period_ns < 2 * cadence_ns(config_, kCadenceNs);
}

kernel::SamplingConfig Sampler::small_config(uint32_t bytes) const {
    kernel::SamplingConfig config = config_;
    config.stack_bytes = bytes;
    const uint64_t page = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
    const uint64_t need = kSmallRingRecords * kernel::sample_record_bytes(bytes);
    uint32_t pages = 1;
    while (pages * page < need) pages *= 2;
    config.ring_pages = pages;
    config.wakeup_bytes = 0;   // the configured ring's would lie beyond this one's end
    return with_safety_watermark(config);
}

// Runs in apply_requests, before the cycle's drains begin: the old ring's last samples and the new
// ring's first ones are all taken before drains_began, so the hold-back orders them like any others.
void Sampler::set_stack(pid_t tid, uint32_t bytes) {
    auto found = ring_of_tid_.find(tid);
    if (found == ring_of_tid_.end()) return;   // ended meanwhile
    Ring& ring = *rings_.at(found->second);
    const uint32_t now_bytes = ring.stack_bytes != 0 ? ring.stack_bytes : config_.stack_bytes;
    const uint32_t now_pages = ring.ring_pages != 0 ? ring.ring_pages : config_.ring_pages;
    if (ring.fixed_stack || (bytes > now_bytes && stack_growth_failed_.load(std::memory_order_relaxed))) return;
    if (bytes == now_bytes) {
        // A thread opened at this size already (add_thread's start size): validate's copies follow,
        // as after a reopen (its timer was added after the events were opened).
        if (bytes != config_.stack_bytes) {
            if (OracleSampler* timer = oracle_.load(std::memory_order_acquire)) timer->set_stack_bytes(tid, bytes);
        }
        return;
    }
    // A small ring stays small: its thread has not been busy (a pool's idle threads grow their
    // fragments with their busy family, not their rings).
    kernel::SamplingConfig config = ring.small_ring ? small_config(bytes) : grown_config(bytes);
    if (ring.period_ns != 0) config.period_ns = ring.period_ns;
    Status opened = reopen(ring, found->second, config);
    if (!opened.ok() && opened.error().sys_errno != ESRCH && !ring.small_ring && config.ring_pages != now_pages) {
        // The larger ring may be over perf_event_mlock_kb: the current ring's size may still do.
        kernel::SamplingConfig same_ring = config;
        same_ring.ring_pages = now_pages;
        if (kernel::validate(same_ring).ok()) opened = reopen(ring, found->second, same_ring);
    }
    if (!opened.ok()) {
        if (opened.error().sys_errno == ESRCH) return;   // the thread is gone: its end is on the way
        if (bytes > now_bytes) {
            stack_growth_failed_.store(true, std::memory_order_relaxed);
            SF_LOG_WARN("stack=auto: cannot reopen thread %d's events with %u-byte fragments, so no thread's "
                        "fragment grows beyond %u bytes (raise kernel.perf_event_mlock_kb or ulimit -l, or give "
                        "ring= smaller): %s",
                        tid, bytes, now_bytes, opened.error().describe().c_str());
        } else {
            SF_LOG_WARN("stack=auto: cannot reopen thread %d's events: %s", tid, opened.error().describe().c_str());
        }
        return;
    }
    // validate: the oracle's copies of this thread follow, so that its samples check the decoder on
    // fragments like the profile's.
    if (OracleSampler* timer = oracle_.load(std::memory_order_acquire)) timer->set_stack_bytes(tid, bytes);
    stack_reopens_.fetch_add(1, std::memory_order_relaxed);
    SF_LOG_DEBUG("stack=auto: thread %d samples %u bytes of stack (ring %u pages)", tid, bytes, ring.ring_pages);
}

Status Sampler::reopen(Ring& ring, uint64_t key, kernel::SamplingConfig config) {
    const pid_t tid = ring.tid;
    std::unique_ptr<kernel::PerfEvent> event, switches;
    if (ring.clock) {
        Result<kernel::PerfEvent> opened = kernel::PerfEvent::open_thread(tid, config);
        if (!opened.ok()) return std::move(opened).take_error();
        event = std::make_unique<kernel::PerfEvent>(std::move(opened).value());
    }
    if (ring.takes_switches) {
        Result<kernel::PerfEvent> opened = kernel::PerfEvent::open_thread_switches(tid, config, event.get());
        if (!opened.ok()) return std::move(opened).take_error();
        (event ? switches : event) = std::make_unique<kernel::PerfEvent>(std::move(opened).value());
    }
    // Old off, new on, then the old ring's last samples read: nothing taken is lost, and no moment
    // is sampled twice.
    ring.disable();
    Status enabled = event->enable();
    if (enabled.ok() && switches) enabled = switches->enable();
    if (!enabled.ok()) {
        (void)ring.enable();   // keep sampling with the old events
        return enabled;
    }
    converter_->begin(ring, monotonic_ns());
    ring.event->ring().drain(*converter_);
    account_clock(ring);
    ring.period_changed = false;   // the new event counts and ticks at one period
    ring.cpu_at_open_ns = thread_cpu_ns_of(tid);
    if (poller_) (void)poller_->remove(ring.event->fd());
    ring.switches.reset();   // before the ring it writes into
    ring.event = std::move(event);
    ring.switches = std::move(switches);
    ring.stack_bytes = config.stack_bytes;
    ring.ring_pages = config.ring_pages;
    if (poller_) {
        Status added = poller_->add(ring.event->fd(), key, needs_data_wakeups(ring));
        if (!added.ok()) SF_LOG_WARN("cannot wait on the ring of thread %d: %s", tid, added.error().describe().c_str());
    }
    // The cycle looks at the new ring's positions from now on (the old ring is unmapped).
    for (Watched& watched : watched_) {
        if (watched.key != key) continue;
        watched.positions = ring.event->ring().positions();
        watched.reader = &ring.event->ring();
    }
    return {};
}

// A small ring whose drain found it at the watermark or past it (`lost`: its thread lost samples)
// belongs to a thread that sampled faster than the cadence drains so few records: its ring doubles, up to the
// ring its fragment size gets without set_lazy_rings. A thread that only filled it once (its start:
// the JVM's thread setup and the agent's callback run before the thread idles) stops at twice the
// small size; a busy one reaches the full size within a few of its watermark's wake-ups, or at
// once when it overflowed.
void Sampler::grow(Ring& ring, uint64_t key, bool lost) {
    if (ring_growth_failed_) return;
    // Refused for lack of lockable memory and no idle ring to take since: the next look may find one.
    if (growth_refused_ns_ != 0 && takeable_.empty() && monotonic_ns() - growth_refused_ns_ < kScheduleWindowNs) return;
    const uint32_t bytes = ring.stack_bytes != 0 ? ring.stack_bytes : config_.stack_bytes;
    kernel::SamplingConfig config = bytes == config_.stack_bytes ? config_ : grown_config(bytes);
    if (ring.period_ns != 0) config.period_ns = ring.period_ns;
    if (config.ring_pages <= ring.ring_pages) {
        ring.small_ring = false;
        return;
    }
    // A thread that overflowed its ring is busy: the full size at once, not in steps that lose more.
    const bool full = lost || config.ring_pages <= 2 * ring.ring_pages;
    if (!full) {
        config.ring_pages = 2 * ring.ring_pages;
        config.wakeup_bytes = 0;
        config = with_safety_watermark(config);
    }
    // Ring memory ran out: idle threads' rings make room, as for a waiting thread.
    Status opened = with_room([&] { return reopen(ring, key, config); }, key);
    if (!opened.ok()) {
        if (opened.error().sys_errno == ESRCH) return;   // the thread is gone: its end is on the way
        if (opened.error().code == Errc::kResourceLimit) {
            memory_short_.store(true, std::memory_order_relaxed);
            growth_refused_ns_ = monotonic_ns();
            if (!ring_growth_refused_) {
                ring_growth_refused_ = true;
                SF_LOG_WARN("cannot grow thread %d's ring from %u to %u pages: %s; it grows when threads that stop "
                            "running leave ring memory (raise kernel.perf_event_mlock_kb or ulimit -l, or give ring= "
                            "smaller)",
                            ring.tid, ring.ring_pages, config.ring_pages, opened.error().describe().c_str());
            }
            return;   // tried again at its next watermark
        }
        ring_growth_failed_ = true;
        SF_LOG_WARN("cannot grow thread %d's ring from %u to %u pages, so threads keep their small rings and a busy "
                    "one loses samples (raise kernel.perf_event_mlock_kb or ulimit -l, or give ring= smaller): %s",
                    ring.tid, ring.ring_pages, config.ring_pages, opened.error().describe().c_str());
        return;
    }
    if (full) {
        ring.small_ring = false;
        rings_grown_.fetch_add(1, std::memory_order_relaxed);
    }
    SF_LOG_DEBUG("thread %d filled its ring: ring %u pages now", ring.tid, ring.ring_pages);
}

// Ring memory ran out (a thread was refused a ring, or a ring its growth): every window, the
// threads that ran get the rings of those that did not. A thread refused a ring at its start waits
// for one; a ring holder idle for a whole window gives its ring up and waits in turn.
void Sampler::schedule_rings(uint64_t now_ns) {
    std::vector<RingHolder> holders;
    for (auto& [key, ring] : rings_) {
        if (ring->tid == 0 || ring->fixed_stack) continue;
        const uint64_t cpu = thread_cpu_ns_of(ring->tid);
        if (cpu == 0) continue;   // ended: its ThreadEnd closes it
        const uint64_t ran = cpu >= ring->cpu_at_look_ns ? cpu - ring->cpu_at_look_ns : 0;
        ring->cpu_at_look_ns = cpu;
        const uint64_t period = ring->period_ns != 0 ? ring->period_ns : config_.period_ns;
        ring->idle_looks = ran < period ? ring->idle_looks + 1 : 0;
        holders.push_back(RingHolder{key, ran, ring->idle_looks, ring->opened_ns + kScheduleWindowNs <= now_ns});
    }
    std::vector<WaitingThread> waiting;
    for (auto it = waiting_.begin(); it != waiting_.end();) {
        const uint64_t cpu = thread_cpu_ns_of(it->first);
        if (cpu == 0) {   // ended
            it = waiting_.erase(it);
            continue;
        }
        waiting.push_back(WaitingThread{it->first, cpu >= it->second ? cpu - it->second : 0});
        it->second = cpu;
        ++it;
    }
    const RingSchedule schedule = plan_ring_schedule(std::move(waiting), std::move(holders), config_.period_ns);
    takeable_.assign(schedule.to_take.rbegin(), schedule.to_take.rend());   // taken from the back
    for (const pid_t tid : schedule.to_open) {
        Status opened = with_room([&] { return open_waiting(tid); }, 0);
        if (opened.ok()) {
            waiting_.erase(tid);
            late_opens_.fetch_add(1, std::memory_order_relaxed);
            SF_LOG_DEBUG("thread %d got a ring after waiting for one", tid);
        } else if (opened.error().code != Errc::kResourceLimit) {
            waiting_.erase(tid);   // gone, or refused for another reason: not worth asking again
        } else {
            break;   // no idle ring is left to take
        }
    }
}

// `attempt` (an open or reopen), and again after each idle thread's ring taken while the kernel
// refuses it for lack of lockable memory, up to kMaxTakesPerOpen rings.
template <class Attempt>
Status Sampler::with_room(Attempt attempt, uint64_t except_key) {
    Status opened = attempt();
    for (int taken = 0; !opened.ok() && opened.error().code == Errc::kResourceLimit && taken < kMaxTakesPerOpen &&
                        take_idle_ring(except_key);
         ++taken) {
        opened = attempt();
    }
    return opened;
}

// The ring of the thread idle longest in schedule_rings' last look (not `except_key`'s) closes, and
// its thread waits for a ring. False when no such ring is left.
bool Sampler::take_idle_ring(uint64_t except_key) {
    while (!takeable_.empty()) {
        const uint64_t key = takeable_.back();
        takeable_.pop_back();
        auto found = rings_.find(key);
        if (key == except_key || found == rings_.end()) continue;
        const pid_t tid = found->second->tid;
        close_ring(key);
        waiting_.insert_or_assign(tid, thread_cpu_ns_of(tid));
        rings_taken_.fetch_add(1, std::memory_order_relaxed);
        SF_LOG_DEBUG("thread %d idle: its ring goes to a busy thread", tid);
        return true;
    }
    return false;
}

// Reader thread: a waiting thread's events, opened as add_thread opens a new thread's (small with
// set_lazy_rings) and read from this cycle on.
Status Sampler::open_waiting(pid_t tid) {
    Request request;
    request.kind = Request::Kind::kOpen;
    request.tid = tid;
    request.cpu_at_open_ns = thread_cpu_ns_of(tid);
    if (stack_tops_ != nullptr) request.stack_top = stack_tops_->lookup(static_cast<uint32_t>(tid)).value_or(0);
    kernel::SamplingConfig config = config_;
    if (lazy_rings_) {
        config = small_config(config_.stack_bytes);
        request.ring_pages = config.ring_pages;
        request.small_ring = true;
    }
    Status opened = open_events(tid, config, request);
    if (opened.ok()) opened = enable_or_defer(request);
    if (!opened.ok()) return opened;
    open_ring(request);
    threads_opened_.fetch_add(1, std::memory_order_relaxed);
    return {};
}

void Sampler::drain_ring(Ring& ring, uint64_t now_ns) {
    converter_->begin(ring, now_ns);
    ring.event->ring().drain(*converter_);
}

void Sampler::drain_rings(const std::vector<kernel::RingReady>& ready, uint64_t since_last_drains) {
    const uint64_t now = monotonic_ns();
    ring_looks_ += watched_.size();
    // Each ring's positions are a line the kernel wrote from another CPU, or one the JVM's work
    // evicted since the last cycle: a miss each (~300 ns on the VM, 4 % of the reader with 45
    // rings at 1 kHz). Asked for all at once, the misses overlap.
    for (const Watched& watched : watched_) watched.positions.prefetch();
    with_news_.clear();
    for (size_t i = 0; i < watched_.size(); ++i) {
        if (watched_[i].positions.has_news()) with_news_.push_back(static_cast<uint32_t>(i));
    }
    // The same for what a drain touches first, one ring ahead: the ring's first record, its Ring
    // (the converter's facts of the thread) and its reader's fields, all cold after the JVM ran.
    const auto ask_ahead = [this](const Watched& watched) {
        watched.positions.prefetch_oldest_record();
        __builtin_prefetch(watched.ring);
        __builtin_prefetch(reinterpret_cast<const char*>(watched.ring) + 64);
        __builtin_prefetch(watched.reader);
    };
    if (!with_news_.empty()) ask_ahead(watched_[with_news_[0]]);
    // Quiet (see kMaxQuietShift): a poller to wake the reader, only per-CPU rings (mode=cpu), which
    // keep their watermark and see every thread from its start (a thread's own ring is watched from
    // the reader's next cycle on, and most have no watermark), each filling at most a quarter of
    // itself per cadence; the wait then doubles as far as the fullest leaves room for.
    bool quiet = poller_.has_value() && !watched_.empty();
    for (size_t i = 0; quiet && i < watched_.size(); ++i) quiet = watched_[i].ring->tid == 0;
    const uint64_t cadence = cadence_ns_.load(std::memory_order_relaxed);
    unsigned room = kMaxQuietShift;   // rings with nothing new leave every doubling
    for (size_t i = 0; i < with_news_.size(); ++i) {
        if (i + 1 < with_news_.size()) ask_ahead(watched_[with_news_[i + 1]]);
        const Watched& watched = watched_[with_news_[i]];
        ++ring_drains_;
        converter_->begin(*watched.ring, now);
        const kernel::RingStats& stats = watched.reader->stats();
        const uint64_t bytes_before = stats.bytes, lost_before = stats.lost_records;
        watched.reader->drain(*converter_);
        const uint64_t drained = stats.bytes - bytes_before;
        const bool lost = stats.lost_records != lost_before;
        room = std::min(room, quiet_room_shift(drained, watched.reader->data_size(), since_last_drains, cadence,
                                               kMaxQuietShift));
        quiet = quiet && !lost && room > 0;
        if (watched.ring->small_ring && (lost || 4 * drained >= 3 * watched.reader->data_size())) {
            to_grow_.push_back({watched.key, lost});
        }
    }
    quiet_room_ = quiet ? room : 0;
    // After the drains, which walk watched_ (a reopen replaces a ring's positions there); not in
    // the final drain, whose rings stay off.
    if (stop_requested_.load(std::memory_order_acquire)) to_grow_.clear();
    for (const Growth& growth : to_grow_) {
        auto found = rings_.find(growth.key);
        if (found != rings_.end()) grow(*found->second, growth.key, growth.lost);
    }
    to_grow_.clear();
    // The poller reports a hang-up once (the thread exited without a ThreadEnd we saw).
    for (const kernel::RingReady& entry : ready) {
        if (entry.hung_up) close_ring(entry.key);
    }
}

// The library is mapped since before the sample that ran in it, but not since when: the ModuleMap
// is stamped right after the last event written, so that it precedes every sample still held,
// whichever ring they come from. Before the first release, that is the reader's start: the own
// threads' clock samples of the first cycles are spread back to then, before the sample that
// found the library (stamped right before that sample, they named the reader's first 5-6 ms
// [unknown] on JDK 25 in mode=cpu). (Were the range another file's before, samples of that file
// in between would be named after this one: not seen.)
void Sampler::check_code(uint64_t ip, uint64_t time_ns, uint64_t now_ns) {
    if (modules_ == nullptr) return;
    modules_->executable_ranges(code_ranges_, code_ranges_generation_);
    if (modules_->known_code(code_ranges_, ip) || now_ns < next_rescan_ns_) return;
    bool busy = false;
    const uint64_t stamp = released_until_ != 0 ? released_until_ + 1
                           : started_ns_ != 0      ? std::min(started_ns_, std::max<uint64_t>(time_ns, 2) - 1)
                                                   : std::max<uint64_t>(time_ns, 2) - 1;
    const size_t found = modules_->try_refresh(stamp, queue_, busy);
    if (busy) return;   // the code poll is scanning: it announces the library, stamped later
    module_rescans_.fetch_add(1, std::memory_order_relaxed);
    modules_found_.fetch_add(found, std::memory_order_relaxed);
    modules_->executable_ranges(code_ranges_, code_ranges_generation_);
    rescan_gap_ns_ = modules_->known_code(code_ranges_, ip) ? kMinRescanGapNs
                                                 : std::clamp(2 * rescan_gap_ns_, kMinRescanGapNs, kMaxRescanGapNs);
    next_rescan_ns_ = now_ns + rescan_gap_ns_;
}

void Sampler::collect() {
    const uint64_t now = monotonic_ns();
    scratch_.clear();
    // Who is still between stamping and handing over, asked before the drains: what they hand
    // over later is no older than this (see OracleSampler::in_flight_since, EventQueue::InFlight).
    uint64_t since = queue_.oldest_in_flight();
    if (OracleSampler* timer = oracle_.load(std::memory_order_acquire)) {
        const uint64_t timer_since = timer->in_flight_since();
        if (timer_since != 0 && (since == 0 || timer_since < since)) since = timer_since;
        timer->drain(scratch_);
    }
    in_flight_since_ = since;
    queue_.drain_owned(owned_scratch_);
    if (owned_scratch_.size() + scratch_.size() > kQuietEventsMax) quiet_room_ = 0;
    for (Event& event : scratch_) reorder_.add(std::move(event), now);
    for (std::unique_ptr<Event>& event : owned_scratch_) reorder_.add_owned(std::move(event), now);
    scratch_.clear();
    owned_scratch_.clear();
}

// Whether an early wake-up can be answered by waiting on until the cycle is due: it came from
// watermarks only (no hang-up, no wake(), no request), of rings that only a clock event writes at
// no shorter a period than the cadence was made for, each less than half full. The kernel wakes
// a ring's poller each time another watermark's worth (three quarters of the ring) has been
// written, drained or not, so every busy ring woke the reader every one and a half cadences or
// so; yet such a ring fills at most at one sample per period of its thread's (or CPU's) time, and
// the cadence is half the time that takes to fill it: half full now, it is drained before it is
// full. Switch-event rings (no such bound) and rings found fuller still get the cycle at once.
bool ring_can_wait(bool clock, bool takes_switches, uint64_t period_ns, uint64_t configured_period_ns,
                   size_t pending_bytes, size_t ring_bytes) {
    if (!clock || takes_switches || (period_ns != 0 && period_ns < configured_period_ns)) return false;
    return 2 * pending_bytes < ring_bytes;
}

bool Sampler::quiet_wake(const std::vector<kernel::RingReady>& ready) const {
    if (ready.empty() || !requests_.empty()) return false;
    for (const kernel::RingReady& entry : ready) {
        if (entry.hung_up) return false;
        const auto found = rings_.find(entry.key);
        if (found == rings_.end()) return false;
        const Ring& ring = *found->second;
        const kernel::RingReader& reader = ring.event->ring();
        if (!ring_can_wait(ring.clock, ring.takes_switches, ring.period_ns, config_.period_ns, reader.pending_bytes(),
                           reader.data_size())) {
            return false;
        }
    }
    return true;
}

// Real time is given up for a window busy more than half the time, and taken back after one busy
// less than a quarter: the JVM's start is such a burst (at 100 us the reader is busy ~90 % of its
// first 100 ms, ~20 % after), which otherwise left the reader ordinary for the whole run.
void Sampler::review_priority(kernel::ReaderPriority priority, uint64_t cpu_ns, uint64_t wall_ns) {
    const double busy_pct = 100.0 * static_cast<double>(cpu_ns) / static_cast<double>(wall_ns);
    const double window_ms = static_cast<double>(wall_ns) / 1e6;
    if (priority == kernel::ReaderPriority::kRealtime) {
        if (!kernel::reader_too_busy_for_real_time(cpu_ns, wall_ns)) return;
        reader_priority_.store(kernel::lower_reader_priority(), std::memory_order_relaxed);
        busy_lowered_ = true;
        if (realtime_given_up_.fetch_add(1, std::memory_order_relaxed) == 0) {
            SF_LOG_INFO("reader: busy %.0f%% of the last %.0f ms, so it gives up real-time priority (which would "
                        "starve the sampled threads on its CPU) until it is busy less than a quarter of a window",
                        busy_pct, window_ms);
        } else {
            SF_LOG_DEBUG("reader: busy %.0f%% of the last %.0f ms: real-time priority given up again", busy_pct, window_ms);
        }
        return;
    }
    if (!kernel::reader_quiet_enough_for_real_time(cpu_ns, wall_ns)) return;
    const kernel::ReaderPriority raised = kernel::raise_reader_priority();
    reader_priority_.store(raised, std::memory_order_relaxed);
    if (raised != kernel::ReaderPriority::kRealtime) {
        busy_lowered_ = false;   // refused now: no more tries
        return;
    }
    realtime_regained_.fetch_add(1, std::memory_order_relaxed);
    SF_LOG_DEBUG("reader: busy %.0f%% of the last %.0f ms: real-time priority again", busy_pct, window_ms);
}

bool Sampler::run_cycle(int timeout_ms, uint64_t due_ns) {
    if (stop_requested_.load(std::memory_order_acquire)) {
        final_drain();
        return false;
    }
    std::vector<kernel::RingReady> ready;
    if (poller_) {
        // A few quiet wake-ups at most per cycle: epoll reports a perf ring's wake-up once.
        for (int quiet = 0;; ++quiet) {
            Result<size_t> waited = poller_->wait(timeout_ms, ready);
            if (!waited.ok()) {
                // Never spin: an epoll failure degrades to polling every cycle.
                timespec pause{0, static_cast<long>(timeout_ms) * 1'000'000};
                nanosleep(&pause, nullptr);
                break;
            }
            if (quiet >= 16 || !quiet_wake(ready) || stop_requested_.load(std::memory_order_acquire)) break;
            const uint64_t now = monotonic_ns();
            if (now >= due_ns) break;
            // A ring less than half full waits at most what the half-fill cadence would have had
            // it wait (ring_can_wait's bound), not the longer real-time cadence.
            if (due_ns - now > cadence_ns(config_, kCadenceNs)) break;
            ++quiet_wakes_;
            ready.clear();
            timeout_ms = static_cast<int>((due_ns - now + 999'999) / 1'000'000);
        }
    }
    apply_requests();
    // Every ring is read after this moment, so every sample taken before it is in hand once the
    // drains end, however long they take: the hold-back counts from here, not from their end. A
    // reader preempted or slowed (by a sanitizer) mid-drain for longer than the hold-back had
    // otherwise released a later ring's samples past an earlier ring's next ones.
    const uint64_t drains_began = monotonic_ns();
    const uint64_t since_last_drains = drains_began - drains_began_ns_;
    drains_began_ns_ = drains_began;
    drain_rings(ready, since_last_drains);
    // Only where perf clock events sample the application: not with events=switch alone, not
    // while no event could be opened (perf denied: the timer's samples are Java threads' alone).
    if (!clock_threads_.empty() && clock_events_ && threads_opened_.load(std::memory_order_relaxed) != 0) {
        sample_clocks(drains_began);
    }
    if (memory_short_.load(std::memory_order_relaxed) && drains_began >= next_schedule_ns_) {
        next_schedule_ns_ = drains_began + kScheduleWindowNs;
        schedule_rings(drains_began);
    }
    // Requests the drains made (stack=auto's head start decides on the reader as it reads a
    // sample): now, not after this cycle's hand-over to the writer and the next wait.
    if (!requests_.empty()) apply_requests();
    {
        std::lock_guard<std::mutex> lock(cycle_hook_mutex_);
        if (cycle_hook_ != nullptr) cycle_hook_->on_reader_cycle(drains_began);
    }
    // Samples drained before the queue: an event emitted before a sample was taken is then
    // always in this cycle's queue drain or an earlier one.
    collect();
    const uint64_t now = monotonic_ns();
    uint64_t horizon = drains_began - hold_back_.ns();
    // A producer still in flight holds the rest back, but not for ever: a thread stopped inside a
    // callback or the handler (a debugger, SIGSTOP) must not make the reader hold every event.
    const bool start = start_hold_.load(std::memory_order_acquire) &&
                       stack_bytes_kept_ - stack_bytes_released_ < kMaxStartHoldBytes;
    if (in_flight_since_ != 0 && now - in_flight_since_ < (start ? kMaxStartHoldNs : kMaxInFlightHoldNs)) {
        horizon = std::min(horizon, in_flight_since_ - 1);
    }
    released_until_ = std::max(released_until_, horizon);
    reorder_.release_until(
        horizon,
        [this](Event& event) {
            if (const Sample* sample = std::get_if<Sample>(&event)) stack_bytes_released_ += sample->stack.size();
            writer_.write(std::move(event));
            // With a live profile the fragment went on to the decoder thread; with only a
            // recording it is still here, to be refilled by a later sample.
            if (Sample* sample = std::get_if<Sample>(&event);
                sample && sample->stack.capacity() != 0 && spare_stacks_.size() < kMaxSpareStacks) {
                spare_stacks_.push_back(std::move(sample->stack));
            }
        },
        [this](std::unique_ptr<Event>&& event) { writer_.write_owned(std::move(event)); });
    writer_.batch_end();
    return true;
}

void Sampler::final_drain() {
    apply_requests();
    for (auto& [key, ring] : rings_) ring->disable();
    drain_rings({}, monotonic_ns() - drains_began_ns_);
    std::vector<uint64_t> keys;
    for (auto& [key, ring] : rings_) keys.push_back(key);
    for (uint64_t key : keys) close_ring(key);
    collect();
    reorder_.release_all([this](Event& event) { writer_.write(std::move(event)); },
                         [this](std::unique_ptr<Event>&& event) { writer_.write_owned(std::move(event)); });
    writer_.batch_end();
    writer_.finish();
}

bool Sampler::stop(int timeout_ms) {
    if (stopped_) return true;
    stopped_ = true;
    if (!reader_started_.load(std::memory_order_acquire)) {
        final_drain();
        return true;
    }
    stop_requested_.store(true, std::memory_order_release);
    wake();
    timespec deadline{};
    clock_gettime(CLOCK_REALTIME, &deadline);
    deadline.tv_sec += timeout_ms / 1000;
    deadline.tv_nsec += static_cast<long>(timeout_ms % 1000) * 1'000'000;
    if (deadline.tv_nsec >= 1'000'000'000) {
        deadline.tv_sec += 1;
        deadline.tv_nsec -= 1'000'000'000;
    }
    const int joined = pthread_timedjoin_np(reader_, nullptr, &deadline);
    if (joined != 0) {
        SF_LOG_ERROR("the reader thread did not finish within %d ms; the recording may be incomplete", timeout_ms);
        return false;
    }
    return true;
}

uint64_t clock_time_skipped_ns(const SamplerStats& stats, uint64_t threads, uint64_t period_ns) {
    const uint64_t partial_periods = stats.clock_cpu_events * threads * period_ns;
    const uint64_t per_cpu_short = stats.clock_cpu_counted_ns > stats.clock_cpu_ticked_ns
                                       ? stats.clock_cpu_counted_ns - stats.clock_cpu_ticked_ns
                                       : 0;
    return stats.clock_skipped_ns + (per_cpu_short > partial_periods ? per_cpu_short - partial_periods : 0);
}

TimerSkips timer_skips(const SamplerStats& stats, uint64_t threads, uint64_t period_ns, const ProcessCpu& start,
                       const ProcessCpu& stop) {
    TimerSkips skips;
    skips.skipped_ns = clock_time_skipped_ns(stats, threads, period_ns);
    if (const std::optional<double> steal = profile::host_steal_share(start, stop)) {
        skips.by_steal_ns = std::min(skips.skipped_ns, static_cast<uint64_t>(*steal * static_cast<double>(stats.clock_counted_ns)));
    }
    const uint64_t rest = skips.skipped_ns - skips.by_steal_ns;
    const uint64_t process_ns = stop.user_ns + stop.system_ns;
    if (rest * 100 > process_ns) skips.unexplained_ns = rest;
    return skips;
}

SamplerStats Sampler::stats() const {
    SamplerStats stats;
    stats.threads_opened = threads_opened_.load(std::memory_order_relaxed);
    stats.threads_closed = threads_closed_.load(std::memory_order_relaxed);
    stats.open_failures = open_failures_.load(std::memory_order_relaxed);
    stats.ring_limit_failures = ring_limit_failures_.load(std::memory_order_relaxed);
    stats.rings_taken = rings_taken_.load(std::memory_order_relaxed);
    stats.late_opens = late_opens_.load(std::memory_order_relaxed);
    stats.throttles = throttles_.load(std::memory_order_relaxed);
    stats.waiting_at_stop = waiting_at_stop_.load(std::memory_order_relaxed);
    stats.stack_reopens = stack_reopens_.load(std::memory_order_relaxed);
    stats.late_samples = published_late_samples_.load(std::memory_order_relaxed);
    stats.late_max_delay_ns = published_late_max_delay_ns_.load(std::memory_order_relaxed);
    stats.holdback_ns = published_holdback_ns_.load(std::memory_order_relaxed);
    stats.small_rings = small_rings_.load(std::memory_order_relaxed);
    stats.rings_grown = rings_grown_.load(std::memory_order_relaxed);
    stats.reader_cpu_ns = reader_cpu_ns_.load(std::memory_order_relaxed);
    stats.reader_page_faults = reader_page_faults_.load(std::memory_order_relaxed);
    stats.cycles = published_cycles_.load(std::memory_order_relaxed);
    stats.early_cycles = published_early_cycles_.load(std::memory_order_relaxed);
    stats.quiet_wakes = published_quiet_wakes_.load(std::memory_order_relaxed);
    stats.lengthened_cycles = published_lengthened_cycles_.load(std::memory_order_relaxed);
    stats.ring_looks = published_ring_looks_.load(std::memory_order_relaxed);
    stats.ring_drains = published_ring_drains_.load(std::memory_order_relaxed);
    stats.stack_bytes_written = published_stack_bytes_written_.load(std::memory_order_relaxed);
    stats.stack_bytes_kept = published_stack_bytes_kept_.load(std::memory_order_relaxed);
    stats.stack_holes_faulted = stack_holes_faulted_.load(std::memory_order_relaxed);
    stats.start_fragments_trimmed = start_fragments_trimmed_.load(std::memory_order_relaxed);
    stats.cadence_ns = cadence_ns_.load(std::memory_order_relaxed);
    stats.module_rescans = module_rescans_.load(std::memory_order_relaxed);
    stats.modules_found = modules_found_.load(std::memory_order_relaxed);
    stats.clock_threads = clock_threads_added_.load(std::memory_order_relaxed);
    stats.clock_samples = clock_samples_.load(std::memory_order_relaxed);
    stats.clock_counted_ns = clock_counted_ns_.load(std::memory_order_relaxed);
    stats.reader_priority = reader_priority_.load(std::memory_order_relaxed);
    stats.realtime_given_up = realtime_given_up_.load(std::memory_order_relaxed);
    stats.realtime_regained = realtime_regained_.load(std::memory_order_relaxed);
    stats.clock_ticked_ns = clock_ticked_ns_.load(std::memory_order_relaxed);
    stats.clock_uncounted_ns = clock_uncounted_ns_.load(std::memory_order_relaxed);
    stats.clock_uncounted_threads = clock_uncounted_threads_.load(std::memory_order_relaxed);
    stats.clock_cpu_events = clock_cpu_events_.load(std::memory_order_relaxed);
    stats.clock_cpu_counted_ns = clock_cpu_counted_ns_.load(std::memory_order_relaxed);
    stats.clock_cpu_ticked_ns = clock_cpu_ticked_ns_.load(std::memory_order_relaxed);
    stats.clock_skipped_ns = clock_skipped_ns_.load(std::memory_order_relaxed);
    return stats;
}

}  // namespace sf::agent
