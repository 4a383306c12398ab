// What the decoder knows about one JVM's code and methods, built from the event stream in stream
// order and queried *as of a sample's time*: code addresses are reused after an unload, and samples
// are drained from the rings later than the JVMTI callbacks that announce code fire.
//
// Time rules (docs/decoding.md, "CodeMap"):
//  * Compiled code is valid on [load time, unload time). A sample at time t uses the entry valid at
//    t; if none is, the earliest entry loaded after t (the CompiledMethodLoad callback is posted
//    after the code is installed and may already run), else nothing.
//  * A Method* maps to the latest MethodInfo announced at or before t; a sample earlier than every
//    announcement of that Method* uses the earliest one (class preparation and the start scan
//    announce methods after they exist; a Method* is reused only after its class is unloaded, and
//    the older mapping would then have been announced first).
//  * Stubs, the interpreter and modules are valid for the life of the VM; a later announcement of an
//    overlapping range replaces the earlier one (for stubs the smaller range wins).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <limits>
#include <map>
#include <memory>
#include <unordered_map>
#include <vector>

#include "stackfrag/base/flat_u64_map.hpp"
#include "stackfrag/base/interned_name.hpp"
#include "stackfrag/events/events.hpp"
#include "stackfrag/hotspot/frame_layout.hpp"

namespace sf {

inline constexpr uint64_t kForever = std::numeric_limits<uint64_t>::max();

namespace detail {
template <class T>
class LiveCodeIndex;
struct SpRanges;
}

// A CodeLoad with its validity interval.
struct CompiledCode {
    CodeLoad load;
    uint64_t valid_from = 0;
    uint64_t valid_until = kForever;
    // Where the code moves rsp below its frame's sp: worked out by the decoder from `load` the first
    // time it walks this code (a function of the bytes only), then kept.
    mutable std::shared_ptr<const detail::SpRanges> sp_ranges;
    // Unique per load into this map (a freed entry's address may come back for another): what
    // the decoder's memos of per-pc facts of `load` are keyed by.
    uint64_t serial = 0;
    bool contains(uint64_t pc) const { return pc >= load.code_begin && pc < load.code_end; }
};

enum class CodeRegion : uint8_t {
    kUnknown = 0,       // not Java code: native, or code the stream never announced
    kInterpreter,       // the template interpreter
    kCallStubReturn,    // exactly the call stub's return address (an entry frame)
    kCompiled,          // an nmethod (incl. native wrappers and method-handle intrinsics)
    kStub,              // a stub, adapter or runtime blob
    kUnknownCodeCache,  // inside the code cache bounds, but in no announced blob
};

struct CodeLookup {
    CodeRegion region = CodeRegion::kUnknown;
    const CompiledCode* compiled = nullptr;
    const Stub* stub = nullptr;
};

// Not thread-safe: apply() and the lookups run on one thread (the decoder's), or under one lock.
class CodeMap {
public:
    CodeMap();
    ~CodeMap();
    CodeMap(const CodeMap&) = delete;
    CodeMap& operator=(const CodeMap&) = delete;

    // Applies one event in stream order. Samples, oracles, threads and losses are ignored.
    void apply(const Event& event);
    // The same, taking over a MethodInfo's strings and line table instead of copying them.
    void apply(Event&& event);

    bool has_vm() const { return has_vm_; }
    const VmInfo& vm() const { return vm_; }
    // ContinuationEntry's return pc, the caller of a virtual thread's return barrier: the VM's
    // (VmInfo), or where its VMStructs do not say (JDK 21) the return address of the call in
    // Continuation.enterSpecial's native wrapper to the continuation thaw stub; 0 while unknown.
    uint64_t continuation_return_pc() const {
        return vm_.continuation_return_pc != 0 ? vm_.continuation_return_pc : derived_continuation_return_pc_;
    }
    // The per-JDK facts of the VM (hotspot::recorded_jdk_facts of its VmInfo).
    const hotspot::JdkFacts& jdk() const { return *jdk_; }

