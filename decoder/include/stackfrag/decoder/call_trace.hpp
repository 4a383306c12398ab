// What the decoder produces for one snapshot: the frames it found (top first) and whether the
// walk reached the thread's first entry frame, ran off the fragment, or failed, with the reason.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "stackfrag/base/interned_name.hpp"

namespace sf {

enum class FrameKind : uint8_t {
    kInterpreted = 1,
    kCompiled = 2,        // C1/C2 code; comp_level says which tier
    kInlined = 3,         // a method inlined into the compiled frame below it in the list
    kNativeWrapper = 4,   // the JNI wrapper nmethod of a native method
    kNative = 5,          // C/C++ code (libjvm, libc, JNI libraries), with a symbol when known
    kStub = 6,            // a runtime stub, adapter or interpreter codelet with no Java method
    kJava = 7,            // a Java frame that ran in a way nobody said (JVMTI stack traces, mode=jvmti)
};

const char* frame_kind_name(FrameKind kind);   // "interpreted", "compiled", ...

struct Frame {
    FrameKind kind = FrameKind::kNative;
    // The frame's code had moved rsp below the frame's sp (an intrinsic's pushes, arguments pushed
    // for a stub call), or a top frame in its epilogue had already given its frame back: its
    // return address was not where the frame size says. A walker that does not know
    // (AsyncGetCallTrace) reads a stale slot there.
    bool sp_moved = false;
    // kNative: the kernel's signal trampoline (glibc's __restore_rt); the next frame is the one the
    // signal interrupted, at the instruction it was about to run. The frames above are the handler's.
    bool signal_frame = false;
    uint64_t method_id = 0;     // jmethodID for Java frames, 0 otherwise
    int32_t bci = -1;           // -1 when unknown or not Java
    int32_t comp_level = 0;     // for kCompiled / kInlined
    uint64_t pc = 0;
    InternedName symbol;        // kNative / kStub: symbol or stub name (none when unknown)
    bool operator==(const Frame&) const = default;
};

enum class TraceStatus : uint8_t {
    kComplete = 1,     // reached the thread's first entry frame
    kIncomplete = 2,   // the fragment ended before the first entry frame; frames are the top part
    // Could not be decoded to the end; `failure` says why. The frames are those the steps before the
    // failing one found (top first, maybe none); nothing the failing step looked at is among them.
    kFailed = 3,
    // The fragment ended before the first entry frame, and the walk went on through the bytes an
    // earlier snapshot of the same thread saw above it, to the first entry frame: the outer frames
    // are the earlier snapshot's (StreamDecoder's stitching, docs/decoding.md §2.7).
    kStitched = 4,
};

// Why a snapshot could not be decoded; documented one by one in docs/decoding.md.
enum class FailReason : uint8_t {
    kNone = 0,
    kNoCodeMap,            // no VmInfo yet: the decoder knows nothing about this VM
    kEmptyStack,           // no fragment bytes
    kUnknownPc,            // pc in no known code, and native unwinding failed too
    kNativeUnwindFailed,   // native code at the top that neither libunwind nor rbp could leave
    kSpOutOfFragment,      // a frame's sp left the fragment
    kSpNotIncreasing,      // a frame did not move up the stack (cycle)
    kUnknownMethod,        // an interpreted frame's Method* was never announced
    kBadBci,               // bcp outside the method's bytecodes
    kBadFrameSize,         // a compiled frame with an impossible frame size
    kNoPcDesc,             // a compiled caller frame whose return address has no PcDesc
    kStubUnwindFailed,     // a stub of unknown size with no verifiable return address
    kBadEntryFrame,        // an entry frame whose JavaCallWrapper/anchor is unusable
    kTooDeep,              // more frames than the decoder's limit
    kBadInterpreterFrame,  // an interpreted frame whose fixed slots are inconsistent (fp, locals, initial_sp)
    kBadReturnAddress,     // a Java frame's caller pc is in no Java code, stub or call stub
    kLostEvents,           // after a damaged part of a recording: the walk met code or methods the lost events may have announced
    kCount
};

const char* fail_reason_name(FailReason reason);   // stable snake_case names: "unknown_pc", ...

// Advice for a user whose traces often ran off the fragment: names the stack= option and the
// size that would cover deeper stacks. Empty when under 1% of `samples` were incomplete or the
// fragment is already the largest perf copies (`stack_bytes` 0: unknown, no advice).
std::string incomplete_hint(uint64_t incomplete, uint64_t samples, uint32_t stack_bytes);

// The leaf frame (FrameKind::kNative) of a sample taken while its thread ran in the kernel.
inline constexpr const char* kKernelFrameName = "[kernel]";
// A stub frame standing for an interpreter frame a deoptimization had pushed but not yet filled in
// (DecodeStats::deopt_rebuilding_frames): which Java method it will run is not on the stack yet.
inline constexpr const char* kRebuiltFrameName = "[interpreter frame being rebuilt by deoptimization]";

struct CallTrace {
    uint64_t time_ns = 0;
    uint32_t tid = 0;
    TraceStatus status = TraceStatus::kFailed;
    FailReason failure = FailReason::kNone;
    std::vector<Frame> frames;   // top (innermost) first
    // A non-Java thread's kind as the outermost frame of its stacks ("[GC Thread]",
    // "[C2 CompilerThread]"; see ThreadInfo::kind); empty for Java threads.
    InternedName root;
    bool operator==(const CallTrace&) const = default;
};

}  // namespace sf
