// The one consumer of an ordered event stream that both `stackfrag replay` and the agent's live
// profile use: code, method, stub and module events go to the CodeMap, samples to the Decoder. Live
// and replayed traces of one recording are equal because this class is the only place where the
// order of "apply to the map" and "decode a sample" is decided.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "stackfrag/decoder/call_trace.hpp"
#include "stackfrag/decoder/code_map.hpp"
#include "stackfrag/decoder/decoder.hpp"
#include "stackfrag/events/events.hpp"
#include "stackfrag/events/recording.hpp"

namespace sf {

struct StreamDecoderOptions {
    DecoderOptions decoder;
    // Decode a sample only once the stream has moved this far past its time, so that code and
    // method announcements the VM posted after the sample was taken are applied first. 0 decodes
    // each sample where it stands in the stream (what the agent does by default).
    uint64_t defer_ns = 0;
    // Unloaded code and superseded Method* versions are dropped from the map once the samples are
    // this far past them, so a long run's map stays the size of the live code. Far beyond how
    // late the agent's time ordering lets a sample arrive (milliseconds); 0 keeps everything.
    uint64_t retain_ns = 30'000'000'000;
    // A sample whose walk failed, or went through code-cache memory no event had announced yet, is
    // decoded again once the stream is this far past it (its trace is handed on then, out of
    // stream order): the VM announces compiled code and methods after they run, so under load such
    // a sample's code often arrives just behind it. Only those samples wait (a few percent), each
    // holding its fragment. 0: every sample is decoded once, where it stands. On a loaded machine
    // the announcements came up to 145-367 ms behind (docs/decoding.md §1), hence half a second.
    uint64_t retry_ns = 500'000'000;
    // At most this many samples wait for their second decode; beyond that the oldest is decoded
    // again at once. Bounds the memory they hold (16 KB fragments: 4 MB), for the profile's samples
    // and the validator's (Oracle) each.
    size_t max_waiting_retries = 256;
    // Stitching (docs/decoding.md §2.7): a walk that runs off the top of its fragment goes on
    // through the bytes the thread's last complete (or stitched) snapshot saw above the fragment,
    // if that snapshot saw the same bytes as this one from the boundary frame's sp, and at least
    // `stitch_evidence_bytes`, up to the fragment's end. One snapshot per thread, for at most 256.
    bool stitch = true;
    size_t stitch_evidence_bytes = 256;
    // Time each decode (last_decode_ns): two clock reads a sample, which only speed reports and
    // interval=auto use; the live profile turns it off otherwise.
    bool time_decodes = true;
};

// What became of the incomplete walks (before stitching; the profile's samples and the validator's).
struct StitchStats {
    uint64_t stitched = 0;      // completed with the thread's earlier snapshot: TraceStatus::kStitched
    uint64_t no_snapshot = 0;   // no earlier complete snapshot of the thread reaching further up
    uint64_t mismatched = 0;    // the earlier snapshot saw other bytes between the boundary and the end, or there were none
    uint64_t walk_failed = 0;   // the bytes matched, but the longer walk did not reach the entry frame
};

// How the second decodes went.
struct RetryStats {
    uint64_t retried = 0;    // samples decoded a second time
    uint64_t resolved = 0;   // of those, the second walk neither failed nor met unannounced code
};

// Whether an event's trace belongs in the application's profile: a Sample, or a JvmtiTrace
// (mode=jvmti). Oracle samples are the validator's and do not.
bool is_profile_sample(const Event& event);

class StreamDecoder {
public:
    // `event` is the Sample, Oracle or JvmtiTrace the trace came from; `trace` is valid only
    // during the call.
    using OnTrace = std::function<void(const Event& event, const CallTrace& trace)>;

    StreamDecoder(StreamDecoderOptions options, OnTrace on_trace);
    StreamDecoder(const StreamDecoder&) = delete;
    StreamDecoder& operator=(const StreamDecoder&) = delete;

    // One event in stream order. Samples and oracles are decoded, JVMTI traces taken as they are
    // (now or, with defer_ns or a retry, later); everything else is applied to the code map.
    void consume(Event&& event);
    // The event that will be consumed after the next one, if it is a sample decoded at once: its
    // fragment is asked for now (Decoder::prefetch). A caller that knows what comes next calls this
    // before each consume(); the traces are the same either way.
    void prefetch(const Event& next);
    // Decodes every deferred or waiting sample (end of stream).
    void flush();

