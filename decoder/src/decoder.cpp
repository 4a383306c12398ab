#include "stackfrag/decoder/decoder.hpp"

#include <ucontext.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <string_view>

#include "code_shape.hpp"
#include "native_unwinder.hpp"
#include "stack_view.hpp"
#include "vm_stubs.hpp"
#include "stackfrag/decoder/breadcrumb.hpp"
#include "walk_journal.hpp"
#include "stackfrag/hotspot/frame_layout.hpp"

namespace sf {

class NativeUnwinder : public detail::NativeUnwinder {
    using detail::NativeUnwinder::NativeUnwinder;
};

namespace {
namespace hs = sf::hotspot;
constexpr uint64_t kWord = hs::kWordSize;
// A walk that leaves a full fragment this far above its end is called incomplete; farther, the
// address is garbage (thread stacks are at most a few MB).
constexpr uint64_t kMaxStackBeyondFragment = 64ull << 20;

uint64_t words(int64_t n) { return static_cast<uint64_t>(n * static_cast<int64_t>(kWord)); }

const detail::SpRanges& sp_ranges_of(const CompiledCode& code) {
    if (!code.sp_ranges) code.sp_ranges = std::make_shared<const detail::SpRanges>(detail::analyze_sp_ranges(code.load));
    return *code.sp_ranges;
}

// The rsp move still in effect at a return address (a call made with arguments pushed): the
// frame's sp is this much above the callee's caller sp. 0 where none or ambiguous.
int32_t delta_at_return(const CompiledCode& code, uint64_t pc) {
    if (code.load.code.empty() || code.load.comp_level < 1 || code.load.comp_level > 3) return 0;   // C1 only (step_compiled)
    const detail::SpRange* r = sp_ranges_of(code).find(pc - code.load.code_begin);
    return r && !r->call_pending && r->count == 1 && r->deltas[0] > 0 ? r->deltas[0] : 0;
}

// The target of the e8 call that ends at `ret` in `code`, if one does.
bool call_target(const CodeLoad& code, uint64_t ret, uint64_t& target) {
    constexpr uint64_t kCallRel32 = 5;
    const uint64_t off = ret - code.code_begin;
    if (off < kCallRel32 || off > code.code.size() || code.code[off - kCallRel32] != 0xe8) return false;
    int32_t rel = 0;
    std::memcpy(&rel, code.code.data() + off - 4, sizeof rel);
    target = ret + static_cast<uint64_t>(int64_t{rel});
    return true;
}

// The same for a call into a stub or the VM: also `mov r10, imm64; call r10` (C2's leaf calls).
bool leaf_call_target(const CodeLoad& code, uint64_t ret, uint64_t& target) {
    if (call_target(code, ret, target)) return true;
    constexpr uint64_t kMovR10 = 10, kCallR10 = 3;
    const uint64_t off = ret - code.code_begin;
    if (off < kMovR10 + kCallR10 || off > code.code.size()) return false;
    const uint8_t* call = code.code.data() + off - kCallR10;
    const uint8_t* mov = call - kMovR10;
    if (call[0] != 0x41 || call[1] != 0xff || call[2] != 0xd2 || mov[0] != 0x49 || mov[1] != 0xba) return false;
    std::memcpy(&target, mov + 2, sizeof target);
    return true;
}

// Whether any call instruction ends at `ret` in `code`: e8 rel32, `call reg` (ff /2, mod 11, with or
// without REX.B: C2's `call r10` after `mov r10, imm64`), `call [rip + disp32]`. Native code that
// returns into compiled code was called from it; a pc from a stale frame-pointer chain rarely has one.
bool any_call_ends_at(const CodeLoad& code, uint64_t ret) {
    const uint64_t off = ret - code.code_begin;
    if (off > code.code.size()) return false;
    uint64_t target = 0;
    if (call_target(code, ret, target)) return true;
    const uint8_t* end = code.code.data() + off;
    if (off >= 2 && end[-2] == 0xff && (end[-1] & 0xf8) == 0xd0) return true;
    if (off >= 6 && end[-6] == 0xff && end[-5] == 0x15) return true;
    return false;
}

bool ends_with(const std::string& s, std::string_view tail) {
    return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}
bool starts_with(const std::string& s, std::string_view head) { return s.compare(0, head.size(), head) == 0; }

using detail::calls_into_vm;

// The same, and the stubs that resolve a call or miss an inline cache: a compiled call goes to
// them (so they are fine as a call's target) but they jump on to the method found, and no Java
// frame returns into them.
bool no_java_returns_into(const Stub* stub) {
    if (!stub) return false;
    const std::string& n = stub->name;
    return calls_into_vm(stub) || starts_with(n, "Shared Runtime ") || n.find("resolve") != std::string::npos ||
           n.find("wrong_method") != std::string::npos || n.find("ic_miss") != std::string::npos;
}

// These, from the name once per stub announcement (the map's memo for it): a walk asks them of
// each return address into a stub and each call target in a stub, a dozen string comparisons.
constexpr uint8_t kMemoSet = 1, kMemoCallsIntoVm = 2, kMemoNoJavaReturns = 4, kMemoReturnBarrier = 8, kMemoRbpFrame = 16,
                  kMemoUpcall = 32, kMemoCallStub = 64, kMemoAdapters = 128;
uint8_t stub_facts(const CodeMap& map, const Stub* stub) {
    uint8_t& memo = map.stub_memo(stub);
    if (memo == 0) {
        memo = static_cast<uint8_t>(kMemoSet | (calls_into_vm(stub) ? kMemoCallsIntoVm : 0) |
                                    (no_java_returns_into(stub) ? kMemoNoJavaReturns : 0) |
                                    (detail::is_continuation_return_barrier(stub) ? kMemoReturnBarrier : 0) |
                                    (detail::builds_rbp_frame(stub) ? kMemoRbpFrame : 0) |
                                    (detail::is_upcall_stub(stub) ? kMemoUpcall : 0) |
                                    (detail::is_call_stub(stub) ? kMemoCallStub : 0) |
                                    (detail::is_adapter_blob(stub) ? kMemoAdapters : 0));
    }
    return memo;
}
bool calls_into_vm(const CodeMap& map, const Stub* stub) { return stub && (stub_facts(map, stub) & kMemoCallsIntoVm); }
bool no_java_returns_into(const CodeMap& map, const Stub* stub) {
    return stub && (stub_facts(map, stub) & kMemoNoJavaReturns);
}
bool is_continuation_return_barrier(const CodeMap& map, const Stub* stub) {
    return stub && (stub_facts(map, stub) & kMemoReturnBarrier);
}
bool builds_rbp_frame(const CodeMap& map, const Stub* stub) { return stub && (stub_facts(map, stub) & kMemoRbpFrame); }
bool is_upcall_stub(const CodeMap& map, const Stub* stub) { return stub && (stub_facts(map, stub) & kMemoUpcall); }
bool is_call_stub(const CodeMap& map, const Stub* stub) { return stub && (stub_facts(map, stub) & kMemoCallStub); }
bool is_adapter_blob(const CodeMap& map, const Stub* stub) { return stub && (stub_facts(map, stub) & kMemoAdapters); }

// The DecodeStats counters a step can bump, each at most once per step (a journal keeps them as bits).
enum Counter : uint8_t {
    kPrologueTops, kEpilogueTops, kPartialInterpreterTops, kEntryFramesCrossed, kStubScans, kNativeFrames,
    kLibunwindSteps, kRbpSteps, kBreadcrumbsUsed, kNativeRescans, kDeoptFrames, kUnannouncedCode, kSpMoved,
    kRejectNoCall, kRejectBadTarget, kRejectVmStub, kUnknownMethodPassed, kStubRbpFrames, kReturnBarriers, kStubContinuations, kSignalFrames, kLeafTops, kEntryNativeRuns, kEntryNativeFallbacks,
    kThreadNativeRoots, kI2cPoppedTops, kInterpreterReturnTops, kStubVmPushes, kDeoptRebuildingFrames, kScansPassedOver, kCounterCount
};
static_assert(kCounterCount <= 32, "a journal keeps the counters of a step in 32 bits");
// The step counters are the first kCounterCount rows of kDecodeStatFields, in this enum's order.
constexpr auto kCounterFields = [] {
    std::array<uint64_t DecodeStats::*, kCounterCount> fields{};
    for (size_t c = 0; c < kCounterCount; ++c) fields[c] = kDecodeStatFields[c].field;
    return fields;
}();
static_assert(kCounterFields[kPrologueTops] == &DecodeStats::prologue_tops &&
                  kCounterFields[kUnannouncedCode] == &DecodeStats::unannounced_code_steps &&
                  kCounterFields[kRejectVmStub] == &DecodeStats::returns_rejected_vm_stub &&
                  kCounterFields[kUnknownMethodPassed] == &DecodeStats::unknown_methods_passed &&
                  kCounterFields[kStubRbpFrames] == &DecodeStats::stub_rbp_frames &&
                  kCounterFields[kReturnBarriers] == &DecodeStats::return_barriers_crossed &&
                  kCounterFields[kStubContinuations] == &DecodeStats::stub_continuations &&
                  kCounterFields[kSignalFrames] == &DecodeStats::signal_frames &&
                  kCounterFields[kLeafTops] == &DecodeStats::native_leaf_tops &&
                  kCounterFields[kEntryNativeFallbacks] == &DecodeStats::entry_native_fallbacks &&
                  kCounterFields[kThreadNativeRoots] == &DecodeStats::thread_native_roots &&
                  kCounterFields[kI2cPoppedTops] == &DecodeStats::i2c_popped_tops &&
                  kCounterFields[kInterpreterReturnTops] == &DecodeStats::interpreter_return_tops &&
                  kCounterFields[kStubVmPushes] == &DecodeStats::stub_vm_pushes &&
                  kCounterFields[kDeoptRebuildingFrames] == &DecodeStats::deopt_rebuilding_frames &&
                  kCounterFields[kScansPassedOver] == &DecodeStats::scans_passed_over,
              "kDecodeStatFields starts with the step counters, in Counter's order");

// WalkState::flags
enum : uint8_t {
    kViaAnchor = 1, kViaNative = 2, kAfterJava = 4, kBreadcrumbUsed = 8, kInNativeRun = detail::kInNativeRunFlag,
    kNativeRescanned = 32,
    kInterrupted = 64,
    kUnpacking = 128,   // at a frame a deoptimization blob pushed (Walk::unpacking_)
    // Flags only a step into code the map does not know reads (step() and the native fallbacks);
    // a record that did not read them is taken over whatever they are. The last two last the walk.
    kSticky = kBreadcrumbUsed | kNativeRescanned,
    kLoose = kAfterJava | kSticky,
};
}  // namespace

// One decode: the walk state and the rules per frame kind. Lives on the stack of decode().
class Walk {
public:
    // `previous`: the thread's last walk, usable for this sample (or null); `journal`: where this walk
    // is recorded for the next sample (null: not recorded).
    Walk(Decoder& decoder, const Sample& sample, CallTrace& out, const detail::WalkJournal* previous = nullptr,
         detail::WalkJournal* journal = nullptr)
        : d_(decoder), map_(decoder.map_), sample_(sample), out_(out),
          view_(sample.stack_sp, sample.stack.data(), sample.stack.size()), previous_(previous), journal_(journal) {}

    void run();
    // Where the walk took over the rest of `previous` in one piece (spliced() then says so): the
    // caller joins this walk's journal (the steps before) with previous's steps from there on.
    bool spliced() const { return splice_valid_; }
    bool fragment_full() const { return fragment_full_; }
    // The sp the walk's last step started from: after a complete walk, its outermost frame's.
    uint64_t outermost_sp() const { return last_step_sp_; }
    const detail::Splice& splice() const { return splice_; }

private:
    enum class Step : uint8_t { kContinue, kStop };

    // --- incremental decoding (walk_journal.hpp) ---
    enum class Reuse : uint8_t { kNone, kAdvanced, kFinished };
    detail::WalkState state() const;
    void restore(const detail::WalkState& at, int64_t delta, int64_t native_delta);
    void prefetch_fragment() const;
    Reuse reuse_previous();
    bool take_over_rest(size_t from, int64_t delta, int64_t native_delta, uint8_t loose_diff, bool run_diff);
    bool replayable(const detail::StepRecord& r, int64_t delta, int64_t native_delta, bool has_next,
                    uint8_t loose_diff, bool run_diff) const;
    void keep(const detail::StepRecord& r, const uint8_t* bytes);
    void keep_bytes(detail::StepRecord& kept, const uint8_t* bytes);
    void begin_step();
    void end_step(Step s);
    // The counters a step taken over bumped when it was walked (one bit each).
    void add_counters(uint32_t bits) {
        for (; bits != 0; bits &= bits - 1) ++(d_.stats_.*kCounterFields[static_cast<size_t>(__builtin_ctz(bits))]);
    }
    void bump(Counter c) {
        ++(d_.stats_.*kCounterFields[c]);
        if (step_counters_ & (1u << c)) step_edge_ = true;   // twice in one step: the bits cannot say
        step_counters_ = step_counters_ | (1u << c);
    }
    // addr >= the fragment's end: a question about where the fragment ends, which the journal cannot
    // show to have the same answer in another snapshot, so the step is always walked.
    bool beyond_end(uint64_t addr) {
        step_edge_ = true;
        return addr >= view_.end();
    }

    // --- outcome ---
    // The frames the steps before this one found stay (the profile shows them under a marker);
    // what this step pushed before it failed is dropped.
    Step fail(FailReason reason) {
        out_.status = TraceStatus::kFailed;
        out_.failure = reason;
        count_ = std::min(count_, step_first_frame_);
        return Step::kStop;
    }
    Step complete() {
        out_.status = TraceStatus::kComplete;
        out_.failure = FailReason::kNone;
        return Step::kStop;
    }
    // The walk needs `addr`, which is not in the fragment: running off the top of a full fragment is
    // an incomplete trace, anything else is a failure.
    Step off_fragment(uint64_t addr, FailReason otherwise = FailReason::kSpOutOfFragment) {
        if (beyond_end(addr) && fragment_full_ && addr - view_.end() < kMaxStackBeyondFragment) {
            out_.status = TraceStatus::kIncomplete;
            out_.failure = FailReason::kNone;
            d_.boundary_sp_ = sp_;   // for stitching (StreamDecoder)
            return Step::kStop;
        }
        return fail(otherwise);
    }

    bool push_frame(FrameKind kind, uint64_t method_id, int32_t bci, int32_t level, uint64_t pc) {
        step_peak_ = std::max(step_peak_, count_);
        if (count_ >= d_.max_frames_) return false;
        if (count_ >= out_.frames.size()) out_.frames.emplace_back();
        Frame& f = out_.frames[count_++];
        f.kind = kind;
        f.method_id = method_id;
        f.bci = bci;
        f.comp_level = level;
        f.pc = pc;
        f.sp_moved = false;
        f.signal_frame = false;
        f.symbol.clear();
        return true;
    }
    Frame& last_frame() { return out_.frames[count_ - 1]; }

    // Continue the walk at (pc, sp, fp) as a caller frame.
    Step go_to(uint64_t pc, uint64_t sp, uint64_t fp) {
        if (sp <= sp_) return fail(FailReason::kSpNotIncreasing);
        return move_to(pc, sp, fp);
    }

    // The one step that keeps sp: a top frame that has popped its return address (an i2c adapter
    // past `pop rax`, an interpreter frame past `mov rsp, rbx`) takes no stack, and its caller's sp
    // is the sample's. Only at the top, so the walk still moves up at every other step.
    Step go_to_from_popped_top(uint64_t pc, uint64_t fp) {
        if (!top_) return fail(FailReason::kSpNotIncreasing);
        return move_to(pc, sp_, fp);
    }

    Step move_to(uint64_t pc, uint64_t sp, uint64_t fp) {
        pc_ = pc;
        sp_ = sp;
        fp_ = fp;
        top_ = false;
        interrupted_ = false;
        context_ = 0;
        via_anchor_ = false;
        via_native_ = false;
        in_native_run_ = false;
        return Step::kContinue;
    }

    bool is_return_target(uint64_t pc) const {
        // Most words scanned are data: reject everything outside the code cache and interpreter
        // before the interval lookups.
        const VmInfo& vm = map_.vm();
        if (vm.code_cache_high > vm.code_cache_low && !map_.in_code_cache(pc) && !map_.in_interpreter(pc) &&
            pc != vm.call_stub_return) {
            return false;
        }
        return returns_into(map_.find_code(pc, time_).region);
    }
    // Code a return address may lead into (code-cache memory nobody announced is not such code).
    static bool returns_into(CodeRegion r) {
        return r == CodeRegion::kInterpreter || r == CodeRegion::kCompiled || r == CodeRegion::kStub ||
               r == CodeRegion::kCallStubReturn;
    }

