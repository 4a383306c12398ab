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

TEST_CASE("a JvmtiTrace becomes a trace of Java frames of unknown kind, without decoding") {
    std::vector<CallTrace> traces;
    std::vector<bool> in_profile;
    StreamDecoder stream(StreamDecoderOptions{}, [&](const Event& event, const CallTrace& trace) {
        traces.push_back(trace);
        in_profile.push_back(is_profile_sample(event));
    });
    stream.consume(JvmtiTrace{1'000, 42, false, {MethodBci{0x10, 7}, MethodBci{0x20, -1}}});
    stream.consume(JvmtiTrace{2'000, 43, true, {MethodBci{0x30, 3}}});
    REQUIRE(traces.size() == 2);
    CHECK(in_profile == std::vector<bool>{true, true});
    CHECK(traces[0].time_ns == 1'000);
    CHECK(traces[0].tid == 42);
    CHECK(traces[0].status == TraceStatus::kComplete);
    REQUIRE(traces[0].frames.size() == 2);
    CHECK(traces[0].frames[0] == Frame{FrameKind::kJava, 0x10, 7, 0, 0, {}});
    CHECK(traces[0].frames[1] == Frame{FrameKind::kJava, 0x20, -1, 0, 0, {}});
    // Deeper than the agent asked for: the top frames, marked incomplete.
    CHECK(traces[1].status == TraceStatus::kIncomplete);
    CHECK(traces[1].frames.size() == 1);
    CHECK_FALSE(is_profile_sample(Oracle{}));
    CHECK(is_profile_sample(Sample{}));
}

TEST_CASE("with defer_ns a JvmtiTrace waits for the method events up to defer_ns past it") {
    StreamDecoderOptions options;
    options.defer_ns = 100;
    std::vector<bool> named;
    StreamDecoder* self = nullptr;
    StreamDecoder stream(options, [&](const Event&, const CallTrace& trace) {
        named.push_back(self->code_map().method_by_id(trace.frames[0].method_id) != nullptr);
    });
    self = &stream;
    stream.consume(JvmtiTrace{1'000, 1, false, {MethodBci{0x10, 0}}});
    MethodInfo method;
    method.time_ns = 1'050;
    method.method_id = 0x10;
    method.method_ptr = 0x5000;
    stream.consume(std::move(method));
    CHECK(named.empty());
    stream.flush();
    CHECK(named == std::vector<bool>{true});
}
