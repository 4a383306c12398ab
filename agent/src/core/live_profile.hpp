// The agent's live profile: the reader thread offers every event of the ordered stream (what the
// StreamWriter sees, in the same order) to a bounded lock-free queue; a decoder thread feeds them
// to the StreamDecoder that `stackfrag replay` uses and adds the traces to a Cct, which it writes
// at exit, on request (attach `dump`) and every `loop` interval. Testable without a JVM: the
// clock is injectable and poll_once() runs the decoder's work on the caller's thread.
#pragma once

#include <pthread.h>

#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include <boost/lockfree/spsc_queue.hpp>

#include "stackfrag/base/heap_trim.hpp"
#include "stackfrag/base/result.hpp"
#include "stackfrag/decoder/stream_decoder.hpp"
#include "stackfrag/events/events.hpp"
#include "stackfrag/profile/cct.hpp"
#include "stackfrag/profile/coverage.hpp"
#include "stackfrag/profile/trace_filter.hpp"
#include "options.hpp"
#include "stack_cut.hpp"
#include "stack_tops.hpp"
#include "stream_writer.hpp"

namespace sf::agent {

// Time sources of the profile, replaceable by tests.
class LiveClock {
public:
    virtual ~LiveClock() = default;
    virtual uint64_t monotonic_ns() const = 0;   // rotation deadlines
    virtual int64_t unix_seconds() const = 0;    // %t in file names, the profile's start time
};
const LiveClock& system_live_clock();

// `pattern` with %p = pid, %t = local time YYYYmmdd-HHMMSS of `unix_seconds`, %% = %.
std::string expand_output_path(std::string_view pattern, uint32_t pid, int64_t unix_seconds);
// Where the off-CPU profile of `path` goes: ".offcpu" before the format's extension
// (profile.html -> profile.offcpu.html, p.pb.gz -> p.offcpu.pb.gz; no extension: appended).
std::string off_cpu_path(std::string_view path);

struct LiveSettings {
    std::string file;          // output pattern (%p, %t); empty: nothing is written
    uint64_t loop_ns = 0;      // > 0: write and start a new profile every loop_ns
    std::string title;         // the html page's title; empty: the exporter's default
    ThreadGrouping group = ThreadGrouping::kNone;   // group=
    uint32_t pid = 0;          // for %p
    // Room for every sample a long start held for VMInit (up to 256 MB, most fragments of it 4 KB:
    // Sampler's start hold), released at once and exempt from queue_bytes: with 16,384 slots a
    // pre-touched 4 GB heap's start lost 8,900 of its 25,000 samples to the full queue. 512 KB of
    // pointers.
    size_t queue_slots = 65536;
    // Stack bytes of queued samples beyond which samples are dropped, bounding memory when the
    // decoder falls behind (16 KB fragments: 4096 samples).
    size_t queue_bytes = 64u << 20;
    // Metadata events (code, methods) are never dropped for a full queue: they wait here, on the
    // reader's side, in order; past this many the live map is incomplete and we say so.
    size_t backlog_limit = 1'000'000;
    StreamDecoderOptions decoder;
    // events=switch: context-switch samples (SampleSource::kPerfSwitch) go to a second tree, written
    // to off_cpu_path(file) beside the on-CPU one, also when it is empty. Without it such samples
    // still get their own tree, written only when there are some.
    bool off_cpu = false;
    // Called on the decoder thread for every trace the stream decoder produces, with how long its
    // decode took, before the profile takes it (interval=auto watches the top frames).
    std::function<void(const Event&, const CallTrace&, uint64_t decode_ns)> on_trace;
    // The same, for watchers that need no answer within a reader cycle (stack=auto): the reader
    // does not wake the decoder thread every cycle for them. And each thread's end, from the stream.
    std::function<void(const Event&, const CallTrace&)> watch_trace;
    std::function<void(uint32_t tid)> on_thread_end;
    // Where the reader cuts fragments: the decoder thread publishes there, per thread, the end of
    // what its complete walks read (StackCutLearner). Null: fragments are cut at the threads'
    // tops only.
    StackTops* stack_tops = nullptr;
    // stack=auto: a sample whose fragment has this many bytes (full at the start size: its thread
    // may be deeper) wakes the decoder at the end of the reader's cycle instead of after ~256
    // samples or a second, so that a deep thread's fragment grows within tens of milliseconds.
    uint32_t wake_on_fragment_bytes = 0;
    // With it, such a sample wakes the decoder only if this says its walk may run off (the
    // reader thread; AutoStack::may_run_off): a Java thread's fragment is full at any depth, as
    // its stack mapping goes on above it, and waking every cycle left the decoder batches of a
    // few samples, each decoded with cold caches.
    std::function<bool(const Sample&)> may_run_off;
    // focus= / exclude=: samples it drops are decoded and counted, never added to the tree.
    profile::TraceFilter filter;
    // push=: called on the decoder thread with each period's on-CPU tree (its info() filled as
    // for a file) when the period ends: at each loop rotation whose file was written (a failed
    // write keeps the period open) and at stop. Not for empty periods, nor for dumps.
    std::function<void(const profile::Cct&, int64_t from_unix, int64_t until_unix)> on_period;
    // Methods arrive without names (MethodBatch): the trees name a method's frames once a
    // NamedMethod for it came through the stream. `want_names` is called on the decoder thread,
    // without blocking, with the methods a tree referred to for the first time, after each
    // batch; whoever can ask the JVM emits their NamedMethods into the stream. At stop,
    // `names_now` is called on the thread that stops the profile (attached to the VM) for the
    // methods the trees still lack, and its answers are applied before the files are written.
    bool lazy_names = false;
    std::function<void(std::vector<uint64_t> method_ids)> want_names;
    // Called on the decoder thread, without blocking and at most once a second, when a walk failed
    // on a Method* no event announced (unknown_method): whoever can look for classes the JVM
    // prepared without a ClassPrepare does so now, not at its next poll.
    std::function<void()> unknown_method;
    std::function<std::vector<NamedMethod>(const std::vector<uint64_t>& method_ids)> names_now;
    // Once a backlog of at least this many bytes of fragment buffers has drained (the queue's
    // buffers down to the spares' ceiling again), the decoder thread asks the C allocator to give
    // its free pages back, at most once a minute. A start held for VMInit with a pre-touched heap
    // queues 100-250 MB of fragments at once, most of them 4 KB: their buffers straddle pages,
    // release_buffer_pages finds no whole page in them, and the allocator kept them (a 4 GB
    // pre-touched start: 85-113 MB resident for good). 0: never.
    size_t trim_after_backlog_bytes = 32u << 20;
    // The trim; empty: trim_free_heap() (malloc_trim). Tests measure without touching the heap.
    std::function<HeapTrim()> trim_heap;
};

// The live profile the options ask for, or nullopt for a run that only records (record= without
// file=, interval=auto or push=: decoded offline, as cheap as recording alone). A run with neither
// file= nor record= decodes live too: the stop summary then says what was hot. The callbacks
// (on_trace, on_period) are the caller's to wire.
std::optional<LiveSettings> live_settings_from(const AgentOptions& options, uint32_t pid);

struct LiveCounts {
    uint64_t samples = 0;          // Sample and JvmtiTrace events offered
    uint64_t jvmti_traces = 0;     // of which JvmtiTrace (mode=jvmti)
    uint64_t decoder_cpu_ns = 0;   // the decoder thread's CPU time, once it has finished
    uint64_t decoder_page_faults = 0;   // and its page faults
    uint64_t threads_cut = 0;          // threads whose fragments the reader cuts where their walks stop reading
    uint64_t threads_given_back = 0;   // of which cut no more: their walks ran off at the cut
    uint32_t stack_bytes = 0;      // the fragment size the VM was sampled with (0 unknown)
    uint64_t dropped = 0;          // samples not queued: queue or byte budget full, or no memory
    uint64_t metadata_dropped = 0; // non-sample events lost past the backlog limit
    // The most fragment bytes the live queue held at once (what queue_bytes bounds), and the most
    // buffer bytes (their capacities: what they took of the process's memory).
    uint64_t peak_queued_bytes = 0;
    uint64_t peak_queued_buffer_bytes = 0;
    uint64_t buffers_released = 0;   // fragment buffers of a backlog whose pages went back to the kernel
    uint64_t heap_trims = 0;         // the allocator asked to give free pages back after a backlog
    uint64_t heap_trimmed_bytes = 0; // resident memory those trims gave back
    uint64_t heap_trim_ns = 0;       // and the time they took
    uint64_t lost = 0;             // the kernel's Lost counts in the stream
    uint64_t decoded = 0;          // complete + incomplete
    uint64_t incomplete = 0;
    uint64_t failed = 0;
    profile::FilterCounts filtered;   // decoded samples the filter dropped (in decoded, not in the tree)
    profile::Coverage coverage;       // every sample offered (dropped ones too) against the process's CPU time
    std::map<std::string, uint64_t> failed_by_reason;
    RetryStats retried;            // samples decoded a second time, after late code announcements
    StitchStats stitching;         // incomplete walks completed with an earlier snapshot (in decoded)
    uint64_t top_only = 0;         // the profiler's own threads' samples: their top frame alone (in decoded)
    std::vector<std::pair<std::string, uint64_t>> top_self;   // method/symbol, self samples; most first
    uint64_t files_written = 0;
    uint64_t write_errors = 0;
    // Context-switch samples: offered (not in `samples`), decoded, failed, top blocking frames.
    uint64_t off_cpu_samples = 0;
    uint64_t off_cpu_decoded = 0;
    uint64_t off_cpu_failed = 0;
    std::vector<std::pair<std::string, uint64_t>> off_cpu_top_self;
    // The decoder thread was still at work (a stop that timed out): only the counts kept in
    // atomics above `decoded` are filled; the rest belong to that thread and were not read.
    bool decoder_running = false;
};

class LiveProfile final : public EventTap {
public:
    explicit LiveProfile(LiveSettings settings, const LiveClock& clock = system_live_clock());
    ~LiveProfile() override;
    LiveProfile(const LiveProfile&) = delete;
    LiveProfile& operator=(const LiveProfile&) = delete;

