// Turns one stack snapshot into a Java call trace, using only the snapshot and what the CodeMap
// learned from the event stream. Never reads process memory, never faults on any input: every
// stack read goes through a bounds-checked view of the fragment. docs/decoding.md explains the walk.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <unordered_map>

#include "stackfrag/decoder/call_trace.hpp"
#include "stackfrag/decoder/code_map.hpp"
#include "stackfrag/events/events.hpp"

namespace sf {

// Frames a trace keeps unless told otherwise (async-profiler's default depth too).
inline constexpr size_t kDefaultMaxFrames = 2048;

struct DecoderOptions {
    // Frames a trace keeps, unless the stream's VmInfo names another number (the agent's depth=).
    size_t max_frames = kDefaultMaxFrames;
    // Words scanned upwards from sp for a return address when a stub's frame size is unknown.
    size_t stub_scan_words = 256;
    // Words scanned upwards from where a run of native frames began when unwinding it fails (VM
    // code between a JNI call and the top can be deep): the whole 16 KB fragment by default.
    size_t native_scan_words = 2048;
    // Native frames (C/C++) walked before giving up on reaching Java code: a backstop, since every
    // native step must land after a call. Deep enough for the compilers' own recursions (C1's
    // BlockBegin::iterate_preorder ran 199 frames deep on jython, and at 128 each such sample
    // failed as native_unwind_failed); a walk that runs off its fragment first is incomplete.
    size_t max_native_frames = 1024;
    // Unwind native code with libunwind over the ELF unwind tables of the mapped modules (falls back
    // to the rbp chain). Needs the module files readable; off means rbp chain only.
    bool use_libunwind = true;
    // Resolve symbol names of native frames from the modules' ELF symbol tables (cached per module).
    bool symbolize_native = true;
    // Incremental decoding: keep each thread's last walk and, where the new walk reaches a frame the
    // last one also started from with the same state, take over the following steps as long as every
    // stack byte they read is unchanged (same addresses, same bytes, same CodeMap epoch). The traces
    // are exactly those of a full walk; only the work differs (docs/decoding.md §2.6).
    bool incremental = true;
};

// Where a decoder stands against a snapshot; exposed for tests and statistics.
struct DecodeStats {
    uint64_t prologue_tops = 0;
    uint64_t epilogue_tops = 0;
    uint64_t partial_interpreter_tops = 0;
    uint64_t entry_frames_crossed = 0;
    uint64_t stub_scans = 0;
    uint64_t native_frames = 0;
    uint64_t libunwind_steps = 0;
    uint64_t rbp_steps = 0;
    uint64_t breadcrumbs_used = 0;
    uint64_t native_rescans = 0;   // native unwinding failed; a verified Java return address was found by scanning
    uint64_t deopt_frames = 0;
    // Steps through code-cache memory that no event had announced (yet), walked as a stub of
    // unknown size, and stub scans that passed over a word pointing there. The VM announces
    // compiled code after it starts running, so under load a sample can get there first;
    // StreamDecoder decodes such samples again a little later.
    uint64_t unannounced_code_steps = 0;
    // Compiled frames whose code had moved rsp below the frame's sp (an intrinsic's pushes, arguments
    // pushed around a stub call, a native wrapper after `leave`, a call stub of the caller's code).
    uint64_t sp_moved_frames = 0;
    // A Java frame's return address that is no call site: not after a call instruction
    // (no_call), after a call to something no Java method is called through (bad_target: native
    // code, a stub that calls into the VM), or inside a stub that calls into the VM (vm_stub). The
    // word in the return slot is stale; the walk fails with bad_return_address instead of going on.
    uint64_t returns_rejected_no_call = 0;
    uint64_t returns_rejected_bad_target = 0;
    uint64_t returns_rejected_vm_stub = 0;
    // Callers a scan passed over that looked interpreted in every way but had a Method* no event
    // announced: after a gap in a recording, the caller the lost events would have confirmed.
    uint64_t unknown_methods_passed = 0;
    // Stubs of unknown size reached from native code whose caller was found through the stub's own rbp
    // frame ([rbp+8]) instead of by a scan (the arraycopy stubs calling G1's post barrier).
    uint64_t stub_rbp_frames = 0;
    // Virtual threads (JDK 21+): returns into the continuation return barrier, whose caller is
    // Continuation.enterSpecial at ContinuationEntry::_return_pc (the frames between are frozen
    // in the heap, where AsyncGetCallTrace does not look either).
    uint64_t return_barriers_crossed = 0;
    // Compiled frames returned to inside an out-of-line stub at the end of their code (ZGC's C2 load
    // barrier calling the runtime) whose Java scope is that of the code the stub jumps back to.
    uint64_t stub_continuations = 0;
    // Signal frames crossed: the kernel's sigreturn trampoline left through the signal's saved
    // context, the frame below decoded as an interrupted (top) frame, not from a return address.
    uint64_t signal_frames = 0;
    // Native top frames without an unwind row left through the return address at [sp] (a leaf
    // assembler routine such as libjvm's _Copy_conjoint_jlongs_atomic), a call into native code
    // ending there.
    uint64_t native_leaf_tops = 0;
    // Entry frames of JNI upcalls and of the VM's calls into Java whose native frames (JavaCalls::
    // call_helper down to the JNI or VM code that called it) were unwound to the Java frame the
    // anchor names, and those where the unwinding did not get there, so the trace leaves them out.
    uint64_t entry_native_runs = 0;
    uint64_t entry_native_fallbacks = 0;
    // Threads' first entry frames entered from application code (a native thread attached through
    // JNI), whose native frames down to the thread's first were kept.
    uint64_t thread_native_roots = 0;
    // Tops inside an i2c adapter right after it popped its return address (into rax, below sp and
    // outside the fragment), when the call stub called it (a JNI upcall, the VM calling Java): the
    // walk went on at the call stub's frame, found through rbp.
    uint64_t i2c_popped_tops = 0;
    // Tops in an interpreter's return template past `leave`, returning to compiled code: the frame
    // of the method that returns is gone (a stub frame named Interpreter stands for it), and the
    // walk went on at the compiled caller's call site.
    uint64_t interpreter_return_tops = 0;
    // Tops in a stub of unknown size that the VM's C++ code called and that pushed a few registers
    // without an rbp frame (VM_Version's CPUID stubs at the JVM's start): left through the first
    // word above sp that a call into the VM's code ends at.
    uint64_t stub_vm_pushes = 0;
    // Interpreter frames a deoptimization was still building (the deoptimization or uncommon-trap
    // blob calling Deoptimization::unpack_frames under them): pushed as skeletons, their Method*,
    // bcp and locals not filled in yet. Each became a stub frame named kRebuiltFrameName, and the
    // walk went on to its caller through the slots the blob had written (return address, saved
    // rbp, sender sp).
    uint64_t deopt_rebuilding_frames = 0;
    // Scans for a caller (out of a stub, or again over a native run) that took a return address
    // above one they turned down. Mostly a stale word passed over; but where no rule knows the true
    // caller's shape the scan takes the next live one, its caller's caller, and the trace lacks a
    // frame without failing (JDK 25's fmod stub before d521d9d: every sample in it, 4 % of a
    // program's samples, which ASGCT cannot check). A share far above the usual few per ten
    // thousand samples is worth a look (docs/decoding.md §4).
    uint64_t scans_passed_over = 0;
    // Incomplete traces whose fragment stopped at a page boundary below where an earlier fragment of
    // the same thread reached: the kernel's copy cannot fault, so it stops at a page of the stack
    // never written (a large local array), not at the stack's top, and the thread's frames go on.
    uint64_t incomplete_at_unwritten_page = 0;
    // Incremental decoding: samples that took over steps of their thread's last walk, the steps and
    // the frames taken over (the counters above count those steps as if they had been walked).
    uint64_t incremental_samples = 0;
    uint64_t steps_reused = 0;
    uint64_t frames_reused = 0;
};

// Every DecodeStats counter, in declaration order, with its key in `group` of replay's --json
// ("stats", "returns_rejected" or "incremental") and its word in replay's text: the one list the
// outputs go by. All but the incremental ones are the counters a walk step bumps, in decoder.cpp's order.
struct DecodeStatField {
    const char* key;
    const char* group;
    const char* label;
    uint64_t DecodeStats::* field;
};
inline constexpr DecodeStatField kDecodeStatFields[] = {
    {"prologue_tops", "stats", "prologue", &DecodeStats::prologue_tops},
    {"epilogue_tops", "stats", "epilogue", &DecodeStats::epilogue_tops},
    {"partial_interpreter_tops", "stats", "partial-interp", &DecodeStats::partial_interpreter_tops},
    {"entry_frames_crossed", "stats", "entry", &DecodeStats::entry_frames_crossed},
    {"stub_scans", "stats", "stub-scan", &DecodeStats::stub_scans},
    {"native_frames", "stats", "native", &DecodeStats::native_frames},
    {"libunwind_steps", "stats", "libunwind", &DecodeStats::libunwind_steps},
    {"rbp_steps", "stats", "rbp", &DecodeStats::rbp_steps},
    {"breadcrumbs_used", "stats", "breadcrumbs", &DecodeStats::breadcrumbs_used},
    {"native_rescans", "stats", "rescans", &DecodeStats::native_rescans},
    {"deopt_frames", "stats", "deopt", &DecodeStats::deopt_frames},
    {"unannounced_code_steps", "stats", "unannounced", &DecodeStats::unannounced_code_steps},
    {"sp_moved_frames", "stats", "sp-moved", &DecodeStats::sp_moved_frames},
    {"no_call", "returns_rejected", "rejected-no-call", &DecodeStats::returns_rejected_no_call},
    {"bad_target", "returns_rejected", "rejected-bad-target", &DecodeStats::returns_rejected_bad_target},
    {"vm_stub", "returns_rejected", "rejected-vm-stub", &DecodeStats::returns_rejected_vm_stub},
    {"unknown_methods_passed", "stats", "unknown-passed", &DecodeStats::unknown_methods_passed},
    {"stub_rbp_frames", "stats", "stub-rbp", &DecodeStats::stub_rbp_frames},
    {"return_barriers_crossed", "stats", "return-barrier", &DecodeStats::return_barriers_crossed},
    {"stub_continuations", "stats", "stub-continuation", &DecodeStats::stub_continuations},
    {"signal_frames", "stats", "signal-frames", &DecodeStats::signal_frames},
    {"native_leaf_tops", "stats", "native-leaf-top", &DecodeStats::native_leaf_tops},
    {"entry_native_runs", "stats", "entry-native", &DecodeStats::entry_native_runs},
    {"entry_native_fallbacks", "stats", "entry-native-fallback", &DecodeStats::entry_native_fallbacks},
    {"thread_native_roots", "stats", "thread-native-roots", &DecodeStats::thread_native_roots},
    {"i2c_popped_tops", "stats", "i2c-popped", &DecodeStats::i2c_popped_tops},
    {"interpreter_return_tops", "stats", "interp-return", &DecodeStats::interpreter_return_tops},
    {"stub_vm_pushes", "stats", "stub-vm-pushes", &DecodeStats::stub_vm_pushes},
    {"deopt_rebuilding_frames", "stats", "deopt-rebuilding", &DecodeStats::deopt_rebuilding_frames},
    {"scans_passed_over", "stats", "scan-passed-over", &DecodeStats::scans_passed_over},
    {"incomplete_at_unwritten_page", "stats", "unwritten-page", &DecodeStats::incomplete_at_unwritten_page},
    {"samples", "incremental", "samples", &DecodeStats::incremental_samples},
    {"steps_reused", "incremental", "steps", &DecodeStats::steps_reused},
    {"frames_reused", "incremental", "frames", &DecodeStats::frames_reused},
};

class NativeUnwinder;
namespace detail {
struct ThreadJournals;
struct WalkJournal;
}

class Decoder {
public:
    explicit Decoder(const CodeMap& code_map, DecoderOptions options = {});
    ~Decoder();
    Decoder(const Decoder&) = delete;
    Decoder& operator=(const Decoder&) = delete;

