// The moved-rsp pass's shortcut past Zydis (code_shape.hpp, quick_decode) must, wherever it
// answers, say what Zydis says in every respect the pass reads: the length, whether the instruction
// is a push, a pop of another register than rsp, an add/sub rsp, imm (and by how much), a relative
// jump, call or conditional jump (and its target), an indirect call, an instruction that ends the
// path, a cmp or test that reads rsp, or none of these with no operand naming rsp.
#include <catch2/catch.hpp>

#include <Zydis/Zydis.h>

#include <random>
#include <string>
#include <vector>

#include "code_shape.hpp"
#include "stackfrag/events/recording.hpp"

using namespace sf;
using detail::QuickInsn;

namespace {

// Empty when quick_decode agrees with Zydis at `bytes` (or does not answer), else what differs.
std::string disagreement(const uint8_t* bytes, size_t avail, bool& answered) {
    QuickInsn q;
    answered = detail::quick_decode(bytes, avail, q);
    if (!answered) return {};
    static const ZydisDecoder zydis = [] {
        ZydisDecoder d;
        ZydisDecoderInit(&d, ZYDIS_MACHINE_MODE_LONG_64, ZYDIS_STACK_WIDTH_64);
        return d;
    }();
    ZydisDecoderContext context;
    ZydisDecodedInstruction insn;
    ZydisDecodedOperand ops[ZYDIS_MAX_OPERAND_COUNT];
    if (!ZYAN_SUCCESS(ZydisDecoderDecodeInstruction(&zydis, &context, bytes, avail, &insn)) ||
        !ZYAN_SUCCESS(ZydisDecoderDecodeOperands(&zydis, &context, &insn, ops, insn.operand_count_visible))) {
        return "Zydis does not decode it";
    }
    if (insn.length != q.length) return "length " + std::to_string(insn.length) + " != " + std::to_string(q.length);
    const auto m = insn.mnemonic;
    const bool relative = insn.raw.imm[0].is_relative && insn.raw.imm[0].value.s == q.rel;
    const bool cond = insn.meta.category == ZYDIS_CATEGORY_COND_BR;
    auto names_rsp = [&](bool written_only) {
        for (uint8_t i = 0; i < insn.operand_count_visible; ++i) {
            if (ops[i].type == ZYDIS_OPERAND_TYPE_REGISTER &&
                ZydisRegisterGetLargestEnclosing(ZYDIS_MACHINE_MODE_LONG_64, ops[i].reg.value) == ZYDIS_REGISTER_RSP &&
                (!written_only || (ops[i].actions & ZYDIS_OPERAND_ACTION_MASK_WRITE))) {
                return true;
            }
        }
        return false;
    };
    const bool special = m == ZYDIS_MNEMONIC_PUSH || m == ZYDIS_MNEMONIC_PUSHFQ || m == ZYDIS_MNEMONIC_POP ||
                         m == ZYDIS_MNEMONIC_POPFQ || m == ZYDIS_MNEMONIC_LEAVE || m == ZYDIS_MNEMONIC_RET ||
                         m == ZYDIS_MNEMONIC_INT3 || m == ZYDIS_MNEMONIC_HLT || m == ZYDIS_MNEMONIC_UD2 ||
                         m == ZYDIS_MNEMONIC_JMP || m == ZYDIS_MNEMONIC_CALL || cond;
    switch (q.kind) {
        case QuickInsn::Kind::kPlain:
            if (special) return "plain, but a push, pop, leave or branch";
            return names_rsp(false) ? "plain, but it names rsp" : "";
        case QuickInsn::Kind::kReadsSp:
            // The pass reads rsp operands of add, sub, lea and mov only, and anything that writes rsp (a
            // ModRM field 4 may also be ah: quick_decode does not tell).
            if (special) return "reads rsp, but a push, pop, leave or branch";
            if (m != ZYDIS_MNEMONIC_CMP && m != ZYDIS_MNEMONIC_TEST) return "reads rsp, but no cmp or test";
            return names_rsp(true) ? "reads rsp, but writes it" : "";
        case QuickInsn::Kind::kMoveSp: {
            if (m != ZYDIS_MNEMONIC_ADD && m != ZYDIS_MNEMONIC_SUB) return "moves rsp, but no add or sub";
            if (ops[0].type != ZYDIS_OPERAND_TYPE_REGISTER || ops[0].reg.value != ZYDIS_REGISTER_RSP ||
                ops[1].type != ZYDIS_OPERAND_TYPE_IMMEDIATE) {
                return "moves rsp, but not by add/sub rsp, imm";
            }
            const int64_t imm = ops[1].imm.value.s;
            return static_cast<int32_t>(m == ZYDIS_MNEMONIC_SUB ? imm : -imm) == q.rel ? "" : "moves rsp by another amount";
        }
        case QuickInsn::Kind::kPush: return m == ZYDIS_MNEMONIC_PUSH ? "" : "not a push";
        case QuickInsn::Kind::kPop:
            if (m != ZYDIS_MNEMONIC_POP) return "not a pop";
            return ops[0].type == ZYDIS_OPERAND_TYPE_REGISTER && ops[0].reg.value == ZYDIS_REGISTER_RSP ? "pop rsp" : "";
        case QuickInsn::Kind::kStop:
            return m == ZYDIS_MNEMONIC_RET || m == ZYDIS_MNEMONIC_INT3 || m == ZYDIS_MNEMONIC_HLT ||
                           m == ZYDIS_MNEMONIC_UD2 || (m == ZYDIS_MNEMONIC_JMP && !insn.raw.imm[0].is_relative)
                       ? ""
                       : "no ret, int3, hlt, ud2 or indirect jmp";
        case QuickInsn::Kind::kJmp: return m == ZYDIS_MNEMONIC_JMP && relative ? "" : "not this jmp";
        case QuickInsn::Kind::kCall: return m == ZYDIS_MNEMONIC_CALL && relative ? "" : "not this call";
        case QuickInsn::Kind::kCallIndirect:
            return m == ZYDIS_MNEMONIC_CALL && !insn.raw.imm[0].is_relative ? "" : "not an indirect call";
        case QuickInsn::Kind::kJcc: return cond && relative && m != ZYDIS_MNEMONIC_JMP ? "" : "not this jcc";
    }
    return "unknown kind";
}

std::string hex(const uint8_t* b, size_t n) {
    std::string s;
    for (size_t i = 0; i < n; ++i) {
        static const char* digits = "0123456789abcdef";
        s += digits[b[i] >> 4];
        s += digits[b[i] & 15];
        s += ' ';
    }
    return s;
}

}  // namespace