    // The one producer (the reader thread): copies the event into the queue; never blocks.
    void observe(Event&& event) override;
    // The same, the event queued in its own allocation (no copy into a spare).
    void observe_owned(std::unique_ptr<Event> event) override;
    void batch_end() override;
    void observe(const Event& event) { observe(Event(event)); }
    // The reader thread: the fragment buffer of a sample the decoder thread is done with, one of
    // at least `min_capacity` bytes where there is one.
    bool spare_stack(std::vector<uint8_t>& out, size_t min_capacity) override;

    // Samples taken up to `time_ns` are never dropped for the queue's byte bound, nor count
    // against it: the reader held them while the VM was announced (sampling from the agent's load)
    // and releases them at once. Their memory is already taken, bounded by the hold's time;
    // dropping them would lose the JVM's start, not bound anything. Any thread, before the hold ends.
    void keep_held_samples_until(uint64_t time_ns) { held_until_ns_.store(time_ns, std::memory_order_release); }

    bool lazy_names() const { return settings_.lazy_names; }
    // The decoder thread's CPU time now (while it runs), else as counts() gives it.
    uint64_t decoder_cpu_now() const;

    // Starts the decoder thread (a plain pthread, every signal blocked).
    Status start();
    // Any thread: has the decoder thread write the current profile to `path` (a pattern; empty:
    // the settings' file) within `timeout_ms`; returns the path written.
    Result<std::string> dump(const std::string& path, int timeout_ms);
    // After the producer has stopped: decodes what is queued (bounded by `timeout_ms`), writes the
    // final profile when a file is set (`final_file` replaces the settings' one), ends the decoder
    // thread. Idempotent.
    void stop(int timeout_ms, const std::string& final_file = {});

