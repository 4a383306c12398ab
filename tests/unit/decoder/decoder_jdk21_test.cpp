// JDK 21 interpreter frames, written slot by slot as jdk21u's generate_fixed_frame leaves them:
// locals as a word offset from fp (JDK-8299795), last_sp and initial_sp as addresses (relativized
// only from JDK 22). No JDK 21 runs here, so these synthetic frames are its only test.
#include <catch2/catch.hpp>

#include "synthetic.hpp"

using namespace sf;
using namespace sf::test;

namespace {

namespace in = hotspot::interp;

void put_slot(FakeStack& s, uint64_t fp, int word, uint64_t value) { s.put(fp + uint64_t(int64_t(word) * 8), value); }

// An interpreted frame of JDK 21. `locals_words`: &local0 = fp + 8 * locals_words.
void jdk21_frame(FakeStack& s, uint64_t fp, int method, uint64_t bcp_value, uint64_t sender_sp, uint64_t ret,
                 uint64_t caller_fp, uint64_t last_sp, int64_t locals_words, uint64_t initial_sp) {
    put_slot(s, fp, in::kReturnAddress, ret);
    put_slot(s, fp, in::kSavedFp, caller_fp);
    put_slot(s, fp, in::kSenderSp, sender_sp);
    put_slot(s, fp, in::kLastSp, last_sp);                          // address (or 0)
    put_slot(s, fp, in::kMethod, method_ptr(method));
    put_slot(s, fp, in::kMirror, 0x1234'5678);
    put_slot(s, fp, in::kMdp, 0);
    put_slot(s, fp, in::kCache, 0x9'0000'0000);
    put_slot(s, fp, in::kLocals, uint64_t(locals_words));          // word offset from fp
    put_slot(s, fp, in::kBcp, bcp_value);
    put_slot(s, fp, in::kInitialSp, initial_sp);                    // address
}

std::vector<MethodBci> interpreted_frames(const CallTrace& t) {
    std::vector<MethodBci> out;
    for (const auto& f : t.frames) {
        if (f.kind == FrameKind::kInterpreted) out.push_back({f.method_id, f.bci});
    }
    return out;
}

// The world's VmInfo as another agent could have recorded it.
void announce_vm(World& w, int jdk_major, VmLayout layout) {
    VmInfo vm = std::get<VmInfo>(w.announced.front());
    vm.jdk_major = jdk_major;
    vm.layout = layout;
    w.map.apply(vm);
}

// Two interpreted frames (A called by B, B called by the call stub) and the first entry frame.
struct Jdk21Stack {
    FakeStack s;
    uint64_t fp_a = s.at(0x100), fp_b = s.at(0x300), fp_stub = s.at(0x500);
    uint64_t sp = s.at(0);

    // `initial_sp_not_stored_yet`: A's initial_sp slot still holds the 0 it was pushed as.
    explicit Jdk21Stack(bool initial_sp_not_stored_yet = false) {
        // A is the top frame, not in a call: last_sp 0. Its caller B is in a call: last_sp is B's sp
        // at the call, an address on JDK 21 (a word offset on 25).
        const uint64_t a_initial_sp = initial_sp_not_stored_yet ? 0 : fp_a - 72;
        jdk21_frame(s, fp_a, 1, bcp(1, 14), fp_a + 32, kInterpReturnPc, fp_b, 0, 3, a_initial_sp);
        // B holds one monitor: its expression stack starts one BasicObjectLock (2 words) lower.
        jdk21_frame(s, fp_b, 2, bcp(2, 3), fp_b + 16, kCallStubReturn, fp_stub, fp_a + 32, 2, fp_b - 72 - 16);
        World(hotspot::Family::kJdk21).entry_frame(s, fp_stub);
    }
    Sample sample() const {
        Sample smp = sample_of(s, kInterpBodyPc, sp, fp_a);
        smp.regs.r13 = s.at(0x40);   // not a bcp: the bcp slot gives the top bci
        return smp;
    }
};


}  // namespace

TEST_CASE("JDK 21 interpreted frames decode under the 21 row", "[decoder][interpreter][jdk21]") {
    // Layout 0 with jdk_major 21 is what an agent without a JDK 21 row recorded: the decoder used to
    // take the 17 row for it (absolute locals) and failed every interpreted frame.
    const VmLayout layout = GENERATE(VmLayout::kJdk21, VmLayout::kUnknown);
    INFO("VmInfo layout " << int(layout));
    World w(hotspot::Family::kJdk21);
    announce_vm(w, 21, layout);
    Jdk21Stack st;
    Decoder d(w.map, test_options());
    CallTrace t = d.decode(st.sample());
    INFO(fail_reason_name(t.failure));
    REQUIRE(t.status == TraceStatus::kComplete);
    CHECK(interpreted_frames(t) == std::vector<MethodBci>{mb(1, 14), mb(2, 3)});
}

TEST_CASE("JDK 21 frames fail under the 17 and the 25 rows", "[decoder][interpreter][jdk21]") {
    // 17 reads the locals offset (3) as an address; 25 reads initial_sp's address as an offset.
    const auto [major, layout] = GENERATE(std::pair{17, VmLayout::kJdk17}, std::pair{25, VmLayout::kJdk25},
                                          std::pair{22, VmLayout::kUnknown}, std::pair{20, VmLayout::kUnknown});
    INFO("VmInfo jdk_major " << major << " layout " << int(layout));
    World w(hotspot::Family::kJdk21);
    announce_vm(w, major, layout);
    Jdk21Stack st;
    Decoder d(w.map, test_options());
    CallTrace t = d.decode(st.sample());
    CHECK(t.status == TraceStatus::kFailed);
    CHECK(t.failure == FailReason::kBadInterpreterFrame);
}

TEST_CASE("JDK 21's top frame between pushing initial_sp as 0 and storing it", "[decoder][interpreter][jdk21]") {
    // generate_fixed_frame on 21 pushes 0 and stores rsp into the slot one instruction later, as 17
    // did; 25 pushes the relative -9 at once, so a 0 there is no frame of 25.
    Jdk21Stack st(/*initial_sp_not_stored_yet=*/true);
    st.sp = st.fp_a - 72;   // the slot has just been pushed
    {
        World w(hotspot::Family::kJdk21);
        Decoder d(w.map, test_options());
        CallTrace t = d.decode(st.sample());
        INFO(fail_reason_name(t.failure));
        REQUIRE(t.status == TraceStatus::kComplete);
        CHECK(interpreted_frames(t) == std::vector<MethodBci>{mb(1, 14), mb(2, 3)});
    }
    {
        World w(hotspot::Family::kJdk21);
        announce_vm(w, 25, VmLayout::kJdk25);
        Decoder d(w.map, test_options());
        CallTrace t = d.decode(st.sample());
        CHECK(t.status == TraceStatus::kFailed);
        CHECK(t.failure == FailReason::kBadInterpreterFrame);
    }
}
