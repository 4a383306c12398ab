// Incremental decoding (DecoderOptions::incremental) must give exactly the traces of a full walk:
// synthetic snapshots whose lower part is unchanged, changed by one byte, cut at another place or
// seen at another CodeMap epoch; every sample of the recorded workloads, as recorded and perturbed.
#include <catch2/catch.hpp>

#include <random>
#include <string>

#include "stackfrag/decoder/stream_decoder.hpp"
#include "stackfrag/events/recording.hpp"
#include "synthetic.hpp"

using namespace sf;
using namespace sf::test;

namespace {

DecoderOptions options_with(bool incremental) {
    DecoderOptions o = test_options();
    o.incremental = incremental;
    return o;
}

// Interpreted frames every 0x100 bytes from 0x100 on, `frames` of them, the last one called from the
// first entry frame (or, with frames = 0, up to the end of the fragment and beyond).
struct DeepStack {
    World w;
    FakeStack s;
    int frames = 0;
    explicit DeepStack(int n, size_t bytes = kStackBytes, hotspot::Family jdk = hotspot::Family::kJdk17) : w(jdk) {
        s.bytes.assign(bytes, 0);
        uint64_t fp = s.at(0x100);
        for (int i = 0; n == 0 ? fp + 0x100 + 16 <= s.at(int64_t(bytes)) : i < n; ++i, fp += 0x100) {
            const bool last = n != 0 && i + 1 == n;
            w.interp_frame(s, fp, 1 + i % 5, bcp(1 + i % 5, 5 + i % 7), fp + 16, last ? kCallStubReturn : kInterpReturnPc,
                           fp + 0x100);
            ++frames;
        }
        if (n != 0) w.entry_frame(s, fp);
    }
    uint64_t fp_of(int frame) const { return s.at(0x100 + 0x100 * frame); }
    Sample sample(uint64_t time = 1000) const { return sample_of(s, kInterpBodyPc, s.at(0), fp_of(0), time); }
    // A compiled frame of `code` (frame size 4) called by frame 0, at the top; the stack below frame
    // 0's fixed slots, which no walk from frame 0 reads.
    Sample compiled_top(const CodeLoad& code, uint64_t time) {
        const uint64_t sp = fp_of(0) - 72 - 32;
        s.put(sp + 3 * 8, kInterpReturnPc);
        s.put(sp + 2 * 8, fp_of(0));
        return sample_of(s, code.code_begin + 0x10, sp, 0x1234, time);
    }
};

CodeLoad top_code(World& w) {
    CodeLoad c = nmethod(kCodeCacheLow + 0x10000, 9, 4);
    add_scope(c, 0x20, {{method_id(9), 2}});
    return w.add_code(c);
}

// Method 3's Method* announced for method 31 from `time` on (a class redefined, or the address reused).
MethodInfo method_3_reused_at(uint64_t time) {
    MethodInfo m;
    m.time_ns = time;
    m.method_id = method_id(31);
    m.method_ptr = method_ptr(3);
    m.bytecode_begin = bcp(3, 0);
    m.bytecode_size = 100;
    return m;
}

// Decodes with a full and an incremental decoder over the same map and requires equal traces.
struct Pair {
    Decoder full, incremental;
    explicit Pair(const CodeMap& map) : full(map, options_with(false)), incremental(map, options_with(true)) {}
    CallTrace decode(const Sample& s) {
        CallTrace a = full.decode(s);
        CallTrace b = incremental.decode(s);
        INFO("status " << int(a.status) << " / " << int(b.status) << ", " << fail_reason_name(a.failure) << " / "
                       << fail_reason_name(b.failure) << ", frames " << a.frames.size() << " / " << b.frames.size());
        REQUIRE(a == b);
        return b;
    }
    uint64_t reused() const { return incremental.stats().steps_reused; }
};

}  // namespace