    // The decoder thread's work, for tests without the thread: drains the queue, serves dump
    // requests, rotates. Returns whether any event was consumed.
    bool poll_once();

    bool running() const { return started_.load() && !stopped_.load(); }
    // Any thread, before stop(): wakes the decoder thread and waits, at most `timeout_ms`, until it
    // has taken every queued sample. The agent calls it at VMDeath while sampling goes on, so that
    // decoding the backlog is sampled CPU time instead of time after the last sample. Returns
    // whether the queue emptied in time (false also when the decoder thread is not running).
    bool catch_up(int timeout_ms);
    const LiveSettings& settings() const { return settings_; }
    uint64_t samples_offered() const { return samples_.load(std::memory_order_relaxed); }
    uint64_t samples_decoded() const { return decoded_total_.load(std::memory_order_relaxed); }
    // Decoded events waiting to be filled again by observe() (tests).
    size_t spare_events() const { return spare_events_.read_available(); }
    static constexpr size_t kSpareEvents = 1024;   // at most (about a batch's worth, kWakeBytes)
    // Decoded samples' fragment buffers go back to the reader (their bytes cleared), up to a bound
    // in bytes: the reader fills them again instead of allocating a buffer per sample that the
    // decoder thread then frees (malloc and free on two threads, and fresh pages to fault in after
    // the reader's heap shrank). The bound follows the decoder's recent wake-ups: the most bytes of
    // buffers one of the last kSpareWakeups handed back, and a quarter more, within
    // [kMinSpareBytes, kMaxSpareBytes]. Fragments cut at their thread's stack top are a few KB,
    // each in a buffer of 16 KB, and the kWakeBytes that wake the decoder are then 600-1,000
    // buffers: with room for 512 only, the decoder freed the rest of each batch and the reader
    // allocated and faulted in as many again (a 2-thread groundtruth or microbenchmark run: a
    // quarter of all samples). A fixed 16 MB instead kept the start's backlog for good (groundtruth:
    // 13 MiB more resident than 512 buffers).
    static constexpr size_t kMinSpareBytes = 8u << 20;    // 512 buffers of 16 KB
    static constexpr size_t kMaxSpareBytes = 16u << 20;   // a quarter of what the queue may hold
    static constexpr size_t kSpareWakeups = 8;
    // After poll_once() found nothing: the bound the last wake-ups' hand-backs give (decoder thread).
    size_t spare_bound_bytes() const { return spare_bound_bytes_; }
    // After stop() (or from the thread calling poll_once): the whole run, over all rotations.
    // Safe from any thread once stop() returned; if the decoder thread did not finish in time, says
    // so (decoder_running) rather than read what it still writes.
    LiveCounts counts(size_t top = 10) const;
    // The stop summary block for the log.
    std::string summary_text(size_t top = 10) const;
    // The current interval's tree (tests; decoder thread or after stop()).
    const profile::Cct& cct() const { return *cct_; }
    // The current interval's off-CPU tree (context-switch samples, one count per switch).
    const profile::Cct& off_cpu_cct() const { return *off_cpu_cct_; }

private:
    struct DumpRequest;
    static void* thread_main(void* self);
    void run();
    void consume(Event&& event);
    bool drain_batch();
    bool push(Event* event);
    void flush_backlog();
    Status write_current(const std::string& pattern, int64_t unix_seconds, std::string* written);
    void rotate();
    void fill_info();
    void publish_period();
    void fold_interval();
    void serve_requests();
    void finish();
    // Asks for the names the trees still lack (the stopping thread answers) and applies them.
    void name_before_stop();
    // Renames the trees' frames whose methods were named since they were added (resolve_names).
    void name_trees();
    void hand_over_wanted_names();
    void report_unknown_method();            // decoder thread
    uint64_t unknown_method_reported_ns_ = 0;
    // Before a mid-run write (loop rotation, dump): true while the trees refer to methods whose
    // names were asked for and have not come, for at most kNamesHoldNs from the first call.
    bool hold_for_names();
    bool names_pending() const;
    uint64_t names_hold_until_ = 0;   // decoder thread; 0: not holding
    StackCutLearner cut_learner_;     // decoder thread
    std::atomic<uint64_t> threads_cut_{0}, threads_given_back_{0};
    void learn_cut(const Event& event, const CallTrace& trace);
    std::atomic<bool> holding_names_{false};   // for the reader: a NamedMethod wakes the decoder
    std::unordered_set<uint64_t> answered_names_;   // ids a NamedMethod came for (named or not)
    void new_cct();
    // Samples the tree will never hold: the kernel's Lost counts and the live queue's drops.
    uint64_t lost_since_start() const { return lost_total_.load() + dropped_.load(); }

