// Stitching in the StreamDecoder: a walk that runs off its fragment goes on through the bytes the
// thread's last complete snapshot saw above it, only when that snapshot saw the same bytes at the
// fragment's top; otherwise the trace stays incomplete.
#include <catch2/catch.hpp>

#include <vector>

#include "stackfrag/decoder/stream_decoder.hpp"
#include "synthetic.hpp"

using namespace sf;
using namespace sf::test;

namespace {

constexpr uint64_t kFrameBytes = 0x100;
constexpr int kFrames = 0x50;   // interpreted frames, the outermost at base + 0x5000

// A thread's whole stack: interpreted frames every 0x100 bytes from base + 0x100 up to base + 0x5000
// (methods 1..3 in turn, or `outer_method` above `outer_from`), then the first entry frame.
FakeStack deep_stack(const World& w, int outer_method = 0, uint64_t outer_from = 0) {
    FakeStack s;
    s.bytes.assign(0x8000, 0);
    for (int k = 1; k <= kFrames; ++k) {
        const uint64_t fp = s.at(int64_t(k) * int64_t(kFrameBytes));
        const bool outer = outer_method != 0 && fp >= s.at(int64_t(outer_from));
        const int method = outer ? outer_method : 1 + k % 3;
        const bool last = k == kFrames;
        w.interp_frame(s, fp, method, bcp(method, 5 + k % 7), fp + 16, last ? kCallStubReturn : kInterpReturnPc,
                       fp + kFrameBytes, k > 1 ? fp - kFrameBytes + 16 : 0);
        // A local of each frame (in the frame's own words below its fixed slots): what a re-entered
        // frame would hold differently.
        s.put(fp - 0x90, outer ? 0xbad0'0000u + uint64_t(k) : 0x0b1e'c700u + uint64_t(k));
    }
    w.entry_frame(s, s.at(int64_t(kFrames + 1) * int64_t(kFrameBytes)));
    return s;
}

// The snapshot perf would take with the top frame's fp at base + top_fp: `bytes` from its sp up.
Sample snapshot(const FakeStack& s, uint64_t top_fp, size_t bytes, uint64_t time) {
    Sample out;
    out.time_ns = time;
    out.tid = 7;
    out.regs.ip = kInterpBodyPc;
    out.regs.sp = s.at(int64_t(top_fp - kFrameBytes));
    out.regs.bp = s.at(int64_t(top_fp));
    out.stack_sp = out.regs.sp;
    const size_t from = top_fp - kFrameBytes;
    const size_t to = std::min(s.bytes.size(), from + bytes);
    out.stack.assign(s.bytes.begin() + int64_t(from), s.bytes.begin() + int64_t(to));
    return out;
}

struct Run {
    std::vector<CallTrace> traces;
    StreamDecoder stream;
    explicit Run(const World& w, bool stitch = true)
        : stream(options(stitch), [this](const Event&, const CallTrace& t) { traces.push_back(t); }) {
        for (Event e : w.announced) stream.consume(std::move(e));
    }
    static StreamDecoderOptions options(bool stitch) {
        StreamDecoderOptions o;
        o.decoder = test_options();
        o.stitch = stitch;
        return o;
    }
};

}  // namespace

TEST_CASE("a walk off the fragment is stitched to the outer frames the thread's last complete snapshot saw",
          "[decoder][stitch]") {
    World w(GENERATE(hotspot::Family::kJdk17, hotspot::Family::kJdk21, hotspot::Family::kJdk25));
    const FakeStack s = deep_stack(w);
    // What a fragment long enough would have given.
    Decoder reference(w.map, test_options());
    const CallTrace whole = reference.decode(snapshot(s, 0x100, 0x8000, 3000));
    REQUIRE(whole.status == TraceStatus::kComplete);

    Run run(w);
    run.stream.consume(snapshot(s, 0x100, kStackBytes, 1000));    // deep: incomplete, no snapshot yet
    run.stream.consume(snapshot(s, 0x2100, kStackBytes, 2000));   // shallower: complete, kept
    run.stream.consume(snapshot(s, 0x100, kStackBytes, 3000));    // deep again
    REQUIRE(run.traces.size() == 3);
    CHECK(run.traces[0].status == TraceStatus::kIncomplete);
    CHECK(run.traces[1].status == TraceStatus::kComplete);
    REQUIRE(run.traces[2].status == TraceStatus::kStitched);
    CHECK(run.traces[2].frames == whole.frames);
    CHECK(run.stream.stitch_stats().stitched == 1);
    CHECK(run.stream.stitch_stats().no_snapshot == 1);

    SECTION("a stitched snapshot serves the next one in turn") {
        run.stream.consume(snapshot(s, 0x200, kStackBytes, 4000));
        REQUIRE(run.traces.size() == 4);
        CHECK(run.traces[3].status == TraceStatus::kStitched);
        REQUIRE(run.traces[3].frames.size() == whole.frames.size() - 1);
        CHECK(std::equal(run.traces[3].frames.begin() + 1, run.traces[3].frames.end(), whole.frames.begin() + 2));
    }
    SECTION("without stitching the same samples stay incomplete") {
        Run plain(w, false);
        plain.stream.consume(snapshot(s, 0x100, kStackBytes, 1000));
        plain.stream.consume(snapshot(s, 0x2100, kStackBytes, 2000));
        plain.stream.consume(snapshot(s, 0x100, kStackBytes, 3000));
        CHECK(plain.traces[2].status == TraceStatus::kIncomplete);
        CHECK(std::equal(plain.traces[2].frames.begin(), plain.traces[2].frames.end(), whole.frames.begin()));
    }
}

