// Comparing a decoded trace with AsyncGetCallTrace's answer for the same instant (validate mode):
// only the Java frames count, method and bci, top to bottom. ASGCT reports inlined frames too and
// uses lineno = bci (-3 for native methods, which the decoder reports as bci -1).
#pragma once

#include <cstdint>
#include <vector>

#include "stackfrag/decoder/call_trace.hpp"
#include "stackfrag/decoder/code_map.hpp"
#include "stackfrag/events/events.hpp"

namespace sf {

enum class Agreement : uint8_t {
    kIdentical = 0,
    kOracleFailed,        // ASGCT returned no frames (agct_status <= 0)
    kDecoderFailed,       // the decoder's trace is kFailed
    kTopMethodDiffers,    // the innermost Java frame is a different method
    kTopBciDiffers,       // same innermost method, different bci
    kMissingFrame,        // the decoder lacks a frame ASGCT has (e.g. an inlined one) mid-stack
    kExtraFrame,          // the decoder has a frame ASGCT lacks mid-stack
    kBciDiffers,          // a deeper frame's bci differs
    kMethodDiffers,       // a deeper frame's method differs
    kShorter,             // the decoder's frames are a strict prefix of ASGCT's (incomplete walk)
    kLonger,              // ASGCT's frames are a strict prefix of the decoder's
    kCount
};

const char* agreement_name(Agreement a);   // "identical", "top_method_differs", ...

// The decoder's Java frames as ASGCT would list them.
std::vector<MethodBci> java_frames_of(const CallTrace& trace);

Agreement compare_with_oracle(const CallTrace& decoded, const Oracle& oracle);

// Whether one of our Java frames and one of AsyncGetCallTrace's name the same method and bci (a
// native method's frame: ASGCT's bci -3 is our -1), as compare_with_oracle judges each frame.
bool same_java_frame(const MethodBci& ours, const MethodBci& asgct);

// The decoder's top frame is an interpreted callee caught in an interpreter method-entry codelet
// (its frame not linked yet: rbp is still what its caller left there), and ASGCT's frames are
// exactly the decoder's from the nearest interpreted frame below it on: ASGCT took the frame rbp
// points to for the executing one -- the interpreted caller's, or below compiled callers (which save
// and restore rbp) the interpreted frame they were called from, so it also leaves those compiled
// frames out (docs/decoding.md §2.2). ASGCT's answer may also have stopped early from there
// (oracle_stopped_early). Such a pair is not a disagreement of the decoder; replay counts it as
// oracle_entry_codelet.
bool oracle_missed_entry_callee(const CallTrace& decoded, const Oracle& oracle, const CodeMap& map);

// ASGCT's frames are a strict prefix of the decoder's, and its walk stopped where HotSpot's
// frame::safe_for_sender refuses to go on, which vframeStreamForte::forte_next takes for the end of
// the stack: between ASGCT's last Java frame and the decoder's next one lies a stub that calls into
// the VM (a RuntimeStub made frame_never_safe: C1's Runtime1 and C2's OptoRuntime stubs, which call
// Java back through an entry frame, e.g. class loading from a patching stub), or an FFM upcall stub
// (JDK 25: ASGCT's walk ends at every one; the decoder goes on through the native code that called
// it and the downcall below), or the decoder's next
// frame returns into its nmethod's deoptimization handler (the VM patched the return address of a
// frame it deoptimizes; safe_for_sender rejects a sender pc at a deopt entry). Such a pair is not
// a disagreement of the decoder; replay counts it as oracle_stopped_early.
bool oracle_stopped_early(const CallTrace& decoded, const Oracle& oracle, const CodeMap& map);

// The decoder's first Java frame is compiled and was reached from HotSpot's ExceptionBlob, whose
// "return address" is the exception pc (a call site in that frame, where the exception is being
// dispatched), and ASGCT's frames are the decoder's with that frame's inline chain replaced by the
// one of the first PcDesc after the pc: AsyncGetCallTrace decodes its first compiled frame as one
// stopped at some pc inside (pc_desc_near(pc + 1)), not at a call site, and so names the scope after
// the call (one inlined level fewer in a recursion). Such a pair is not a disagreement of the
// decoder; replay counts it as oracle_exception_scope.
bool oracle_exception_scope(const CallTrace& decoded, const Oracle& oracle, const CodeMap& map);

// The same reading of a frame below a leaf call: the decoder's first Java frame is compiled, only
// native frames lie above it (compiled code called the VM or libc directly, with no stub and no
// frame anchor: os::javaTimeNanos for System.nanoTime, ZGC's clone and its copy routines), and
// ASGCT's frames are the decoder's with that frame's inline chain replaced by the next PcDesc's.
// Its walk reached the frame from a native top and decoded it as stopped inside, so it names the
// code after the call (Ticker$1.read@-1 where the thread was still in Platform.systemNanoTime@0
// inlined into it). Such a pair is not a disagreement of the decoder; replay counts it as
// oracle_leaf_call_scope.
bool oracle_leaf_call_scope(const CallTrace& decoded, const Oracle& oracle, const CodeMap& map);

// The same reading of a frame below a stub through which compiled code called the VM to resolve or
// re-resolve a call (resolve_opt_virtual_call, resolve_virtual_call, wrong_method_stub, ...): the
// decoder's first Java frame is compiled, right below that stub frame, with only native and stub
// frames above, and ASGCT's frames are the decoder's with that frame's inline chain replaced by the
// next PcDesc's. The stub sets the thread's frame anchor at its own frame, so AsyncGetCallTrace
// reads the compiled frame below as stopped inside, not at the call being resolved. Not the
// ExceptionBlob (oracle_exception_scope). Replay counts such a pair as oracle_stub_call_scope.
bool oracle_stub_call_scope(const CallTrace& decoded, const Oracle& oracle, const CodeMap& map);

// ASGCT's frames are exactly the decoder's outermost ones, fewer of them, and the decoder's top is a
// leaf call from compiled code (only native frames above its first Java frame, which is compiled;
// such a call sets no frame anchor): AsyncGetCallTrace starts from the thread's last Java frame
// anchor instead of the signal context whenever one is set and walkable (JavaThread::
// pd_get_top_frame), and here one was set at an older frame, so every frame above that one is left
// out. Seen live with C1 code calling SharedRuntime::ldiv for a long division (-XX:TieredStopAtLevel=1)
// and os::javaTimeMillis for System.currentTimeMillis: ASGCT answered FutureTask.run <- ... <-
// Thread.run where the thread was 30 frames further up. Such a pair is not a disagreement of the
// decoder; replay counts it as oracle_older_anchor.
bool oracle_older_anchor(const CallTrace& decoded, const Oracle& oracle);

// The sample was taken in a signal handler that had interrupted the thread: only native and stub
// frames lie above the decoder's first Java frame, and one of them is the signal trampoline
// (Frame::signal_frame), below which the decoder went on at the interrupted instruction.
// AsyncGetCallTrace starts from the validator's own signal context, whose pc lies in that other
// handler (JFR's thread sampler suspends threads with one, SR_handler, on JDK 17), and takes the
// Java frame its rbp or frame anchor leads to: the interrupted frame's caller, or older ones
// (javac with a JFR recording, 100 us: Modules.initVisiblePackages@90 <- ... where the decoder has
// Modules.addVisiblePackages@253 above it). Such a pair is not a disagreement of the decoder;
// replay counts it as oracle_in_signal_handler.
bool oracle_in_signal_handler(const CallTrace& decoded, const Oracle& oracle);

// ASGCT's frames are the decoder's first kOracleMaxFrames exactly, and the decoder has more: the
// validator asked AsyncGetCallTrace for that many frames, and the stack was deeper (javac's
// recursive tree visitors with a full code cache, running interpreted). Not a disagreement of the
// decoder; replay counts such a pair as oracle_truncated.
bool oracle_truncated(const CallTrace& decoded, const Oracle& oracle);

// ASGCT's frames are exactly the decoder's from a Continuation.enterSpecial frame below its top on:
// the decoder walked a virtual thread's frames, mounted above the carrier's enterSpecial, that
// AsyncGetCallTrace left out. Seen while the continuation freezes (Continuation.doYield and the
// VM's freeze code on top, the virtual thread's frames still on the carrier's stack): ASGCT then
// gives the carrier's view, enterSpecial first. Such a pair is not a disagreement of the decoder;
// replay counts it as oracle_carrier_only. False when enterSpecial is not known by name.
bool oracle_carrier_only(const CallTrace& decoded, const Oracle& oracle, const CodeMap& map);

}  // namespace sf
