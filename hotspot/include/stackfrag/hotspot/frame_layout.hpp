// HotSpot x86_64 frame facts the decoder relies on, in one place; what differs between JDK releases
// comes from the release's row in jdk_facts.hpp.
// Source and verification status of every number: shared/docs/hotspot-frames.md (section in brackets).
// Everything here is about the *stack*: slots relative to rbp/sp and how to turn slot values into
// addresses. Structure offsets inside VM memory are not here: the decoder never reads VM memory.
#pragma once

#include <cstdint>

#include "stackfrag/hotspot/jdk_facts.hpp"

namespace sf::hotspot {

inline constexpr int kWordSize = 8;

// --- Interpreter frames [a.1]: word offsets from rbp, identical on 17, 21 and 25. ---
namespace interp {
inline constexpr int kReturnAddress = 1;
inline constexpr int kSavedFp = 0;
inline constexpr int kSenderSp = -1;     // absolute unextended sp of the caller (both JDKs)
inline constexpr int kLastSp = -2;       // absolute or 0; relative to fp or 0 (JdkFacts)
inline constexpr int kMethod = -3;       // Method*
inline constexpr int kMirror = -4;
inline constexpr int kMdp = -5;
inline constexpr int kCache = -6;
inline constexpr int kLocals = -7;       // absolute &local0, or relative to fp (positive) (JdkFacts)
inline constexpr int kBcp = -8;          // u1*, 0 for native methods
inline constexpr int kInitialSp = -9;    // absolute, or relative (-9 without monitors) (JdkFacts)
// Lowest fixed slot: a complete frame has sp <= fp + kLowestFixedSlot*8 [a.4 state 3].
inline constexpr int kLowestFixedSlot = kInitialSp;
inline constexpr int kFixedFrameBytes = -kLowestFixedSlot * kWordSize;   // 72

// A slot's address from its raw value: a word offset from fp when the release stores it so.
inline uint64_t slot_address(bool fp_relative, uint64_t fp, uint64_t raw) {
    return fp_relative ? fp + static_cast<uint64_t>(static_cast<int64_t>(raw)) * kWordSize : raw;
}
// &local0 from the locals slot's raw value.
inline uint64_t locals_address(const JdkFacts& jdk, uint64_t fp, uint64_t raw) {
    return slot_address(jdk.locals_fp_relative, fp, raw);
}
// last_sp / initial_sp from their raw values; a raw 0 means "not set" in every encoding.
inline uint64_t last_sp_address(const JdkFacts& jdk, uint64_t fp, uint64_t raw) {
    return raw == 0 ? 0 : slot_address(jdk.last_sp_fp_relative, fp, raw);
}
inline uint64_t initial_sp_address(const JdkFacts& jdk, uint64_t fp, uint64_t raw) {
    return raw == 0 ? 0 : slot_address(jdk.initial_sp_fp_relative, fp, raw);
}
}  // namespace interp

// Method flags from MethodInfo::access_flags.
inline constexpr uint32_t kAccNative = 0x0100;

// --- Compiled frames [b.1]: frame_size in words incl. return address and saved rbp. ---
namespace compiled {
inline constexpr int kReturnAddressFromTop = 1;   // ret at sp + (fs-1)*8
inline constexpr int kSavedFpFromTop = 2;         // saved rbp at sp + (fs-2)*8
// Plausibility bound for frame sizes (words). HotSpot limits compiled frames far below this;
// the largest RuntimeStub frames (register save areas) are a few hundred words [b.4].
inline constexpr int kMaxFrameWords = 1 << 16;
}  // namespace compiled

// --- Entry frames, JavaCallWrapper, JavaFrameAnchor [d.1, d.2]. ---
namespace entry {
inline constexpr int kCallWrapperSlot = -6;        // frame::entry_frame_call_wrapper_offset (words from fp)
inline constexpr int kWrapperAnchorOffset = 32;    // JavaCallWrapper::_anchor (bytes)
inline constexpr int kAnchorLastJavaSp = 0;
inline constexpr int kAnchorLastJavaPc = 8;
inline constexpr int kAnchorLastJavaFp = 16;
inline constexpr int kAnchorBytes = 24;
// x86 make_walkable: with last_Java_pc == 0 the pc is the word just below last_Java_sp.
inline constexpr int kPcBelowLastJavaSp = -8;
}  // namespace entry

// --- The i2c adapter (SharedRuntime::gen_i2c_adapter, x86_64 product builds, JDK 17 and 25) ---
// An AdapterBlob begins with its i2c entry: `mov r11, rsp` (3 bytes), `pop rax` (1), then
// `sub rsp, N` (only with stack arguments), `and rsp, -16` and `push rax`. At entry + 4 the return
// address is in rax and sp is the caller's; the caller (interpreter or call stub) keeps its rbp.
//
// The c2i part, when the callee has compiled code by now, asks the VM to patch the caller's call
// site (patch_callers_callsite): `mov r13, rsp; mov rax, [rsp]; and rsp, -16`, then
// push_CPU_state (pushf; sub rsp, 8; pusha: 16 words, rax at index 15, rbp at 10, r13 at 2, r15
// at 0; then the FPU/vector state below), then a call to SharedRuntime::fixup_callers_callsite.
// Below that call, the saved r13 is the adapter's entry sp, whose word is the return address into
// the compiled caller, and the saved rax holds the same return address (read live, JDK 17 and 25).
namespace adapter {
inline constexpr uint64_t kI2cReturnPoppedOffset = 4;
inline constexpr int kPushaRaxFromR13 = 13;   // words from the saved r13 to the saved rax
inline constexpr int kPushaRbpFromR13 = 8;    // words from the saved r13 to the saved rbp
// The entry sp lies this far above the saved r13's slot: the rest of pusha, `sub rsp, 8`, pushf,
// and up to 8 bytes of `and rsp, -16`.
inline constexpr uint64_t kEntrySpAboveSavedR13Min = 0x80;
inline constexpr uint64_t kEntrySpAboveSavedR13Max = 0x88;
// How far above sp the c2i code's entry sp can lie: its argument area for the interpreter (256
// slots, aligned), or the FPU and vector state it saves before the patch (2,688 bytes with AVX-512).
inline constexpr uint64_t kMaxEntrySpAboveSp = 4096;
}  // namespace adapter

// --- The nmethod entry barrier stub (StubGenerator's method_entry_barrier, x86_64, JDK 17 and 25) ---
// `push -1` (5 bytes: a cookie the barrier overwrites when it deoptimizes the method), then `enter`
// (4): past them rbp is the stub's frame, with the return address into the compiled method's
// prologue above the saved rbp and the cookie.
namespace entry_barrier {
inline constexpr uint64_t kCookieAndEnterBytes = 5 + 4;
inline constexpr int kReturnFromFp = 2;   // words from the stub's rbp to its return address
}  // namespace entry_barrier

// --- Deoptimization handlers (x86_64, JDK 17 and 25; read from recorded code) ---
// A deoptimized frame returns into a handler in its nmethod's stub section that pushes the handler's
// own address and jumps to the deoptimization blob: C1's `mov r10, <own address>; push r10; jmp`
// (17 bytes), C2's `call +0; sub qword [rsp], 5; jmp` (15 bytes). The handler JVMTI's code load
// names is the first; code with method-handle call sites has a second right after it
// (CodeOffsets::DeoptMH, not announced), where a frame deoptimized while it called through a
// method handle returns (seen: -Xcomp, a lambda's bootstrap, DirectMethodHandle$Holder.invokeStatic
// under LambdaMetafactory.metafactory).
namespace deopt_handler {
inline constexpr uint8_t kC1MovR10[] = {0x49, 0xba};   // then the handler's own address, 8 bytes
inline constexpr uint8_t kC1PushR10[] = {0x41, 0x52};
inline constexpr uint8_t kC2CallSub[] = {0xe8, 0x00, 0x00, 0x00, 0x00, 0x48, 0x83, 0x2c, 0x24, 0x05};
inline constexpr uint8_t kJmpRel32 = 0xe9;
inline constexpr uint64_t kC1Bytes = 17;
inline constexpr uint64_t kC2Bytes = 15;
}  // namespace deopt_handler

// An rbp further above sp than any thread stack is long (-Xss is a few MB; 256 MB is far beyond
// anything set in practice) is not a frame pointer into this stack: C2 code uses rbp freely.
inline constexpr uint64_t kMaxStackSpanBytes = uint64_t{256} << 20;

// --- Native wrappers reached through an rbp chain [d.3]: sp = rbp - (fs-2)*8. ---
inline uint64_t wrapper_sp_from_fp(uint64_t fp, int32_t frame_size_words) {
    return fp - static_cast<uint64_t>(frame_size_words - compiled::kSavedFpFromTop) * kWordSize;
}

}  // namespace sf::hotspot