TEST_CASE("incremental: an unchanged lower part is taken over from the last walk", "[decoder][incremental]") {
    DeepStack d(20);
    Pair p(d.w.map);
    CallTrace first = p.decode(d.sample(1000));
    REQUIRE(first.status == TraceStatus::kComplete);
    REQUIRE(first.frames.size() == 20);
    CHECK(p.reused() == 0);

    SECTION("another top frame: every step below it is taken over") {
        d.s.put(d.fp_of(0) - 64, bcp(1, 40));   // the top frame moved on; r13 says where
        Sample smp = d.sample(2000);
        smp.regs.r13 = bcp(1, 41);
        CallTrace t = p.decode(smp);
        CHECK(t.frames[0].bci == 41);
        // Frames 1..19 and the entry frame: 20 steps, 19 frames.
        CHECK(p.reused() == 20);
        CHECK(p.incremental.stats().frames_reused == 19);
        CHECK(p.incremental.stats().incremental_samples == 1);
        // The counters count the steps taken over as if they had been walked.
        CHECK(p.incremental.stats().entry_frames_crossed == p.full.stats().entry_frames_crossed);
    }
    SECTION("a deeper top: frame indices shift") {
        // A new compiled top frame whose caller is the old top frame.
        const CodeLoad c = top_code(d.w);
        Pair q(d.w.map);   // the map changed: a new pair starts at the new epoch
        q.decode(d.sample(1000));
        CallTrace t = q.decode(d.compiled_top(c, 2000));
        REQUIRE(t.status == TraceStatus::kComplete);
        CHECK(t.frames.size() == 21);
        CHECK(q.reused() == 20);
    }
    SECTION("one byte changed in a frame below the top: that step is walked, the rest taken over") {
        d.s.bytes[d.fp_of(10) - 64 - d.s.base] ^= 1;   // frame 10's bcp slot
        CallTrace t = p.decode(d.sample(2000));
        CHECK(t.frames[10].bci != first.frames[10].bci);
        CHECK(p.reused() == 19);
    }
    SECTION("a changed byte no step reads does not matter") {
        d.s.bytes[d.fp_of(10) + 0x40 - d.s.base] ^= 0xff;   // frame 11's expression stack
        p.decode(d.sample(2000));
        CHECK(p.reused() == 20);
    }
    SECTION("a broken link: the walk fails and nothing below is taken over") {
        d.s.put(d.fp_of(5) + 8, 0x42);   // frame 5 returns into nothing
        CallTrace t = p.decode(d.sample(2000));
        CHECK(t.status == TraceStatus::kFailed);
        CHECK(t.failure == FailReason::kBadReturnAddress);
        CHECK(p.reused() == 4);   // frames 1..4
        // The frames found before the failing step stay (the top six: frame 5's own step checked
        // what it read; its caller's step failed), identical to the first walk's.
        REQUIRE(t.frames.size() == 6);
        for (size_t i = 0; i < t.frames.size(); ++i) CHECK(t.frames[i] == first.frames[i]);
    }
    SECTION("a new CodeMap epoch that changed nothing a step asked about: taken over") {
        MethodInfo m;   // a Method* no frame of this stack holds
        m.time_ns = 1500;
        m.method_id = method_id(30);
        m.method_ptr = method_ptr(30);
        d.w.map.apply(m);
        CodeLoad elsewhere = nmethod(kCodeCacheLow + 0x40000, 9, 4);   // code no step looked at
        elsewhere.time_ns = 1600;
        d.w.map.apply(elsewhere);
        p.decode(d.sample(2000));
        CHECK(p.reused() == 20);
    }
    SECTION("a new version of a Method* a step read: nothing is taken over") {
        // Frame 2's Method* (method 3) is reused for method 31 from t=1500, after the first walk.
        d.w.map.apply(method_3_reused_at(1500));
        CallTrace t = p.decode(d.sample(2000));   // the pair requires the full walk's frames
        CHECK(t.frames[2].method_id == method_id(31));
        CHECK(p.reused() == 0);
        p.decode(d.sample(3000));   // the next sample, with the map unchanged since, again can
        CHECK(p.reused() == 20);
    }
    SECTION("code announced where a step found none: nothing is taken over") {
        // Frame 5 returns into the code cache where no code was announced.
        const uint64_t ret = kCodeCacheLow + 0x20010;
        d.s.put(d.fp_of(5) + 8, ret);
        Pair q(d.w.map);
        CallTrace before = q.decode(d.sample(1000));
        // Then compiled code is announced there (a load event that lagged): the full walk's step
        // into it goes otherwise, and taking over the steps of the last walk would keep the old trace.
        CodeLoad c = nmethod(kCodeCacheLow + 0x20000, 9, 4);
        c.time_ns = 1500;
        add_scope(c, 0x10, {{method_id(9), 2}});
        d.w.map.apply(c);
        CallTrace after = q.decode(d.sample(2000));
        CHECK((before.status != after.status || before.failure != after.failure ||
               before.frames.size() != after.frames.size()));
        CHECK(q.reused() == 0);
    }
    SECTION("a sample time on the other side of a Method* version: nothing is taken over") {
        // Method* of method 3 is reused for method 31 from t=5000; both samples are at this epoch.
        d.w.map.apply(method_3_reused_at(5000));
        Pair q(d.w.map);
        CallTrace before = q.decode(d.sample(4000));
        CallTrace after = q.decode(d.sample(6000));
        CHECK(q.reused() == 0);
        CHECK(before.frames[2].method_id == method_id(3));
        CHECK(after.frames[2].method_id == method_id(31));
        q.decode(d.sample(7000));
        CHECK(q.reused() == 20);
    }
    SECTION("another thread has its own last walk") {
        Sample other = d.sample(2000);
        other.tid = 8;
        p.decode(other);
        CHECK(p.reused() == 0);
        p.incremental.forget_thread(7);
        p.decode(d.sample(3000));
        CHECK(p.reused() == 0);
    }
}

