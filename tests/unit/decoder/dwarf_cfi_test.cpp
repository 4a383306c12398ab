// The unwind rules read from a module's CFI without libunwind (decoder/src/dwarf_cfi.hpp) must step
// exactly as a libunwind step does: compared over the FDEs of this process's own modules (libc,
// libstdc++, libm, libunwind, this test binary), at many instructions of each, on a stack of known
// words with rbp inside it.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstring>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "dwarf_cfi.hpp"
#include "native_unwinder.hpp"
#include "stack_view.hpp"
#include "stackfrag/base/elf_file.hpp"
#include "synthetic.hpp"

using namespace sf;

namespace {

constexpr uint64_t kSp = 0x7ff0'0000'0000ull;
constexpr size_t kStackWords = 8192;   // 64 KB: the largest frames' slots lie inside it

// Every word distinct and non-zero, so that a step reading another slot gives another answer.
std::vector<uint8_t> marked_stack() {
    std::vector<uint8_t> bytes(kStackWords * 8);
    for (size_t i = 0; i < kStackWords; ++i) {
        const uint64_t word = 0x5500'0000'0000ull + i * 0x10 + 1;
        std::memcpy(bytes.data() + i * 8, &word, 8);
    }
    return bytes;
}

// The start addresses of the FDEs in a module's .eh_frame_hdr table (ELF virtual addresses).
std::vector<uint64_t> fde_starts(const ElfFile& elf) {
    std::vector<uint64_t> out;
    uint8_t hdr[12];
    if (!elf.read_vaddr(elf.eh_frame_hdr_vaddr(), hdr, sizeof hdr) || hdr[0] != 1 || hdr[3] != 0x3b) return out;
    uint32_t count = 0;
    std::memcpy(&count, hdr + 8, 4);
    for (uint32_t i = 0; i < count; ++i) {
        int32_t loc = 0;
        if (!elf.read_vaddr(elf.eh_frame_hdr_vaddr() + 12 + uint64_t{i} * 8, &loc, 4)) break;
        out.push_back(elf.eh_frame_hdr_vaddr() + static_cast<uint64_t>(int64_t{loc}));
    }
    return out;
}

// This process's modules, and two unwinders over them: one that reads rules from the CFI, one that
// asks libunwind only (the reference the first must agree with).
struct SelfModules {
    CodeMap map;
    SelfModules() {
        for (const auto& m : test::self_modules()) map.apply(Event{m});
    }
};
struct SelfUnwinders : SelfModules {
    detail::NativeUnwinder with_cfi{map, true, false};
    detail::NativeUnwinder libunwind_only{map, true, false};
    SelfUnwinders() { libunwind_only.set_cfi_rules(false); }
};

}  // namespace