    // The sample times [from, until) over which a lookup's answer for a pc stays the one it gave
    // (at this code generation): between the nearest load or unload times of the code ever at that pc.
    struct TimeSpan {
        uint64_t from = 0;
        uint64_t until = ~uint64_t{0};
        void narrow(uint64_t boundary, uint64_t time_ns) {
            if (boundary <= time_ns) from = std::max(from, boundary);
            else until = std::min(until, boundary);
        }
        bool contains(uint64_t time_ns) const { return from <= time_ns && time_ns < until; }
    };
    // What code contains `pc` at time `time_ns`; `span`, when given, gets the times the same answer
    // holds for while code_generation() stays.
    // Inline for the answer cached from the last time (nearly every lookup a walk makes).
    CodeLookup find_code(uint64_t pc, uint64_t time_ns, TimeSpan* span = nullptr) const {
        CodeLookup r;
        if (fixed_answer(pc, r)) {
            if (span) *span = TimeSpan{};
            return r;
        }
        if (lookup_log_) lookup_log_->add(page_key(pc));
        // Native frames' pcs, most of all lookups: answered without the cache, which they would
        // only crowd (what find_code_uncached answers there, at every time).
        if (beyond_announced_code(pc)) {
            if (span) *span = TimeSpan{};
            return r;
        }
        const CodeCacheEntry& cached = code_cache_[code_cache_slot(pc)];
        if (cached.pc == pc && cached.generation == code_generation_ && cached.span.contains(time_ns)) {
            if (span) *span = cached.span;
            return cached.result;
        }
        return find_code_uncached(pc, time_ns, span);
    }
    const CompiledCode* find_compiled(uint64_t pc, uint64_t time_ns) const;
    // No code, stub, interpreter or code cache was ever announced at pc: find_code answers kUnknown
    // and find_compiled null there at every time, while this holds (no VM: false).
    bool outside_all_code(uint64_t pc) const {
        return has_vm_ && beyond_announced_code(pc) && !in_interpreter(pc) && pc != vm_.call_stub_return;
    }
    const Stub* find_stub(uint64_t pc) const;
    // A byte the decoder keeps with `stub` (one of this map's) for what it worked out from the
    // stub's name: 0 until it sets one, and again whenever the stub is announced anew.
    uint8_t& stub_memo(const Stub* stub) const { return stub_memos_[static_cast<size_t>(stub - stubs_.data())]; }
    // The stub's name, interned when it was announced (a frame's symbol).
    InternedName stub_name(const Stub* stub) const { return stub_names_[static_cast<size_t>(stub - stubs_.data())]; }
    bool in_interpreter(uint64_t pc) const {
        return pc >= vm_.interpreter_begin && pc < vm_.interpreter_end;
    }
    bool in_method_entry_codelet(uint64_t pc) const;
    bool in_code_cache(uint64_t pc) const {
        return pc >= vm_.code_cache_low && pc < vm_.code_cache_high;
    }

    // The latest announcement of the id. Its strings are empty while a MethodBatch announced it and
    // no NamedMethod has named it yet.
    const MethodInfo* method_by_id(uint64_t method_id) const;
    // Only announced Method* values resolve (see the time rule above).
    const MethodInfo* method_by_ptr(uint64_t method_ptr, uint64_t time_ns) const;

    // The executable mapping containing `address`, or null.
    const ModuleMap* module_at(uint64_t address) const;
    const std::vector<ModuleMap>& modules() const { return modules_; }
    // Bumped whenever a module is added or replaced (native-unwind caches key on it).
    uint64_t modules_generation() const { return modules_generation_; }

    // PcDesc selection (hotspot-frames.md §c.2) over the scopes of one CodeLoad.
    static const PcScope* scope_at(const CodeLoad& code, uint32_t pc_offset);          // exact
    static const PcScope* scope_at_or_after(const CodeLoad& code, uint32_t pc_offset); // first >=

    // Bumped by every event applied and every forget_before() that dropped something: two lookups
    // made at the same epoch are made against the same map.
    uint64_t epoch() const { return epoch_; }

