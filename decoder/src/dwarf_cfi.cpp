#include "dwarf_cfi.hpp"

#include <algorithm>
#include <array>
#include <cstring>
#include <vector>

namespace sf::detail {
namespace {

// DWARF pointer encodings (LSB .eh_frame_hdr, DWARF 4 §7.7).
constexpr uint8_t kPeAbsptr = 0x00, kPeUdata4 = 0x03, kPeUdata8 = 0x04, kPeSdata4 = 0x0b, kPeSdata8 = 0x0c;
constexpr uint8_t kPePcrel = 0x10, kPeDatarel = 0x30, kPeOmit = 0xff;
// x86_64 DWARF register numbers; libunwind keeps rules for 0..16 only (16: the return address).
constexpr uint64_t kRbp = 6, kRsp = 7, kRa = 16, kRegs = 17;

// Bounds-checked reads from bytes of the file.
struct Cursor {
    const uint8_t* p;
    const uint8_t* end;
    uint64_t vaddr;   // of p
    bool ok = true;

    bool has(uint64_t n) const { return ok && static_cast<uint64_t>(end - p) >= n; }
    template <typename T>
    T fixed() {
        T v{};
        if (!has(sizeof(T))) {
            ok = false;
            return v;
        }
        std::memcpy(&v, p, sizeof(T));
        skip(sizeof(T));
        return v;
    }
    void skip(uint64_t n) {
        if (!has(n)) {
            ok = false;
            return;
        }
        p += n;
        vaddr += n;
    }
    uint64_t uleb() {
        uint64_t v = 0;
        for (unsigned shift = 0; ok; shift += 7) {
            const uint8_t b = fixed<uint8_t>();
            if (shift < 64) v |= uint64_t{b & 0x7fu} << shift;
            if (!(b & 0x80)) break;
        }
        return v;
    }
    int64_t sleb() {
        uint64_t v = 0;
        unsigned shift = 0;
        uint8_t b = 0;
        do {
            b = fixed<uint8_t>();
            if (shift < 64) v |= uint64_t{b & 0x7fu} << shift;
            shift += 7;
        } while (ok && (b & 0x80));
        if (shift < 64 && (b & 0x40)) v |= ~uint64_t{0} << shift;
        return static_cast<int64_t>(v);
    }
    // A pointer in one of the encodings .eh_frame uses for code addresses (absolute or pc-relative).
    bool pointer(uint8_t encoding, uint64_t& out) {
        const uint64_t at = vaddr;
        switch (encoding & 0x0f) {
            case kPeAbsptr: case kPeUdata8: out = fixed<uint64_t>(); break;
            case kPeUdata4: out = fixed<uint32_t>(); break;
            case kPeSdata4: out = static_cast<uint64_t>(int64_t{fixed<int32_t>()}); break;
            case kPeSdata8: out = fixed<uint64_t>(); break;
            default: return false;
        }
        switch (encoding & 0x70) {
            case 0: break;
            case kPePcrel: out += at; break;
            default: return false;
        }
        return ok && !(encoding & 0x80);   // no indirect pointers
    }
};

// A register's rule, as far as the answer needs to tell them apart.
enum class Where : uint8_t { kSame, kCfaOffset, kOther, kExpression, kUndefined };
struct Reg {
    Where where = Where::kSame;
    int64_t offset = 0;
};
struct State {
    std::array<Reg, kRegs> regs{};
    uint64_t cfa_reg = kRsp;
    int64_t cfa_offset = 0;
    bool cfa_expression = false;
};

struct Cie {
    uint64_t code_align = 1;
    int64_t data_align = 1;
    uint8_t fde_encoding = kPeAbsptr;
    bool has_augmentation_data = false;
    const uint8_t* instructions = nullptr;
    const uint8_t* end = nullptr;
    uint64_t instructions_vaddr = 0;
};

bool parse_cie(const ElfFile& elf, uint64_t vaddr, Cie& cie) {
    uint64_t available = 0;
    const uint8_t* p = elf.bytes_at_vaddr(vaddr, available);
    if (!p) return false;
    Cursor c{p, p + available, vaddr};
    const uint32_t length = c.fixed<uint32_t>();
    if (!c.ok || length == 0xffffffffu || !c.has(length)) return false;
    c.end = c.p + length;
    const uint8_t* end = c.end;
    if (c.fixed<uint32_t>() != 0) return false;   // a CIE's id in .eh_frame
    const uint8_t version = c.fixed<uint8_t>();
    if (version != 1 && version != 3) return false;
    char augmentation[8] = {};
    size_t n = 0;
    for (char ch; c.ok && (ch = static_cast<char>(c.fixed<uint8_t>())) != 0;) {
        if (n + 1 >= sizeof augmentation) return false;
        augmentation[n++] = ch;
    }
    cie.code_align = c.uleb();
    cie.data_align = c.sleb();
    const uint64_t ra = version == 1 ? c.fixed<uint8_t>() : c.uleb();
    if (!c.ok || ra != kRa) return false;
    if (n > 0) {
        if (augmentation[0] != 'z') return false;
        cie.has_augmentation_data = true;
        const uint64_t data_length = c.uleb();
        if (!c.has(data_length)) return false;
        const uint8_t* data_end = c.p + data_length;
        for (size_t i = 1; i < n; ++i) {
            switch (augmentation[i]) {
                case 'R': cie.fde_encoding = c.fixed<uint8_t>(); break;
                case 'L': c.fixed<uint8_t>(); break;
                case 'P': {
                    const uint8_t encoding = c.fixed<uint8_t>();
                    const uint8_t size = encoding & 0x0f;
                    c.skip(size == kPeUdata4 || size == kPeSdata4 ? 4 : size == kPeAbsptr || size == kPeUdata8 || size == kPeSdata8 ? 8 : 1u << 30);
                    break;
                }
                default: return false;   // 'S' (a signal frame) and anything unknown
            }
        }
        if (!c.ok || c.p > data_end) return false;
        c.skip(static_cast<uint64_t>(data_end - c.p));
    }
    if (!c.ok) return false;
    cie.instructions = c.p;
    cie.instructions_vaddr = c.vaddr;
    cie.end = end;
    return true;
}

// Runs a CFI program up to the row of `target`. `initial`: the state after the CIE's program, for
// DW_CFA_restore. Returns false on anything it does not handle the way libunwind does.
// `row`: where the row of `target` begins and ends (ends: at the next location, else at ~0 when
// the program ended first); both ~0 after a set_loc, which may go backwards.
struct Row {
    uint64_t begin = 0, end = ~uint64_t{0};
    bool set_loc = false;
};
bool run(Cursor c, const Cie& cie, uint64_t loc, uint64_t target, State& state, const State& initial, Row& row) {
    constexpr size_t kMaxRemembered = 8;
    static thread_local std::vector<State> remembered;   // reused: most programs never remember
    remembered.clear();
    auto reg = [&](uint64_t r) -> Reg* { return r < kRegs ? &state.regs[r] : nullptr; };
    row.begin = loc;
    while (loc <= target && c.p < c.end) {
        row.begin = loc;
        uint8_t op = c.fixed<uint8_t>();
        uint64_t operand = 0;
        if (op & 0xc0) {
            operand = op & 0x3f;
            op &= 0xc0;
        }
        Reg* r = nullptr;
        switch (op) {
            case 0x40: loc += operand * cie.code_align; break;   // advance_loc
            case 0x02: loc += c.fixed<uint8_t>() * cie.code_align; break;
            case 0x03: loc += c.fixed<uint16_t>() * cie.code_align; break;
            case 0x04: loc += c.fixed<uint32_t>() * cie.code_align; break;
            case 0x80:   // offset
                if (!(r = reg(operand))) return false;
                *r = {Where::kCfaOffset, static_cast<int64_t>(c.uleb()) * cie.data_align};
                break;
            case 0x05:   // offset_extended
                if (!(r = reg(c.uleb()))) return false;
                *r = {Where::kCfaOffset, static_cast<int64_t>(c.uleb()) * cie.data_align};
                break;
            case 0x11:   // offset_extended_sf
                if (!(r = reg(c.uleb()))) return false;
                *r = {Where::kCfaOffset, c.sleb() * cie.data_align};
                break;
            case 0x2f:   // GNU_negative_offset_extended
                if (!(r = reg(c.uleb()))) return false;
                *r = {Where::kCfaOffset, -(static_cast<int64_t>(c.uleb()) * cie.data_align)};
                break;
            case 0xc0:   // restore
                if (operand >= kRegs) return false;
                state.regs[operand] = initial.regs[operand];
                break;
            case 0x06: {   // restore_extended
                const uint64_t n = c.uleb();
                if (n >= kRegs) return false;
                state.regs[n] = initial.regs[n];
                break;
            }
            case 0x00: break;   // nop
            case 0x01: {        // set_loc
                uint64_t to = 0;
                if (!c.pointer(cie.fde_encoding, to)) return false;
                loc = to;
                row.set_loc = true;
                break;
            }
            case 0x07:   // undefined
                if (!(r = reg(c.uleb()))) return false;
                *r = {Where::kUndefined, 0};
                break;
            case 0x09:   // register
            case 0x14:   // val_offset
            case 0x15:   // val_offset_sf
                if (!(r = reg(c.uleb()))) return false;
                *r = {Where::kOther, 0};
                if (op == 0x15) c.sleb();
                else c.uleb();
                break;
            case 0x08:   // same_value
                if (!(r = reg(c.uleb()))) return false;
                *r = {Where::kSame, 0};
                break;
            case 0x0a:   // remember_state
                if (remembered.size() == kMaxRemembered) return false;
                remembered.push_back(state);
                break;
            case 0x0b:   // restore_state: the whole row, the CFA too
                if (remembered.empty()) return false;
                state = remembered.back();
                remembered.pop_back();
                break;
            case 0x0c:   // def_cfa
                if ((state.cfa_reg = c.uleb()) >= kRegs) return false;
                state.cfa_offset = static_cast<int64_t>(c.uleb());
                state.cfa_expression = false;
                break;
            case 0x12:   // def_cfa_sf
                if ((state.cfa_reg = c.uleb()) >= kRegs) return false;
                state.cfa_offset = c.sleb() * cie.data_align;
                state.cfa_expression = false;
                break;
            case 0x0d:   // def_cfa_register
                if ((state.cfa_reg = c.uleb()) >= kRegs) return false;
                state.cfa_expression = false;
                break;
            case 0x0e: state.cfa_offset = static_cast<int64_t>(c.uleb()); break;   // def_cfa_offset
            case 0x13: state.cfa_offset = c.sleb() * cie.data_align; break;        // def_cfa_offset_sf
            case 0x0f:   // def_cfa_expression
                state.cfa_expression = true;
                c.skip(c.uleb());
                break;
            case 0x10:   // expression
            case 0x16:   // val_expression
                if (!(r = reg(c.uleb()))) return false;
                *r = {Where::kExpression, 0};
                c.skip(c.uleb());
                break;
            case 0x2e: c.uleb(); break;   // GNU_args_size
            default: return false;
        }
        if (!c.ok) return false;
    }
    if (loc > target) row.end = loc;
    else row.begin = loc;
    return true;
}

// .eh_frame_hdr: version, eh_frame_ptr_enc, fde_count_enc, table_enc, eh_frame_ptr, fde_count,
// then the table of (initial location, FDE address) pairs sorted by location.
struct HdrTable {
    uint64_t hdr_vaddr = 0;
    const uint8_t* table = nullptr;
    uint32_t count = 0;
    // Entry i's initial location (k = 0) or FDE address (k = 1).
    uint64_t entry(uint32_t i, int k) const {
        int32_t v = 0;
        std::memcpy(&v, table + uint64_t{i} * 8 + 4 * static_cast<uint64_t>(k), 4);
        return hdr_vaddr + static_cast<uint64_t>(int64_t{v});
    }
};

bool hdr_table(const ElfFile& elf, HdrTable& t) {
    const uint64_t hdr_vaddr = elf.eh_frame_hdr_vaddr();
    uint64_t available = 0;
    const uint8_t* hdr = hdr_vaddr ? elf.bytes_at_vaddr(hdr_vaddr, available) : nullptr;
    if (!hdr || available < 12 || hdr[0] != 1 || hdr[1] != (kPePcrel | kPeSdata4) || hdr[2] != kPeUdata4 ||
        hdr[3] != (kPeDatarel | kPeSdata4)) {
        return false;
    }
    uint32_t count = 0;
    std::memcpy(&count, hdr + 8, 4);
    if (count == 0 || (available - 12) / 8 < count) return false;
    t = {hdr_vaddr, hdr + 12, count};
    return true;
}

}  // namespace

PageIndex cfi_table_index(const ElfFile& elf) {
    PageIndex index;
    HdrTable t;
    if (hdr_table(elf, t)) index.build(t.count, [&](size_t i) { return t.entry(static_cast<uint32_t>(i), 0); });
    return index;
}

// A CIE as parse_cie read it and the state and row its initial instructions leave.
struct CieMemo::Entry {
    bool parsed = false;    // parse_cie's answer
    bool ran = false;       // the initial instructions' run's
    Cie cie;
    State initial;
    Row row;
};
CieMemo::CieMemo() = default;
CieMemo::~CieMemo() = default;
CieMemo::Entry& CieMemo::at(uint64_t cie_vaddr, bool& added) {
    std::unique_ptr<Entry>& e = entries_[cie_vaddr];
    added = e == nullptr;
    if (added) e = std::make_unique<Entry>();
    return *e;
}

bool cfi_rule_at(const ElfFile& elf, uint64_t vaddr, CfiRule& out, const PageIndex* table_index, bool* first_frame,
                 CieMemo* cies) {
    if (first_frame) *first_frame = false;
    HdrTable t;
    if (!hdr_table(elf, t)) return false;
    if (vaddr < t.entry(0, 0)) return false;
    uint32_t lo = 0;   // the last entry whose location is <= vaddr
    if (table_index && table_index->usable()) {
        lo = static_cast<uint32_t>(table_index->upper_bound(vaddr, [&](size_t i) { return t.entry(static_cast<uint32_t>(i), 0); }) - 1);
    } else {
        uint32_t hi = t.count;
        while (hi - lo > 1) {
            const uint32_t mid = lo + (hi - lo) / 2;
            if (t.entry(mid, 0) <= vaddr) lo = mid;
            else hi = mid;
        }
    }
    const uint64_t fde_vaddr = t.entry(lo, 1);
    uint64_t available = 0;

    const uint8_t* p = elf.bytes_at_vaddr(fde_vaddr, available);
    if (!p) return false;
    Cursor c{p, p + available, fde_vaddr};
    const uint32_t length = c.fixed<uint32_t>();
    if (!c.ok || length == 0 || length == 0xffffffffu || !c.has(length)) return false;
    c.end = c.p + length;
    const uint64_t cie_pointer_vaddr = c.vaddr;
    const uint32_t cie_pointer = c.fixed<uint32_t>();
    if (!c.ok || cie_pointer == 0) return false;
    // The CIE and the state its initial instructions leave: the same for every FDE of the CIE, so
    // parsed and run once per file with `cies`. A run's failure is answered where a run here would.
    CieMemo::Entry local;
    CieMemo::Entry* e = &local;
    bool added = true;
    if (cies) e = &cies->at(cie_pointer_vaddr - cie_pointer, added);
    if (added) {
        e->parsed = parse_cie(elf, cie_pointer_vaddr - cie_pointer, e->cie);
        const State none;
        e->ran = e->parsed && run(Cursor{e->cie.instructions, e->cie.end, e->cie.instructions_vaddr}, e->cie, 0,
                                  ~uint64_t{0}, e->initial, none, e->row);
    }
    if (!e->parsed) return false;
    const Cie& cie = e->cie;
    uint64_t begin = 0, range = 0;
    if (!c.pointer(cie.fde_encoding, begin) || !c.pointer(cie.fde_encoding & 0x0f, range)) return false;
    if (vaddr < begin || vaddr - begin >= range) return false;
    if (cie.has_augmentation_data) c.skip(c.uleb());
    if (!c.ok) return false;

    if (!e->ran) return false;
    State state = e->initial;
    Row row = e->row;
    const State initial = state;
    if (!run(c, cie, begin, vaddr, state, initial, row)) return false;

    if (state.cfa_expression || (state.cfa_reg != kRsp && state.cfa_reg != kRbp)) return false;
    for (const Reg& r : state.regs) {
        if (r.where == Where::kExpression) return false;
    }
    const Reg& ra = state.regs[kRa];
    const Reg& fp = state.regs[kRbp];
    if (fp.where != Where::kSame && fp.where != Where::kCfaOffset) return false;
    if (ra.where == Where::kUndefined && first_frame) *first_frame = true;
    if (ra.where != Where::kCfaOffset) return false;
    out.cfa_from_fp = state.cfa_reg == kRbp;
    out.cfa_offset = state.cfa_offset;
    out.ra_offset = ra.offset;
    out.fp_saved = fp.where == Where::kCfaOffset;
    out.fp_offset = fp.offset;
    if (row.set_loc || row.begin > vaddr) {
        out.row_begin = vaddr;
        out.row_end = vaddr + 1;
    } else {
        out.row_begin = row.begin;
        out.row_end = std::min(row.end, begin + range);
    }
    return true;
}

}  // namespace sf::detail
