// The StreamDecoder shared by replay and the live profile: the defer rule, and forgetting unloaded
// code only once the samples are retain_ns past it.
#include <catch2/catch.hpp>

#include <vector>

#include "stackfrag/decoder/stream_decoder.hpp"

using namespace sf;

namespace {

CodeLoad load_at(uint64_t time, uint64_t begin) {
    CodeLoad c;
    c.time_ns = time;
    c.method_id = 0x1000;
    c.code_begin = begin;
    c.code_end = begin + 0x100;
    return c;
}

Sample sample_at(uint64_t time) {
    Sample s;
    s.time_ns = time;
    s.tid = 1;
    return s;
}

}  // namespace

TEST_CASE("unloaded code is forgotten only once samples are retain_ns past its unload") {
    for (uint64_t retain : {uint64_t{0}, uint64_t{10'000'000'000}}) {
        StreamDecoderOptions options;
        options.retain_ns = retain;
        StreamDecoder stream(options, nullptr);
        stream.consume(load_at(1'000, 0x7000'0000));
        stream.consume(CodeUnload{2'000, 0x1000, 0x7000'0000});
        stream.consume(sample_at(5'000'000'000));   // 5 s later: still kept
        CHECK(stream.code_map().history_compiled_count() == 1);
        stream.consume(sample_at(20'000'000'000));  // 20 s later: gone unless retain is 0
        CHECK(stream.code_map().history_compiled_count() == (retain == 0 ? 1u : 0u));
    }
}

TEST_CASE("with defer_ns a sample is decoded after the events up to defer_ns past it") {
    StreamDecoderOptions options;
    options.defer_ns = 100;
    std::vector<uint64_t> decoded_at_map_size;
    StreamDecoder* self = nullptr;
    StreamDecoder stream(options, [&](const Event&, const CallTrace&) {
        decoded_at_map_size.push_back(self->code_map().live_compiled_count());
    });
    self = &stream;
    stream.consume(sample_at(1'000));
    stream.consume(load_at(1'050, 0x7000'0000));   // within the deferral: applied first
    stream.consume(load_at(1'200, 0x7100'0000));   // past it: the sample is decoded before this
    stream.flush();
    CHECK(decoded_at_map_size == std::vector<uint64_t>{1});
}