    // What a caller asked find_code, find_compiled and method_by_ptr while it had a log set (the
    // incremental decoder, per step of a walk): the 4 KB page of each pc, and each Method* (with
    // the top bit set), up to kMax distinct keys.
    struct LookupKeys {
        static constexpr int kMax = 4;
        uint64_t keys[kMax] = {};
        uint8_t count = 0;
        bool overflow = false;   // more than kMax: what it asked is not known
        void add(uint64_t key) {
            for (uint8_t i = 0; i < count; ++i) {
                if (keys[i] == key) return;
            }
            if (count == kMax) overflow = true;
            else keys[count++] = key;
        }
    };
    static uint64_t page_key(uint64_t pc) { return pc >> 12; }
    static uint64_t method_key(uint64_t method_ptr) { return method_ptr | (uint64_t{1} << 63); }
    void set_lookup_log(LookupKeys* log) const { lookup_log_ = log; }
    // Logs `pc` as find_code(pc, ...) would have: for a caller that reuses an answer find_code gave
    // earlier in the same walk, so that the step asking again still names the page it depends on.
    void note_code_lookup(uint64_t pc) const {
        CodeLookup fixed;
        if (lookup_log_ && !fixed_answer(pc, fixed)) lookup_log_->add(page_key(pc));
    }
    // Changes whenever find_code's answers may have: code, stubs or the VM announced anew. Answers
    // derived from find_code hold while it stays and for the times of its span.
    uint64_t code_generation() const { return code_generation_; }
    // The keys whose answers the changes applied after `epoch` may have changed, as inclusive ranges
    // (a code range's pages, a Method*): every other key gets the answer it got then (at a time the
    // map of then answered alike, see time_horizon). False when that is not known: a VmInfo or
    // ModuleMap since, forget_before() dropped something, or the log no longer reaches back.
    struct KeyRange {
        uint64_t lo = 1, hi = 0;   // empty unless lo <= hi
    };
    bool changes_since(uint64_t epoch, std::vector<KeyRange>& out) const;
    // The latest time any time-dependent lookup (find_code, find_compiled, method_by_ptr) compares a
    // sample's time with: every time after it gets the same answers as every other such time.
    uint64_t time_horizon() const { return time_horizon_; }

    // Drops what no sample at or after `time_ns` can need: unloaded code that ended by then and
    // Method* mappings superseded by then.
    void forget_before(uint64_t time_ns);

    size_t live_compiled_count() const { return live_.size(); }
    size_t history_compiled_count() const { return history_.size(); }
    size_t method_count() const { return methods_by_id_.size(); }
    size_t stub_count() const { return stubs_.size(); }

private:
    // One announcement of a method as the walks need it: 48 bytes where a MethodInfo takes 192,
    // and a run announces 10-50 k methods of which a profile refers to about a tenth. Its
    // MethodInfo is made by the first lookup that answers with it (info_of), or at once when the
    // announcement carried names.
    struct MethodRecord {
        uint64_t time_ns;
        MethodEntry method;
        mutable MethodInfo* info;   // null until made
    };
    struct MethodVersion {
        uint64_t time_ns;
        const MethodRecord* record;
    };
    // A version's time is its record's, kept inline where versions are searched by time.
    static MethodVersion version_of(const MethodRecord* record) { return MethodVersion{record->time_ns, record}; }
    struct StubSegment {
        uint64_t begin;
        uint64_t end;
        uint32_t stub_index;
    };

    void apply_vm(const VmInfo& vm);
    void apply_load(CodeLoad&& load);
    const CompiledCode* find_live(uint64_t pc) const;
    const CompiledCode* find_compiled_unlogged(uint64_t pc, uint64_t time_ns, TimeSpan* span = nullptr) const;
    void apply_unload(const CodeUnload& unload);
    void apply_stub(const Stub& stub);
    void apply_method(MethodInfo&& method);
    void apply_record(MethodRecord* record);
    MethodRecord* store_record(uint64_t time_ns, const MethodEntry& method);
    const MethodInfo* info_of(const MethodRecord* record) const;
    void apply_batch(const MethodBatch& batch);
    void apply_names(NamedMethod&& named);
    template <class E>
    void apply_any(E&& event);
    void apply_module(const ModuleMap& module);
    void retire(std::shared_ptr<CompiledCode> code, uint64_t until);
    void rebuild_stub_segments() const;
    // find_code's answers that depend on no code announced (no VM yet, the call stub's return, the
    // interpreter): true with `r` set; such lookups are not logged.
    // outside_all_code but for what fixed_answer has already ruled out (no VM, the interpreter, the
    // call stub's return).
    bool beyond_announced_code(uint64_t pc) const {
        return (pc < loaded_lo_ || pc >= loaded_hi_) && (pc < stubs_lo_ || pc >= stubs_hi_) && !in_code_cache(pc);
    }
    bool fixed_answer(uint64_t pc, CodeLookup& r) const {
        if (!has_vm_) return true;
        if (pc == vm_.call_stub_return && pc != 0) {
            r.region = CodeRegion::kCallStubReturn;
            return true;
        }
        if (in_interpreter(pc)) {
            r.region = CodeRegion::kInterpreter;
            return true;
        }
        return false;
    }
    // Unloaded code at pc valid at time_ns; else the one loaded soonest after it; else null.
    const CompiledCode* find_in_history(uint64_t pc, uint64_t time_ns, TimeSpan* span = nullptr) const;

