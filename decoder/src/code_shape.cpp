#include "code_shape.hpp"

#include <Zydis/Zydis.h>

#include <algorithm>
#include <array>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <optional>
#include <type_traits>

#include "stackfrag/base/zeroed_block.hpp"
#include "stackfrag/hotspot/frame_layout.hpp"

namespace sf::detail {
namespace {

struct Decoded {
    ZydisDecodedInstruction insn;
    ZydisDecodedOperand ops[ZYDIS_MAX_OPERAND_COUNT];
};

const ZydisDecoder& zydis() {
    static const ZydisDecoder decoder = [] {
        ZydisDecoder d;
        ZydisDecoderInit(&d, ZYDIS_MACHINE_MODE_LONG_64, ZYDIS_STACK_WIDTH_64);
        return d;
    }();
    return decoder;
}

// Whether an instruction can have rsp as a register operand (see decode_at's `rsp_operands_only`).
// Decoding operands is most of Zydis's work, and most instructions name rsp in no register field:
// a ModRM whose reg field is not 4 and whose rm field is not 4 with mod 3 (rm 4 with a memory mod is
// a SIB, a memory operand). Instructions without ModRM (opcode-embedded registers) and VEX/EVEX ones
// (vvvv) always may.
bool may_name_rsp(const ZydisDecodedInstruction& insn) {
    if (!(insn.attributes & ZYDIS_ATTRIB_HAS_MODRM) || insn.encoding != ZYDIS_INSTRUCTION_ENCODING_LEGACY) return true;
    return insn.raw.modrm.reg == 4 || (insn.raw.modrm.mod == 3 && insn.raw.modrm.rm == 4);
}

// The instruction at `pc` and its visible operands: nothing here reads the implicit ones (a push's
// rsp and memory operand), and decoding them was a third of the moved-rsp pass's time. With
// `rsp_operands_only`, operands are decoded only where they may name rsp; elsewhere they read as
// unused (no register, no immediate).
bool decode_at(const CodeLoad& code, uint64_t pc, Decoded& out, bool rsp_operands_only = false) {
    if (pc < code.code_begin) return false;
    uint64_t off = pc - code.code_begin;
    if (off >= code.code.size()) return false;
    ZydisDecoderContext context;
    if (!ZYAN_SUCCESS(ZydisDecoderDecodeInstruction(&zydis(), &context, code.code.data() + off,
                                                    code.code.size() - off, &out.insn))) {
        return false;
    }
    if (!rsp_operands_only || may_name_rsp(out.insn)) {
        return ZYAN_SUCCESS(ZydisDecoderDecodeOperands(&zydis(), &context, &out.insn, out.ops,
                                                       out.insn.operand_count_visible));
    }
    for (uint8_t i = 0; i < out.insn.operand_count_visible; ++i) out.ops[i].type = ZYDIS_OPERAND_TYPE_UNUSED;
    return true;
}

bool is_reg(const ZydisDecodedOperand& op, ZydisRegister reg) {
    return op.type == ZYDIS_OPERAND_TYPE_REGISTER && op.reg.value == reg;
}
bool is_rsp_mem(const ZydisDecodedOperand& op) {
    return op.type == ZYDIS_OPERAND_TYPE_MEMORY && op.mem.base == ZYDIS_REGISTER_RSP &&
           op.mem.index == ZYDIS_REGISTER_NONE;
}
bool is_imm(const ZydisDecodedOperand& op) { return op.type == ZYDIS_OPERAND_TYPE_IMMEDIATE; }

bool is_pop_rbp(const Decoded& d) {
    return d.insn.mnemonic == ZYDIS_MNEMONIC_POP && is_reg(d.ops[0], ZYDIS_REGISTER_RBP);
}
bool is_ret(const Decoded& d) { return d.insn.mnemonic == ZYDIS_MNEMONIC_RET; }
// The return poll after `pop rbp`: cmp rsp, [r15 + polling word].
bool is_return_poll(const Decoded& d) {
    return d.insn.mnemonic == ZYDIS_MNEMONIC_CMP && is_reg(d.ops[0], ZYDIS_REGISTER_RSP) &&
           d.ops[1].type == ZYDIS_OPERAND_TYPE_MEMORY && d.ops[1].mem.base == ZYDIS_REGISTER_R15;
}

// The prologue's effect on rsp up to a pc, relative to the entry sp (where the return address sits).
struct PrologueState {
    uint64_t pushed = 0;               // entry sp - current sp
    bool fp_saved = false;
    uint64_t fp_slot_below_entry = 0;  // entry sp - address of the saved rbp
    bool reached = false;              // the instructions ended exactly at pc
    bool stopped = false;              // met an instruction that is no part of a prologue
};

bool is_rbp_spill(const Decoded& d) {   // bang-less C2: mov [rsp+N-16], rbp
    return d.insn.mnemonic == ZYDIS_MNEMONIC_MOV && is_rsp_mem(d.ops[0]) && is_reg(d.ops[1], ZYDIS_REGISTER_RBP);
}
bool is_push_rbp(const Decoded& d) {
    return d.insn.mnemonic == ZYDIS_MNEMONIC_PUSH && is_reg(d.ops[0], ZYDIS_REGISTER_RBP);
}

// Emulates the prologue's instructions from `from` up to `pc`, from state `st`.
void emulate_from(const CodeLoad& code, uint64_t from, uint64_t pc, PrologueState& st) {
    uint64_t cur = from;
    Decoded d;
    for (int steps = 0; cur < pc && steps < 32; ++steps) {
        if (!decode_at(code, cur, d)) break;
        const auto m = d.insn.mnemonic;
        if (m == ZYDIS_MNEMONIC_PUSH) {
            st.pushed += 8;
            if (is_reg(d.ops[0], ZYDIS_REGISTER_RBP)) {
                st.fp_saved = true;
                st.fp_slot_below_entry = st.pushed;
            }
        } else if (m == ZYDIS_MNEMONIC_SUB && is_reg(d.ops[0], ZYDIS_REGISTER_RSP) && is_imm(d.ops[1])) {
            st.pushed += d.ops[1].imm.value.u;
        } else if (m == ZYDIS_MNEMONIC_MOV && is_rsp_mem(d.ops[0])) {
            if (is_reg(d.ops[1], ZYDIS_REGISTER_RBP)) {
                const int64_t disp = d.ops[0].mem.disp.value;
                if (disp >= 0 && static_cast<uint64_t>(disp) < st.pushed) {
                    st.fp_saved = true;
                    st.fp_slot_below_entry = st.pushed - static_cast<uint64_t>(disp);
                }
            }
            // any other store through rsp (the stack bang) leaves rsp alone
        } else if ((m == ZYDIS_MNEMONIC_MOV || m == ZYDIS_MNEMONIC_ADD || m == ZYDIS_MNEMONIC_LEA) &&
                   is_reg(d.ops[0], ZYDIS_REGISTER_RBP)) {
            // PreserveFramePointer: rbp becomes this frame's pointer; the caller's is saved already
        } else if (m == ZYDIS_MNEMONIC_NOP) {
        } else {
            // The entry barrier, a not-entrant jmp or anything unexpected: stop emulating. The
            // frame is complete by the barrier; at a patched VEP nothing has been pushed.
            st.stopped = true;
            return;
        }
        cur += d.insn.length;
    }
    st.reached = cur == pc;
}

// A not-entrant nmethod's verified entry is overwritten with a 5-byte `jmp` to the
// handle-wrong-method stub (its first instruction is at least 5 bytes long, so that the patch
// replaces it whole: the stack bang, or C2's bang-less `sub rsp, imm32`), and its bytes are
// often captured after that. A thread past the entry entered before the patch and ran the
// original instruction, whose tail is still there (JDK 25's demo: Recursion.fib's C1 code made not
// entrant under threads inside it, 8 samples a run at 100 µs failed bad_return_address). The
// instructions after it are found by the offsets in [5, 15] (x86's longest instruction) from which
// decoding ends exactly at pc; the lost instruction's effect by the one after it: `push rbp`
// follows the bang (nothing pushed), `mov [rsp+d], rbp` follows C2's `sub rsp` of the frame less
// its return address. Every such offset must agree, or the pc's state is not known.
std::optional<PrologueState> emulate_after_patched_entry(const CodeLoad& code, uint64_t pc) {
    constexpr uint64_t kJmpBytes = 5, kLongestInsn = 15;
    std::optional<PrologueState> found;
    for (uint64_t skip = kJmpBytes; skip <= kLongestInsn && code.verified_entry + skip <= pc; ++skip) {
        Decoded first;
        if (!decode_at(code, code.verified_entry + skip, first)) continue;
        PrologueState st;
        if (is_rbp_spill(first) && code.frame_size_words > 1) {
            st.pushed = static_cast<uint64_t>(code.frame_size_words - 1) * 8;
        } else if (!is_push_rbp(first)) {
            continue;
        }
        emulate_from(code, code.verified_entry + skip, pc, st);
        if (!st.reached && !st.stopped) continue;
        if (found && (found->pushed != st.pushed || found->fp_saved != st.fp_saved ||
                      found->fp_slot_below_entry != st.fp_slot_below_entry)) {
            return std::nullopt;
        }
        found = st;
    }
    return found;
}

// Whether the bytes right before `off` give the frame back: `add rsp, <frame size less the saved
// rbp and the return address>; pop rbp`, the frame's own size, so that nothing else matches. C2's
// exception handlers end so, then `jmp` to the rethrow stub with the return address at [sp] (a
// StackOverflowError unwinding a C2 recursion, JDK 17, 100 us: 380 samples there, each taken for
// a complete frame and failed bad_return_address).
bool follows_frame_release(const CodeLoad& code, uint64_t off) {
    constexpr uint8_t kPopRbp = 0x5d;
    constexpr size_t kAddImm8Bytes = 4, kAddImm32Bytes = 7;
    if (code.frame_size_words <= 2 || off < 1 + kAddImm8Bytes || off > code.code.size()) return false;
    const uint8_t* b = code.code.data() + off;
    if (b[-1] != kPopRbp) return false;
    const uint64_t locals = static_cast<uint64_t>(code.frame_size_words - 2) * 8;
    if (locals < 0x80 && b[-5] == 0x48 && b[-4] == 0x83 && b[-3] == 0xc4 && b[-2] == locals) return true;
    if (off < 1 + kAddImm32Bytes || b[-8] != 0x48 || b[-7] != 0x81 || b[-6] != 0xc4) return false;
    uint32_t imm = 0;
    std::memcpy(&imm, b - 5, sizeof imm);
    return imm == locals;
}

// Where the prologue that ends at the frame-complete offset begins. The verified entry, but for
// C2's OSR code: it begins with a `call` and nops up to its OSR entry (hotspot-frames.md, the
// prologue table), which no event announces, and the prologue there is the one that ends at the
// frame-complete offset. (C1's OSR code builds its OSR frame inside the body, past that offset.)
// 0 for OSR code of another shape.
uint64_t prologue_begin(const CodeLoad& code) {
    if (code.kind != CodeKind::kOsr) return code.verified_entry;
    constexpr uint8_t kCallRel32 = 0xe8;
    if (code.code.empty() || code.code[0] != kCallRel32) return code.code_begin;
    uint64_t cur = code.code_begin;
    Decoded d;
    for (int steps = 0; steps < 8 && decode_at(code, cur, d); ++steps) {
        if (steps > 0 && d.insn.mnemonic != ZYDIS_MNEMONIC_NOP) return cur;
        cur += d.insn.length;
    }
    return 0;
}

// Emulates the prologue from its first instruction (`begin`, see prologue_begin) up to `pc`;
// offsets are kept relative to the entry sp, where the return address sits.
TopFrameShape emulate_prologue(const CodeLoad& code, uint64_t begin, uint64_t pc) {
    TopFrameShape shape;
    shape.kind = TopFrameShape::Kind::kPartial;
    shape.in_prologue = true;
    PrologueState st;
    const uint64_t entry_off = begin - code.code_begin;
    const bool patched = code.kind != CodeKind::kOsr && entry_off < code.code.size() && code.code[entry_off] == 0xe9;
    if (patched && pc > begin) {
        if (const std::optional<PrologueState> after = emulate_after_patched_entry(code, pc)) st = *after;
    } else {
        emulate_from(code, begin, pc, st);
    }
    shape.return_offset = st.pushed;
    shape.fp_saved = st.fp_saved;
    shape.saved_fp_offset = st.fp_saved ? st.pushed - st.fp_slot_below_entry : 0;
    return shape;
}

}  // namespace

TopFrameShape analyze_top_frame(const CodeLoad& code, uint64_t pc) {
    TopFrameShape shape;
    if (code.kind == CodeKind::kMethodHandleIntrinsic) return shape;
    const bool has_code = !code.code.empty();
    // Before the verified entry (the inline-cache check of the unverified entry) nothing is pushed.
    if (code.verified_entry > code.code_begin && pc < code.verified_entry && pc >= code.entry &&
        code.kind != CodeKind::kOsr) {
        shape.kind = TopFrameShape::Kind::kPartial;
        shape.in_prologue = true;
        return shape;
    }
    if (!has_code) {
        shape.kind = TopFrameShape::Kind::kNoCode;
        return shape;
    }
    const uint64_t off = pc - code.code_begin;
    if (code.frame_complete_offset > 0 && off < static_cast<uint64_t>(code.frame_complete_offset)) {
        const uint64_t begin = prologue_begin(code);
        if (begin != 0 && pc >= begin) return emulate_prologue(code, begin, pc);
    }
    // Most tops are in the body: an instruction quick_decode knows that is no pop, ret, jcc,
    // indirect jmp or compare of rsp (the return poll) leaves the frame complete, without Zydis.
    // But for a jmp right after the frame was given back (below).
    QuickInsn q;
    if (off < code.code.size() && quick_decode(code.code.data() + off, code.code.size() - off, q) &&
        (q.kind == QuickInsn::Kind::kPlain || q.kind == QuickInsn::Kind::kPush || q.kind == QuickInsn::Kind::kJmp ||
         q.kind == QuickInsn::Kind::kCall || q.kind == QuickInsn::Kind::kCallIndirect ||
         q.kind == QuickInsn::Kind::kMoveSp)) {
        if (q.kind == QuickInsn::Kind::kJmp && follows_frame_release(code, off)) {
            shape.kind = TopFrameShape::Kind::kPartial;
            shape.in_epilogue = true;
            shape.return_offset = 0;
            shape.fp_saved = false;
        }
        return shape;
    }
    Decoded d;
    if (!decode_at(code, pc, d)) return shape;
    if (is_pop_rbp(d)) {
        shape.kind = TopFrameShape::Kind::kPartial;
        shape.in_epilogue = true;
        shape.return_offset = 8;
        shape.fp_saved = true;
        shape.saved_fp_offset = 0;
        return shape;
    }
    bool after_pop = is_ret(d) || is_return_poll(d);
    if (!after_pop && d.insn.mnemonic == ZYDIS_MNEMONIC_JNBE) {   // ja <poll stub>; ret
        Decoded next;
        after_pop = decode_at(code, pc + d.insn.length, next) && is_ret(next);
    }
    if (after_pop) {
        shape.kind = TopFrameShape::Kind::kPartial;
        shape.in_epilogue = true;
        shape.return_offset = 0;
        shape.fp_saved = false;
    }
    return shape;
}

// --- Moved rsp (SpRanges) -------------------------------------------------------------------------

namespace {

constexpr int32_t kNoSaved = INT32_MIN;
// Bounds on the work per CodeLoad, whatever the bytes: instructions visited, states per offset.
constexpr size_t kMaxVisits = 1u << 18;
constexpr int kMaxStatesPerOffset = 16;

struct PathState {
    uint32_t offset;
    int32_t delta;   // frame sp - rsp
    int32_t saved;   // the delta when saved_reg got a copy of rsp (kNoSaved: no register holds one)
    ZydisRegister saved_reg;
};

struct Seen {
    int32_t delta, saved;
    uint32_t next;
};
constexpr uint32_t kNone = UINT32_MAX;

// Per byte offset: the first (delta, saved) state it was reached with, the others (a list in the
// scratch's pool), how many, and the instruction's length there. One record for all of it, so that
// an offset reached once (most are) costs no pool entry.
struct Slot {
    int32_t delta, saved;
    uint32_t more;         // the other states, in pool; kNone: none
    uint32_t generation;   // the analysis that reached it; another: the slot is not reached
    uint8_t count;         // states seen
    uint8_t length;
};

// The per-offset slots are as many as the largest code analysed so far has bytes, and at least
// kReservedCodeBytes (virtual: 5 MB, of which a run touches what its largest codes reach). A slot
// counts only in the analysis that wrote it (its generation), so that nothing is cleared between
// analyses of codes of tens of KB of which a flow reaches a part.
static_assert(std::is_trivially_copyable_v<Slot> && std::is_trivially_default_constructible_v<Slot>,
              "Scratch's slots live in zeroed pages");
constexpr size_t kReservedCodeBytes = 256 * 1024;   // xalan's largest nmethod: 98 KB

struct Scratch {
    // Zeroed pages (a slot of generation 0 is not reached), reserved at once for the largest code
    // a JVM is likely to have: only the pages a flow reaches are ever faulted in, and no growth
    // faults in a fresh array while the old one's pages go back (growing by doubling from the first
    // code's size touched ~twice the pages of the largest code, ~1,000 at ~12 us on xalan). The
    // block (5 MB) is on huge pages: the first 2 MB, one fault, serve every code up to ~100 KB.
    ZeroedBlock slot_pages;   // slot_count slots; a slot is prepared before it is read
    size_t slot_count = 0;
    Slot* slots() const { return static_cast<Slot*>(slot_pages.data()); }
    uint32_t generation = 0;
    std::vector<uint64_t> moved_bits;     // offsets reached with a nonzero delta, a bit each: the
                                          // only ones that can have a range (in ascending order);
                                          // zero between analyses
    size_t words = 0;                     // of moved_bits, this analysis's
    std::vector<Seen> pool;
    std::vector<uint32_t> pending;
    std::vector<PathState> work;

