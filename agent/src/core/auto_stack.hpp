// stack=auto in the agent: one policy (StackController) per run, fed by the live profile's decoded
// traces when there is a live profile, else by where each perf sample's fragment ends below its
// thread's stack top, as the reader reads the sample; it has the reader reopen a thread's events.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string_view>
#include <unordered_map>

#include "stack_controller.hpp"
#include "stack_tops.hpp"
#include "stackfrag/decoder/call_trace.hpp"
#include "stackfrag/events/events.hpp"
#include "stream_writer.hpp"

namespace sf::agent {

class Sampler;
struct SampleWatchCache;

class AutoStack final : public EventTap {
public:
    // `sampler` and `tops` outlive this object. Threads put their stack tops into `tops` as they
    // register (at monotonic time); the live signal judges threads without one alone; with only a
    // recording see observe().
    AutoStack(StackControllerSettings settings, Sampler& sampler, StackTops& tops);

    // Any thread, once `tid` is sampled (its events are opened at the start size, or their opening
    // is queued; what the controller decided for it before is forgotten): its name, for its family
    // (thread_family). A thread whose family ran off its fragments starts at
    // the largest size, and when a thread grows from the base, its family's threads still there
    // grow with it: a pool's threads run the same code, and each one's first deep samples would
    // otherwise be lost to incompleteness before it grows (httpserver's 16 workers, one each).
    // `started_vm`: the thread that created the VM (the launcher's main thread, at VMInit) starts
    // at the largest size: its class loading and static initialisers run deep, and it grew within
    // 11-196 ms of its first sample in every one of 36 recordings (6 workloads, JDK 17 and 25,
    // 1 ms), after 0-8 incomplete samples, the reader's cycle.
    // `opened_bytes`: the size its events were asked to open with (start_bytes; 0: the start
    // size); the reader reopens nothing when the decision is that size.
    void thread_started(uint32_t tid, std::string_view name, bool started_vm = false, uint32_t opened_bytes = 0);
    // Any thread, before `tid`'s events open: the size thread_started would decide for it now, so
    // that they open at it (Sampler::add_thread's start size) instead of being reopened at once.
    uint32_t start_bytes(std::string_view name, bool started_vm) const;

    // Live signal. The decoder thread, for every decoded trace; acts on the profile's Samples (on-
    // and off-CPU). Also tallies how the decode-free signal would have judged the sample.
    void on_trace(const Event& event, const CallTrace& trace);
    // The decoder thread, when the stream says a thread ended (its tid may come back).
    void on_thread_end(uint32_t tid);

    // Decode-free signal (record= only): the reader thread, every perf sample as it is read from
    // its ring (Sampler::set_sample_watch; a thread's samples in time order). Samples of a thread
    // whose stack top is known count as incomplete when their fragment ends further below the top
    // than the entry margin (fragment_short_of_outermost), else as complete; a thread not
    // registered with its top gets it from /proc/self/maps at its first full fragment.
    // With the live signal too (set_head_start), this only grows a thread the controller has not
    // changed yet, at the first sample the check says ran off: the decoder's verdict on that sample
    // comes 25-65 ms later (the reader's cadence, its 20 ms hold-back, the decoder's queue).
    // `cache` (Sampler's, per ring of the sample's thread; null: none) holds the thread's stack top
    // and fragment size as last read, read again only once they changed (see the generations).
    void on_perf_sample(const Sample& sample, SampleWatchCache* cache = nullptr);
    // Live signal's wake-up (the reader thread, a sample whose fragment is full at the start
    // size): whether the fragment ends further below its thread's stack top than the entry margin,
    // so that its walk may run off and the decoder should judge it soon. A thread whose top is not
    // known (the JVM's own) gets it from /proc/self/maps once (short_of_outermost); none found counts as may.
    bool may_run_off(const Sample& sample);
    // Before sampling starts: on_perf_sample gives the live signal a head start (see there).
    void set_head_start(bool head_start) { head_start_ = head_start; }
    // With on_perf_sample: the reader thread, every event it writes; a thread's end forgets it.
    // The event is left as it is.
    void observe(Event&& event) override;