    bool has_vm_ = false;
    VmInfo vm_;
    const hotspot::JdkFacts* jdk_ = &hotspot::recorded_jdk_facts(0, 0);
    std::vector<std::pair<uint64_t, uint64_t>> entry_codelets_;   // sorted [begin, end)

    // Live code does not overlap: keyed by code_begin.
    std::map<uint64_t, std::shared_ptr<CompiledCode>> live_;
    // The same code by 16 KB bucket, what find_live reads: a walk down the tree cost a cache miss
    // per level (its first instruction was 78 % of find_live's time in the live decoder thread), and
    // most lookups ask for a pc new to every cache (a sample's top pc). The tree stays what
    // apply_load and apply_unload edit and what lookups fall back on where the index is off.
    std::unique_ptr<detail::LiveCodeIndex<CompiledCode>> live_index_;
    // find_code's answers by pc (the same return addresses and call targets come back sample after
    // sample), valid while no code, stub or VM event was applied since (code_generation_) and for
    // the sample times between the load and unload times around the time it was asked for (a
    // sample's time alone would make every lookup of a recording decoded against its whole map a
    // miss): method announcements leave them be.
    struct CodeCacheEntry {
        uint64_t pc = 0;
        uint64_t generation = 0;   // 0: empty
        TimeSpan span;
        CodeLookup result;
    };
    static constexpr size_t kCodeCacheSize = 1024;
    static size_t code_cache_slot(uint64_t pc) { return ((pc >> 2) ^ (pc >> 13)) & (kCodeCacheSize - 1); }
    // find_code past its cache: searches, and caches the answer.
    CodeLookup find_code_uncached(uint64_t pc, uint64_t time_ns, TimeSpan* span_out) const;
    mutable std::vector<CodeCacheEntry> code_cache_ = std::vector<CodeCacheEntry>(kCodeCacheSize);
    uint64_t code_generation_ = 1;
    uint64_t load_serial_ = 0;   // the last CompiledCode::serial given out
    // The span of every range code (live or since unloaded) and stubs were ever announced at.
    uint64_t loaded_lo_ = ~uint64_t{0}, loaded_hi_ = 0;
    uint64_t stubs_lo_ = ~uint64_t{0}, stubs_hi_ = 0;
    // Unloaded (or replaced) code, sorted by code_begin; may overlap itself and live code.
    std::vector<std::shared_ptr<CompiledCode>> history_;
    // history_reach_[i]: the highest code_end among history_[0..i]. A lookup walking back from
    // the pc's position stops where no earlier entry reaches the pc (a bound by the largest blob
    // instead made every pc outside compiled code scan hundreds of entries).
    std::vector<uint64_t> history_reach_;
    // history_[i]'s range, inline: the searches and the reach rebuild after each unload read these
    // instead of one CompiledCode (a cache miss) per entry (~10 us an unload with a few thousand).
    struct HistoryRange {
        uint64_t begin;
        uint64_t end;
    };
    std::vector<HistoryRange> history_ranges_;
    void rebuild_history_reach(size_t from);

