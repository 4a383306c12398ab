#include "native_unwinder.hpp"

#include "stackfrag/base/elf_file.hpp"
#include "dwarf_cfi.hpp"

#include <cxxabi.h>
#include <libunwind.h>
#include <ucontext.h>

#include <algorithm>
#include <cstddef>
#include <cstdlib>
#include <climits>
#include <cstring>
#include <optional>
#include <unordered_map>
#include <vector>

// libunwind 1.6 has no public "find proc info in this table" call; this is the exported routine its
// own ptrace and coredump accessors use to search an .eh_frame_hdr binary-search table.
extern "C" int _Ux86_64_dwarf_search_unwind_table(unw_addr_space_t as, unw_word_t ip, unw_dyn_info_t* di,
                                                  unw_proc_info_t* pi, int need_unwind_info, void* arg);

namespace sf::detail {

// A module file (base/elf_file.hpp) with its demangled symbol names.
struct NativeUnwinder::Module {
    ElfFile elf;
    // The name of a frame in code no symbol covers (glibc's start_thread and clone3 in a stripped
    // libc): the file, "[libc.so.6]", as perf shows it, rather than "[unknown]".
    InternedName label;
    std::unordered_map<uint64_t, InternedName> demangled;   // cache per symbol address

    // Where to search the .eh_frame_hdr table (dwarf_cfi.hpp), made at the first CFI lookup.
    const PageIndex& cfi_pages() {
        if (!cfi_pages_built) {
            cfi_pages_ = cfi_table_index(elf);
            cfi_pages_built = true;
        }
        return cfi_pages_;
    }
    PageIndex cfi_pages_;
    bool cfi_pages_built = false;
    CieMemo cies;   // the file's CIEs, parsed and run once

