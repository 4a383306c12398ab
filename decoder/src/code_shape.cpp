#include "code_shape.hpp"

#include <Zydis/Zydis.h>

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

bool decode_at(const CodeLoad& code, uint64_t pc, Decoded& out) {
    if (pc < code.code_begin) return false;
    uint64_t off = pc - code.code_begin;
    if (off >= code.code.size()) return false;
    return ZYAN_SUCCESS(ZydisDecoderDecodeFull(&zydis(), code.code.data() + off, code.code.size() - off,
                                               &out.insn, out.ops));
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

// Emulates the prologue from the verified entry up to `pc`; offsets are kept relative to the
// entry sp, where the return address sits.
TopFrameShape emulate_prologue(const CodeLoad& code, uint64_t pc) {
    TopFrameShape shape;
    shape.kind = TopFrameShape::Kind::kPartial;
    shape.in_prologue = true;
    uint64_t pushed = 0;              // entry sp - current sp
    bool fp_saved = false;
    uint64_t fp_slot_below_entry = 0; // entry sp - address of the saved rbp
    uint64_t cur = code.verified_entry;
    Decoded d;
    for (int steps = 0; cur < pc && steps < 32; ++steps) {
        if (!decode_at(code, cur, d)) break;
        const auto m = d.insn.mnemonic;
        if (m == ZYDIS_MNEMONIC_PUSH) {
            pushed += 8;
            if (is_reg(d.ops[0], ZYDIS_REGISTER_RBP)) {
                fp_saved = true;
                fp_slot_below_entry = pushed;
            }
        } else if (m == ZYDIS_MNEMONIC_SUB && is_reg(d.ops[0], ZYDIS_REGISTER_RSP) && is_imm(d.ops[1])) {
            pushed += d.ops[1].imm.value.u;
        } else if (m == ZYDIS_MNEMONIC_MOV && is_rsp_mem(d.ops[0])) {
            if (is_reg(d.ops[1], ZYDIS_REGISTER_RBP)) {   // bang-less C2: mov [rsp+N-16], rbp
                int64_t disp = d.ops[0].mem.disp.value;
                if (disp >= 0 && static_cast<uint64_t>(disp) < pushed) {
                    fp_saved = true;
                    fp_slot_below_entry = pushed - static_cast<uint64_t>(disp);
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
            break;
        }
        cur += d.insn.length;
    }
    shape.return_offset = pushed;
    shape.fp_saved = fp_saved;
    shape.saved_fp_offset = fp_saved ? pushed - fp_slot_below_entry : 0;
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
    if (code.kind != CodeKind::kOsr && code.frame_complete_offset > 0 &&
        off < static_cast<uint64_t>(code.frame_complete_offset) && pc >= code.verified_entry) {
        return emulate_prologue(code, pc);
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

}  // namespace sf::detail
