// The StreamDecoder shared by replay and the live profile: the defer rule, second decodes of
// samples whose code was announced after them, and forgetting unloaded code only once the samples
// are retain_ns past it.
#include <catch2/catch.hpp>

#include <vector>

#include "stackfrag/decoder/stream_decoder.hpp"
#include "synthetic.hpp"

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
    CHECK(traces[0].frames[0] == Frame{FrameKind::kJava, false, false, 0x10, 7, 0, 0, {}});
    CHECK(traces[0].frames[1] == Frame{FrameKind::kJava, false, false, 0x20, -1, 0, 0, {}});
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

namespace {

// Compiled C (method 4, frame 4 words) called from compiled D (method 5, frame 6 words), called
// from the call stub; D is announced from the start, C only when `c` is consumed.
struct LateCode {
    test::World w;
    test::FakeStack s;
    CodeLoad c = test::nmethod(test::kCodeCacheLow + 0x10000, 4, 4);
    uint64_t sp_c = s.at(0);
    LateCode() {
        test::add_scope(c, 0x50, {{test::method_id(4), 7}});
        CodeLoad d = test::nmethod(test::kCodeCacheLow + 0x20000, 5, 6);
        test::add_scope(d, 0x30, {{test::method_id(5), 21}});
        w.add_code(d);
        const uint64_t sp_d = sp_c + 4 * 8, fp_stub = s.at(0x400);
        s.put(sp_c + 3 * 8, d.code_begin + 0x30);   // C's return address into D
        s.put(sp_d + 5 * 8, test::kCallStubReturn);
        s.put(sp_d + 4 * 8, fp_stub);
        w.entry_frame(s, fp_stub);
    }
    Sample sample_in_c(uint64_t time) const { return test::sample_of(s, c.code_begin + 0x4f, sp_c, 0x2222, time); }
    CodeLoad c_announced_at(uint64_t time) const {
        CodeLoad late = c;
        late.time_ns = time;
        return late;
    }
};

std::vector<uint64_t> java_methods(const CallTrace& trace) {
    std::vector<uint64_t> out;
    for (const Frame& f : trace.frames) {
        if (f.method_id != 0) out.push_back(f.method_id);
    }
    return out;
}

}  // namespace

TEST_CASE("a sample in code announced after it is decoded again once the announcement is in") {
    LateCode late;
    const uint64_t retry = GENERATE(uint64_t{0}, uint64_t{50'000'000});
    StreamDecoderOptions options;
    options.decoder = test::test_options();
    options.retry_ns = retry;
    std::vector<CallTrace> traces;
    StreamDecoder stream(options, [&](const Event&, const CallTrace& trace) { traces.push_back(trace); });
    for (Event event : late.w.announced) stream.consume(std::move(event));

    stream.consume(late.sample_in_c(1'000'000));
    // The VM posts CompiledMethodLoad after the code began to run: the announcement comes behind.
    stream.consume(late.c_announced_at(2'000'000));
    CHECK(stream.decoder().stats().unannounced_code_steps == 1);
    if (retry == 0) {
        // Decoded where it stood: C was unknown memory, walked as a stub of unknown size.
        REQUIRE(traces.size() == 1);
        CHECK(java_methods(traces[0]) == std::vector<uint64_t>{test::method_id(5)});
        CHECK(stream.retry_stats().retried == 0);
        return;
    }
    CHECK(traces.empty());   // waiting for the stream to move 50 ms past it
    stream.consume(ThreadInfo{40'000'000, 9, false, "within the wait"});
    CHECK(traces.empty());
    stream.consume(ThreadInfo{51'000'000, 9, false, "past it"});
    REQUIRE(traces.size() == 1);
    CHECK(traces[0].status == TraceStatus::kComplete);
    CHECK(traces[0].time_ns == 1'000'000);
    CHECK(java_methods(traces[0]) == std::vector<uint64_t>{test::method_id(4), test::method_id(5)});
    CHECK(stream.retry_stats().retried == 1);
    CHECK(stream.retry_stats().resolved == 1);
    CHECK(stream.deferred() == 0);
}