TEST_CASE("an unwind rule read from the CFI steps as libunwind does, over whole modules", "[decoder][native]") {
    SelfUnwinders unwinders;
    const CodeMap& map = unwinders.map;
    detail::NativeUnwinder& with_cfi = unwinders.with_cfi;
    detail::NativeUnwinder& libunwind_only = unwinders.libunwind_only;
    const std::vector<uint8_t> stack = marked_stack();
    const detail::StackView view(kSp, stack.data(), stack.size());
    const detail::StackView short_view(kSp, stack.data(), 24);
    size_t cut_by_rule = 0;

    // Each file once, at its first executable mapping.
    std::map<std::string, const ModuleMap*> files;
    for (const ModuleMap& m : map.modules()) files.emplace(m.path, &m);
    size_t compared = 0, modules = 0;
    for (const auto& [path, mapping] : files) {
        ElfFile elf(path);
        uint64_t bias = 0;
        if (!elf.valid() || !elf.bias_for(mapping->begin, mapping->file_offset, bias)) continue;
        std::vector<uint64_t> starts = fde_starts(elf);
        if (starts.empty()) continue;
        ++modules;
        // Up to 1500 FDEs spread over the table; in each, every byte of its first 24 and 8 more
        // spread up to the next FDE's start (prologues change the rule at every push).
        const size_t stride = std::max<size_t>(1, starts.size() / 1500);
        std::set<uint64_t> ips;
        for (size_t i = 0; i + 1 < starts.size(); i += stride) {
            const uint64_t begin = starts[i], end = starts[i + 1];
            if (end <= begin || end - begin > (1u << 20)) continue;
            for (uint64_t a = begin; a < end && a < begin + 24; ++a) ips.insert(a);
            for (uint64_t k = 1; k <= 8; ++k) ips.insert(begin + (end - begin) * k / 9);
            ips.insert(end - 1);
        }
        for (uint64_t vaddr : ips) {
            const uint64_t pc = vaddr + bias;
            if (!map.module_at(pc)) continue;
            for (uint64_t fp : {kSp + 1024, kSp + 40}) {
                detail::NativeStep a, b;
                const auto got = with_cfi.step_dwarf(view, pc, kSp, fp, true, a);
                const auto want = libunwind_only.step_dwarf(view, pc, kSp, fp, true, b);
                INFO(path << " vaddr 0x" << std::hex << vaddr << " fp 0x" << fp);
                REQUIRE(static_cast<int>(got) == static_cast<int>(want));
                if (want == detail::NativeUnwinder::Outcome::kStepped) {
                    REQUIRE(a.pc == b.pc);
                    REQUIRE(a.sp == b.sp);
                    REQUIRE(a.fp == b.fp);
                }
                ++compared;
            }
            // The same ip on a copy of the stack cut 24 bytes above rsp: a rule whose return address
            // lies above the cut answers kBeyondFragment without libunwind, as libunwind does with it.
            detail::NativeStep a, b;
            const uint64_t libunwind_before = with_cfi.libunwind_steps();
            const uint64_t beyond_before = with_cfi.rule_steps_beyond();
            const auto got = with_cfi.step_dwarf(short_view, pc, kSp, kSp + 1024, true, a);
            const auto want = libunwind_only.step_dwarf(short_view, pc, kSp, kSp + 1024, true, b);
            INFO(path << " vaddr 0x" << std::hex << vaddr << " on the cut stack");
            REQUIRE(static_cast<int>(got) == static_cast<int>(want));
            if (want == detail::NativeUnwinder::Outcome::kStepped) {
                REQUIRE(a.pc == b.pc);
                REQUIRE(a.sp == b.sp);
                REQUIRE(a.fp == b.fp);
            }
            if (with_cfi.rule_steps_beyond() != beyond_before) {
                CHECK(got == detail::NativeUnwinder::Outcome::kBeyondFragment);
                CHECK(with_cfi.libunwind_steps() == libunwind_before);
                ++cut_by_rule;
            }
        }
    }
    INFO("compared " << compared << " steps in " << modules << " modules; rules from the CFI "
                     << with_cfi.cfi_rules_learned() << ", steps by rule " << with_cfi.rule_steps());
    WARN("compared " << compared << " steps in " << modules << " modules; rules from the CFI "
                      << with_cfi.cfi_rules_learned() << ", steps by rule " << with_cfi.rule_steps());
    CHECK(modules >= 3);
    CHECK(compared >= 20000);
    // Most rows are of the simple form: most steps came from the CFI's rules, none from libunwind_only's.
    CHECK(with_cfi.cfi_rules_learned() * 10 >= compared / 2 * 8);
    CHECK(with_cfi.rule_steps() * 10 >= compared * 8);
    CHECK(libunwind_only.cfi_rules_learned() == 0);
    CHECK(cut_by_rule * 10 >= compared / 2 / 2);   // most frames' return address lies above rsp + 24
}