    const CodeMap& code_map() const { return map_; }
    const Decoder& decoder() const { return decoder_; }
    // The VM's sampling period from its VmInfo, 0 before one arrived: the weight of one sample.
    uint64_t period_ns() const { return map_.has_vm() ? map_.vm().sample_period_ns : 0; }
    size_t deferred() const { return pending_.size() + retries_.size() + oracle_retries_.size(); }
    const RetryStats& retry_stats() const { return retry_stats_; }
    const StitchStats& stitch_stats() const { return stitch_stats_; }
    // Samples of the profiler's own threads (ThreadKind::kProfiler), decoded as their top frame
    // alone (Decoder::decode_top_only).
    uint64_t top_only_traces() const { return top_only_traces_; }
    // How long the decode behind the current on_trace call took (for speed reports; 0 without
    // time_decodes), and the kind of thread its sample came from (its ThreadInfo's; kJava for a
    // thread none announced).
    uint64_t last_decode_ns() const { return last_decode_ns_; }
    ThreadKind last_thread_kind() const { return last_thread_kind_; }

    // Events are missing from the stream here (a damaged part of a recording); `from_ns` is the
    // earliest time they may have had (the damaged chunk's smallest time when its header said so,
    // else the latest time the stream had reached). From then on, a sample at or after from_ns,
    // less the retry and defer windows, whose walk fails for want of something an event announces
    // (code, a stub, a method, the VM itself), goes through code no event announced, passes over a
    // caller whose Method* is unknown, or ends with a Java frame whose method is unknown fails with FailReason::kLostEvents rather than be counted
    // under an ordinary reason or be added with frames that may be wrong.
    void note_gap(uint64_t from_ns);
    // Gaps noted so far.
    uint64_t gaps() const { return gaps_; }

private:
    // The bytes of a thread's stack as its last complete or stitched snapshot saw them.
    struct StackImage {
        uint64_t time_ns = 0;
        uint64_t sp = 0;
        std::vector<uint8_t> bytes;
    };

    // Decodes and hands the trace on; on a first attempt that should be retried, keeps it back and
    // says so (false). Takes the sample's fragment as the thread's stack image when it serves.
    bool decode(Event& event, bool first_attempt);
    // After an incomplete walk of `sample`: the stitched trace in trace_ (true) or trace_ unchanged.
    bool stitch(const Sample& sample);
    void remember_image(Event& event);
    bool worth_retrying(const Event& event, uint64_t unannounced_before) const;
    // Second decodes of the samples the stream is now retry_ns past (of the oracles only, unless
    // `profile_too`).
    void retry_until(uint64_t now, bool profile_too);
    // The queue whose front is the oldest sample due for its second decode at `now` (any waiting
    // sample without `now`), or null.
    std::deque<Event>* next_due(std::optional<uint64_t> now, bool profile_too);
    void retry_front(std::deque<Event>& queue);
    void hold_for_retry_unless_decoded(Event&& event);

    StreamDecoderOptions options_;
    OnTrace on_trace_;
    CodeMap map_;
    Decoder decoder_;
    CallTrace trace_;
    std::deque<Event> pending_;
    // In stream order, waiting for their second decode: the profile's samples, the validator's.
    std::deque<Event> retries_;
    std::deque<Event> oracle_retries_;
    RetryStats retry_stats_;
    // Stitching: per thread, its image; the longer sample and its walk.
    std::unordered_map<uint32_t, StackImage> images_;
    Sample stitch_sample_;
    CallTrace stitch_trace_;
    bool stitched_ = false;   // trace_ is stitched; its bytes are in stitch_sample_
    StitchStats stitch_stats_;
    uint64_t last_decode_ns_ = 0;
    ThreadKind last_thread_kind_ = ThreadKind::kJava;
    uint64_t latest_sample_ns_ = 0;
    uint64_t next_forget_ns_ = 0;
    // Non-Java threads by tid: the root their traces hang under (CallTrace::root), and whether
    // they are the profiler's own (their samples decode as the top frame alone). Kept past a
    // thread's end, for its samples still waiting for a second decode; a new thread of the tid
    // replaces it.
    struct NativeThread {
        InternedName root;
        bool top_only = false;
        ThreadKind kind = ThreadKind::kOther;
    };
    std::unordered_map<uint32_t, NativeThread> native_threads_;
    bool top_only_ = false;   // trace_ is a top-only decode
    uint64_t top_only_traces_ = 0;
    uint64_t gaps_ = 0;
    std::optional<uint64_t> gap_from_ns_;   // samples from then on may miss the lost events
    // Whether the trace just decoded may be wrong or failed for want of events a gap lost.
    bool needs_lost_events(const Event& event, uint64_t unannounced_before, uint64_t passed_before) const;
};

// Feeds every event of a recording to `stream` in file order and flushes it at the end. Before
// the first event after each damaged region the reader skipped, the stream is told of the gap
// (note_gap, from the damaged chunk's time range when known). `observe`, when set, sees each event
// before the stream takes it.
void decode_recording(RecordingReader& reader, StreamDecoder& stream,
                      const std::function<void(const Event&)>& observe = {});

}  // namespace sf
