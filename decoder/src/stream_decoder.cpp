#include "stackfrag/decoder/stream_decoder.hpp"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <utility>

#include "stackfrag/hotspot/thread_names.hpp"

namespace sf {

namespace {

// Stitching's bounds: a thread's image is its stack as deep as it was seen, which a runaway
// recursion makes large.
constexpr size_t kMaxImageBytes = 1u << 20;
constexpr size_t kMaxImages = 256;

const Sample* sample_of(const Event& event) {
    if (const auto* s = std::get_if<Sample>(&event)) return s;
    if (const auto* o = std::get_if<Oracle>(&event)) return &o->sample;
    return nullptr;
}

// A profile sample decoded as its top frame alone, not walked: one of the profiler's own threads'
// (`native`: the thread's announcement, null for a Java thread), or a thread clock's, whose
// fragment is empty whatever its thread.
template <class NativeThread>
bool decoded_top_only(const Event& event, const Sample& sample, const NativeThread* native) {
    return std::holds_alternative<Sample>(event) &&
           ((native != nullptr && native->top_only) || sample.source == SampleSource::kThreadClock);
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
    for (const MethodBci& m : in.frames) out.frames.push_back(Frame{FrameKind::kJava, false, false, m.method_id, m.bci, 0, 0, {}});
}

}  // namespace

bool is_profile_sample(const Event& event) {
    return std::holds_alternative<Sample>(event) || std::holds_alternative<JvmtiTrace>(event);
}

StreamDecoder::StreamDecoder(StreamDecoderOptions options, OnTrace on_trace)
    : options_(options), on_trace_(std::move(on_trace)), decoder_(map_, options.decoder) {}

bool StreamDecoder::decode(Event& event, bool first_attempt) {
    using Clock = std::chrono::steady_clock;
    const auto begin = options_.time_decodes ? Clock::now() : Clock::time_point{};
    const uint64_t unannounced_before = decoder_.stats().unannounced_code_steps;
    const uint64_t passed_before = decoder_.stats().unknown_methods_passed;
    stitched_ = false;
    const auto* jvmti = std::get_if<JvmtiTrace>(&event);
    const Sample* sample = sample_of(event);
    const auto native = native_threads_.find(jvmti != nullptr ? jvmti->tid : sample->tid);
    const bool is_native = native != native_threads_.end();
    last_thread_kind_ = is_native ? native->second.kind : ThreadKind::kJava;
    top_only_ = jvmti == nullptr && decoded_top_only(event, *sample, is_native ? &native->second : nullptr);
    if (jvmti != nullptr) {
        trace_from_jvmti(*jvmti, trace_);
    } else if (top_only_) {
        decoder_.decode_top_only(*sample, trace_);
        ++top_only_traces_;
    } else {
        decoder_.decode(*sample, trace_);
        if (trace_.status == TraceStatus::kIncomplete && options_.stitch) {
            stitched_ = stitch(*sample);
        }
    }
    if (is_native) trace_.root = native->second.root;
    else trace_.root.clear();
    last_decode_ns_ = options_.time_decodes ? static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                                  Clock::now() - begin).count())
                                            : 0;
    if (first_attempt && worth_retrying(event, unannounced_before)) return false;
    if (!first_attempt) {
        ++retry_stats_.retried;
        if (!worth_retrying(event, unannounced_before)) ++retry_stats_.resolved;
    }
    if (gap_from_ns_ && needs_lost_events(event, unannounced_before, passed_before)) {
        trace_.status = TraceStatus::kFailed;
        trace_.failure = FailReason::kLostEvents;
    }
    if (on_trace_) on_trace_(event, trace_);
    remember_image(event);
    return true;
}

// --- Stitching ---------------------------------------------------------------------------------------
//
// A thread deeper than its fragment: the walk stops at a frame (sp = boundary) whose caller lies
// above the fragment's end. An earlier snapshot of the thread that reached further up saw what lay
// there then. If it saw the same bytes as this fragment from the boundary (and at least the top
// stitch_evidence_bytes) up to the end, the frames there have not returned since, as far as any
// snapshot can tell, and the walk goes on through its bytes above the end. A frame that returned and
// was re-entered at the same sp leaves other words behind (saved registers, spilled values, locals),
// and then nothing is stitched; the walk itself still checks every frame it crosses.