TEST_CASE("stitching never joins two different stacks: a frame re-entered at the same sp under other callers",
          "[decoder][stitch]") {
    World w(GENERATE(hotspot::Family::kJdk17, hotspot::Family::kJdk21, hotspot::Family::kJdk25));
    const FakeStack before = deep_stack(w);
    // Between the snapshots the frames from base + 0x3c00 up returned and were entered again from
    // other callers (method 9): the same pcs and sps at the fragment's top, other locals there.
    const FakeStack after = deep_stack(w, 9, 0x3c00);
    Run run(w);
    run.stream.consume(snapshot(before, 0x100, kStackBytes, 1000));
    run.stream.consume(snapshot(before, 0x2100, kStackBytes, 2000));
    run.stream.consume(snapshot(after, 0x100, kStackBytes, 3000));
    REQUIRE(run.traces.size() == 3);
    CHECK(run.traces[1].status == TraceStatus::kComplete);
    CHECK(run.traces[2].status == TraceStatus::kIncomplete);
    CHECK(run.stream.stitch_stats().mismatched == 1);
    CHECK(run.stream.stitch_stats().stitched == 0);
}

TEST_CASE("stitching needs an earlier snapshot of the same thread that the profile decoded", "[decoder][stitch]") {
    World w;
    const FakeStack s = deep_stack(w);
    Run run(w);
    SECTION("another thread's complete snapshot does not serve") {
        run.stream.consume(snapshot(s, 0x100, kStackBytes, 1000));
        Sample other = snapshot(s, 0x2100, kStackBytes, 2000);
        other.tid = 8;
        run.stream.consume(std::move(other));
    }
    SECTION("a validator's complete sample does not serve (the live profile never sees it)") {
        run.stream.consume(Oracle{snapshot(s, 0x2100, kStackBytes, 2000), 1, {}});
    }
    SECTION("a later snapshot does not serve an earlier sample") {
        run.stream.consume(snapshot(s, 0x100, kStackBytes, 1000));
        run.stream.consume(snapshot(s, 0x2100, kStackBytes, 5000));
        run.stream.consume(snapshot(s, 0x100, kStackBytes, 3000));
    }
    SECTION("an ended thread's snapshot is forgotten (its tid may be reused)") {
        run.stream.consume(snapshot(s, 0x100, kStackBytes, 1000));
        run.stream.consume(snapshot(s, 0x2100, kStackBytes, 2000));
        run.stream.consume(ThreadInfo{2500, 7, true, "t"});
    }
    run.stream.consume(snapshot(s, 0x100, kStackBytes, 4000));
    REQUIRE(!run.traces.empty());
    CHECK(run.traces.back().status == TraceStatus::kIncomplete);
    CHECK(run.stream.stitch_stats().stitched == 0);
}

TEST_CASE("an empty fragment is never stitched: no byte of it vouches for the snapshot's", "[decoder][stitch]") {
    // A compiled top whose frame (4 words, sp 16 bytes below an interpreted frame's fp) would
    // continue into the snapshot's frames: with the snapshot's bytes in place of its own, the walk
    // would complete. The fragment is empty (sp's page not written yet): nothing shows those bytes
    // are still the thread's, so the trace stays the top frame alone, incomplete.
    World w;
    const FakeStack s = deep_stack(w);
    CodeLoad c = nmethod(kCodeCacheLow + 0x30000, 9, 4);
    add_scope(c, 0x40, {{method_id(9), 3}});
    w.add_code(c);
    Run run(w);
    run.stream.consume(snapshot(s, 0x100, 0x8000, 1000));   // the whole stack, complete
    Sample empty;
    empty.time_ns = 2000;
    empty.tid = 7;
    empty.regs.ip = c.code_begin + 0x30;
    empty.regs.sp = empty.stack_sp = s.at(0x2100 - 0x10);
    empty.regs.bp = s.at(0x2100);
    // The same top with its own bytes up to a page it stopped at, which the snapshot saw alike.
    REQUIRE(s.at(0x3000) % 4096 == 0);
    Sample with_bytes = empty;
    with_bytes.time_ns = 3000;
    with_bytes.stack.assign(s.bytes.begin() + (0x2100 - 0x10), s.bytes.begin() + 0x3000);
    run.stream.consume(std::move(empty));
    REQUIRE(run.traces.size() == 2);
    CHECK(run.traces[0].status == TraceStatus::kComplete);
    CHECK(run.traces[1].status == TraceStatus::kIncomplete);
    CHECK(run.traces[1].frames.size() == 1);
    CHECK(run.stream.stitch_stats().stitched == 0);
    run.stream.consume(std::move(with_bytes));
    REQUIRE(run.traces.size() == 3);
    CHECK(run.traces[2].status == TraceStatus::kStitched);
}