    // Decodes into `out`, reusing its frame buffer. A kernel-mode sample (SampleSource::kPerfKernel)
    // gets a "[kernel]" frame (kKernelFrameName) on top of the user frames.
    void decode(const Sample& sample, CallTrace& out);
    CallTrace decode(const Sample& sample);
    // Called with the sample to be decoded after the next decode(): the first line of each page of
    // its fragment is asked for now, the rest once that decode is done, to arrive while the
    // next runs (docs/benchmarks.md, "Decoder cost per sample"). Changes no trace; only hints are
    // issued for `next`'s bytes, so it may be gone by then.
    void prefetch(const Sample& next);
    // The sample's top frame alone, named as a native frame (its symbol, else its file), complete:
    // no walk, no stack read. For the profiler's own threads (ThreadKind::kProfiler), whose samples
    // carry no stack: what the profiler's work costs shows, at the price of a symbol lookup.
    void decode_top_only(const Sample& sample, CallTrace& out);
    // The thread ended: its last walk is of no more use (incremental decoding).
    void forget_thread(uint32_t tid);

    const DecodeStats& stats() const { return stats_; }
    const DecoderOptions& options() const { return options_; }
    // Native steps taken by an unwind rule two libunwind steps had confirmed, without libunwind (not
    // in DecodeStats: it depends on what was unwound before, and a walk's journal replays those).
    uint64_t native_rule_steps() const;
    // Of those, the steps a caller frame took from its memo line (NativeUnwinder::CallerFacts).
    uint64_t native_caller_steps() const;
    // Module files whose build id differs from the one recorded: not used (see ModuleMap::build_id).
    const std::vector<std::string>& changed_modules() const;
    // After a complete decode of `tid`'s sample (incremental decoding): the end of the highest stack
    // bytes the walk read or found inside its fragment, 0 otherwise (another outcome, a walk of
    // one frame, or not incremental). Nothing above it decided anything, and a thread's outermost
    // frames stay where they are while it lives: the live agent cuts its later fragments there.
    uint64_t needed_end(uint32_t tid) const;
    // After an incomplete decode: the sp of the frame whose caller lay beyond the fragment (0 after
    // any other outcome). What stitching compares (StreamDecoder).
    uint64_t boundary_sp() const { return boundary_sp_; }

private:
    friend class Walk;
    static void mark_kernel(const Sample& sample, CallTrace& out);
    // The map has changed since `journal` was walked, but not where its steps looked.
    bool unchanged_since(const detail::WalkJournal& journal);
    const CodeMap& map_;
    DecoderOptions options_;
    DecodeStats stats_;
    uint64_t boundary_sp_ = 0;
    // A whole default fragment: on this AMD guest 12-32 KB beat 4 KB in full walks (xalan median
    // 1.70-1.84 -> 1.33-1.41 us, jython 2.2 -> 1.6-1.7 us) and in stream order (mean 4.1 -> 3.75 us).
    static constexpr uint64_t kPrefetchAheadBytes = 16384;
    // The fragments prefetch() asked for last and the time before (the sample decoded next and the
    // one after it), until decoded: their walks need not ask again.
    const uint8_t* prefetched_[2] = {nullptr, nullptr};
    bool fragment_prefetched_ = false;   // the sample being decoded was one of them
    // The fragment whose lines prefetch() left for the end of the decode running when it was
    // called: a page whose translation is not in the TLB holds up every line asked for in it until
    // the page walk is done (on a virtual machine's nested paging, long enough to stall the walk
    // that asked), while one line a page sets the walks going without holding up much.
    struct PendingLines {
        const uint8_t* data = nullptr;   // null: none
        uint64_t begin = 0, size = 0, sp = 0;
        uint32_t tid = 0;
    };
    PendingLines pending_lines_;
    void ask_pending_lines();
    size_t max_frames_;                  // this decode's limit: VmInfo::max_frames, else options_.max_frames
    // The sample being decoded stopped at an unwritten page of its thread's stack (see
    // DecodeStats::incomplete_at_unwritten_page): its fragment counts as full.
    bool fragment_at_unwritten_page_ = false;
    detail::ThreadJournals& journals_of(uint32_t tid);
    bool take_prefetch(const uint8_t* fragment) {
        bool found = false;
        for (const uint8_t*& p : prefetched_) {
            if (fragment != nullptr && p == fragment) {
                p = nullptr;
                found = true;
            }
        }
        return found;
    }
    std::unique_ptr<NativeUnwinder> native_;
    std::unordered_map<uint32_t, std::unique_ptr<detail::ThreadJournals>> journals_;
    // Per thread, the fp of its first entry frame when its native callers were last found to be
    // the JDK's and glibc's only (a thread the VM started): at that fp they are not unwound again
    // at every sample, which cost 40 % of the median walk and much of the journal's reuse.
    std::unordered_map<uint32_t, uint64_t> vm_started_entry_fp_;
    std::vector<CodeMap::KeyRange> changes_;   // scratch for unchanged_since
    // What a walk works out about a return address in compiled code from the code's bytes and
    // PcDescs alone: the call that ends there and the scope there. The same call sites come back
    // sample after sample, and each fact otherwise costs cache misses in the code's bytes and a
    // binary search of its PcDescs. Direct-mapped by pc; an entry holds for one load of the code.
    struct CallSite {
        uint64_t pc = 0;
        uint64_t serial = 0;                   // CompiledCode::serial; 0: empty
        const PcScope* scope = nullptr;        // with scope_known: CodeMap::scope_at there
        // What the call's target said of the return address (the walk's ReturnCheck), for lookups
        // at CodeMap::code_generation() == target_generation and a time in target_span (the span of
        // the target's find_code answer): found again only when code or stubs changed.
        uint64_t target_generation = 0;        // 0: not known
        CodeMap::TimeSpan target_span;
        int32_t call_displacement = 0;         // with has_call: the call's target is pc + this (e8 rel32)
        uint8_t target_verdict = 0;
        bool call_known = false, has_call = false, scope_known = false;
        uint64_t call_target() const { return pc + static_cast<uint64_t>(int64_t{call_displacement}); }
    };
    static constexpr size_t kCallSites = 4096;
    std::vector<CallSite> call_sites_ = std::vector<CallSite>(kCallSites);
    CallSite& call_site(const CompiledCode& code, uint64_t pc) {
        CallSite& site = call_sites_[(pc ^ (pc >> 12)) & (kCallSites - 1)];
        if (site.pc != pc || site.serial != code.serial) {
            site = CallSite{};
            site.pc = pc;
            site.serial = code.serial;
        }
        return site;
    }
};

}  // namespace sf
