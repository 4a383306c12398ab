// The one consumer of an ordered event stream that both `stackfrag replay` and the agent's live
// profile use: code, method, stub and module events go to the CodeMap, samples to the Decoder. Live
// and replayed traces of one recording are equal because this class is the only place where the
// order of "apply to the map" and "decode a sample" is decided.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>

#include "stackfrag/decoder/call_trace.hpp"
#include "stackfrag/decoder/code_map.hpp"
#include "stackfrag/decoder/decoder.hpp"
#include "stackfrag/events/events.hpp"

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
    // (now or, with defer_ns, later); everything else is applied to the code map.
    void consume(Event&& event);
    // Decodes every deferred sample (end of stream, or a profile being written).
    void flush();

    const CodeMap& code_map() const { return map_; }
    const Decoder& decoder() const { return decoder_; }
    // The VM's sampling period from its VmInfo, 0 before one arrived: the weight of one sample.
    uint64_t period_ns() const { return map_.has_vm() ? map_.vm().sample_period_ns : 0; }
    size_t deferred() const { return pending_.size(); }
    // How long the decode behind the current on_trace call took (for speed reports).
    uint64_t last_decode_ns() const { return last_decode_ns_; }

private:
    void decode(const Event& event);

    StreamDecoderOptions options_;
    OnTrace on_trace_;
    CodeMap map_;
    Decoder decoder_;
    CallTrace trace_;
    std::deque<Event> pending_;
    uint64_t last_decode_ns_ = 0;
    uint64_t latest_sample_ns_ = 0;
    uint64_t next_forget_ns_ = 0;
};

}  // namespace sf