    const LiveSettings settings_;
    const LiveClock& clock_;

    boost::lockfree::spsc_queue<Event*> queue_;
    std::atomic<uint64_t> held_until_ns_{0};   // keep_held_samples_until
    // Of queued_bytes_, the held samples'. Signed: a sample queued before keep_held_samples_until
    // (the reader's hold gave up after its bound) is subtracted when taken but was never added.
    std::atomic<int64_t> held_queued_bytes_{0};
    bool was_held(const Event& event) const;
    // Events the decoder thread is done with go back to the reader to be filled again, so that an
    // event costs no allocation on the reader and no free on the decoder thread (each of which,
    // crossing threads, costs more than a same-thread pair). The decoder thread pushes, the reader
    // pops; beyond its capacity they are freed.
    boost::lockfree::spsc_queue<Event*> spare_events_;
    Event* owned_event(Event&& event);
    // observe()'s body: `event` is the event, `boxed` (or null) its own allocation to queue.
    void accept(Event& event, std::unique_ptr<Event> boxed);
    // The event to queue: `boxed` if there is one, else `event` moved into a spare.
    Event* to_queue(Event& event, std::unique_ptr<Event>& boxed) {
        return boxed ? boxed.release() : owned_event(std::move(event));
    }
    void recycle(Event* event);
    // Fragment buffers on their way back: the decoder thread pushes under the mutex, the reader
    // takes them all at once when its own are used up. Spare events carried them before, behind
    // hundreds of code loads and methods at low rates and dropped with a full spare queue: at
    // 100/s a third of the samples on xalan got a fresh buffer (page faults, ~5 µs each here).
    // The decoder thread gathers them (`returning_`) and hands them over kHandBackStacks at a time
    // and at the end of each batch: one lock per 64 samples, not one per sample.
    static constexpr size_t kHandBackStacks = 64;
    void hand_back_stacks();
    std::vector<std::vector<uint8_t>> returning_;   // decoder thread only
    std::mutex returned_stacks_mutex_;
    std::vector<std::vector<uint8_t>> returned_stacks_;
    std::vector<std::vector<uint8_t>> reader_stacks_;   // reader only
    std::atomic<size_t> held_bytes_{0};                  // in both: the spares' capacities
    // Decoder thread: buffer bytes handed back since the wake-up began, and by the last wake-ups.
    size_t wakeup_buffer_bytes_ = 0;
    std::array<size_t, kSpareWakeups> recent_wakeup_bytes_{};
    size_t recent_wakeup_at_ = 0;
    size_t spare_bound_bytes_ = kMinSpareBytes;
    void end_wakeup();
    std::atomic<size_t> queued_bytes_{0};
    std::atomic<size_t> queued_buffer_bytes_{0};   // the queued fragments' buffers (capacities)
    std::atomic<size_t> peak_queued_bytes_{0}, peak_queued_buffer_bytes_{0};
    std::atomic<uint64_t> buffers_released_{0};   // written by the decoder thread: pages given back (release_buffer_pages)
    // Decoder thread: the most buffer bytes queued since the last trim (as its batches began); the trims.
    size_t backlog_buffer_bytes_ = 0;
    uint64_t last_trim_ns_ = 0;
    bool finishing_ = false;   // finish() drains what is left
    static constexpr uint64_t kMinTrimSpacingNs = 60'000'000'000;
    void trim_after_backlog();
    std::atomic<uint64_t> heap_trims_{0}, heap_trimmed_bytes_{0}, heap_trim_ns_{0};
    std::deque<Event*> backlog_;   // producer side only