TEST_CASE("incremental: a fragment that ends elsewhere gives the full walk's frames and status",
          "[decoder][incremental]") {
    // Frames up to and beyond the end of a 16 KB fragment; the bytes extend 1 KB further.
    DeepStack d(0, kStackBytes + 1024);
    Pair p(d.w.map);
    auto window = [&](int64_t shift) {   // a full fragment starting `shift` bytes above the base
        Sample smp = sample_of(d.s, kInterpBodyPc, d.s.at(shift), d.fp_of(0));
        smp.stack_sp = d.s.at(shift);
        smp.stack.assign(d.s.bytes.begin() + shift, d.s.bytes.begin() + shift + kStackBytes);
        return smp;
    };
    CallTrace a = p.decode(window(0));
    REQUIRE(a.status == TraceStatus::kIncomplete);
    // The fragment now ends 0x80 bytes further: the full walk finds one frame more.
    CallTrace b = p.decode(window(0x80));
    CHECK(b.status == TraceStatus::kIncomplete);
    CHECK(b.frames.size() == a.frames.size() + 1);
    CHECK(p.reused() > 0);
    // And back: one frame fewer again.
    CallTrace c = p.decode(window(0));
    CHECK(c.frames.size() == a.frames.size());
    // A short fragment (the thread's stack top is closer): no longer incomplete but failed.
    Sample shortened = window(0);
    shortened.stack.resize(kStackBytes - 0x200);
    CallTrace e = p.decode(shortened);
    CHECK(e.status == TraceStatus::kFailed);
}

