// One test per frame kind and heuristic, on synthetic snapshots for every JDK row (17, 21, 25).
#include <catch2/catch.hpp>

#include <signal.h>
#include <ucontext.h>

#include <algorithm>
#include <cstddef>
#include <filesystem>

#include "stackfrag/decoder/breadcrumb.hpp"
#include "synthetic.hpp"

using namespace sf;
using namespace sf::test;

namespace {
// glibc's restorer, the return address of every handler sigaction installs.
uint64_t glibc_signal_restorer() {
    struct sigaction probe {}, installed {}, previous {};
    probe.sa_handler = [](int) {};
    sigemptyset(&probe.sa_mask);
    REQUIRE(sigaction(SIGUSR2, &probe, &previous) == 0);
    REQUIRE(sigaction(SIGUSR2, nullptr, &installed) == 0);
    sigaction(SIGUSR2, &previous, nullptr);
    const auto restorer = reinterpret_cast<uint64_t>(installed.sa_restorer);
    REQUIRE(restorer != 0);
    return restorer;
}
}  // namespace

TEST_CASE("interpreted chain ends in the first entry frame", "[decoder][interpreter]") {
    const auto jdk = jdk_param();
    World w(jdk);
    FakeStack s;
    const uint64_t fp_a = s.at(0x100), fp_b = s.at(0x300), fp_stub = s.at(0x500);
    w.interp_frame(s, fp_a, 1, bcp(1, 14), fp_a + 32, kInterpReturnPc, fp_b);
    w.interp_frame(s, fp_b, 2, bcp(2, 3), fp_b + 16, kCallStubReturn, fp_stub, fp_a + 32);
    w.entry_frame(s, fp_stub);
    Decoder d(w.map, test_options());

    SECTION("top bci comes from r13 when it lies in the method's bytecodes") {
        Sample smp = sample_of(s, kInterpBodyPc, s.at(0), fp_a);
        smp.regs.r13 = bcp(1, 11);
        CallTrace t = d.decode(smp);
        INFO(fail_reason_name(t.failure));
        REQUIRE(t.status == TraceStatus::kComplete);
        CHECK(java_frames(t) == std::vector<MethodBci>{mb(1, 11), mb(2, 3)});
        CHECK(t.frames[0].kind == FrameKind::kInterpreted);
    }
    SECTION("otherwise from the bcp slot") {
        Sample smp = sample_of(s, kInterpBodyPc, s.at(0), fp_a);
        smp.regs.r13 = s.at(0x40);
        CallTrace t = d.decode(smp);
        REQUIRE(t.status == TraceStatus::kComplete);
        CHECK(java_frames(t) == std::vector<MethodBci>{mb(1, 14), mb(2, 3)});
    }
    SECTION("an unannounced Method* fails") {
        s.put(fp_b - 24, 0xdead'0000);
        CallTrace t = d.decode(sample_of(s, kInterpBodyPc, s.at(0), fp_a));
        CHECK(t.status == TraceStatus::kFailed);
        CHECK(t.failure == FailReason::kUnknownMethod);
    }
    SECTION("a bcp outside the method fails") {
        s.put(fp_b - 64, bcp(3, 5));
        CallTrace t = d.decode(sample_of(s, kInterpBodyPc, s.at(0), fp_a));
        CHECK(t.failure == FailReason::kBadBci);
    }
    SECTION("slots in another JDK's encoding are rejected") {
        for (const hotspot::JdkFacts& row : hotspot::kJdkFacts) {
            if (row.family == jdk) continue;
            INFO("frames of JDK " << int(jdk) << " decoded as JDK " << int(row.family));
            World other(row.family);
            Decoder d2(other.map, test_options());
            CallTrace t = d2.decode(sample_of(s, kInterpBodyPc, s.at(0), fp_a));
            CHECK(t.status == TraceStatus::kFailed);
            CHECK(t.failure == FailReason::kBadInterpreterFrame);
        }
    }
}

TEST_CASE("native method frame in the interpreter has bci -1", "[decoder][interpreter]") {
    World w(jdk_param());
    MethodInfo native;
    native.time_ns = 1;
    native.method_id = method_id(20);
    native.method_ptr = method_ptr(20);
    native.access_flags = hotspot::kAccNative;
    w.map.apply(native);
    FakeStack s;
    const uint64_t fp_a = s.at(0x100), fp_stub = s.at(0x300);
    w.interp_frame(s, fp_a, 20, 0, fp_a + 16, kCallStubReturn, fp_stub);
    w.entry_frame(s, fp_stub);
    Decoder d(w.map, test_options());
    CallTrace t = d.decode(sample_of(s, kInterpBodyPc, s.at(0), fp_a));
    REQUIRE(t.status == TraceStatus::kComplete);
    CHECK(java_frames(t) == std::vector<MethodBci>{mb(20, -1)});
}

TEST_CASE("partially built interpreter frames in a method-entry codelet", "[decoder][interpreter]") {
    World w(jdk_param());
    FakeStack s;
    // Caller B is interpreted and in a call; its callee A (method 1) is being entered.
    const uint64_t fp_b = s.at(0x300), fp_stub = s.at(0x500);
    const uint64_t caller_sp = s.at(0x200);
    w.interp_frame(s, fp_b, 2, bcp(2, 7), fp_b + 16, kCallStubReturn, fp_stub, caller_sp);
    w.entry_frame(s, fp_stub);
    Decoder d(w.map, test_options());
    const uint64_t entry_pc = kEntryCodeletBegin + 0x40;

    SECTION("state 1, not linked: ret at [sp]") {
        const uint64_t sp = caller_sp - 8;
        s.put(sp, kInterpReturnPc);
        Sample smp = sample_of(s, entry_pc, sp, fp_b);
        smp.regs.bx = method_ptr(1);
        smp.regs.r13 = caller_sp;
        CallTrace t = d.decode(smp);
        INFO(fail_reason_name(t.failure));
        REQUIRE(t.status == TraceStatus::kComplete);
        CHECK(java_frames(t) == std::vector<MethodBci>{mb(1, 0), mb(2, 7)});
    }
    SECTION("state 1, not linked: ret popped into rax while locals are zeroed") {
        const uint64_t sp = caller_sp - 24;   // two zeroed locals pushed
        Sample smp = sample_of(s, entry_pc, sp, fp_b);
        smp.regs.bx = method_ptr(1);
        smp.regs.r13 = caller_sp;
        smp.regs.ax = kInterpReturnPc;
        CallTrace t = d.decode(smp);
        REQUIRE(t.status == TraceStatus::kComplete);
        CHECK(java_frames(t) == std::vector<MethodBci>{mb(1, 0), mb(2, 7)});
    }
    SECTION("state 1, not linked: ret popped into rax, no local pushed yet (sp is the sender sp)") {
        s.put(caller_sp, 0x1fa0);   // the caller's data at sp, no return address
        Sample smp = sample_of(s, entry_pc, caller_sp, fp_b);
        smp.regs.bx = method_ptr(1);
        smp.regs.r13 = caller_sp;
        smp.regs.ax = kInterpReturnPc;
        CallTrace t = d.decode(smp);
        INFO(fail_reason_name(t.failure));
        REQUIRE(t.status == TraceStatus::kComplete);
        CHECK(java_frames(t) == std::vector<MethodBci>{mb(1, 0), mb(2, 7)});
    }
    SECTION("state 2, linked but partial: Method* still in rbx, sender sp pushed") {
        const uint64_t fp = caller_sp - 16;   // ret at fp+8, saved rbp at fp
        const uint64_t sp = fp - 16;          // sender sp and last_sp pushed
        s.put(fp + 8, kInterpReturnPc);
        s.put(fp, fp_b);
        s.put(fp - 8, caller_sp);
        s.put(fp - 24, 0x4141'4141);          // stale slot below sp: must not be trusted
        Sample smp = sample_of(s, entry_pc, sp, fp);
        smp.regs.bx = method_ptr(1);
        smp.regs.r13 = bcp(1, 0);
        CallTrace t = d.decode(smp);
        INFO(fail_reason_name(t.failure));
        REQUIRE(t.status == TraceStatus::kComplete);
        CHECK(java_frames(t) == std::vector<MethodBci>{mb(1, 0), mb(2, 7)});
    }
    SECTION("state 3, complete: decoded normally") {
        const uint64_t fp = caller_sp - 16;
        w.interp_frame(s, fp, 1, bcp(1, 0), caller_sp, kInterpReturnPc, fp_b);
        Sample smp = sample_of(s, entry_pc, fp - 72, fp);
        smp.regs.bx = method_ptr(1);
        smp.regs.r13 = bcp(1, 0);
        CallTrace t = d.decode(smp);
        REQUIRE(t.status == TraceStatus::kComplete);
        CHECK(java_frames(t) == std::vector<MethodBci>{mb(1, 0), mb(2, 7)});
    }
}

namespace {
// Compiled frames: D (method 5, fs 6) called by the call stub; C (method 4, fs 4) called by D.
// Interpreted frames every 0x100 bytes from 0x100 up to the end of the fragment, the last one's
// caller beyond it (or with its rbp at `last_caller_fp`, when given); returns how many.
int interpreted_frames_to_the_end(const World& w, FakeStack& s, uint64_t last_caller_fp = 0) {
    uint64_t fp = s.at(0x100);
    int frames = 0;
    while (fp + 0x100 + 16 <= s.at(static_cast<int64_t>(s.bytes.size()))) {
        w.interp_frame(s, fp, 1 + frames % 3, bcp(1 + frames % 3, 5), fp + 16, kInterpReturnPc, fp + 0x100);
        fp += 0x100;
        ++frames;
    }
    w.interp_frame(s, fp - 0x100, 1, bcp(1, 5), fp + 16, kInterpReturnPc, last_caller_fp != 0 ? last_caller_fp : fp + 0x100);
    return frames;
}

struct CompiledWorld {
    World w;
    FakeStack s;
    uint64_t c_begin = kCodeCacheLow + 0x10000;
    uint64_t d_begin = kCodeCacheLow + 0x20000;
    uint64_t sp_c, sp_d, fp_stub;
    // `room`: bytes of the fragment below C's frame (for frames a test puts under it).
    explicit CompiledWorld(hotspot::Family jdk = hotspot::Family::kJdk17, int64_t room = 0) : w(jdk) {
        CodeLoad c = nmethod(c_begin, 4, 4);
        add_scope(c, 0x50, {{method_id(6), 3}, {method_id(4), 7}});   // method 6 inlined into 4
        add_scope(c, 0x80, {{method_id(4), 9}});
        w.add_code(c);
        CodeLoad dd = nmethod(d_begin, 5, 6);
        add_scope(dd, 0x30, {{method_id(5), 21}});
        w.add_code(dd);
        sp_c = s.at(room);
        sp_d = sp_c + 4 * 8;
        fp_stub = s.at(0x400 + room);
        s.put(sp_c + 3 * 8, d_begin + 0x30);     // C's return address into D (a call site)
        s.put(sp_c + 2 * 8, 0x1111);             // C's saved rbp (C2 uses rbp freely)
        s.put(sp_d + 5 * 8, kCallStubReturn);    // D's return address
        s.put(sp_d + 4 * 8, fp_stub);            // D's saved rbp = the call stub's fp
        w.entry_frame(s, fp_stub);
    }
};
}  // namespace

TEST_CASE("compiled frames with inlining: near PcDesc at the top, exact at return addresses", "[decoder][compiled]") {
    CompiledWorld cw(jdk_param());
    Decoder d(cw.w.map, test_options());
    SECTION("top pc just before a PcDesc uses it (pc+1 rule)") {
        CallTrace t = d.decode(sample_of(cw.s, cw.c_begin + 0x4f, cw.sp_c, 0x2222));
        INFO(fail_reason_name(t.failure));
        REQUIRE(t.status == TraceStatus::kComplete);
        CHECK(java_frames(t) == std::vector<MethodBci>{mb(6, 3), mb(4, 7), mb(5, 21)});
        CHECK(t.frames[0].kind == FrameKind::kInlined);
        CHECK(t.frames[1].kind == FrameKind::kCompiled);
        CHECK(t.frames[1].comp_level == 4);
    }
    SECTION("top pc at a PcDesc uses the next one") {
        CallTrace t = d.decode(sample_of(cw.s, cw.c_begin + 0x50, cw.sp_c, 0x2222));
        REQUIRE(t.status == TraceStatus::kComplete);
        CHECK(java_frames(t) == std::vector<MethodBci>{mb(4, 9), mb(5, 21)});
    }
    SECTION("a return address without a PcDesc fails") {
        cw.s.put(cw.sp_c + 3 * 8, cw.d_begin + 0x31);
        CallTrace t = d.decode(sample_of(cw.s, cw.c_begin + 0x40, cw.sp_c, 0x2222));
        CHECK(t.status == TraceStatus::kFailed);
        CHECK(t.failure == FailReason::kNoPcDesc);
    }
    SECTION("an impossible frame size fails") {
        CodeLoad bad = nmethod(kCodeCacheLow + 0x30000, 7, 1);
        cw.w.add_code(bad);
        CallTrace t = d.decode(sample_of(cw.s, bad.code_begin + 0x20, cw.sp_c, 0));
        CHECK(t.failure == FailReason::kBadFrameSize);
    }
}

TEST_CASE("no fragment: the pc alone names the code it ran, under the empty_stack marker", "[decoder][compiled]") {
    // The kernel gives no stack where the page at sp was not resident (a tick inside the fault
    // that brings it in); the registers still say where the thread was.
    CompiledWorld cw(jdk_param());
    for (const auto& m : self_modules()) cw.w.map.apply(Event{m});
    DecoderOptions options = test_options();
    options.symbolize_native = true;
    Decoder d(cw.w.map, options);
    auto without_stack = [&](uint64_t ip) {
        Sample smp = sample_of(cw.s, ip, cw.sp_c, 0x2222);
        smp.stack.clear();
        return d.decode(smp);
    };
    SECTION("compiled code: its method and the methods inlined there, by the interrupted pc's rule") {
        CallTrace t = without_stack(cw.c_begin + 0x4f);
        CHECK(t.status == TraceStatus::kFailed);
        CHECK(t.failure == FailReason::kEmptyStack);
        CHECK(java_frames(t) == std::vector<MethodBci>{mb(6, 3), mb(4, 7)});
        REQUIRE(t.frames.size() == 2);
        CHECK(t.frames[0].kind == FrameKind::kInlined);
        CHECK(t.frames[1].kind == FrameKind::kCompiled);
    }
    SECTION("compiled code after its last PcDesc: the method alone") {
        CallTrace t = without_stack(cw.c_begin + 0x200);
        CHECK(t.failure == FailReason::kEmptyStack);
        REQUIRE(t.frames.size() == 1);
        CHECK(t.frames[0].kind == FrameKind::kCompiled);
        CHECK(t.frames[0].method_id == method_id(4));
        CHECK(t.frames[0].bci == -1);
    }
    SECTION("native code: its function") {
        const auto here = reinterpret_cast<uint64_t>(&fail_reason_name);
        CallTrace t = without_stack(here);
        CHECK(t.failure == FailReason::kEmptyStack);
        REQUIRE(t.frames.size() == 1);
        CHECK(t.frames[0].kind == FrameKind::kNative);
        CHECK(t.frames[0].symbol.str().find("fail_reason_name") != std::string::npos);
    }
    SECTION("the interpreter: its method is in the frame that is not there, so nothing") {
        CallTrace t = without_stack(kInterpBodyPc);
        CHECK(t.failure == FailReason::kEmptyStack);
        CHECK(t.frames.empty());
    }
}

TEST_CASE("an interpreted method returning to compiled code, sampled past `leave`", "[decoder][interpreter]") {
    // C (compiled, method 4) called an interpreted method through the c2i adapter at its call site
    // 0x80; that method's return template has torn its frame down (remove_activation): rbp is C's
    // again (C2 keeps data there), rbx the sender sp (C's sp), and the return address is at [sp]
    // until `pop r13`, in r13 after it.
    CompiledWorld cw(jdk_param(), 0x100);
    Decoder d(cw.w.map, test_options());
    const uint64_t ret = cw.c_begin + 0x80;
    const std::vector<MethodBci> callers{mb(4, 9), mb(5, 21)};
    auto check_returning = [&](const Sample& smp) {
        CallTrace t = d.decode(smp);
        INFO(fail_reason_name(t.failure));
        REQUIRE(t.status == TraceStatus::kComplete);
        REQUIRE(!t.frames.empty());
        CHECK(t.frames[0].kind == FrameKind::kStub);
        CHECK(t.frames[0].symbol == "Interpreter");
        CHECK(java_frames(t) == callers);
    };
    SECTION("after leave: the return address at [sp], r13 still the callee's bcp") {
        const uint64_t sp = cw.sp_c - 16;   // the callee's one parameter above its return address
        cw.s.put(sp, ret);
        Sample smp = sample_of(cw.s, kInterpBodyPc, sp, 0x4'1234'5678);
        smp.regs.bx = cw.sp_c;
        smp.regs.r13 = bcp(1, 3);
        check_returning(smp);
        CHECK(d.stats().interpreter_return_tops == 1);
    }
    SECTION("after pop r13: [sp] is the parameter, the return address in r13") {
        const uint64_t sp = cw.sp_c - 8;
        cw.s.put(sp, 0x4242);
        Sample smp = sample_of(cw.s, kInterpBodyPc, sp, 0x4'1234'5678);
        smp.regs.bx = cw.sp_c;
        smp.regs.r13 = ret;
        check_returning(smp);
    }
    SECTION("after mov rsp, rbx: the sample's sp is the caller's") {
        Sample smp = sample_of(cw.s, kInterpBodyPc, cw.sp_c, 0x4'1234'5678);
        smp.regs.bx = cw.sp_c;
        smp.regs.r13 = ret;
        check_returning(smp);
    }
    SECTION("a return address that is no call site of the caller fails as before") {
        const uint64_t sp = cw.sp_c - 16;
        cw.s.put(sp, cw.c_begin + 0x70);   // no PcDesc there
        Sample smp = sample_of(cw.s, kInterpBodyPc, sp, 0x4'1234'5678);
        smp.regs.bx = cw.sp_c;
        smp.regs.r13 = bcp(1, 3);
        CallTrace t = d.decode(smp);
        CHECK(t.status == TraceStatus::kFailed);
        CHECK(t.failure == FailReason::kBadInterpreterFrame);
        CHECK(d.stats().interpreter_return_tops == 0);
    }
    SECTION("a sender sp below sp is no sender sp") {
        const uint64_t sp = cw.sp_c - 16;
        cw.s.put(sp, ret);
        Sample smp = sample_of(cw.s, kInterpBodyPc, sp, 0x4'1234'5678);
        smp.regs.bx = sp - 8;
        smp.regs.r13 = bcp(1, 3);
        CallTrace t = d.decode(smp);
        CHECK(t.failure == FailReason::kBadInterpreterFrame);
    }
}

namespace {
// C deoptimized while A (interpreted, the sample's top) ran: A returns into `handler` in C, and C's
// frame keeps its original pc (a call site with an inline chain); D and the call stub above it.
// Returns A's fp.
uint64_t deoptimized_under_interpreted(CompiledWorld& cw, const CodeLoad& c, uint64_t handler) {
    const uint64_t sp_c = cw.s.at(0x200);
    const uint64_t sp_d = sp_c + 32;
    cw.s.put(sp_c + 8, c.code_begin + 0x50);
    cw.s.put(sp_c + 24, cw.d_begin + 0x30);
    cw.s.put(sp_c + 16, 0x1111);
    cw.s.put(sp_d + 40, kCallStubReturn);
    cw.s.put(sp_d + 32, cw.fp_stub);
    const uint64_t fp_a = cw.s.at(0x100);
    cw.w.interp_frame(cw.s, fp_a, 1, bcp(1, 2), sp_c, handler, 0x1111);
    return fp_a;
}
}  // namespace

TEST_CASE("deoptimized frame: the original pc is in the frame", "[decoder][compiled]") {
    const auto jdk = jdk_param();
    CompiledWorld cw(jdk);
    // Re-announce C with a deopt handler; A (interpreted, top) returns into it.
    CodeLoad c = cw.w.loads[0];
    c.deopt_handler = c.code_begin + 0x300;
    c.orig_pc_offset = 8;
    c.time_ns = 2;
    cw.w.map.apply(c);
    const uint64_t fp_a = deoptimized_under_interpreted(cw, c, c.deopt_handler);
    Decoder d(cw.w.map, test_options());
    CallTrace t = d.decode(sample_of(cw.s, kInterpBodyPc, cw.s.at(0), fp_a));
    INFO(fail_reason_name(t.failure));
    REQUIRE(t.status == TraceStatus::kComplete);
    CHECK(java_frames(t) == std::vector<MethodBci>{mb(1, 2), mb(6, 3), mb(4, 7), mb(5, 21)});
    CHECK(d.stats().deopt_frames == 1);
}

TEST_CASE("deoptimized at a method-handle call: the handler right after the announced one", "[decoder][compiled]") {
    // -Xcomp, a lambda's bootstrap: DirectMethodHandle$Holder.invokeStatic (C1) was deoptimized while
    // LambdaMetafactory.metafactory ran, which returned into the code's second handler (CodeOffsets::
    // DeoptMH, 17 bytes after the first); the walk took it for no call site and failed there.
    const auto jdk = jdk_param();
    CompiledWorld cw(jdk);
    CodeLoad c = cw.w.loads[0];
    c.code.assign(0x400, 0xf4);
    c.deopt_handler = c.code_begin + 0x300;
    c.orig_pc_offset = 8;
    c.time_ns = 2;
    const uint64_t unpack = kCodeCacheLow + 0x70000;   // the deoptimization blob's entry
    auto put_jmp = [&](uint64_t at, uint64_t target) {
        c.code[at - c.code_begin] = 0xe9;
        const auto rel = static_cast<int32_t>(static_cast<int64_t>(target - (at + 5)));
        std::memcpy(c.code.data() + (at - c.code_begin) + 1, &rel, sizeof rel);
    };
    auto c1_handler = [&](uint64_t at, uint64_t target) {   // mov r10, at; push r10; jmp target
        uint8_t* b = c.code.data() + (at - c.code_begin);
        b[0] = 0x49, b[1] = 0xba;
        std::memcpy(b + 2, &at, sizeof at);
        b[10] = 0x41, b[11] = 0x52;
        put_jmp(at + 12, target);
        return at + 17;
    };
    auto c2_handler = [&](uint64_t at, uint64_t target) {   // call +0; sub qword [rsp], 5; jmp target
        const uint8_t head[] = {0xe8, 0, 0, 0, 0, 0x48, 0x83, 0x2c, 0x24, 0x05};
        std::memcpy(c.code.data() + (at - c.code_begin), head, sizeof head);
        put_jmp(at + 10, target);
        return at + 15;
    };
    const bool c2 = GENERATE(false, true);
    const bool same_target = GENERATE(true, false);
    const uint64_t second = c2 ? c2_handler(c.deopt_handler, unpack) : c1_handler(c.deopt_handler, unpack);
    if (c2) {
        c2_handler(second, same_target ? unpack : unpack + 0x40);
    } else {
        c1_handler(second, same_target ? unpack : unpack + 0x40);
    }
    cw.w.map.apply(c);
    const uint64_t fp_a = deoptimized_under_interpreted(cw, c, second);
    Decoder d(cw.w.map, test_options());
    const CallTrace t = d.decode(sample_of(cw.s, kInterpBodyPc, cw.s.at(0), fp_a));
    INFO((c2 ? "C2" : "C1") << (same_target ? "" : ", another target") << ": " << fail_reason_name(t.failure));
    if (same_target) {
        REQUIRE(t.status == TraceStatus::kComplete);
        CHECK(java_frames(t) == std::vector<MethodBci>{mb(1, 2), mb(6, 3), mb(4, 7), mb(5, 21)});
        CHECK(d.stats().deopt_frames == 1);
    } else {
        // Bytes that only look like a handler are no return point of a deoptimized frame.
        CHECK(t.status == TraceStatus::kFailed);
        CHECK(d.stats().deopt_frames == 0);
    }
}

TEST_CASE("prologue and epilogue top frames, from the instruction bytes", "[decoder][compiled][prologue]") {
    CompiledWorld cw(jdk_param());
    // C's code: bang; push rbp; sub rsp,16 | body ... | add rsp,16; pop rbp; cmp rsp,[r15+0x340]; ja; ret
    CodeLoad c = cw.w.loads[0];
    c.code.assign(0x400, 0x90);
    const uint8_t prologue[] = {0x89, 0x84, 0x24, 0x00, 0xc0, 0xfe, 0xff,   // mov [rsp-0x14000],eax
                                0x55,                                       // push rbp
                                0x48, 0x83, 0xec, 0x10};                    // sub rsp,0x10
    const uint8_t epilogue[] = {0x48, 0x83, 0xc4, 0x10,                     // add rsp,0x10
                                0x5d,                                       // pop rbp
                                0x49, 0x3b, 0xa7, 0x40, 0x03, 0x00, 0x00,   // cmp rsp,[r15+0x340]
                                0x0f, 0x87, 0x10, 0x00, 0x00, 0x00,         // ja +0x10
                                0xc3};                                      // ret
    std::memcpy(c.code.data(), prologue, sizeof prologue);
    std::memcpy(c.code.data() + 0x100, epilogue, sizeof epilogue);
    c.time_ns = 2;
    cw.w.map.apply(c);
    Decoder d(cw.w.map, test_options());
    const std::vector<MethodBci> expected_tail{mb(5, 21)};
    // `given_back`: the epilogue has given the frame back, so the return address is not where the
    // frame size says (the top frame is marked sp_moved: AsyncGetCallTrace reads a stale slot).
    auto check = [&](uint64_t pc_off, uint64_t sp, uint64_t rbp, bool given_back = false) {
        CallTrace t = d.decode(sample_of(cw.s, c.code_begin + pc_off, sp, rbp));
        INFO("pc offset " << pc_off << " " << fail_reason_name(t.failure));
        REQUIRE(t.status == TraceStatus::kComplete);
        auto frames = java_frames(t);
        REQUIRE(frames.size() >= 2);
        CHECK(frames.back() == mb(5, 21));
        CHECK(frames[frames.size() - 2].method_id == method_id(4));
        const bool marked = std::any_of(t.frames.begin(), t.frames.end(), [&](const Frame& f) {
            return f.pc == c.code_begin + pc_off && f.sp_moved;
        });
        CHECK(marked == given_back);
    };
    const uint64_t entry_sp = cw.sp_c + 24;   // where C's return address is
    SECTION("at the verified entry and the bang nothing is pushed") {
        check(0, entry_sp, cw.fp_stub);
        check(7, entry_sp, cw.fp_stub);
    }
    SECTION("after push rbp the caller's rbp is at [sp]") {
        cw.s.put(entry_sp - 8, cw.fp_stub);
        check(8, entry_sp - 8, 0x3333);
    }
    SECTION("complete at frame_complete_offset") { check(12, cw.sp_c, 0x3333); }
    SECTION("epilogue: at pop rbp") {
        cw.s.put(entry_sp - 8, cw.fp_stub);
        check(0x104, entry_sp - 8, 0x3333, true);
    }
    SECTION("epilogue: after pop rbp, at the poll, the branch and ret") {
        check(0x105, entry_sp, cw.fp_stub, true);
        check(0x10c, entry_sp, cw.fp_stub, true);
        check(0x112, entry_sp, cw.fp_stub, true);
    }
    SECTION("epilogue: at add rsp the frame is still whole") { check(0x100, cw.sp_c, 0x3333); }
}

TEST_CASE("a jmp right after the epilogue gave the frame back, as C2's exception handlers rethrow",
          "[decoder][compiled][prologue]") {
    // A StackOverflowError unwinding a C2 recursion (JDK 17, 100 us): SOE.recurse's handler is
    // `mov rsi, rax; add rsp, 0x10; pop rbp; jmp <rethrow>`; sampled at the jmp, taken for a complete
    // frame, 380 walks failed bad_return_address.
    CompiledWorld cw;
    CodeLoad c = cw.w.loads[0];   // frame 4 words: add rsp, 0x10 gives back all but rbp and ret
    // hlt around the handler, as in C2's code: no path from the body reaches it (the moved-rsp pass,
    // which follows the body's paths, would see the add and the pop on a path through it).
    c.code.assign(0x400, 0xf4);
    const uint8_t handler[] = {0x48, 0x8b, 0xf0,               // mov rsi, rax
                               0x48, 0x83, 0xc4, 0x10,         // add rsp, 0x10
                               0x5d,                           // pop rbp
                               0xe9, 0x00, 0x01, 0x00, 0x00};  // jmp (the rethrow stub)
    std::memcpy(c.code.data() + 0x200, handler, sizeof handler);
    // Elsewhere a jmp after other bytes: the frame is whole.
    const uint8_t body[] = {0x48, 0x83, 0xc4, 0x18, 0x5d,      // add rsp, 0x18 (not this frame's size); pop rbp
                            0xe9, 0x00, 0x01, 0x00, 0x00};
    std::memcpy(c.code.data() + 0x280, body, sizeof body);
    c.time_ns = 2;
    cw.w.map.apply(c);
    Decoder d(cw.w.map, test_options());
    const uint64_t entry_sp = cw.sp_c + 24;   // where C's return address is
    SECTION("at the jmp after pop rbp the return address is at [sp]") {
        // Where the whole frame's return slot would be, a word of D's frame that looks like a
        // return into D (the slot a walk that took the frame for whole would read).
        cw.s.put(entry_sp + 24, cw.d_begin + 0x30);
        const CallTrace t = d.decode(sample_of(cw.s, c.code_begin + 0x208, entry_sp, cw.fp_stub));
        INFO(fail_reason_name(t.failure));
        REQUIRE(t.status == TraceStatus::kComplete);
        const auto frames = java_frames(t);
        REQUIRE(frames.size() >= 2);
        CHECK(frames[frames.size() - 2].method_id == method_id(4));
        CHECK(frames.back() == mb(5, 21));
    }
    SECTION("a jmp after bytes that do not give this frame back leaves it whole") {
        const CallTrace t = d.decode(sample_of(cw.s, c.code_begin + 0x285, cw.sp_c, 0x3333));
        INFO(fail_reason_name(t.failure));
        REQUIRE(t.status == TraceStatus::kComplete);
        CHECK(java_frames(t).back() == mb(5, 21));
    }
}

TEST_CASE("C2's OSR code: the prologue at the OSR entry, past a call and its padding", "[decoder][compiled][prologue]") {
    // The demo, JDK 17, 100 us: Matrix.multiply's OSR code sampled at its OSR entry's `push rbp`
    // (the interpreter had just jumped there); taken for a complete frame, the walk read a return
    // address 14 words up and failed (bad_return_address).
    CompiledWorld cw;
    CodeLoad c = cw.w.loads[0];
    c.kind = CodeKind::kOsr;
    c.osr_bci = 40;
    c.code.assign(0x400, 0x90);
    const uint8_t start[] = {0xe8, 0xfb, 0x82, 0x55, 0x29,                            // call (never run)
                             0x66, 0x66, 0x66, 0x0f, 0x1f, 0x84, 0x00, 0x00, 0x00, 0x00, 0x00,   // nop
                             0x89, 0x84, 0x24, 0x00, 0xc0, 0xfe, 0xff,               // mov [rsp-0x14000],eax
                             0x55,                                                   // push rbp
                             0x48, 0x83, 0xec, 0x10};                                // sub rsp,0x10
    std::memcpy(c.code.data(), start, sizeof start);
    c.frame_complete_offset = sizeof start;
    c.time_ns = 2;
    cw.w.map.apply(c);
    Decoder d(cw.w.map, test_options());
    auto check = [&](uint64_t pc_off, uint64_t sp, uint64_t rbp) {
        const CallTrace t = d.decode(sample_of(cw.s, c.code_begin + pc_off, sp, rbp));
        INFO("pc offset " << pc_off << " " << fail_reason_name(t.failure));
        REQUIRE(t.status == TraceStatus::kComplete);
        const auto frames = java_frames(t);
        REQUIRE(frames.size() >= 2);
        CHECK(frames.back() == mb(5, 21));
        CHECK(frames[frames.size() - 2].method_id == method_id(4));
    };
    const uint64_t entry_sp = cw.sp_c + 24;   // where C's return address is
    SECTION("at the OSR entry and the bang nothing is pushed") {
        check(0x10, entry_sp, cw.fp_stub);
        check(0x17, entry_sp, cw.fp_stub);
        CHECK(d.stats().prologue_tops == 2);
    }
    SECTION("after push rbp the caller's rbp is at [sp]") {
        cw.s.put(entry_sp - 8, cw.fp_stub);
        check(0x18, entry_sp - 8, 0x3333);
    }
    SECTION("complete at frame_complete_offset") { check(0x1c, cw.sp_c, 0x3333); }
}

TEST_CASE("bang-less C2 prologue: sub rsp then mov [rsp+N-16],rbp", "[decoder][compiled][prologue]") {
    CompiledWorld cw;
    CodeLoad c = cw.w.loads[0];
    c.code.assign(0x400, 0x90);
    const uint8_t prologue[] = {0x48, 0x81, 0xec, 0x18, 0x00, 0x00, 0x00,   // sub rsp,0x18
                                0x48, 0x89, 0x6c, 0x24, 0x10};              // mov [rsp+0x10],rbp
    std::memcpy(c.code.data(), prologue, sizeof prologue);
    c.time_ns = 2;
    cw.w.map.apply(c);
    Decoder d(cw.w.map, test_options());
    // After the sub, before the store: ret at sp+24, the caller's rbp still in the register.
    CallTrace t = d.decode(sample_of(cw.s, c.code_begin + 7, cw.sp_c, cw.fp_stub));
    INFO(fail_reason_name(t.failure));
    REQUIRE(t.status == TraceStatus::kComplete);
    CHECK(t.frames.back().method_id == method_id(5));
    CHECK(d.stats().prologue_tops == 1);
}

TEST_CASE("a not-entrant method's patched entry: a thread that entered before the patch is inside the old prologue",
          "[decoder][compiled][prologue]") {
    // The bytes were captured after the VM overwrote the first instruction with `jmp` to the
    // handle-wrong-method stub (JDK 25's demo: Recursion.fib's C1 code); the sampled thread had
    // entered before and ran the original instruction, whose tail is still there.
    CompiledWorld cw(jdk_param());
    CodeLoad c = cw.w.loads[0];
    c.code.assign(0x400, 0x90);
    c.time_ns = 2;
    const uint64_t entry_sp = cw.sp_c + 24;   // where C's return address is
    auto decoded = [&](const CodeLoad& code, uint64_t pc_off, uint64_t sp, uint64_t rbp) {
        CodeMap& map = cw.w.map;
        map.apply(code);
        Decoder d(map, test_options());
        CallTrace t = d.decode(sample_of(cw.s, code.code_begin + pc_off, sp, rbp));
        INFO("pc offset " << pc_off << " " << fail_reason_name(t.failure));
        CHECK(t.status == TraceStatus::kComplete);
        CHECK(java_frames(t) == std::vector<MethodBci>{mb(4, 9), mb(5, 21)});
    };
    SECTION("after the stack bang: push rbp; sub rsp; the entry barrier") {
        const uint8_t patched[] = {0xe9, 0x5b, 0xaa, 0x53, 0x07, 0xfe, 0xff,          // jmp (over the bang's head)
                                   0x55,                                             // push rbp
                                   0x48, 0x83, 0xec, 0x10,                           // sub rsp,0x10
                                   0x41, 0x81, 0x7f, 0x20, 0x01, 0x00, 0x00, 0x00,   // cmp dword [r15+0x20],1
                                   0x74, 0x05};                                      // je +5
        std::memcpy(c.code.data(), patched, sizeof patched);
        c.frame_complete_offset = 0x16;
        add_scope(c, 0x16, {{method_id(4), 9}});
        decoded(c, 0, entry_sp, cw.fp_stub);   // at the jmp itself: nothing pushed
        decoded(c, 7, entry_sp, cw.fp_stub);   // the bang ran: nothing pushed
        cw.s.put(entry_sp - 8, cw.fp_stub);
        decoded(c, 8, entry_sp - 8, 0x3333);   // after push rbp
        decoded(c, 0xc, cw.sp_c, 0x3333);      // the frame is whole at the barrier
        decoded(c, 0x14, cw.sp_c, 0x3333);
    }
    SECTION("after C2's bang-less sub rsp: the frame less its return address") {
        const uint8_t patched[] = {0xe9, 0x11, 0x22, 0x33, 0x44, 0x00, 0x00,   // jmp (over sub rsp,0x18's head)
                                   0x48, 0x89, 0x6c, 0x24, 0x10};              // mov [rsp+0x10],rbp
        std::memcpy(c.code.data(), patched, sizeof patched);
        c.frame_complete_offset = 0x10;
        add_scope(c, 0x10, {{method_id(4), 9}});
        decoded(c, 7, cw.sp_c, cw.fp_stub);   // rbp not saved yet
        decoded(c, 12, cw.sp_c, 0x3333);      // saved at [sp+0x10]
    }
}

TEST_CASE("prologue without instruction bytes: candidate return-address slots", "[decoder][compiled][prologue]") {
    CompiledWorld cw;
    Decoder d(cw.w.map, test_options());
    const uint64_t entry_sp = cw.sp_c + 24;
    CallTrace t = d.decode(sample_of(cw.s, cw.c_begin + 2, entry_sp, cw.fp_stub));
    INFO(fail_reason_name(t.failure));
    REQUIRE(t.status == TraceStatus::kComplete);
    CHECK(t.frames.back().method_id == method_id(5));
}

TEST_CASE("frameless method-handle intrinsic: return address at [sp]", "[decoder][compiled]") {
    CompiledWorld cw;
    CodeLoad mh = nmethod(kCodeCacheLow + 0x40000, 8, 0, CodeKind::kMethodHandleIntrinsic);
    cw.w.add_code(mh);
    const uint64_t sp = cw.sp_c + 24;   // where C's return address into D is
    Decoder d(cw.w.map, test_options());
    CallTrace t = d.decode(sample_of(cw.s, mh.code_begin + 0x10, sp, cw.fp_stub));
    INFO(fail_reason_name(t.failure));
    REQUIRE(t.status == TraceStatus::kComplete);
    CHECK(java_frames(t) == std::vector<MethodBci>{mb(8, -1), mb(5, 21)});
}

TEST_CASE("runtime stubs: known frame size and unknown size", "[decoder][stub]") {
    CompiledWorld cw;
    Decoder d(cw.w.map, test_options());
    const uint64_t caller_sp = cw.sp_c + 32;   // == sp_d: the stub returns into D at a call site
    SECTION("known frame size") {
        Stub stub{1, "C2 Runtime new_instance", kCodeCacheLow + 0x50000, kCodeCacheLow + 0x50100, 4};
        cw.w.map.apply(Event{stub});
        const uint64_t sp = caller_sp - 32;
        cw.s.put(sp + 24, cw.d_begin + 0x30);
        cw.s.put(sp + 16, 0x5555);
        CallTrace t = d.decode(sample_of(cw.s, stub.begin + 8, sp, 0));
        INFO(fail_reason_name(t.failure));
        REQUIRE(t.status == TraceStatus::kComplete);
        REQUIRE(t.frames[0].kind == FrameKind::kStub);
        CHECK(t.frames[0].symbol == "C2 Runtime new_instance");
        CHECK(java_frames(t) == std::vector<MethodBci>{mb(5, 21)});
    }
    SECTION("unknown size: scan for a verifiable return address") {
        Stub stub{1, "vtable chunks", kCodeCacheLow + 0x60000, kCodeCacheLow + 0x60100, -1};
        cw.w.map.apply(Event{stub});
        const uint64_t sp = caller_sp - 32;
        cw.s.put(sp, 0x12345);
        cw.s.put(sp + 8, kInterpBodyPc);   // looks like code but implies no valid frame
        cw.s.put(sp + 16, 0x77);
        cw.s.put(sp + 24, cw.d_begin + 0x30);
        CallTrace t = d.decode(sample_of(cw.s, stub.begin + 8, sp, 0));
        INFO(fail_reason_name(t.failure));
        REQUIRE(t.status == TraceStatus::kComplete);
        CHECK(java_frames(t) == std::vector<MethodBci>{mb(5, 21)});
        CHECK(d.stats().stub_scans == 1);
    }
    SECTION("unknown size and nothing verifiable fails") {
        Stub stub{1, "adapters", kCodeCacheLow + 0x60000, kCodeCacheLow + 0x60100, -1};
        cw.w.map.apply(Event{stub});
        FakeStack empty;
        CallTrace t = d.decode(sample_of(empty, stub.begin, empty.at(0), 0));
        CHECK(t.failure == FailReason::kStubUnwindFailed);
    }
}

TEST_CASE("native code at the top: rbp chain into a native wrapper", "[decoder][native]") {
    CompiledWorld cw;
    CodeLoad wrapper = nmethod(kCodeCacheLow + 0x70000, 9, 10, CodeKind::kNativeWrapper);
    cw.w.add_code(wrapper);
    // The wrapper's frame (fs 10): sp, rbp = sp + 64, ret into D at rbp + 8; D above it.
    const uint64_t sp_w = cw.s.at(0x200);
    const uint64_t fp_w = sp_w + 64;
    const uint64_t sp_d = sp_w + 80;
    cw.s.put(fp_w + 8, cw.d_begin + 0x30);
    cw.s.put(fp_w, 0x4444);
    cw.s.put(sp_d + 40, kCallStubReturn);
    cw.s.put(sp_d + 32, cw.fp_stub);
    // Two native frames below the wrapper.
    const uint64_t fp_n2 = sp_w - 16;
    cw.s.put(fp_n2 + 8, wrapper.code_begin + 0x60);
    cw.s.put(fp_n2, fp_w);
    const uint64_t fp_n1 = fp_n2 - 0x40;
    cw.s.put(fp_n1 + 8, kNativePc + 0x100);
    cw.s.put(fp_n1, fp_n2);
    Decoder d(cw.w.map, test_options());
    CallTrace t = d.decode(sample_of(cw.s, kNativePc, fp_n1 - 0x20, fp_n1));
    INFO(fail_reason_name(t.failure));
    REQUIRE(t.status == TraceStatus::kComplete);
    REQUIRE(t.frames.size() == 4);
    CHECK(t.frames[0].kind == FrameKind::kNative);
    CHECK(t.frames[1].kind == FrameKind::kNative);
    CHECK(t.frames[2].kind == FrameKind::kNativeWrapper);
    CHECK(java_frames(t) == std::vector<MethodBci>{mb(9, -1), mb(5, 21)});
}

TEST_CASE("a signal frame: the frame the signal interrupted is decoded as a top frame", "[decoder][native][signal]") {
    const uint64_t restorer = glibc_signal_restorer();

    CompiledWorld cw;
    for (const auto& m : self_modules()) cw.w.map.apply(Event{m});
    // Room below C's frame for the handler's frame and the signal's context.
    FakeStack s;
    s.base = cw.s.base - 0x2000;
    s.bytes.assign(0x2000, 0);
    s.bytes.insert(s.bytes.end(), cw.s.bytes.begin(), cw.s.bytes.end());
    // The trampoline's sp is the saved context; the signal interrupted C at a pc with no PcDesc of
    // its own (the next one, at 0x50, is method 6 inlined into 4).
    const uint64_t context = s.at(0x1000);
    auto greg = [&](int reg) { return context + offsetof(ucontext_t, uc_mcontext.gregs) + 8 * uint64_t(reg); };
    s.put(greg(REG_RIP), cw.c_begin + 0x40);
    s.put(greg(REG_RSP), cw.sp_c);
    s.put(greg(REG_RBP), 0x2222);
    const std::vector<MethodBci> interrupted_c{mb(6, 3), mb(4, 7), mb(5, 21)};
    DecoderOptions options = test_options();
    options.use_libunwind = true;   // the trampoline is crossed by its unwind row
    options.symbolize_native = true;
    Decoder d(cw.w.map, options);

    SECTION("the handler's frame returns into the trampoline") {
        const uint64_t fp_handler = context - 16;   // rbp chain: [rbp] saved, [rbp + 8] the return address
        s.put(fp_handler + 8, restorer);
        s.put(fp_handler, 0x3333);
        CallTrace t = d.decode(sample_of(s, kNativePc, fp_handler - 0x40, fp_handler));
        INFO(fail_reason_name(t.failure));
        REQUIRE(t.status == TraceStatus::kComplete);
        CHECK(java_frames(t) == interrupted_c);
        REQUIRE(t.frames.size() == 5);
        CHECK(t.frames[1].kind == FrameKind::kNative);   // the trampoline
        CHECK(t.frames[2].kind == FrameKind::kInlined);
        // The trampoline is marked (a validator's ASGCT in the handler sees none of this), no other frame.
        for (size_t i = 0; i < t.frames.size(); ++i) CHECK(t.frames[i].signal_frame == (i == 1));
        CHECK(d.stats().signal_frames == 1);
    }
    SECTION("sampled in the trampoline itself") {
        CallTrace t = d.decode(sample_of(s, restorer, context, 0x3333));
        INFO(fail_reason_name(t.failure));
        REQUIRE(t.status == TraceStatus::kComplete);
        CHECK(java_frames(t) == interrupted_c);
        REQUIRE(!t.frames.empty());
        CHECK(t.frames[0].signal_frame);
        CHECK(d.stats().signal_frames == 1);
    }
    SECTION("interrupted at a call site: the PcDesc after it, not the call's own") {
        // As a return address 0x50 would name the call's scope (6@3 in 4@7); interrupted there, the
        // instruction has not run, and the frame is where the next PcDesc says (4@9).
        s.put(greg(REG_RIP), cw.c_begin + 0x50);
        CallTrace t = d.decode(sample_of(s, restorer, context, 0x3333));
        INFO(fail_reason_name(t.failure));
        REQUIRE(t.status == TraceStatus::kComplete);
        CHECK(java_frames(t) == std::vector<MethodBci>{mb(4, 9), mb(5, 21)});
    }
}

TEST_CASE("a signal that interrupted a half-built interpreter frame: the frame's registers from the signal's context",
          "[decoder][native][signal][interpreter]") {
    // The agent's validate mode runs AsyncGetCallTrace in a SIGPROF handler; a sample taken inside
    // it while the signal had interrupted a method-entry codelet (a javac probe, JDK 17 and 25:
    // 23 and 11 bad_interpreter_frame in ~180,000 samples) has the callee's frame half built, told
    // from rbx, r13 and rax as at a true top, but those lie in the signal's saved context.
    const uint64_t restorer = glibc_signal_restorer();
    World w(jdk_param());
    for (const auto& m : self_modules()) w.map.apply(Event{m});
    FakeStack s;
    // Caller B is interpreted and in a call; its callee A (method 1) is being entered.
    const uint64_t fp_b = s.at(0x900), fp_stub = s.at(0xb00);
    const uint64_t caller_sp = s.at(0x800);
    w.interp_frame(s, fp_b, 2, bcp(2, 7), fp_b + 16, kCallStubReturn, fp_stub, caller_sp);
    w.entry_frame(s, fp_stub);
    const uint64_t context = s.at(0x200);
    auto greg = [&](int reg) { return context + offsetof(ucontext_t, uc_mcontext.gregs) + 8 * uint64_t(reg); };
    const uint64_t fp_handler = context - 16;
    s.put(fp_handler + 8, restorer);
    s.put(fp_handler, 0x3333);
    s.put(greg(REG_RIP), kEntryCodeletBegin + 0x40);
    s.put(greg(REG_RBX), method_ptr(1));
    DecoderOptions options = test_options();
    options.use_libunwind = true;
    options.symbolize_native = true;
    Decoder d(w.map, options);
    const std::vector<MethodBci> expected{mb(1, 0), mb(2, 7)};

    SECTION("not linked: the return address at [sp], the sender sp in r13") {
        const uint64_t sp = caller_sp - 8;
        s.put(sp, kInterpReturnPc);
        s.put(greg(REG_RSP), sp);
        s.put(greg(REG_RBP), fp_b);
        s.put(greg(REG_R13), caller_sp);
        // The sample's own registers are the handler's: nothing of A's.
        Sample smp = sample_of(s, kNativePc, fp_handler - 0x40, fp_handler);
        smp.regs.bx = 0x5151;
        smp.regs.r13 = 0x5252;
        CallTrace t = d.decode(smp);
        INFO(fail_reason_name(t.failure));
        REQUIRE(t.status == TraceStatus::kComplete);
        CHECK(java_frames(t) == expected);
        CHECK(d.stats().signal_frames == 1);
        CHECK(d.stats().partial_interpreter_tops == 1);
    }
    SECTION("decoded again after the context changed: the incremental walk reads the new registers") {
        const uint64_t sp = caller_sp - 8;
        s.put(sp, kInterpReturnPc);
        s.put(greg(REG_RSP), sp);
        s.put(greg(REG_RBP), fp_b);
        s.put(greg(REG_R13), caller_sp);
        DecoderOptions incremental = options, full = options;
        incremental.incremental = true;
        full.incremental = false;
        Decoder di(w.map, incremental), df(w.map, full);
        const Sample first = sample_of(s, kNativePc, fp_handler - 0x40, fp_handler, 1000);
        REQUIRE(di.decode(first) == df.decode(first));
        s.put(greg(REG_RBX), method_ptr(3));   // another callee being entered, the same stack otherwise
        const Sample second = sample_of(s, kNativePc, fp_handler - 0x40, fp_handler, 2000);
        const CallTrace walked = df.decode(second), taken_over = di.decode(second);
        CHECK(walked == taken_over);
        CHECK(java_frames(taken_over) == std::vector<MethodBci>{mb(3, 0), mb(2, 7)});
    }
    SECTION("linked but partial: Method* still in rbx") {
        const uint64_t fp = caller_sp - 16;
        s.put(fp + 8, kInterpReturnPc);
        s.put(fp, fp_b);
        s.put(fp - 8, caller_sp);
        s.put(greg(REG_RSP), fp - 16);
        s.put(greg(REG_RBP), fp);
        s.put(greg(REG_R13), bcp(1, 0));
        CallTrace t = d.decode(sample_of(s, restorer, context, 0x3333));
        INFO(fail_reason_name(t.failure));
        REQUIRE(t.status == TraceStatus::kComplete);
        CHECK(java_frames(t) == expected);
    }
}

TEST_CASE("native code returning into an rbp-framed stub of unknown size: its caller at [rbp+8]",
          "[decoder][native][stub]") {
    // G1BarrierSetRuntime::write_ref_array_post_entry called from StubRoutines' jint_disjoint_arraycopy
    // (h2, JDK 17): the stub did `enter` (push rbp; mov rbp, rsp) and the native callee saved that
    // rbp. Between the stub's sp and its rbp lie words the stub pushed or skipped, here a stale return
    // address into E whose frame checks out as a scan's candidate: a scan from sp took it and named
    // E's stale caller chain (ASGCT, through the stub's frame, named the compiled caller).
    World w;
    FakeStack s;
    CodeLoad caller = nmethod(kCodeCacheLow + 0x20000, 5, 6);
    add_scope(caller, 0x30, {{method_id(5), 21}});
    w.add_code(caller);
    CodeLoad stale = nmethod(kCodeCacheLow + 0x30000, 6, 2);
    add_scope(stale, 0x40, {{method_id(6), 3}});
    w.add_code(stale);
    Stub stub{1, "jint_disjoint_arraycopy_avx3", kCodeCacheLow + 0x50000, kCodeCacheLow + 0x50400, -1};
    w.map.apply(Event{stub});
    const uint64_t fp_n = s.at(0x100);                // the native frame (rbp-framed)
    const uint64_t sp_stub = fp_n + 16;
    const uint64_t fp_s = sp_stub + 0x40;             // the stub's rbp frame
    const uint64_t sp_caller = fp_s + 16;
    const uint64_t fp_stub = s.at(0x600);
    s.put(fp_n + 8, stub.begin + 0x3f7);              // return into the stub
    s.put(fp_n, fp_s);
    s.put(sp_stub + 8, stale.code_begin + 0x40);      // stale: E, frame size 2, "returns" into the interpreter
    s.put(sp_stub + 24, kInterpReturnPc);
    s.put(fp_s + 8, caller.code_begin + 0x30);        // the stub returns into the compiled caller
    s.put(fp_s, 0x5555);
    s.put(sp_caller + 5 * 8, kCallStubReturn);
    s.put(sp_caller + 4 * 8, fp_stub);
    w.entry_frame(s, fp_stub);
    Decoder d(w.map, test_options());
    CallTrace t = d.decode(sample_of(s, kNativePc, fp_n - 0x20, fp_n));
    INFO(fail_reason_name(t.failure));
    REQUIRE(t.status == TraceStatus::kComplete);
    REQUIRE(t.frames.size() == 3);
    CHECK(t.frames[1].kind == FrameKind::kStub);
    CHECK(java_frames(t) == std::vector<MethodBci>{mb(5, 21)});
    CHECK(d.stats().stub_rbp_frames == 1);
    CHECK(d.stats().stub_scans == 0);

    SECTION("an rbp whose [rbp+8] is no verified return address leaves the stub to the scan") {
        s.put(fp_s + 8, 0x42);
        Decoder again(w.map, test_options());
        const CallTrace u = again.decode(sample_of(s, kNativePc, fp_n - 0x20, fp_n));
        CHECK(again.stats().stub_rbp_frames == 0);
        CHECK(again.stats().stub_scans == 1);
        CHECK(java_frames(u) != std::vector<MethodBci>{mb(5, 21)});
    }
}

TEST_CASE("native code returning into a runtime stub that keeps no frame pointer", "[decoder][native][stub]") {
    // SharedRuntime::complete_monitor_locking_C called from C2's _complete_monitor_locking_Java:
    // the stub's frame (4 words) has no frame pointer, so the rbp the native callee saved is
    // whatever the compiled code kept in rbp (seen under ASan: a pointer 1.8 GB above the stack).
    // Its sp is where the native frame returns to; an sp derived from that rbp would run off.
    World w;
    FakeStack s;
    CodeLoad caller = nmethod(kCodeCacheLow + 0x20000, 5, 6);
    add_scope(caller, 0x30, {{method_id(5), 21}});
    w.add_code(caller);
    Stub stub{1, "_complete_monitor_locking_Java", kCodeCacheLow + 0x50000, kCodeCacheLow + 0x50100, 4};
    w.map.apply(Event{stub});
    const uint64_t fp_n = s.at(0x100);              // the native frame (rbp-framed)
    const uint64_t sp_stub = fp_n + 16;
    const uint64_t sp_caller = sp_stub + 4 * 8;
    const uint64_t fp_stub = s.at(0x600);
    s.put(sp_stub + 24, caller.code_begin + 0x30);  // the stub returns into the compiled caller
    s.put(sp_stub + 16, 0x5555);
    s.put(sp_caller + 5 * 8, kCallStubReturn);
    s.put(sp_caller + 4 * 8, fp_stub);
    w.entry_frame(s, fp_stub);
    const uint64_t far_above = sp_stub + (uint64_t{1800} << 20);
    for (const uint64_t stub_rbp : {far_above, uint64_t{0x1234}}) {
        INFO("the stub's rbp: " << std::hex << stub_rbp);
        s.put(fp_n + 8, stub.begin + 0x40);   // return into the stub
        s.put(fp_n, stub_rbp);
        Decoder d(w.map, test_options());
        CallTrace t = d.decode(sample_of(s, kNativePc, fp_n - 0x20, fp_n));
        INFO(fail_reason_name(t.failure));
        REQUIRE(t.status == TraceStatus::kComplete);
        REQUIRE(t.frames.size() >= 2);
        CHECK(t.frames[1].kind == FrameKind::kStub);
        CHECK(java_frames(t) == std::vector<MethodBci>{mb(5, 21)});
    }
}

TEST_CASE("a deoptimization blob unpacking frames: the interpreter frames it has not filled in yet", "[decoder][stub][deopt]") {
    // Deoptimization::unpack_frames called from DeoptimizationBlob, which pushed the deoptimized
    // method's interpreter frames as skeletons (return address, rbp, sender sp) and fills them in
    // one by one (JDK 25's demo: 5-16 samples a run at 100 us, each unknown_method).
    const std::string blob = GENERATE(std::string("DeoptimizationBlob"), std::string("UncommonTrapBlob"),
                                      std::string("ExceptionBlob"));
    World w;
    FakeStack s;
    CodeLoad caller = nmethod(kCodeCacheLow + 0x20000, 5, 6);   // the deoptimized method's caller
    add_scope(caller, 0x30, {{method_id(5), 21}});
    w.add_code(caller);
    Stub stub{1, blob, kCodeCacheLow + 0x50000, kCodeCacheLow + 0x50400, 4};
    w.map.apply(Event{stub});
    const uint64_t fp_n = s.at(0x100);         // unpack_frames (rbp-framed)
    const uint64_t sp_blob = fp_n + 16;
    const uint64_t fp_skeleton = s.at(0x200);  // the interpreter frame being rebuilt
    const uint64_t sp_caller = fp_skeleton + 16;
    const uint64_t fp_entry = s.at(0x600);
    s.put(fp_n + 8, stub.begin + 0x40);
    s.put(fp_n, 0x1234);
    s.put(sp_blob + 3 * 8, kInterpReturnPc);   // the blob's own frame returns into the interpreter
    s.put(sp_blob + 2 * 8, fp_skeleton);
    w.interp_frame(s, fp_skeleton, 1, bcp(1, 5), sp_caller, caller.code_begin + 0x30, 0x5555);
    s.put(sp_caller + 5 * 8, kCallStubReturn);
    s.put(sp_caller + 4 * 8, fp_entry);
    w.entry_frame(s, fp_entry);
    auto decoded = [&] {
        Decoder d(w.map, test_options());
        CallTrace t = d.decode(sample_of(s, kNativePc, fp_n - 0x20, fp_n));
        INFO(blob << ": " << fail_reason_name(t.failure));
        return std::make_pair(t, d.stats().deopt_rebuilding_frames);
    };
    SECTION("filled in: the method it runs") {
        const auto [t, rebuilt] = decoded();
        CHECK(t.status == TraceStatus::kComplete);
        CHECK(java_frames(t) == std::vector<MethodBci>{mb(1, 5), mb(5, 21)});
        CHECK(rebuilt == 0);
    }
    SECTION("not yet: a stub frame says so, and the walk goes on to the caller") {
        s.put(fp_skeleton + int64_t(hotspot::interp::kMethod) * 8, 0);   // the Method* not written yet
        const auto [t, rebuilt] = decoded();
        if (blob == "ExceptionBlob") {   // no blob that unpacks frames: the frame is what it is
            CHECK(t.status == TraceStatus::kFailed);
            CHECK(t.failure == FailReason::kUnknownMethod);
            CHECK(rebuilt == 0);
        } else {
            CHECK(t.status == TraceStatus::kComplete);
            CHECK(java_frames(t) == std::vector<MethodBci>{mb(5, 21)});
            const bool marked = std::any_of(t.frames.begin(), t.frames.end(), [](const Frame& f) {
                return f.kind == FrameKind::kStub && f.symbol.view() == kRebuiltFrameName;
            });
            CHECK(marked);
            CHECK(rebuilt == 1);
        }
    }
}

namespace {

// Two compiled methods for the stub tests, 6-word frames each: A (method 5) with a call site at +0x30
// (bci 21), the caller; B (method 7) at +0x40 (bci 9), whose return address a stale word can hold.
std::pair<CodeLoad, CodeLoad> callers_a_and_b(World& w) {
    CodeLoad a = nmethod(kCodeCacheLow + 0x20000, 5, 6);
    add_scope(a, 0x30, {{method_id(5), 21}});
    w.add_code(a);
    CodeLoad b = nmethod(kCodeCacheLow + 0x30000, 7, 6);
    add_scope(b, 0x40, {{method_id(7), 9}});
    w.add_code(b);
    return {a, b};
}

}  // namespace

TEST_CASE("native code returning into a runtime blob: its caller is at sp, not where a live rbp further up points",
          "[decoder][native][stub]") {
    // OptoRuntime::handle_exception_C called from ExceptionBlob (2 words, no frame pointer): rbp is
    // whatever the compiled code had, here a live frame's fp two frames further up, whose "caller"
    // (the call stub) checks out too. Taken first, it dropped the frames in between (an exception
    // propagating through a 48-deep C2 recursion lost all 48; an uncommon trap lost the method it
    // deoptimized). A C1 Runtime1 stub builds an rbp frame, so for those rbp still comes first.
    World w;
    FakeStack s;
    const auto [a, b] = callers_a_and_b(w);
    const Stub blob{1, "ExceptionBlob", kCodeCacheLow + 0x50000, kCodeCacheLow + 0x50100, 2};
    w.map.apply(Event{blob});
    const uint64_t fp_n = s.at(0x100);   // the native frame (rbp-framed)
    const uint64_t sp_blob = fp_n + 16, sp_a = sp_blob + 16, sp_b = sp_a + 48;
    const uint64_t fp_stub = s.at(0x600);
    s.put(fp_n + 8, blob.begin + 0x3e);   // return into the blob
    s.put(sp_blob, 0x5555);               // the rbp it saved
    s.put(sp_blob + 8, a.code_begin + 0x30);
    s.put(sp_a + 40, b.code_begin + 0x40);
    s.put(sp_b + 32, fp_stub);
    s.put(sp_b + 40, kCallStubReturn);
    w.entry_frame(s, fp_stub);
    s.put(fp_n, sp_b + 32);   // the rbp handle_exception_C saved: where B's caller's rbp lies
    Decoder d(w.map, test_options());
    CallTrace t = d.decode(sample_of(s, kNativePc, fp_n - 0x20, fp_n));
    INFO(fail_reason_name(t.failure));
    REQUIRE(t.status == TraceStatus::kComplete);
    CHECK(java_frames(t) == std::vector<MethodBci>{mb(5, 21), mb(7, 9)});
}

TEST_CASE("a sample inside a Runtime1 stub half-way through its register saves: the caller is at rbp, not at the "
          "frame size's slot",
          "[decoder][stub]") {
    // C1's monitorexit_nofpu stub: `enter`, then it pushes the registers its 144-word frame holds.
    // Sampled 16 words into that, the slot 143 words above sp is not yet the stub's: there it held
    // a stale return address into other compiled code, which the walk took and failed two frames
    // on (3 of 20,000 samples of a Tomcat server). Past `enter`, rbp is the stub's frame pointer.
    World w;
    FakeStack s;
    const auto [a, b] = callers_a_and_b(w);
    const Stub stub{1, "monitorexit_nofpu Runtime1 stub", kCodeCacheLow + 0x50000, kCodeCacheLow + 0x50118, 144};
    w.map.apply(Event{stub});
    const uint64_t sp = s.at(0x100), fp_stub_frame = sp + 0x80, sp_a = fp_stub_frame + 16;
    const uint64_t fp_entry = s.at(0x800);
    s.put(fp_stub_frame, 0x5555);                       // A's rbp, saved by `enter`
    s.put(fp_stub_frame + 8, a.code_begin + 0x30);      // the stub returns into A
    s.put(sp_a + 40, kCallStubReturn);
    s.put(sp_a + 32, fp_entry);
    w.entry_frame(s, fp_entry);
    s.put(sp + 143 * 8, b.code_begin + 0x40);           // stale: a return into B from an earlier call
    s.put(sp + 142 * 8, 0x6666);
    s.put(sp, 0x7777);                                  // a register the stub pushed
    Decoder d(w.map, test_options());
    CallTrace t = d.decode(sample_of(s, stub.begin + 0x10, sp, fp_stub_frame));
    INFO(fail_reason_name(t.failure));
    REQUIRE(t.status == TraceStatus::kComplete);
    REQUIRE_FALSE(t.frames.empty());
    CHECK(t.frames[0].kind == FrameKind::kStub);
    CHECK(java_frames(t) == std::vector<MethodBci>{mb(5, 21)});

    // At its `ret`, after `leave`: [sp] is the return address and rbp is A's again.
    s.put(sp, a.code_begin + 0x30);
    CallTrace r = Decoder(w.map, test_options()).decode(sample_of(s, stub.begin + 0x117, sp, 0x5555));
    INFO(fail_reason_name(r.failure));
    REQUIRE(r.status == TraceStatus::kComplete);
    CHECK(java_frames(r) == std::vector<MethodBci>{mb(5, 21)});
}

TEST_CASE("JNI upcall: an entry frame whose anchor continues below native code", "[decoder][entry]") {
    const auto jdk = jdk_param();
    World w(jdk);
    FakeStack s;
    CodeLoad wrapper = nmethod(kCodeCacheLow + 0x70000, 9, 10, CodeKind::kNativeWrapper);
    w.add_code(wrapper);
    CodeLoad dd = nmethod(kCodeCacheLow + 0x20000, 5, 6);
    add_scope(dd, 0x30, {{method_id(5), 21}});
    w.add_code(dd);
    // Top: interpreted A called by the call stub (an upcall from native code).
    const uint64_t fp_a = s.at(0x100), fp_stub1 = s.at(0x300);
    w.interp_frame(s, fp_a, 1, bcp(1, 4), fp_a + 16, kCallStubReturn, fp_stub1);
    // Native frames (libjvm, the JNI library) lie between 0x300 and 0x800; the anchor skips them.
    const uint64_t sp_w = s.at(0x800), sp_d = sp_w + 80, fp_stub2 = s.at(0xa00);
    w.entry_frame(s, fp_stub1, sp_w, wrapper.code_begin + 0x90, 0);
    s.put(sp_w + 72, dd.code_begin + 0x30);
    s.put(sp_w + 64, 0x4444);
    s.put(sp_d + 40, kCallStubReturn);
    s.put(sp_d + 32, fp_stub2);
    w.entry_frame(s, fp_stub2);
    Decoder d(w.map, test_options());
    CallTrace t = d.decode(sample_of(s, kInterpBodyPc, s.at(0), fp_a));
    INFO(fail_reason_name(t.failure));
    REQUIRE(t.status == TraceStatus::kComplete);
    CHECK(java_frames(t) == std::vector<MethodBci>{mb(1, 4), mb(9, -1), mb(5, 21)});
    CHECK(d.stats().entry_frames_crossed == 2);
}

namespace {
__attribute__((noinline)) void jni_helper_like() { asm volatile("" ::: "memory"); }
__attribute__((noinline)) void jni_function_like() { asm volatile("" ::: "memory"); }

// A JNI upcall's surroundings: this process's modules (native code to unwind), a native method's
// wrapper (method 9) and its compiled caller (method 5 at bci 21), itself called from a first
// entry frame.
struct UpcallWorld {
    World w;
    CodeLoad wrapper = nmethod(kCodeCacheLow + 0x70000, 9, 10, CodeKind::kNativeWrapper);
    CodeLoad dd = nmethod(kCodeCacheLow + 0x20000, 5, 6);
    explicit UpcallWorld(hotspot::Family jdk) : w(jdk) {
        for (const auto& m : self_modules()) w.map.apply(Event{m});
        w.add_code(wrapper);
        add_scope(dd, 0x30, {{method_id(5), 21}});
        w.add_code(dd);
    }
    uint64_t wrapper_pc() const { return wrapper.code_begin + 0x90; }
    // The wrapper's frame at sp_w and the frames below it, up to the first entry frame at fp_stub.
    void java_below(FakeStack& s, uint64_t sp_w, uint64_t fp_stub) const {
        const uint64_t sp_d = sp_w + 80;
        s.put(sp_w + 72, dd.code_begin + 0x30);
        s.put(sp_w + 64, 0x4444);
        s.put(sp_d + 40, kCallStubReturn);
        s.put(sp_d + 32, fp_stub);
        w.entry_frame(s, fp_stub);
    }
};
}  // namespace

TEST_CASE("an i2c adapter right after it popped its return address: the call stub's frame through rbp",
          "[decoder][entry][stub]") {
    // JavaCalls' call stub called the adapter (a JNI upcall); at adapter + 4 the return address is
    // in rax and below sp, where the fragment does not reach, and [sp] holds the call stub's words.
    // The call stub's frame at rbp returns into the VM and holds its JavaCallWrapper above rbp.
    UpcallWorld u(jdk_param());
    World& w = u.w;
    const Stub adapters{1, "I2C/C2I adapters", kCodeCacheLow + 0x60000, kCodeCacheLow + 0x60100, -1};
    w.map.apply(Event{adapters});
    const uint64_t helper_ret = reinterpret_cast<uint64_t>(&jni_helper_like) + 1;
    enum class Caller { kCallStub, kInterpreted };
    const auto stack_of = [&](Caller caller, uint64_t junk_at_sp) {
        FakeStack s;
        const uint64_t fp_caller = s.at(0x78);
        s.put(s.at(0), junk_at_sp);
        s.put(s.at(8), 0x7ffd'1234'5678);
        if (caller == Caller::kCallStub) {
            // call_helper's frame is the native one at 0x200, which returns into the wrapper's call.
            const uint64_t fp_n = s.at(0x200), sp_w = fp_n + 16;
            s.put(fp_caller, fp_n);
            s.put(fp_caller + 8, helper_ret);
            s.put(fp_n, 0x5555);
            s.put(fp_n + 8, u.wrapper_pc());
            w.entry_frame(s, fp_caller, sp_w, u.wrapper_pc(), 0);
            u.java_below(s, sp_w, s.at(0xc00));
        } else {
            w.interp_frame(s, fp_caller, 1, bcp(1, 4), fp_caller + 16, kCallStubReturn, s.at(0x300));
            w.entry_frame(s, s.at(0x300));
        }
        return std::make_pair(s, fp_caller);
    };
    for (const uint64_t junk : {uint64_t{0}, u.dd.code_begin + 0x30, kCallStubReturn}) {
        INFO("word at sp 0x" << std::hex << junk);
        const auto [s, fp] = stack_of(Caller::kCallStub, junk);
        Decoder d(w.map, test_options());
        const CallTrace t = d.decode(sample_of(s, adapters.begin + hotspot::adapter::kI2cReturnPoppedOffset, s.at(0), fp));
        INFO(fail_reason_name(t.failure));
        REQUIRE(t.status == TraceStatus::kComplete);
        REQUIRE(t.frames.size() == 4);
        CHECK(t.frames[0].kind == FrameKind::kStub);
        CHECK(t.frames[1].pc == helper_ret);   // JavaCalls::call_helper's stand-in
        CHECK(java_frames(t) == std::vector<MethodBci>{mb(9, -1), mb(5, 21)});
        CHECK(d.stats().i2c_popped_tops == 1);
    }
    // Elsewhere in the adapter, or with an interpreted caller (whose frame returns into Java code),
    // the rule stays out of it.
    {
        const auto [s, fp] = stack_of(Caller::kInterpreted, 0);
        Decoder d(w.map, test_options());
        (void)d.decode(sample_of(s, adapters.begin + hotspot::adapter::kI2cReturnPoppedOffset, s.at(0), fp));
        CHECK(d.stats().i2c_popped_tops == 0);
    }
    {
        const auto [s, fp] = stack_of(Caller::kCallStub, 0);
        Decoder d(w.map, test_options());
        (void)d.decode(sample_of(s, adapters.begin + 13, s.at(0), fp));
        CHECK(d.stats().i2c_popped_tops == 0);
    }
}

TEST_CASE("JNI upcall: the native frames between the call stub and the anchor's frame, where they lead there",
          "[decoder][entry][native]") {
    // JavaCalls::call_helper's frame, then the JNI function's, whose caller is the native wrapper at
    // the anchor's sp: the trace shows them between the upcall's Java frames and the wrapper's, as
    // samples inside the JNI function show them, instead of leaving them out.
    UpcallWorld u(jdk_param());
    World& w = u.w;
    const CodeLoad& wrapper = u.wrapper;
    const uint64_t helper_ret = reinterpret_cast<uint64_t>(&jni_helper_like) + 1;
    const uint64_t jni_ret = reinterpret_cast<uint64_t>(&jni_function_like) + 1;
    const uint64_t thunk_pc = 0x10000;   // a breadcrumb thunk: anonymous memory, no module
    enum class Shape { kWhole, kBroken, kThroughThunk };
    const auto stack_of = [&](Shape shape) {
        FakeStack s;
        const uint64_t fp_a = s.at(0x100), fp_stub1 = s.at(0x300), fp_n1 = s.at(0x400), fp_n2 = s.at(0x600);
        w.interp_frame(s, fp_a, 1, bcp(1, 4), fp_a + 16, kCallStubReturn, fp_stub1);
        s.put(fp_stub1, fp_n1);
        s.put(fp_stub1 + 8, helper_ret);
        s.put(fp_n1, fp_n2);
        s.put(fp_n1 + 8, shape == Shape::kBroken ? 0x1234 : jni_ret);
        uint64_t sp_w = fp_n2 + 16;
        s.put(fp_n2, 0x5555);
        if (shape == Shape::kThroughThunk) {
            // The thunk's frame, 8 words, with its record naming the wrapper's sp.
            s.put(fp_n2 + 8, thunk_pc);
            const uint64_t record = fp_n2 + 16 + 8;
            sp_w = fp_n2 + 16 + 64;
            s.put(record, breadcrumb::kMagic0);
            s.put(record + 8, breadcrumb::kMagic1);
            s.put(record + breadcrumb::kJavaSpOffset, sp_w);
            s.put(record + breadcrumb::kJavaPcOffset, wrapper.code_begin + 0x90);
        } else {
            s.put(fp_n2 + 8, wrapper.code_begin + 0x90);
        }
        w.entry_frame(s, fp_stub1, sp_w, wrapper.code_begin + 0x90, 0);
        u.java_below(s, sp_w, s.at(0xc00));
        return std::make_pair(s, fp_a);
    };
    const auto natives = [](const CallTrace& t) {
        std::vector<uint64_t> pcs;
        for (const Frame& f : t.frames) {
            if (f.kind == FrameKind::kNative) pcs.push_back(f.pc);
        }
        return pcs;
    };
    for (const Shape shape : {Shape::kWhole, Shape::kBroken, Shape::kThroughThunk}) {
        const auto [s, fp_a] = stack_of(shape);
        Decoder d(w.map, test_options());
        const CallTrace t = d.decode(sample_of(s, kInterpBodyPc, s.at(0), fp_a));
        INFO("shape " << int(shape) << ": " << fail_reason_name(t.failure));
        REQUIRE(t.status == TraceStatus::kComplete);
        // The Java frames never depend on it.
        CHECK(java_frames(t) == std::vector<MethodBci>{mb(1, 4), mb(9, -1), mb(5, 21)});
        if (shape == Shape::kBroken) {
            // An unwinding that does not get to the anchor's frame: its frames are left out.
            CHECK(natives(t).empty());
            CHECK(d.stats().entry_native_fallbacks == 1);
            CHECK(d.stats().entry_native_runs == 0);
        } else {
            CHECK(natives(t) == std::vector<uint64_t>{helper_ret, jni_ret});
            REQUIRE(t.frames.size() == 5);
            CHECK(t.frames[1].pc == helper_ret);   // right below the upcall's Java frame
            CHECK(t.frames[3].method_id == method_id(9));
            CHECK(d.stats().entry_native_runs == 1);
            CHECK(d.stats().entry_native_fallbacks == 0);
        }
    }
}

TEST_CASE("a sample in a breadcrumb thunk names it, its record whole or already cleared", "[decoder][native]") {
    // The agent's thunk (anonymous memory, no module) between a native wrapper and the JNI function:
    // push rbp; mov rbp, rsp; its record right below rbp; call; clear magic0; leave; ret. Sampled
    // there, the thunk is the profiler's own cost on the thread: named, not [unknown]. Unwound by
    // its rbp frame to the wrapper's call, as before.
    UpcallWorld u(jdk_param());
    const uint64_t thunk_pc = 0x10000;
    enum class Record { kWhole, kCleared, kNone, kOtherCall };
    for (const Record record : {Record::kWhole, Record::kCleared, Record::kNone, Record::kOtherCall}) {
        FakeStack s;
        const uint64_t sp_t = s.at(0x100), fp_t = sp_t + 0x30, sp_w = fp_t + 16;
        s.put(fp_t, sp_w + 64);   // the wrapper's rbp
        s.put(fp_t + 8, u.wrapper_pc());
        const uint64_t at = fp_t + static_cast<uint64_t>(int64_t{breadcrumb::kThunkRecordFromFp});
        if (record != Record::kNone) {
            s.put(at, record == Record::kCleared ? 0 : breadcrumb::kMagic0);
            s.put(at + 8, breadcrumb::kMagic1);
            s.put(at + breadcrumb::kJavaSpOffset, sp_w);
            s.put(at + breadcrumb::kJavaPcOffset, record == Record::kOtherCall ? u.wrapper_pc() + 0x10 : u.wrapper_pc());
        }
        u.java_below(s, sp_w, s.at(0xc00));
        DecoderOptions options = test_options();
        options.symbolize_native = true;
        Decoder d(u.w.map, options);
        const CallTrace t = d.decode(sample_of(s, thunk_pc, sp_t, fp_t));
        INFO("record " << int(record) << ": " << fail_reason_name(t.failure));
        REQUIRE(t.status == TraceStatus::kComplete);
        REQUIRE(t.frames.size() >= 3);
        CHECK(t.frames[0].kind == FrameKind::kNative);
        CHECK(t.frames[1].kind == FrameKind::kNativeWrapper);
        CHECK(t.frames[1].method_id == method_id(9));
        const bool named = record == Record::kWhole || record == Record::kCleared;
        CHECK(t.frames[0].symbol.str() == (named ? std::string(breadcrumb::kThunkName) : std::string()));
    }
}

TEST_CASE("a breadcrumb thunk sampled inside its frame: a stale return address at [sp] is its scratch, not its caller",
          "[decoder][native]") {
    // JDK 17, a loopback socket read (bench/probes/Natives.java, 100 us): the thunk between
    // SocketDispatcher.read0's wrapper and its JNI function, sampled at its `leave`; its lowest
    // word (argument scratch, unused) still held write0's wrapper's return from an earlier call,
    // which the rule for a frameless leaf under compiled code took (11 of ~150,000 samples,
    // bad_return_address). The thunk's rbp frame names its caller, read0's wrapper.
    UpcallWorld u(jdk_param());
    CodeLoad stale = nmethod(kCodeCacheLow + 0x80000, 11, 10, CodeKind::kNativeWrapper);
    stale.code.assign(0x100, 0x90);
    put_call(stale, 0x40, kCodeCacheLow - 0x100000);   // its own thunk: in no announced code
    u.w.add_code(stale);
    const uint64_t thunk_pc = 0x10054;
    for (const bool cleared : {false, true}) {
        FakeStack s;
        const uint64_t sp_t = s.at(0x100), fp_t = sp_t + 0x30, sp_w = fp_t + 16;
        s.put(sp_t, stale.code_begin + 0x45);
        s.put(fp_t, sp_w + 64);
        s.put(fp_t + 8, u.wrapper_pc());
        const uint64_t at = fp_t + static_cast<uint64_t>(int64_t{breadcrumb::kThunkRecordFromFp});
        s.put(at, cleared ? 0 : breadcrumb::kMagic0);
        s.put(at + 8, breadcrumb::kMagic1);
        s.put(at + breadcrumb::kJavaSpOffset, sp_w);
        s.put(at + breadcrumb::kJavaPcOffset, u.wrapper_pc());
        u.java_below(s, sp_w, s.at(0xc00));
        DecoderOptions options = test_options();
        options.symbolize_native = true;
        Decoder d(u.w.map, options);
        const CallTrace t = d.decode(sample_of(s, thunk_pc, sp_t, fp_t));
        INFO("record cleared " << cleared << ": " << fail_reason_name(t.failure));
        REQUIRE(t.status == TraceStatus::kComplete);
        REQUIRE(t.frames.size() >= 3);
        CHECK(t.frames[1].method_id == method_id(9));
        CHECK(java_frames(t) == std::vector<MethodBci>{mb(9, -1), mb(5, 21)});
        CHECK(d.stats().native_leaf_tops == 0);
    }
}

TEST_CASE("native code that cannot be unwound: rescan for a verified Java return address", "[decoder][native]") {
    CompiledWorld cw;
    // garbage rbp; C's frame (return into D at a call site) lies above the native frames
    const uint64_t sp_native = cw.s.at(0x100);
    const uint64_t sp_d = cw.s.at(0x200);
    cw.s.put(sp_d - 8, cw.d_begin + 0x30);   // the native callee's return address into D...
    cw.s.put(sp_d + 40, kCallStubReturn);
    cw.s.put(sp_d + 32, cw.fp_stub);
    Decoder d(cw.w.map, test_options());
    CallTrace t = d.decode(sample_of(cw.s, kNativePc, sp_native, 0x10));
    INFO(fail_reason_name(t.failure));
    REQUIRE(t.status == TraceStatus::kComplete);
    CHECK(java_frames(t) == std::vector<MethodBci>{mb(5, 21)});
    CHECK(d.stats().native_rescans == 1);
}

TEST_CASE("native code of a module whose file is another build: no rescan past it", "[decoder][native]") {
    // A replay with the agent rebuilt since the recording: the live decode left the agent's frames by
    // their unwind rows, so a Java return address that a scan finds above them is a guess the live
    // decode never made (such replays had bad_return_address and stale frames, not only stops).
    CompiledWorld cw;
    const std::string self = std::filesystem::read_symlink("/proc/self/exe").string();
    for (ModuleMap m : self_modules()) {
        m.build_id = m.path == self ? std::string("00ff00ff") : std::string();
        cw.w.map.apply(Event{m});
    }
    const uint64_t sp_native = cw.s.at(0x100);
    const uint64_t sp_d = cw.s.at(0x200);
    cw.s.put(sp_d - 8, cw.d_begin + 0x30);   // the native callee's return address into D, as in the rescan's case
    cw.s.put(sp_d + 40, kCallStubReturn);
    cw.s.put(sp_d + 32, cw.fp_stub);
    const uint64_t own_code = reinterpret_cast<uint64_t>(&self_modules) + 1;
    DecoderOptions options = test_options();
    options.use_libunwind = true;   // as the agent and replay decode; the module's rows are what is missing
    Decoder d(cw.w.map, options);
    const CallTrace t = d.decode(sample_of(cw.s, own_code, sp_native, 0x10));
    INFO(fail_reason_name(t.failure));
    CHECK(d.changed_modules() == std::vector<std::string>{self});
    CHECK(t.status == TraceStatus::kFailed);
    CHECK(t.failure == FailReason::kNativeUnwindFailed);
    CHECK(java_frames(t).empty());
    CHECK(d.stats().native_rescans == 0);
}

TEST_CASE("a native frame returns into compiled code only where a call ends", "[decoder][native]") {
    CompiledWorld cw;
    // E: real bytes (nops), no call before +0x80.
    CodeLoad e = nmethod(kCodeCacheLow + 0x50000, 7, 4);
    e.code.assign(0x400, 0x90);
    const uint64_t stale = e.code_begin + 0x80;
    const uint64_t sp_native = cw.s.at(0x100);
    const uint64_t fp_native = cw.s.at(0x140);
    cw.s.put(fp_native, cw.s.at(0x180));   // a stale rbp chain...
    cw.s.put(fp_native + 8, stale);        // ...to a pc mid-method
    const uint64_t sp_d = cw.s.at(0x200);
    cw.s.put(sp_d - 8, cw.d_begin + 0x30);   // the native run's true return address, into D
    cw.s.put(sp_d + 40, kCallStubReturn);
    cw.s.put(sp_d + 32, cw.fp_stub);
    SECTION("no call: the step is rejected and the rescan finds D") {
        cw.w.add_code(e);
        Decoder d(cw.w.map, test_options());
        CallTrace t = d.decode(sample_of(cw.s, kNativePc, sp_native, fp_native));
        INFO(fail_reason_name(t.failure));
        REQUIRE(t.status == TraceStatus::kComplete);
        CHECK(java_frames(t) == std::vector<MethodBci>{mb(5, 21)});
        CHECK(d.stats().returns_rejected_no_call == 1);
    }
    SECTION("a call ending there (mov r10, imm64; call r10): the step is taken") {
        const uint8_t call[] = {0x49, 0xba, 1, 2, 3, 4, 5, 6, 7, 8, 0x41, 0xff, 0xd2};
        std::copy(std::begin(call), std::end(call), e.code.begin() + 0x80 - sizeof call);
        add_scope(e, 0x80, {{method_id(7), 2}});
        cw.w.add_code(e);
        Decoder d(cw.w.map, test_options());
        CallTrace t = d.decode(sample_of(cw.s, kNativePc, sp_native, fp_native));
        CHECK(d.stats().returns_rejected_no_call == 0);
        REQUIRE(t.frames.size() >= 2);
        CHECK(t.frames[1].method_id == method_id(7));
    }
}

TEST_CASE("a native leaf without an unwind row at the top returns through [sp]", "[decoder][native]") {
    // An assembler routine (libjvm's _Copy_conjoint_jlongs_atomic) builds no frame; rbp is its
    // caller's, which C2 code uses as it likes: here a stale chain whose return address is D's.
    CompiledWorld cw;
    CodeLoad e = nmethod(kCodeCacheLow + 0x50000, 7, 4);
    e.code.assign(0x400, 0x90);
    const uint8_t call[] = {0x49, 0xba, 1, 2, 3, 4, 5, 6, 7, 8, 0x41, 0xff, 0xd2};   // mov r10, imm64; call r10
    std::copy(std::begin(call), std::end(call), e.code.begin() + 0x80 - sizeof call);
    add_scope(e, 0x80, {{method_id(7), 2}});
    cw.w.add_code(e);
    const uint64_t sp_leaf = cw.s.at(0x100);
    const uint64_t sp_e = sp_leaf + 8;
    const uint64_t sp_d = sp_e + 4 * 8;
    cw.s.put(sp_leaf, e.code_begin + 0x80);   // the leaf's return address into E
    cw.s.put(sp_e + 3 * 8, cw.d_begin + 0x30);   // E's into D
    cw.s.put(sp_d + 5 * 8, kCallStubReturn);
    cw.s.put(sp_d + 4 * 8, cw.fp_stub);
    const uint64_t stale_fp = cw.s.at(0x300);
    cw.s.put(stale_fp + 8, cw.d_begin + 0x30);
    cw.s.put(stale_fp, cw.fp_stub);
    Decoder d(cw.w.map, test_options());
    CallTrace t = d.decode(sample_of(cw.s, kNativePc, sp_leaf, stale_fp));
    INFO(fail_reason_name(t.failure));
    REQUIRE(t.status == TraceStatus::kComplete);
    CHECK(java_frames(t) == std::vector<MethodBci>{mb(7, 2), mb(5, 21)});
    CHECK(d.stats().native_leaf_tops == 1);
}

TEST_CASE("breadcrumb: native code that cannot be unwound", "[decoder][native]") {
    CompiledWorld cw;
    // A native frame with a garbage rbp; a breadcrumb above it names D's frame.
    const uint64_t crumb = cw.s.at(0x100);
    cw.s.put(crumb, breadcrumb::kMagic0);
    cw.s.put(crumb + 8, breadcrumb::kMagic1);
    const uint64_t sp_d = cw.s.at(0x200);
    cw.s.put(crumb + 16, sp_d);
    cw.s.put(crumb + 24, cw.d_begin + 0x30);
    cw.s.put(crumb + 32, 0);
    cw.s.put(sp_d + 40, kCallStubReturn);
    cw.s.put(sp_d + 32, cw.fp_stub);
    Decoder d(cw.w.map, test_options());
    CallTrace t = d.decode(sample_of(cw.s, kNativePc, cw.s.at(0x20), 0x10));
    INFO(fail_reason_name(t.failure));
    REQUIRE(t.status == TraceStatus::kComplete);
    CHECK(java_frames(t) == std::vector<MethodBci>{mb(5, 21)});
    CHECK(d.stats().breadcrumbs_used == 1);
    CHECK(d.stats().unannounced_code_steps == 0);

    // The same breadcrumb into code-cache memory no event announced yet (a native wrapper whose
    // CompiledMethodLoad lags): not used, but counted, so that StreamDecoder decodes the sample
    // again once the announcement may be in.
    cw.s.put(crumb + 24, kCodeCacheLow + 0x90040);
    Decoder later(cw.w.map, test_options());
    CallTrace unannounced = later.decode(sample_of(cw.s, kNativePc, cw.s.at(0x20), 0x10));
    CHECK(later.stats().breadcrumbs_used == 0);
    CHECK(later.stats().unannounced_code_steps == 1);
}

TEST_CASE("native code with no way out fails", "[decoder][native]") {
    CompiledWorld cw;
    FakeStack no_java;   // nothing on it that a rescan could take for a Java return address
    Decoder d(cw.w.map, test_options());
    CallTrace t = d.decode(sample_of(no_java, kNativePc, no_java.at(0x20), 0x10));
    CHECK(t.status == TraceStatus::kFailed);
    CHECK(t.failure == FailReason::kUnknownPc);
    ModuleMap lib{1, kNativePc & ~0xfffull, (kNativePc & ~0xfffull) + 0x10000, 0, "/nonexistent/libfoo.so", "", {}};
    cw.w.map.apply(Event{lib});
    t = d.decode(sample_of(no_java, kNativePc, no_java.at(0x20), 0x10));
    CHECK(t.failure == FailReason::kNativeUnwindFailed);
}

TEST_CASE("code reuse after unload: samples decode against the code of their time", "[decoder][codemap]") {
    World w;
    FakeStack s;
    const uint64_t begin = kCodeCacheLow + 0x10000;
    CodeLoad x = nmethod(begin, 4, 4);
    x.time_ns = 100;
    add_scope(x, 0x20, {{method_id(4), 1}});
    CodeLoad y = nmethod(begin, 5, 4);
    y.time_ns = 210;
    add_scope(y, 0x20, {{method_id(5), 2}});
    w.map.apply(Event{x});
    w.map.apply(Event{CodeUnload{200, method_id(4), begin}});
    w.map.apply(Event{y});
    const uint64_t fp_stub = s.at(0x200);
    s.put(s.at(24), kCallStubReturn);
    s.put(s.at(16), fp_stub);
    w.entry_frame(s, fp_stub);
    Decoder d(w.map, test_options());
    auto top_method = [&](uint64_t time) {
        CallTrace t = d.decode(sample_of(s, begin + 0x10, s.at(0), 0, time));
        REQUIRE(t.status == TraceStatus::kComplete);
        return t.frames[0].method_id;
    };
    CHECK(top_method(150) == method_id(4));
    CHECK(top_method(250) == method_id(5));
    CHECK(top_method(205) == method_id(5));   // between unload and the next load: the next code
    CHECK(top_method(50) == method_id(4));    // before its load event: the event lagged the code
    w.map.forget_before(300);
    CHECK(w.map.history_compiled_count() == 0);
    CHECK(top_method(150) == method_id(5));   // history dropped: only the live code is left
}

TEST_CASE("code reuse with a late unload event", "[decoder][codemap]") {
    World w;
    const uint64_t begin = kCodeCacheLow + 0x10000;
    CodeLoad x = nmethod(begin, 4, 4);
    x.time_ns = 100;
    CodeLoad y = nmethod(begin + 0x100, 5, 4);
    y.time_ns = 210;
    w.map.apply(Event{x});
    w.map.apply(Event{y});                                    // overlaps x: x is retired at 210
    w.map.apply(Event{CodeUnload{220, method_id(4), begin}});  // late: must not shorten below 210
    CHECK(w.map.find_compiled(begin + 0x150, 150)->load.method_id == method_id(4));
    CHECK(w.map.find_compiled(begin + 0x150, 215)->load.method_id == method_id(5));
    CHECK(w.map.find_compiled(begin + 0x10, 215) == nullptr);   // x's range was freed at 210
    CHECK(w.map.find_compiled(begin + 0x10, 209)->load.method_id == method_id(4));
}

TEST_CASE("Method* announcements over time", "[decoder][codemap]") {
    World w(hotspot::Family::kJdk17, 0);
    MethodInfo a;
    a.time_ns = 100;
    a.method_id = 1;
    a.method_ptr = 0x5000;
    MethodInfo b = a;
    b.time_ns = 300;
    b.method_id = 2;
    w.map.apply(Event{a});
    w.map.apply(Event{b});
    CHECK(w.map.method_by_ptr(0x5000, 50)->method_id == 1);   // earlier than any announcement
    CHECK(w.map.method_by_ptr(0x5000, 200)->method_id == 1);
    CHECK(w.map.method_by_ptr(0x5000, 300)->method_id == 2);
    CHECK(w.map.method_by_ptr(0x6000, 300) == nullptr);
    CHECK(w.map.method_by_id(2)->method_ptr == 0x5000);
}

TEST_CASE("nested stubs: the smallest containing range wins", "[decoder][codemap]") {
    World w;
    w.map.apply(Event{Stub{1, "StubRoutines (1)", kCodeCacheLow + 0x1000, kCodeCacheLow + 0x9000, -1}});
    w.map.apply(Event{Stub{1, "arraycopy", kCodeCacheLow + 0x2000, kCodeCacheLow + 0x2100, -1}});
    CHECK(w.map.find_stub(kCodeCacheLow + 0x2050)->name == "arraycopy");
    CHECK(w.map.find_stub(kCodeCacheLow + 0x1050)->name == "StubRoutines (1)");
    CHECK(w.map.find_stub(kCodeCacheLow + 0x2100)->name == "StubRoutines (1)");
    CHECK(w.map.find_stub(kCodeCacheLow + 0x9000) == nullptr);
}

TEST_CASE("a deep stack running off the fragment is incomplete", "[decoder][interpreter]") {
    World w(jdk_param());
    FakeStack s;
    const int frames = interpreted_frames_to_the_end(w, s);
    Decoder d(w.map, test_options());
    CallTrace t = d.decode(sample_of(s, kInterpBodyPc, s.at(0), s.at(0x100)));
    INFO(fail_reason_name(t.failure));
    CHECK(t.status == TraceStatus::kIncomplete);
    CHECK(t.frames.size() == size_t(frames));
    // The same fragment in the same world (its methods are the frames') when the stream says
    // another size was asked for.
    auto decoded_when_asked_for = [&](uint32_t configured) {
        VmInfo vm = w.map.vm();
        vm.sample_stack_bytes = configured;
        w.map.apply(Event{vm});
        return Decoder(w.map, test_options()).decode(sample_of(s, kInterpBodyPc, s.at(0), s.at(0x100)));
    };
    SECTION("but a short fragment (the stack top was closer) ends in failure") {
        const CallTrace t2 = decoded_when_asked_for(kStackBytes * 3);
        INFO(fail_reason_name(t2.failure));
        CHECK(t2.status == TraceStatus::kFailed);
        CHECK(t2.failure == FailReason::kSpOutOfFragment);
        CHECK(t2.frames.size() == size_t(frames));
    }
    SECTION("unless it is stack=auto's smaller size, half the configured one, which a shallow thread tries") {
        REQUIRE(small_fragment_bytes(kStackBytes * 2) == s.bytes.size());
        const CallTrace t2 = decoded_when_asked_for(kStackBytes * 2);
        INFO(fail_reason_name(t2.failure));
        CHECK(t2.status == TraceStatus::kIncomplete);
        CHECK(t2.frames.size() == size_t(frames));
    }
}

TEST_CASE("a long JVM start's trimmed fragment (its top 4 KB) run off is incomplete, not failed", "[decoder][interpreter]") {
    // The agent keeps the top kTrimmedStartFragment bytes of each sample once a long start's hold
    // (a pre-touched heap) has grown large; the stream's configured size is the whole 64 KB. JDK 25,
    // a pre-touched 4 GB heap: 115 native_unwind_failed and 3 sp_out_of_fragment of ~22,000
    // samples before such a fragment counted as full.
    for (const size_t size : {size_t{kTrimmedStartFragment}, size_t{kTrimmedStartFragment} + 8}) {
        World w(jdk_param());
        FakeStack s;
        s.bytes.resize(size);
        const int frames = interpreted_frames_to_the_end(w, s);
        VmInfo vm = w.map.vm();
        vm.sample_stack_bytes = 65528;
        w.map.apply(Event{vm});
        const CallTrace t = Decoder(w.map, test_options()).decode(sample_of(s, kInterpBodyPc, s.at(0), s.at(0x100)));
        INFO(size << " bytes: " << fail_reason_name(t.failure));
        CHECK(t.frames.size() == size_t(frames));
        if (size == kTrimmedStartFragment) {
            CHECK(t.status == TraceStatus::kIncomplete);
        } else {
            CHECK(t.status == TraceStatus::kFailed);   // a stack that ended there should have had its first frame
        }
    }
}

TEST_CASE("an interpreted caller whose fixed slots cross the fragment's end is incomplete, not failed",
          "[decoder][interpreter]") {
    // javac, 100 us, stack=auto's 32 KB fragments: the last frame in the fragment had its caller's
    // rbp 8 bytes below the end, the caller's return address above it (2 sp_out_of_fragment of
    // ~187,000 samples).
    World w(jdk_param());
    FakeStack s;
    const uint64_t end = s.at(static_cast<int64_t>(s.bytes.size()));
    // The last frame's caller has its saved rbp as the fragment's last word, its return address beyond.
    const int frames = interpreted_frames_to_the_end(w, s, end - 8);
    Decoder d(w.map, test_options());
    CallTrace t = d.decode(sample_of(s, kInterpBodyPc, s.at(0), s.at(0x100)));
    INFO(fail_reason_name(t.failure));
    CHECK(t.status == TraceStatus::kIncomplete);
    CHECK(t.frames.size() == size_t(frames));
}

TEST_CASE("an entry frame whose Java frame anchor crosses the fragment's end is incomplete, not failed",
          "[decoder][entry]") {
    World w(jdk_param());
    FakeStack s;
    const uint64_t end = s.at(static_cast<int64_t>(s.bytes.size()));
    // The JavaCallWrapper lies 128 bytes above the call stub's rbp and its anchor 32 bytes into
    // it: the anchor's first word is the fragment's last.
    const uint64_t fp_stub = end - 168;
    const uint64_t fp_a = s.at(0x100);
    w.interp_frame(s, fp_a, 1, bcp(1, 14), fp_a + 32, kCallStubReturn, fp_stub);
    s.put(fp_stub - 48, fp_stub + 128);
    s.put(fp_stub + 128 + 32, fp_stub + 0x1000);
    Decoder d(w.map, test_options());
    CallTrace t = d.decode(sample_of(s, kInterpBodyPc, s.at(0), fp_a));
    INFO(fail_reason_name(t.failure));
    CHECK(t.status == TraceStatus::kIncomplete);
    CHECK(java_frames(t) == std::vector<MethodBci>{mb(1, 14)});
}

TEST_CASE("asked for 65528 bytes, perf copies 65416: a walk running off that fragment is incomplete", "[decoder][interpreter]") {
    World w(jdk_param());
    VmInfo vm = w.map.vm();
    vm.sample_stack_bytes = 65528;   // stack=65528, and mode=cpu's stack=auto
    w.map.apply(Event{vm});
    FakeStack s;
    s.bytes.resize(kLargestPerfFragment);
    const int frames = interpreted_frames_to_the_end(w, s);
    DecoderOptions options = test_options();
    options.max_frames = 1000;
    Decoder d(w.map, options);
    CallTrace t = d.decode(sample_of(s, kInterpBodyPc, s.at(0), s.at(0x100)));
    INFO(fail_reason_name(t.failure));
    CHECK(t.status == TraceStatus::kIncomplete);
    CHECK(t.frames.size() == size_t(frames));
}

TEST_CASE("frame limit", "[decoder]") {
    World w;
    FakeStack s;
    uint64_t fp = s.at(0x100);
    for (int i = 0; i < 40; ++i, fp += 0x100) {
        w.interp_frame(s, fp, 1, bcp(1, 5), fp + 16, kInterpReturnPc, fp + 0x100);
    }
    DecoderOptions o = test_options();
    o.max_frames = 10;
    SECTION("the decoder's option") {
        Decoder d(w.map, o);
        CallTrace t = d.decode(sample_of(s, kInterpBodyPc, s.at(0), s.at(0x100)));
        CHECK(t.failure == FailReason::kTooDeep);
        CHECK(t.frames.size() == 10);   // the innermost ones, kept under the failure
    }
    // The agent's depth= reaches a replay in the VmInfo, and overrides the decoder's own limit there
    // as live: both decode alike.
    SECTION("the stream's VmInfo over the option") {
        VmInfo vm = w.map.vm();
        vm.max_frames = 25;
        w.map.apply(Event{vm});
        Decoder d(w.map, o);
        CallTrace t = d.decode(sample_of(s, kInterpBodyPc, s.at(0), s.at(0x100)));
        CHECK(t.failure == FailReason::kTooDeep);
        CHECK(t.frames.size() == 25);
        vm.max_frames = 100;   // more than the stack holds: its walk ends as it would without a limit
        w.map.apply(Event{vm});
        Decoder deeper(w.map, o);
        t = deeper.decode(sample_of(s, kInterpBodyPc, s.at(0), s.at(0x100)));
        CHECK(t.failure != FailReason::kTooDeep);
        CHECK(t.frames.size() > 25);
    }
}

TEST_CASE("a virtual thread's frame returning into the continuation return barrier: its caller is "
          "Continuation.enterSpecial at the entry's return pc", "[decoder][compiled][continuation]") {
    // Lazy thawing patched C's return address to the return barrier; the frames C's continuation
    // froze are in the heap. HotSpot's sender of the barrier is enterSpecial (here D, whose call
    // site is the ContinuationEntry's return pc) at the same sp; AsyncGetCallTrace names it too.
    CompiledWorld cw(jdk_param());
    const Stub barrier{1, "cont_returnBarrier", kCodeCacheLow + 0x90000, kCodeCacheLow + 0x90080, -1};
    cw.w.map.apply(Event{barrier});
    cw.s.put(cw.sp_c + 3 * 8, barrier.begin);
    SECTION("with the entry's return pc announced") {
        VmInfo vm = cw.w.map.vm();
        vm.continuation_return_pc = cw.d_begin + 0x30;
        cw.w.map.apply(Event{vm});
        Decoder d(cw.w.map, test_options());
        CallTrace t = d.decode(sample_of(cw.s, cw.c_begin + 0x4f, cw.sp_c, 0x2222));
        INFO(fail_reason_name(t.failure));
        REQUIRE(t.status == TraceStatus::kComplete);
        CHECK(java_frames(t) == std::vector<MethodBci>{mb(6, 3), mb(4, 7), mb(5, 21)});
        for (const Frame& f : t.frames) CHECK(f.kind != FrameKind::kStub);
        CHECK(d.stats().return_barriers_crossed == 1);
    }
    SECTION("without it (before JDK 21) the barrier is a stub like any other") {
        Decoder d(cw.w.map, test_options());
        CallTrace t = d.decode(sample_of(cw.s, cw.c_begin + 0x4f, cw.sp_c, 0x2222));
        CHECK(d.stats().return_barriers_crossed == 0);
        CHECK(java_frames(t) != std::vector<MethodBci>{mb(6, 3), mb(4, 7), mb(5, 21)});
    }
}

TEST_CASE("JDK 21 exports no ContinuationEntry return pc: it is the return of enterSpecial's call to the thaw "
          "stub", "[decoder][compiled][continuation]") {
    // JDK 21 names its stubs "Cont thaw" and "Cont thaw return barrier" and has no ContinuationEntry
    // in VMStructs. enterSpecial's native wrapper (here method 9, where D's frame is) calls the thaw
    // stub once; that call's return address is the entry's return pc (VT probe on 21.0.13: identical
    // to ASGCT apart from the top bci went from 12 to 99.7 % of the pairs).
    CompiledWorld cw(jdk_param());
    const Stub thaw{1, "Cont thaw", kCodeCacheLow + 0x90100, kCodeCacheLow + 0x90180, -1};
    const Stub barrier{1, "Cont thaw return barrier", kCodeCacheLow + 0x90200, kCodeCacheLow + 0x90280, -1};
    CodeLoad enter_special = nmethod(kCodeCacheLow + 0x70000, 9, 6, CodeKind::kNativeWrapper);
    enter_special.code.assign(0x400, 0x90);   // nops around the call
    put_call(enter_special, 0x2b, thaw.begin);
    // C returns into the barrier; the entry, where D's frame was, returns to the call stub.
    cw.s.put(cw.sp_c + 3 * 8, barrier.begin);
    const auto decode = [&] {
        Decoder d(cw.w.map, test_options());
        CallTrace t = d.decode(sample_of(cw.s, cw.c_begin + 0x4f, cw.sp_c, 0x2222));
        INFO(fail_reason_name(t.failure));
        return std::make_pair(t, d.stats().return_barriers_crossed);
    };
    SECTION("the thaw stub announced before the wrapper or after it") {
        const bool stub_first = GENERATE(true, false);
        cw.w.map.apply(Event{barrier});
        if (stub_first) cw.w.map.apply(Event{thaw});
        cw.w.add_code(enter_special);
        if (!stub_first) cw.w.map.apply(Event{thaw});
        CHECK(cw.w.map.continuation_return_pc() == enter_special.code_begin + 0x30);
        const auto [t, crossed] = decode();
        REQUIRE(t.status == TraceStatus::kComplete);
        CHECK(java_frames(t) == std::vector<MethodBci>{mb(6, 3), mb(4, 7), mb(9, -1)});
        CHECK(crossed == 1);
    }
    SECTION("the VM's own return pc, where it gives one, comes first") {
        cw.w.map.apply(Event{barrier});
        cw.w.map.apply(Event{thaw});
        cw.w.add_code(enter_special);
        VmInfo vm = cw.w.map.vm();
        vm.continuation_return_pc = cw.d_begin + 0x30;
        cw.w.map.apply(Event{vm});
        CHECK(cw.w.map.continuation_return_pc() == cw.d_begin + 0x30);
        CHECK(decode().first.status == TraceStatus::kComplete);
        CHECK(java_frames(decode().first) == std::vector<MethodBci>{mb(6, 3), mb(4, 7), mb(5, 21)});
    }
    SECTION("no wrapper that calls the thaw stub, or one since unloaded: no return pc, the barrier is a stub") {
        cw.w.map.apply(Event{barrier});
        cw.w.map.apply(Event{thaw});
        CodeLoad other = enter_special;
        other.code.assign(0x400, 0x90);   // calls nothing
        cw.w.add_code(other);
        CHECK(cw.w.map.continuation_return_pc() == 0);
        cw.w.add_code(enter_special);
        REQUIRE(cw.w.map.continuation_return_pc() == enter_special.code_begin + 0x30);
        cw.w.map.apply(Event{CodeUnload{2000, enter_special.method_id, enter_special.code_begin}});
        CHECK(cw.w.map.continuation_return_pc() == 0);
        CHECK(decode().second == 0);
    }
}

TEST_CASE("code reloaded at the same address: a return address there gets the new code's scope", "[decoder][compiled]") {
    // The decoder remembers per-pc facts of compiled code (a call site's scope, the call that ends
    // there) for one load of that code only: new code at the same address has its own.
    CompiledWorld cw(jdk_param());
    Decoder d(cw.w.map, test_options());
    CallTrace before = d.decode(sample_of(cw.s, cw.c_begin + 0x80 - 1, cw.sp_c, 0x2222, 1000));
    REQUIRE(before.status == TraceStatus::kComplete);
    CHECK(java_frames(before) == std::vector<MethodBci>{mb(4, 9), mb(5, 21)});

    CodeLoad reloaded = nmethod(cw.d_begin, 7, 6);
    add_scope(reloaded, 0x30, {{method_id(8), 2}, {method_id(7), 11}});
    reloaded.time_ns = 2000;
    cw.w.add_code(reloaded);
    CallTrace after = d.decode(sample_of(cw.s, cw.c_begin + 0x80 - 1, cw.sp_c, 0x2222, 3000));
    REQUIRE(after.status == TraceStatus::kComplete);
    CHECK(java_frames(after) == std::vector<MethodBci>{mb(4, 9), mb(8, 2), mb(7, 11)});
    // A sample taken before the reload still walks the code of its time.
    CallTrace earlier = d.decode(sample_of(cw.s, cw.c_begin + 0x80 - 1, cw.sp_c, 0x2222, 1500));
    CHECK(java_frames(earlier) == std::vector<MethodBci>{mb(4, 9), mb(5, 21)});
}
