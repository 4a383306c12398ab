// Native (C/C++) frames: one step out of a frame with the DWARF CFI of the module mapped at the pc
// (libunwind over a remote address space whose memory is the stack fragment plus the module files),
// and symbol names from the modules' ELF symbol tables. Module data is cached per mapping.
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "stackfrag/base/interned_name.hpp"
#include "stackfrag/decoder/code_map.hpp"
#include "dwarf_cfi.hpp"
#include "stack_view.hpp"

namespace sf::detail {

// Answers that hold over a range of addresses (a CFI row, a symbol), found again by any address in
// the range: an answer is filed under each 64-byte granule of its range within kReach bytes of the
// address it was looked up for, and a granule (one of kSize) holds the last answer filed there.
template <typename T, uint64_t kReach = 256, size_t kSize = 4096>
class RangeCache {
public:
    const T* find(uint64_t address) const {
        const Entry& e = entries_[slot(address)];
        return address - e.begin < e.end - e.begin ? &e.value : nullptr;
    }
    void add(uint64_t begin, uint64_t end, uint64_t around, const T& value) {
        const uint64_t lo = std::max(begin, around > kReach ? around - kReach : 0);
        const uint64_t hi = std::min(end, around + kReach);
        if (lo >= hi) return;
        for (uint64_t g = lo >> kGranuleBits; g <= (hi - 1) >> kGranuleBits; ++g) {
            entries_[g & (kSize - 1)] = Entry{begin, end, value};
        }
    }
    void clear() { entries_.assign(kSize, Entry{}); }

private:
    static constexpr unsigned kGranuleBits = 6;
    struct Entry {
        uint64_t begin = 0, end = 0;
        T value{};
    };
    static size_t slot(uint64_t address) { return (address >> kGranuleBits) & (kSize - 1); }
    std::vector<Entry> entries_ = std::vector<Entry>(kSize);
};

struct NativeStep {
    uint64_t pc = 0;
    uint64_t sp = 0;
    uint64_t fp = 0;
    // The frame left was the kernel's signal trampoline (glibc's __restore_rt): pc, sp and fp come
    // from the signal's saved context, so pc is the interrupted instruction, not a return address.
    bool interrupted = false;
    // Then also where that context's general registers lie (the kernel's mcontext gregs, in
    // <sys/ucontext.h>'s REG_* order): the interrupted frame's rbx, r13, rax are there.
    uint64_t context_gregs = 0;
};

// The interrupted registers' place in a signal frame: at the trampoline, sp is the ucontext.
uint64_t signal_context_gregs(uint64_t trampoline_sp);
// One saved register of a signal's context (REG_RAX, REG_RBX, REG_R13, ... of <sys/ucontext.h>).
uint64_t signal_context_greg_address(uint64_t context_gregs, int reg);

struct UnwindAccess;   // libunwind accessors' view of one step (native_unwinder.cpp)

class NativeUnwinder {
public:
    NativeUnwinder(const CodeMap& map, bool use_dwarf, bool symbolize);
    ~NativeUnwinder();

    // One step from the native frame (pc, sp, fp) using the module's unwind tables. `top` says the
    // pc is the interrupted instruction (not a return address). kEnd: the tables say this frame is
    // the thread's first (glibc's clone3 and _start mark their return address undefined).
    // kBeyondFragment: the step needed stack words above the fragment's end (the stack is deeper
    // than the copy: an incomplete trace, not a failure). kModuleChanged: pc lies in a module of
    // changed_modules(), which is not unwound at all (libunwind would fall back to rbp).
    enum class Outcome : uint8_t { kStepped, kEnd, kFailed, kBeyondFragment, kModuleChanged };
    Outcome step_dwarf(const StackView& view, uint64_t pc, uint64_t sp, uint64_t fp, bool top, NativeStep& out);
    // One step out of the native frame at (pc, sp), found by unwinding from the sample's top frame
    // with every register the sample has that CFI rows use (pc, sp, rbp and rbx), the frames in
    // between stepped again: for a row whose CFA is neither rsp nor rbp (glibc's
    // _dl_runtime_resolve keeps its frame in rbx), which a step from (pc, sp, fp) cannot take.
    // kFailed unless that unwinding meets (pc, sp) within `max_frames` steps and steps once more.
    struct TopRegisters {
        uint64_t pc = 0, sp = 0, fp = 0, bx = 0;
    };
    Outcome step_from_top(const StackView& view, const TopRegisters& top, uint64_t pc, uint64_t sp, size_t max_frames,
                          NativeStep& out);