    void prepare(size_t size) {
        if (slot_count < size) {
            // Nothing in the old slots counts any more (generations): a fresh block, not a copy.
            const size_t count = std::max({size, 2 * slot_count, kReservedCodeBytes});
            slot_pages = ZeroedBlock(count * sizeof(Slot));
            slot_count = count;
        }
        if (moved_bits.size() < (size + 63) / 64) moved_bits.resize((size + 63) / 64, 0);
        if (++generation == 0) {   // wrapped: no slot may look reached
            slot_pages = ZeroedBlock(slot_count * sizeof(Slot));
            generation = 1;
        }
        words = (size + 63) / 64;
        pool.clear();
        pending.clear();
        work.clear();
    }
};

// Leaves the scratch's moved bits zero whichever way the analysis returns.
struct CleanOnExit {
    Scratch& s;
    ~CleanOnExit() { std::fill(s.moved_bits.begin(), s.moved_bits.begin() + static_cast<ptrdiff_t>(s.words), 0); }
};

ZydisRegister full(ZydisRegister r) { return ZydisRegisterGetLargestEnclosing(ZYDIS_MACHINE_MODE_LONG_64, r); }

bool writes_reg(const Decoded& d, ZydisRegister reg) {
    for (uint8_t i = 0; i < d.insn.operand_count_visible; ++i) {
        const ZydisDecodedOperand& op = d.ops[i];
        if (op.type == ZYDIS_OPERAND_TYPE_REGISTER && full(op.reg.value) == reg &&
            (op.actions & ZYDIS_OPERAND_ACTION_MASK_WRITE)) {
            return true;
        }
    }
    return false;
}

// The relative target of a jmp/jcc/call, or false for an indirect one. Read from the raw
// immediate, so that a branch needs no operand decoding.
bool branch_target(const Decoded& d, uint64_t pc, uint64_t& target) {
    if (!d.insn.raw.imm[0].is_relative) return false;
    target = pc + d.insn.length + static_cast<uint64_t>(d.insn.raw.imm[0].value.s);
    return true;
}

}  // namespace

namespace {

// The ModRM byte at b[at] and what follows it (SIB, displacement) in 64-bit mode without an
// address-size prefix: its length.
inline __attribute__((always_inline)) size_t modrm_length(const uint8_t* b, size_t at) {
    const uint8_t modrm = b[at];
    const uint8_t mod = modrm >> 6, rm = modrm & 7;
    size_t n = 1;
    if (mod != 3 && rm == 4) {   // SIB
        ++n;
        if (mod == 0 && (b[at + 1] & 7) == 5) n += 4;   // no base: disp32
    }
    if (mod == 0 && rm == 5) n += 4;   // rip + disp32
    if (mod == 1) n += 1;
    if (mod == 2) n += 4;
    return n;
}

// Whether the ModRM at b[at] names rsp (esp, sp, spl) in a register field: rm with mod 3, and reg
// unless the opcode uses it as an extension; REX.R or REX.B turn a field's 4 into r12.
inline __attribute__((always_inline)) bool modrm_names_rsp(uint8_t modrm, uint8_t rex, bool reg_is_extension) {
    const bool reg_rsp = !reg_is_extension && ((modrm >> 3) & 7) == 4 && !(rex & 4);
    const bool rm_rsp = (modrm >> 6) == 3 && (modrm & 7) == 4 && !(rex & 1);
    return reg_rsp || rm_rsp;
}

// Which opcodes (after the prefixes) take a lock prefix in their memory form, the ones below.
bool lockable(uint8_t op, uint8_t op2, uint8_t ext) {
    if (op == 0x0f) return op2 == 0xb0 || op2 == 0xb1 || op2 == 0xc0 || op2 == 0xc1;   // cmpxchg, xadd
    if (op < 0x38) return (op & 7) <= 1;                           // add/or/adc/sbb/and/sub/xor r/m, r
    if (op == 0x80 || op == 0x81 || op == 0x83) return ext != 7;   // the same with imm; not cmp
    if (op == 0x86 || op == 0x87) return true;                     // xchg
    if (op == 0xfe || op == 0xff) return ext <= 1;                 // inc, dec
    if (op == 0xf6 || op == 0xf7) return ext == 2 || ext == 3;     // not, neg
    return false;
}

// The commonest two-byte-VEX (c5) instructions of compiled code: vzeroupper and moves of vector
// registers to and from memory, none of which names a general register but vmovd's (not rsp here).
// `b[1]` is ~R, ~vvvv, L, pp.
bool quick_vex2(const uint8_t* b, QuickInsn& out) {
    const uint8_t v = b[1], op = b[2];
    if (v == 0xf8 && op == 0x77) {   // vzeroupper
        out = QuickInsn{QuickInsn::Kind::kPlain, 3, 0};
        return true;
    }
    const bool no_vvvv = (v & 0x78) == 0x78, l = (v & 4) != 0;
    const uint8_t pp = v & 3;   // 1: 0x66, 2: 0xf3, 3: 0xf2
    const uint8_t modrm = b[3];
    const bool mem = (modrm >> 6) != 3, rm_rsp = !mem && (modrm & 7) == 4;
    bool ok = false;
    switch (op) {
        case 0x10: case 0x11: ok = (pp == 2 || pp == 3) && mem && no_vvvv && !l; break;   // vmovss, vmovsd
        case 0x6f: case 0x7f: ok = (pp == 1 || pp == 2) && no_vvvv; break;                // vmovdqa, vmovdqu
        case 0xef: ok = pp == 1; break;                                                    // vpxor
        case 0xd6: ok = pp == 1 && no_vvvv && !l; break;                                   // vmovq m64, xmm
        case 0x6e: case 0x7e: ok = pp == 1 && no_vvvv && !l && !rm_rsp; break;             // vmovd
        default: break;
    }
    if (!ok) return false;
    out = QuickInsn{QuickInsn::Kind::kPlain, static_cast<uint8_t>(3 + modrm_length(b, 3)), 0};
    return true;
}

}  // namespace

namespace {

// quick_decode, inlined into the moved-rsp pass's loop.
inline __attribute__((always_inline)) bool quick_decode_inline(const uint8_t* b, size_t avail, QuickInsn& out) {
    using Kind = QuickInsn::Kind;
    // Long enough for any instruction: the encodings below are at most 15 bytes, and near the end
    // of the code Zydis says what fits.
    if (avail < 15) return false;
    size_t i = 0;
    bool lock = false, opsize = false;
    // The rarer starts, f0, 66 and c5, as bits of a 256-bit set: one test on the common path.
    constexpr uint64_t kRareStart[4] = {0, uint64_t{1} << (0x66 - 64), 0, uint64_t{1} << (0xc5 - 192) | uint64_t{1} << (0xf0 - 192)};
    if ((kRareStart[b[0] >> 6] >> (b[0] & 63)) & 1) {
        if (b[0] == 0xc5) return quick_vex2(b, out);
        lock = b[0] == 0xf0;
        if (lock) ++i;
        const size_t prefixes_from = i;
        while (b[i] == 0x66 && i < prefixes_from + 3) ++i;   // operand size, repeated as padding in nops
        opsize = i > prefixes_from;
        if (b[i] == 0x66) return false;
    }
    uint8_t rex = 0;
    if ((b[i] & 0xf0) == 0x40) rex = b[i++];
    const bool rex_w = (rex & 8) != 0, rex_b = (rex & 1) != 0;
    const uint8_t op = b[i++];
    if (lock) {
        const uint8_t op2 = op == 0x0f ? b[i] : 0, modrm = b[op == 0x0f ? i + 1 : i];
        if ((modrm >> 6) == 3 || !lockable(op, op2, (modrm >> 3) & 7)) return false;
    }
    const bool wide = !opsize || rex_w;   // an imm16/32 operand is 4 bytes (REX.W wins over 0x66)
    auto iz = [&] { return wide ? size_t{4} : size_t{2}; };
    // Below, `modrm` is the byte after the opcode (the second opcode byte after 0x0f), `ext` its
    // reg field (for the opcodes that use it as an extension).
    uint8_t modrm = b[i];
    auto ext = [&] { return (modrm >> 3) & 7; };
    auto mem = [&] { return (modrm >> 6) != 3; };
    auto done = [&](Kind kind, size_t length, int32_t rel) __attribute__((always_inline)) {
        if (length > 15) return false;   // too many prefixes: Zydis refuses it
        out = QuickInsn{kind, static_cast<uint8_t>(length), rel};
        return true;
    };
    // An instruction with a ModRM and `imm` immediate bytes that the pass treats as plain: none of
    // its register fields names rsp (`reg_is_extension`: the reg field is part of the opcode), or,
    // with `reads_only`, it only reads its operands (cmp, test).
    auto with_modrm = [&](size_t imm, bool reg_is_extension = false, bool reads_only = false) __attribute__((always_inline)) {
        const bool names_rsp = modrm_names_rsp(modrm, rex, reg_is_extension);
        if (names_rsp && !reads_only) return false;
        return done(names_rsp ? Kind::kReadsSp : Kind::kPlain, i + modrm_length(b, i) + imm, 0);
    };
    auto plain = [&](size_t imm) { return done(Kind::kPlain, i + imm, 0); };
    auto branch = [&](Kind kind, size_t imm) {
        if (opsize) return false;
        int32_t rel = 0;
        if (imm == 1) {
            rel = static_cast<int8_t>(b[i]);
        } else {
            std::memcpy(&rel, b + i, sizeof rel);
        }
        return done(kind, i + imm, rel);
    };
    auto simple = [&](Kind kind, size_t imm) { return done(kind, i + imm, 0); };
    switch (op) {   // one jump table: the ranges as GNU case ranges
        case 0x00 ... 0x03: case 0x08 ... 0x0b: case 0x10 ... 0x13: case 0x18 ... 0x1b:
        case 0x20 ... 0x23: case 0x28 ... 0x2b: case 0x30 ... 0x33:
            return with_modrm(0);                                            // add/or/adc/sbb/and/sub/xor r/m, r and r, r/m
        case 0x38 ... 0x3b: return with_modrm(0, false, true);               // cmp
        case 0x04: case 0x0c: case 0x14: case 0x1c: case 0x24: case 0x2c: case 0x34: case 0x3c:
            return plain(1);                                                 // op al, imm8
        case 0x05: case 0x0d: case 0x15: case 0x1d: case 0x25: case 0x2d: case 0x35: case 0x3d:
            return plain(opsize && !rex_w ? 2 : 4);                          // op eax, imm32
        case 0x50 ... 0x57: return !opsize && simple(Kind::kPush, 0);
        case 0x58 ... 0x5f: return !opsize && (op != 0x5c || rex_b) && simple(Kind::kPop, 0);
        case 0x70 ... 0x7f: return branch(Kind::kJcc, 1);
        case 0xb0 ... 0xb7: return rex == 0 && plain(1);                    // mov r8, imm8
        case 0xb8 ... 0xbf: return (op != 0xbc || rex_b) && plain(rex_w ? 8 : iz());   // mov r, imm
        case 0x63: return with_modrm(0);                                     // movsxd
        case 0x68: return !opsize && simple(Kind::kPush, 4);
        case 0x6a: return !opsize && simple(Kind::kPush, 1);
        case 0x69: return with_modrm(iz());                                    // imul r, r/m, imm
        case 0x6b: return with_modrm(1);
        case 0x80: case 0x81: case 0x83: {                                   // group 1: op r/m, imm
            const size_t imm = op == 0x81 ? iz() : 1;
            if (ext() == 7) return with_modrm(imm, true, true);                // cmp
            if (!mem() && (modrm & 7) == 4 && !rex_b && op != 0x80 && rex_w && !opsize && (ext() == 0 || ext() == 5)) {
                int32_t v = 0;                                               // add/sub rsp, imm
                if (op == 0x83) {
                    v = static_cast<int8_t>(b[i + 1]);
                } else {
                    std::memcpy(&v, b + i + 1, sizeof v);
                }
                return done(Kind::kMoveSp, i + 1 + imm, ext() == 5 ? v : static_cast<int32_t>(-int64_t{v}));
            }
            return with_modrm(imm, true);
        }
        case 0xc0: case 0xc1: return with_modrm(1, true);                    // shifts, imm8
        case 0x84: case 0x85: return with_modrm(0, false, true);             // test
        case 0x86: case 0x87: case 0x88: case 0x89: case 0x8a: case 0x8b:
            return with_modrm(0);                                            // xchg, mov
        case 0x8d: return mem() && with_modrm(0);                              // lea
        case 0x8f:                                                           // pop r/m, not rsp
            return ext() == 0 && !opsize && !modrm_names_rsp(modrm, rex, true) && done(Kind::kPop, i + modrm_length(b, i), 0);
        case 0x90: return plain(0);                                          // nop, xchg r8, rax
        case 0x98: case 0x99: return plain(0);                               // cdqe, cqo
        case 0xa8: return plain(1);                                          // test al, imm8
        case 0xa9: return plain(iz());
        case 0xc2: return simple(Kind::kStop, 2);                            // ret imm16
        case 0xc3: case 0xcc: case 0xf4: return simple(Kind::kStop, 0);      // ret, int3, hlt
        case 0xc6: return ext() == 0 && with_modrm(1, true);                   // mov r/m8, imm8
        case 0xc7: return ext() == 0 && with_modrm(iz(), true);                  // mov r/m, imm32
        case 0xd0: case 0xd1: case 0xd2: case 0xd3: return ext() != 6 && with_modrm(0, true);   // shifts
        case 0xe8: return branch(Kind::kCall, 4);
        case 0xe9: return branch(Kind::kJmp, 4);
        case 0xeb: return branch(Kind::kJmp, 1);
        case 0xf6: return ext() <= 1 ? with_modrm(1, true, true) : with_modrm(0, true);    // test r/m8, imm8; not, neg, mul, div
        case 0xf7: return ext() <= 1 ? with_modrm(iz(), true, true) : with_modrm(0, true);
        case 0xfe: return ext() <= 1 && with_modrm(0, true);                   // inc, dec r/m8
        case 0xff:
            switch (ext()) {
                case 0: case 1: return with_modrm(0, true);                  // inc, dec
                case 2: return !opsize && done(Kind::kCallIndirect, i + modrm_length(b, i), 0);
                case 4: return !opsize && done(Kind::kStop, i + modrm_length(b, i), 0);   // jmp r/m: the path ends
                case 6: return !opsize && done(Kind::kPush, i + modrm_length(b, i), 0);
                default: return false;
            }
        case 0x0f: {
            const uint8_t op2 = b[i++];
            modrm = b[i];
            if (op2 >= 0x80 && op2 <= 0x8f) return branch(Kind::kJcc, 4);
            if (op2 >= 0x40 && op2 <= 0x4f) return with_modrm(0);   // cmovcc
            if (op2 >= 0x90 && op2 <= 0x9f) return with_modrm(0);   // setcc
            switch (op2) {
                case 0x0b: return simple(Kind::kStop, 0);                   // ud2
                case 0x18: return ext() <= 3 && mem() && with_modrm(0, true);   // prefetch
                case 0x1f: return ext() == 0 && with_modrm(0, true);          // nop r/m
                case 0xa3: case 0xab: case 0xb3: case 0xbb: case 0xaf: case 0xb6: case 0xb7: case 0xbe: case 0xbf:
                case 0xbc: case 0xbd: case 0xb0: case 0xb1: case 0xc0: case 0xc1:
                    return with_modrm(0);   // bt*, imul, movzx, movsx, bsf, bsr, cmpxchg, xadd
                case 0xba: return ext() >= 4 && with_modrm(1, true);   // bt* r/m, imm8
                default: return false;
            }
        }
        default: return false;
    }
}

}  // namespace

bool quick_decode(const uint8_t* b, size_t avail, QuickInsn& out) { return quick_decode_inline(b, avail, out); }

const SpRange* SpRanges::find(uint64_t offset) const {
    auto it = std::upper_bound(ranges.begin(), ranges.end(), offset,
                               [](uint64_t off, const SpRange& r) { return off < r.begin; });
    if (it == ranges.begin()) return nullptr;
    --it;
    return offset < it->end ? &*it : nullptr;
}

SpRanges analyze_sp_ranges(const CodeLoad& code) {
    SpRanges out;
    const size_t size = code.code.size();
    // A method-handle intrinsic builds no frame: its "frame sp" is its entry's, the return address
    // at [sp], and on JDK 17 with ZGC its load barrier pushes r12 around the load (and saves every
    // register before calling the runtime in its slow path).
    const bool frameless = code.kind == CodeKind::kMethodHandleIntrinsic;
    if (size == 0 || (code.frame_size_words < 2 && !frameless)) return out;
    const uint32_t start =
        !frameless && code.frame_complete_offset > 0 ? static_cast<uint32_t>(code.frame_complete_offset) : 0;
    if (start >= size) return out;
    const int32_t ret_from_sp = frameless ? 0 : (code.frame_size_words - 1) * 8;   // frame sp to the return address

    // Per-offset scratch kept between calls (one CodeLoad after another: no page faults, no malloc).
    thread_local Scratch scratch;
    std::vector<Seen>& pool = scratch.pool;
    std::vector<uint32_t>& pending = scratch.pending;   // call targets inside this code (call stubs)
    std::vector<PathState>& work = scratch.work;
    scratch.prepare(size);
    Slot* const slots = scratch.slots();
    const uint32_t generation = scratch.generation;
    const CleanOnExit clean{scratch};
    work.push_back({start, 0, kNoSaved, ZYDIS_REGISTER_NONE});
    size_t visits = 0;
    Decoded d;
    while (!work.empty() && visits < kMaxVisits) {
        PathState st = work.back();
        work.pop_back();
        while (st.offset < size && visits++ < kMaxVisits) {
            scratch.slot_pages.prepare(st.offset * sizeof(Slot), sizeof(Slot));   // written before read
            Slot& slot = slots[st.offset];
            if (slot.generation != generation) {
                slot = Slot{st.delta, st.saved, kNone, generation, 1, 0};
            } else {
                bool seen = slot.delta == st.delta && slot.saved == st.saved;
                for (uint32_t i = slot.more; i != kNone && !seen; i = pool[i].next) {
                    seen = pool[i].delta == st.delta && pool[i].saved == st.saved;
                }
                if (seen || slot.count == kMaxStatesPerOffset) break;
                pool.push_back({st.delta, st.saved, slot.more});
                slot.more = static_cast<uint32_t>(pool.size() - 1);
                ++slot.count;
            }
            if (st.delta != 0) scratch.moved_bits[st.offset / 64] |= uint64_t{1} << (st.offset % 64);
            const uint64_t pc = code.code_begin + st.offset;
            QuickInsn q;
            if (st.saved == kNoSaved && quick_decode_inline(code.code.data() + st.offset, size - st.offset, q)) {
                // What the Zydis path below does with such an instruction, without its decoding.
                slot.length = q.length;
                const uint32_t next = st.offset + q.length;
                // A branch's target as an offset in the code; size or more: outside it.
                const uint64_t target_offset = uint64_t{next} + static_cast<uint64_t>(int64_t{q.rel});
                const uint64_t target = code.code_begin + target_offset;
                const bool inside = target_offset < size;
                bool falls_through = true;
                switch (q.kind) {
                    case QuickInsn::Kind::kPlain:
                    case QuickInsn::Kind::kReadsSp:
                    case QuickInsn::Kind::kCallIndirect: break;
                    case QuickInsn::Kind::kMoveSp: st.delta += q.rel; break;
                    case QuickInsn::Kind::kPush: st.delta += 8; break;
                    case QuickInsn::Kind::kPop: st.delta -= 8; break;
                    case QuickInsn::Kind::kStop: falls_through = false; break;
                    case QuickInsn::Kind::kJcc:
                        if (inside) work.push_back({static_cast<uint32_t>(target - code.code_begin), st.delta, st.saved, st.saved_reg});
                        break;
                    case QuickInsn::Kind::kCall:
                        if (inside && target != code.entry && target != code.verified_entry && target != pc + q.length) {
                            pending.push_back(static_cast<uint32_t>(target - code.code_begin));
                        }
                        break;
                    case QuickInsn::Kind::kJmp:
                        falls_through = inside;
                        if (inside) {
                            st.offset = static_cast<uint32_t>(target - code.code_begin);
                            continue;
                        }
                        break;
                }
                if (!falls_through) break;
                st.offset = next;
                continue;
            }
            // While a register holds a saved rsp, any instruction may overwrite it (writes_reg).
            if (!decode_at(code, pc, d, st.saved == kNoSaved)) break;
            slot.length = d.insn.length;
            const uint32_t next = st.offset + d.insn.length;
            const auto m = d.insn.mnemonic;
            // The register keeping the saved rsp is overwritten: nothing to restore from any more.
            const bool mov_from_rsp = m == ZYDIS_MNEMONIC_MOV && is_reg(d.ops[1], ZYDIS_REGISTER_RSP);
            if (st.saved != kNoSaved && !mov_from_rsp && writes_reg(d, st.saved_reg)) {
                st.saved = kNoSaved;
                st.saved_reg = ZYDIS_REGISTER_NONE;
            }
            bool falls_through = true;
            uint64_t target = 0;
            switch (m) {
                case ZYDIS_MNEMONIC_PUSH:
                case ZYDIS_MNEMONIC_PUSHFQ: st.delta += 8; break;
                case ZYDIS_MNEMONIC_POP:
                    if (is_reg(d.ops[0], ZYDIS_REGISTER_RSP)) {   // pop rsp: back to the saved rsp
                        falls_through = st.saved != kNoSaved;
                        st.delta = st.saved;
                        st.saved = kNoSaved;
                        st.saved_reg = ZYDIS_REGISTER_NONE;
                    } else {
                        st.delta -= 8;
                    }
                    break;
                case ZYDIS_MNEMONIC_POPFQ: st.delta -= 8; break;
                case ZYDIS_MNEMONIC_LEAVE: st.delta = -ret_from_sp; break;   // rsp = rbp + 8 (§f)
                case ZYDIS_MNEMONIC_SUB:
                case ZYDIS_MNEMONIC_ADD:
                    if (is_reg(d.ops[0], ZYDIS_REGISTER_RSP)) {
                        if (!is_imm(d.ops[1])) {
                            falls_through = false;
                        } else {
                            const int64_t imm = d.ops[1].imm.value.s;
                            st.delta += static_cast<int32_t>(m == ZYDIS_MNEMONIC_SUB ? imm : -imm);
                        }
                    }
                    break;
                case ZYDIS_MNEMONIC_MOV:
                    if (mov_from_rsp && d.ops[0].type == ZYDIS_OPERAND_TYPE_REGISTER) {
                        // mov r, rsp: the first copy saves rsp (string_indexof: rcx); later ones into
                        // other registers point at bytes copied to the stack
                        if (st.saved == kNoSaved || full(d.ops[0].reg.value) == st.saved_reg) {
                            st.saved = st.delta;
                            st.saved_reg = full(d.ops[0].reg.value);
                        }
                    } else if (is_reg(d.ops[0], ZYDIS_REGISTER_RSP)) {   // mov rsp, r: the saved one
                        falls_through = st.saved != kNoSaved;
                        st.delta = st.saved;
                    }
                    break;
                case ZYDIS_MNEMONIC_LEA:
                    if (is_reg(d.ops[0], ZYDIS_REGISTER_RSP)) {
                        if (d.ops[1].mem.base == ZYDIS_REGISTER_RSP && d.ops[1].mem.index == ZYDIS_REGISTER_NONE) {
                            st.delta -= static_cast<int32_t>(d.ops[1].mem.disp.value);
                        } else {
                            falls_through = false;
                        }
                    }
                    break;
                case ZYDIS_MNEMONIC_RET:
                case ZYDIS_MNEMONIC_INT3:
                case ZYDIS_MNEMONIC_HLT:
                case ZYDIS_MNEMONIC_UD2: falls_through = false; break;
                case ZYDIS_MNEMONIC_JMP:
                    falls_through = false;
                    if (branch_target(d, pc, target) && target >= code.code_begin && target - code.code_begin < size) {
                        st.offset = static_cast<uint32_t>(target - code.code_begin);
                        continue;
                    }
                    break;
                case ZYDIS_MNEMONIC_CALL:
                    if (branch_target(d, pc, target) && target >= code.code_begin && target - code.code_begin < size &&
                        target != code.entry && target != code.verified_entry && target != pc + d.insn.length) {
                        pending.push_back(static_cast<uint32_t>(target - code.code_begin));
                    }
                    break;
                default:
                    if (d.insn.meta.category == ZYDIS_CATEGORY_COND_BR) {
                        if (branch_target(d, pc, target) && target >= code.code_begin &&
                            target - code.code_begin < size) {
                            work.push_back({static_cast<uint32_t>(target - code.code_begin), st.delta, st.saved,
                                            st.saved_reg});
                        }
                    } else if (writes_reg(d, ZYDIS_REGISTER_RSP)) {
                        falls_through = false;   // `and rsp, -16` and the like: not followed
                    }
                    break;
            }
            if (!falls_through) break;
            st.offset = next;
        }
    }
    if (visits >= kMaxVisits) return out;   // too much to follow: no answer rather than half of one

    auto add = [&](SpRange r) {
        if (!out.ranges.empty()) {
            SpRange& last = out.ranges.back();
            if (last.end == r.begin && last.call_pending == r.call_pending && last.count == r.count &&
                std::equal(last.deltas, last.deltas + last.count, r.deltas)) {
                last.end = r.end;
                return;
            }
        }
        out.ranges.push_back(r);
    };
    // Call stubs no captured call reaches: the VM points a call site at its stub only when it
    // resolves the call to an interpreted callee, after the code was announced, so the captured
    // bytes still call the resolve stub (seen with -XX:-TieredCompilation, where C2 code calls
    // methods not compiled yet: HashMap.putVal's top in its stub, the return address at [sp]).
    // They lie in the stubs section, which no flow from the frame-complete offset reaches: the
    // shape at an offset the pass left alone. The walk takes one only with a verified call site.
    auto reached = [&](size_t off) {
        const size_t at = off * sizeof(Slot);
        return scratch.slot_pages.prepared(at) && scratch.slot_pages.prepared(at + sizeof(Slot) - 1) &&
               slots[off].generation == generation;
    };
    {
        constexpr size_t kStubBytes = 15;   // mov rbx, imm64 (10); jmp rel32 (5)
        const uint8_t* const bytes = code.code.data();
        for (size_t from = 1; size >= kStubBytes && from + kStubBytes - 1 <= size;) {
            const void* hit = std::memchr(bytes + from, 0xbb, size - (kStubBytes - 1) - from + 1);
            if (hit == nullptr) break;
            const size_t off = static_cast<size_t>(static_cast<const uint8_t*>(hit) - bytes) - 1;
            if (bytes[off] == 0x48 && bytes[off + 10] == 0xe9 && !reached(off)) pending.push_back(static_cast<uint32_t>(off));
            from = off + 2;
        }
    }
    // Call stubs: `mov rbx, Method*; jmp` reached by a call from this code (the code's own flow may
    // run into them too where nothing but padding separates them from the code before).
    std::sort(pending.begin(), pending.end());
    pending.erase(std::unique(pending.begin(), pending.end()), pending.end());
    std::vector<SpRange> stubs;
    for (uint32_t off : pending) {
        constexpr uint32_t kMovRbxImm64 = 10, kJmpRel32 = 5;
        if (off + kMovRbxImm64 + kJmpRel32 > size) continue;
        const uint8_t* b = code.code.data() + off;
        if (b[0] != 0x48 || b[1] != 0xbb || b[kMovRbxImm64] != 0xe9) continue;
        if (!stubs.empty() && stubs.back().end > off) continue;
        SpRange r;
        r.begin = off;
        r.end = off + kMovRbxImm64 + kJmpRel32;
        r.call_pending = true;
        stubs.push_back(r);
    }
    // The offsets with a nonzero delta in ascending order, the stubs' ranges among them: a stub's
    // range is added where it begins and says all there is about the offsets inside it. (An offset
    // reached with delta 0 only has no range.)
    size_t next_stub = 0;
    auto at_offset = [&](uint32_t off) {
        while (next_stub < stubs.size() && stubs[next_stub].begin <= off) add(stubs[next_stub++]);
        if (next_stub > 0 && off < stubs[next_stub - 1].end) return;
        SpRange r;
        r.begin = off;
        const Slot& slot = slots[off];
        r.end = off + std::max<uint32_t>(slot.length, 1);
        bool nonzero = false, too_many = false;
        auto take = [&](int32_t v) {
            nonzero = nonzero || v != 0;
            if (std::find(r.deltas, r.deltas + r.count, v) != r.deltas + r.count) return;
            if (r.count == SpRange::kMaxDeltas) too_many = true;
            else r.deltas[r.count++] = v;
        };
        take(slot.delta);
        for (uint32_t i = slot.more; i != kNone; i = pool[i].next) take(pool[i].delta);
        if (!nonzero || too_many) return;   // too many ways here: no answer rather than a wrong one
        for (uint8_t i = 1; i < r.count; ++i) {   // ascending (a loop: GCC's -Warray-bounds misreads std::sort here)
            for (uint8_t j = i; j > 0 && r.deltas[j - 1] > r.deltas[j]; --j) std::swap(r.deltas[j - 1], r.deltas[j]);
        }
        add(r);
    };
    for (size_t word = 0; word < scratch.words; ++word) {
        for (uint64_t bits = scratch.moved_bits[word]; bits != 0; bits &= bits - 1) {
            at_offset(static_cast<uint32_t>(word * 64 + static_cast<size_t>(__builtin_ctzll(bits))));
        }
    }
    while (next_stub < stubs.size()) add(stubs[next_stub++]);
    std::sort(out.ranges.begin(), out.ranges.end(), [](const SpRange& a, const SpRange& b) { return a.begin < b.begin; });
    return out;
}

uint32_t continuation_offset(const CodeLoad& code, uint32_t offset, Restores restores) {
    // ZGC's C2 load-barrier stub restores four registers and rsp in six instructions; a handful more
    // covers the other stubs' shapes without running into unrelated code.
    const int max_instructions = restores == Restores::kPops ? 4 : 24;
    uint64_t off = offset;
    for (int i = 0; i <= max_instructions && off < code.code.size(); ++i) {
        ZydisDecodedInstruction insn;
        ZydisDecoderContext context;
        if (!ZYAN_SUCCESS(ZydisDecoderDecodeInstruction(&zydis(), &context, code.code.data() + off,
                                                        code.code.size() - off, &insn))) {
            break;
        }
        if (insn.meta.category == ZYDIS_CATEGORY_UNCOND_BR) {
            if (!(insn.attributes & ZYDIS_ATTRIB_IS_RELATIVE) || insn.raw.imm[0].size == 0) break;
            const int64_t to = static_cast<int64_t>(off + insn.length) + insn.raw.imm[0].value.s;
            if (to >= 0 && static_cast<uint64_t>(to) < code.code.size()) return static_cast<uint32_t>(to);
            break;
        }
        if (i == max_instructions) break;
        if (restores == Restores::kPops) {
            // pop r64, with or without REX.B (58+r, 41 58+r)
            const uint8_t b = code.code[off];
            const bool pop = (b >= 0x58 && b <= 0x5f) ||
                             (b == 0x41 && off + 1 < code.code.size() && code.code[off + 1] >= 0x58 && code.code[off + 1] <= 0x5f);
            if (!pop) break;
        } else if (insn.meta.branch_type != ZYDIS_BRANCH_TYPE_NONE || insn.meta.category == ZYDIS_CATEGORY_RET ||
                   insn.meta.category == ZYDIS_CATEGORY_CALL || insn.meta.category == ZYDIS_CATEGORY_INTERRUPT ||
                   insn.meta.category == ZYDIS_CATEGORY_SYSTEM || insn.mnemonic == ZYDIS_MNEMONIC_UD2 ||
                   insn.mnemonic == ZYDIS_MNEMONIC_HLT) {
            break;
        }
        off += insn.length;
    }
    return offset;
}

uint64_t return_after_call_to(const CodeLoad& code, uint64_t target) {
    for (uint64_t off = 0; off < code.code.size();) {
        ZydisDecodedInstruction insn;
        ZydisDecoderContext context;
        if (!ZYAN_SUCCESS(ZydisDecoderDecodeInstruction(&zydis(), &context, code.code.data() + off,
                                                        code.code.size() - off, &insn))) {
            return 0;
        }
        off += insn.length;
        if (insn.meta.category == ZYDIS_CATEGORY_CALL && (insn.attributes & ZYDIS_ATTRIB_IS_RELATIVE) &&
            insn.raw.imm[0].size != 0 &&
            code.code_begin + off + static_cast<uint64_t>(insn.raw.imm[0].value.s) == target) {
            return code.code_begin + off;
        }
    }
    return 0;
}

namespace {
struct DeoptHandler {
    uint64_t length = 0, target = 0;
};

std::optional<DeoptHandler> deopt_handler_at(const CodeLoad& code, uint64_t pc) {
    namespace dh = hotspot::deopt_handler;
    if (pc < code.code_begin || pc - code.code_begin >= code.code.size()) return std::nullopt;
    const uint8_t* at = code.code.data() + (pc - code.code_begin);
    const uint64_t avail = code.code.size() - (pc - code.code_begin);
    auto jump_at = [&](uint64_t offset) -> std::optional<DeoptHandler> {
        if (avail < offset + 5 || at[offset] != dh::kJmpRel32) return std::nullopt;
        int32_t rel = 0;
        std::memcpy(&rel, at + offset + 1, sizeof rel);
        return DeoptHandler{offset + 5, pc + offset + 5 + static_cast<uint64_t>(static_cast<int64_t>(rel))};
    };
    if (avail >= dh::kC1Bytes && std::memcmp(at, dh::kC1MovR10, sizeof dh::kC1MovR10) == 0 &&
        std::memcmp(at + 10, dh::kC1PushR10, sizeof dh::kC1PushR10) == 0) {
        uint64_t own = 0;
        std::memcpy(&own, at + 2, sizeof own);
        if (own == pc) return jump_at(12);
    }
    if (avail >= dh::kC2Bytes && std::memcmp(at, dh::kC2CallSub, sizeof dh::kC2CallSub) == 0) return jump_at(10);
    return std::nullopt;
}
}  // namespace

bool follows_deopt_handler(const CodeLoad& code, uint64_t pc) {
    if (code.deopt_handler == 0 || pc <= code.deopt_handler || pc - code.deopt_handler > hotspot::deopt_handler::kC1Bytes) {
        return false;
    }
    const std::optional<DeoptHandler> first = deopt_handler_at(code, code.deopt_handler);
    if (!first || code.deopt_handler + first->length != pc) return false;
    const std::optional<DeoptHandler> second = deopt_handler_at(code, pc);
    return second && second->target == first->target;
}

}  // namespace sf::detail