TEST_CASE("a fragment that stops at a page boundary below the thread's outermost frame is incomplete, not failed",
          "[decoder][incremental]") {
    // JDK 25's C2 thread at the start: the kernel's copy stopped at a stack page never written, 12 KB
    // below the top; the thread's earlier walks had reached its first frame above that page.
    DeepStack d(20);   // complete inside the first 0x1600 bytes
    auto cut_at = [&](size_t bytes) {
        Sample smp = d.sample(2000);
        smp.stack.resize(bytes);
        return smp;
    };
    REQUIRE(d.s.at(0x1000) % 4096 == 0);
    SECTION("after a complete walk of the thread: the frames below the page, incomplete") {
        Pair p(d.w.map);
        REQUIRE(p.decode(d.sample(1000)).status == TraceStatus::kComplete);
        const CallTrace t = p.decode(cut_at(0x1000));
        CHECK(t.status == TraceStatus::kIncomplete);
        CHECK(t.frames.size() == 15);   // frames at 0x100 .. 0xf00 whole below 0x1000
        CHECK(p.full.stats().incomplete_at_unwritten_page == 1);
        CHECK(p.incremental.stats().incomplete_at_unwritten_page == 1);
        // Another thread's walk says nothing of this thread's stack.
        Sample other = cut_at(0x1000);
        other.tid += 1;
        CHECK(p.decode(other).status == TraceStatus::kFailed);
        // Nor does the thread's walk once its end was announced.
        p.full.forget_thread(d.sample().tid);
        p.incremental.forget_thread(d.sample().tid);
        CHECK(p.decode(cut_at(0x1000)).status == TraceStatus::kFailed);
    }
    SECTION("an empty fragment below the thread's outermost frame: sp's own page was not there, incomplete") {
        // Sampled in the kernel while a push faults in a fresh page of the stack: nothing copied.
        const CodeLoad c = top_code(d.w);
        Pair p(d.w.map);
        REQUIRE(p.decode(d.sample(1000)).status == TraceStatus::kComplete);
        Sample empty = d.compiled_top(c, 2000);
        empty.stack.clear();
        const CallTrace t = p.decode(empty);
        INFO(fail_reason_name(t.failure));
        CHECK(t.status == TraceStatus::kIncomplete);
        REQUIRE(t.frames.size() == 1);
        CHECK(t.frames[0].method_id == c.method_id);
        CHECK(p.full.stats().incomplete_at_unwritten_page == 1);
        CHECK(p.incremental.stats().incomplete_at_unwritten_page == 1);
        // Without the thread's earlier walk, an empty fragment says nothing: failed.
        Pair q(d.w.map);
        CHECK(q.decode(empty).failure == FailReason::kEmptyStack);
    }
    SECTION("with no complete walk of the thread before, a short fragment is one its stack's top ended: failed") {
        Pair p(d.w.map);
        CHECK(p.decode(cut_at(0x1000)).status == TraceStatus::kFailed);
    }
    SECTION("an end inside a page is no page the copy stopped at: failed") {
        Pair p(d.w.map);
        REQUIRE(p.decode(d.sample(1000)).status == TraceStatus::kComplete);
        CHECK(p.decode(cut_at(0x1008)).status == TraceStatus::kFailed);
        CHECK(p.full.stats().incomplete_at_unwritten_page == 0);
    }
}

TEST_CASE("incremental: the frame limit is reached at the same frame", "[decoder][incremental]") {
    DeepStack d(40);
    const CodeLoad c = top_code(d.w);
    DecoderOptions full = options_with(false), incr = options_with(true);
    full.max_frames = incr.max_frames = 30;
    Decoder a(d.w.map, full), b(d.w.map, incr);
    REQUIRE(a.decode(d.sample()) == b.decode(d.sample()));
    // A deeper top pushes one frame more onto the same lower part.
    const Sample deeper = d.compiled_top(c, 2000);
    CallTrace ta = a.decode(deeper), tb = b.decode(deeper);
    CHECK(ta.failure == FailReason::kTooDeep);
    CHECK(ta == tb);
    CHECK(b.stats().steps_reused > 0);
}

