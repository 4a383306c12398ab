// Comparing decoded traces with AsyncGetCallTrace's answers (validate): the agreement kinds, and the
// pairs where ASGCT's answer is the one that is off (a callee caught in its method-entry codelet).
#include <catch2/catch.hpp>

#include "stackfrag/decoder/oracle_compare.hpp"
#include "synthetic.hpp"

using namespace sf;
using namespace sf::test;

namespace {

Oracle oracle_of(std::vector<MethodBci> frames) {
    Oracle o;
    o.agct_status = static_cast<int32_t>(frames.size());
    o.frames = std::move(frames);
    return o;
}

}  // namespace

TEST_CASE("oracle: a callee caught in its method-entry codelet, which ASGCT leaves out", "[decoder][oracle]") {
    World w(jdk_param());
    FakeStack s;
    // Interpreted B (method 2, bci 7) has called A (method 1), whose entry codelet runs: A's frame is
    // not linked yet, rbp is still B's fp, the return address at [sp] (hotspot-frames.md a.4, state 1).
    const uint64_t fp_b = s.at(0x300), fp_stub = s.at(0x500), caller_sp = s.at(0x200);
    w.interp_frame(s, fp_b, 2, bcp(2, 7), fp_b + 16, kCallStubReturn, fp_stub, caller_sp);
    w.entry_frame(s, fp_stub);
    const uint64_t sp = caller_sp - 8;
    s.put(sp, kInterpReturnPc);
    Sample smp = sample_of(s, kEntryCodeletBegin + 0x40, sp, fp_b);
    smp.regs.bx = method_ptr(1);
    smp.regs.r13 = caller_sp;
    Decoder d(w.map, test_options());
    const CallTrace t = d.decode(smp);
    REQUIRE(t.status == TraceStatus::kComplete);
    REQUIRE(java_frames(t) == std::vector<MethodBci>{mb(1, 0), mb(2, 7)});

    // ASGCT takes the frame rbp points to, B's, for the executing one.
    const Oracle asgct = oracle_of({mb(2, 7)});
    CHECK(compare_with_oracle(t, asgct) == Agreement::kTopMethodDiffers);
    CHECK(oracle_missed_entry_callee(t, asgct, w.map));

    SECTION("ASGCT's other frames must be the decoder's exactly") {
        CHECK_FALSE(oracle_missed_entry_callee(t, oracle_of({mb(2, 8)}), w.map));
        CHECK_FALSE(oracle_missed_entry_callee(t, oracle_of({mb(3, 7)}), w.map));
        CHECK_FALSE(oracle_missed_entry_callee(t, oracle_of({mb(2, 7), mb(4, 1)}), w.map));
    }
    SECTION("the same pair with the top anywhere else in the interpreter is a disagreement") {
        CallTrace moved = t;
        moved.frames[0].pc = kInterpBodyPc;
        CHECK_FALSE(oracle_missed_entry_callee(moved, asgct, w.map));
    }
    SECTION("an identical pair, a failed ASGCT and a failed decode are not this case") {
        CHECK_FALSE(oracle_missed_entry_callee(t, oracle_of({mb(1, 0), mb(2, 7)}), w.map));
        Oracle failed;
        failed.agct_status = -2;
        CHECK_FALSE(oracle_missed_entry_callee(t, failed, w.map));
        CallTrace bad = t;
        bad.status = TraceStatus::kFailed;
        CHECK_FALSE(oracle_missed_entry_callee(bad, asgct, w.map));
    }
}