TEST_CASE("quick_decode agrees with Zydis at every offset of the recorded compiled code", "[decoder]") {
    size_t offsets = 0, answered_count = 0;
    for (const char* file : {"groundtruth-jdk17-validate.sfr", "groundtruth-jdk21-validate.sfr", "groundtruth-jdk25-validate.sfr"}) {
        auto reader = RecordingReader::open(std::string(STACKFRAG_SOURCE_DIR) + "/tests/data/" + file);
        REQUIRE(reader.ok());
        while (auto event = (*reader)->next()) {
            const auto* load = std::get_if<CodeLoad>(&*event);
            if (load == nullptr) continue;
            const std::vector<uint8_t>& code = load->code;
            // Every offset, not only instruction starts: any byte can be a jump's target.
            for (size_t off = 0; off < code.size(); ++off) {
                bool answered = false;
                const std::string why = disagreement(code.data() + off, code.size() - off, answered);
                INFO(file << " code at 0x" << std::hex << load->code_begin << " + " << off << ": "
                          << hex(code.data() + off, std::min<size_t>(15, code.size() - off)) << ": " << why);
                REQUIRE(why.empty());
                answered_count += answered;
                ++offsets;
            }
        }
    }
    CHECK(offsets > 100000);
    CHECK(answered_count > offsets / 4);   // it answers for most of what compiled code is made of
}

TEST_CASE("quick_decode agrees with Zydis on random instruction bytes", "[decoder]") {
    // Random bytes after the prefixes and opcodes it knows, so that its every case meets every
    // ModRM, SIB, displacement and immediate; and wholly random ones.
    std::mt19937_64 random(5);
    const uint8_t prefixes[] = {0x66, 0x40, 0x41, 0x44, 0x48, 0x49, 0x4c, 0x4d, 0x0f, 0xf3, 0xf2, 0xf0, 0xc5};
    size_t answered_count = 0;
    for (int n = 0; n < 2'000'000; ++n) {
        uint8_t bytes[20];
        for (uint8_t& b : bytes) b = static_cast<uint8_t>(random());
        const int lead = static_cast<int>(random() % 4);
        for (int i = 0; i < lead; ++i) bytes[i] = prefixes[random() % sizeof prefixes];
        bool answered = false;
        const std::string why = disagreement(bytes, sizeof bytes, answered);
        INFO(hex(bytes, 15) << ": " << why);
        REQUIRE(why.empty());
        answered_count += answered;
    }
    CHECK(answered_count > 200000);
}

TEST_CASE("quick_decode agrees with Zydis on random two-byte-VEX instructions", "[decoder]") {
    // c5, any ~R/~vvvv/L/pp, one of the opcodes it knows there or any, then random bytes.
    std::mt19937_64 random(7);
    const uint8_t opcodes[] = {0x10, 0x11, 0x6f, 0x7f, 0xef, 0xd6, 0x6e, 0x7e, 0x77};
    size_t answered_count = 0;
    for (int n = 0; n < 500'000; ++n) {
        uint8_t bytes[20];
        for (uint8_t& b : bytes) b = static_cast<uint8_t>(random());
        bytes[0] = 0xc5;
        if (random() % 8 != 0) bytes[2] = opcodes[random() % sizeof opcodes];
        bool answered = false;
        const std::string why = disagreement(bytes, sizeof bytes, answered);
        INFO(hex(bytes, 15) << ": " << why);
        REQUIRE(why.empty());
        answered_count += answered;
    }
    CHECK(answered_count > 10000);
}