TEST_CASE("by default a second decode waits long enough for an announcement 145 ms behind its sample") {
    // Measured on 1 ms validate recordings of the shared workloads on a loaded 2-core machine: the
    // CompiledMethodLoad of code a sample ran in arrived up to 145 ms (lucene, JDK 25: a C2 frame
    // of DefaultIndexingChain.processField, whose stub scan skipped to its caller) and 367 ms (xalan,
    // JDK 17) behind the sample. With a 50 ms wait such samples kept a wrong or failed first walk.
    LateCode late;
    StreamDecoderOptions options;
    options.decoder = test::test_options();
    std::vector<CallTrace> traces;
    StreamDecoder stream(options, [&](const Event&, const CallTrace& trace) { traces.push_back(trace); });
    for (Event event : late.w.announced) stream.consume(std::move(event));
    stream.consume(late.sample_in_c(1'000'000));
    stream.consume(ThreadInfo{100'000'000, 9, false, "later"});
    CHECK(traces.empty());
    stream.consume(late.c_announced_at(146'000'000));
    stream.consume(ThreadInfo{options.retry_ns + 2'000'000, 9, false, "past the wait"});
    REQUIRE(traces.size() == 1);
    CHECK(traces[0].status == TraceStatus::kComplete);
    CHECK(java_methods(traces[0]) == std::vector<uint64_t>{test::method_id(4), test::method_id(5)});
}