    // What the walk's most common step needs of a caller frame (pc a return address, not a top
    // pc), from one memo line instead of the module, symbol and rule caches: pc's symbol and the
    // rule of pc - 1 read from the module's CFI. Kept while the modules stay; a pc gets it once a
    // step through it found both (learn_caller). CFI rows are facts of the module's file, so a
    // step by them answers what step_dwarf's would at every later time.
    struct CallerFacts {
        uint64_t pc = 0;   // 0: empty
        InternedName symbol;
        int32_t cfa_offset = 0, ra_offset = 0, fp_offset = 0;
        bool cfa_from_fp = false, fp_saved = false;
    };
    const CallerFacts* caller_facts(uint64_t pc) {
        refresh();
        if (pc == 0 || !use_dwarf_) return nullptr;
        CallerFacts* set = &callers_[caller_set(pc) * kCallerWays];
        if (set[0].pc == pc) return &set[0];
        if (set[1].pc == pc) return &set[1];
        return nullptr;
    }
    // After a step from the caller frame at pc: memoizes its facts if its rule came from CFI.
    void learn_caller(uint64_t pc);
    // step_dwarf's step by a known rule, from `facts` (for facts->pc at sp and fp): false where
    // step_dwarf would not step so (a slot outside the fragment, a return address of 0, no move),
    // which it then decides. Counted by note_caller_step once the step is taken.
    [[gnu::always_inline]] static bool step_by(const CallerFacts& facts, const StackView& view, uint64_t sp,
                                               uint64_t fp, NativeStep& out) {
        return step_by_rule(view, facts.pc - 1, sp, fp, facts.cfa_from_fp, facts.cfa_offset, facts.ra_offset,
                            facts.fp_saved, facts.fp_offset, out);
    }
    void note_caller_step() {
        ++rule_steps_;
        ++caller_steps_;
    }
    uint64_t caller_steps() const { return caller_steps_; }

    // Steps step_dwarf took by an ip's known rule, without libunwind.
    uint64_t rule_steps() const { return rule_steps_; }
    // Steps step_dwarf answered kEnd without libunwind: an ip whose CFI row marks the thread's first
    // frame (return address undefined), once a libunwind step there ended the stack.
    uint64_t rule_ends() const { return rule_ends_; }
    // Steps step_dwarf answered kBeyondFragment without libunwind: an ip's known rule put the return
    // address above the fragment's end.
    uint64_t rule_steps_beyond() const { return rule_steps_beyond_; }
    // Steps libunwind took (its probes included).
    uint64_t libunwind_steps() const { return libunwind_steps_; }
    // Rules read from the modules' CFI (dwarf_cfi.hpp) rather than learnt from libunwind's steps.
    uint64_t cfi_rules_learned() const { return cfi_rules_learned_; }
    // Off: rules only from libunwind's steps (tests compare the two).
    void set_cfi_rules(bool on) { cfi_rules_ = on; }

    // The symbol containing pc (none when unknown).
    InternedName symbol(uint64_t pc);
    // A caller frame's symbol: the function its call lies in. A call to a function that never
    // returns can be its caller's last instruction, and its return address the next function's
    // first byte or past every symbol (G1's GangWorker::run ends in `call GangWorker::loop`), so
    // the byte before it is what is looked up, as for the frame's unwind row; where no function
    // covers that byte (a signal trampoline's first byte), the return address itself.
    InternedName caller_symbol(uint64_t return_address);