    // The name, and the range [begin, until) of addresses with the same answer.
    std::optional<InternedName> symbol_at(uint64_t vaddr, uint64_t& begin, uint64_t& until) {
        const std::optional<ElfFile::Function> function = elf.function_at(vaddr);
        if (!function) return std::nullopt;
        begin = function->vaddr;
        until = function->until;
        auto cached = demangled.find(function->vaddr);
        if (cached != demangled.end()) return cached->second;
        std::string name(function->name);
        int status = -1;
        char* pretty = abi::__cxa_demangle(name.c_str(), nullptr, nullptr, &status);
        if (status == 0 && pretty) name = pretty;
        std::free(pretty);
        return demangled.emplace(function->vaddr, InternedName(name)).first->second;
    }
};

namespace {
// DWARF pointer encodings (LSB .eh_frame_hdr).
constexpr uint8_t kEhPeUdata4 = 0x03;
constexpr uint8_t kEhPeSdata4 = 0x0b;
constexpr uint8_t kEhPePcrel = 0x10;
constexpr uint8_t kEhPeDatarel = 0x30;

bool fits_int32(int64_t v) { return v > INT32_MIN && v <= INT32_MAX; }   // INT32_MIN is Rule::kFar
int32_t near_or_far(int64_t v) { return fits_int32(v) ? static_cast<int32_t>(v) : INT32_MIN; }
}  // namespace

// The accessors are static members' friends in spirit: they reach the unwinder through `arg`.
struct UnwindAccess {
    NativeUnwinder* self;
    const StackView* view;
    uint64_t pc, sp, fp;
    NativeUnwinder::Module* (*module_for)(NativeUnwinder*, uint64_t, uint64_t&);
    bool (*read_module_data)(NativeUnwinder*, uint64_t, uint64_t&);
    // The module whose unwind table is being searched: its .eh_frame_hdr and .eh_frame usually lie
    // in a read-only segment that no (executable-only) ModuleMap covers.
    NativeUnwinder::Module* table_module = nullptr;
    uint64_t table_bias = 0;
    bool missed_beyond_end = false;   // a read above the fragment's end failed
    // No unwind table row covers the ip (code built without unwind tables): libunwind then guesses
    // from rbp, and its "no caller" is no evidence of the thread's first frame.
    bool no_unwind_info = false;
    // The top frame's rbx, for step_from_top; a step from a frame further down does not know it.
    uint64_t bx = 0;
    bool bx_known = false;
};

namespace {

int search_proc_info(unw_addr_space_t as, unw_word_t ip, unw_proc_info_t* pi, int need_unwind_info, void* arg) {
    auto* a = static_cast<UnwindAccess*>(arg);
    uint64_t bias = 0;
    NativeUnwinder::Module* m = a->module_for(a->self, ip, bias);
    if (!m || m->elf.eh_frame_hdr_vaddr() == 0) return -UNW_ENOINFO;
    a->table_module = m;
    a->table_bias = bias;
    // .eh_frame_hdr: version, eh_frame_ptr_enc, fde_count_enc, table_enc, eh_frame_ptr, fde_count, table.
    uint8_t hdr[4];
    if (!m->elf.read_vaddr(m->elf.eh_frame_hdr_vaddr(), hdr, 4) || hdr[0] != 1) return -UNW_ENOINFO;
    // Only the encodings every toolchain emits: eh_frame_ptr pcrel|sdata4, count udata4,
    // table datarel|sdata4.
    if (hdr[1] != (kEhPePcrel | kEhPeSdata4) || hdr[2] != kEhPeUdata4 ||
        hdr[3] != (kEhPeDatarel | kEhPeSdata4)) {
        return -UNW_ENOINFO;
    }
    uint32_t fde_count = 0;
    if (!m->elf.read_vaddr(m->elf.eh_frame_hdr_vaddr() + 8, &fde_count, 4) || fde_count == 0) return -UNW_ENOINFO;
    unw_dyn_info_t di;
    std::memset(&di, 0, sizeof(di));
    di.format = UNW_INFO_FORMAT_REMOTE_TABLE;
    di.start_ip = 0;
    di.end_ip = ~unw_word_t{0};
    di.gp = 0;
    di.u.rti.name_ptr = 0;
    di.u.rti.segbase = m->elf.eh_frame_hdr_vaddr() + bias;
    di.u.rti.table_len = (uint64_t{fde_count} * 8) / sizeof(unw_word_t);
    di.u.rti.table_data = m->elf.eh_frame_hdr_vaddr() + 12 + bias;
    return _Ux86_64_dwarf_search_unwind_table(as, ip, &di, pi, need_unwind_info, arg);
}

int find_proc_info(unw_addr_space_t as, unw_word_t ip, unw_proc_info_t* pi, int need_unwind_info, void* arg) {
    const int found = search_proc_info(as, ip, pi, need_unwind_info, arg);
    if (found != 0) static_cast<UnwindAccess*>(arg)->no_unwind_info = true;
    return found;
}

void put_unwind_info(unw_addr_space_t, unw_proc_info_t*, void*) {
    // Table-format unwind info is owned and freed by libunwind itself.
}

int get_dyn_info_list_addr(unw_addr_space_t, unw_word_t*, void*) { return -UNW_ENOINFO; }

int access_mem(unw_addr_space_t, unw_word_t addr, unw_word_t* val, int write, void* arg) {
    if (write) return -UNW_EINVAL;
    auto* a = static_cast<UnwindAccess*>(arg);
    uint64_t v = 0;
    if (a->view->read(addr, v)) {
        *val = v;
        return 0;
    }
    uint64_t bias = 0;
    NativeUnwinder::Module* m = a->module_for(a->self, addr, bias);
    if (m && m->elf.read_vaddr(addr - bias, &v, sizeof(v))) {
        *val = v;
        return 0;
    }
    if (a->table_module && a->table_module->elf.read_vaddr(addr - a->table_bias, &v, sizeof(v))) {
        *val = v;
        return 0;
    }
    // A row from libunwind's cache comes without a find_proc_info call, so without table_module;
    // yet a row with DWARF expressions (glibc's signal trampoline, __restore_rt) reads them from
    // .eh_frame when it is applied. Found by address instead, the step no longer depends on what
    // earlier steps left in the cache.
    if (a->read_module_data(a->self, addr, v)) {
        *val = v;
        return 0;
    }
    if (addr >= a->view->end()) a->missed_beyond_end = true;
    return -UNW_EINVAL;
}

int access_reg(unw_addr_space_t, unw_regnum_t reg, unw_word_t* val, int write, void* arg) {
    if (write) return -UNW_EINVAL;
    auto* a = static_cast<UnwindAccess*>(arg);
    switch (reg) {
        case UNW_X86_64_RIP: *val = a->pc; return 0;
        case UNW_X86_64_RSP: *val = a->sp; return 0;
        case UNW_X86_64_RBP: *val = a->fp; return 0;
        case UNW_X86_64_RBX:
            if (!a->bx_known) return -UNW_EBADREG;
            *val = a->bx;
            return 0;
        default: return -UNW_EBADREG;
    }
}

int access_fpreg(unw_addr_space_t, unw_regnum_t, unw_fpreg_t*, int, void*) { return -UNW_EBADREG; }
int resume(unw_addr_space_t, unw_cursor_t*, void*) { return -UNW_EINVAL; }
int get_proc_name(unw_addr_space_t, unw_word_t, char*, size_t, unw_word_t*, void*) { return -UNW_ENOINFO; }

unw_accessors_t accessors = {find_proc_info, put_unwind_info, get_dyn_info_list_addr, access_mem,
                             access_reg,     access_fpreg,    resume,                 get_proc_name};

}  // namespace

NativeUnwinder::NativeUnwinder(const CodeMap& map, bool use_dwarf, bool symbolize)
    : map_(map), use_dwarf_(use_dwarf), symbolize_(symbolize) {}

NativeUnwinder::~NativeUnwinder() {
    if (address_space_) unw_destroy_addr_space(static_cast<unw_addr_space_t>(address_space_));
}

void NativeUnwinder::refresh() {
    if (generation_ == map_.modules_generation()) return;
    generation_ = map_.modules_generation();
    by_mapping_.assign(map_.modules().size(), MappingAnswer{});
    symbol_cache_.assign(kSymbolCacheSize, SymbolAnswer{});
    rules_.assign(kRuleCacheSize, Rule{});
    callers_.assign(kCallerSets * kCallerWays, CallerFacts{});
    symbol_ranges_.clear();
    cfi_rows_.clear();
    if (address_space_) unw_flush_cache(static_cast<unw_addr_space_t>(address_space_), 0, 0);
}

NativeUnwinder::Module* NativeUnwinder::module_for(uint64_t pc, uint64_t& load_bias) {
    refresh();
    const ModuleMap* mapping = map_.module_at(pc);
    if (!mapping) return nullptr;
    MappingAnswer& answer = by_mapping_[static_cast<size_t>(mapping - map_.modules().data())];
    if (!answer.known) {
        answer.known = true;
        // A file, or code the stream carries itself (the vDSO).
        const bool in_stream = !mapping->image.empty();
        if (!in_stream && (mapping->path.empty() || mapping->path[0] != '/')) return nullptr;
        auto it = modules_.find(mapping->path);
        if (it == modules_.end()) {
            auto m = std::make_unique<Module>();
            m->elf = in_stream ? ElfFile(mapping->image) : ElfFile(mapping->path);
            std::string label;
            if (in_stream) {
                label = mapping->path;   // "[vdso]", as perf shows it
            } else {
                label.assign(1, '[');
                label.append(mapping->path, mapping->path.rfind('/') + 1).push_back(']');
            }
            m->label = InternedName(label);
            it = modules_.emplace(mapping->path, std::move(m)).first;
        }
        Module* m = it->second.get();
        if (!m->elf.valid() || !m->elf.bias_for(mapping->begin, mapping->file_offset, answer.bias)) return nullptr;
        // Another build at the same path (a replay after an upgrade or on another machine): its
        // unwind tables and symbols would name and walk the wrong code.
        if (!mapping->build_id.empty() && m->elf.build_id() != mapping->build_id) {
            if (std::find(changed_.begin(), changed_.end(), mapping->path) == changed_.end()) {
                changed_.push_back(mapping->path);
            }
            answer.changed = true;
            return nullptr;
        }
        answer.module = m;
    }
    load_bias = answer.bias;
    return answer.module;
}

bool NativeUnwinder::in_changed_module(uint64_t pc) {
    uint64_t bias = 0;
    if (module_for(pc, bias) != nullptr) return false;
    const ModuleMap* mapping = map_.module_at(pc);
    return mapping != nullptr && by_mapping_[static_cast<size_t>(mapping - map_.modules().data())].changed;
}

// Most native steps leave a frame through a return address seen before: the same ip, so the same
// DWARF rule (CFA = rsp or rbp + offset, the return address and the saved rbp at fixed offsets
// from the CFA), which libunwind finds again each time, locks and all. A rule is used without
// libunwind once an ip's second step confirmed what its first one showed, with a second libunwind
// step from an rbp 8 bytes higher telling which register the CFA is computed from; an ip whose
// steps do not fit such a rule (expressions, signal frames, another register) always goes to
// libunwind, and so does any step whose slots lie outside the fragment, whose return address is 0,
// or that would not move (libunwind's own end and loop checks).
NativeUnwinder::Outcome NativeUnwinder::step_dwarf(const StackView& view, uint64_t pc, uint64_t sp, uint64_t fp, bool top,
                                NativeStep& out) {
    if (!use_dwarf_) return Outcome::kFailed;
    refresh();
    // A return address may be the first byte after a call to a noreturn function: look up the
    // unwind row of the call instruction itself.
    const uint64_t ip = top ? pc : pc - 1;
    Rule& rule = rules_[(ip ^ (ip >> 13)) & (kRuleCacheSize - 1)];
    if (rule.ip == ip && rule.state == Rule::kSignal) return step_signal_frame(view, ip - rule.signal_back, sp, fp, out);
    if (cfi_rules_ && !(rule.ip == ip && (rule.state == Rule::kKnown || rule.state == Rule::kNone || rule.cfi_tried))) {
        learn_from_cfi(ip, rule);
    }
    if (rule.ip == ip && rule.state == Rule::kEnd) {
        ++rule_ends_;
        return Outcome::kEnd;
    }
    if (rule.ip == ip && rule.state == Rule::kKnown) {
        if (step_by_rule(view, ip, sp, fp, rule.cfa_from_fp, rule.cfa_offset, rule.ra_offset, rule.fp_saved,
                         rule.fp_offset, out)) {
            ++rule_steps_;
            return Outcome::kStepped;
        }
        const uint64_t ra_slot = (rule.cfa_from_fp ? fp : sp) + static_cast<uint64_t>(int64_t{rule.cfa_offset}) +
                                 static_cast<uint64_t>(int64_t{rule.ra_offset});
        // The return address's slot lies above the fragment (a stack deeper than its copy, the
        // agent's own threads' above all): the first word a libunwind step reads by this rule is
        // that slot, and it fails there, kBeyondFragment, as its accessor reports a read past the
        // fragment's end. Answered so without the libunwind step (~20 k instructions and its locks).
        if (ra_slot >= view.end()) {
            ++rule_steps_beyond_;
            return Outcome::kBeyondFragment;
        }
    }
    // Only here, on the slow path: a changed module's ips never get a rule.
    if (in_changed_module(ip)) return Outcome::kModuleChanged;
    const bool settled = rule.ip == ip && (rule.state == Rule::kNone || rule.state == Rule::kKnown);
    const std::optional<uint8_t> signal_back = settled ? std::nullopt : sigreturn_trampoline(pc, top);
    if (signal_back) {
        // Its CFA is the interrupted frame's rsp, read from the context: no fixed offsets to learn.
        const bool cfi_tried = rule.ip == ip && rule.cfi_tried;
        rule = Rule{};
        rule.ip = ip;
        rule.cfi_tried = cfi_tried;
        rule.state = Rule::kSignal;
        rule.signal_back = *signal_back;
        return step_signal_frame(view, ip - rule.signal_back, sp, fp, out);
    }
    Observed seen;
    const Outcome outcome = libunwind_step(view, ip, sp, fp, out, &seen);
    // A thread's first frame (clone3, _start): libunwind ends the stack there by the row alone, and
    // every non-Java thread's walk ends so; without this, each such walk's last step went through
    // libunwind, locks, sigprocmask and all.
    if (outcome == Outcome::kEnd && rule.ip == ip && rule.first_frame) {
        rule.state = Rule::kEnd;
        return outcome;
    }
    if (outcome != Outcome::kStepped || settled) return outcome;
    // What the rule would say: the slots must hold what libunwind read from them. Slots outside the
    // fragment (libunwind then reads module files) say nothing either way.
    uint64_t ra = 0, caller_fp = fp;
    if (seen.ra_slot == 0 || !view.read(seen.ra_slot, ra) || (seen.fp_slot != 0 && !view.read(seen.fp_slot, caller_fp))) {
        return outcome;
    }
    const bool fits = ra == out.pc && out.sp == seen.cfa && caller_fp == out.fp;
    const int64_t ra_offset = static_cast<int64_t>(seen.ra_slot - seen.cfa);
    const int64_t fp_offset = static_cast<int64_t>(seen.fp_slot - seen.cfa);
    if (rule.ip != ip || rule.state == Rule::kEmpty) {   // first seen (or the slot held another ip)
        const bool cfi_tried = rule.ip == ip && rule.cfi_tried;
        const bool first_frame = rule.ip == ip && rule.first_frame;
        rule = Rule{};
        rule.ip = ip;
        rule.cfi_tried = cfi_tried;
        rule.first_frame = first_frame;
        const bool offsets_fit = fits_int32(ra_offset) && (seen.fp_slot == 0 || fits_int32(fp_offset));
        rule.state = fits && offsets_fit ? Rule::kSeenOnce : Rule::kNone;
        rule.ra_offset = offsets_fit ? static_cast<int32_t>(ra_offset) : 0;
        rule.fp_saved = seen.fp_slot != 0;
        rule.fp_offset = offsets_fit && rule.fp_saved ? static_cast<int32_t>(fp_offset) : 0;
        rule.sp_offset = near_or_far(static_cast<int64_t>(seen.cfa - sp));
        rule.fp_distance = near_or_far(static_cast<int64_t>(seen.cfa - fp));
        return outcome;
    }
    // Seen once before: the same offsets, and the probe says which register the CFA follows.
    bool known = fits && rule.ra_offset == ra_offset && rule.fp_saved == (seen.fp_slot != 0) &&
                 (!rule.fp_saved || rule.fp_offset == fp_offset);
    if (known) {
        NativeStep probe;
        Observed probed;
        known = libunwind_step(view, ip, sp, fp + 8, probe, &probed) == Outcome::kStepped &&
                probed.ra_slot - probed.cfa == seen.ra_slot - seen.cfa &&
                (probed.fp_slot != 0) == (seen.fp_slot != 0) &&
                (probed.fp_slot == 0 || probed.fp_slot - probed.cfa == seen.fp_slot - seen.cfa);
        if (known && probed.cfa == seen.cfa + 8 && rule.fp_distance != Rule::kFar &&
            rule.fp_distance == static_cast<int64_t>(seen.cfa - fp)) {
            rule.cfa_from_fp = true;
            rule.cfa_offset = rule.fp_distance;
        } else if (known && probed.cfa == seen.cfa && rule.sp_offset != Rule::kFar &&
                   rule.sp_offset == static_cast<int64_t>(seen.cfa - sp)) {
            rule.cfa_from_fp = false;
            rule.cfa_offset = rule.sp_offset;
        } else {
            known = false;
        }
    }
    rule.state = known ? Rule::kKnown : Rule::kNone;
    return outcome;
}

// The kernel returns from a signal handler into the restorer the handler was installed with:
// glibc's __restore_rt (`mov $15, %rax; syscall`, rt_sigreturn), musl's (`mov $15, %eax; syscall`).
// A return address there, or a top pc on either instruction, is such a trampoline. So is a top pc
// right past the syscall: a sample taken inside rt_sigreturn, before it restored the context (the
// kernel reports the instruction after a syscall). The trampoline's unwind rows end at its syscall,
// so libunwind steps from the syscall instead; sp is the same all through. (Seen under validate,
// whose SIGPROF handler returns there 1,000 times a second: libunwind found no row, a rescan took
// a stale return address, and the walk failed as bad_return_address.)
// The kernel's rt_sigframe (Linux x86-64): the handler returns into the trampoline, which finds
// the ucontext at its sp and hands it to rt_sigreturn; its mcontext begins with the gregs array.
uint64_t signal_context_gregs(uint64_t trampoline_sp) {
    return trampoline_sp + offsetof(ucontext_t, uc_mcontext) + offsetof(mcontext_t, gregs);
}

uint64_t signal_context_greg_address(uint64_t context_gregs, int reg) {
    return context_gregs + sizeof(greg_t) * static_cast<uint64_t>(reg);
}

// Out of the trampoline by its row, which reads the interrupted registers from the context at sp.
NativeUnwinder::Outcome NativeUnwinder::step_signal_frame(const StackView& view, uint64_t ip, uint64_t sp, uint64_t fp,
                                                          NativeStep& out) {
    const Outcome outcome = libunwind_step(view, ip, sp, fp, out, nullptr);
    out.interrupted = outcome == Outcome::kStepped;
    if (out.interrupted) out.context_gregs = signal_context_gregs(sp);
    return outcome;
}

std::optional<uint8_t> NativeUnwinder::sigreturn_trampoline(uint64_t pc, bool top) {
    static constexpr uint8_t kGlibc[] = {0x48, 0xc7, 0xc0, 0x0f, 0x00, 0x00, 0x00, 0x0f, 0x05};
    static constexpr uint8_t kMusl[] = {0xb8, 0x0f, 0x00, 0x00, 0x00, 0x0f, 0x05};
    uint64_t bias = 0;
    Module* m = module_for(pc, bias);
    if (!m) return std::nullopt;
    auto matches = [&](uint64_t at, const uint8_t* bytes, size_t n) {
        uint8_t code[sizeof kGlibc];
        return m->elf.read_vaddr(at - bias, code, n) && std::memcmp(code, bytes, n) == 0;
    };
    if (matches(pc, kGlibc, sizeof kGlibc) || matches(pc, kMusl, sizeof kMusl)) return 0;
    if (!top) return std::nullopt;
    constexpr uint8_t kSyscallBytes = 2;
    // Interrupted on the syscall instruction itself.
    if (matches(pc - 7, kGlibc, sizeof kGlibc) || matches(pc - 5, kMusl, sizeof kMusl)) return 0;
    if (matches(pc - sizeof kGlibc, kGlibc, sizeof kGlibc) || matches(pc - sizeof kMusl, kMusl, sizeof kMusl)) {
        return kSyscallBytes;
    }
    return std::nullopt;
}

// The module's CFI row for ip, read directly: most rows are of the form a Rule holds, and so the
// first step through an ip (a thread's ever-new top pcs in the JIT compilers' C++ code above all)
// needs no libunwind step either. A row of another form is left to libunwind and to what its steps
// show (cfi_tried).
void NativeUnwinder::learn_from_cfi(uint64_t ip, Rule& rule) {
    CfiRule cfi;
    bool found = false, first_frame = false;
    if (const CfiRule* known = cfi_rows_.find(ip)) {
        cfi = *known;
        found = true;
    } else {
        uint64_t bias = 0;
        Module* m = module_for(ip, bias);
        if (m && cfi_rule_at(m->elf, ip - bias, cfi, &m->cfi_pages(), &first_frame, &m->cies)) {
            found = true;
            const ModuleMap* mapping = map_.module_at(ip);
            cfi_rows_.add(std::max(cfi.row_begin + bias, mapping->begin), std::min(cfi.row_end + bias, mapping->end), ip, cfi);
        }
    }
    if (found && fits_int32(cfi.cfa_offset) && fits_int32(cfi.ra_offset) && fits_int32(cfi.fp_offset)) {
        rule = Rule{};
        rule.ip = ip;
        rule.state = Rule::kKnown;
        rule.cfa_from_fp = cfi.cfa_from_fp;
        rule.cfa_offset = static_cast<int32_t>(cfi.cfa_offset);
        rule.ra_offset = static_cast<int32_t>(cfi.ra_offset);
        rule.fp_saved = cfi.fp_saved;
        rule.fp_offset = static_cast<int32_t>(cfi.fp_offset);
        rule.from_cfi = true;
        ++cfi_rules_learned_;
        return;
    }
    if (rule.ip != ip) {
        rule = Rule{};
        rule.ip = ip;
    }
    rule.cfi_tried = true;
    rule.first_frame = first_frame;
}

void NativeUnwinder::learn_caller(uint64_t pc) {
    refresh();
    const uint64_t ip = pc - 1;
    const Rule& rule = rules_[(ip ^ (ip >> 13)) & (kRuleCacheSize - 1)];
    if (rule.ip != ip || rule.state != Rule::kKnown || !rule.from_cfi) return;
    CallerFacts facts;
    facts.pc = pc;
    facts.symbol = caller_symbol(pc);
    facts.cfa_offset = rule.cfa_offset;
    facts.ra_offset = rule.ra_offset;
    facts.fp_offset = rule.fp_offset;
    facts.cfa_from_fp = rule.cfa_from_fp;
    facts.fp_saved = rule.fp_saved;
    CallerFacts* set = &callers_[caller_set(pc) * kCallerWays];
    if (set[0].pc != pc) set[1] = set[0];   // the newer of the two stays first
    set[0] = facts;
}

bool NativeUnwinder::ensure_address_space() {
    if (address_space_) return true;
    unw_addr_space_t as = unw_create_addr_space(&accessors, 0);
    if (!as) {
        use_dwarf_ = false;
        return false;
    }
    // Cached rows make native-top samples about three times as fast to decode (bench_decode on
    // the 10 kHz demo: median 30 us uncached, 10-14 us cached).
    unw_set_caching_policy(as, UNW_CACHE_GLOBAL);
    address_space_ = as;
    return true;
}

UnwindAccess NativeUnwinder::access_for(const StackView& view, uint64_t pc, uint64_t sp, uint64_t fp) {
    return UnwindAccess{this, &view, pc, sp, fp,
                        [](NativeUnwinder* self, uint64_t addr, uint64_t& bias) { return self->module_for(addr, bias); },
                        [](NativeUnwinder* self, uint64_t addr, uint64_t& out) { return self->read_module_data(addr, out); }};
}

NativeUnwinder::Outcome NativeUnwinder::libunwind_step(const StackView& view, uint64_t ip, uint64_t sp, uint64_t fp,
                                                       NativeStep& out, Observed* observed) {
    if (!ensure_address_space()) return Outcome::kFailed;
    UnwindAccess access = access_for(view, ip, sp, fp);
    unw_cursor_t cursor;
    ++libunwind_steps_;
    if (unw_init_remote(&cursor, static_cast<unw_addr_space_t>(address_space_), &access) != 0) return Outcome::kFailed;
    const int stepped = unw_step(&cursor);
    if (stepped == 0) return access.no_unwind_info ? Outcome::kFailed : Outcome::kEnd;
    if (stepped < 0) return access.missed_beyond_end ? Outcome::kBeyondFragment : Outcome::kFailed;
    // No row for ip: libunwind stepped by its frame-pointer guess. The decoder makes that guess
    // itself, after the ones it can verify (a frameless leaf at the top).
    if (access.no_unwind_info) return Outcome::kFailed;
    unw_word_t npc = 0, nsp = 0, nfp = 0;
    if (unw_get_reg(&cursor, UNW_REG_IP, &npc) != 0 || unw_get_reg(&cursor, UNW_REG_SP, &nsp) != 0) return Outcome::kFailed;
    const bool fp_read = unw_get_reg(&cursor, UNW_X86_64_RBP, &nfp) == 0;
    if (!fp_read) nfp = fp;
    out = {npc, nsp, nfp};
    if (observed) {
        *observed = Observed{nsp, 0, 0};
        unw_save_loc_t ra{}, saved_fp{};
        const bool ra_in_memory = unw_get_save_loc(&cursor, UNW_X86_64_RIP, &ra) == 0 && ra.type == UNW_SLT_MEMORY;
        const bool fp_known = fp_read && unw_get_save_loc(&cursor, UNW_X86_64_RBP, &saved_fp) == 0;
        if (ra_in_memory && fp_known && saved_fp.type == UNW_SLT_MEMORY && saved_fp.u.addr != 0) {
            *observed = Observed{nsp, ra.u.addr, saved_fp.u.addr};
        } else if (ra_in_memory && fp_known && saved_fp.type == UNW_SLT_REG && saved_fp.u.regnum == UNW_X86_64_RBP) {
            *observed = Observed{nsp, ra.u.addr, 0};
        }
    }
    return Outcome::kStepped;
}

NativeUnwinder::Outcome NativeUnwinder::step_from_top(const StackView& view, const TopRegisters& top, uint64_t pc,
                                                      uint64_t sp, size_t max_frames, NativeStep& out) {
    if (!use_dwarf_ || in_changed_module(pc) || !ensure_address_space()) return Outcome::kFailed;
    UnwindAccess access = access_for(view, top.pc, top.sp, top.fp);
    access.bx = top.bx;
    access.bx_known = true;
    unw_cursor_t cursor;
    ++libunwind_steps_;
    if (unw_init_remote(&cursor, static_cast<unw_addr_space_t>(address_space_), &access) != 0) return Outcome::kFailed;
    for (size_t frame = 0; frame <= max_frames; ++frame) {
        unw_word_t ip = 0, csp = 0;
        if (unw_get_reg(&cursor, UNW_REG_IP, &ip) != 0 || unw_get_reg(&cursor, UNW_REG_SP, &csp) != 0 || csp > sp) {
            return Outcome::kFailed;
        }
        const bool here = ip == pc && csp == sp;
        if (!here && in_changed_module(ip)) return Outcome::kFailed;
        access.no_unwind_info = false;
        const int stepped = unw_step(&cursor);
        if (stepped < 0 && access.missed_beyond_end) return Outcome::kBeyondFragment;
        // A frame without a row (libunwind's rbp guess) is no evidence, on the way or here.
        if (stepped <= 0 || access.no_unwind_info) return Outcome::kFailed;
        if (here) {
            unw_word_t npc = 0, nsp = 0, nfp = 0;
            if (unw_get_reg(&cursor, UNW_REG_IP, &npc) != 0 || unw_get_reg(&cursor, UNW_REG_SP, &nsp) != 0 ||
                unw_get_reg(&cursor, UNW_X86_64_RBP, &nfp) != 0) {
                return Outcome::kFailed;
            }
            out = {npc, nsp, nfp};
            return Outcome::kStepped;
        }
    }
    return Outcome::kFailed;
}

bool NativeUnwinder::read_module_data(uint64_t address, uint64_t& out) {
    // A file's read-only segments (.eh_frame, .rodata) lie next to its executable one: below it
    // or above it, with no other file's mapping in between.
    const std::vector<ModuleMap>& modules = map_.modules();
    auto above = std::upper_bound(modules.begin(), modules.end(), address,
                                  [](uint64_t a, const ModuleMap& m) { return a < m.begin; });
    for (auto it : {above == modules.begin() ? modules.end() : std::prev(above), above}) {
        if (it == modules.end()) continue;
        uint64_t bias = 0;
        Module* m = module_for(it->begin, bias);
        if (m && m->elf.read_vaddr(address - bias, &out, sizeof(out))) return true;
    }
    return false;
}

// The `len` code bytes that end at `end` in its module's file, or null.
const uint8_t* NativeUnwinder::code_before(uint64_t end, uint64_t len) {
    uint64_t bias = 0;
    Module* m = module_for(end - 1, bias);
    if (m == nullptr || end - bias < len) return nullptr;
    uint64_t available = 0;
    const uint8_t* bytes = m->elf.bytes_at_vaddr(end - bias - len, available);
    return bytes != nullptr && available >= len ? bytes : nullptr;
}

bool NativeUnwinder::direct_call_into(uint64_t ret, uint64_t pc) {
    constexpr uint64_t kCallRel32 = 5;
    const uint8_t* call = code_before(ret, kCallRel32);
    if (call == nullptr || call[0] != 0xe8) return false;
    int32_t rel = 0;
    std::memcpy(&rel, call + 1, sizeof rel);
    const uint64_t target = ret + static_cast<uint64_t>(int64_t{rel});
    return target <= pc && pc - target < kLeafReach;
}

bool NativeUnwinder::call_ends_at(uint64_t ret) {
    if (const uint8_t* b = code_before(ret, 5); b != nullptr && b[0] == 0xe8) return true;
    // ff /2 (reg field 010) by its ModRM byte's length: mod 11 a register (2 bytes, 3 with REX.B),
    // mod 00 [reg] (2, 3; JavaCalls::call_helper calls the call stub by `call *(%rax)`), mod 01
    // [reg + disp8] (3, 4), mod 10 [reg + disp32] (6, 7), mod 00 rm 101 [rip + disp32] (6).
    // No SIB forms: rm 100 is left out.
    const auto ff2 = [](const uint8_t* b, uint8_t mod) {
        return b[0] == 0xff && (b[1] & 0xc0) == mod && (b[1] & 0x38) == 0x10 && (b[1] & 0x07) != 0x04;
    };
    const auto with_rex_b = [](const uint8_t* b) { return b[0] == 0x41; };
    const auto at_reg = [&](const uint8_t* b) { return ff2(b, 0xc0) || (ff2(b, 0x00) && (b[1] & 0x07) != 0x05); };
    if (const uint8_t* b = code_before(ret, 2); b != nullptr && at_reg(b)) return true;
    if (const uint8_t* b = code_before(ret, 3); b != nullptr && ((with_rex_b(b) && at_reg(b + 1)) || ff2(b, 0x40))) {
        return true;
    }
    if (const uint8_t* b = code_before(ret, 4); b != nullptr && with_rex_b(b) && ff2(b + 1, 0x40)) return true;
    if (const uint8_t* b = code_before(ret, 6); b != nullptr && (ff2(b, 0x80) || (b[0] == 0xff && b[1] == 0x15))) {
        return true;
    }
    if (const uint8_t* b = code_before(ret, 7); b != nullptr && with_rex_b(b) && ff2(b + 1, 0x80)) return true;
    return false;
}

bool NativeUnwinder::function_starts_at(uint64_t pc) {
    uint64_t bias = 0;
    Module* m = module_for(pc, bias);
    if (m == nullptr) return false;
    const std::optional<ElfFile::Function> function = m->elf.function_at(pc - bias);
    return function && function->vaddr == pc - bias;
}

bool NativeUnwinder::after_syscall(uint64_t pc) {
    const uint8_t* insn = code_before(pc, 2);
    return insn != nullptr && insn[0] == 0x0f && insn[1] == 0x05;
}

InternedName NativeUnwinder::symbol(uint64_t pc) { return symbol_answer(pc).name; }

InternedName NativeUnwinder::caller_symbol(uint64_t return_address) {
    const SymbolAnswer& before = symbol_answer(return_address - 1);
    if (before.function) return before.name;
    // No function there: a return address a call did not push. The kernel makes a signal
    // handler return to the sigreturn trampoline's first byte (glibc's __restore_rt, after a nop
    // no symbol covers): that frame is named by its own pc.
    return symbol_answer(return_address).name;
}

const NativeUnwinder::SymbolAnswer& NativeUnwinder::symbol_answer(uint64_t pc) {
    static const SymbolAnswer kNone;
    if (!symbolize_) return kNone;
    refresh();
    SymbolAnswer& cached = symbol_cache_[(pc ^ (pc >> 12)) & (kSymbolCacheSize - 1)];
    if (cached.known && cached.pc == pc) return cached;
    if (const InternedName* known = symbol_ranges_.find(pc)) {
        cached = {pc, *known, true, true};
        return cached;
    }
    uint64_t bias = 0, begin = 0, until = 0;
    Module* m = module_for(pc, bias);
    std::optional<InternedName> s = m ? m->symbol_at(pc - bias, begin, until) : std::nullopt;
    if (s) {
        // Within the mapping: a last symbol of size 0 reaches to the end of the address space.
        const ModuleMap* mapping = map_.module_at(pc);
        symbol_ranges_.add(std::max(begin + bias, mapping->begin), std::min(until + bias, mapping->end), pc, *s);
    }
    cached = {pc, s ? *s : m ? m->label : InternedName{}, true, s.has_value()};
    return cached;
}

}  // namespace sf::detail
