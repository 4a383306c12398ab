// Hostile input: the decoder runs inside the JVM, so no snapshot may crash it or make it read
// outside the fragment (run under scripts/sanitize.sh to prove the latter).
#include <catch2/catch.hpp>

#include <random>

#include "synthetic.hpp"

using namespace sf;
using namespace sf::test;

namespace {
// Words that point into every region the decoder distinguishes, so random stacks reach every rule.
uint64_t interesting_word(std::mt19937_64& rng, const FakeStack& s, const World& w) {
    switch (rng() % 12) {
        case 0: return s.base + (rng() % (kStackBytes + 256)) - 128;
        case 1: return kInterpBegin + rng() % (kInterpEnd - kInterpBegin);
        case 2: return kEntryCodeletBegin + rng() % 0x400;
        case 3: return kCallStubReturn;
        case 4: return method_ptr(int(rng() % 18));
        case 5: return bcp(int(rng() % 18), int(rng() % 120));
        case 6: return w.loads.empty() ? 0 : w.loads[rng() % w.loads.size()].code_begin + rng() % 0x400;
        case 7: return rng() % 64;
        case 8: return uint64_t(-int64_t(rng() % 64));
        case 9: return kNativePc + rng() % 0x100;
        case 10: return breadcrumb::kMagic0;
        default: return rng();
    }
}

void fill_hostile_world(World& w) {
    for (int i = 0; i < 6; ++i) {
        const CodeKind kinds[] = {CodeKind::kNmethod, CodeKind::kOsr, CodeKind::kNativeWrapper,
                                  CodeKind::kMethodHandleIntrinsic};
        CodeLoad c = nmethod(kCodeCacheLow + 0x10000 * uint64_t(i + 1), i, i % 3 == 0 ? 0 : 2 + i * 3, kinds[i % 4]);
        add_scope(c, 0x20, {{method_id(i), 3}, {method_id(i + 1), 4}});
        add_scope(c, 0x40, {{method_id(i), 9}});
        c.scopes.push_back(PcScope{0x60, 1000, 5});   // corrupt: frames out of range
        c.deopt_handler = c.code_begin + 0x300;
        c.orig_pc_offset = i * 8;
        if (i % 2) {
            c.code.resize(0x400);
            std::mt19937_64 fill{uint64_t(i)};
            for (auto& b : c.code) b = uint8_t(fill());
            c.code[0] = 0x55;
        }
        w.add_code(c);
    }
    w.map.apply(Event{Stub{1, "stub fs", kCodeCacheLow + 0x90000, kCodeCacheLow + 0x90100, 4}});
    w.map.apply(Event{Stub{1, "stub", kCodeCacheLow + 0x91000, kCodeCacheLow + 0x91100, -1}});
    w.map.apply(Event{Stub{1, "stub huge", kCodeCacheLow + 0x92000, kCodeCacheLow + 0x92100, 1 << 30}});
}
}  // namespace

TEST_CASE("random stacks and registers never crash and always classify", "[decoder][hostile]") {
    const auto jdk = GENERATE(hotspot::Family::kJdk17, hotspot::Family::kJdk21, hotspot::Family::kJdk25);
    World w(jdk);
    fill_hostile_world(w);
    Decoder d(w.map, test_options());
    std::mt19937_64 rng(12345 + int(jdk));
    FakeStack s;
    CallTrace t;
    size_t statuses[4] = {};
    for (int iter = 0; iter < 20000; ++iter) {
        for (size_t off = 0; off + 8 <= s.bytes.size(); off += 8) {
            uint64_t v = interesting_word(rng, s, w);
            std::memcpy(s.bytes.data() + off, &v, 8);
        }
        Sample smp = sample_of(s, interesting_word(rng, s, w), s.base + (rng() % 64) * 8,
                               interesting_word(rng, s, w));
        smp.regs.ax = interesting_word(rng, s, w);
        smp.regs.bx = interesting_word(rng, s, w);
        smp.regs.r13 = interesting_word(rng, s, w);
        if (iter % 7 == 0) smp.stack.resize(rng() % smp.stack.size());   // truncated fragment
        if (iter % 11 == 0) smp.regs.sp = rng();                          // sp far outside
        if (iter % 13 == 0) smp.stack_sp = UINT64_MAX - rng() % 4096;     // wraps the address space
        d.decode(smp, t);
        REQUIRE(int(t.status) >= 1);
        REQUIRE(int(t.status) <= 3);
        if (t.status == TraceStatus::kFailed) REQUIRE(t.failure != FailReason::kNone);
        REQUIRE(t.frames.size() <= d.options().max_frames);
        ++statuses[int(t.status)];
    }
    // Some random walks must get somewhere, or the generator is not exercising the rules.
    CHECK(statuses[int(TraceStatus::kFailed)] > 0);
}