    // From the module files' code bytes, for a top pc without unwind info. `direct_call_into`: an
    // `e8 rel32` ends at `ret` and calls an address at most kLeafReach bytes at or below `pc` (the
    // call that entered the function holding `pc`, if that built no frame). `after_syscall`: a
    // `syscall` instruction ends at `pc`. `call_ends_at`: some call instruction ends at `ret`
    // (`e8 rel32`, or `ff /2` through a register or a pointer in memory: C++ code calling a stub
    // through StubRoutines' function pointers). `function_starts_at`: a function symbol of pc's
    // module begins at pc (nothing pushed yet there, however it was called).
    static constexpr uint64_t kLeafReach = 4096;
    bool direct_call_into(uint64_t ret, uint64_t pc);
    bool after_syscall(uint64_t pc);
    bool call_ends_at(uint64_t ret);
    bool function_starts_at(uint64_t pc);
    // The paths whose file here has another build id than the ModuleMap announced: not used to
    // unwind or name frames, in the order found.
    const std::vector<std::string>& changed_modules() const { return changed_; }

    struct Module;   // an mmapped ELF file with its unwind table and symbols

private:
    // What one libunwind step found: the caller's sp (the CFA), where the return address and the
    // caller's rbp were read (rbp: 0 when it stayed in the register).
    struct Observed {
        uint64_t cfa = 0, ra_slot = 0, fp_slot = 0;
    };
    Outcome libunwind_step(const StackView& view, uint64_t ip, uint64_t sp, uint64_t fp, NativeStep& out,
                           Observed* observed);
    bool ensure_address_space();
    // What libunwind's accessors read a step from (pc, sp, fp) through.
    UnwindAccess access_for(const StackView& view, uint64_t pc, uint64_t sp, uint64_t fp);
    Outcome step_signal_frame(const StackView& view, uint64_t ip, uint64_t sp, uint64_t fp, NativeStep& out);
    // The unwind rule of one ip as far as two libunwind steps showed it (see step_dwarf).
    struct Rule {
        // kEnd: the ip's CFI row leaves the return address undefined (cfi_rule_at's first_frame)
        // and a libunwind step there ended the stack, as every step there does.
        // kSignal: ip is in a sigreturn trampoline; its row reads the saved context, so libunwind
        // steps it every time and the step says the next pc was interrupted.
        enum State : uint8_t { kEmpty, kSeenOnce, kKnown, kNone, kEnd, kSignal };
        // 32 bytes, half a cache line: every native step reads one. Offsets are frame sizes and
        // slot distances; one that does not fit 32 bits leaves the ip without a rule (kNone), and
        // a kSeenOnce distance that does not fit is kFar, which matches nothing.
        static constexpr int32_t kFar = INT32_MIN;
        uint64_t ip = 0;
        int32_t cfa_offset = 0;     // kKnown: CFA = (fp or sp) + cfa_offset
        int32_t ra_offset = 0;      // return address slot - CFA
        int32_t fp_offset = 0;      // the caller's rbp's slot - CFA, when fp_saved
        int32_t sp_offset = 0;      // kSeenOnce: CFA - sp and CFA - fp when seen
        int32_t fp_distance = 0;
        State state = kEmpty;
        bool cfi_tried : 1 = false;     // the module's CFI row for ip is not of this form
        bool first_frame : 1 = false;   // cfi_tried, and the row marks the thread's first frame
        bool cfa_from_fp : 1 = false;
        bool fp_saved : 1 = false;      // else the caller's rbp is still in rbp
        bool from_cfi : 1 = false;      // kKnown from the module's CFI row, not libunwind's steps
        uint8_t signal_back = 0;        // kSignal: libunwind steps from ip - signal_back
    };
    static_assert(sizeof(Rule) == 32, "a rule is half a cache line");
    static constexpr size_t kRuleCacheSize = 8192;   // 256 KB
    std::vector<Rule> rules_;
    uint64_t rule_steps_ = 0;
    uint64_t caller_steps_ = 0;
    uint64_t rule_ends_ = 0;
    uint64_t rule_steps_beyond_ = 0;
    uint64_t libunwind_steps_ = 0;
    uint64_t cfi_rules_learned_ = 0;
    bool cfi_rules_ = true;
    void learn_from_cfi(uint64_t ip, Rule& rule);
    // One step from ip's frame at (sp, fp) by a known rule: CFA = (rbp or rsp) + cfa_offset, the
    // return address at CFA + ra_offset, the caller's rbp at CFA + fp_offset (fp_saved) or still in
    // rbp. False where a slot lies outside the fragment, the return address is 0, or the step
    // would not move (libunwind's own end and loop checks).
    [[gnu::always_inline]] static bool step_by_rule(const StackView& view, uint64_t ip, uint64_t sp, uint64_t fp,
                                                    bool cfa_from_fp, int32_t cfa_offset, int32_t ra_offset,
                                                    bool fp_saved, int32_t fp_offset, NativeStep& out) {
        const uint64_t cfa = (cfa_from_fp ? fp : sp) + static_cast<uint64_t>(int64_t{cfa_offset});
        uint64_t ra = 0, caller_fp = fp;
        if (view.read(cfa + static_cast<uint64_t>(int64_t{ra_offset}), ra) && ra != 0 && !(ra == ip && cfa == sp) &&
            (!fp_saved || view.read(cfa + static_cast<uint64_t>(int64_t{fp_offset}), caller_fp))) {
            out = {ra, cfa, caller_fp};
            return true;
        }
        return false;
    }
    // CallerFacts, two ways a set (one cache line): C2's threads alone return to more distinct
    // pcs than the rule cache holds without conflicts (jython: ~10,000 rule misses a pass over a
    // recording, each ~1,200 instructions of CFI lookup).
    static constexpr size_t kCallerSets = 8192, kCallerWays = 2;   // 512 KB
    static size_t caller_set(uint64_t pc) { return (pc ^ (pc >> 13)) & (kCallerSets - 1); }
    std::vector<CallerFacts> callers_ = std::vector<CallerFacts>(kCallerSets * kCallerWays);
    // How many bytes before ip libunwind steps a sigreturn trampoline's frame from, if pc is in one:
    // 0, or 2 for a top pc just past its syscall (see step_dwarf).
    std::optional<uint8_t> sigreturn_trampoline(uint64_t pc, bool top);
    Module* module_for(uint64_t pc, uint64_t& load_bias);
    const uint8_t* code_before(uint64_t end, uint64_t len);
    bool in_changed_module(uint64_t pc);
    // A word of a module file outside its executable mapping, by address alone.
    bool read_module_data(uint64_t address, uint64_t& out);
    void refresh();

