// The reader thread and the perf events it reads. Java threads register themselves (ThreadStart)
// and deregister (ThreadEnd) without ever waiting for the reader; the reader waits on every ring
// with epoll, turns records into Sample / Lost events, merges them in time order with the oracle's
// samples and the callbacks' events, and writes the stream.
#pragma once

#include <pthread.h>
#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <unordered_map>
#include <vector>

#include <boost/lockfree/queue.hpp>

#include "event_queue.hpp"
#include "hold_back.hpp"
#include "module_tracker.hpp"
#include "oracle.hpp"
#include "reorder_buffer.hpp"
#include "stackfrag/base/result.hpp"
#include "stackfrag/kernel/perf_events.hpp"
#include "stack_tops.hpp"
#include "stream_writer.hpp"

namespace sf::agent {

struct SamplerStats {
    uint64_t threads_opened = 0;    // perf events opened for threads (or CPUs)
    uint64_t threads_closed = 0;
    uint64_t open_failures = 0;
    uint64_t ring_limit_failures = 0;   // of those, threads refused a ring: no more memory may be locked
    // Ring memory running out: rings taken from threads that had stopped running, threads that got
    // a ring after waiting for one, and threads still waiting when the reader stopped.
    uint64_t rings_taken = 0;
    uint64_t late_opens = 0;
    uint64_t waiting_at_stop = 0;
    uint64_t stack_reopens = 0;     // stack=auto: events reopened with another fragment size
    // PERF_RECORD_THROTTLE records of the closed rings (all of them once the reader has stopped):
    // each is the kernel stopping an event for the rest of a tick (perf_event_max_sample_rate),
    // whose samples are then missing without a LOST record.
    uint64_t throttles = 0;
    // Samples read after events newer than they had been written (HoldBack::late), the longest
    // time between such a sample's stamp and its read, and the hold-back at the end; once the
    // reader has stopped.
    uint64_t late_samples = 0;
    uint64_t late_max_delay_ns = 0;
    uint64_t holdback_ns = 0;
    uint64_t small_rings = 0;       // set_lazy_rings: thread rings opened small
    uint64_t rings_grown = 0;       // and of those, reopened at the full size once their thread filled one
    uint64_t reader_cpu_ns = 0;     // the reader thread's CPU time, once it has stopped
    uint64_t reader_page_faults = 0;   // and its page faults (fresh fragment buffers fault in)
    // Stack bytes of the samples read: as the kernel wrote them, and as kept (cut at the threads'
    // tops), once the reader has stopped.
    uint64_t stack_bytes_written = 0;
    uint64_t stack_bytes_kept = 0;
    // Untouched pages inside threads' stacks where the kernel's copies stopped, faulted in.
    uint64_t stack_holes_faulted = 0;
    // Samples of a long start (held for VMInit past kStartHoldTrimBytes) kept with only their top.
    uint64_t start_fragments_trimmed = 0;
    // What the reader did, once it has stopped: its cycles, how many of them a ring's watermark
    // (a ring filling faster than the cadence drains it) or a wake() brought early, and how many
    // ring looks found news (the rest cost one cache line each).
    uint64_t cycles = 0;
    uint64_t early_cycles = 0;
    uint64_t quiet_wakes = 0;       // watermark wake-ups answered by waiting on (see quiet_wake)
    uint64_t lengthened_cycles = 0; // cycles after a quiet stretch, at a longer cadence
    uint64_t ring_looks = 0;
    uint64_t ring_drains = 0;
    uint64_t cadence_ns = 0;        // the reader's cycle period
    // set_module_tracker: rescans of the maps for a sample outside every known executable
    // mapping, and the libraries they announced.
    uint64_t module_rescans = 0;
    uint64_t modules_found = 0;
    // account_by_clock: the threads counted so, and the samples their clocks gave (kThreadClock).
    uint64_t clock_threads = 0;
    uint64_t clock_samples = 0;
    // Clock events that were closed (per thread and per CPU): the threads' CPU time they counted,
    // and the time their samples (stored and lost) stand for at the period then in force.
    uint64_t clock_counted_ns = 0;
    uint64_t clock_ticked_ns = 0;
    // Of those, the per-CPU events, and what they counted and ticked (each counts the threads it
    // inherited; the last partial period of each of them had no tick).
    uint64_t clock_cpu_events = 0;
    uint64_t clock_cpu_counted_ns = 0;
    uint64_t clock_cpu_ticked_ns = 0;
    // Of the per-thread events whose period never changed: counted time beyond their ticks and
    // their last partial period, which only periods the kernel's timer skipped explain (exact).
    uint64_t clock_skipped_ns = 0;
    // Of the closed clock events whose thread still ran at the close: the thread's CPU time since
    // the open that the event did not count, and how many such closes.
    uint64_t clock_uncounted_ns = 0;
    uint64_t clock_uncounted_threads = 0;
    // The scheduling the reader got (kernel::raise_reader_priority); kUnchanged before it ran.
    kernel::ReaderPriority reader_priority = kernel::ReaderPriority::kUnchanged;
    // How often the reader gave real-time priority up for a busy window, and took it back after a
    // quiet one (kernel::reader_too_busy_for_real_time, reader_quiet_enough_for_real_time).
    uint64_t realtime_given_up = 0;
    uint64_t realtime_regained = 0;
};

// The counted CPU time of the closed clock events that no tick stands for beyond what the threads'
// last partial periods explain: periods the kernel's timer skipped. Exact for per-thread events
// (clock_skipped_ns); for per-CPU events a lower bound, since each may leave a partial period of
// every thread it followed: `threads` (every thread the process had) x `period_ns` per event.
uint64_t clock_time_skipped_ns(const SamplerStats& stats, uint64_t threads, uint64_t period_ns);

// Skipped periods are mostly steal: a guest's timer cannot fire while the hypervisor runs another
// guest, and the clock counts that time, which the process's CPU time (getrusage) leaves out. What
// the machine's steal share between `start` and `stop` (ProcessCpu's host figures) explains of the
// skipped time, and the rest when it exceeds 1 % of the process's CPU time at `stop` (else 0):
// periods of the process's own CPU time that no sample stands for.
struct TimerSkips {
    uint64_t skipped_ns = 0;
    uint64_t by_steal_ns = 0;
    uint64_t unexplained_ns = 0;
};
TimerSkips timer_skips(const SamplerStats& stats, uint64_t threads, uint64_t period_ns, const ProcessCpu& start,
                       const ProcessCpu& stop);

// Whether a ring that woke the reader early (its watermark) can wait for the reader's next cycle:
// it is written by a clock event alone (no switch event), at no shorter a period than the
// configured one, and less than half full. See Sampler::quiet_wake.
bool ring_can_wait(bool clock, bool takes_switches, uint64_t period_ns, uint64_t configured_period_ns,
                   size_t pending_bytes, size_t ring_bytes);

// The reader's cadence for `config` (rings of its size and period), at most `limit_ns`: half the
// time one thread sampling without pause takes to fill its ring, and with a real-time reader
// (`realtime`) up to that fill time less kRealtimeSlackNs (see sampler.cpp).
uint64_t reader_cadence_ns(const kernel::SamplingConfig& config, uint64_t limit_ns, bool realtime);

// How many doublings of the cadence a per-CPU ring leaves room for (at most `max_shift`): the
// largest s with 2^s cadences' worth of its data at most half the ring, judged from the `drained`
// bytes it held after `elapsed_ns` (the time since its last drain) at `cadence_ns`. A ring it was
// drained of is then at most half full, well below its watermark (three quarters) and its end.
unsigned quiet_room_shift(uint64_t drained, uint64_t ring_bytes, uint64_t elapsed_ns, uint64_t cadence_ns,
                          unsigned max_shift);

// Work that rides on the reader's cycles instead of waking a thread of its own for a look that
// mostly finds nothing: a wake-up costs the woken thread 50-200 us of CPU on the 2-CPU VM (cold
// caches, the context switch), the reader is awake anyway.
class ReaderCycleHook {
public:
    virtual ~ReaderCycleHook() = default;
    // On the reader thread, `now_ns` the cycle's monotonic time; must be quick and never block.
    virtual void on_reader_cycle(uint64_t now_ns) = 0;
};

// What a sample watch (Sampler::set_sample_watch) keeps between the samples of one ring's thread:
// facts of the thread that change seldom, each with the generation of its source it was read at,
// so that a sample does not ask the source (a mutex and a hash lookup) while it is unchanged. The
// reader keeps one per thread ring; per-CPU rings, whose samples are of many threads, get none.
struct SampleWatchCache {
    uint64_t top_generation = 0;     // 0: not read yet
    uint64_t top = 0;
    bool top_known = false;
    uint64_t bytes_generation = 0;   // 0: not read yet
    uint32_t bytes = 0;
};

class Sampler {
public:
    // `queue` and `writer` outlive the sampler; `oracle` may be null.
    Sampler(const kernel::SamplingConfig& config, EventQueue& queue, StreamWriter& writer,
            OracleSampler* oracle);
    ~Sampler();
    Sampler(const Sampler&) = delete;
    Sampler& operator=(const Sampler&) = delete;