bool StreamDecoder::stitch(const Sample& sample) {
    auto found = images_.find(sample.tid);
    if (found == images_.end()) {
        ++stitch_stats_.no_snapshot;
        return false;
    }
    const StackImage& image = found->second;
    const uint64_t end = sample.stack_sp + sample.stack.size();
    const uint64_t image_end = image.sp + image.bytes.size();
    if (image.bytes.empty() || image.time_ns >= sample.time_ns || image_end <= end ||
        image_end - sample.stack_sp > kMaxImageBytes) {
        ++stitch_stats_.no_snapshot;
        return false;
    }
    const uint64_t boundary = decoder_.boundary_sp();
    // No byte of this fragment to hold against the snapshot's (an empty one that stopped at sp's
    // own unwritten page): nothing says the frames the snapshot saw are still there.
    if (sample.stack.empty()) {
        ++stitch_stats_.mismatched;
        return false;
    }
    const uint64_t evidence = std::min<uint64_t>(options_.stitch_evidence_bytes, sample.stack.size());
    uint64_t from = end - evidence;
    if (boundary >= sample.stack_sp && boundary < from) from = boundary;
    if (from < image.sp || std::memcmp(sample.stack.data() + (from - sample.stack_sp),
                                       image.bytes.data() + (from - image.sp), end - from) != 0) {
        ++stitch_stats_.mismatched;
        return false;
    }
    stitch_sample_.time_ns = sample.time_ns;
    stitch_sample_.pid = sample.pid;
    stitch_sample_.tid = sample.tid;
    stitch_sample_.source = sample.source;
    stitch_sample_.regs = sample.regs;
    stitch_sample_.stack_sp = sample.stack_sp;
    stitch_sample_.stack.assign(sample.stack.begin(), sample.stack.end());
    stitch_sample_.stack.insert(stitch_sample_.stack.end(), image.bytes.begin() + static_cast<ptrdiff_t>(end - image.sp),
                                image.bytes.end());
    decoder_.decode(stitch_sample_, stitch_trace_);
    // The longer walk must agree with this one where both had the bytes, and reach the entry frame.
    const bool extends = stitch_trace_.status == TraceStatus::kComplete &&
                         stitch_trace_.frames.size() > trace_.frames.size() &&
                         std::equal(trace_.frames.begin(), trace_.frames.end(), stitch_trace_.frames.begin());
    if (!extends) {
        ++stitch_stats_.walk_failed;
        return false;
    }
    std::swap(trace_, stitch_trace_);
    trace_.status = TraceStatus::kStitched;
    ++stitch_stats_.stitched;
    return true;
}

// A complete or stitched profile sample becomes its thread's image, unless a later one already is
// (second decodes come late). The fragment is taken, not copied: the event is done with. The
// validator's samples never do: the live profile does not decode them (see consume).
void StreamDecoder::remember_image(Event& event) {
    auto* sample = std::get_if<Sample>(&event);
    if (sample == nullptr || (trace_.status != TraceStatus::kComplete && trace_.status != TraceStatus::kStitched) ||
        top_only_) {
        return;
    }
    auto found = images_.find(sample->tid);
    if (found == images_.end()) {
        // Bounded: threads whose end was never announced must not pile up.
        if (images_.size() >= kMaxImages) return;
        found = images_.emplace(sample->tid, StackImage{}).first;
    }
    if (found->second.time_ns > sample->time_ns) return;
    StackImage& image = found->second;
    image.time_ns = sample->time_ns;
    image.sp = sample->stack_sp;
    image.bytes.swap(stitched_ ? stitch_sample_.stack : sample->stack);
}