    const CodeMap& map_;
    bool use_dwarf_;
    bool symbolize_;
    uint64_t generation_ = ~0ull;
    std::unordered_map<std::string, std::unique_ptr<Module>> modules_;   // by path
    // module_for's answer per mapping (an index into CodeMap::modules()), while the modules are
    // those of generation_: every stack word libunwind reads asks, and the path's hash cost more
    // than the rest of the lookup.
    struct MappingAnswer {
        bool known = false;
        bool changed = false;   // another build than the recorded one
        Module* module = nullptr;
        uint64_t bias = 0;
    };
    std::vector<MappingAnswer> by_mapping_;
    // symbol()'s answers by pc (native frames' return addresses recur sample after sample), while
    // the modules are those of generation_.
    struct SymbolAnswer {
        uint64_t pc = 0;
        InternedName name;   // the function's, else the module's label
        bool known = false;
        bool function = false;   // a function symbol covers pc
    };
    static constexpr size_t kSymbolCacheSize = 4096;
    std::vector<SymbolAnswer> symbol_cache_;
    const SymbolAnswer& symbol_answer(uint64_t pc);
    // Behind symbol_cache_: the name by the function's range, so that a new pc in a function seen
    // before (a JIT compiler thread's top) needs no symbol table search. Functions are larger than
    // CFI rows: filed 2 KB either side, in 8192 granules (lucene JDK 25, 1 ms: 10 % fewer searches
    // than 256 bytes in 4096).
    RangeCache<InternedName, 2048, 8192> symbol_ranges_;
    // The CFI rows read so far (runtime addresses), so that a new ip in a row read before needs no
    // .eh_frame lookup.
    RangeCache<CfiRule> cfi_rows_;
    void* address_space_ = nullptr;                                      // unw_addr_space_t
    std::vector<std::string> changed_;
};

}  // namespace sf::detail