TEST_CASE("the CFI table's page index and the CIE memo find the rows a search of the whole table finds", "[decoder][native]") {
    std::map<std::string, const ModuleMap*> files;
    const std::vector<ModuleMap> modules = test::self_modules();
    for (const ModuleMap& m : modules) files.emplace(m.path, &m);
    size_t compared = 0, found = 0;
    for (const auto& [path, mapping] : files) {
        ElfFile elf(path);
        const std::vector<uint64_t> starts = fde_starts(elf);
        if (starts.empty()) continue;
        const PageIndex index = detail::cfi_table_index(elf);
        REQUIRE(index.usable());
        detail::CieMemo cies;   // each CIE parsed and run once for the whole file
        // Each FDE's first bytes, its middle and last byte, and the gaps between FDEs.
        const size_t stride = std::max<size_t>(1, starts.size() / 3000);
        for (size_t i = 0; i + 1 < starts.size(); i += stride) {
            const uint64_t begin = starts[i], end = starts[i + 1];
            for (uint64_t vaddr : {begin - 1, begin, begin + 1, begin + 4, begin + (end - begin) / 2, end - 1}) {
                detail::CfiRule with{}, without{};
                bool first_with = false, first_without = false;
                const bool a = detail::cfi_rule_at(elf, vaddr, with, &index, &first_with, &cies);
                const bool b = detail::cfi_rule_at(elf, vaddr, without, nullptr, &first_without);
                INFO(path << " vaddr 0x" << std::hex << vaddr);
                REQUIRE(a == b);
                REQUIRE(first_with == first_without);
                if (b) {
                    REQUIRE(with == without);
                    ++found;
                }
                ++compared;
            }
        }
    }
    CHECK(compared >= 10000);
    CHECK(found * 2 >= compared);
}

TEST_CASE("a rule read from the CFI is forgotten when another module is mapped at its ip", "[decoder][native]") {
    CodeMap map;
    for (const auto& m : test::self_modules()) map.apply(Event{m});
    detail::NativeUnwinder unwinder(map, true, false);
    const std::vector<uint8_t> stack = marked_stack();
    const detail::StackView view(kSp, stack.data(), stack.size());
    // This function's first instruction: the CFA is rsp + 8, the return address at [rsp].
    const uint64_t pc = reinterpret_cast<uint64_t>(&marked_stack);
    const ModuleMap* mapping = map.module_at(pc);
    REQUIRE(mapping != nullptr);
    detail::NativeStep step;
    REQUIRE(unwinder.step_dwarf(view, pc, kSp, kSp + 1024, true, step) == detail::NativeUnwinder::Outcome::kStepped);
    CHECK(unwinder.cfi_rules_learned() == 1);
    CHECK(step.sp == kSp + 8);
    uint64_t ra = 0;
    REQUIRE(view.read(kSp, ra));
    CHECK(step.pc == ra);
    // The same range now holds a file that does not exist: no unwind table is known there any
    // more, and the step is libunwind's guess without one, as a new unwinder's is.
    ModuleMap gone = *mapping;
    gone.path = "/nonexistent/libgone.so";
    map.apply(Event{gone});
    detail::NativeStep fresh;
    const auto outcome = unwinder.step_dwarf(view, pc, kSp, kSp + 1024, true, step);
    CHECK(outcome == detail::NativeUnwinder(map, true, false).step_dwarf(view, pc, kSp, kSp + 1024, true, fresh));
    CHECK((outcome != detail::NativeUnwinder::Outcome::kStepped || (step.sp == fresh.sp && step.pc == fresh.pc)));
    CHECK((outcome != detail::NativeUnwinder::Outcome::kStepped || step.sp != kSp + 8));
    CHECK(unwinder.rule_steps() == 1);
    CHECK(unwinder.cfi_rules_learned() == 1);
}