TEST_CASE("degenerate samples fail with the right reason", "[decoder][hostile]") {
    World w;
    Decoder d(w.map, test_options());
    FakeStack s;
    SECTION("no VM info") {
        CodeMap empty;
        Decoder d0(empty, test_options());
        CHECK(d0.decode(sample_of(s, kInterpBodyPc, s.at(0), s.at(0x100))).failure == FailReason::kNoCodeMap);
    }
    SECTION("empty fragment") {
        Sample smp = sample_of(s, kInterpBodyPc, s.at(0), s.at(0x100));
        smp.stack.clear();
        CHECK(d.decode(smp).failure == FailReason::kEmptyStack);
    }
    SECTION("sp far outside the fragment") {
        CHECK(d.decode(sample_of(s, kInterpBodyPc, 0x1000, s.at(0x100))).failure == FailReason::kSpOutOfFragment);
        CHECK(d.decode(sample_of(s, kInterpBodyPc, UINT64_MAX - 8, s.at(0x100))).failure ==
              FailReason::kSpOutOfFragment);
    }
    SECTION("a frame cycle: an interpreted frame whose caller is itself") {
        const uint64_t fp = s.at(0x100);
        w.interp_frame(s, fp, 1, bcp(1, 5), s.at(0), kInterpReturnPc, fp);
        CallTrace t = d.decode(sample_of(s, kInterpBodyPc, s.at(0), fp));
        CHECK(t.status == TraceStatus::kFailed);
        CHECK(t.failure == FailReason::kBadInterpreterFrame);
    }
    SECTION("a compiled frame cycle through a frameless intrinsic and a stub") {
        CodeLoad mh = nmethod(kCodeCacheLow + 0x40000, 8, 0, CodeKind::kMethodHandleIntrinsic);
        w.add_code(mh);
        s.put(s.at(0), mh.code_begin + 4);   // returns into itself: sp grows by 8 each frame
        for (int i = 1; i < 64; ++i) s.put(s.at(i * 8), mh.code_begin + 4);
        CallTrace t = d.decode(sample_of(s, mh.code_begin, s.at(0), 0));
        CHECK(t.status != TraceStatus::kComplete);
    }
    SECTION("a top pc beyond the instruction bytes captured for its code reads no byte past them") {
        // A CodeLoad's bytes may cover less than its range (a hostile or damaged recording): the top
        // frame's shape is then found without its instruction (under ASan, a read past the 32 bytes fails).
        CodeLoad c = nmethod(kCodeCacheLow + 0x50000, 9, 4);
        c.code.assign(32, 0x90);
        add_scope(c, 0x201, {mb(9, 3)});
        w.add_code(c);
        s.put(s.at(24), 0x42);   // the return address: no code
        CallTrace t = d.decode(sample_of(s, c.code_begin + 0x200, s.at(0), s.at(0x100)));
        CHECK(t.status == TraceStatus::kFailed);
        REQUIRE(!t.frames.empty());
        CHECK(t.frames[0].method_id == method_id(9));
    }
    SECTION("native rbp chain pointing down the stack") {
        s.put(s.at(0x100), s.at(0x80));
        s.put(s.at(0x108), kNativePc);
        s.put(s.at(0x80), s.at(0x100));
        s.put(s.at(0x88), kNativePc);
        CallTrace t = d.decode(sample_of(s, kNativePc, s.at(0), s.at(0x100)));
        CHECK(t.status == TraceStatus::kFailed);
    }
}