namespace {

// A thread in native code: up to ten frames on an rbp chain (the lowest returns into a native
// wrapper, called from compiled D, called from the first entry frame), the top one's sp and pc
// given per sample. Frame k (1 = lowest) has its rbp at fp_of(k). The fragment ends soon after the
// entry frame, so that even a step that scans for breadcrumbs up to its end is kept in the journal.
struct NativeStack {
    World w;
    FakeStack s;
    uint64_t wrapper_begin = kCodeCacheLow + 0x70000;
    uint64_t d_begin = kCodeCacheLow + 0x20000;
    uint64_t sp_w = 0;
    // `depth` native frames; the wrapper's sp `wrapper_sp` bytes into the fake stack, which must
    // leave room for them below it.
    explicit NativeStack(int depth = 10, int64_t wrapper_sp = 0x300) {
        w.add_code(nmethod(wrapper_begin, 9, 10, CodeKind::kNativeWrapper));
        CodeLoad d = nmethod(d_begin, 5, 6);
        add_scope(d, 0x30, {{method_id(5), 21}});
        w.add_code(d);
        sp_w = s.at(wrapper_sp);
        const uint64_t fp_w = sp_w + 64, sp_d = sp_w + 80, fp_stub = s.at(wrapper_sp + 0x100);
        s.put(fp_w + 8, d_begin + 0x30);
        s.put(fp_w, 0x4444);
        s.put(sp_d + 40, kCallStubReturn);
        s.put(sp_d + 32, fp_stub);
        w.entry_frame(s, fp_stub);
        for (int k = 1; k <= depth; ++k) {
            s.put(fp_of(k) + 8, k == 1 ? wrapper_begin + 0x60 : kNativePc + 0x100 * uint64_t(k));
            s.put(fp_of(k), k == 1 ? fp_w : fp_of(k - 1));
        }
    }
    uint64_t fp_of(int k) const { return sp_w - 16 - 0x40 * uint64_t(k - 1); }
    // The top in frame `k`, `below` bytes under its rbp.
    Sample sample(int k, uint64_t below, uint64_t time) const {
        Sample out = sample_of(s, kNativePc + 0x10 * below, fp_of(k) - below, fp_of(k), time);
        out.stack.resize(0x500);
        return out;
    }
};

}  // namespace

TEST_CASE("incremental: native frames below a top whose run began elsewhere are taken over", "[decoder][incremental]") {
    NativeStack n;
    Pair p(n.w.map);
    const CallTrace first = p.decode(n.sample(6, 0x20, 1000));
    INFO(fail_reason_name(first.failure));
    REQUIRE(first.status == TraceStatus::kComplete);
    REQUIRE(first.frames.size() == 8);   // 6 native, the wrapper, D

    SECTION("the top at another sp: the run of native frames begins there, the steps below are the same") {
        p.decode(n.sample(6, 0x30, 2000));
        // Frames 5..1, the wrapper, D and the entry frame.
        CHECK(p.reused() == 8);
    }
    SECTION("one native frame more at the top: frame and native frame counts shift by one") {
        const CallTrace t = p.decode(n.sample(7, 0x20, 2000));
        CHECK(t.frames.size() == 9);
        CHECK(p.reused() == 8);
    }
    SECTION("past max_native_frames the walk rescans from where the run began: that step is walked again") {
        // Four native frames at most: frame 2's step is the fifth and rescans from the top's sp.
        // Nothing above the first run start returns into Java code or the call stub (the wrapper, D
        // and the entry frame are cut out).
        n.s.put(n.fp_of(1) + 8, 0x42);
        n.s.put(n.sp_w + 64 + 8, 0x42);
        n.s.put(n.sp_w + 80 + 40, 0x42);
        // Below it, where only a run that begins lower looks: a return into D whose frame returns
        // into the call stub.
        const uint64_t x = n.fp_of(6) - 0x60;
        n.s.put(x, n.d_begin + 0x30);
        n.s.put(x + 48, kCallStubReturn);
        DecoderOptions o = options_with(false);
        o.max_native_frames = 4;
        Decoder full(n.w.map, o);
        o.incremental = true;
        Decoder incremental(n.w.map, o);
        FailReason failures[2] = {};
        int i = 0;
        for (const Sample& smp : {n.sample(6, 0x20, 2000), n.sample(6, 0x60, 3000)}) {
            const CallTrace a = full.decode(smp), b = incremental.decode(smp);
            INFO(fail_reason_name(a.failure) << " / " << fail_reason_name(b.failure));
            CHECK(a == b);
            failures[i++] = a.failure;
        }
        CHECK(failures[0] == FailReason::kNativeUnwindFailed);
        CHECK(failures[1] == FailReason::kBadEntryFrame);   // D's caller: no entry frame was put there
        // The first walk fails at frame 2's step, the second finds D from its lower start.
        CHECK(incremental.stats().steps_reused == 3);   // frames 5, 4, 3; frame 2's step is walked
    }
}