    // Which events each thread gets (mode=thread), before start(): the clock event (on-CPU
    // samples) and/or the context-switch event (off-CPU samples, SampleSource::kPerfSwitch), which
    // shares the clock event's ring. A switch event that cannot be opened (it needs
    // perf_event_paranoid <= 1) turns off-CPU sampling off with one error; the clock goes on.
    // Before start(): whether the reader asks for real-time priority (reader=realtime, the default).
    void set_realtime_reader(bool realtime) { realtime_reader_ = realtime; }

    // Before start(): a thread's ring opens small (a few samples) and grows to the full size as
    // the thread fills it: an idle thread (most of a server's hundreds) pins tens of KB of
    // ring memory instead of megabytes, which the kernel zeroes at every open. For automatic rings
    // (ring= not given); the VM's starting thread opens at the full size.
    void set_lazy_rings(bool lazy) { lazy_rings_ = lazy; }

    void set_events(bool clock, bool switches) {
        clock_events_ = clock;
        switch_events_ = switches;
    }

    // Starts the reader thread (a plain pthread with every signal blocked).
    Status start();
    bool running() const { return reader_started_.load(std::memory_order_acquire); }

    // Any thread, never waits for the reader: opens a sampling event for `tid` and hands it over.
    // After the first failure (e.g. perf_event_paranoid) every later call fails at once with the
    // same error, so a permission problem costs one failed system call.
    // With `fixed_stack_bytes`, the thread's clock event copies that much stack instead of the
    // configured size, for good (stack=auto leaves it alone), into a ring sized to match, and it
    // gets no switch event.
    // With `start_stack_bytes` larger than the configured size (stack=auto: a thread known to run
    // deep), the thread's events open with that much stack and a ring sized as request_stack would
    // size it, as if reopened at once (falling back as request_stack does); for `started_vm` (the
    // thread that created the VM) a ring holding as much time as the configured ring does, beyond
    // the 1024 pages grown rings stop at (at 100 us: 8 MB, 12.6 ms of samples, not 4 MB, 6.3 ms):
    // the JVM's start is when the reader's cycles are longest.
    // Called by the thread `tid` itself, its samples' fragments end at its stack's top (no frame
    // lies above it; the kernel copies on into whatever follows): the recording and the live
    // decoder get the same shorter fragment.
    Status add_thread(pid_t tid, uint32_t fixed_stack_bytes = 0, uint32_t start_stack_bytes = 0, bool started_vm = false);
    // mode=cpu: one inheriting event per CPU in cpus() for `tid` and the threads it creates later.
    Status add_cpus(pid_t tid);
    // The CPUs add_cpus opens events on: those the constructing thread (the JVM's loading thread)
    // may run on; empty if they could not be read (add_cpus then fails with the reason).
    const std::vector<int>& cpus() const { return cpus_; }
    // Any thread, never waits: `tid`, one of the profiler's own threads, gets no perf event (a
    // sample would cost it as much as the application's threads pay, ~45 us here, and at 10 kHz
    // that was a third of the agent's CPU time); from the reader's next cycle on, each period of
    // CPU time its thread clock shows becomes one SampleSource::kThreadClock sample, so that the
    // profile still shows what the profiler's threads cost (once a clock event opened: not with
    // events=switch alone, nor where perf is denied). Ends with the thread.
    void account_by_clock(pid_t tid);
    // The reader drains the thread's ring one last time, then closes its event.
    void end_thread(pid_t tid);
    // The reader drains and closes every per-CPU event (add_cpus) at its next cycle, which this
    // brings on: the threads' own events opened before this call take over.
    void end_cpus();
    // Makes the reader drain everything now.
    void wake();
    // Any thread: while on (sampling since the agent's load, until VMInit's scan has announced the
    // VM's layout and code), a producer in flight holds the reader back for up to kMaxStartHoldNs
    // rather than kMaxInFlightHoldNs, as long as the samples held keep under kMaxStartHoldBytes.
    void hold_for_start(bool on) { start_hold_.store(on, std::memory_order_release); }
    // Any thread, never waits: the reader sets the clock event of `tid` to `period_ns` at its
    // next cycle (interval=auto); a thread without a clock event is left alone.
    void request_period(pid_t tid, uint64_t period_ns);
    // Any thread, never waits (stack=auto): the reader reopens the events of `tid` with `bytes` of
    // stack per sample, and a ring sized to hold as much time of samples, at its next cycle. The
    // samples already in the old ring are read first; the period restarts on the new event. If the
    // kernel refuses the larger ring (perf_event_mlock_kb) the old ring's size is tried, and if
    // that fails too, no thread grows any more (logged once).
    void request_stack(pid_t tid, uint32_t bytes);

