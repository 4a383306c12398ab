#include "auto_stack.hpp"

#include <algorithm>
#include <variant>
#include <vector>

#include "log.hpp"
#include "stackfrag/base/clock.hpp"
#include "sampler.hpp"
#include "stackfrag/kernel/proc_maps.hpp"

namespace sf::agent {

AutoStack::AutoStack(StackControllerSettings settings, Sampler& sampler, StackTops& tops)
    : controller_(settings), sampler_(sampler), tops_(tops) {}

void AutoStack::forget(uint32_t tid, uint64_t ended_ns) {
    {
        std::lock_guard<std::mutex> lock(controller_mutex_);
        controller_.forget(tid);
        started_ns_.erase(tid);
        publish_controller();
    }
    tops_.forget(tid, ended_ns);
}

void AutoStack::on_thread_end(uint32_t tid) { forget(tid, UINT64_MAX); }

void AutoStack::apply(uint32_t tid, TraceStatus status, size_t fragment_bytes, uint64_t sample_ns, bool first_only,
                      uint32_t* bytes_before) {
    std::optional<StackChange> change;
    std::vector<StackChange> family;
    {
        std::lock_guard<std::mutex> lock(controller_mutex_);
        if (bytes_before != nullptr) *bytes_before = controller_.bytes_of(tid);
        if (first_only && controller_.tracks(tid)) return;
        if (const auto started = started_ns_.find(tid); started != started_ns_.end() && sample_ns < started->second) return;
        change = controller_.on_sample(tid, status, fragment_bytes);
        family = controller_.take_family_changes();
        publish_controller();
    }
    if (change) request(*change, sample_ns);
    for (const StackChange& sibling : family) request(sibling, sample_ns);
}

void AutoStack::request(const StackChange& change, uint64_t sample_ns) {
    (change.new_bytes > change.old_bytes ? grown_ : shrunk_).fetch_add(1, std::memory_order_relaxed);
    sampler_.request_stack(static_cast<pid_t>(change.tid), change.new_bytes);
    // The sample's age says how long the way from the ring to this decision took (reader cadence,
    // hold-back, the decoder's queue).
    SF_LOG_DEBUG("stack=auto: thread %u fragment %u -> %u bytes (%s; the deciding sample is %.1f ms old)", change.tid,
                 change.old_bytes, change.new_bytes, change.why,
                 static_cast<double>(monotonic_ns() - std::min(sample_ns, monotonic_ns())) / 1e6);
}

uint32_t AutoStack::start_bytes(std::string_view name, bool started_vm) const {
    const std::string family = thread_family(name);
    std::lock_guard<std::mutex> lock(controller_mutex_);
    return controller_.start_bytes(family, started_vm);
}

void AutoStack::thread_started(uint32_t tid, std::string_view name, bool started_vm, uint32_t opened_bytes) {
    std::optional<StackChange> change;
    {
        std::lock_guard<std::mutex> lock(controller_mutex_);
        // Its events open at the start size now: what was decided before had no event of its own
        // to change (samples of the per-CPU events that sample from the agent's load until VMInit).
        controller_.forget(tid);
        started_ns_[tid] = monotonic_ns();
        change = controller_.on_thread_started(tid, thread_family(name));
        if (started_vm && !change) change = controller_.start_large(tid, "the thread that started the VM runs deep at first");
        publish_controller();
    }
    // A change to the size its events opened at reopens nothing (Sampler::set_stack), but the
    // request still has validate's copies follow.
    const uint32_t base = controller_.settings().base_bytes;
    if (change) {
        request(*change, monotonic_ns());
    } else if (opened_bytes > base) {
        // Its family settled between start_bytes and now: back to the start size.
        sampler_.request_stack(static_cast<pid_t>(tid), base);
    }
}

void AutoStack::on_trace(const Event& event, const CallTrace& trace) {
    const auto* sample = std::get_if<Sample>(&event);
    // (A thread clock's sample has no fragment to judge.)
    if (sample == nullptr || sample->source == SampleSource::kSignal || sample->source == SampleSource::kThreadClock) return;
    // How the decoder's verdict and the decode-free check agree (the stop summary's), counted
    // without a lock; the gaps over full fragments need the thread's size before this sample
    // changes it, which apply() reads under the lock it takes anyway.
    const uint64_t top = decoder_top_of(sample->tid);
    const bool judged = top != 0 && trace.status != TraceStatus::kFailed;
    const bool decoder = trace.status == TraceStatus::kIncomplete || trace.status == TraceStatus::kStitched;
    const uint64_t end = sample->stack_sp + sample->stack.size();
    if (judged) {
        const bool check = fragment_short_of_outermost(sample->stack_sp, sample->stack.size(), top,
                                                       controller_.settings().entry_margin_bytes);
        (decoder ? (check ? both_ran_off_ : only_decoder_ran_off_) : (check ? only_check_ran_off_ : both_reached_))
            .fetch_add(1, std::memory_order_relaxed);
    }
    const bool gap_wanted = judged && end <= top;
    uint32_t bytes = 0;
    apply(sample->tid, trace.status, sample->stack.size(), sample->time_ns, false, gap_wanted ? &bytes : nullptr);
    if (gap_wanted && sample->stack.size() >= std::min(bytes, controller_.settings().largest_fragment)) {
        std::lock_guard<std::mutex> lock(agreement_mutex_);
        if (decoder) {
            min_gap_ran_off_ = std::min(min_gap_ran_off_, top - end);
        } else {
            max_gap_reached_ = std::max(max_gap_reached_, top - end);
        }
    }
}

std::optional<uint64_t> AutoStack::cached_top(uint32_t tid, SampleWatchCache& cache) const {
    if (const uint64_t generation = tops_.generation(); cache.top_generation != generation) {
        // Read after the generation: a change in between only makes the next sample read again.
        const std::optional<uint64_t> top = tops_.lookup(tid);
        cache.top_known = top.has_value();
        cache.top = top.value_or(0);
        cache.top_generation = generation;
    }
    return cache.top_known ? std::optional<uint64_t>(cache.top) : std::nullopt;
}

uint32_t AutoStack::cached_bytes(uint32_t tid, SampleWatchCache& cache) const {
    if (cache.bytes_generation != bytes_generation_.load(std::memory_order_acquire)) {
        std::lock_guard<std::mutex> lock(controller_mutex_);
        cache.bytes = controller_.bytes_of(tid);
        cache.bytes_generation = controller_.generation();
    }
    return cache.bytes;
}

void AutoStack::on_perf_sample(const Sample& sample, SampleWatchCache* cache) {
    if (sample.source == SampleSource::kSignal) return;
    SampleWatchCache none;
    SampleWatchCache& facts = cache != nullptr ? *cache : none;
    const std::optional<bool> ran_off = short_of_outermost(sample, facts);
    if (!ran_off) return;
    if (head_start_) {
        // Only to grow a thread the decoder has not judged: its verdicts (stitched samples need
        // no more) steer from there.
        const bool full =
            sample.stack.size() >= std::min(cached_bytes(sample.tid, facts), controller_.settings().largest_fragment);
        if (*ran_off && full) apply(sample.tid, TraceStatus::kIncomplete, sample.stack.size(), sample.time_ns, true);
        return;
    }
    apply(sample.tid, *ran_off ? TraceStatus::kIncomplete : TraceStatus::kComplete, sample.stack.size(), sample.time_ns,
          false);
}

std::optional<bool> AutoStack::short_of_outermost(const Sample& sample, SampleWatchCache& cache) {
    std::optional<uint64_t> top = cached_top(sample.tid, cache);
    if (!top) {
        // A thread the agent did not see start (the JVM's own, those running before an attach).
        // Only a full fragment may be short of the top: a shallow thread's copy stops at its
        // stack's end, so it is never looked up. Once per thread: /proc/self/maps, which names
        // the mapping that holds its sp (no VM memory is read).
        const StackControllerSettings& settings = controller_.settings();
        if (sample.stack.size() < std::min(cached_bytes(sample.tid, cache), settings.largest_fragment)) {
            return std::nullopt;
        }
        top = kernel::read_mapping_end_at(sample.stack_sp);
        tops_.remember(sample.tid, *top, sample.time_ns);
    }
    if (*top == 0) return std::nullopt;
    return fragment_short_of_outermost(sample.stack_sp, sample.stack.size(), *top,
                                       controller_.settings().entry_margin_bytes);
}

bool AutoStack::may_run_off(const Sample& sample) {
    SampleWatchCache none;
    const std::optional<bool> ran_off = short_of_outermost(sample, none);
    return !ran_off || *ran_off;
}

void AutoStack::observe(Event&& event) {
    if (const auto* thread = std::get_if<ThreadInfo>(&event); thread && thread->ended) {
        forget(thread->tid, thread->time_ns);
    }
}

AutoStack::Agreement AutoStack::agreement() const {
    Agreement out;
    {
        std::lock_guard<std::mutex> lock(agreement_mutex_);
        out.max_gap_reached = max_gap_reached_;
        out.min_gap_ran_off = min_gap_ran_off_;
    }
    out.both_ran_off = both_ran_off_.load(std::memory_order_relaxed);
    out.both_reached = both_reached_.load(std::memory_order_relaxed);
    out.only_decoder_ran_off = only_decoder_ran_off_.load(std::memory_order_relaxed);
    out.only_check_ran_off = only_check_ran_off_.load(std::memory_order_relaxed);
    return out;
}

}  // namespace sf::agent