TEST_CASE("a native recursion 200 frames deep under a native wrapper walks to its Java caller", "[decoder][incremental]") {
    // C1's BlockBegin::iterate_preorder ran 199 frames deep on a compiler thread (jython); at the old
    // limit of 128 native frames each such sample failed as native_unwind_failed.
    constexpr int kDepth = 200;
    NativeStack n(kDepth, 0x3d00);
    const World& w = n.w;
    const FakeStack& s = n.s;
    auto fp_of = [&](int k) { return n.fp_of(k); };
    REQUIRE(fp_of(kDepth) - 0x20 >= s.base);
    for (bool incremental : {false, true}) {
        DecoderOptions o = options_with(incremental);
        REQUIRE(o.max_native_frames > size_t(kDepth));
        Decoder decoder(w.map, o);
        const CallTrace t = decoder.decode(sample_of(s, kNativePc + 0x200, fp_of(kDepth) - 0x20, fp_of(kDepth)));
        INFO("incremental " << incremental << ": " << fail_reason_name(t.failure));
        REQUIRE(t.status == TraceStatus::kComplete);
        CHECK(t.frames.size() == size_t(kDepth) + 2);   // the native frames, the wrapper, D
        const std::vector<MethodBci> java = java_frames(t);
        REQUIRE(java.size() == 2);   // the native method (its wrapper), then D
        CHECK(java.back() == mb(5, 21));
        SECTION("at the old limit the recursion's frames were lost") {
            // Under Java code a rescan from the run's first frame jumps to the first return into
            // Java above it; on a compiler thread there is none, and the walk failed.
            o.max_native_frames = 128;
            Decoder limited(w.map, o);
            const CallTrace cut = limited.decode(sample_of(s, kNativePc + 0x200, fp_of(kDepth) - 0x20, fp_of(kDepth)));
            CHECK((cut.status != TraceStatus::kComplete || cut.frames.size() < size_t(kDepth) + 2));
        }
    }
}

TEST_CASE("incremental: a walk resumed inside a native run that began at its own top rescans from there",
          "[decoder][incremental]") {
    // The run of native frames of the second walk begins at its top (frame 0) and has one frame more
    // above the part taken over (delta 1): the state it resumes from keeps the run's first frame as
    // 0 - 1 in a u32. Restoring it must bring back 0, not 2^32, or the rescan that frame 3's broken
    // return address forces sets the frame count to 2^32 + 1 (std::bad_alloc in replay before the
    // fix of 003ef48, 'out of memory while decoding' live).
    NativeStack n;
    Pair p(n.w.map);
    REQUIRE(p.decode(n.sample(6, 0x20, 1000)).status == TraceStatus::kComplete);
    n.s.put(n.fp_of(3) + 8, 0x42);   // no code there: frame 3's step is walked, fails and rescans
    const CallTrace t = p.decode(n.sample(7, 0x20, 2000));
    // Frames 5 and 4, then (after the rescan) the wrapper's and D's steps; frame 3's read other bytes.
    CHECK(p.reused() == 4);
    // The rescan from the top's sp drops the native frames above the top one and finds the wrapper's
    // return address: the top frame, the wrapper and D, complete.
    CHECK(t.status == TraceStatus::kComplete);
    CHECK(t.frames.size() == 3);
}

