#include "stackfrag/decoder/stream_decoder.hpp"

#include <chrono>
#include <utility>

namespace sf {

namespace {

const Sample* sample_of(const Event& event) {
    if (const auto* s = std::get_if<Sample>(&event)) return s;
    if (const auto* o = std::get_if<Oracle>(&event)) return &o->sample;
    return nullptr;
}

}  // namespace

StreamDecoder::StreamDecoder(StreamDecoderOptions options, OnTrace on_trace)
    : options_(options), on_trace_(std::move(on_trace)), decoder_(map_, options.decoder) {}

void StreamDecoder::decode(const Event& event) {
    using Clock = std::chrono::steady_clock;
    const auto begin = Clock::now();
    decoder_.decode(*sample_of(event), trace_);
    last_decode_ns_ = static_cast<uint64_t>(
        std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - begin).count());
    if (on_trace_) on_trace_(event, trace_);
}

void StreamDecoder::consume(Event&& event) {
    if (const Sample* sample = sample_of(event)) {
        // Sample times only: they are what the map is asked about, and a stray time stamp on
        // another event must not make the map forget what a sample still needs.
        if (options_.retain_ns != 0 && sample->time_ns > latest_sample_ns_) {
            latest_sample_ns_ = sample->time_ns;
            if (latest_sample_ns_ >= next_forget_ns_) {
                const uint64_t keep = options_.retain_ns + options_.defer_ns;
                if (latest_sample_ns_ > keep) map_.forget_before(latest_sample_ns_ - keep);
                next_forget_ns_ = latest_sample_ns_ + 1'000'000'000;   // about once a second of stream time
            }
        }
        if (options_.defer_ns == 0) {
            decode(event);
        } else {
            pending_.push_back(std::move(event));
        }
        return;
    }
    // Deferred samples are decoded before an event that comes late enough after them, so each
    // sees the map as the stream stood defer_ns past its own time.
    const uint64_t now = time_of(event);
    while (!pending_.empty() && sample_of(pending_.front())->time_ns + options_.defer_ns <= now) {
        decode(pending_.front());
        pending_.pop_front();
    }
    // An ended thread's last walk is no use to the incremental decoder any more.
    if (const auto* thread = std::get_if<ThreadInfo>(&event); thread && thread->ended) {
        decoder_.forget_thread(thread->tid);
    }
    map_.apply(event);
}

void StreamDecoder::flush() {
    while (!pending_.empty()) {
        decode(pending_.front());
        pending_.pop_front();
    }
}

}  // namespace sf
