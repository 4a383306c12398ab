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

// A complete trace at 1 µs (after the World's code loads) with these frames, top first.
CallTrace complete_trace(std::vector<Frame> frames) {
    CallTrace t;
    t.status = TraceStatus::kComplete;
    t.time_ns = 1000;
    t.frames = std::move(frames);
    return t;
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

namespace {

Frame frame_at(FrameKind kind, int method, int bci, uint64_t pc, std::string symbol = {}) {
    Frame f;
    f.kind = kind;
    f.method_id = method < 0 ? 0 : method_id(method);
    f.bci = bci;
    f.pc = pc;
    f.symbol = std::move(symbol);
    return f;
}

Stub named_stub(uint64_t begin, const char* name) {
    Stub stub;
    stub.time_ns = 1;
    stub.name = name;
    stub.begin = begin;
    stub.end = begin + 0x100;
    stub.frame_size_words = 4;
    return stub;
}

// A trace whose first Java frame is method 5's nmethod at a call's return address (+0x48, its
// PcDesc `at_call`: method 6 inlined, then 5), the next PcDesc (+0x60) `after`, with `above` (what
// the call led to) on top and an interpreted caller (method 2 at bci 21) below.
CallTrace below_a_call(World& w, std::vector<Frame> above, MethodBci inlined, MethodBci compiled,
                       std::vector<MethodBci> after) {
    CodeLoad code = nmethod(kCodeCacheLow + 0x10000, 5, 6);
    add_scope(code, 0x48, {inlined, compiled});
    add_scope(code, 0x60, std::move(after));
    w.add_code(code);
    const uint64_t ret = code.code_begin + 0x48;
    above.push_back(frame_at(FrameKind::kInlined, 6, inlined.bci, ret));
    above.push_back(frame_at(FrameKind::kCompiled, 5, compiled.bci, ret));
    above.push_back(frame_at(FrameKind::kInterpreted, 2, 21, kInterpReturnPc));
    return complete_trace(std::move(above));
}

}  // namespace

TEST_CASE("oracle: ASGCT's walk ends at a VM runtime stub or a deoptimized caller, where the decoder goes on",
          "[decoder][oracle]") {
    World w(jdk_param());
    const uint64_t runtime1 = kCodeCacheLow + 0x40000, vtable = kCodeCacheLow + 0x50000;
    w.map.apply(named_stub(runtime1, "load_appendix_patching Runtime1 stub"));
    w.map.apply(named_stub(kCodeCacheLow + 0x60000, "C2 Runtime new_instance"));
    w.map.apply(named_stub(vtable, "vtable stub"));
    w.map.apply(named_stub(kCodeCacheLow + 0x70000, "upcall_stub"));
    CodeLoad caller = nmethod(kCodeCacheLow + 0x10000, 5, 8);
    caller.deopt_handler = caller.code_begin + 0x3f0;
    w.add_code(caller);
    const uint64_t call_site = caller.code_begin + 0x100;

    // Interpreted m1 and m2 (class loading, say) were called back from the VM through an entry frame,
    // which a Runtime1 stub called from compiled m5 had entered (entry frames add no frame).
    CallTrace t = complete_trace({frame_at(FrameKind::kInterpreted, 1, 3, kInterpBodyPc), frame_at(FrameKind::kInterpreted, 2, 7, kInterpReturnPc),
                frame_at(FrameKind::kStub, -1, -1, runtime1 + 0x20, "load_appendix_patching Runtime1 stub"),
                frame_at(FrameKind::kCompiled, 5, 11, call_site)});
    const Oracle asgct = oracle_of({mb(1, 3), mb(2, 7)});
    CHECK(compare_with_oracle(t, asgct) == Agreement::kLonger);
    CHECK(oracle_stopped_early(t, asgct, w.map));

    SECTION("C2's runtime stubs too; a stub that is no VM call is a disagreement") {
        CallTrace c2 = t;
        c2.frames[2].pc = kCodeCacheLow + 0x60000 + 0x10;
        CHECK(oracle_stopped_early(c2, asgct, w.map));
        CallTrace other = t;
        other.frames[2].pc = vtable + 0x10;
        // (JDK 25) an FFM upcall stub: the decoder goes on through the native code that called it.
        CallTrace upcall = t;
        upcall.frames[2].pc = kCodeCacheLow + 0x70000 + 0x9b;
        upcall.frames.insert(upcall.frames.begin() + 3, frame_at(FrameKind::kNative, -1, -1, 0x7f0000001234, "qsort_r"));
        CHECK(oracle_stopped_early(upcall, asgct, w.map));
        CHECK_FALSE(oracle_stopped_early(other, asgct, w.map));
        CallTrace no_stub = t;
        no_stub.frames.erase(no_stub.frames.begin() + 2);
        CHECK_FALSE(oracle_stopped_early(no_stub, asgct, w.map));
    }
    SECTION("a caller whose return address is its nmethod's deoptimization handler") {
        CallTrace deopt = t;
        deopt.frames.erase(deopt.frames.begin() + 2);
        deopt.frames[2].pc = caller.deopt_handler;
        CHECK(oracle_stopped_early(deopt, asgct, w.map));
        // The first of the caller's frames is an inlined one: the same pc.
        deopt.frames.insert(deopt.frames.begin() + 2, frame_at(FrameKind::kInlined, 6, 2, caller.deopt_handler));
        CHECK(oracle_stopped_early(deopt, oracle_of({mb(1, 3), mb(2, 7)}), w.map));
        // An interpreted caller has no deoptimization handler.
        deopt.frames[2] = frame_at(FrameKind::kInterpreted, 6, 2, kInterpReturnPc);
        CHECK_FALSE(oracle_stopped_early(deopt, asgct, w.map));
    }
    SECTION("only where ASGCT's walk ended: its frames a strict prefix, the stub below its last") {
        CHECK_FALSE(oracle_stopped_early(t, oracle_of({mb(1, 3), mb(2, 7), mb(5, 11)}), w.map));   // identical
        CHECK_FALSE(oracle_stopped_early(t, oracle_of({mb(1, 4), mb(2, 7)}), w.map));              // top bci
        CHECK_FALSE(oracle_stopped_early(t, oracle_of({mb(1, 3), mb(3, 7)}), w.map));              // method
        // ASGCT stopped above the stub: an interpreted frame follows its last.
        CHECK_FALSE(oracle_stopped_early(t, oracle_of({mb(1, 3)}), w.map));
        // The stub lies above ASGCT's last frame: ASGCT went past it, so it did not stop there.
        CallTrace above = t;
        std::swap(above.frames[1], above.frames[2]);   // m1, stub, m2, m5
        CHECK_FALSE(oracle_stopped_early(above, asgct, w.map));
        CallTrace failed = t;
        failed.status = TraceStatus::kFailed;
        CHECK_FALSE(oracle_stopped_early(failed, asgct, w.map));
    }
}

TEST_CASE("oracle: a callee in its entry codelet below compiled callers, which ASGCT leaves out with them",
          "[decoder][oracle]") {
    World w(jdk_param());
    CodeLoad c = nmethod(kCodeCacheLow + 0x10000, 3, 6);
    w.add_code(c);
    const uint64_t runtime1 = kCodeCacheLow + 0x40000;
    w.map.apply(named_stub(runtime1, "register_finalizer Runtime1 stub"));
    // m1 caught in its entry codelet, called from compiled m4 (inlined into m3), called from
    // interpreted m2: rbp still holds m2's fp, which m3's code saved and restored.
    CallTrace t = complete_trace({frame_at(FrameKind::kInterpreted, 1, 0, kEntryCodeletBegin + 0x40),
                frame_at(FrameKind::kInlined, 4, 5, c.code_begin + 0x80), frame_at(FrameKind::kCompiled, 3, 9, c.code_begin + 0x80),
                frame_at(FrameKind::kInterpreted, 2, 7, kInterpReturnPc), frame_at(FrameKind::kInterpreted, 6, 1, kInterpReturnPc)});
    const Oracle asgct = oracle_of({mb(2, 7), mb(6, 1)});
    CHECK(compare_with_oracle(t, asgct) == Agreement::kTopMethodDiffers);
    CHECK(oracle_missed_entry_callee(t, asgct, w.map));

    SECTION("ASGCT must start exactly at the first interpreted frame below and match from there") {
        CHECK_FALSE(oracle_missed_entry_callee(t, oracle_of({mb(3, 9), mb(2, 7), mb(6, 1)}), w.map));
        CHECK_FALSE(oracle_missed_entry_callee(t, oracle_of({mb(6, 1)}), w.map));
        CHECK_FALSE(oracle_missed_entry_callee(t, oracle_of({mb(2, 8), mb(6, 1)}), w.map));
    }
    SECTION("a native frame between is not a compiled caller keeping rbp") {
        CallTrace native = t;
        native.frames[2].kind = FrameKind::kNative;
        CHECK_FALSE(oracle_missed_entry_callee(native, asgct, w.map));
    }
    SECTION("the top not in an entry codelet") {
        CallTrace moved = t;
        moved.frames[0].pc = kInterpBodyPc;
        CHECK_FALSE(oracle_missed_entry_callee(moved, asgct, w.map));
    }
    SECTION("from there, ASGCT's walk may also have stopped early at a VM runtime stub") {
        CallTrace upcall = t;
        upcall.frames.push_back(frame_at(FrameKind::kStub, -1, -1, runtime1 + 0x10, "register_finalizer Runtime1 stub"));
        upcall.frames.push_back(frame_at(FrameKind::kCompiled, 5, 3, c.code_begin + 0x90));
        CHECK(oracle_missed_entry_callee(upcall, asgct, w.map));
        CHECK_FALSE(oracle_missed_entry_callee(upcall, oracle_of({mb(2, 7)}), w.map));
    }
}

TEST_CASE("oracle: ASGCT names a frame entered from the exception blob by the PcDesc after its exception pc",
          "[decoder][oracle]") {
    // An exception propagating through a C2 recursion with one level inlined (Unseen2-like, JDK 17):
    // HotSpot's ExceptionBlob dispatches it at the call site in deep's nmethod, whose PcDesc has two
    // scopes; AsyncGetCallTrace decodes that first compiled frame as if stopped at some pc in it
    // (pc_desc_near(pc + 1)), the next PcDesc, with one scope: one frame fewer than the stack has.
    World w(jdk_param());
    const uint64_t blob = kCodeCacheLow + 0x40000;
    w.map.apply(named_stub(blob, "ExceptionBlob"));
    CodeLoad deep = nmethod(kCodeCacheLow + 0x10000, 5, 8);
    add_scope(deep, 0x48, {mb(5, 30), mb(5, 30)});
    add_scope(deep, 0x4a, {mb(5, 30)});
    w.add_code(deep);
    const uint64_t call_site = deep.code_begin + 0x48;
    CallTrace t = complete_trace({frame_at(FrameKind::kStub, -1, -1, blob + 0x3e, "ExceptionBlob"),
                frame_at(FrameKind::kInlined, 5, 30, call_site), frame_at(FrameKind::kCompiled, 5, 30, call_site),
                frame_at(FrameKind::kInlined, 5, 30, call_site), frame_at(FrameKind::kCompiled, 5, 30, call_site),
                frame_at(FrameKind::kInterpreted, 2, 21, kInterpReturnPc)});
    const Oracle asgct = oracle_of({mb(5, 30), mb(5, 30), mb(5, 30), mb(2, 21)});
    CHECK(compare_with_oracle(t, asgct) == Agreement::kExtraFrame);
    CHECK(oracle_exception_scope(t, asgct, w.map));

    SECTION("only right after the exception blob") {
        CallTrace other = t;
        other.frames[0].symbol = "UncommonTrapBlob";
        CHECK_FALSE(oracle_exception_scope(other, asgct, w.map));
        CallTrace no_blob = t;
        no_blob.frames.erase(no_blob.frames.begin());
        CHECK_FALSE(oracle_exception_scope(no_blob, asgct, w.map));
    }
    SECTION("ASGCT's frames must be those of the next PcDesc exactly") {
        CHECK_FALSE(oracle_exception_scope(t, oracle_of({mb(5, 30), mb(5, 30), mb(2, 21)}), w.map));
        CHECK(oracle_exception_scope(t, oracle_of({mb(5, 31), mb(5, 30), mb(5, 30), mb(2, 21)}), w.map));   // a top bci may differ, as in any pair
        CHECK_FALSE(oracle_exception_scope(t, oracle_of({mb(5, 30), mb(5, 30), mb(5, 30), mb(3, 21)}), w.map));
        CHECK_FALSE(oracle_exception_scope(t, oracle_of({mb(5, 30), mb(5, 30), mb(5, 30), mb(5, 30), mb(2, 21)}), w.map));
    }
}

TEST_CASE("oracle: ASGCT names a compiled frame below a leaf call into native code by the PcDesc after the call",
          "[decoder][oracle]") {
    // Live on jython (JDK 17, 100 µs): System.nanoTime's intrinsic calls os::javaTimeNanos from
    // Ticker$1.read's nmethod, Platform.systemNanoTime inlined at the call. The decoder names the call's
    // PcDesc (systemNanoTime@0 <- read@0); ASGCT, reaching the frame from the native top, the next
    // PcDesc's scope (read@-1 ... here read@5). The same on h2 with ZGC: Object.clone's copy routine.
    World w(jdk_param());
    CallTrace t = below_a_call(w,
                               {frame_at(FrameKind::kNative, -1, -1, kNativePc, "__clock_gettime"),
                                frame_at(FrameKind::kNative, -1, -1, kNativePc + 0x100, "os::javaTimeNanos()")},
                               mb(6, 0), mb(5, 0), {mb(5, 5)});
    const Oracle asgct = oracle_of({mb(5, 5), mb(2, 21)});
    CHECK(compare_with_oracle(t, asgct) == Agreement::kTopMethodDiffers);
    CHECK(oracle_leaf_call_scope(t, asgct, w.map));
    CHECK_FALSE(oracle_exception_scope(t, asgct, w.map));

    SECTION("not through a stub, nor with a Java frame on top") {
        CallTrace stub = t;
        stub.frames[1] = frame_at(FrameKind::kStub, -1, -1, kCodeCacheLow + 0x40000, "jlong_arraycopy");
        CHECK_FALSE(oracle_leaf_call_scope(stub, asgct, w.map));
        CallTrace java_top = t;
        java_top.frames.erase(java_top.frames.begin(), java_top.frames.begin() + 2);
        CHECK_FALSE(oracle_leaf_call_scope(java_top, asgct, w.map));
    }
    SECTION("ASGCT's frames must be those of the next PcDesc exactly") {
        CHECK(oracle_leaf_call_scope(t, oracle_of({mb(5, 0), mb(2, 21)}), w.map));   // a top bci may differ, as in any pair
        CHECK_FALSE(oracle_leaf_call_scope(t, oracle_of({mb(4, 5), mb(2, 21)}), w.map));
        CHECK_FALSE(oracle_leaf_call_scope(t, oracle_of({mb(5, 5), mb(3, 21)}), w.map));
        CHECK_FALSE(oracle_leaf_call_scope(t, oracle_of({mb(5, 5), mb(5, 5), mb(2, 21)}), w.map));
        CHECK_FALSE(oracle_leaf_call_scope(t, oracle_of({mb(6, 0), mb(5, 0), mb(2, 21)}), w.map));   // identical: nothing to explain
    }
}

TEST_CASE("oracle: ASGCT names a compiled frame below a call-resolving stub by the PcDesc after the call",
          "[decoder][oracle]") {
    // Live on JRuby (JDK 17, 1 ms, 2026-11-30): TimSort.countRunAndMakeAscending's nmethod calls, with
    // five levels inlined, a method not resolved yet: resolve_opt_virtual_call -> SharedRuntime. The
    // stub's frame holds the anchor, so ASGCT reads the compiled frame below as stopped inside and
    // names the next PcDesc's scope (lambda$sort_by$1@20 <- cmpint@1 <- sites@1), where the decoder
    // names the call being resolved (... <- lambda$sort_by$1@11 <- ... <- op_cmp@101).
    World w(jdk_param());
    CallTrace t = below_a_call(w,
                               {frame_at(FrameKind::kNative, -1, -1, kNativePc, "SharedRuntime::resolve_helper"),
                                frame_at(FrameKind::kStub, -1, -1, kCodeCacheLow + 0x40000, "resolve_opt_virtual_call")},
                               mb(6, 11), mb(5, 0), {mb(7, 1), mb(5, 20)});
    const Oracle asgct = oracle_of({mb(7, 1), mb(5, 20), mb(2, 21)});
    CHECK(compare_with_oracle(t, asgct) == Agreement::kTopMethodDiffers);
    CHECK(oracle_stub_call_scope(t, asgct, w.map));
    CHECK_FALSE(oracle_leaf_call_scope(t, asgct, w.map));   // a stub lies between
    CHECK_FALSE(oracle_exception_scope(t, asgct, w.map));

    SECTION("a stub right above the compiled frame, not the exception blob, no Java frame above") {
        CallTrace blob = t;
        blob.frames[1].symbol = "ExceptionBlob";
        CHECK_FALSE(oracle_stub_call_scope(blob, asgct, w.map));   // oracle_exception_scope's
        CallTrace native_above = t;
        native_above.frames.erase(native_above.frames.begin() + 1);
        CHECK_FALSE(oracle_stub_call_scope(native_above, asgct, w.map));   // a leaf call: oracle_leaf_call_scope's
        CallTrace java_above = t;
        java_above.frames[0] = frame_at(FrameKind::kInterpreted, 8, 3, kInterpReturnPc);
        CHECK_FALSE(oracle_stub_call_scope(java_above, asgct, w.map));
    }
    SECTION("ASGCT's frames must be those of the next PcDesc exactly") {
        CHECK(oracle_stub_call_scope(t, oracle_of({mb(7, 4), mb(5, 20), mb(2, 21)}), w.map));   // a top bci may differ
        CHECK_FALSE(oracle_stub_call_scope(t, oracle_of({mb(7, 1), mb(5, 21), mb(2, 21)}), w.map));
        CHECK_FALSE(oracle_stub_call_scope(t, oracle_of({mb(7, 1), mb(5, 20), mb(3, 21)}), w.map));
        CHECK_FALSE(oracle_stub_call_scope(t, oracle_of({mb(6, 11), mb(5, 0), mb(2, 21)}), w.map));   // identical
    }
}

TEST_CASE("oracle: ASGCT gives only the carrier's frames from Continuation.enterSpecial on, while a virtual thread "
          "freezes above it",
          "[decoder][oracle]") {
    // Live on JDK 25 (VirtualThreads.java): samples in the VM's freeze code under Continuation.doYield,
    // the virtual thread's frames still on the carrier's stack above enterSpecial; ASGCT answered
    // enterSpecial@-3 <- Continuation.run <- ... <- ForkJoinWorkerThread.run.
    World w(jdk_param());
    const uint64_t enter_special = method_id(20);
    MethodInfo m;
    m.time_ns = 1;
    m.method_id = enter_special;
    m.method_ptr = method_ptr(20);
    m.class_name = "jdk/internal/vm/Continuation";
    m.name = "enterSpecial";
    m.access_flags = 0x0100;
    w.map.apply(Event{m});

    CallTrace t;
    t.status = TraceStatus::kComplete;
    auto add = [&](FrameKind kind, uint64_t id, int32_t bci) {
        Frame f;
        f.kind = kind;
        f.method_id = id;
        f.bci = bci;
        t.frames.push_back(f);
    };
    add(FrameKind::kNative, 0, -1);                        // freeze_internal, in libjvm
    add(FrameKind::kNativeWrapper, method_id(1), -1);      // Continuation.doYield
    add(FrameKind::kInterpreted, method_id(2), 13);        // the virtual thread's frames
    add(FrameKind::kInterpreted, method_id(3), 6);
    add(FrameKind::kNativeWrapper, enter_special, -1);     // the carrier's, from here on
    add(FrameKind::kCompiled, method_id(4), 122);
    add(FrameKind::kInterpreted, method_id(5), 364);

    const MethodBci special{enter_special, -3};   // ASGCT's lineno for a native method
    const Oracle carrier = oracle_of({special, mb(4, 122), mb(5, 364)});
    CHECK(compare_with_oracle(t, carrier) == Agreement::kTopMethodDiffers);
    CHECK(oracle_carrier_only(t, carrier, w.map));

    // Not ASGCT's carrier view: a frame of the carrier's part differs, or one is missing, or ASGCT's
    // first frame is another method than enterSpecial.
    CHECK_FALSE(oracle_carrier_only(t, oracle_of({special, mb(4, 121), mb(5, 364)}), w.map));
    CHECK_FALSE(oracle_carrier_only(t, oracle_of({special, mb(5, 364)}), w.map));
    CHECK_FALSE(oracle_carrier_only(t, oracle_of({mb(3, 6), special, mb(4, 122), mb(5, 364)}), w.map));
    CHECK_FALSE(oracle_carrier_only(t, oracle_of({mb(4, 122), mb(5, 364)}), w.map));
    // The same frames with enterSpecial's name unknown (never named): not taken for the carrier's view.
    World unnamed(jdk_param());
    CHECK_FALSE(oracle_carrier_only(t, carrier, unnamed.map));
}

TEST_CASE("oracle: ASGCT begins at an older frame anchor during a leaf call from compiled code", "[decoder][oracle]") {
    // Live with -XX:TieredStopAtLevel=1 (JDK 17 and 25, FrameworkStacks.java): C1's
    // MutableBigInteger.divideOneWord calls SharedRuntime::ldiv, which sets no frame anchor; ASGCT,
    // which takes a set anchor over the signal context, answered FutureTask.run@39 <- ... <-
    // Thread.run@11, the decoder's last frames, where the thread was 30 frames further up.
    CallTrace t = complete_trace({frame_at(FrameKind::kNative, -1, -1, kNativePc, "SharedRuntime::ldiv(long, long)"),
                                  frame_at(FrameKind::kCompiled, 6, 246, kCodeCacheLow + 0x10048),
                                  frame_at(FrameKind::kInlined, 5, 64, kCodeCacheLow + 0x20010),
                                  frame_at(FrameKind::kCompiled, 4, 27, kCodeCacheLow + 0x20010),
                                  frame_at(FrameKind::kInterpreted, 3, 39, kInterpReturnPc),
                                  frame_at(FrameKind::kInterpreted, 2, 11, kInterpReturnPc)});
    const Oracle asgct = oracle_of({mb(3, 39), mb(2, 11)});
    CHECK(compare_with_oracle(t, asgct) == Agreement::kTopMethodDiffers);
    CHECK(oracle_older_anchor(t, asgct));
    CHECK(oracle_older_anchor(t, oracle_of({mb(4, 27), mb(3, 39), mb(2, 11)})));

    SECTION("ASGCT's frames must be the decoder's last ones exactly, and fewer") {
        CHECK_FALSE(oracle_older_anchor(t, oracle_of({mb(3, 38), mb(2, 11)})));
        CHECK_FALSE(oracle_older_anchor(t, oracle_of({mb(3, 39)})));
        CHECK_FALSE(oracle_older_anchor(t, oracle_of({mb(7, 1), mb(3, 39), mb(2, 11)})));
        CHECK_FALSE(oracle_older_anchor(t, oracle_of({mb(6, 246), mb(5, 64), mb(4, 27), mb(3, 39), mb(2, 11)})));
    }
    SECTION("only below a leaf call from compiled code") {
        CallTrace java_top = t;
        java_top.frames.erase(java_top.frames.begin());
        CHECK_FALSE(oracle_older_anchor(java_top, asgct));
        CallTrace stub = t;
        stub.frames.insert(stub.frames.begin() + 1, frame_at(FrameKind::kStub, -1, -1, kCodeCacheLow + 0x40000, "ldiv stub"));
        CHECK_FALSE(oracle_older_anchor(stub, asgct));
        CallTrace interpreted = t;
        interpreted.frames.erase(interpreted.frames.begin() + 1, interpreted.frames.begin() + 4);
        CHECK_FALSE(oracle_older_anchor(interpreted, asgct));
        CallTrace failed = t;
        failed.status = TraceStatus::kFailed;
        CHECK_FALSE(oracle_older_anchor(failed, asgct));
    }
}

TEST_CASE("oracle: ASGCT called inside another signal handler that had interrupted Java code", "[decoder][oracle]") {
    // javac with a JFR recording (JDK 17, 100 us): JFR's sampler had suspended the thread with a
    // signal; the validator's SIGPROF came inside that handler (SR_handler). The decoder went
    // through the trampoline to the interrupted frame, addVisiblePackages@253; ASGCT, whose context
    // pc lay in SR_handler, began at its caller.
    Frame trampoline = frame_at(FrameKind::kNative, -1, -1, kNativePc + 0x100, "__restore_rt");
    trampoline.signal_frame = true;
    CallTrace t = complete_trace({frame_at(FrameKind::kNative, -1, -1, kNativePc, "SR_handler(int, siginfo_t*, ucontext_t*)"),
                                  trampoline, frame_at(FrameKind::kInterpreted, 4, 253, kInterpReturnPc),
                                  frame_at(FrameKind::kInterpreted, 3, 90, kInterpReturnPc),
                                  frame_at(FrameKind::kInterpreted, 2, 403, kInterpReturnPc)});
    const Oracle asgct = oracle_of({mb(3, 90), mb(2, 403)});
    CHECK(compare_with_oracle(t, asgct) == Agreement::kTopMethodDiffers);
    CHECK(oracle_in_signal_handler(t, asgct));
    CHECK(oracle_in_signal_handler(t, oracle_of({mb(7, 581)})));   // or a stale frame only rbp led to

    SECTION("only with the trampoline above the first Java frame") {
        CallTrace no_signal = t;
        no_signal.frames[1].signal_frame = false;
        CHECK_FALSE(oracle_in_signal_handler(no_signal, asgct));
        CallTrace java_top = t;
        java_top.frames.erase(java_top.frames.begin(), java_top.frames.begin() + 2);
        CHECK_FALSE(oracle_in_signal_handler(java_top, asgct));
        CallTrace deeper = t;   // a handler run further down (a Java frame above the trampoline)
        deeper.frames.insert(deeper.frames.begin(), frame_at(FrameKind::kInterpreted, 9, 1, kInterpReturnPc));
        CHECK_FALSE(oracle_in_signal_handler(deeper, asgct));
        CallTrace failed = t;
        failed.status = TraceStatus::kFailed;
        CHECK_FALSE(oracle_in_signal_handler(failed, asgct));
        Oracle asgct_failed = asgct;
        asgct_failed.agct_status = -1;
        CHECK_FALSE(oracle_in_signal_handler(t, asgct_failed));
    }
}

TEST_CASE("oracle: ASGCT's answer cut at the validator's frame limit", "[decoder][oracle]") {
    // A recursion deeper than the kOracleMaxFrames frames the validator asks for (javac's tree
    // visitors, interpreted under a full code cache): ASGCT's answer is the decoder's top part.
    std::vector<Frame> frames;
    std::vector<MethodBci> asgct_frames;
    for (int i = 0; i < static_cast<int>(kOracleMaxFrames) + 40; ++i) {
        frames.push_back(frame_at(FrameKind::kInterpreted, 2 + i % 3, i % 7, kInterpReturnPc));
        if (i < static_cast<int>(kOracleMaxFrames)) asgct_frames.push_back(mb(2 + i % 3, i % 7));
    }
    const CallTrace t = complete_trace(frames);
    const Oracle cut = oracle_of(asgct_frames);
    CHECK(compare_with_oracle(t, cut) == Agreement::kLonger);
    CHECK(oracle_truncated(t, cut));

    SECTION("not when ASGCT stopped short of its limit, or answered otherwise") {
        std::vector<MethodBci> shorter(asgct_frames.begin(), asgct_frames.end() - 1);
        CHECK_FALSE(oracle_truncated(t, oracle_of(shorter)));
        std::vector<MethodBci> other = asgct_frames;
        other[10] = mb(9, 1);
        CHECK_FALSE(oracle_truncated(t, oracle_of(other)));
        CallTrace exact = t;
        exact.frames.resize(kOracleMaxFrames);
        CHECK_FALSE(oracle_truncated(exact, cut));   // identical, nothing left out
        CallTrace failed = t;
        failed.status = TraceStatus::kFailed;
        CHECK_FALSE(oracle_truncated(failed, cut));
    }
}