    std::vector<Stub> stubs_;
    uint64_t thaw_stub_ = 0;                        // the continuation thaw stub's begin, once announced
    uint64_t derived_continuation_return_pc_ = 0;   // see continuation_return_pc()
    void derive_continuation_return(const CodeLoad& load);
    mutable std::vector<uint8_t> stub_memos_;   // by index in stubs_
    std::vector<InternedName> stub_names_;      // by index in stubs_
    // Flattened, non-overlapping, sorted; rebuilt by the first lookup after stubs changed (stubs
    // arrive in bursts at start). Hence: apply() and lookups must not run concurrently.
    mutable std::vector<StubSegment> stub_segments_;
    mutable bool stubs_dirty_ = false;

    // Every announcement's record at a stable address, 1024 to an allocation: a run announces
    // 10-50 k, nearly all of them at class preparation.
    std::vector<std::unique_ptr<MethodRecord[]>> record_chunks_;
    size_t record_chunk_used_ = 0;
    static constexpr size_t kRecordChunk = 1024;
    // The MethodInfos made so far (see MethodRecord), 256 to an allocation, at stable addresses.
    mutable std::vector<std::unique_ptr<MethodInfo[]>> method_chunks_;
    mutable size_t method_chunk_used_ = 0;
    static constexpr size_t kMethodChunk = 256;
    MethodInfo* store_method(MethodInfo&& method) const;
    // Room reserved up front, so that a run of 19-24 k methods (xalan, lucene, h2, httpserver)
    // never rehashes into fresh pages: 24,576 fill a map of 32 k slots to its 3/4 (zeroed pages, but
    // the keys hash evenly, so every page is written once the map is full; 64 k slots cost twice).
    static constexpr size_t kExpectedMethods = 24576;
    // The latest announcement of each jmethodID. Flat: an insert per announced method allocates
    // nothing (they come by the tens of thousands).
    FlatU64Map<const MethodRecord*> methods_by_id_;
    // Method* -> announcement over time. Nearly every Method* only ever has one version; the few
    // that a redefinition or a reused address gave more live in a map of their own, the only
    // one forget_before() has work on, and single ones cost no vector of their own. A Method*
    // that moved to versions_by_ptr_ keeps its slot here with a null record. The version's time is
    // its record's (16-byte slots, where a MethodVersion made them 24).
    FlatU64Map<const MethodRecord*> single_version_by_ptr_;
    std::unordered_map<uint64_t, std::vector<MethodVersion>> versions_by_ptr_;   // sorted by time
    // method_by_ptr's time-independent answers (a Method* with one version, or none) by Method*,
    // direct-mapped: every interpreted frame and every scan's candidate asks, and a hash map's
    // node costs a cache miss. An entry is dropped when its Method* is announced again; one with
    // several versions is never kept (its answer depends on the time).
    struct MethodCacheEntry {
        uint64_t ptr = 0;
        const MethodInfo* info = nullptr;
        bool valid = false;
    };
    static constexpr size_t kMethodCacheSize = 4096;
    mutable std::vector<MethodCacheEntry> method_cache_ = std::vector<MethodCacheEntry>(kMethodCacheSize);
    static size_t method_slot(uint64_t ptr) { return ((ptr >> 3) ^ (ptr >> 15)) & (kMethodCacheSize - 1); }

    std::vector<ModuleMap> modules_;   // sorted by begin, non-overlapping
    uint64_t modules_generation_ = 0;
    // module_at's last answer inside a module and last one between modules, each with the address
    // range that gets it (libunwind asks about every word it reads outside the stack: its unwind
    // tables, in a module's read-only segment, lie between the executable mappings).
    struct ModuleAnswer {
        uint64_t lo = 0, hi = 0;   // [lo, hi): empty until set
        uint64_t generation = 0;
        const ModuleMap* module = nullptr;
    };
    mutable ModuleAnswer module_hit_, module_miss_;

    uint64_t epoch_ = 0;
    uint64_t time_horizon_ = 0;

    // changes_since(): the keys each event changed, by the epoch it made (the latest 4096 events).
    mutable LookupKeys* lookup_log_ = nullptr;
    KeyRange applying_;                  // what the event being applied changes
    bool applying_everything_ = false;
    std::deque<std::pair<uint64_t, KeyRange>> changes_;
    uint64_t changes_from_ = 0;          // changes_ holds every change after this epoch
    void note_change();
    void note_code_range(uint64_t begin, uint64_t end);
};

}  // namespace sf