    Step step();
    Step step_entry();
    void native_frames_to_anchor(uint64_t last_sp);
    void native_roots_of_attached_thread();
    detail::NativeUnwinder::Outcome push_native_and_step(uint64_t pc, uint64_t sp, uint64_t fp, bool rbp_fallback,
                                                         detail::NativeStep& next);
    // A caller frame met before (most native frames) steps from its memo line, as step_dwarf would
    // by the same CFI rule, reading the same words: its facts when that step moves up (`next`),
    // else null and the full step decides. take_known_caller names the frame just pushed for it.
    const detail::NativeUnwinder::CallerFacts* step_known_caller(uint64_t pc, uint64_t sp, uint64_t fp,
                                                                 detail::NativeStep& next) const {
        if (!d_.native_ || !d_.options_.use_libunwind) return nullptr;
        const auto* facts = d_.native_->caller_facts(pc);
        return facts && detail::NativeUnwinder::step_by(*facts, view_, sp, fp, next) && next.sp > sp ? facts : nullptr;
    }
    void take_known_caller(const detail::NativeUnwinder::CallerFacts& facts) {
        if (d_.options_.symbolize_native) last_frame().symbol = facts.symbol;
        d_.native_->note_caller_step();
    }
    bool breadcrumb_names(uint64_t from, uint64_t java_sp);
    Step step_interpreted();
    bool step_partial_interpreted(Step& result);
    bool step_interpreter_return(Step& result);
    Step emit_interpreted(const MethodInfo& method, int32_t bci);
    Step step_compiled(const CompiledCode& code);
    [[gnu::always_inline]] Step return_to_caller(uint64_t ret_slot, bool fp_saved, uint64_t fp_slot);
    // Pushes the Java frames of one PcDesc's scope, innermost first: kNone, or why not (a malformed
    // record: kNoPcDesc; max_frames reached: kTooDeep).
    FailReason push_scope(const CodeLoad& nm, const PcScope& scope, uint64_t pc);
    void frames_at_pc_alone();
    // Whether the call ending at `ret` in `nm` is C1's exception handler entry calling Runtime1's
    // handle_exception_from_callee: no PcDesc follows it, the frame is the method's own.
    bool calls_c1_exception_search(const CodeLoad& nm, uint64_t ret) const;
    enum class ReturnCheck : uint8_t { kOk, kNoCall, kBadTarget, kVmStub };
    ReturnCheck check_return(uint64_t ret) const;
    // CodeMap::scope_at for `pc` in `code`, remembered per call site (Decoder::CallSite).
    const PcScope* scope_at_pc(const CompiledCode& code, uint64_t pc) const;
    bool accept_return(uint64_t ret);
    int32_t choose_delta(const detail::SpRange& range, uint64_t sp, int32_t fs);
    Step step_stub(const Stub* stub);
    // `callee`: the stub being left, when known; a call to it vouches for a return address without a PcDesc.
    bool scan_for_caller(uint64_t from, size_t max_words, uint64_t& pc, uint64_t& sp, uint64_t& fp,
                         const Stub* callee = nullptr);
    bool plausible_caller(uint64_t pc, uint64_t sp, uint64_t fp_hint, uint64_t& fp_out, const Stub* callee);
    Step step_native();
    bool plausible_native_pc(uint64_t pc) const;
    bool in_module_code(uint64_t pc) const;   // in an announced module, outside the code cache
    bool returns_after_call(const detail::NativeStep& next);
    bool rescan_native_run();
    bool try_breadcrumb();
    bool breadcrumb_thunk_frame(uint64_t ret) const;
    static InternedName thunk_name();

    Decoder& d_;
    const CodeMap& map_;
    const Sample& sample_;
    CallTrace& out_;
    detail::StackView view_;
    size_t count_ = 0;
    size_t step_first_frame_ = 0;   // count_ when the current step began
    size_t native_frames_ = 0;
    uint64_t time_ = 0;
    bool fragment_full_ = true;
    uint64_t last_step_sp_ = 0;

    uint64_t pc_ = 0, sp_ = 0, fp_ = 0;
    bool top_ = true;
    // A frame a signal interrupted, reached through the signal trampoline: decoded as a top frame
    // (its pc is no return address), but the sample's other registers are not its registers: its
    // own are in the signal's saved context, whose general registers begin at `context_` in the
    // fragment (0: not an interrupted frame, or the context lies outside the fragment).
    bool interrupted_ = false;
    uint64_t context_ = 0;
    // This frame's registers beyond pc, sp and rbp (r13, rbx, rax) are known: the sample's, at its
    // true top, or a signal's context.
    bool own_registers() const { return top_ && (!interrupted_ || context_ != 0); }
    // The step may read the sample's registers, which no journal keeps: it is kept out of the
    // journal. (A signal's context is read from the fragment, like any other slot.)
    bool reads_sample_registers() const { return top_ && !interrupted_; }
    // Those registers (pc, sp and rbp are the walk's); only where own_registers().
    Registers frame_registers() const;
    bool via_anchor_ = false;   // reached through a JavaFrameAnchor: pc need not be a call site
    bool via_native_ = false;   // reached by unwinding native code: sp derived from a frame pointer
    bool after_java_ = false;   // the previous frame was Java: this pc must be Java code or a stub
    bool breadcrumb_used_ = false;
    // The frame is one a deoptimization blob pushed and may not have filled in yet: the blob, or an
    // interpreter frame above it, returned here (step_stub, step_interpreted). step() takes it over
    // into step_unpacking_ for the step it makes.
    bool unpacking_ = false;
    bool step_unpacking_ = false;
    // The current run of native frames: where it started, to rescan from there when unwinding it
    // fails (the frames walked so far are then dropped, except the first).
    bool in_native_run_ = false;
    bool native_rescanned_ = false;
    uint64_t native_run_sp_ = 0;
    size_t native_run_first_frame_ = 0;