    std::atomic<uint64_t> samples_{0};
    std::atomic<uint64_t> jvmti_traces_{0};
    std::atomic<uint64_t> decoder_cpu_ns_{0};
    std::atomic<uint64_t> decoder_page_faults_{0};
    std::atomic<uint64_t> dropped_{0};
    std::atomic<uint64_t> metadata_dropped_{0};
    std::atomic<uint64_t> decoded_total_{0};
    std::atomic<uint64_t> lost_total_{0};
    profile::CoverageTally coverage_;   // the producer's (reader thread); read after stop()

    // Decoder-thread state.
    class Names;
    std::unique_ptr<StreamDecoder> stream_;
    std::unique_ptr<Names> names_;
    std::unique_ptr<profile::Cct> cct_;
    std::unique_ptr<profile::Cct> off_cpu_cct_;
    std::atomic<uint64_t> off_cpu_offered_{0};
    profile::TraceCounts off_cpu_past_counts_;
    std::map<std::string, uint64_t> off_cpu_past_self_;
    void wake_if_idle();
    std::chrono::nanoseconds idle_wait() const;
    void write_off_cpu(const std::string& on_cpu_path);
    void fold_off_cpu();
    int64_t interval_start_unix_ = 0;
    uint64_t interval_start_ns_ = 0;
    uint64_t next_rotation_ns_ = 0;
    bool broken_ = false;   // out of memory once: events are drained and discarded
    bool full_fragment_seen_ = false;   // reader thread: see LiveSettings::wake_on_fragment_bytes
    profile::TraceCounts past_counts_;
    std::unordered_map<uint32_t, std::string> thread_names_;   // from ThreadInfo, for every new tree
    std::map<std::string, uint64_t> past_self_;
    uint64_t files_written_ = 0;
    uint64_t write_errors_ = 0;
    profile::TraceFilter filter_;        // settings_.filter's copy, which remembers its matches
    profile::FilterCounts filtered_;     // the whole run
    uint64_t filtered_incomplete_ = 0;   // of those, incomplete traces
    uint64_t lost_at_interval_start_ = 0;   // lost_since_start() when the current interval began

    mutable std::mutex mutex_;
    std::condition_variable wake_;
    // The decoder thread sleeps until the reader hands it something (or a request, a rotation or
    // the bound of its wait comes), rather than polling its queue hundreds of times a second.
    std::atomic<bool> idle_{false};
    std::condition_variable done_;
    std::deque<std::shared_ptr<DumpRequest>> requests_;
    bool stop_requested_ = false;
    std::string final_file_;
    bool finished_ = false;
    // The stop's naming round (under mutex_): the decoder thread asks, the stopping thread answers.
    std::vector<uint64_t> final_names_wanted_;
    std::vector<NamedMethod> final_names_;
    bool final_names_asked_ = false;
    bool final_names_taken_ = false;
    bool final_names_ready_ = false;

    pthread_t thread_{};
    std::atomic<pid_t> decoder_tid_{0};   // while the decoder thread runs
    std::atomic<bool> started_{false};
    std::atomic<bool> stopped_{false};
};

}  // namespace sf::agent