    // Stops the reader after a final drain of rings, oracle and queue, closes every event and
    // finishes the writer. Waits at most `timeout_ms` for the reader; returns false if it did not
    // finish (it is then left running and the writer untouched). Without a reader, does the final
    // drain on the calling thread.
    bool stop(int timeout_ms);

    SamplerStats stats() const;
    // The reader's hold-back for time-ordering at the start (late samples grow it: SamplerStats).
    static constexpr uint64_t kInitialHoldbackNs = 20'000'000;
    // The reader thread's CPU time now (while it runs, read from its thread clock), else at its end.
    uint64_t reader_cpu_now() const;
    // The first open failure, if any.
    std::optional<Error> open_error() const;
    // backend=auto: a persistent open failure is not the end of sampling (the caller falls back
    // to the timer sampler and says so), so it is logged at debug level, not as an error.
    void set_fallback_available(bool available) { fallback_available_.store(available); }
    // The timer sampler whose samples the reader merges in (validate, or the signal backend once
    // perf was denied); may be set while the reader runs. `timer` outlives the sampler.
    void set_timer_sampler(OracleSampler* timer) { oracle_.store(timer, std::memory_order_release); }
    // Before start(): shown every perf sample on the reader thread as it is read from its ring,
    // before the time-ordering hold-back (stack=auto without a live decoder reacts sooner so), with
    // the sample's ring's cache (null for a per-CPU ring).
    void set_sample_watch(std::function<void(const Sample&, SampleWatchCache*)> watch) {
        sample_watch_ = std::move(watch);
    }
    // Before start(): where threads' stacks end, for the samples of per-CPU rings (a thread's own
    // ring knows its thread's top from add_thread): their fragments are cut at the sampled
    // thread's top as a thread ring's are. The reader registers its own stack there. `tops`
    // outlives the sampler.
    void set_stack_tops(StackTops* tops) { stack_tops_ = tops; }
    // Before start(): a perf sample whose ip lies outside every executable mapping of `modules`'s
    // last scan (a library loaded since, which the periodic refresh would announce seconds later)
    // makes the reader rescan /proc/self/maps at once (at most every kMinRescanGapNs) and put the
    // new ModuleMaps into the stream before every event not yet written, so before that sample.
    // `modules` outlives the sampler.
    void set_module_tracker(ModuleTracker* modules) { modules_ = modules; }
    // Any time, from any thread: `hook` (null: none) runs on the reader once per cycle, before the
    // cycle collects the callbacks' events. Returns when the reader is no longer inside the hook
    // it replaces, so that hook may be destroyed then. `hook` outlives its setting.
    void set_cycle_hook(ReaderCycleHook* hook) {
        std::lock_guard<std::mutex> lock(cycle_hook_mutex_);
        cycle_hook_ = hook;
    }

private:
    enum class RequestKind : uint8_t;
    struct Request;
    struct Ring;
    class Converter;