// What a later announcement can change: a failed walk (except for want of a VmInfo or of any
// stack, and one that reached max_frames through announced code: no announcement makes a stack
// shallower, and deep recursion had every sample decoded twice) and a walk through code nobody
// announced. A JVMTI trace is final.
bool StreamDecoder::worth_retrying(const Event& event, uint64_t unannounced_before) const {
    if (options_.retry_ns == 0 || sample_of(event) == nullptr) return false;
    if (decoder_.stats().unannounced_code_steps != unannounced_before) return true;
    return trace_.status == TraceStatus::kFailed && trace_.failure != FailReason::kNoCodeMap &&
           trace_.failure != FailReason::kEmptyStack && trace_.failure != FailReason::kTooDeep;
}

bool StreamDecoder::needs_lost_events(const Event& event, uint64_t unannounced_before, uint64_t passed_before) const {
    const Sample* sample = sample_of(event);
    if (sample == nullptr) return false;   // a JVMTI trace names its frames itself
    const uint64_t slack = options_.retry_ns + options_.defer_ns;
    if (sample->time_ns + slack < *gap_from_ns_) return false;
    if (trace_.status == TraceStatus::kFailed) {
        switch (trace_.failure) {
            case FailReason::kNoCodeMap:
            case FailReason::kUnknownPc:
            case FailReason::kNativeUnwindFailed:   // module maps are events too
            case FailReason::kUnknownMethod:
            case FailReason::kNoPcDesc:
            case FailReason::kStubUnwindFailed:
            case FailReason::kBadReturnAddress:
                return true;
            default:
                return false;
        }
    }
    if (decoder_.stats().unannounced_code_steps != unannounced_before) return true;
    if (decoder_.stats().unknown_methods_passed != passed_before) return true;
    for (const Frame& frame : trace_.frames) {
        const bool java = frame.kind == FrameKind::kInterpreted || frame.kind == FrameKind::kCompiled ||
                          frame.kind == FrameKind::kInlined || frame.kind == FrameKind::kNativeWrapper;
        if (java && map_.method_by_id(frame.method_id) == nullptr) return true;
    }
    return false;
}

void StreamDecoder::note_gap(uint64_t from_ns) {
    ++gaps_;
    if (!gap_from_ns_ || from_ns < *gap_from_ns_) gap_from_ns_ = from_ns;
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
        if (thread->ended) {
            decoder_.forget_thread(thread->tid);
            images_.erase(thread->tid);
        } else if (thread->kind == ThreadKind::kJava) {
            native_threads_.erase(thread->tid);
        } else {
            native_threads_[thread->tid] =
                NativeThread{hotspot::native_thread_root(thread->name), thread->kind == ThreadKind::kProfiler, thread->kind};
        }
    }
    map_.apply(std::move(event));
}

void StreamDecoder::prefetch(const Event& next) {
    if (options_.defer_ns != 0) return;   // decoded later, among others
    const Sample* sample = sample_of(next);
    if (sample == nullptr) return;
    // Samples decoded as their top frame alone have no fragment to walk (as in decode()).
    const auto it = native_threads_.find(sample->tid);
    if (decoded_top_only(next, *sample, it != native_threads_.end() ? &it->second : nullptr)) return;
    decoder_.prefetch(*sample);
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

void decode_recording(RecordingReader& reader, StreamDecoder& stream, const std::function<void(const Event&)>& observe) {
    size_t gaps_told = 0;
    uint64_t latest_ns = 0;
    while (auto event = reader.next()) {
        const std::vector<RecordingDamage>& damages = reader.damages();
        for (; gaps_told < damages.size(); ++gaps_told) {
            const RecordingDamage& damage = damages[gaps_told];
            // A chunk's smallest time bounds what it held; without its header, the stream's
            // latest time before the damage does (events are written close to time order).
            const uint64_t from = damage.lost_events ? std::min(damage.lost_min_time_ns, latest_ns) : latest_ns;
            stream.note_gap(from);
        }
        latest_ns = std::max(latest_ns, time_of(*event));
        if (observe) observe(*event);
        stream.consume(std::move(*event));
    }
    stream.flush();
}

}  // namespace sf
