// Where the return address and the caller's rbp are when a compiled frame's pc lies in its
// prologue or epilogue (hotspot-frames.md §f) or where its code has moved rsp, found by
// disassembling the method's bytes.
#pragma once

#include <cstdint>
#include <vector>

#include "stackfrag/events/events.hpp"

namespace sf::detail {

struct TopFrameShape {
    enum class Kind : uint8_t {
        kComplete,   // the frame is fully built: use the frame size
        kPartial,    // prologue/epilogue: ret and saved rbp at the offsets below
        kNoCode,     // the CodeLoad has no instruction bytes: the caller must guess
    };
    Kind kind = Kind::kComplete;
    uint64_t return_offset = 0;      // bytes from the current sp to the return address
    bool fp_saved = false;           // the caller's rbp is stored at sp + saved_fp_offset
    uint64_t saved_fp_offset = 0;    // otherwise the caller's rbp is still in the rbp register
    bool in_prologue = false;
    bool in_epilogue = false;
};

// `pc` must lie inside [code.code_begin, code.code_end).
TopFrameShape analyze_top_frame(const CodeLoad& code, uint64_t pc);

// Where compiled code moves rsp below its frame's normal sp after the frame is complete (C2's
// string intrinsics push registers and copy short strings to the stack; C1 pushes arguments around
// calls into Runtime1 stubs; a native wrapper's `leave` before its final checks; JDK 17 ZGC's
// `push r12` in a method-handle intrinsic, whose frame sp is its entry's), found once per CodeLoad
// by a forward pass over its control flow from the frame-complete offset (an intrinsic's entry)
// with delta 0.
// A pc's frame sp is sp + delta; a pc reached with different deltas on different paths has several
// candidates, which the walk resolves against the stack.
struct SpRange {
    static constexpr int kMaxDeltas = 4;
    uint32_t begin = 0, end = 0;   // code offsets [begin, end)
    uint8_t count = 0;             // candidate deltas; 0 with call_pending
    bool call_pending = false;     // a call stub of this code (`mov rbx, Method*; jmp`): the return
                                   // address is at [sp] and points to this code's call site
    int32_t deltas[kMaxDeltas] = {};
};

struct SpRanges {
    std::vector<SpRange> ranges;   // sorted, non-overlapping
    const SpRange* find(uint64_t offset) const;
};

SpRanges analyze_sp_ranges(const CodeLoad& code);

// Where code reached by a leaf call from compiled code goes on in its method: from `offset` (the
// call's return address), the instructions `restores` allows, then a `jmp` back into the code; the
// jmp's target offset, or `offset` itself when anything else comes first. kPops: at most four pops
// (C1's barrier and subtype-check stubs); kStraightLine: at most 24 instructions without control
// flow (an out-of-line stub restoring the registers it saved: ZGC's C2 load barrier's moves from the
// stack, vzeroupper, `add rsp`).
enum class Restores : uint8_t { kPops, kStraightLine };
uint32_t continuation_offset(const CodeLoad& code, uint32_t offset, Restores restores);

// The return address of the first direct call in `code` (decoded from its first byte on) whose
// target is `target`; 0 when there is none. For small stubs-like code (a native wrapper): a linear
// sweep, which stops at the first bytes that do not decode.
uint64_t return_after_call_to(const CodeLoad& code, uint64_t target);

// Whether `pc` is where a deoptimized frame of this code returns (hotspot::deopt_handler): the
// handler the code load announced, or the one for method-handle call sites right after it, which
// must have the same shape and jump to the same place.
bool follows_deopt_handler(const CodeLoad& code, uint64_t pc);
inline bool is_deopt_return(const CodeLoad& code, uint64_t pc) {
    return code.deopt_handler != 0 && pc >= code.deopt_handler &&
           (pc == code.deopt_handler || follows_deopt_handler(code, pc));
}

// The moved-rsp pass's shortcut past Zydis for the plainest and commonest instructions of compiled
// code. For a whitelisted legacy encoding (a lock prefix, 0x66 prefixes and a REX at most; and
// vzeroupper) `quick_decode` gives its length and what the pass does with it; for anything else,
// false (the pass asks Zydis). Wherever it answers, Zydis decodes the same length and an instruction
// the pass treats alike (tests/unit/decoder/quick_decode_test.cpp checks every offset of recorded
// code and random bytes).
struct QuickInsn {
    enum class Kind : uint8_t {
        kPlain,          // names rsp in no register field, no push, pop or branch: moves neither rsp
                         // nor control
        kReadsSp,        // cmp or test with rsp as an operand (the return poll): moves neither
        kMoveSp,         // add/sub rsp, imm: rsp -= rel
        kPush,           // push r64 / imm / r/m: rsp -= 8
        kPop,            // pop r64 / r/m, not rsp: rsp += 8
        kJcc,            // conditional jump to next + rel
        kJmp,            // jump to next + rel
        kCall,           // call next + rel
        kCallIndirect,   // call r/m: goes on after it
        kStop,           // ret, int3, hlt, ud2, jmp r/m: the path ends
    };
    Kind kind = Kind::kPlain;
    uint8_t length = 0;
    int32_t rel = 0;   // kJcc, kJmp, kCall; kMoveSp: how far rsp moves down (sub rsp, 8: 8)
};
bool quick_decode(const uint8_t* bytes, size_t avail, QuickInsn& out);

}  // namespace sf::detail