    // The reader applies period and stack requests at its next cycle; wakes it.
    void post(RequestKind kind, pid_t tid, uint64_t period_ns, uint32_t stack_bytes);
    static void* reader_main(void* self);
    void run();
    bool run_cycle(int timeout_ms, uint64_t due_ns);   // returns false once a stop was requested and done
    // A window's verdict on the reader's priority: `cpu_ns` of its CPU time in `wall_ns`.
    void review_priority(kernel::ReaderPriority priority, uint64_t cpu_ns, uint64_t wall_ns);
    bool quiet_wake(const std::vector<kernel::RingReady>& ready) const;
    Status enable_or_defer(Request& request);
    void apply_requests();
    void open_ring(Request& request);
    Status open_switches(pid_t tid, const kernel::SamplingConfig& config, Request& request);
    kernel::SamplingConfig grown_config(uint32_t bytes, uint32_t max_pages = 1024) const;
    Status open_events(pid_t tid, const kernel::SamplingConfig& config, Request& request);
    void close_ring(uint64_t key);
    void account_clock(const Ring& ring);
    void set_period(pid_t tid, uint64_t period_ns);
    void set_stack(pid_t tid, uint32_t bytes);
    // Reopens the thread's events with `config`'s stack and ring (the samples in the old ring are
    // read first); the kernel's error when it refused, the old events still sampling.
    Status reopen(Ring& ring, uint64_t key, kernel::SamplingConfig config);
    // set_lazy_rings: a small ring's configuration for `bytes` of stack, and the growth of a small
    // ring that drain_rings found filled.
    kernel::SamplingConfig small_config(uint32_t bytes) const;
    void grow(Ring& ring, uint64_t key, bool lost);
    bool needs_data_wakeups(const Ring& ring) const;
    void drain_rings(const std::vector<kernel::RingReady>& ready, uint64_t since_last_drains);
    void drain_ring(Ring& ring, uint64_t now_ns);
    void check_code(uint64_t ip, uint64_t time_ns, uint64_t now_ns);
    void collect();
    // account_by_clock's samples for the CPU time the counted threads ran since the last call.
    void sample_clocks(uint64_t now_ns);
    void final_drain();
    Status record_open_failure(Error error);
    // Ring memory running out: `tid` was refused a ring; the reader's schedule gives it one when a
    // thread that stopped running can give up its own (see schedule_rings).
    void wait_for_ring(pid_t tid);
    void schedule_rings(uint64_t now_ns);
    bool take_idle_ring(uint64_t except_key);
    template <class Attempt>
    Status with_room(Attempt attempt, uint64_t except_key);
    Status open_waiting(pid_t tid);