TEST_CASE("a native frame's name found by its function's range is the name a fresh lookup gives", "[decoder][native]") {
    // symbol() files each name under its function's range; a pc seen for the first time in a
    // function met before gets its name from there. Every 7th byte over this binary's and libc's
    // first functions, and the gaps between them: the same answers as an unwinder that looks each
    // pc up afresh.
    CodeMap map;
    for (const auto& m : test::self_modules()) map.apply(Event{m});
    detail::NativeUnwinder warm(map, false, true);
    size_t compared = 0;
    for (uint64_t pc : {reinterpret_cast<uint64_t>(&marked_stack), reinterpret_cast<uint64_t>(&std::memcmp)}) {
        const ModuleMap* mapping = map.module_at(pc);
        REQUIRE(mapping != nullptr);
        const uint64_t from = std::max(mapping->begin, pc - 0x4000), to = std::min(mapping->end, pc + 0x4000);
        for (uint64_t a = from; a < to; a += 7) {
            const std::string name = warm.symbol(a).str();
            INFO(std::hex << "0x" << a);
            CHECK(name == detail::NativeUnwinder(map, false, true).symbol(a).str());
            ++compared;
        }
    }
    CHECK(compared > 4000);
    CHECK(warm.symbol(reinterpret_cast<uint64_t>(&marked_stack)).str().find("marked_stack") != std::string::npos);
}

TEST_CASE("a row that marks a thread's first frame ends the stack without libunwind once it did so", "[decoder][native]") {
    SelfUnwinders unwinders;
    const CodeMap& map = unwinders.map;
    detail::NativeUnwinder& with_cfi = unwinders.with_cfi;
    detail::NativeUnwinder& libunwind_only = unwinders.libunwind_only;
    const std::vector<uint8_t> stack = marked_stack();
    const detail::StackView view(kSp, stack.data(), stack.size());
    // Every such row's ips in this process's modules (glibc's clone3 and _start have one each).
    std::map<std::string, const ModuleMap*> files;
    for (const ModuleMap& m : map.modules()) files.emplace(m.path, &m);
    std::vector<uint64_t> pcs;
    for (const auto& [path, mapping] : files) {
        ElfFile elf(path);
        uint64_t bias = 0;
        if (!elf.valid() || !elf.bias_for(mapping->begin, mapping->file_offset, bias)) continue;
        const std::vector<uint64_t> starts = fde_starts(elf);
        const PageIndex index = detail::cfi_table_index(elf);
        for (size_t i = 0; i + 1 < starts.size(); ++i) {
            if (starts[i + 1] <= starts[i] || starts[i + 1] - starts[i] > 4096) continue;
            for (uint64_t vaddr = starts[i]; vaddr < starts[i + 1]; ++vaddr) {
                detail::CfiRule rule{};
                bool first_frame = false;
                if (!detail::cfi_rule_at(elf, vaddr, rule, &index, &first_frame) && first_frame &&
                    map.module_at(vaddr + bias)) {
                    pcs.push_back(vaddr + bias);
                }
            }
        }
    }
    INFO("first-frame rows' ips: " << pcs.size());
    REQUIRE(!pcs.empty());
    for (uint64_t pc : pcs) {
        INFO("pc 0x" << std::hex << pc);
        for (uint64_t fp : {kSp + 1024, kSp + 40, uint64_t{0}}) {
            detail::NativeStep a, b;
            const uint64_t libunwind_before = with_cfi.libunwind_steps();
            const auto got = with_cfi.step_dwarf(view, pc, kSp + (fp & 0xff), fp, true, a);
            const auto want = libunwind_only.step_dwarf(view, pc, kSp + (fp & 0xff), fp, true, b);
            REQUIRE(want == detail::NativeUnwinder::Outcome::kEnd);
            REQUIRE(got == want);
            // The first step at the ip was libunwind's; every later one is the rule's.
            if (fp != kSp + 1024) CHECK(with_cfi.libunwind_steps() == libunwind_before);
        }
    }
    CHECK(with_cfi.rule_ends() == 2 * pcs.size());
}
