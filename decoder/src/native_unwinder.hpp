// Native (C/C++) frames: one step out of a frame with the DWARF CFI of the module mapped at the pc
// (libunwind over a remote address space whose memory is the stack fragment plus the module files),
// and symbol names from the modules' ELF symbol tables. Module data is cached per mapping.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "stackfrag/decoder/code_map.hpp"
#include "stack_view.hpp"

namespace sf::detail {

struct NativeStep {
    uint64_t pc = 0;
    uint64_t sp = 0;
    uint64_t fp = 0;
};

class NativeUnwinder {
public:
    NativeUnwinder(const CodeMap& map, bool use_dwarf, bool symbolize);
    ~NativeUnwinder();

    // One step from the native frame (pc, sp, fp) using the module's unwind tables. `top` says the
    // pc is the interrupted instruction (not a return address). kEnd: the tables say this frame is
    // the thread's first (glibc's clone3 and _start mark their return address undefined).
    // kBeyondFragment: the step needed stack words above the fragment's end (the stack is deeper
    // than the copy: an incomplete trace, not a failure).
    enum class Outcome : uint8_t { kStepped, kEnd, kFailed, kBeyondFragment };
    Outcome step_dwarf(const StackView& view, uint64_t pc, uint64_t sp, uint64_t fp, bool top, NativeStep& out);

    // Steps step_dwarf took by an ip's known rule, without libunwind.
    uint64_t rule_steps() const { return rule_steps_; }
    // Rules read from the modules' CFI (dwarf_cfi.hpp) rather than learnt from libunwind's steps.
    uint64_t cfi_rules_learned() const { return cfi_rules_learned_; }
    // Off: rules only from libunwind's steps (tests compare the two).
    void set_cfi_rules(bool on) { cfi_rules_ = on; }

    // The symbol containing pc ("" when unknown); stable until the next call.
    const std::string& symbol(uint64_t pc);
    // The paths whose file here has another build id than the ModuleMap announced: not used to
    // unwind or name frames (their frames go by the rbp chain, unnamed), in the order found.
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
    // The unwind rule of one ip as far as two libunwind steps showed it (see step_dwarf).
    struct Rule {
        enum State : uint8_t { kEmpty, kSeenOnce, kKnown, kNone };
        uint64_t ip = 0;
        int64_t cfa_offset = 0;     // kKnown: CFA = (fp or sp) + cfa_offset
        int64_t ra_offset = 0;      // return address slot - CFA
        int64_t fp_offset = 0;      // the caller's rbp's slot - CFA, when fp_saved
        int64_t sp_offset = 0;      // kSeenOnce: CFA - sp and CFA - fp when seen
        int64_t fp_distance = 0;
        State state = kEmpty;
        bool cfi_tried = false;     // the module's CFI row for ip is not of this form
        bool cfa_from_fp = false;
        bool fp_saved = false;      // else the caller's rbp is still in rbp
    };
    static constexpr size_t kRuleCacheSize = 2048;   // 112 KB
    std::vector<Rule> rules_;
    uint64_t rule_steps_ = 0;
    uint64_t cfi_rules_learned_ = 0;
    bool cfi_rules_ = true;
    void learn_from_cfi(uint64_t ip, Rule& rule);
    Module* module_for(uint64_t pc, uint64_t& load_bias);
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
        Module* module = nullptr;
        uint64_t bias = 0;
    };
    std::vector<MappingAnswer> by_mapping_;
    // symbol()'s answers by pc (native frames' return addresses recur sample after sample), while
    // the modules are those of generation_. The strings live in the modules, which are never dropped.
    struct SymbolAnswer {
        uint64_t pc = 0;
        const std::string* name = nullptr;
    };
    static constexpr size_t kSymbolCacheSize = 1024;
    std::vector<SymbolAnswer> symbol_cache_;
    void* address_space_ = nullptr;                                      // unw_addr_space_t
    std::string empty_;
    std::vector<std::string> changed_;
};

}  // namespace sf::detail