    const kernel::SamplingConfig config_;
    EventQueue& queue_;
    StreamWriter& writer_;
    std::atomic<OracleSampler*> oracle_;
    std::atomic<bool> fallback_available_{false};

    std::optional<kernel::RingPoller> poller_;
    boost::lockfree::queue<Request*> requests_;
    std::atomic<bool> stop_requested_{false};
    std::atomic<bool> reader_started_{false};
    bool stopped_ = false;
    pthread_t reader_{};

    std::atomic<bool> open_failed_{false};
    std::atomic<Error*> open_error_{nullptr};
    std::atomic<uint64_t> threads_opened_{0};
    std::atomic<uint64_t> threads_closed_{0};
    std::atomic<uint64_t> open_failures_{0};
    std::atomic<uint64_t> ring_limit_failures_{0};
    std::atomic<bool> memory_short_{false};   // a ring or its growth was refused for lack of lockable memory
    std::atomic<uint64_t> rings_taken_{0};
    std::atomic<uint64_t> late_opens_{0};
    std::atomic<uint64_t> waiting_at_stop_{0};
    std::atomic<uint64_t> stack_reopens_{0};
    std::atomic<uint64_t> throttles_{0};
    std::atomic<bool> stack_growth_failed_{false};   // a larger ring was refused
    bool lazy_rings_ = false;
    std::atomic<uint64_t> small_rings_{0};
    std::atomic<uint64_t> rings_grown_{0};
    bool ring_growth_failed_ = false;   // reader thread: a full-size ring was refused (logged once)
    bool ring_growth_refused_ = false;  // reader thread: one was refused for lack of lockable memory (logged once)
    uint64_t growth_refused_ns_ = 0;    // reader thread: when the last such refusal was
    std::atomic<uint64_t> reader_cpu_ns_{0};
    std::atomic<pid_t> reader_tid_{0};   // while the reader thread runs
    std::atomic<uint64_t> reader_page_faults_{0};
    bool clock_events_ = true;
    bool switch_events_ = false;
    std::atomic<bool> switches_failed_{false};

