#include "stackfrag/decoder/stream_decoder.hpp"

#include <chrono>
#include <utility>

#include "stackfrag/hotspot/thread_names.hpp"

namespace sf {

namespace {

const Sample* sample_of(const Event& event) {
    if (const auto* s = std::get_if<Sample>(&event)) return s;
    if (const auto* o = std::get_if<Oracle>(&event)) return &o->sample;
    return nullptr;
}

// Samples and oracles are decoded; JVMTI traces are taken as they are. All three become a CallTrace
// in stream order, so a recording in mode=jvmti replays through the same steps as one with perf.
bool becomes_trace(const Event& event) {
    return sample_of(event) != nullptr || std::holds_alternative<JvmtiTrace>(event);
}

// A JVMTI stack trace needs no decoding: the VM named its frames itself. How each frame ran, it
// did not say, so every frame is FrameKind::kJava.
void trace_from_jvmti(const JvmtiTrace& in, CallTrace& out) {
    out.time_ns = in.time_ns;
    out.tid = in.tid;
    out.status = in.truncated ? TraceStatus::kIncomplete : TraceStatus::kComplete;
    out.failure = FailReason::kNone;
    out.frames.clear();
    for (const MethodBci& m : in.frames) out.frames.push_back(Frame{FrameKind::kJava, false, m.method_id, m.bci, 0, 0, {}});
}

}  // namespace

bool is_profile_sample(const Event& event) {
    return std::holds_alternative<Sample>(event) || std::holds_alternative<JvmtiTrace>(event);
}

StreamDecoder::StreamDecoder(StreamDecoderOptions options, OnTrace on_trace)
    : options_(options), on_trace_(std::move(on_trace)), decoder_(map_, options.decoder) {}

bool StreamDecoder::decode(const Event& event, bool first_attempt) {
    using Clock = std::chrono::steady_clock;
    const auto begin = Clock::now();
    const uint64_t unannounced_before = decoder_.stats().unannounced_code_steps;
    if (const auto* jvmti = std::get_if<JvmtiTrace>(&event)) trace_from_jvmti(*jvmti, trace_);
    else decoder_.decode(*sample_of(event), trace_);
    const auto root = roots_.find(trace_.tid);
    if (root != roots_.end()) trace_.root = root->second;
    else trace_.root.clear();
    last_decode_ns_ = static_cast<uint64_t>(
        std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - begin).count());
    if (first_attempt && worth_retrying(event, unannounced_before)) return false;
    if (!first_attempt) {
        ++retry_stats_.retried;
        if (!worth_retrying(event, unannounced_before)) ++retry_stats_.resolved;
    }
    if (on_trace_) on_trace_(event, trace_);
    return true;
}

// What a later announcement can change: a failed walk (except for want of a VmInfo or of any
// stack) and a walk through code nobody announced. A JVMTI trace is final.
bool StreamDecoder::worth_retrying(const Event& event, uint64_t unannounced_before) const {
    if (options_.retry_ns == 0 || sample_of(event) == nullptr) return false;
    if (decoder_.stats().unannounced_code_steps != unannounced_before) return true;
    return trace_.status == TraceStatus::kFailed && trace_.failure != FailReason::kNoCodeMap &&
           trace_.failure != FailReason::kEmptyStack;
}

void StreamDecoder::retry_front(std::deque<Event>& queue) {
    (void)decode(queue.front(), false);
    queue.pop_front();
}

std::deque<Event>* StreamDecoder::next_due(std::optional<uint64_t> now, bool profile_too) {
    auto due = [&](const std::deque<Event>& q) {
        return !q.empty() && (!now || time_of(q.front()) + options_.retry_ns <= *now);
    };
    const bool profile_due = profile_too && due(retries_);
    const bool oracle_due = due(oracle_retries_);
    if (!profile_due) return oracle_due ? &oracle_retries_ : nullptr;
    if (!oracle_due) return &retries_;
    // Oldest first across both queues, so that the traces come out in the order of their samples.
    return time_of(oracle_retries_.front()) < time_of(retries_.front()) ? &oracle_retries_ : &retries_;
}

void StreamDecoder::retry_until(uint64_t now, bool profile_too) {
    while (std::deque<Event>* queue = next_due(now, profile_too)) retry_front(*queue);
}

void StreamDecoder::consume(Event&& event) {
    // The validator's samples must not change how the profile's are decoded: the live profile
    // never sees them, replay decodes them too, and both must give the same profile. So an oracle
    // neither moves the profile's second decodes earlier nor counts as the stream's sample time.
    const bool oracle = std::holds_alternative<Oracle>(event);
    // Waiting samples the stream has now moved far enough past, before this event changes the map
    // or takes a place among them.
    if (!retries_.empty() || !oracle_retries_.empty()) retry_until(time_of(event), !oracle);
    if (becomes_trace(event)) {
        // Sample times only: they are what the map is asked about, and a stray time stamp on
        // another event must not make the map forget what a sample still needs.
        const uint64_t sample_ns = time_of(event);
        if (options_.retain_ns != 0 && !oracle && sample_ns > latest_sample_ns_) {
            latest_sample_ns_ = sample_ns;
            if (latest_sample_ns_ >= next_forget_ns_) {
                const uint64_t keep = options_.retain_ns + options_.defer_ns + options_.retry_ns;
                if (latest_sample_ns_ > keep) map_.forget_before(latest_sample_ns_ - keep);
                next_forget_ns_ = latest_sample_ns_ + 1'000'000'000;   // about once a second of stream time
            }
        }
        if (options_.defer_ns == 0) {
            hold_for_retry_unless_decoded(std::move(event));
        } else {
            pending_.push_back(std::move(event));
        }
        return;
    }
    // Deferred samples are decoded before an event that comes late enough after them, so each
    // sees the map as the stream stood defer_ns past its own time.
    const uint64_t now = time_of(event);
    while (!pending_.empty() && time_of(pending_.front()) + options_.defer_ns <= now) {
        hold_for_retry_unless_decoded(std::move(pending_.front()));
        pending_.pop_front();
    }
    // An ended thread's last walk is no use to the incremental decoder any more.
    if (const auto* thread = std::get_if<ThreadInfo>(&event)) {
        if (thread->ended) decoder_.forget_thread(thread->tid);
        else if (thread->kind == ThreadKind::kJava) roots_.erase(thread->tid);
        else roots_[thread->tid] = hotspot::native_thread_root(thread->name);
    }
    map_.apply(std::move(event));
}

void StreamDecoder::hold_for_retry_unless_decoded(Event&& event) {
    if (decode(event, true)) return;
    // Each kind is bounded on its own: waiting oracles must not push a profile sample out early.
    std::deque<Event>& queue = std::holds_alternative<Oracle>(event) ? oracle_retries_ : retries_;
    if (queue.size() >= options_.max_waiting_retries) retry_front(queue);
    queue.push_back(std::move(event));
}

void StreamDecoder::flush() {
    while (!pending_.empty()) {
        hold_for_retry_unless_decoded(std::move(pending_.front()));
        pending_.pop_front();
    }
    while (std::deque<Event>* queue = next_due(std::nullopt, true)) retry_front(*queue);
}

}  // namespace sf