TEST_CASE("a walk that reached max_frames through announced code is handed on at once, not decoded again") {
    // No announcement makes a stack shallower: deep recursion had every sample decoded twice.
    LateCode late;
    StreamDecoderOptions options;
    options.decoder = test::test_options();
    options.decoder.max_frames = 1;
    std::vector<CallTrace> traces;
    StreamDecoder stream(options, [&](const Event&, const CallTrace& trace) { traces.push_back(trace); });
    for (Event event : late.w.announced) stream.consume(std::move(event));
    stream.consume(late.c_announced_at(500'000));
    stream.consume(late.sample_in_c(1'000'000));
    REQUIRE(traces.size() == 1);
    CHECK(traces[0].status == TraceStatus::kFailed);
    CHECK(traces[0].failure == FailReason::kTooDeep);
    CHECK(traces[0].frames.size() == 1);   // the innermost frame, kept
    CHECK(stream.deferred() == 0);
    CHECK(stream.retry_stats().retried == 0);
}

TEST_CASE("samples waiting for a second decode are bounded, and flush decodes the rest") {
    LateCode late;
    StreamDecoderOptions options;
    options.decoder = test::test_options();
    options.max_waiting_retries = 2;
    std::vector<uint64_t> times;
    StreamDecoder stream(options, [&](const Event&, const CallTrace& trace) { times.push_back(trace.time_ns); });
    for (Event event : late.w.announced) stream.consume(std::move(event));
    for (uint64_t t = 1; t <= 3; ++t) stream.consume(late.sample_in_c(t * 1'000));
    // The third would have been one too many: the oldest was decoded again at once, still unresolved.
    CHECK(times == std::vector<uint64_t>{1'000});
    CHECK(stream.deferred() == 2);
    stream.consume(late.c_announced_at(5'000));
    stream.flush();
    CHECK(times == std::vector<uint64_t>{1'000, 2'000, 3'000});
    CHECK(stream.retry_stats().retried == 3);
    CHECK(stream.retry_stats().resolved == 2);
    // A sample decoded well the first time is handed on at once.
    stream.consume(late.sample_in_c(6'000));
    CHECK(times.size() == 4);
    CHECK(stream.retry_stats().retried == 3);
}

TEST_CASE("the validator's samples change nothing about the profile's: the live profile never decodes them") {
    // Replay decodes the oracles as well; the agent's live profile drops them before its decoder.
    // Both must give the same profile at the same points of the stream, so the oracles neither
    // bound nor time the profile's second decodes. Here 3 oracles in unannounced code wait beside
    // one profile sample, with room for 2 waiting samples.
    LateCode late;
    const bool with_oracles = GENERATE(false, true);
    StreamDecoderOptions options;
    options.decoder = test::test_options();
    options.max_waiting_retries = 2;
    options.retry_ns = 50'000'000;   // the times below are laid out for a 50 ms wait
    std::vector<CallTrace> profile;
    size_t oracle_traces = 0;
    StreamDecoder stream(options, [&](const Event& event, const CallTrace& trace) {
        if (is_profile_sample(event)) profile.push_back(trace);
        else ++oracle_traces;
    });
    for (Event event : late.w.announced) stream.consume(std::move(event));
    stream.consume(late.sample_in_c(1'000'000));
    if (with_oracles) {
        for (uint64_t t = 2; t <= 4; ++t) stream.consume(Oracle{late.sample_in_c(t * 1'000'000), 1, {}});
        // The third found the oracles' room taken: the oldest oracle was decoded again at once,
        // not the profile's sample.
        CHECK(oracle_traces == 1);
        CHECK(profile.empty());
    }
    stream.consume(late.c_announced_at(5'000'000));
    if (with_oracles) {
        // Past the profile sample's wait, but an oracle: the second decode waits for the next
        // event the live profile sees too.
        stream.consume(Oracle{late.sample_in_c(60'000'000), 1, {}});
        CHECK(profile.empty());
    }
    stream.consume(ThreadInfo{62'000'000, 9, false, "past it"});
    REQUIRE(profile.size() == 1);
    CHECK(profile[0].time_ns == 1'000'000);
    CHECK(java_methods(profile[0]) == std::vector<uint64_t>{test::method_id(4), test::method_id(5)});
    stream.flush();
    CHECK(oracle_traces == (with_oracles ? 4u : 0u));
    CHECK(stream.deferred() == 0);
}

TEST_CASE("a non-Java thread's traces carry the root its ThreadInfo's kind names; a Java thread's none") {
    std::vector<CallTrace> traces;
    StreamDecoder stream(StreamDecoderOptions{}, [&](const Event&, const CallTrace& trace) { traces.push_back(trace); });
    stream.consume(ThreadInfo{10, 7, false, "GC Thread#3", ThreadKind::kGc});
    stream.consume(ThreadInfo{11, 8, false, "C2 CompilerThre", ThreadKind::kCompiler});
    stream.consume(ThreadInfo{12, 9, false, "main"});
    for (uint32_t tid : {7u, 8u, 9u}) {
        JvmtiTrace trace{100 + tid, tid, false, {}};
        stream.consume(trace);
    }
    // The tid reused by a Java thread (a native thread that attached to the VM): no root any more.
    stream.consume(ThreadInfo{200, 7, false, "attached"});
    stream.consume(JvmtiTrace{300, 7, false, {}});
    REQUIRE(traces.size() == 4);
    CHECK(traces[0].root == "[GC Thread]");
    CHECK(traces[1].root == "[C2 CompilerThread]");
    CHECK(traces[2].root.empty());
    CHECK(traces[3].root.empty());
}

TEST_CASE("a profiler thread's samples decode as their top frame alone, under its root; a walk decodes the rest") {
    std::vector<CallTrace> traces;
    StreamDecoder stream(StreamDecoderOptions{}, [&](const Event&, const CallTrace& trace) { traces.push_back(trace); });
    stream.consume(VmInfo{});
    stream.consume(ThreadInfo{10, 7, false, "stackfrag-live", ThreadKind::kProfiler});
    stream.consume(ThreadInfo{11, 8, false, "GC Thread#0", ThreadKind::kGc});
    auto sample = [](uint64_t time, uint32_t tid, SampleSource source) {
        Sample s;
        s.time_ns = time;
        s.tid = tid;
        s.source = source;
        s.regs.ip = 0x1234;     // in no module: a walk cannot unwind it
        s.regs.sp = 0x10000;
        s.stack_sp = 0x10000;
        s.stack.assign(8, 0);
        return s;
    };
    stream.consume(sample(100, 7, SampleSource::kPerf));
    stream.consume(sample(101, 7, SampleSource::kPerfKernel));
    stream.consume(sample(102, 8, SampleSource::kPerf));
    // The tid reused by another kind of thread: walked again.
    stream.consume(ThreadInfo{200, 7, false, "GC Thread#1", ThreadKind::kGc});
    stream.consume(sample(300, 7, SampleSource::kPerf));
    stream.flush();
    REQUIRE(traces.size() == 4);
    CHECK(stream.top_only_traces() == 2);
    CHECK(traces[0].status == TraceStatus::kComplete);
    CHECK(traces[0].root == "[stackfrag-live]");
    REQUIRE(traces[0].frames.size() == 1);
    CHECK(traces[0].frames[0].kind == FrameKind::kNative);
    CHECK(traces[0].frames[0].pc == 0x1234);
    // A kernel-mode tick: the kernel's frame above the top one.
    REQUIRE(traces[1].frames.size() == 2);
    CHECK(traces[1].frames[0].symbol == kKernelFrameName);
    CHECK(traces[1].frames[1].pc == 0x1234);
    // The GC thread's sample is walked: code in no module cannot be, so it is not complete.
    CHECK(traces[2].root == "[GC Thread]");
    CHECK(traces[2].status != TraceStatus::kComplete);
    CHECK(traces[3].status != TraceStatus::kComplete);
}

TEST_CASE("decodes are timed only when asked: the live profile reads no clock per sample without interval=auto") {
    for (const bool timed : {true, false}) {
        StreamDecoderOptions options;
        options.time_decodes = timed;
        uint64_t traces = 0, timed_ns = 0;
        StreamDecoder* self = nullptr;
        StreamDecoder stream(options, [&](const Event&, const CallTrace&) {
            ++traces;
            timed_ns += self->last_decode_ns();
        });
        self = &stream;
        for (uint64_t i = 1; i <= 200; ++i) stream.consume(sample_at(i * 1'000'000));
        stream.flush();
        INFO("timed " << timed);
        CHECK(traces == 200);
        CHECK((timed_ns > 0) == timed);
    }
}