    // Reader-thread state.
    std::unordered_map<uint64_t, std::unique_ptr<Ring>> rings_;
    // Every open ring's positions side by side: a cycle looks at these and touches nothing else of
    // a ring without news (an idle thread's ring costs one cache line per cycle).
    struct Watched {
        kernel::RingPositions positions;
        Ring* ring = nullptr;
        kernel::RingReader* reader = nullptr;   // ring->event->ring(), without the two hops
        uint64_t key = 0;
    };
    std::vector<Watched> watched_;
    std::vector<uint32_t> with_news_;   // drain_rings: indexes into watched_ of the rings to drain
    struct Growth {                     // drain_rings: a small ring found filled; whether it lost samples
        uint64_t key = 0;
        bool lost = false;
    };
    std::vector<Growth> to_grow_;
    uint64_t cycles_ = 0;
    uint64_t early_cycles_ = 0;
    uint64_t quiet_wakes_ = 0;
    // A quiet stretch lengthens the cadence (see kMaxQuietShift in sampler.cpp): how many doublings
    // are in force, how many the cycle just run leaves room for (0: it was not quiet; drain_rings
    // and collect say), and how many cycles ran at a lengthened cadence.
    unsigned quiet_shift_ = 0;
    unsigned quiet_room_ = 0;
    uint64_t lengthened_cycles_ = 0;
    std::atomic<uint64_t> published_lengthened_cycles_{0};
    uint64_t ring_looks_ = 0;
    uint64_t ring_drains_ = 0;
    uint64_t stack_bytes_written_ = 0;
    uint64_t stack_bytes_kept_ = 0;
    uint64_t stack_bytes_released_ = 0;   // of stack_bytes_kept_, in samples written (the rest is held)
    std::atomic<bool> start_hold_{false};
    uint64_t last_stack_hole_ = 0;   // the last page faulted in (Converter::on_sample)
    // Per-CPU rings' threads: the highest end of each one's copies so far (bounded: cleared when full).
    static constexpr size_t kMaxCopiedEnds = 4096;
    std::unordered_map<uint32_t, uint64_t> copied_ends_;
    std::atomic<uint64_t> stack_holes_faulted_{0};
    std::atomic<uint64_t> start_fragments_trimmed_{0};
    std::atomic<uint64_t> published_stack_bytes_written_{0};
    std::atomic<uint64_t> published_stack_bytes_kept_{0};
    std::atomic<uint64_t> published_cycles_{0};
    std::atomic<uint64_t> published_early_cycles_{0};
    std::atomic<uint64_t> published_quiet_wakes_{0};
    std::atomic<uint64_t> published_ring_looks_{0};
    std::atomic<uint64_t> published_ring_drains_{0};
    std::atomic<uint64_t> cadence_ns_{0};
    std::unordered_map<pid_t, uint64_t> ring_of_tid_;
    // Ring memory running out: threads waiting for a ring, with their CPU time at the last look;
    // the rings schedule_rings found idle, longest idle last; when the next look is due.
    std::unordered_map<pid_t, uint64_t> waiting_;
    std::vector<uint64_t> takeable_;
    uint64_t next_schedule_ns_ = 0;
    uint64_t next_key_ = 1;
    ReorderBuffer reorder_;
    std::vector<Event> scratch_;
    std::vector<std::unique_ptr<Event>> owned_scratch_;   // the callback queue's events, as allocated
    std::vector<std::vector<uint8_t>> spare_stacks_;
    const std::vector<int> cpus_;
    bool populate_fresh_buffers_ = true;   // reader: off once the kernel turned out not to know the call
    uint64_t in_flight_since_ = 0;   // reader: the oldest in-flight producer at the last collect()
    std::unique_ptr<Converter> converter_;
    std::function<void(const Sample&, SampleWatchCache*)> sample_watch_;
    StackTops* stack_tops_ = nullptr;
    StackTops::Copy stack_tops_copy_;   // the reader's
    // Reader-thread state of set_module_tracker.
    ModuleTracker* modules_ = nullptr;
    std::mutex cycle_hook_mutex_;             // taken by the reader once per cycle, uncontended
    ReaderCycleHook* cycle_hook_ = nullptr;   // under cycle_hook_mutex_
    std::vector<ModuleTracker::Range> code_ranges_;   // the tracker's last scan, as the reader has it
    uint64_t code_ranges_generation_ = 0;
    uint64_t next_rescan_ns_ = 0;
    uint64_t rescan_gap_ns_ = 0;
    uint64_t drains_began_ns_ = 0;  // when the last cycle began reading the rings (the cadence counts from it)
    uint64_t released_until_ = 0;   // the horizon of the last release: events up to it are written
    uint64_t started_ns_ = 0;       // when start() began: no sample is older (the reader enables the events)
    // How long events are held for time-ordering: generous against a callback that stamped its
    // event and was descheduled before emitting it, small against memory (the held samples). A
    // sample published later than that (its CPU held up between the tick and the ring write: seen
    // once, 975 us behind the last event written, on the 2-vCPU guest under load) grows it.
    static constexpr uint64_t kMaxHoldbackNs = 80'000'000;
    HoldBack hold_back_{kInitialHoldbackNs, kMaxHoldbackNs};   // the reader's; published when it stops
    std::atomic<uint64_t> published_late_samples_{0};
    std::atomic<uint64_t> published_late_max_delay_ns_{0};
    std::atomic<uint64_t> published_holdback_ns_{kInitialHoldbackNs};
    std::atomic<kernel::ReaderPriority> reader_priority_{kernel::ReaderPriority::kUnchanged};
    bool busy_lowered_ = false;   // the reader's: real time was given up for a busy window, not refused
    std::atomic<uint64_t> realtime_given_up_{0};
    std::atomic<uint64_t> realtime_regained_{0};
    bool realtime_reader_ = true;
    std::atomic<uint64_t> clock_counted_ns_{0};
    std::atomic<uint64_t> clock_ticked_ns_{0};
    std::atomic<uint64_t> clock_uncounted_ns_{0};
    std::atomic<uint64_t> clock_uncounted_threads_{0};
    std::atomic<uint64_t> clock_cpu_events_{0};
    std::atomic<uint64_t> clock_cpu_counted_ns_{0};
    std::atomic<uint64_t> clock_cpu_ticked_ns_{0};
    std::atomic<uint64_t> clock_skipped_ns_{0};
    std::atomic<uint64_t> module_rescans_{0};
    std::atomic<uint64_t> modules_found_{0};
    // Reader-thread state of account_by_clock: per thread, the CPU time its samples stand for so far.
    struct ClockThread {
        pid_t tid = 0;
        uint64_t counted_ns = 0;    // thread CPU time already turned into samples
        uint64_t last_ns = 0;       // monotonic time of the last look (the samples are spread after it)
    };
    std::vector<ClockThread> clock_threads_;
    std::atomic<uint64_t> clock_threads_added_{0};
    std::atomic<uint64_t> clock_samples_{0};
};

}  // namespace sf::agent