    uint64_t grown() const { return grown_.load(std::memory_order_relaxed); }
    uint64_t shrunk() const { return shrunk_.load(std::memory_order_relaxed); }

    // Live signal only: how the decode-free signal agreed with the decoder on samples of threads
    // with a known top (incomplete and stitched both count as "ran off").
    struct Agreement {
        uint64_t both_ran_off = 0;
        uint64_t both_reached = 0;
        uint64_t only_decoder_ran_off = 0;   // the margin was too large for these
        uint64_t only_check_ran_off = 0;     // too small for these
        // top - (sp + fragment) over full fragments: its largest value on samples that decoded
        // complete, its smallest on ones that ran off; the thread's entry frame lies in between.
        uint64_t max_gap_reached = 0;
        uint64_t min_gap_ran_off = UINT64_MAX;
    };
    Agreement agreement() const;

private:
    // The decoder thread's view of the tops (on_trace): refreshed when their generation moved, so
    // that a sample takes no lock for it.
    uint64_t decoder_top_of(uint32_t tid) {
        decoder_tops_.refresh(tops_);
        return decoder_tops_.top_of(tid);   // 0: unknown
    }
    // Forgets the thread; its top only if it was set before `ended_ns` (StackTops::forget).
    void forget(uint32_t tid, uint64_t ended_ns);
    // `first_only`: only if the controller has not changed the thread's size yet. `bytes_before`:
    // where to put the thread's size before this sample (under the same lock).
    void apply(uint32_t tid, TraceStatus status, size_t fragment_bytes, uint64_t sample_ns, bool first_only,
               uint32_t* bytes_before = nullptr);
    // The thread's top and controller size, from `cache` while their generations say unchanged.
    std::optional<uint64_t> cached_top(uint32_t tid, SampleWatchCache& cache) const;
    uint32_t cached_bytes(uint32_t tid, SampleWatchCache& cache) const;
    // After the controller changed (under controller_mutex_): publishes its generation.
    void publish_controller() { bytes_generation_.store(controller_.generation(), std::memory_order_release); }
    // Has the reader reopen the thread's events for `change` (and counts it).
    void request(const StackChange& change, uint64_t sample_ns);
    // The decode-free check on `sample`: nullopt when its thread's top is unknown.
    std::optional<bool> short_of_outermost(const Sample& sample, SampleWatchCache& cache);

    mutable std::mutex controller_mutex_;   // the decoder thread and the reader (head start)
    StackController controller_;
    // When thread_started opened each live thread's own events (under controller_mutex_): a sample
    // taken before, by the per-CPU events that sample from the agent's load until VMInit, judges a
    // fragment size the thread no longer has. Such samples reach the decoder after the thread's
    // start when the reader holds them until the start scan is done; the VM's main thread, judged
    // by its shallow samples in Threads::create_vm, then shrank to 8 KB and ran off it (groundtruth
    // at 100 us: 1,141 of 137,779 samples sp_out_of_fragment).
    std::unordered_map<uint32_t, uint64_t> started_ns_;
    Sampler& sampler_;
    bool head_start_ = false;
    // The decoder thread, the reader and starting threads count.
    std::atomic<uint64_t> grown_{0};
    std::atomic<uint64_t> shrunk_{0};
    StackTops& tops_;
    // Bumped at every change of the controller's threads, as StackTops' generation at every change
    // of the tops: a SampleWatchCache read at the current generations is still right. From 1 on (0
    // is an empty cache's).
    std::atomic<uint64_t> bytes_generation_{1};
    StackTops::Copy decoder_tops_;   // the decoder thread's alone
    // Written by the decoder thread alone, read at the stop: counters each sample bumps without a
    // lock, the gaps (set only on full fragments, rare once fragments are cut) under one.
    std::atomic<uint64_t> both_ran_off_{0}, both_reached_{0}, only_decoder_ran_off_{0}, only_check_ran_off_{0};
    mutable std::mutex agreement_mutex_;
    uint64_t max_gap_reached_ = 0;            // under agreement_mutex_ (Agreement's fields)
    uint64_t min_gap_ran_off_ = UINT64_MAX;
};

}  // namespace sf::agent
