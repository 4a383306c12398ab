// The DWARF call-frame rule of one instruction of a module, read from its .eh_frame_hdr and
// .eh_frame without libunwind, for the rows most code has; anything else is left to libunwind.
#pragma once

#include <cstdint>
#include <memory>
#include <unordered_map>

#include "stackfrag/base/elf_file.hpp"
#include "stackfrag/base/page_index.hpp"

namespace sf::detail {

// CFA = (rbp if cfa_from_fp, else rsp) + cfa_offset; the return address at CFA + ra_offset; the
// caller's rbp at CFA + fp_offset when fp_saved, else still in rbp.
struct CfiRule {
    int64_t cfa_offset = 0;
    int64_t ra_offset = 0;
    int64_t fp_offset = 0;
    bool cfa_from_fp = false;
    bool fp_saved = false;
    // The rule is the same for every address in [row_begin, row_end) (ELF virtual addresses).
    uint64_t row_begin = 0, row_end = 0;

    bool operator==(const CfiRule&) const = default;
};

// The rule in effect at ELF virtual address `vaddr` (the instructions at locations up to and
// including `vaddr` applied, as libunwind 1.6 does). False when the module has no row for it or the
// row is not of that form: a CFA from another register or an expression, a return address or rbp
// in a register, by expression or undefined (a thread's first frame), an expression for any
// register, a signal frame, an encoding or opcode not handled here. What it answers must be what a
// libunwind step answers (tests/unit/decoder/dwarf_cfi_test.cpp compares them over whole modules).
// `table_index` (from cfi_table_index, for the same file): where to search the .eh_frame_hdr table,
// which is then read in a few places rather than along a binary search through all of it.
// `first_frame`, when given, is set when the answer is false only because the row leaves the return
// address undefined (DW_CFA_undefined: glibc's clone3 and _start mark a thread's first frame so)
// while the CFA is rsp or rbp plus an offset, rbp stays or lies at a CFA offset and no register has
// an expression: a row whose libunwind step ends the stack (unw_step answers 0) whatever the stack
// holds.
// `cies`, when given (one per file, for every lookup in it): each CIE parsed and its initial
// instructions run once, not at every lookup (a few CIEs serve all of a file's FDEs).
class CieMemo;
bool cfi_rule_at(const ElfFile& elf, uint64_t vaddr, CfiRule& out, const PageIndex* table_index = nullptr,
                 bool* first_frame = nullptr, CieMemo* cies = nullptr);
PageIndex cfi_table_index(const ElfFile& elf);

class CieMemo {
public:
    CieMemo();
    ~CieMemo();
    CieMemo(const CieMemo&) = delete;
    CieMemo& operator=(const CieMemo&) = delete;
    struct Entry;   // dwarf_cfi.cpp
    Entry& at(uint64_t cie_vaddr, bool& added);

private:
    std::unordered_map<uint64_t, std::unique_ptr<Entry>> entries_;   // by the CIE's address
};

}  // namespace sf::detail