    // Incremental decoding.
    const detail::WalkJournal* previous_;
    detail::WalkJournal* journal_;
    size_t previous_pos_ = 0;       // the first step of previous_ not behind the walk
    uint64_t last_lookup_sp_ = 0;
    bool reused_ = false;
    detail::ViewAccess access_;     // the current step's questions to the view
    CodeMap::LookupKeys lookups_;   // and to the code map
    detail::WalkState step_start_;
    bool step_recorded_ = false;
    bool step_edge_ = false;
    bool step_consults_flags_ = false;
    bool step_consults_run_ = false;   // the step read where the current run of native frames began
    bool journal_reset_ = false;    // a rescan dropped frames found earlier: the journal starts over
    uint32_t step_counters_ = 0;
    size_t step_peak_ = 0;
    detail::Splice splice_;
    bool splice_valid_ = false;
    // check_return's last lookup: a caller frame's step asks find_code about the same pc again.
    mutable uint64_t checked_pc_ = 0;
    mutable CodeLookup checked_code_;
};

namespace {
// The lines of the fragment a walk from `sp` will read, asked for at once so that their misses
// overlap: a walk reads the fragment one dependent step after another, and the fragment lies in
// memory no core has touched lately (the reader copied it on another CPU a batch ago; bench_decode
// holds it among a whole recording's). Two sets: the lines from sp up (the top frames, which no journal
// knows) and the lines the thread's last walk read, one frame apart (most are read again, by the
// steps walked or compared by the take-over; perf annotate once put 80 % of take_over_rest's time
// on its first load of a frame's words). The first set is asked for first when the walk starts now
// (its first steps need it), the second first a decode ahead: on this machine (an AMD EPYC guest,
// docs/benchmarks.md) a long run of prefetches lost its tail, and the take-over's lines matter more.
void prefetch_lines(const detail::StackView& view, uint64_t sp, uint64_t bytes_above_sp,
                    const detail::WalkJournal* previous, bool journal_first) {
    const auto journal_lines = [&] {
        if (!previous) return;
        for (const detail::StepRecord& r : previous->steps) {
            const detail::ViewAccess& a = r.access;
            if (a.read_hi > a.read_lo && a.read_lo >= view.begin() && a.read_lo < view.end()) {
                __builtin_prefetch(view.data() + (a.read_lo - view.begin()));
            }
        }
    };
    if (journal_first) journal_lines();
    const uint64_t end = std::min(view.end(), sp + bytes_above_sp);
    for (uint64_t line = sp & ~uint64_t{63}; line < end; line += 64) {
        if (line >= view.begin()) __builtin_prefetch(view.data() + (line - view.begin()));
    }
    if (!journal_first) journal_lines();
}
}  // namespace

void Walk::prefetch_fragment() const {
    if (d_.fragment_prefetched_) return;   // Decoder::prefetch asked for it a decode ago
    // 512 bytes above sp: 1024 and 2048 gained no more when asked for only as the walk starts.
    prefetch_lines(view_, sp_, 512, previous_, false);
}

void Walk::run() {
    out_.time_ns = sample_.time_ns;
    out_.tid = sample_.tid;
    out_.status = TraceStatus::kFailed;
    out_.failure = FailReason::kNone;
    time_ = sample_.time_ns;
    if (!map_.has_vm()) {
        fail(FailReason::kNoCodeMap);
    } else if (sample_.stack.empty()) {
        frames_at_pc_alone();
        // A thread the kernel has just made, sampled at its first instruction, the one after the
        // `syscall` in clone3, with sp at the very top of its new stack: there is nothing to copy
        // and nothing above to walk, so that one frame is its whole stack (httpserver, JDK 17:
        // 3 samples of a run's new threads, each empty_stack before). So too a few instructions on,
        // once the new thread has zeroed rbp (`xor ebp, ebp; and rsp, -16; mov rdi, r8`), at the
        // `call` whose push faults in its stack's first page, sampled in the kernel then: the page
        // is not there to copy (JDK 25 at 100 us: 4-5 empty_stack in every `java -version`).
        if (count_ == 1 && last_frame().kind == FrameKind::kNative && d_.native_ != nullptr &&
            (d_.native_->after_syscall(sample_.regs.ip) || sample_.regs.bp == 0) &&
            last_frame().symbol.str().find("clone") != std::string::npos) {
            complete();
        } else if (count_ >= 1 && d_.fragment_at_unwritten_page_) {
            // Below the thread's outermost frame, where its stack goes on: the copy stopped at sp's
            // page, never written yet, as a fragment cut at such a page further up is (the
            // probes at 100 us: 1-5 empty_stack a run, each a kernel sample of a push into a
            // fresh page). The top frame alone, incomplete.
            out_.status = TraceStatus::kIncomplete;
            out_.failure = FailReason::kNone;
        } else {
            fail(FailReason::kEmptyStack);
        }
    } else {
        const uint32_t wanted = map_.vm().sample_stack_bytes;
        fragment_full_ = fragment_is_full(sample_.stack.size(), wanted) || d_.fragment_at_unwritten_page_;
        pc_ = sample_.regs.ip;
        sp_ = sample_.regs.sp;
        fp_ = sample_.regs.bp;
        if (!view_.contains(sp_, 0) || sp_ == view_.end()) {
            fail(FailReason::kSpOutOfFragment);
        } else {
            prefetch_fragment();
            while (true) {
                if (previous_ && !reads_sample_registers() && reuse_previous() == Reuse::kFinished) break;
                if (journal_) begin_step();
                last_step_sp_ = sp_;
                step_first_frame_ = count_;
                const Step s = step();
                if (journal_) end_step(s);
                if (s == Step::kStop) break;
            }
            view_.record_into(nullptr);
            map_.set_lookup_log(nullptr);
        }
    }
    out_.frames.resize(count_);
    if (reused_) ++d_.stats_.incremental_samples;
}

// --- Incremental decoding (walk_journal.hpp) -------------------------------------------------------
//
// A step's outcome is a function of the walk state, the answers the stack view gives, the CodeMap
// and the sample's time. The journal keeps, per step, the state it started from and everything it
// asked of the view; a later walk that reaches the same state (with the same map epoch and a time
// the map answers alike) repeats such a step without walking it when the view answers the same
// questions alike: the same bytes at the addresses read, and the same in/out answers for the ranges
// probed. Frame indices may shift by `delta` (a deeper or shallower top); the step must then also
// stay on the same side of max_frames.

detail::WalkState Walk::state() const {
    detail::WalkState s;
    s.pc = pc_;
    s.sp = sp_;
    s.fp = fp_;
    s.count = static_cast<uint32_t>(count_);
    s.native_frames = static_cast<uint32_t>(native_frames_);
    if (in_native_run_) {   // the run's start matters only inside a run
        s.native_run_sp = native_run_sp_;
        s.native_run_first = static_cast<uint32_t>(native_run_first_frame_);
    }
    s.flags = static_cast<uint8_t>((via_anchor_ ? kViaAnchor : 0) | (via_native_ ? kViaNative : 0) |
                                   (after_java_ ? kAfterJava : 0) | (breadcrumb_used_ ? kBreadcrumbUsed : 0) |
                                   (in_native_run_ ? kInNativeRun : 0) | (native_rescanned_ ? kNativeRescanned : 0) |
                                   (interrupted_ ? kInterrupted : 0) | (unpacking_ ? kUnpacking : 0));
    s.context = interrupted_ ? context_ : 0;
    return s;
}

void Walk::restore(const detail::WalkState& at, int64_t delta, int64_t native_delta) {
    pc_ = at.pc;
    sp_ = at.sp;
    fp_ = at.fp;
    interrupted_ = at.flags & kInterrupted;
    context_ = interrupted_ ? at.context : 0;
    top_ = interrupted_;
    count_ = static_cast<size_t>(int64_t{at.count} + delta);
    native_frames_ = static_cast<size_t>(int64_t{at.native_frames} + native_delta);
    via_anchor_ = at.flags & kViaAnchor;
    via_native_ = at.flags & kViaNative;
    after_java_ = at.flags & kAfterJava;
    breadcrumb_used_ = at.flags & kBreadcrumbUsed;
    in_native_run_ = at.flags & kInNativeRun;
    native_rescanned_ = at.flags & kNativeRescanned;
    unpacking_ = at.flags & kUnpacking;
    if (in_native_run_) {
        native_run_sp_ = at.native_run_sp;
        // Modulo 2^32, as reuse_previous stored it: a run this walk began at a frame below delta was
        // kept as a wrapped (negative) count, which only this round trip brings back.
        native_run_first_frame_ = static_cast<uint32_t>(int64_t{at.native_run_first} + delta);
    }
}

namespace {
// Most steps read one or two words (a return address, a saved rbp): compared inline, where a call to
// memcmp for every step taken over cost more than the comparison.
bool same_bytes(const uint8_t* a, const uint8_t* b, uint64_t n) {
    uint64_t x = 0, y = 0;
    if (n == 8) {
        std::memcpy(&x, a, 8);
        std::memcpy(&y, b, 8);
        return x == y;
    }
    if (n == 16) {
        uint64_t x2 = 0, y2 = 0;
        std::memcpy(&x, a, 8);
        std::memcpy(&y, b, 8);
        std::memcpy(&x2, a + 8, 8);
        std::memcpy(&y2, b + 8, 8);
        return ((x ^ y) | (x2 ^ y2)) == 0;
    }
    return std::memcmp(a, b, n) == 0;
}
}  // namespace

// `loose_diff`: the kLoose flags in which this walk differs from the record's; after the first step
// taken over only the sticky ones can still differ.
bool Walk::replayable(const detail::StepRecord& r, int64_t delta, int64_t native_delta, bool has_next,
                      uint8_t loose_diff, bool run_diff) const {
    if (!r.reusable) return false;
    if (r.consults_flags && loose_diff != 0) return false;
    if (r.consults_run && run_diff) return false;
    if (!r.stopped && !has_next) return false;   // the state after it is not known
    // Where it ran off its fragment, a full one made it incomplete and another one failed.
    if (r.stopped && r.access.miss_above != UINT64_MAX && previous_->fragment_full != fragment_full_) return false;
    if (delta != 0 && ((r.stopped && r.failure == FailReason::kTooDeep) ||
                       int64_t{r.peak_count} + delta >= static_cast<int64_t>(d_.max_frames_))) {
        return false;
    }
    // A native step compared the count with max_native_frames: it must stay on the same side.
    if (native_delta != 0 && r.native_frames_after != r.at.native_frames &&
        (r.native_frames_after > d_.options_.max_native_frames ||
         int64_t{r.native_frames_after} + native_delta > static_cast<int64_t>(d_.options_.max_native_frames))) {
        return false;
    }
    const detail::ViewAccess& a = r.access;
    if (std::min(a.need_lo, a.read_lo) < view_.begin() || std::max(a.need_hi, a.read_hi) > view_.end()) {
        return false;   // a range found inside is not
    }
    if (a.miss_below_end > view_.begin() || a.miss_above <= view_.end()) return false;   // one outside is not
    if (a.read_hi > a.read_lo &&
        !same_bytes(view_.data() + (a.read_lo - view_.begin()), previous_->bytes.data() + r.bytes_offset,
                    a.read_hi - a.read_lo)) {
        return false;
    }
    return true;
}

Walk::Reuse Walk::reuse_previous() {
    const detail::FrontGapVector<detail::StepRecord>& steps = previous_->steps;
    if (sp_ < last_lookup_sp_) previous_pos_ = 0;   // a rescan went back down the stack
    last_lookup_sp_ = sp_;
    while (previous_pos_ < steps.size() && steps[previous_pos_].at.sp < sp_) ++previous_pos_;
    if (previous_pos_ == steps.size()) return Reuse::kNone;
    const detail::WalkState& then = steps[previous_pos_].at;
    if (then.sp != sp_) return Reuse::kNone;
    const detail::WalkState now = state();
    const int64_t delta = int64_t{now.count} - int64_t{then.count};
    const int64_t native_delta = int64_t{now.native_frames} - int64_t{then.native_frames};
    const uint8_t loose_diff = static_cast<uint8_t>((now.flags ^ then.flags) & kLoose);
    const uint8_t sticky_diff = static_cast<uint8_t>(loose_diff & kSticky);   // what still differs after a step
    if (now.pc != then.pc || now.fp != then.fp || now.context != then.context ||
        ((now.flags ^ then.flags) & ~kLoose) != 0) {
        return Reuse::kNone;
    }
    // Inside a run of native frames, where the run began (the top frame's sp, for a thread in native
    // code) may differ: only a step that rescans from there reads it. The difference lasts while the
    // steps taken over stay in that run; a later run begins at the same sp in both walks.
    bool run_diff = in_native_run_ && (now.native_run_sp != then.native_run_sp ||
                                       int64_t{now.native_run_first} - int64_t{then.native_run_first} != delta);
    if (journal_ && take_over_rest(previous_pos_, delta, native_delta, loose_diff, run_diff)) return Reuse::kFinished;
    size_t j = previous_pos_;
    for (; j < steps.size(); ++j) {
        const detail::StepRecord& r = steps[j];
        run_diff = run_diff && (r.at.flags & kInNativeRun);
        if (!replayable(r, delta, native_delta, j + 1 < steps.size(), j == previous_pos_ ? loose_diff : sticky_diff,
                        run_diff)) {
            break;
        }
        // The step's frames, counters and journal entry, as walking it would have produced them.
        for (uint32_t c = r.at.count; c < r.count_after; ++c) {
            const size_t to = static_cast<size_t>(int64_t{c} + delta);
            if (to >= out_.frames.size()) out_.frames.emplace_back();
            out_.frames[to] = previous_->frames[c];
        }
        add_counters(r.counters);
        ++d_.stats_.steps_reused;
        d_.stats_.frames_reused += r.count_after - r.at.count;
        reused_ = true;
        if (journal_) {
            detail::StepRecord moved = r;
            moved.at.count = static_cast<uint32_t>(int64_t{r.at.count} + delta);
            if (moved.at.flags & kInNativeRun) {
                moved.at.native_run_first = static_cast<uint32_t>(int64_t{r.at.native_run_first} + delta);
            }
            if (run_diff) {   // this walk's run
                moved.at.native_run_sp = native_run_sp_;
                moved.at.native_run_first = static_cast<uint32_t>(native_run_first_frame_);
            }
            moved.at.native_frames = static_cast<uint32_t>(int64_t{r.at.native_frames} + native_delta);
            if (j != previous_pos_) moved.at.flags ^= sticky_diff;
            else moved.at.flags = now.flags;
            moved.count_after = static_cast<uint32_t>(int64_t{r.count_after} + delta);
            moved.peak_count = static_cast<uint32_t>(int64_t{r.peak_count} + delta);
            moved.native_frames_after = static_cast<uint32_t>(int64_t{r.native_frames_after} + native_delta);
            keep(moved, previous_->bytes.data() + r.bytes_offset);
        }
        if (r.stopped) {
            last_step_sp_ = r.at.sp;
            count_ = static_cast<size_t>(int64_t{r.count_after} + delta);
            native_frames_ = static_cast<size_t>(int64_t{r.native_frames_after} + native_delta);
            out_.status = r.status;
            out_.failure = r.failure;
            return Reuse::kFinished;
        }
    }
    if (j == previous_pos_) return Reuse::kNone;
    // Step j must be walked: continue from the state it started from (this walk's sticky flags).
    detail::WalkState at = steps[j].at;
    at.flags ^= sticky_diff;
    if (run_diff) {   // still in the run this walk began itself
        at.native_run_sp = native_run_sp_;
        at.native_run_first = static_cast<uint32_t>(static_cast<int64_t>(native_run_first_frame_) - delta);
    }
    restore(at, delta, native_delta);
    previous_pos_ = j;
    return Reuse::kAdvanced;
}

// The common case, the whole rest of the last walk unchanged: checked first, and then taken over
// without copying its records (the caller splices them into the journal in place).
bool Walk::take_over_rest(size_t from, int64_t delta, int64_t native_delta, uint8_t loose_diff, bool run_diff) {
    const detail::FrontGapVector<detail::StepRecord>& steps = previous_->steps;
    const size_t n = steps.size();
    if (journal_->steps.size() + (n - from) > detail::WalkJournal::kMaxSteps) return false;
    const uint8_t sticky_diff = static_cast<uint8_t>(loose_diff & kSticky);
    bool diff = run_diff;
    for (size_t k = from; k < n; ++k) {
        diff = diff && (steps[k].at.flags & kInNativeRun);
        if (!replayable(steps[k], delta, native_delta, k + 1 < n, k == from ? loose_diff : sticky_diff, diff)) {
            return false;
        }
    }
    const detail::StepRecord& last = steps[n - 1];   // stopped: replayable() wants that of the last
    last_step_sp_ = last.at.sp;
    const uint32_t first_frame = steps[from].at.count;
    out_.frames.resize(static_cast<size_t>(int64_t{last.count_after} + delta));
    for (uint32_t c = first_frame; c < last.count_after; ++c) {
        out_.frames[static_cast<size_t>(int64_t{c} + delta)] = previous_->frames[c];
    }
    for (size_t k = from; k < n; ++k) add_counters(steps[k].counters);
    d_.stats_.steps_reused += n - from;
    d_.stats_.frames_reused += last.count_after - first_frame;
    reused_ = true;
    count_ = static_cast<size_t>(int64_t{last.count_after} + delta);
    native_frames_ = static_cast<size_t>(int64_t{last.native_frames_after} + native_delta);
    out_.status = last.status;
    out_.failure = last.failure;
    splice_ = {from, delta, native_delta, sticky_diff, state().flags, run_diff, native_run_sp_,
               static_cast<uint32_t>(native_run_first_frame_)};
    splice_valid_ = true;
    return true;
}

// Appends a step to the journal with the bytes it read; one the journal has no room for is kept as a
// state only (a later walk may resume there but not take it over).
void Walk::keep(const detail::StepRecord& r, const uint8_t* bytes) {
    if (journal_->steps.size() >= detail::WalkJournal::kMaxSteps) return;
    keep_bytes(journal_->steps.emplace_back(r), bytes);
}

void Walk::keep_bytes(detail::StepRecord& kept, const uint8_t* bytes) {
    detail::WalkJournal& j = *journal_;
    const uint64_t size = kept.access.read_hi > kept.access.read_lo ? kept.access.read_hi - kept.access.read_lo : 0;
    if (!kept.reusable || size == 0) return;
    if (size > detail::WalkJournal::kMaxStepBytes || j.bytes.size() + size > detail::WalkJournal::kMaxBytes) {
        kept.reusable = false;
        return;
    }
    kept.bytes_offset = static_cast<uint32_t>(j.bytes.size());
    j.bytes.insert(j.bytes.end(), bytes, bytes + size);
}

void Walk::begin_step() {
    step_recorded_ = !reads_sample_registers();   // the top step reads registers no journal keeps
    view_.record_into(step_recorded_ ? &access_ : nullptr);
    if (!step_recorded_) return;
    lookups_ = {};
    map_.set_lookup_log(&lookups_);
    step_start_ = state();
    access_ = {};
    step_edge_ = false;
    step_consults_flags_ = false;
    step_consults_run_ = false;
    step_counters_ = 0;
    step_peak_ = count_;
}

void Walk::end_step(Step s) {
    map_.set_lookup_log(nullptr);
    if (journal_reset_) {   // frames found by earlier steps were dropped: their records are void
        journal_reset_ = false;
        journal_->steps.clear();
        journal_->bytes.clear();
        return;
    }
    if (!step_recorded_ || journal_->steps.size() >= detail::WalkJournal::kMaxSteps) return;
    detail::StepRecord& r = journal_->steps.emplace_back();
    r.at = step_start_;
    r.access = access_;
    r.count_after = static_cast<uint32_t>(count_);
    r.peak_count = static_cast<uint32_t>(step_peak_);
    r.native_frames_after = static_cast<uint32_t>(native_frames_);
    r.counters = step_counters_;
    r.reusable = !step_edge_;
    r.consults_flags = step_consults_flags_;
    r.consults_run = step_consults_run_;
    r.stopped = s == Step::kStop;
    r.status = out_.status;
    r.failure = out_.failure;
    r.lookups = lookups_;
    keep_bytes(r, r.access.read_hi > r.access.read_lo ? view_.data() + (r.access.read_lo - view_.begin()) : nullptr);
}

Walk::Step Walk::step() {
    step_unpacking_ = unpacking_;
    unpacking_ = false;
    if (count_ >= d_.max_frames_) return fail(FailReason::kTooDeep);
    if (!view_.before_end(sp_)) return off_fragment(sp_);
    CodeLookup code;
    if (pc_ == checked_pc_ && pc_ != 0) {   // the walk and the map are as they were when it was checked
        map_.note_code_lookup(pc_);
        code = checked_code_;
    } else {
        code = map_.find_code(pc_, time_);
    }
    switch (code.region) {
        case CodeRegion::kCallStubReturn: return step_entry();
        case CodeRegion::kInterpreter: return step_interpreted();
        case CodeRegion::kCompiled: return step_compiled(*code.compiled);
        case CodeRegion::kStub:
            if (pc_ == code.stub->begin && map_.continuation_return_pc() != 0 &&
                is_continuation_return_barrier(map_, code.stub)) {
                // A virtual thread's bottom thawed frame returned here: HotSpot's own sender of this
                // pc is Continuation.enterSpecial at the thread's ContinuationEntry return pc, at
                // the same sp (the entry lies there); the frames it froze are in the heap.
                bump(kReturnBarriers);
                pc_ = map_.continuation_return_pc();
                code = map_.find_code(pc_, time_);
                if (code.region == CodeRegion::kCompiled) return step_compiled(*code.compiled);
                return fail(FailReason::kBadReturnAddress);
            }
            return step_stub(code.stub);
        case CodeRegion::kUnknownCodeCache:
            bump(kUnannouncedCode);
            return step_stub(code.stub);
        case CodeRegion::kUnknown: break;
    }
    step_consults_flags_ = true;   // after_java_ here, the sticky flags in step_native()
    if (after_java_) return fail(FailReason::kBadReturnAddress);
    return step_native();
}

// --- Entry frames (§d) ---------------------------------------------------------------------------

Walk::Step Walk::step_entry() {
    namespace e = hs::entry;
    const uint64_t wrapper_slot = fp_ + words(e::kCallWrapperSlot);
    if (fp_ < sp_) return fail(FailReason::kBadEntryFrame);
    uint64_t wrapper = 0;
    if (!view_.read(wrapper_slot, wrapper)) return off_fragment(wrapper_slot, FailReason::kBadEntryFrame);
    // The JavaCallWrapper is a local of JavaCalls::call_helper, above the call stub's frame.
    if (wrapper <= fp_) return fail(FailReason::kBadEntryFrame);
    const uint64_t anchor = wrapper + e::kWrapperAnchorOffset;
    uint64_t last_sp = 0, last_pc = 0, last_fp = 0;
    if (!view_.contains(anchor, e::kAnchorBytes)) {
        return off_fragment(anchor + e::kAnchorBytes - 1, FailReason::kBadEntryFrame);   // also one that crosses the end
    }
    view_.read(anchor + e::kAnchorLastJavaSp, last_sp);
    view_.read(anchor + e::kAnchorLastJavaPc, last_pc);
    view_.read(anchor + e::kAnchorLastJavaFp, last_fp);
    bump(kEntryFramesCrossed);
    if (last_sp == 0) {
        native_roots_of_attached_thread();
        return complete();
    }
    if (last_sp <= fp_) return fail(FailReason::kBadEntryFrame);
    if (last_pc == 0) {
        const uint64_t pc_slot = last_sp + e::kPcBelowLastJavaSp;
        if (!view_.read(pc_slot, last_pc)) return off_fragment(pc_slot, FailReason::kBadEntryFrame);
    }
    native_frames_to_anchor(last_sp);
    Step s = go_to(last_pc, last_sp, last_fp);
    via_anchor_ = true;
    after_java_ = true;   // the anchor names the last Java frame
    return s;
}

// A JNI upcall or a call from the VM into Java: the native frames between the call stub and the
// Java frame the anchor names (JavaCalls::call_helper … jni_CallVoidMethod … the JNI code that called
// it; or … InstanceKlass::call_class_initializer … InterpreterRuntime::_new), unwound from the call
// stub's rbp frame. They are kept only where the unwinding comes out in code-cache code at most
// kAnchorSlackWords below the anchor's sp, where the call the anchor was set for left it: a native
// wrapper's call into JNI code exactly there, the interpreter's and the stubs' calls into the VM
// after a return address of their own or a 16-byte alignment; or at a breadcrumb thunk whose
// record names the anchor's sp. Anything else (no unwind row, code in no module, an unwinding that
// passes the anchor) leaves them out, and the walk goes on at the anchor as before: the Java frames
// do not depend on it.
void Walk::native_frames_to_anchor(uint64_t last_sp) {
    constexpr uint64_t kAnchorSlackWords = 4;
    if (!d_.native_) return;
    uint64_t pc = 0, fp = 0, sp = fp_ + 2 * kWord;
    if (!view_.read(fp_ + kWord, pc) || !view_.read(fp_, fp)) return;
    for (size_t frames = 0; sp <= last_sp && frames < d_.options_.max_native_frames; ++frames) {
        if (map_.find_code(pc, time_).region != CodeRegion::kUnknown) {
            if (last_sp - sp > words(kAnchorSlackWords)) break;
            bump(kEntryNativeRuns);
            return;
        }
        if (!in_module_code(pc)) {
            // The JNI function was bound through a breadcrumb thunk (§5), which called it (or the
            // VM function it tail-called): the thunk's record names the Java frame it was called from.
            if (breadcrumb_names(sp, last_sp)) {
                bump(kEntryNativeRuns);
                return;
            }
            break;
        }
        detail::NativeStep next;
        if (push_native_and_step(pc, sp, fp, true, next) != detail::NativeUnwinder::Outcome::kStepped ||
            !returns_after_call(next)) {
            break;
        }
        pc = next.pc;
        sp = next.sp;
        fp = next.fp;
    }
    count_ = step_first_frame_;
    bump(kEntryNativeFallbacks);
}

// The short native walks inside an entry frame's step (native_frames_to_anchor,
// native_roots_of_attached_thread): pushes the native frame at pc and unwinds it by its module's
// unwind row, else, with `rbp_fallback`, by the rbp chain. kStepped leaves a caller above sp that
// no signal interrupted in `next`; kEnd: the row ends the stack (never with rbp_fallback, which
// tries the chain there too).
detail::NativeUnwinder::Outcome Walk::push_native_and_step(uint64_t pc, uint64_t sp, uint64_t fp, bool rbp_fallback,
                                                           detail::NativeStep& next) {
    using Outcome = detail::NativeUnwinder::Outcome;
    if (!push_frame(FrameKind::kNative, 0, -1, 0, pc)) return Outcome::kFailed;
    if (const auto* facts = step_known_caller(pc, sp, fp, next)) {
        take_known_caller(*facts);
        return Outcome::kStepped;
    }
    if (d_.options_.symbolize_native) last_frame().symbol = d_.native_->caller_symbol(pc);
    const Outcome outcome = d_.options_.use_libunwind ? d_.native_->step_dwarf(view_, pc, sp, fp, false, next)
                                                      : Outcome::kFailed;
    if (outcome == Outcome::kStepped && next.sp > sp && !next.interrupted) {
        d_.native_->learn_caller(pc);
        return Outcome::kStepped;
    }
    if (!rbp_fallback) return outcome == Outcome::kEnd ? Outcome::kEnd : Outcome::kFailed;
    uint64_t saved_fp = 0, ret = 0;
    if (fp < sp || (fp & 7) != 0 || !view_.read(fp, saved_fp) || !view_.read(fp + kWord, ret)) return Outcome::kFailed;
    next = {ret, fp + 2 * kWord, saved_fp};
    return next.sp > sp ? Outcome::kStepped : Outcome::kFailed;
}

namespace {
// The JDK a module belongs to, from libjvm's path: ".../lib/server/libjvm.so" -> ".../".
std::string_view jdk_root_of(std::string_view libjvm_path) {
    const size_t lib = libjvm_path.rfind("/lib/");
    return lib == std::string_view::npos ? std::string_view{} : libjvm_path.substr(0, lib + 1);
}
// Code of neither the JDK (libjvm, the launcher's libjli) nor glibc's thread start.
bool application_module(const ModuleMap& module, std::string_view jdk_root) {
    const std::string_view path = module.path;
    if (!jdk_root.empty() && path.starts_with(jdk_root)) return false;
    const std::string_view file = path.substr(path.rfind('/') + 1);
    return !file.starts_with("libc.so") && !file.starts_with("ld-linux") && !file.starts_with("libpthread");
}
}  // namespace

// The thread's first entry frame: below it, the native code that entered Java. For a thread the VM
// started (a Thread's run(), the launcher's main) that is the JDK's own code and glibc's thread
// start, the same for every thread, and the trace ends at the entry frame as before. A native
// thread a library attached through JNI (AttachCurrentThread, then CallStaticVoidMethod: its
// callback thread) is entered from the application's code, which is where that thread's Java time
// comes from: those frames, from JavaCalls::call_helper down to the thread's first frame, are kept
// when native unwinding gets there (the module's unwind row ends the stack) and one of them lies
// in neither the JDK nor glibc.
void Walk::native_roots_of_attached_thread() {
    if (!d_.native_) return;
    // Known for this thread and entry frame: the same frames lie below it (the thread's start).
    const auto known = d_.vm_started_entry_fp_.find(sample_.tid);
    if (known != d_.vm_started_entry_fp_.end() && known->second == fp_) return;
    uint64_t pc = 0, fp = 0, sp = fp_ + 2 * kWord;
    if (!view_.read(fp_ + kWord, pc) || !view_.read(fp_, fp)) return;
    std::string_view jdk_root;
    bool application = false;
    for (size_t frames = 0; frames < d_.options_.max_native_frames; ++frames) {
        if (!in_module_code(pc)) break;
        const ModuleMap& module = *map_.module_at(pc);
        if (frames == 0) jdk_root = jdk_root_of(module.path);   // JavaCalls::call_helper's
        application = application || application_module(module, jdk_root);
        detail::NativeStep next;
        const auto outcome = push_native_and_step(pc, sp, fp, false, next);
        if (outcome == detail::NativeUnwinder::Outcome::kEnd) {
            if (application) {
                bump(kThreadNativeRoots);
                return;
            }
            constexpr size_t kMaxThreads = 4096;   // bounded, whatever the thread ids
            if (d_.vm_started_entry_fp_.size() >= kMaxThreads) d_.vm_started_entry_fp_.clear();
            d_.vm_started_entry_fp_[sample_.tid] = fp_;
            break;
        }
        if (outcome != detail::NativeUnwinder::Outcome::kStepped || !plausible_native_pc(next.pc)) break;
        pc = next.pc;
        sp = next.sp;
        fp = next.fp;
    }
    count_ = step_first_frame_;
}

// A breadcrumb record in [from, java_sp) whose Java sp is java_sp.
bool Walk::breadcrumb_names(uint64_t from, uint64_t java_sp) {
    namespace bc = breadcrumb;
    constexpr uint64_t kMaxThunkFrameWords = 32;
    if (java_sp - from > words(kMaxThunkFrameWords)) return false;
    for (uint64_t addr = (from + 7) & ~uint64_t{7}; addr + bc::kWords * kWord <= java_sp; addr += kWord) {
        uint64_t m0 = 0, m1 = 0, jsp = 0;
        if (view_.read(addr, m0) && m0 == bc::kMagic0 && view_.read(addr + kWord, m1) && m1 == bc::kMagic1 &&
            view_.read(addr + bc::kJavaSpOffset, jsp) && jsp == java_sp) {
            return true;
        }
    }
    return false;
}

// --- Interpreted frames (§a) ---------------------------------------------------------------------

Walk::Step Walk::emit_interpreted(const MethodInfo& method, int32_t bci) {
    if (!push_frame(FrameKind::kInterpreted, method.method_id, bci, 0, pc_)) return fail(FailReason::kTooDeep);
    return Step::kContinue;
}

Registers Walk::frame_registers() const {
    if (!interrupted_) return sample_.regs;
    Registers regs;
    regs.ip = pc_;
    regs.sp = sp_;
    regs.bp = fp_;
    // own_registers() saw the whole context inside the fragment.
    view_.read(detail::signal_context_greg_address(context_, REG_RAX), regs.ax);
    view_.read(detail::signal_context_greg_address(context_, REG_RBX), regs.bx);
    view_.read(detail::signal_context_greg_address(context_, REG_R13), regs.r13);
    view_.read(detail::signal_context_greg_address(context_, REG_R15), regs.r15);
    return regs;
}

// §a.4: the top pc is in a method-entry codelet and the callee's frame may be half built.
bool Walk::step_partial_interpreted(Step& result) {
    namespace in = hs::interp;
    const Registers regs = frame_registers();
    const uint64_t sp = sp_, fp = fp_;
    auto bci_at_entry = [](const MethodInfo& m) { return (m.access_flags & hs::kAccNative) ? -1 : 0; };

    // State 3, complete: decode normally.
    if (fp >= sp + in::kFixedFrameBytes) {
        uint64_t last_sp = 1, method = 0;
        if (view_.read(fp + words(in::kLastSp), last_sp) && view_.read(fp + words(in::kMethod), method) &&
            last_sp == 0 && map_.method_by_ptr(method, time_)) {
            return false;
        }
    }
    // State 2, linked but partial: never trust slots below sp.
    if (fp >= sp && fp < sp + in::kFixedFrameBytes) {
        uint64_t ret = 0, caller_fp = 0;
        if (view_.read(fp + words(in::kReturnAddress), ret) && is_return_target(ret) &&
            view_.read(fp + words(in::kSavedFp), caller_fp)) {
            uint64_t method_ptr = regs.bx;
            const uint64_t method_slot = fp + words(in::kMethod);
            if (method_slot >= sp) view_.read(method_slot, method_ptr);
            uint64_t caller_sp = regs.r13;
            const uint64_t sender_slot = fp + words(in::kSenderSp);
            if (sender_slot >= sp) view_.read(sender_slot, caller_sp);
            const MethodInfo* m = map_.method_by_ptr(method_ptr, time_);
            bump(kPartialInterpreterTops);
            if (!m) {
                result = fail(FailReason::kUnknownMethod);
                return true;
            }
            result = emit_interpreted(*m, bci_at_entry(*m));
            if (result == Step::kContinue) {
                result = go_to(ret, caller_sp, caller_fp);
                after_java_ = true;
            }
            return true;
        }
    }
    // State 1, not linked: Method* in rbx, sender sp in r13, return address at [sp] or in rax.
    // The caller's sp (r13) lies above a return address at [sp]; once it is popped into rax and
    // before any local is pushed, sp is r13 itself (a method without locals beyond its parameters,
    // called from the call stub: javac, 3 of ~190,000 samples failed there).
    uint64_t ret = 0;
    bool popped = false;
    if (!(view_.read(sp, ret) && is_return_target(ret))) {
        ret = regs.ax;
        if (!is_return_target(ret)) return false;
        popped = true;
    }
    if (popped ? regs.r13 < sp : regs.r13 <= sp) return false;
    const MethodInfo* m = map_.method_by_ptr(regs.bx, time_);
    if (!m) return false;
    bump(kPartialInterpreterTops);
    result = emit_interpreted(*m, bci_at_entry(*m));
    if (result == Step::kContinue) {
        result = regs.r13 == sp ? go_to_from_popped_top(ret, fp) : go_to(ret, regs.r13, fp);
        after_java_ = true;
    }
    return true;
}

// §a.5: the top pc is in a return template past `leave` (remove_activation: `mov rbx, [rbp-8]`
// (the sender sp); `leave`; `pop r13` (the return address); `mov rsp, rbx`; `jmp r13`). The frame
// is gone: its Method* lay below sp, out of the fragment, so the method that returns is unknown; rbp
// is the caller's again. An interpreted caller's rbp makes a frame, which step_interpreted decodes
// as the top (the callee has all but returned); a compiled caller's does not (C2 code keeps data in
// rbp), and the walk goes on at the return address, at [sp] before the `pop` and in r13 after it,
// with the sender sp in rbx as the caller's sp (the c2i adapter saved the compiled caller's sp
// there). Before the `pop` r13 still holds the callee's bcp, which no return target equals; after
// `mov rsp, rbx` [sp] is the caller's data, so it is looked at only while sp is below rbx. Seen with
// -XX:-TieredCompilation, where C2 code calls methods the interpreter still runs: areturn's last
// instructions, 2-5 samples in 10,000 on JDK 25, each bad_interpreter_frame before.
bool Walk::step_interpreter_return(Step& result) {
    const Registers regs = frame_registers();
    const uint64_t caller_sp = regs.bx;
    if (caller_sp < sp_ || (caller_sp & 7) != 0 || caller_sp - sp_ > hs::kMaxStackSpanBytes) return false;
    uint64_t candidates[2] = {regs.r13, 0};
    size_t count = 1;
    if (sp_ < caller_sp && view_.read(sp_, candidates[1])) count = 2;
    for (size_t i = 0; i < count; ++i) {
        const uint64_t ret = candidates[i];
        const CompiledCode* caller = map_.find_code(ret, time_).compiled;   // r13's bcp: none
        if (caller == nullptr || check_return(ret) != ReturnCheck::kOk || scope_at_pc(*caller, ret) == nullptr) continue;
        bump(kInterpreterReturnTops);
        if (!push_frame(FrameKind::kStub, 0, -1, 0, pc_)) {
            result = fail(FailReason::kTooDeep);
            return true;
        }
        static const InternedName kInterpreterName("Interpreter");
        last_frame().symbol = kInterpreterName;
        // Past `mov rsp, rbx` the sample's sp is the caller's: the frame that returns took none.
        result = caller_sp == sp_ ? go_to_from_popped_top(ret, fp_) : go_to(ret, caller_sp, fp_);
        after_java_ = true;
        return true;
    }
    return false;
}

Walk::Step Walk::step_interpreted() {
    namespace in = hs::interp;
    const hs::JdkFacts& jdk = map_.jdk();
    // A half-built frame is told from rbx, r13 and rax: the sample's registers, not an interrupted frame's.
    if (own_registers() && map_.in_method_entry_codelet(pc_)) {
        Step result = Step::kStop;
        if (step_partial_interpreted(result)) return result;
    }
    const uint64_t fp = fp_;
    if (fp < sp_ || (fp & 7) != 0 || (top_ && fp - sp_ < static_cast<uint64_t>(in::kFixedFrameBytes))) {
        Step result = Step::kStop;
        if (own_registers() && step_interpreter_return(result)) return result;
        return fail(FailReason::kBadInterpreterFrame);   // fp makes no frame, or slots below sp are stale
    }
    const uint64_t lowest = fp + words(in::kLowestFixedSlot);
    const uint64_t span = words(in::kReturnAddress - in::kLowestFixedSlot + 1);
    // The fixed slots are read as one range: every slot this step reads lies in it, and its two
    // ends (initial sp, return address) are read in any case.
    const uint8_t* fixed = view_.read_span(lowest, span);
    if (fixed == nullptr) {
        // Slots that cross the fragment's end (fp just below it, the return address above) run off
        // it as much as a frame wholly above it does.
        return lowest < view_.begin() ? fail(FailReason::kBadInterpreterFrame) : off_fragment(lowest + span - 1);
    }
    auto slot = [&](int word) {
        uint64_t v = 0;
        std::memcpy(&v, fixed + words(word - in::kLowestFixedSlot), sizeof v);
        return v;
    };
    // A frame a deoptimization is still building: the blob pushed its return address and rbp and
    // wrote its sender sp; Deoptimization::unpack_frames fills in the rest, frame by frame.
    auto unfilled = [&](FailReason why) {
        if (!step_unpacking_) return fail(why);
        const uint64_t caller_sp = slot(in::kSenderSp);
        const uint64_t caller_pc = slot(in::kReturnAddress);
        if (caller_sp < fp + words(in::kReturnAddress) || !accept_return(caller_pc)) return fail(why);
        if (!push_frame(FrameKind::kStub, 0, -1, 0, pc_)) return fail(FailReason::kTooDeep);
        static const InternedName kRebuilt(kRebuiltFrameName);
        last_frame().symbol = kRebuilt;
        bump(kDeoptRebuildingFrames);
        Step s = go_to(caller_pc, caller_sp, slot(in::kSavedFp));
        after_java_ = true;
        unpacking_ = true;
        return s;
    };
    const MethodInfo* method = map_.method_by_ptr(slot(in::kMethod), time_);
    if (!method) return unfilled(FailReason::kUnknownMethod);

    // Consistency of the fixed slots, whose encoding differs between JDK releases.
    const uint64_t locals = in::locals_address(jdk, fp, slot(in::kLocals));
    // &local0 is just above the return address, or on it for a method without locals.
    if (locals < fp + words(in::kReturnAddress) || locals - fp > words(65536 + 2)) {
        return unfilled(FailReason::kBadInterpreterFrame);
    }
    const uint64_t initial_sp_raw = slot(in::kInitialSp);
    // JDK 17 and 21 push the initial_sp slot as 0 and store it one instruction later (§a.4).
    const bool initial_sp_window = top_ && jdk.initial_sp_pushed_as_zero && initial_sp_raw == 0;
    if (!initial_sp_window) {
        const uint64_t initial_sp = in::initial_sp_address(jdk, fp, initial_sp_raw);
        if (initial_sp > lowest || initial_sp < sp_) return unfilled(FailReason::kBadInterpreterFrame);
    }

    int32_t bci = -1;
    if (!(method->access_flags & hs::kAccNative)) {
        auto in_code = [&](uint64_t bcp) {
            return bcp >= method->bytecode_begin && bcp - method->bytecode_begin < method->bytecode_size;
        };
        // The bcp slot is only saved when the frame calls out; the live bcp of the top frame is r13.
        uint64_t bcp = slot(in::kBcp);
        if (own_registers()) {
            const uint64_t r13 = frame_registers().r13;
            if (in_code(r13)) bcp = r13;
        }
        if (!in_code(bcp)) return unfilled(FailReason::kBadBci);
        bci = static_cast<int32_t>(bcp - method->bytecode_begin);
    }
    if (emit_interpreted(*method, bci) != Step::kContinue) return Step::kStop;

    const uint64_t caller_pc = slot(in::kReturnAddress);
    const uint64_t caller_sp = slot(in::kSenderSp);
    const uint64_t caller_fp = slot(in::kSavedFp);
    // The sender sp is the caller's sp at the call: at or above this frame's return address.
    if (caller_sp < fp + words(in::kReturnAddress)) return fail(FailReason::kBadInterpreterFrame);
    if (!accept_return(caller_pc)) return fail(FailReason::kBadReturnAddress);
    Step s = go_to(caller_pc, caller_sp, caller_fp);
    after_java_ = true;
    unpacking_ = step_unpacking_;   // the frames it fills in may come in any order
    return s;
}

// --- Compiled frames (§b, §c, §f) ----------------------------------------------------------------

// A compiled frame's caller: its return address (which must be a call site) and, where the frame
// saved it, the caller's rbp.
inline Walk::Step Walk::return_to_caller(uint64_t ret_slot, bool fp_saved, uint64_t fp_slot) {
    uint64_t caller_pc = 0, caller_fp = fp_;
    if (!view_.read(ret_slot, caller_pc)) return off_fragment(ret_slot);
    if (fp_saved && !view_.read(fp_slot, caller_fp)) return off_fragment(fp_slot);
    if (!accept_return(caller_pc)) return fail(FailReason::kBadReturnAddress);
    Step s = go_to(caller_pc, ret_slot + kWord, caller_fp);
    after_java_ = true;
    return s;
}

Walk::Step Walk::step_compiled(const CompiledCode& compiled) {
    namespace co = hs::compiled;
    const CodeLoad& nm = compiled.load;
    const int32_t fs = nm.frame_size_words;
    const bool wrapper = nm.kind == CodeKind::kNativeWrapper;
    const bool frameless = nm.kind == CodeKind::kMethodHandleIntrinsic || (wrapper && fs == 0);
    if (fs < 0 || fs > co::kMaxFrameWords || (!frameless && fs < 2)) return fail(FailReason::kBadFrameSize);

    // The most common frame: compiled Java code a Java callee returns to. Its sp is the walk's, the
    // PcDesc at the return address names it, and its code moved no rsp for the call: the general
    // path below with every branch that cannot apply left out (the same reads, lookups and flags).
    if (!top_ && after_java_ && !via_anchor_ && !wrapper && !frameless &&
        !detail::is_deopt_return(nm, pc_)) {
        const PcScope* scope = scope_at_pc(compiled, pc_);
        if (!scope) {
            step_consults_flags_ = true;
            return fail(FailReason::kNoPcDesc);
        }
        if (const FailReason why = push_scope(nm, *scope, pc_); why != FailReason::kNone) return fail(why);
        return return_to_caller(sp_ + words(fs - co::kReturnAddressFromTop), true,
                                sp_ + words(fs - co::kSavedFpFromTop));
    }

    uint64_t sp = sp_;
    // Reached from native code through the rbp chain: a wrapper's rbp fixes its sp (§d.3).
    if (via_native_ && wrapper && fs >= 2 && fp_ > sp_) {
        const uint64_t from_fp = hs::wrapper_sp_from_fp(fp_, fs);
        if (from_fp >= sp_ && from_fp < fp_) sp = from_fp;
    }

    uint64_t scope_pc = pc_;
    bool exact = !top_ && !via_anchor_;
    if (nm.orig_pc_offset >= 0 && detail::is_deopt_return(nm, pc_)) {
        const uint64_t slot = sp + static_cast<uint64_t>(nm.orig_pc_offset);
        uint64_t orig = 0;
        if (!view_.read(slot, orig)) return off_fragment(slot);
        if (!compiled.contains(orig)) return fail(FailReason::kNoPcDesc);
        scope_pc = orig;
        exact = true;
        bump(kDeoptFrames);
    }

    // Code that moved rsp (an intrinsic's pushes, arguments pushed around a stub call, a native
    // wrapper after `leave`): the frame's sp is above the current one (docs/decoding.md, "Moved sp").
    bool sp_moved = false;
    bool scope_before = false;   // inside an intrinsic: the PcDesc before the pc names its method
    detail::TopFrameShape shape;
    if (top_ && !frameless) shape = detail::analyze_top_frame(nm, pc_);
    // A caller frame's rsp is moved only where its code pushed arguments for a call: C1's calls into
    // Runtime1 stubs. C2 code and native wrappers call with rsp at the frame's sp (and the pass is
    // not run for code that only ever appears as a caller). A C1 frame whose callee was Java made a
    // Java call, with rsp at the frame's sp too: the pass (most of the decoder's work where
    // samples land in code not seen before) runs for it only after a stub or native callee.
    // C2 code's exception to that: a leaf call with no PcDesc from an out-of-line stub that saved
    // registers below the frame's sp first (ZGC's load barrier calling the runtime).
    const bool c1 = nm.comp_level >= 1 && nm.comp_level <= 3;
    const bool leaf_callee = !top_ && !after_java_ && !via_anchor_ &&
                             (c1 || !scope_at_pc(compiled, pc_));
    // A method-handle intrinsic too, whose frame is its return address alone: JDK 17's ZGC load
    // barrier in it pushes r12 (Mixed probe, `-XX:+UseZGC`, 1 ms: 10-17 samples at invokeBasic+0xa
    // a run read the pushed oop as the return address, bad_return_address). The pass finds no
    // ranges in other frameless code.
    if (!nm.code.empty() && shape.kind == detail::TopFrameShape::Kind::kComplete &&
        !detail::is_deopt_return(nm, pc_) && (top_ || leaf_callee)) {
        const detail::SpRange* range = sp_ranges_of(compiled).find(pc_ - nm.code_begin);
        if (range && range->call_pending && top_) {
            // A call stub of this code (`mov rbx, Method*; jmp`): the call's return address is at
            // [sp] and the frame is this code's own, at that call site.
            // The return address is a call site of this code: a call ends there and a PcDesc names it
            // (stubs found by their shape alone, not by a captured call, need no more than that).
            uint64_t ret = 0;
            if (view_.read(sp, ret) && compiled.contains(ret) && check_return(ret) == ReturnCheck::kOk &&
                scope_at_pc(compiled, ret) != nullptr) {
                bump(kSpMoved);
                Step s = go_to(ret, sp + kWord, fp_);
                after_java_ = true;
                return s;
            }
        } else if (range && !range->call_pending) {
            const int32_t delta = choose_delta(*range, sp, frameless ? 1 : fs);   // 1: the return address at the frame's sp
            if (delta != 0 && (top_ || delta > 0)) {
                sp = static_cast<uint64_t>(static_cast<int64_t>(sp) + delta);
                sp_moved = true;
                scope_before = top_ && delta > 0;
                bump(kSpMoved);
            }
        }
    }

    // Where this frame keeps its return address and the caller's rbp.
    uint64_t ret_slot = 0;
    bool fp_saved = true;
    uint64_t fp_slot = 0;
    if (frameless) {
        ret_slot = sp;
        fp_saved = false;
    } else {
        ret_slot = sp + words(fs - co::kReturnAddressFromTop);
        fp_slot = sp + words(fs - co::kSavedFpFromTop);
    }
    if (sp_moved && fp_slot < sp_) fp_saved = false;   // after `leave`: rbp holds the caller's again
    if (top_ && !frameless) {
        if (shape.kind == detail::TopFrameShape::Kind::kPartial) {
            ret_slot = sp + shape.return_offset;
            fp_saved = shape.fp_saved;
            fp_slot = sp + shape.saved_fp_offset;
            if (shape.in_prologue) bump(kPrologueTops);
            if (shape.in_epilogue) bump(kEpilogueTops);
        } else if (shape.kind == detail::TopFrameShape::Kind::kNoCode && nm.frame_complete_offset > 0 &&
                   pc_ - nm.code_begin < static_cast<uint64_t>(nm.frame_complete_offset)) {
            // No instruction bytes: try where the return address can be while the frame is built.
            const uint64_t candidates[] = {sp, sp + kWord, ret_slot};
            for (uint64_t c : candidates) {
                uint64_t v = 0;
                if (view_.read(c, v) && is_return_target(v)) {
                    if (c != ret_slot) {
                        fp_saved = c != sp;
                        fp_slot = sp;
                        bump(kPrologueTops);
                    }
                    ret_slot = c;
                    break;
                }
            }
        }
    }

    // The Java frames of this code: one per scope level, innermost first.
    if (wrapper || frameless) {
        if (!push_frame(FrameKind::kNativeWrapper, nm.method_id, -1, nm.comp_level, pc_)) {
            return fail(FailReason::kTooDeep);
        }
    } else {
        const uint32_t off = static_cast<uint32_t>(scope_pc - nm.code_begin);
        // A return address is a call site with its own PcDesc; an interrupted pc belongs to the next
        // PcDesc after it (§c.2). An anchor's pc is usually a call site, but not always.
        const PcScope* scope = nullptr;
        if (exact || via_anchor_) scope = scope_at_pc(compiled, scope_pc);
        if (!scope && scope_before) {
            // Inside an intrinsic (C2 emits one for String.indexOf's StringLatin1.indexOf, say): the
            // next PcDesc describes the code after it, in the caller's scope; the one before it
            // the call the intrinsic replaced.
            auto it = std::upper_bound(nm.scopes.begin(), nm.scopes.end(), off,
                                       [](uint32_t o, const PcScope& sc) { return o < sc.pc_offset; });
            if (it != nm.scopes.begin()) scope = &*(it - 1);
        }
        if (!scope && !exact) scope = CodeMap::scope_at_or_after(nm, off + 1);
        if (!scope && !top_) step_consults_flags_ = true;   // after_java_, just below
        if (!scope && !top_ && !after_java_ && !via_anchor_) {
            // Returned to from a stub by a leaf call without a PcDesc (C1's barrier and subtype-check
            // calls, inline or in an out-of-line stub that jumps back): the method is the code's
            // where execution goes on.
            const uint32_t off_pc = static_cast<uint32_t>(scope_pc - nm.code_begin);
            scope = CodeMap::scope_at_or_after(nm, detail::continuation_offset(nm, off_pc, detail::Restores::kPops) + 1);
            // Nothing after it: an out-of-line stub at the code's end that restores more than pops
            // before jumping back (ZGC's C2 load barrier).
            if (!scope) {
                const uint32_t back = detail::continuation_offset(nm, off_pc, detail::Restores::kStraightLine);
                scope = CodeMap::scope_at_or_after(nm, back + 1);
                // Nor after the place it jumps back to, which has a PcDesc of its own: C1's tier-1
                // VersionedValueCommitted.getCurrentValue (aload_0, getfield, areturn) has two, the
                // entry barrier's and, where its ZGC load-barrier stub (`add rsp, 16; jmp`) jumps
                // back, the getfield's. (With none after `back`, only one at `back` can be found.)
                if (!scope && back != off_pc) scope = CodeMap::scope_at_or_after(nm, back);
                if (scope) bump(kStubContinuations);
            }
        }
        if (!scope) {
            if (!top_ && !calls_c1_exception_search(nm, scope_pc)) return fail(FailReason::kNoPcDesc);
            if (!push_frame(FrameKind::kCompiled, nm.method_id, -1, nm.comp_level, pc_)) {
                return fail(FailReason::kTooDeep);
            }
        } else if (const FailReason why = push_scope(nm, *scope, pc_); why != FailReason::kNone) {
            return fail(why);
        }
    }
    // A top frame in its epilogue has given its frame back (`add rsp`, `pop rbp`): its return address
    // is no longer where the frame size says, and a walker that applies the frame size from sp
    // (AsyncGetCallTrace: the pc is past frame_complete, so it takes the frame for complete) reads
    // a stale slot above it, as in code that moved rsp.
    const bool epilogue_moved = top_ && !frameless && shape.kind == detail::TopFrameShape::Kind::kPartial &&
                                shape.in_epilogue && ret_slot != sp + words(fs - co::kReturnAddressFromTop);
    if (sp_moved || epilogue_moved) last_frame().sp_moved = true;

    return return_to_caller(ret_slot, fp_saved, fp_slot);
}

FailReason Walk::push_scope(const CodeLoad& nm, const PcScope& scope, uint64_t pc) {
    if (scope.count == 0 || scope.first > nm.frames.size() || nm.frames.size() - scope.first < scope.count) {
        return FailReason::kNoPcDesc;
    }
    for (uint32_t i = 0; i < scope.count; ++i) {
        const MethodBci& mb = nm.frames[scope.first + i];
        const FrameKind kind = i + 1 == scope.count ? FrameKind::kCompiled : FrameKind::kInlined;
        if (!push_frame(kind, mb.method_id, mb.bci, nm.comp_level, pc)) return FailReason::kTooDeep;
    }
    return FailReason::kNone;
}

// C1's exception handler entry (LIR_Assembler::emit_exception_handler) calls Runtime1's
// handle_exception_from_callee with the exception in rax and the throwing pc in rdx; `hlt` follows
// the call, no PcDesc. Sampled inside that stub, the frame under it is the method's own, whole, and
// which pc threw is in rdx, which no walk has: the method's frame without a bci. (lucene, JDK 17:
// the query parser throws for control flow; 9 no_pc_desc in 200 k samples at 100 µs.)
bool Walk::calls_c1_exception_search(const CodeLoad& nm, uint64_t ret) const {
    uint64_t target = 0;
    if (!leaf_call_target(nm, ret, target)) return false;
    const CodeLookup callee = map_.find_code(target, time_);
    return callee.region == CodeRegion::kStub && detail::is_c1_exception_search(callee.stub);
}

// A sample without a fragment: the kernel could not copy the page at sp (a tick inside the fault
// that brings that page in, as a thread's stack grows into it). Its registers still say which code
// ran: compiled code names its method (and the methods inlined there, by the rule of any
// interrupted pc) and native code its function, which the trace keeps under the empty_stack
// marker instead of nothing. The interpreter's method is in its frame, which is not there.
void Walk::frames_at_pc_alone() {
    const uint64_t pc = sample_.regs.ip;
    if (pc == 0) return;
    const CodeLookup c = map_.find_code(pc, time_);
    if (c.region == CodeRegion::kCompiled) {
        const CodeLoad& nm = c.compiled->load;
        if (nm.kind == CodeKind::kNativeWrapper || nm.kind == CodeKind::kMethodHandleIntrinsic) {
            push_frame(FrameKind::kNativeWrapper, nm.method_id, -1, nm.comp_level, pc);
        } else {
            const PcScope* scope = CodeMap::scope_at_or_after(nm, static_cast<uint32_t>(pc - nm.code_begin) + 1);
            if (!scope || push_scope(nm, *scope, pc) != FailReason::kNone) {
                count_ = 0;
                push_frame(FrameKind::kCompiled, nm.method_id, -1, nm.comp_level, pc);
            }
        }
    } else if (d_.options_.symbolize_native && map_.module_at(pc) != nullptr) {   // as decode_top_only
        push_frame(FrameKind::kNative, 0, -1, 0, pc);
        last_frame().symbol = d_.native_->symbol(pc);
    }
    step_first_frame_ = count_;   // kept by the failure that follows
}

// Is `ret`, read from a Java frame's return slot, a call site a Java method can return to? In
// compiled code a call instruction must end there and call compiled code or a stub that is no VM
// call (resolve, inline-cache, vtable stubs, adapters); a return address inside a stub that calls
// into the VM is stale. Call sites are captured unresolved (the target is often the resolve stub),
// so "calls this method" cannot be asked.
Walk::ReturnCheck Walk::check_return(uint64_t ret) const {
    const CodeLookup c = map_.find_code(ret, time_);
    checked_pc_ = ret;   // most often the next step's pc
    checked_code_ = c;
    if (c.region == CodeRegion::kStub) return no_java_returns_into(map_, c.stub) ? ReturnCheck::kVmStub : ReturnCheck::kOk;
    if (c.region != CodeRegion::kCompiled) return ReturnCheck::kOk;   // the step there judges it
    const CodeLoad& nm = c.compiled->load;
    if (detail::is_deopt_return(nm, ret) || ret - nm.code_begin > nm.code.size()) return ReturnCheck::kOk;   // no bytes to check
    Decoder::CallSite& site = d_.call_site(*c.compiled, ret);
    if (!site.call_known) {   // e8 rel32: how HotSpot calls Java code from compiled code
        uint64_t target = 0;
        site.has_call = call_target(nm, ret, target);
        site.call_displacement = static_cast<int32_t>(static_cast<int64_t>(target - ret));   // a rel32's, so it fits
        site.call_known = true;
    }
    if (!site.has_call) return ReturnCheck::kNoCall;
    if (site.target_generation == map_.code_generation() && site.target_span.contains(time_)) {
        map_.note_code_lookup(site.call_target());
        return static_cast<ReturnCheck>(site.target_verdict);
    }
    CodeMap::TimeSpan target_span;
    const CodeLookup t = map_.find_code(site.call_target(), time_, &target_span);
    ReturnCheck verdict = ReturnCheck::kBadTarget;
    switch (t.region) {
        case CodeRegion::kCompiled:
        case CodeRegion::kUnknownCodeCache: verdict = ReturnCheck::kOk; break;
        case CodeRegion::kStub: verdict = calls_into_vm(map_, t.stub) ? ReturnCheck::kBadTarget : ReturnCheck::kOk; break;
        default: break;
    }
    site.target_generation = map_.code_generation();
    site.target_span = target_span;
    site.target_verdict = static_cast<uint8_t>(verdict);
    return verdict;
}

const PcScope* Walk::scope_at_pc(const CompiledCode& code, uint64_t pc) const {
    Decoder::CallSite& site = d_.call_site(code, pc);
    if (!site.scope_known) {
        site.scope = CodeMap::scope_at(code.load, static_cast<uint32_t>(pc - code.load.code_begin));
        site.scope_known = true;
    }
    return site.scope;
}

bool Walk::accept_return(uint64_t ret) {
    switch (check_return(ret)) {
        case ReturnCheck::kOk: return true;
        case ReturnCheck::kNoCall: bump(kRejectNoCall); return false;
        case ReturnCheck::kBadTarget: bump(kRejectBadTarget); return false;
        case ReturnCheck::kVmStub: bump(kRejectVmStub); return false;
    }
    return false;
}

// Several deltas reach this pc on different paths: the one whose saved rsp is at [sp] (string
// intrinsics push it last), else the one whose return slot holds a verified call site, and where
// more than one does, the first whose caller's frame checks out one level further. (string_indexof
// before its pushes, after zero, one or two 16-byte copies of short strings: the slot of delta 0
// held a stale return address into Striped64.casBase with a PcDesc of its own, delta 16's the true
// one into SearchEndpoint.serve; httpserver, JDK 25.)
int32_t Walk::choose_delta(const detail::SpRange& range, uint64_t sp, int32_t fs) {
    if (range.count == 1) return range.deltas[0];
    uint64_t top = 0;
    if (view_.read(sp, top)) {
        for (uint8_t i = 0; i < range.count; ++i) {
            const int32_t d = range.deltas[i];
            if (d > 0 && top == sp + static_cast<uint64_t>(d)) return d;
        }
    }
    int32_t verified[detail::SpRange::kMaxDeltas] = {};
    uint8_t verified_count = 0;
    for (uint8_t i = 0; i < range.count; ++i) {
        const int32_t d = range.deltas[i];
        const uint64_t slot = static_cast<uint64_t>(static_cast<int64_t>(sp) + d) + words(fs - 1);
        uint64_t ret = 0;
        if (slot < sp_ || !view_.read(slot, ret) || !is_return_target(ret) || check_return(ret) != ReturnCheck::kOk) {
            continue;
        }
        const CompiledCode* caller = map_.find_compiled(ret, time_);
        if (caller && caller->load.kind != CodeKind::kNativeWrapper &&
            !scope_at_pc(*caller, ret)) {
            continue;
        }
        verified[verified_count++] = d;
    }
    if (verified_count == 1) return verified[0];
    for (uint8_t i = 0; i < verified_count; ++i) {
        const uint64_t slot = static_cast<uint64_t>(static_cast<int64_t>(sp) + verified[i]) + words(fs - 1);
        uint64_t ret = 0, saved_fp = 0, chosen = 0;
        view_.read(slot, ret);
        view_.read(slot - kWord, saved_fp);
        if (plausible_caller(ret, slot + kWord, saved_fp, chosen, nullptr)) return verified[i];
    }
    if (verified_count > 0) return verified[0];
    for (uint8_t i = 0; i < range.count; ++i) {
        if (range.deltas[i] == 0) return 0;
    }
    return range.deltas[0];
}

// --- Stubs (§b.4) ----------------------------------------------------------------------------------

// Would (pc, sp) be a believable caller frame? Checks the frame it implies one level deep.
bool Walk::plausible_caller(uint64_t pc, uint64_t sp, uint64_t fp_hint, uint64_t& fp_out, const Stub* callee) {
    namespace in = hs::interp;
    CodeLookup code = map_.find_code(pc, time_);
    fp_out = fp_hint;
    switch (code.region) {
        case CodeRegion::kCompiled: {
            const CodeLoad& nm = code.compiled->load;
            const int32_t fs = nm.frame_size_words;
            const bool frameless = nm.kind == CodeKind::kMethodHandleIntrinsic;
            if (fs < 0 || fs > hs::compiled::kMaxFrameWords || (!frameless && fs < 2)) return false;
            if (nm.kind == CodeKind::kNmethod || nm.kind == CodeKind::kOsr) {
                // A leaf call into a stub (C1's G1 barrier and subtype-check calls, C2's arraycopy
                // calls through `mov r10, imm64; call r10`) has no PcDesc: then the call before pc
                // must go to the stub being left, or to another stub that is no VM call (an
                // arraycopy entry that went on into another stub's code, where the sample is), or
                // to a C function of the VM that jumped on into the stub: JDK 25's C1 calls
                // SharedRuntime::drem for `drem`, which tail-calls the fmod stub through
                // StubRoutines' pointer, so inside that stub [sp] returns into the method after a
                // call to libjvm (xalan, 100 us: 1-2 bad_return_address a run, a stale caller
                // further up taken instead).
                uint64_t target = 0;
                if (!scope_at_pc(*code.compiled, pc)) {
                    if (!callee || !leaf_call_target(nm, pc, target)) return false;
                    if ((target < callee->begin || target >= callee->end) && !in_module_code(target)) {
                        const CodeLookup t = map_.find_code(target, time_);
                        if (t.region != CodeRegion::kStub || calls_into_vm(map_, t.stub)) return false;
                    }
                }
            }
            uint64_t ret = 0;
            const uint64_t frame_sp = sp + static_cast<uint64_t>(frameless ? 0 : delta_at_return(*code.compiled, pc));
            const uint64_t ret_slot = frameless ? sp : frame_sp + words(fs - 1);
            if (!view_.read(ret_slot, ret)) return beyond_end(ret_slot);   // runs off: accept
            // The frame is Java code's (not a method-handle intrinsic's): its return address must
            // be a verified call site too, or the word found is a stale copy in dead stack.
            return is_return_target(ret) && (frameless || check_return(ret) == ReturnCheck::kOk);
        }
        case CodeRegion::kInterpreter: {
            uint64_t method = 0, ret = 0;
            if (fp_hint < sp || !view_.read(fp_hint + words(in::kMethod), method) ||
                !view_.read(fp_hint + words(in::kReturnAddress), ret)) {
                return false;
            }
            if (!is_return_target(ret)) return false;
            if (map_.method_by_ptr(method, time_) == nullptr) {
                // Interpreted in every way but a Method* no event announced: passed over. After a gap
                // in a recording the lost MethodInfo may have been the true caller's (StreamDecoder).
                if (method != 0) bump(kUnknownMethodPassed);
                return false;
            }
            return check_return(ret) == ReturnCheck::kOk;
        }
        case CodeRegion::kCallStubReturn: {
            uint64_t wrapper = 0;
            if (fp_hint < sp || !view_.read(fp_hint + words(hs::entry::kCallWrapperSlot), wrapper)) return false;
            return wrapper > fp_hint;
        }
        default: return false;
    }
}

bool Walk::scan_for_caller(uint64_t from, size_t max_words, uint64_t& pc, uint64_t& sp, uint64_t& fp,
                           const Stub* callee) {
    if (max_words == 0) return false;
    uint64_t word = 0;
    if (!view_.read(from, word)) return false;
    // Most words are data that is_return_target turns down by their value alone (outside the code
    // cache and the interpreter): read straight from the fragment, the view told of the words read
    // at each candidate and where the scan ends (its record keeps their hull only).
    const VmInfo& vm = map_.vm();
    const bool by_value = vm.code_cache_high > vm.code_cache_low;
    const size_t readable = static_cast<size_t>((view_.end() - from) / kWord);   // words from `from` in the view
    const size_t scanned = std::min(max_words, readable);
    bool passed_over = false;   // a return-address-like word turned down below the one taken
    // A word into code-cache memory no event has announced yet may be the true return address,
    // into code the VM ran before announcing it: the scan cannot take it, but the sample is
    // decoded again once the announcement is in (StreamDecoder's retry), lest the trace drop the
    // caller for good.
    bool passed_unannounced = false;
    for (size_t i = 0; i < scanned; ++i) {
        const uint64_t slot = from + words(static_cast<int64_t>(i));
        std::memcpy(&word, view_.data() + (slot - view_.begin()), sizeof word);
        if (by_value && !map_.in_code_cache(word) && !map_.in_interpreter(word) && word != vm.call_stub_return) continue;
        view_.read(slot, word);
        // is_return_target's answer, whose value filter the one above has applied.
        const CodeRegion region = map_.find_code(word, time_).region;
        if (!returns_into(region)) {
            if (region == CodeRegion::kUnknownCodeCache) passed_unannounced = true;
            continue;
        }
        // The stub either kept the caller's rbp in the register or pushed it just below the return
        // address; try both.
        uint64_t pushed_fp = 0;
        const uint64_t fp_candidates[2] = {fp_, view_.read(slot - kWord, pushed_fp) && slot > from ? pushed_fp : fp_};
        for (uint64_t candidate : fp_candidates) {
            uint64_t chosen = 0;
            if (plausible_caller(word, slot + kWord, candidate, chosen, callee)) {
                pc = word;
                sp = slot + kWord;
                fp = chosen;
                if (passed_over) bump(kScansPassedOver);
                if (passed_unannounced) bump(kUnannouncedCode);
                return true;
            }
        }
        passed_over = true;
    }
    if (passed_unannounced) bump(kUnannouncedCode);
    view_.read(from + words(static_cast<int64_t>(scanned - 1)), word);
    if (scanned < max_words) view_.read(from + words(static_cast<int64_t>(scanned)), word);   // off the view: ends the scan
    return false;
}

Walk::Step Walk::step_stub(const Stub* stub) {
    if (!push_frame(FrameKind::kStub, 0, -1, 0, pc_)) return fail(FailReason::kTooDeep);
    if (stub) last_frame().symbol = map_.stub_name(stub);
    const int32_t fs = stub ? stub->frame_size_words : -1;
    // A sample inside a stub that builds an rbp frame: its frame size holds only where it calls the
    // VM. Inside C1's Runtime1 stubs, half-way through saving the registers (seen: monitorexit_nofpu
    // 16 words into its 144), the slot that size names held a stale return address, which the walk
    // took and failed two frames on. Past `enter` and before `leave` (a return address at [sp] says
    // the latter) the frame is rbp's; at the stub's first bytes and at its `ret`, the scan from sp
    // below meets the return address first.
    constexpr uint64_t kEnterBytes = 4;
    uint64_t top_word = 0;
    const bool top_in_rbp_stub = top_ && builds_rbp_frame(map_, stub);
    const bool top_in_rbp_frame = top_in_rbp_stub && pc_ >= stub->begin + kEnterBytes &&
                                  !(view_.read(sp_, top_word) && is_return_target(top_word));
    if (fs >= 2 && fs <= hs::compiled::kMaxFrameWords && !top_in_rbp_stub) {
        // Reached from native code, the stub's sp is where the native step left it, or for an
        // rbp-framed stub where its rbp says. A stub without a frame pointer (C2's runtime stubs,
        // e.g. _complete_monitor_locking_Java) leaves in rbp whatever compiled code kept there
        // (seen: a pointer 1.8 GB above the stack): the rbp reading is tried first, but only
        // when it is stack-near, and sp_ after it.
        // Only C1's Runtime1 stubs build an rbp frame (`enter`): for the others (the exception,
        // deoptimization, uncommon-trap and safepoint blobs, C2's runtime stubs) rbp is whatever
        // compiled code kept there, often a live frame's fp further up, whose "caller" skips the
        // frames in between, and sp_ is tried first. Seen: an exception propagating through a
        // 48-deep C2 recursion, where ExceptionBlob's rbp candidate passed every check and the
        // trace lost all 48 frames (ASGCT had them).
        uint64_t candidates[2] = {sp_, sp_};
        size_t count = 1;
        if (via_native_ && fp_ > sp_ && fp_ - sp_ < hs::kMaxStackSpanBytes) {
            const uint64_t from_fp = hs::wrapper_sp_from_fp(fp_, fs);
            if (builds_rbp_frame(map_, stub)) {
                candidates[0] = from_fp;
            } else {
                candidates[1] = from_fp;
            }
            count = 2;
        }
        for (size_t i = 0; i < count; ++i) {
            const uint64_t sp = candidates[i];
            const uint64_t ret_slot = sp + words(fs - 1);
            uint64_t ret = 0, caller_fp = 0;
            if (view_.read(ret_slot, ret) && is_return_target(ret) && view_.read(sp + words(fs - 2), caller_fp)) {
                Step s = go_to(ret, ret_slot + kWord, caller_fp);
                after_java_ = false;
                // Into the interpreter: the blob is calling unpack_frames, and the interpreter
                // frames above it may not be filled in yet (step_interpreted).
                unpacking_ = detail::unpacks_frames(stub) && map_.in_interpreter(ret);
                return s;
            }
        }
        const uint64_t ret_slot = candidates[0] + words(fs - 1);
        if (!view_.contains(ret_slot) && beyond_end(ret_slot)) return off_fragment(ret_slot);
    }
    // An i2c adapter sampled right after `pop rax` (hs::adapter): its return address is in rax,
    // below sp, where the fragment does not reach, and whatever [sp] holds is the caller's data
    // (seen: JNI comparator upcalls on JDK 25, 13 of 24,261 samples, each stub_unwind_failed; a
    // scan there could only meet stale words). sp is the caller's, and the caller keeps its rbp.
    // The call stub (JavaCalls, a JNI upcall) is recognised by its frame: it returns into the VM's
    // code (JavaCalls::call_helper), where an interpreted caller's frame returns into Java code, and
    // its JavaCallWrapper lies above rbp, as step_entry checks. An interpreted caller (whose pushed
    // return address is the one popped) is left to the scan below, as before.
    if (top_ && is_adapter_blob(map_, stub) && pc_ == stub->begin + hs::adapter::kI2cReturnPoppedOffset &&
        fp_ > sp_ && fp_ - sp_ < hs::kMaxStackSpanBytes) {
        uint64_t wrapper = 0, stub_return = 0;
        if (view_.read(fp_ + kWord, stub_return) && in_module_code(stub_return) &&
            view_.read(fp_ + words(hs::entry::kCallWrapperSlot), wrapper) && wrapper > fp_ &&
            wrapper - fp_ < hs::kMaxStackSpanBytes) {
            bump(kI2cPoppedTops);
            Step s = go_to_from_popped_top(map_.vm().call_stub_return, fp_);
            after_java_ = false;
            return s;
        }
    }
    // A c2i adapter sampled after it moved the return address (`pop rax; mov r13, rsp; sub rsp, n;
    // mov [rsp], rax`, then the arguments are copied for the interpreter): the return address into
    // the compiled caller is at [sp] and in rax, and the caller's sp is r13, n bytes above sp. The
    // scan below took [sp] with sp + 8, which fails, and went on to a stale return address (seen:
    // httpserver, JDK 17: FilterOutputStream.write instead of ExchangeImpl.close, then
    // bad_return_address). Before the `pop`, [sp] is the return address with the caller's sp right
    // above it, which the scan finds; r13 then is whatever compiled code kept in it, so it is tried
    // only after that, and the caller must check out either way.
    const Registers regs = own_registers() && is_adapter_blob(map_, stub) ? frame_registers() : Registers{};
    if (regs.r13 > sp_ + kWord && regs.r13 - sp_ <= hs::adapter::kMaxEntrySpAboveSp) {
        uint64_t ret = 0, chosen = 0;
        const bool at_sp = view_.read(sp_, ret) && is_return_target(ret);
        if (!at_sp) ret = regs.ax;
        // [sp] with the sp above it (the c2i code before its `pop`, an i2c adapter's interpreted
        // caller) is the scan's to take, and then r13 is no sp of this frame's.
        const bool scan_takes_sp = at_sp && plausible_caller(ret, sp_ + kWord, fp_, chosen, stub);
        if (!scan_takes_sp && is_return_target(ret) && plausible_caller(ret, regs.r13, fp_, chosen, stub)) {
            Step s = go_to(ret, regs.r13, chosen);
            after_java_ = false;
            return s;
        }
        // Earlier, where the c2i code first asks the VM to patch the caller's call site
        // (`mov r13, rsp; and rsp, -16`, then every register saved, vector ones too, 2.8 KB with
        // AVX-512): the return address is still at [r13], the caller's sp right above it (jython,
        // JDK 25: the scan took a stale Finalizer.register, then bad_entry_frame).
        if (!scan_takes_sp && view_.read(regs.r13, ret) && is_return_target(ret) &&
            plausible_caller(ret, regs.r13 + kWord, fp_, chosen, stub)) {
            Step s = go_to(ret, regs.r13 + kWord, chosen);
            after_java_ = false;
            return s;
        }
    }
    // The same patch reached from the VM's frames above it (fixup_callers_callsite and its callees):
    // r13 is callee-saved there and not carried by native unwinding, and rbp is the compiled
    // caller's, whatever C2 kept in it. The registers the adapter saved say where it began: a slot
    // whose word w lies just above it (the saved r13), [w] a return address and the saved rax, 13
    // words up, the same return address. (h2, JDK 17: rbp's [fp+8] gave Page$NonLeaf.setChild and
    // RootReference.tryLock twice, then bad_return_address; httpserver and xalan had the same.)
    if (via_native_ && is_adapter_blob(map_, stub)) {
        namespace ad = hs::adapter;
        for (uint64_t slot = sp_; slot < sp_ + ad::kMaxEntrySpAboveSp; slot += kWord) {
            uint64_t entry_sp = 0, ret = 0, saved_rax = 0, saved_fp = 0, chosen = 0;
            if (!view_.read(slot, entry_sp)) break;
            if (entry_sp < slot + ad::kEntrySpAboveSavedR13Min || entry_sp > slot + ad::kEntrySpAboveSavedR13Max) continue;
            if (!view_.read(entry_sp, ret) || !is_return_target(ret) ||
                !view_.read(slot + words(ad::kPushaRaxFromR13), saved_rax) || saved_rax != ret) {
                continue;
            }
            view_.read(slot + words(ad::kPushaRbpFromR13), saved_fp);
            if (!plausible_caller(ret, entry_sp + kWord, saved_fp, chosen, stub)) continue;
            Step s = go_to(ret, entry_sp + kWord, chosen);
            after_java_ = false;
            return s;
        }
    }
    // A leaf stub that the VM's own C++ code calls (ICache::invalidate_range's flush stub, SafeFetch)
    // builds no frame: at the sample's own pc [sp] is the return address into the VM's code. Java
    // code's calls return into the code cache, which this never takes; a stub's data that happens to
    // look like native code is caught by the native step that follows (libunwind, then a rescan).
    if (top_ && (stub == nullptr || fs < 0)) {
        uint64_t ret = 0;
        if (view_.read(sp_, ret) && in_module_code(ret)) {
            Step s = go_to(ret, sp_ + kWord, fp_);
            after_java_ = false;
            return s;
        }
    }
    // An announced stub of unknown size that called native code (StubRoutines' arraycopy stubs call
    // G1's write_ref_array_post_entry): the native frame saved the stub's rbp, and a stub that built
    // an rbp frame (the arraycopy stubs do: enter ... leave) has its return address at [rbp+8]. That
    // one is taken when it checks out as a scan's candidate would; a scan from sp meets the words
    // the stub pushed or skipped first (call_VM_leaf's alignment), where a stale return address
    // can pass the same checks.
    // The same holds at the top of a sample inside a collector's C1 barrier stub, which the VM
    // announces without a frame size but which begins with `push rbp; mov rbp, rsp` (ZGC's load
    // barrier then saves every register, 1.1 KB with the vector registers, whose bytes a scan from
    // sp meets first; seen: a stale return address of an earlier arraycopy call at sp+0x150 passed
    // every check). Past those 4 bytes the kernel's rbp is the stub's own frame pointer, until
    // `leave`: at the `ret` after it [sp] is the return address, and the scan finds it there.
    // Not for Runtime1's frameless stubs of unknown size (slow_subtype_check only pushes): there
    // rbp is the caller's, and a plausible caller far up would skip the frames in between
    // (builds_rbp_frame says which).
    // And a stub of unknown size that the VM's C++ code called through StubRoutines' function
    // pointers (Unsafe_CopyMemory0 into the arraycopy stubs), sampled past its `enter` with nothing
    // pushed since, or little: [rbp+8] leads into the VM, and a call ends there. The scan below
    // looks for returns into Java code only, and met a stale one first (seen on a Tomcat server on
    // JDK 25: jlong_disjoint_arraycopy "called" by RequestFacade.setAttribute).
    // An FFM upcall stub (`Linker.upcallStub`, JDK 22+) is called by native code and calls Java. It
    // begins with `enter`, then reserves its frame data below rbp: its caller, the native function
    // (seen: glibc's msort under qsort), returns at [rbp+8], reached from the Java callee's saved rbp.
    // The scan below would skip those native frames and the downcall stub under them, and take the
    // first return into Java further up.
    // The call stub too, at the top (a JNI upcall or a VM call into Java, caught copying the
    // arguments or storing the result): its caller is JavaCalls::call_helper. Its saves put rbp 12
    // words above sp, more than the VM-caller rule below allows (seen: 3.4 % of the samples of a JNI
    // comparator, each `stub_unwind_failed`).
    const bool rbp_frame_into_native =
        (is_upcall_stub(map_, stub) || (top_ && is_call_stub(map_, stub))) && (!top_ || pc_ >= stub->begin + kEnterBytes) &&
        fp_ >= sp_ && fp_ - sp_ < words(int64_t(d_.options_.stub_scan_words));
    // HotSpot's nmethod entry barrier (`method_entry_barrier`: JDK 17 with ZGC or Shenandoah, every
    // collector since JDK 20), called from a compiled method's prologue: `push -1` (a cookie it
    // overwrites when it deoptimizes the method), `enter`, then every register, vector ones too,
    // and a call into BarrierSetNMethod. Its return address is at [rbp+16], above the cookie, and
    // the register saves hold copies of it: a scan from sp took one for the return slot, so the
    // compiled frame's sp was off and its own caller a second copy (seen: httpserver, JDK 25,
    // 3 samples with StringLatin1.indexOf twice, then bad_return_address).
    namespace eb = hs::entry_barrier;
    if (stub != nullptr && fs < 0 && (via_native_ || (top_ && pc_ >= stub->begin + eb::kCookieAndEnterBytes)) &&
        fp_ > sp_ && fp_ - sp_ < words(int64_t(d_.options_.stub_scan_words)) && detail::is_method_entry_barrier(stub)) {
        uint64_t saved_fp = 0, ret = 0, chosen = 0;
        const uint64_t ret_slot = fp_ + words(eb::kReturnFromFp);
        if (view_.read(fp_, saved_fp) && view_.read(ret_slot, ret) && is_return_target(ret) &&
            plausible_caller(ret, ret_slot + kWord, saved_fp, chosen, stub)) {
            bump(kStubRbpFrames);
            Step s = go_to(ret, ret_slot + kWord, chosen);
            after_java_ = false;
            return s;
        }
    }
    // C1's handle_exception_from_callee, back from asking the VM for the handler, writes the
    // handler's address over its own return address ([rbp+8]) and ends `leave; pop rcx; jmp rcx`:
    // from then on that slot holds no return address (no call ends there, so no check passes it)
    // but the pc the method's frame goes on at, whole above the stub's. Taken as such a pc, like
    // an interrupted one: the PcDesc after it names the frame. (javac, JDK 25, 100 us: the scan
    // took a stale return address instead, 1-2 bad_return_address a run.)
    if (top_in_rbp_frame && detail::is_c1_exception_search(stub) && fp_ >= sp_ && fp_ - sp_ <= words(2)) {
        uint64_t handler = 0, saved_fp = 0;
        const CompiledCode* method = nullptr;
        if (view_.read(fp_ + kWord, handler) && view_.read(fp_, saved_fp) &&
            (method = map_.find_code(handler, time_).compiled) != nullptr && method->load.kind == CodeKind::kNmethod &&
            method->load.comp_level >= 1 && method->load.comp_level <= 3 && check_return(handler) == ReturnCheck::kNoCall) {
            bump(kStubRbpFrames);
            Step s = go_to(handler, fp_ + 2 * kWord, saved_fp);
            if (s == Step::kContinue) {
                top_ = true;
                interrupted_ = true;
                after_java_ = false;
            }
            return s;
        }
    }
    constexpr uint64_t kFewPushes = 8;
    const bool rbp_frame_into_java = stub != nullptr && ((via_native_ && fs < 0) || top_in_rbp_frame) && fp_ > sp_ &&
                                     fp_ - sp_ < words(int64_t(d_.options_.stub_scan_words));
    const bool rbp_frame_into_vm = (top_ && stub != nullptr && fs < 0 && fp_ >= sp_ && fp_ - sp_ <= words(kFewPushes)) ||
                                   rbp_frame_into_native;
    uint64_t ret = 0, saved_fp = 0;
    if ((rbp_frame_into_java || rbp_frame_into_vm) && view_.read(fp_ + kWord, ret) && view_.read(fp_, saved_fp)) {
        // A Java caller's fp is the one plausible_caller chose; the VM's is the saved rbp. (A return
        // into Java code lies in the code cache, one into the VM outside it: at most one holds.)
        uint64_t chosen = 0;
        const bool java_caller = rbp_frame_into_java && is_return_target(ret) &&
                                 plausible_caller(ret, fp_ + 2 * kWord, saved_fp, chosen, stub);
        const bool vm_caller = rbp_frame_into_vm && in_module_code(ret) && d_.native_ && d_.native_->call_ends_at(ret);
        if (java_caller || vm_caller) {
            bump(kStubRbpFrames);
            Step s = go_to(ret, fp_ + 2 * kWord, java_caller ? chosen : saved_fp);
            after_java_ = false;
            return s;
        }
        // The stub's own frame returns into code-cache memory no event has announced yet: compiled
        // code the VM had installed and run before posting its CompiledMethodLoad (an OSR nmethod
        // in its first millisecond). That is the caller; a scan would pass over it to a return
        // further up and drop its frame from a trace that looks complete (IntrinsicStubs, JDK 17:
        // libmExp named as IntrinsicStubs.task's callee, the OSR `maths` between them announced
        // 1.2 ms after the sample). Walked as unannounced code, so the sample is decoded again once
        // the announcement is in.
        if (rbp_frame_into_java && builds_rbp_frame(map_, stub) &&
            map_.find_code(ret, time_).region == CodeRegion::kUnknownCodeCache) {
            bump(kStubRbpFrames);
            Step s = go_to(ret, fp_ + 2 * kWord, saved_fp);
            after_java_ = false;
            return s;
        }
    }
    // A stub of unknown size that the VM's C++ code called and that saved a few registers without
    // an rbp frame: VM_Version's get_cpu_info and detect_virt stubs push rbp first, then rbx, rsi
    // (and the flags), and run CPUID, which a hypervisor traps, so the JVM's start is sampled there
    // for milliseconds (each sample stub_unwind_failed: the scan below seeks returns into Java code
    // and there is none). The return into the VM must be the first word from sp into a module's
    // code, a call must end there, no return into Java code may lie below it, and the word below
    // it must be the caller's rbp as pushed, an address up the stack (libjvm keeps frame pointers;
    // get_cpu_info then uses rbp for its data). A stale return among a frame's data (seen: a
    // spilled pc with 0 below it) has no such word below.
    // [sp] itself counts as below: an itable stub builds no frame, and its return into Java code at
    // [sp] lay below a stale word into libjvm that passed every other check (h2, JDK 25:
    // Reflection::reflect_new_array named as the itable stub's caller, then bad_return_address).
    uint64_t word_at_sp = 0;
    if (top_ && stub != nullptr && fs < 0 && d_.native_ != nullptr &&
        !(view_.read(sp_, word_at_sp) && is_return_target(word_at_sp))) {
        for (uint64_t slot = sp_ + kWord; slot <= sp_ + words(kFewPushes); slot += kWord) {
            uint64_t word = 0, pushed_fp = 0;
            if (!view_.read(slot, word) || is_return_target(word)) break;
            if (!in_module_code(word)) continue;
            const bool fp_below = view_.read(slot - kWord, pushed_fp) && pushed_fp > slot &&
                                  pushed_fp - slot < hs::kMaxStackSpanBytes;
            if (fp_below && d_.native_->call_ends_at(word)) {
                bump(kStubVmPushes);
                Step s = go_to(word, slot + kWord, pushed_fp);
                after_java_ = false;
                return s;
            }
            break;
        }
    }
    uint64_t pc = 0, sp = 0, fp = 0;
    bump(kStubScans);
    if (!scan_for_caller(sp_, d_.options_.stub_scan_words, pc, sp, fp, stub)) return fail(FailReason::kStubUnwindFailed);
    Step s = go_to(pc, sp, fp);
    after_java_ = false;
    return s;
}

// --- Native code (§d.3) ----------------------------------------------------------------------------

// The frame at fp_ is an agent thunk's (breadcrumb.hpp): its record right below the saved rbp names
// `ret` (the return address above it) as the Java pc it was called from, and the sp after that
// call. Its magic0 may already be cleared: the thunk clears it as the native code returns, and most
// samples in a thunk are taken right after that (the writer of the all-threads test: all 15-18).
bool Walk::breadcrumb_thunk_frame(uint64_t ret) const {
    namespace bc = breadcrumb;
    const uint64_t record = fp_ + static_cast<uint64_t>(int64_t{bc::kThunkRecordFromFp});
    uint64_t m0 = 0, m1 = 0, java_sp = 0, java_pc = 0;
    return record < fp_ && view_.read(record, m0) && (m0 == bc::kMagic0 || m0 == 0) &&
           view_.read(record + kWord, m1) && m1 == bc::kMagic1 && view_.read(record + bc::kJavaSpOffset, java_sp) &&
           java_sp == fp_ + 2 * kWord && view_.read(record + bc::kJavaPcOffset, java_pc) && java_pc == ret;
}

InternedName Walk::thunk_name() {
    static const InternedName name(breadcrumb::kThunkName);
    return name;
}

bool Walk::try_breadcrumb() {
    namespace bc = breadcrumb;
    if (breadcrumb_used_) return false;
    constexpr uint64_t kRecordBytes = bc::kWords * kWord;
    const uint64_t first = (sp_ + 7) & ~uint64_t{7};
    if (!view_.contains(first, kRecordBytes)) return false;
    // Every word from `first` up to the last one a record fits above is read, most of a 16 KB
    // fragment when there is none: read straight from the fragment, and the view told once of the
    // words read before each candidate and at the end (its record keeps their hull only).
    const uint64_t last = first + (view_.end() - kRecordBytes - first) / kWord * kWord;
    uint64_t word = 0;
    view_.read(first, word);
    for (uint64_t addr = first; addr <= last; addr += kWord) {
        uint64_t m0 = 0, m1 = 0;
        std::memcpy(&m0, view_.data() + (addr - view_.begin()), sizeof m0);
        if (m0 != bc::kMagic0) continue;
        view_.contains(addr, kRecordBytes);
        view_.read(addr, m0);
        view_.read(addr + kWord, m1);
        if (m1 != bc::kMagic1) continue;
        uint64_t jsp = 0, jpc = 0, jfp = 0;
        view_.read(addr + bc::kJavaSpOffset, jsp);
        view_.read(addr + bc::kJavaPcOffset, jpc);
        view_.read(addr + bc::kJavaFpOffset, jfp);
        if (jsp <= addr || !view_.contains(jsp, 0)) continue;
        CodeRegion r = map_.find_code(jpc, time_).region;
        // A breadcrumb into code no event announced yet (a native wrapper whose CompiledMethodLoad
        // is still on its way): a second decode, once it is in, can use it.
        if (r == CodeRegion::kUnknownCodeCache) bump(kUnannouncedCode);
        if (r != CodeRegion::kInterpreter && r != CodeRegion::kCompiled) continue;
        breadcrumb_used_ = true;
        bump(kBreadcrumbsUsed);
        pc_ = jpc;
        sp_ = jsp;
        fp_ = jfp;
        top_ = false;
        interrupted_ = false;
        via_anchor_ = true;
        via_native_ = false;
        after_java_ = true;
        return true;
    }
    view_.contains(last, kRecordBytes);
    view_.read(last, word);
    view_.contains(last + kWord, kRecordBytes);   // where the scan stopped: no record fits
    return false;
}

// A pc a native frame may return to: code the stream announced, or any mapped module; without
// module events, anything in canonical user space above the first pages.
// A native frame's caller in compiled code must have called it: a call ends at the return address
// (an assembler routine without unwind info under an rbp it does not maintain, say, leaves a stale
// rbp chain whose "return address" lies mid-method). A signal's interrupted pc and a return into
// the deoptimization handler need none.
bool Walk::returns_after_call(const detail::NativeStep& next) {
    if (next.interrupted) return true;
    const CompiledCode* c = map_.find_compiled(next.pc, time_);
    if (!c || c->load.code.empty() || detail::is_deopt_return(c->load, next.pc)) return true;
    if (any_call_ends_at(c->load, next.pc)) return true;
    bump(kRejectNoCall);
    return false;
}

bool Walk::in_module_code(uint64_t pc) const {
    return map_.find_code(pc, time_).region == CodeRegion::kUnknown && !map_.modules().empty() &&
           map_.module_at(pc) != nullptr;
}

bool Walk::plausible_native_pc(uint64_t pc) const {
    if (map_.find_code(pc, time_).region != CodeRegion::kUnknown) return true;
    if (!map_.modules().empty()) return map_.module_at(pc) != nullptr;
    return pc >= 0x10000 && pc < (uint64_t{1} << 47);
}

// Native unwinding failed somewhere in the current run of native frames: look for a return address
// into Java code above where the run started, and verify the frame it implies.
bool Walk::rescan_native_run() {
    if (native_rescanned_ || !in_native_run_) return false;
    step_consults_run_ = true;
    native_rescanned_ = true;
    uint64_t pc = 0, sp = 0, fp = 0;
    if (!scan_for_caller(native_run_sp_, d_.options_.native_scan_words, pc, sp, fp)) return false;
    count_ = native_run_first_frame_ + 1;
    journal_reset_ = journal_ != nullptr;
    sp_ = native_run_sp_;
    if (go_to(pc, sp, fp) != Step::kContinue) return false;
    after_java_ = false;
    return true;
}

Walk::Step Walk::step_native() {
    if (!in_native_run_) {
        native_run_sp_ = sp_;
        native_run_first_frame_ = count_;
    }
    in_native_run_ = true;
    if (++native_frames_ > d_.options_.max_native_frames) {
        if (rescan_native_run()) return Step::kContinue;
        return fail(FailReason::kNativeUnwindFailed);
    }
    // A caller frame met before (most native frames): the step below, taken from one memo line.
    // It steps by the same CFI rule, reads the same words, and asks the map about the same pages.
    if (!top_ && count_ < d_.max_frames_) {
        detail::NativeStep next;
        const auto* facts = step_known_caller(pc_, sp_, fp_, next);
        // The caller's pc in a module, where no code was ever announced: plausible_native_pc
        // and returns_after_call hold (a pc with facts of its own is in a module).
        if (facts && map_.outside_all_code(next.pc) &&
            (d_.native_->caller_facts(next.pc) != nullptr || map_.module_at(next.pc) != nullptr)) {
            push_frame(FrameKind::kNative, 0, -1, 0, pc_);
            bump(kNativeFrames);
            take_known_caller(*facts);
            map_.note_code_lookup(next.pc);
            bump(kLibunwindSteps);
            const Step s = go_to(next.pc, next.sp, next.fp);
            via_native_ = true;
            in_native_run_ = true;
            after_java_ = false;
            return s;
        }
    }
    const bool caller_frame = !top_;
    const bool known_module = map_.module_at(pc_) != nullptr;
    if (!push_frame(FrameKind::kNative, 0, -1, 0, pc_)) return fail(FailReason::kTooDeep);
    bump(kNativeFrames);
    if (d_.options_.symbolize_native && known_module && d_.native_) {
        // An interrupted pc (the sample's, or a signal's) is the instruction itself.
        last_frame().symbol = top_ ? d_.native_->symbol(pc_) : d_.native_->caller_symbol(pc_);
    }

    detail::NativeStep next;
    bool stepped = false;
    bool needs_more_stack = false;   // libunwind needed the words above the fragment's end
    // A module replayed against another build of its file has neither its unwind tables nor its
    // code here: an rbp step there would be a guess that the live decode, which had the module,
    // never made.
    bool changed_module = false;
    // The module's unwind row gave a caller, even one not taken below (a breadcrumb thunk's pc): a
    // frame, so not a new thread's first.
    bool row_gave_caller = false;
    if (known_module && d_.native_ && d_.options_.use_libunwind) {
        const auto outcome = d_.native_->step_dwarf(view_, pc_, sp_, fp_, top_, next);
        needs_more_stack = outcome == detail::NativeUnwinder::Outcome::kBeyondFragment;
        changed_module = outcome == detail::NativeUnwinder::Outcome::kModuleChanged;
        row_gave_caller = outcome == detail::NativeUnwinder::Outcome::kStepped && next.sp > sp_;
        // The thread's first frame (clone3, _start): a thread that never ran Java code (GC,
        // compiler, VM threads), or a Java thread sampled before its first Java call.
        if (outcome == detail::NativeUnwinder::Outcome::kEnd && !after_java_) return complete();
        if (outcome == detail::NativeUnwinder::Outcome::kStepped && next.sp > sp_ && plausible_native_pc(next.pc) &&
            returns_after_call(next)) {
            stepped = true;
            bump(kLibunwindSteps);
            if (caller_frame && !next.interrupted) d_.native_->learn_caller(pc_);
        }
        // glibc's lazy binding: _dl_runtime_resolve keeps its frame in rbx, whose value only the
        // sample's registers and the saves of the frames above it (_dl_fixup's, do_lookup_x's) tell.
        // So where a step from this frame's pc, sp and rbp fails and every frame since the top was
        // native, libunwind unwinds again from the sample's registers, rbx among them (JDK 25 at
        // 100 us: 1-6 native_unwind_failed a run at the JVM's start, each under _dl_fixup).
        if (outcome == detail::NativeUnwinder::Outcome::kFailed && native_run_sp_ == sample_.regs.sp &&
            sample_.regs.sp != 0) {
            const detail::NativeUnwinder::TopRegisters top{sample_.regs.ip, sample_.regs.sp, sample_.regs.bp,
                                                           sample_.regs.bx};
            if (d_.native_->step_from_top(view_, top, pc_, sp_, native_frames_, next) ==
                    detail::NativeUnwinder::Outcome::kStepped &&
                next.sp > sp_ && plausible_native_pc(next.pc) && returns_after_call(next)) {
                stepped = true;
                bump(kLibunwindSteps);
            }
        }
    }
    // A row that gave a caller, even one not taken (a breadcrumb thunk's pc), says the function
    // has a frame: no frameless leaf, whatever [sp] holds (Temurin 25's
    // SocketDispatcher_read0 right after its call to read had a stale return into write0's
    // native wrapper there, which the rule below took).
    // Nor for a breadcrumb thunk inside its frame (its record right below rbp names [rbp+8]): its
    // lowest words are argument scratch, where a stale return address fitted the rule (JDK 17, a
    // loopback socket read sampled at the thunk's `leave`: write0's wrapper from an earlier call,
    // 11 of ~150,000 samples). The rbp chain below takes the thunk's caller.
    const auto in_thunk_frame = [&] {
        uint64_t ret = 0;
        return !known_module && fp_ > sp_ && view_.read(fp_ + kWord, ret) && breadcrumb_thunk_frame(ret);
    };
    if (!stepped && !changed_module && top_ && !needs_more_stack && !row_gave_caller && !in_thunk_frame()) {
        // No unwind row at the top: a function that has built no frame, whose return address is at
        // [sp], taken only when the call that ends there fits; else the rbp chain below judges.
        // From compiled code: a call into native code (libjvm's _Copy_* routines without CFI, often
        // tail-called by the runtime function compiled code called; rbp is still the caller's,
        // which C2 code uses as it likes). From a module: a direct call into this very function
        // (glibc's clone3 ends its FDE before its syscall, since the new thread goes on from there
        // on a stack of its own; libjvm's SpinPause has none), or any call when the pc is a
        // function's first byte (ld.so running a library's `_init`, which has no CFI, through a
        // pointer: libjsvml.so's, once a run at the JVM's start, failed native_unwind_failed). The
        // new thread itself, sampled before its first call, has nothing on its stack (fresh pages:
        // a zero where a return address would be): its first frame. Without these the rescan below
        // found stale wrapper frames above.
        uint64_t ret = 0;
        if (view_.read(sp_, ret)) {
            uint64_t target = 0;
            const CompiledCode* caller = map_.find_compiled(ret, time_);
            const bool fits =
                caller ? leaf_call_target(caller->load, ret, target) &&
                             map_.find_code(target, time_).region == CodeRegion::kUnknown
                       : ret != 0 && known_module && d_.native_ &&
                             (d_.native_->direct_call_into(ret, pc_) ||
                              (d_.native_->function_starts_at(pc_) && d_.native_->call_ends_at(ret))) &&
                             plausible_native_pc(ret);
            if (fits) {
                next = {ret, sp_ + kWord, fp_};
                stepped = true;
                bump(kLeafTops);
            } else if (ret == 0 && !after_java_ && known_module && d_.native_ &&
                       d_.native_->after_syscall(pc_)) {
                return complete();
            }
        }
    }
    if (!stepped && !changed_module) {
        // rbp chain: libjvm and JNI code keep frame pointers.
        uint64_t saved_fp = 0, ret = 0;
        if (fp_ >= sp_ && (fp_ & 7) == 0 && view_.read(fp_, saved_fp) && view_.read(fp_ + kWord, ret) &&
            plausible_native_pc(ret) && returns_after_call({ret, fp_ + 2 * kWord, saved_fp})) {
            next = {ret, fp_ + 2 * kWord, saved_fp};
            stepped = true;
            bump(kRbpSteps);
            if (!known_module && d_.options_.symbolize_native && breadcrumb_thunk_frame(ret)) {
                last_frame().symbol = thunk_name();
            }
        }
    }
    if (stepped) {
        Step s = go_to(next.pc, next.sp, next.fp);
        if (s == Step::kContinue) {
            via_native_ = true;
            in_native_run_ = true;
            after_java_ = false;
            if (next.interrupted) {
                if (count_ > 0) last_frame().signal_frame = true;
                top_ = true;
                interrupted_ = true;
                constexpr uint64_t kContextBytes = 8 * NGREG;
                if (view_.contains(next.context_gregs, kContextBytes)) context_ = next.context_gregs;
                bump(kSignalFrames);
            }
            return s;
        }
    }
    const FailReason reason = known_module ? FailReason::kNativeUnwindFailed : FailReason::kUnknownPc;
    // Nor a breadcrumb or a rescan past such a module: the live decode left its frames by their
    // unwind rows, and a scan finds what those would have skipped (a replay of recordings made
    // with an agent since rebuilt: bad_return_address rose from 1 to 464 of ~160,000 samples,
    // besides the 751 that stopped in the agent's frames, and other traces took stale frames).
    if (changed_module) return fail(reason);
    if (try_breadcrumb()) return Step::kContinue;
    // The module's unwind row puts this frame's return address above the fragment's end: every
    // word below it is this frame's or its callees', so a return address the rescan would find
    // there is stale. A frame larger than what is left of the fragment does this:
    // ThreadSafepointState::handle_polling_page_exception keeps 9.6 KB of locals, and a thread
    // whose fragment stack=auto had cut to 8 KB, sampled inside it, walked on from a stale
    // return address in them.
    if (needs_more_stack && fragment_full_) return off_fragment(view_.end(), reason);
    if (rescan_native_run()) {
        bump(kNativeRescans);
        return Step::kContinue;
    }
    if (!stepped && needs_more_stack) return off_fragment(view_.end(), reason);
    if (!stepped && beyond_end(fp_)) return off_fragment(fp_, reason);
    return fail(reason);
}

// --- Decoder ---------------------------------------------------------------------------------------

Decoder::Decoder(const CodeMap& code_map, DecoderOptions options)
    : map_(code_map), options_(options), max_frames_(options.max_frames),
      native_(std::make_unique<NativeUnwinder>(code_map, options.use_libunwind, options.symbolize_native)) {}

Decoder::~Decoder() = default;

namespace {
// The kernel's copy of a stack cannot take a fault: it stops at the first page with no page-table
// entry. Inside a thread's stack that is a page never written (JDK 25's C2 thread keeps a large
// local array untouched while it generates its stubs at the start: 30-50 samples a run at 100 µs
// ended 12 KB below the stack's top, each failed), and a stack's top is a page boundary too. What
// tells them apart is the thread's last complete walk: a fragment that ends at a page boundary at
// or below the sp of that walk's outermost frame, which stays where it is while the thread lives,
// is short of frames the thread still has. (8 MB: no stack is larger by default; a thread that
// moved to another stack far away is not judged by the old one.)
// An empty fragment stopped at sp's own page: the thread was sampled in the kernel while a push
// faulted that page in (its frames above are there, but the copy stops at once).
bool stops_at_unwritten_page(uint64_t outermost_sp, const Sample& sample) {
    constexpr uint64_t kPage = 4096, kLargestStack = 8ull << 20;
    const uint64_t end = sample.stack_sp + sample.stack.size();
    const bool at_page = sample.stack.empty() ? sample.stack_sp != 0 : end % kPage == 0;
    return at_page && end <= outermost_sp && outermost_sp - end <= kLargestStack;
}
}  // namespace

detail::ThreadJournals& Decoder::journals_of(uint32_t tid) {
    // Bounded: threads whose end was never announced must not pile up.
    constexpr size_t kMaxThreads = 256;
    auto it = journals_.find(tid);
    if (it == journals_.end()) {
        if (journals_.size() >= kMaxThreads) journals_.clear();
        it = journals_.emplace(tid, std::make_unique<detail::ThreadJournals>()).first;
    }
    return *it->second;
}

void Decoder::decode(const Sample& sample, CallTrace& out) {
    boundary_sp_ = 0;
    // The stream's word (the agent's depth=) over the options': live and replay decode alike.
    max_frames_ = map_.has_vm() && map_.vm().max_frames != 0 ? map_.vm().max_frames : options_.max_frames;
    fragment_prefetched_ = take_prefetch(sample.stack.data());
    if (pending_lines_.data != nullptr && pending_lines_.data == sample.stack.data()) ask_pending_lines();   // no decode between
    detail::ThreadJournals& j = journals_of(sample.tid);
    fragment_at_unwritten_page_ = stops_at_unwritten_page(j.outermost_sp, sample);
    uint64_t outermost_sp = 0;
    if (!options_.incremental) {
        Walk walk(*this, sample, out);
        walk.run();
        outermost_sp = walk.outermost_sp();
    } else {
        const bool usable = j.last.valid &&
                            (j.last.time_ns == sample.time_ns ||
                             (j.last.time_ns > j.last.horizon && sample.time_ns > j.last.horizon)) &&
                            (j.last.epoch == map_.epoch() || unchanged_since(j.last));
        j.next.start();
        Walk walk(*this, sample, out, usable ? &j.last : nullptr, &j.next);
        walk.run();
        if (walk.spliced()) {
            detail::splice_journal(j.last, j.next, walk.splice(), out.frames);
        } else {
            detail::copy_frames(j.next.frames, out.frames);
            j.next.valid = true;
            std::swap(j.last, j.next);
        }
        // The steps taken over got the answers of this epoch (unchanged_since said so), the new ones
        // were asked now.
        j.last.epoch = map_.epoch();
        j.last.horizon = map_.time_horizon();
        j.last.time_ns = sample.time_ns;
        j.last.fragment_full = walk.fragment_full();
        outermost_sp = walk.outermost_sp();
    }
    if (out.status == TraceStatus::kComplete) j.outermost_sp = outermost_sp;
    if (fragment_at_unwritten_page_ && out.status == TraceStatus::kIncomplete) ++stats_.incomplete_at_unwritten_page;
    mark_kernel(sample, out);
    if (pending_lines_.data != nullptr) ask_pending_lines();
}

void Decoder::prefetch(const Sample& next) {
    prefetched_[1] = prefetched_[0];
    prefetched_[0] = nullptr;
    pending_lines_.data = nullptr;
    const detail::StackView view(next.stack_sp, next.stack.data(), next.stack.size());
    if (next.stack.empty() || !view.contains(next.regs.sp, 0)) return;
    // One line a page now: the pages' translations are found while this decode runs, and its own
    // loads are not held up behind them. All lines at once here cost xalan's and jython's full
    // walks 7-12 % of their median on this AMD guest (a 16 KB fragment is four or five pages,
    // each a TLB miss in a bench that holds a whole recording).
    const uint64_t end = std::min(view.end(), next.regs.sp + kPrefetchAheadBytes);
    const uint8_t* line = view.data() + (next.regs.sp - view.begin());
    const uint8_t* const last = view.data() + (end - view.begin());
    for (; line < last; line = reinterpret_cast<const uint8_t*>((reinterpret_cast<uintptr_t>(line) | 4095) + 1)) {
        __builtin_prefetch(line);
    }
    pending_lines_ = {next.stack.data(), next.stack_sp, next.stack.size(), next.regs.sp, next.tid};
    prefetched_[0] = next.stack.data();
}

void Decoder::ask_pending_lines() {
    const PendingLines p = pending_lines_;
    pending_lines_.data = nullptr;
    const detail::WalkJournal* previous = nullptr;
    if (options_.incremental) {   // looked up now: this decode may have replaced the journal
        if (const auto it = journals_.find(p.tid); it != journals_.end() && it->second->last.valid) {
            previous = &it->second->last;
        }
    }
    // A decode ahead there is time for more than the walk's own 512 bytes above sp, whose deeper
    // frames' lines otherwise arrive one after another.
    prefetch_lines(detail::StackView(p.begin, p.data, p.size), p.sp, kPrefetchAheadBytes, previous, true);
}

// Events applied since the journal's walk (code loaded, unloaded or announced elsewhere, Method*s
// announced) leave its steps' outcomes as they were when none of them touches a page or Method*
// any of its steps asked the map about: a JIT compiling all the time otherwise made a third of the
// samples of a 1 ms run walk every frame again.
bool Decoder::unchanged_since(const detail::WalkJournal& journal) {
    constexpr size_t kMaxChanges = 64;   // beyond: walking again costs less than checking
    if (!map_.changes_since(journal.epoch, changes_) || changes_.size() > kMaxChanges) return false;
    if (changes_.empty()) return true;
    // Most keys (native pcs' pages, Method*s not announced again) lie outside every change: the
    // hull of the changes' pages and that of their Method*s (top bit set) say so at once.
    uint64_t lo[2] = {UINT64_MAX, UINT64_MAX}, hi[2] = {0, 0};
    for (const CodeMap::KeyRange& c : changes_) {
        const int m = static_cast<int>(c.lo >> 63);
        lo[m] = std::min(lo[m], c.lo);
        hi[m] = std::max(hi[m], c.hi);
    }
    for (const detail::StepRecord& r : journal.steps) {
        if (r.lookups.overflow) return false;
        for (uint8_t k = 0; k < r.lookups.count; ++k) {
            const uint64_t key = r.lookups.keys[k];
            const int m = static_cast<int>(key >> 63);
            if (key < lo[m] || key > hi[m]) continue;
            for (const CodeMap::KeyRange& c : changes_) {
                if (key >= c.lo && key <= c.hi) return false;
            }
        }
    }
    return true;
}

void Decoder::decode_top_only(const Sample& sample, CallTrace& out) {
    boundary_sp_ = 0;
    out.time_ns = sample.time_ns;
    out.tid = sample.tid;
    out.status = TraceStatus::kComplete;
    out.failure = FailReason::kNone;
    out.frames.resize(1);
    Frame& top = out.frames.front();
    top = Frame{};
    top.pc = sample.regs.ip;
    if (options_.symbolize_native && map_.module_at(top.pc) != nullptr) top.symbol = native_->symbol(top.pc);
    mark_kernel(sample, out);
}

void Decoder::forget_thread(uint32_t tid) {
    journals_.erase(tid);
    // A later thread with this tid (tids are reused) must be judged afresh, whatever its entry fp.
    vm_started_entry_fp_.erase(tid);
}

uint64_t Decoder::needed_end(uint32_t tid) const {
    const auto it = journals_.find(tid);
    if (it == journals_.end()) return 0;
    const detail::WalkJournal& last = it->second->last;
    if (!last.valid || last.steps.empty()) return 0;
    const detail::StepRecord& outermost = last.steps.back();
    if (!outermost.stopped || outermost.status != TraceStatus::kComplete) return 0;
    uint64_t end = 0;
    for (const detail::StepRecord& r : last.steps) end = std::max({end, r.access.read_hi, r.access.need_hi});
    return end;
}

uint64_t Decoder::native_rule_steps() const { return native_ ? native_->rule_steps() : 0; }
uint64_t Decoder::native_caller_steps() const { return native_ ? native_->caller_steps() : 0; }

const std::vector<std::string>& Decoder::changed_modules() const {
    static const std::vector<std::string> none;
    return native_ ? native_->changed_modules() : none;
}

// A clock tick in kernel mode: the walk was of the user state at kernel entry; one leaf says where
// the time went. Added after the walk, so the incremental decoder's journal never holds it.
void Decoder::mark_kernel(const Sample& sample, CallTrace& out) {
    if (sample.source != SampleSource::kPerfKernel) return;
    Frame kernel;
    kernel.kind = FrameKind::kNative;
    static const InternedName kKernel(kKernelFrameName);
    kernel.symbol = kKernel;
    out.frames.insert(out.frames.begin(), std::move(kernel));
}

CallTrace Decoder::decode(const Sample& sample) {
    CallTrace out;
    decode(sample, out);
    return out;
}

}  // namespace sf