TEST_CASE("incremental: small changes to random stacks never make it differ", "[decoder][incremental][hostile]") {
    // Stacks of words that point into every region, changed a little between samples, so that
    // walks get somewhere and the next snapshot shares most of the last one.
    const auto jdk = GENERATE(hotspot::Family::kJdk17, hotspot::Family::kJdk21, hotspot::Family::kJdk25);
    DeepStack d(30, kStackBytes, jdk);
    World& w = d.w;
    std::mt19937_64 rng(777);
    Pair p(w.map);
    const std::vector<uint8_t> original = d.s.bytes;
    for (int iter = 0; iter < 4000; ++iter) {
        if (iter % 50 == 0) d.s.bytes = original;
        const int changes = int(rng() % 3);
        for (int c = 0; c < changes; ++c) {
            const size_t off = (rng() % (d.s.bytes.size() / 8)) * 8;
            uint64_t v = 0;
            switch (rng() % 6) {
                case 0: v = d.s.base + rng() % kStackBytes; break;
                case 1: v = kInterpReturnPc; break;
                case 2: v = kCallStubReturn; break;
                case 3: v = method_ptr(int(rng() % 18)); break;
                case 4: v = bcp(int(rng() % 6), int(rng() % 120)); break;
                default: v = rng(); break;
            }
            std::memcpy(d.s.bytes.data() + off, &v, 8);
        }
        Sample smp = d.sample(1000 + uint64_t(iter));
        if (rng() % 4 == 0) smp.stack.resize(smp.stack.size() - (rng() % 64) * 8);
        if (rng() % 4 == 0) {   // the fragment starts higher, the top frame with it
            const size_t cut = (rng() % 32) * 8;
            smp.stack_sp += cut;
            smp.stack.erase(smp.stack.begin(), smp.stack.begin() + long(cut));
            smp.regs.sp = smp.stack_sp;
        }
        p.decode(smp);
    }
    CHECK(p.reused() > 1000);
}

namespace {

// Every sample of a recording through two StreamDecoders, with and without incremental decoding.
void compare_on_recording(const std::string& file) {
    auto reader = RecordingReader::open(std::string(STACKFRAG_SOURCE_DIR) + "/tests/data/" + file);
    REQUIRE(reader.ok());
    std::vector<Event> events;
    while (auto e = (*reader)->next()) events.push_back(std::move(*e));
    std::vector<CallTrace> traces[2];
    StreamDecoderOptions o;
    o.decoder.use_libunwind = false;   // module files of the recording machine are not part of the test
    for (int mode = 0; mode < 2; ++mode) {
        o.decoder.incremental = mode == 1;
        StreamDecoder stream(o, [&](const Event&, const CallTrace& t) { traces[mode].push_back(t); });
        for (const Event& e : events) stream.consume(Event(e));
        stream.flush();
        if (mode == 1) {
            const DecodeStats& st = stream.decoder().stats();
            INFO(file << ": " << st.incremental_samples << " samples took over " << st.steps_reused << " steps");
            CHECK(st.steps_reused > 0);
        }
    }
    REQUIRE(traces[0].size() == traces[1].size());
    REQUIRE(!traces[0].empty());
    size_t differing = 0;
    for (size_t i = 0; i < traces[0].size(); ++i) differing += traces[0][i] != traces[1][i];
    CHECK(differing == 0);

    // The same samples, each followed by variants that share most of it: one byte flipped, the
    // fragment cut shorter, the fragment starting higher.
    CodeMap map;
    Pair p(map);
    std::mt19937_64 rng(99);
    for (const Event& e : events) {
        const Sample* s = std::get_if<Sample>(&e);
        if (const auto* o2 = std::get_if<Oracle>(&e)) s = &o2->sample;
        if (!s) {
            map.apply(e);
            continue;
        }
        p.decode(*s);
        if (s->stack.size() < 64) continue;
        Sample v = *s;
        v.stack[rng() % v.stack.size()] ^= uint8_t(1 + rng() % 255);
        p.decode(v);
        v = *s;
        v.stack.resize(v.stack.size() - (rng() % (v.stack.size() / 8)) * 8);
        p.decode(v);
        v = *s;
        const size_t cut = (rng() % 64) * 8;
        v.stack_sp += cut;
        v.stack.erase(v.stack.begin(), v.stack.begin() + long(cut));
        p.decode(v);
    }
    CHECK(p.reused() > 0);
}

}  // namespace

TEST_CASE("incremental: every sample of the JDK 17 recording decodes as in a full walk", "[decoder][incremental]") {
    compare_on_recording("groundtruth-jdk17-validate.sfr");
}

TEST_CASE("incremental: every sample of the JDK 21 recording decodes as in a full walk", "[decoder][incremental]") {
    compare_on_recording("groundtruth-jdk21-validate.sfr");
}

TEST_CASE("incremental: every sample of the JDK 25 recording decodes as in a full walk", "[decoder][incremental]") {
    compare_on_recording("groundtruth-jdk25-validate.sfr");
}