namespace sf::detail {

void splice_journal(WalkJournal& last, WalkJournal& top, const Splice& splice, const std::vector<Frame>& frames) {
    FrontGapVector<StepRecord>& steps = last.steps;
    const size_t new_top = top.steps.size();
    const uint32_t old_first_frame = steps[splice.from].at.count;
    // The steps taken over stay where they are; the new top's take the place of the old top's.
    steps.replace_front(splice.from, new_top);
    // The first step taken over starts from this walk's flags; the sticky ones differ in all.
    steps[new_top].at.flags = splice.first_flags;
    if (splice.sticky_diff != 0) {
        for (size_t i = new_top + 1; i < steps.size(); ++i) steps[i].at.flags ^= splice.sticky_diff;
    }
    if (splice.delta != 0 || splice.native_delta != 0) {
        auto shift = [](uint32_t v, int64_t d) { return static_cast<uint32_t>(int64_t{v} + d); };
        for (size_t i = new_top; i < steps.size(); ++i) {
            StepRecord& r = steps[i];
            r.at.count = shift(r.at.count, splice.delta);
            if (r.at.flags & kInNativeRunFlag) r.at.native_run_first = shift(r.at.native_run_first, splice.delta);
            r.at.native_frames = shift(r.at.native_frames, splice.native_delta);
            r.count_after = shift(r.count_after, splice.delta);
            r.peak_count = shift(r.peak_count, splice.delta);
            r.native_frames_after = shift(r.native_frames_after, splice.native_delta);
        }
    }
    // The steps of the run this walk began itself start from its run.
    for (size_t i = new_top; splice.run_diff && i < steps.size() && (steps[i].at.flags & kInNativeRunFlag); ++i) {
        steps[i].at.native_run_sp = splice.run_sp;
        steps[i].at.native_run_first = splice.run_first;
    }
    // The new top's steps, with their bytes appended to the pool.
    const size_t base = last.bytes.size();
    last.bytes.insert(last.bytes.end(), top.bytes.begin(), top.bytes.end());
    for (size_t i = 0; i < new_top; ++i) {
        steps[i] = top.steps[i];
        steps[i].bytes_offset = static_cast<uint32_t>(steps[i].bytes_offset + base);
    }
    // The replaced top's bytes are garbage in the pool: repack once it is full.
    if (last.bytes.size() > WalkJournal::kMaxBytes) {
        top.bytes.clear();
        for (StepRecord& r : steps) {
            if (!r.reusable || r.access.read_hi <= r.access.read_lo) continue;
            const uint64_t size = r.access.read_hi - r.access.read_lo;
            const uint8_t* from = last.bytes.data() + r.bytes_offset;
            r.bytes_offset = static_cast<uint32_t>(top.bytes.size());
            top.bytes.insert(top.bytes.end(), from, from + size);
        }
        std::swap(last.bytes, top.bytes);
        if (last.bytes.size() > 2 * WalkJournal::kMaxBytes) last.valid = false;   // bounded, whatever the input
    }
    // The frames: only the new top's; those taken over stay where they are.
    const size_t new_first_frame = static_cast<size_t>(int64_t{old_first_frame} + splice.delta);
    if (old_first_frame <= last.frames.size() && new_first_frame <= frames.size() &&
        last.frames.size() - old_first_frame == frames.size() - new_first_frame) {
        last.frames.replace_front(old_first_frame, new_first_frame);
        for (size_t i = 0; i < new_first_frame; ++i) last.frames[i] = frames[i];
    } else {
        copy_frames(last.frames, frames);
    }
    top.start();
}

namespace {
// StubRoutines' compute stubs that begin with `enter` on JDK 17 and 25 alike, where a name exists in
// both (-XX:+PrintStubCode on an AVX-512 host; the fill stubs are left out: on JDK 25 a `mov`
// comes first). C2 calls them as leaf calls; several reserve stack below rbp or push registers,
// among which a scan from sp met stale return addresses (updateBytesCRC32 on xalan: rsp 0x30
// below rbp, a stale return into TransformerImpl.executeChildTemplates at sp+8, while [rbp+8]
// returns into CRC32.update).
constexpr std::string_view kEnterComputeStubs[] = {
    // JDK 17 and 25
    "aescrypt_decryptBlock", "aescrypt_encryptBlock", "bigIntegerLeftShiftWorker", "bigIntegerRightShiftWorker",
    "cipherBlockChaining_decryptAESCrypt", "cipherBlockChaining_encryptAESCrypt", "counterMode_AESCrypt",
    "electronicCodeBook_decryptAESCrypt", "electronicCodeBook_encryptAESCrypt", "ghash_processBlocks",
    "md5_implCompress", "md5_implCompressMB", "mulAdd", "multiplyToLen", "sha1_implCompress", "sha1_implCompressMB",
    "sha256_implCompress", "sha256_implCompressMB", "sha512_implCompress", "sha512_implCompressMB", "squareToLen",
    "updateBytesAdler32", "updateBytesCRC32", "updateBytesCRC32C", "vectorizedMismatch",
    // JDK 17 only
    "implDecode", "implEncode", "libmCos", "libmExp", "libmLog", "libmLog10", "libmPow", "libmSin", "libmTan",
    // JDK 25 only
    "base64_decodeBlock", "base64_encodeBlock", "chacha20Block", "dcbrt", "dcos", "dexp", "dilithiumAlmostInverseNtt",
    "dilithiumAlmostNtt", "dilithiumDecomposePoly", "dilithiumMontMulByConstant", "dilithiumNttMult", "dlog", "dlog10",
    "double_keccak", "dpow", "dsin", "dtan", "dtanh", "fmod", "galoisCounterMode_AESCrypt", "intpoly_assign",
    "intpoly_montgomeryMult_P256", "kyber12To16", "kyberAddPoly_2", "kyberAddPoly_3", "kyberBarrettReduce",
    "kyberInverseNtt", "kyberNtt", "kyberNttMult", "poly1305_processBlocks", "sha3_implCompress", "sha3_implCompressMB",
    "unsafe_setmemory"};
}  // namespace

bool builds_rbp_frame(const Stub* stub) {
    if (!stub) return false;
    const std::string& n = stub->name;
    const bool runtime1 = ends_with(n, " Runtime1 stub") || starts_with(n, "C1 Runtime ");
    const bool collector_c1 = (starts_with(n, "g1_") && ends_with(n, "_barrier_slow")) ||
                              (starts_with(n, "load_barrier_on_") && ends_with(n, "_runtime_stub")) ||
                              starts_with(n, "store_barrier_on_oop_field_") ||
                              (starts_with(n, "shenandoah_") && ends_with(n, "_slow"));
    // StubRoutines' array copies (jint_disjoint_arraycopy, oop_arraycopy_uninit, the *_avx3 ones on
    // AVX-512, checkcast_arraycopy, unsafe_arraycopy) begin with `enter` on JDK 17 and 25
    // (-XX:+PrintStubCode) and are announced without a frame size. Sampled inside one, a scan from
    // sp met a stale return address before the real one at [rbp+8] (seen on the httpserver
    // workload: a Comparator lambda named as jint_conjoint_arraycopy_avx3's caller, rsp 0x80 below
    // rbp, and the walk failed one frame on). generic_arraycopy begins with a jump to a later
    // `enter`, so its first bytes are not its frame's (its name has none of the prefixes).
    const bool array_copy_family = starts_with(n, "jbyte_") || starts_with(n, "jshort_") || starts_with(n, "jint_") ||
                                   starts_with(n, "jlong_") || starts_with(n, "oop_") || starts_with(n, "arrayof_") ||
                                   starts_with(n, "checkcast_") || starts_with(n, "unsafe_");
    const bool array_copy = stub->frame_size_words < 0 && array_copy_family &&
                            (ends_with(n, "arraycopy") || ends_with(n, "arraycopy_avx3") || ends_with(n, "arraycopy_uninit"));
    const bool compute = stub->frame_size_words < 0 &&
                         std::find(std::begin(kEnterComputeStubs), std::end(kEnterComputeStubs), std::string_view(n)) !=
                             std::end(kEnterComputeStubs);
    return (runtime1 && stub->frame_size_words >= 2) || collector_c1 || array_copy || compute;
}

bool is_upcall_stub(const Stub* stub) { return stub != nullptr && stub->name == "upcall_stub"; }

bool is_call_stub(const Stub* stub) { return stub != nullptr && stub->name == "call_stub"; }

bool is_method_entry_barrier(const Stub* stub) { return stub != nullptr && stub->name == "method_entry_barrier"; }

bool is_c1_exception_search(const Stub* stub) {
    return stub != nullptr && stub->name.find("handle_exception_from_callee") != std::string::npos;
}

bool is_adapter_blob(const Stub* stub) { return stub != nullptr && starts_with(stub->name, "I2C/C2I adapters"); }

bool unpacks_frames(const Stub* stub) {
    return stub != nullptr && (stub->name == "DeoptimizationBlob" || stub->name == "UncommonTrapBlob");
}

bool is_continuation_return_barrier(const Stub* stub) {
    // JDK 25 names the stubs by their stub ids; JDK 21 by their StubCodeMark, group and name.
    return stub != nullptr && (stub->name == "cont_returnBarrier" || stub->name == "cont_returnBarrierExc" ||
                               stub->name == "Cont thaw return barrier" ||
                               stub->name == "Cont thaw return barrier exception");
}

bool is_continuation_thaw(const std::string& stub_name) { return stub_name == "cont_thaw" || stub_name == "Cont thaw"; }

bool calls_into_vm(const Stub* stub) {
    if (!stub) return false;
    const std::string& n = stub->name;
    return ends_with(n, " Runtime1 stub") || ends_with(n, "_Java") || starts_with(n, "g1_") ||
           starts_with(n, "C1 Runtime ") || starts_with(n, "C2 Runtime ") || n == "SafepointBlob" ||
           n == "UncommonTrapBlob" || n == "ExceptionBlob" || n == "DeoptimizationBlob" ||
           n == "forward exception" || n == "forward_exception";
}

}  // namespace sf::detail
