// The event stream: every fact the decoder learns about a JVM arrives as one of these value types,
// time-stamped on CLOCK_MONOTONIC — produced live by the agent, stored verbatim by a recording, replayed from it.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <variant>
#include <vector>

namespace sf {

// The user registers requested from perf (PERF_SAMPLE_REGS_USER) or copied from a signal's
// ucontext. Why each is needed: shared/docs/hotspot-frames.md §h (BX/R13/AX for frames under
// construction in the interpreter, R13 for the top frame's bcp, R15 = JavaThread* in Java code).
struct Registers {
    uint64_t ip = 0;
    uint64_t sp = 0;
    uint64_t bp = 0;
    uint64_t ax = 0;
    uint64_t bx = 0;
    uint64_t r13 = 0;
    uint64_t r15 = 0;
    bool operator==(const Registers&) const = default;
};

// kPerf: the per-thread (or per-CPU) clock event, the thread was running in user mode; kSignal: a
// signal handler's copy; kPerfSwitch: the context-switch event, the thread was leaving the CPU (to
// block or preempted) — the off-CPU profile's samples; kPerfKernel: the clock event while the
// thread ran in the kernel (a syscall, a page fault, an interrupt): registers and stack are the
// user state at kernel entry, and the trace gets a "[kernel]" leaf. kThreadClock: one interval of a
// profiler thread's CPU time read from its thread clock (that thread has no event: a perf sample
// costs the sampled thread ~45 us on a PVM guest); no registers but an ip naming what it stands
// for, no stack, decoded as that top frame alone.
enum class SampleSource : uint8_t { kPerf = 1, kSignal = 2, kPerfSwitch = 3, kPerfKernel = 4, kThreadClock = 5 };

// On-CPU clock samples, in user or in kernel mode, or counted from a thread clock.
inline bool is_clock_sample(SampleSource source) {
    return source == SampleSource::kPerf || source == SampleSource::kPerfKernel || source == SampleSource::kThreadClock;
}

// One stack snapshot: the registers and `stack.size()` bytes copied from address `stack_sp` upwards
// (perf's dyn_size bytes; shorter than requested when the thread's stack top is closer).
struct Sample {
    uint64_t time_ns = 0;
    uint32_t pid = 0;
    uint32_t tid = 0;
    SampleSource source = SampleSource::kPerf;
    Registers regs;
    uint64_t stack_sp = 0;
    std::vector<uint8_t> stack;
    bool operator==(const Sample&) const = default;
};

// What kind of compiled code a CodeLoad describes (hotspot-frames.md §b.4).
enum class CodeKind : uint8_t {
    kNmethod = 1,                 // C1/C2 compiled Java method
    kOsr = 2,                     // on-stack-replacement nmethod; osr_bci says where it entered
    kNativeWrapper = 3,           // "native nmethod" with a real rbp frame (JNI wrapper)
    kMethodHandleIntrinsic = 4,   // "native nmethod" with frame size 0 (linkTo*, invokeBasic)
};

// One Java frame of an inline chain or an oracle trace.
struct MethodBci {
    uint64_t method_id = 0;   // the jmethodID, the stream's name for a method
    int32_t bci = -1;
    bool operator==(const MethodBci&) const = default;
};

// A PcDesc with a scope: frames[first, first + count) of the owning CodeLoad, innermost first.
struct PcScope {
    uint32_t pc_offset = 0;   // from code_begin
    uint32_t first = 0;
    uint32_t count = 0;
    bool operator==(const PcScope&) const = default;
};

// A compiled method appeared in the CodeCache (JVMTI CompiledMethodLoad / GenerateEvents),
// with everything about its frames that the decoder needs, read while the nmethod was alive.
struct CodeLoad {
    uint64_t time_ns = 0;
    uint64_t method_id = 0;
    uint64_t code_begin = 0;          // CodeBlob code_begin (== JVMTI code_addr)
    uint64_t code_end = 0;            // exclusive
    uint64_t entry = 0;               // unverified entry point
    uint64_t verified_entry = 0;
    int32_t frame_size_words = -1;    // CodeBlob::_frame_size, incl. return address and saved rbp
    int32_t frame_complete_offset = -1;
    int32_t comp_level = 0;
    CodeKind kind = CodeKind::kNmethod;
    int32_t osr_bci = -1;
    uint64_t deopt_handler = 0;       // 0 when unknown
    int32_t orig_pc_offset = -1;      // byte offset from the frame's sp of the saved pc after deopt
    std::vector<PcScope> scopes;      // sorted by pc_offset
    std::vector<MethodBci> frames;
    // The instruction bytes [code_begin, code_end) as loaded (JVMTI code_addr/code_size): the decoder
    // disassembles prologues and epilogues of top frames from them. Empty when not captured; the
    // decoder then falls back to frame_complete_offset and return-address checks.
    std::vector<uint8_t> code;
    bool operator==(const CodeLoad&) const = default;
};

// A compiled method left the CodeCache; its range may be reused by later code.
struct CodeUnload {
    uint64_t time_ns = 0;
    uint64_t method_id = 0;
    uint64_t code_begin = 0;
    bool operator==(const CodeUnload&) const = default;
};

// A stub, adapter or other generated code (JVMTI DynamicCodeGenerated, CodeCache walk).
struct Stub {
    uint64_t time_ns = 0;
    std::string name;
    uint64_t begin = 0;
    uint64_t end = 0;                 // exclusive
    int32_t frame_size_words = -1;    // -1 when the VM does not know it (BufferBlobs, adapters)
    bool operator==(const Stub&) const = default;
};

struct LineEntry {
    int32_t start_bci = 0;
    int32_t line = 0;
    bool operator==(const LineEntry&) const = default;
};

// A Java method the decoder may meet: in inline chains (by jmethodID) and in interpreted frames
// (by the raw Method* found on the stack, accepted only once announced here).
struct MethodInfo {
    uint64_t time_ns = 0;             // from when this mapping holds
    uint64_t method_id = 0;           // jmethodID
    uint64_t method_ptr = 0;          // Method*
    uint64_t bytecode_begin = 0;      // ConstMethod* + sizeof(ConstMethod): bci = bcp - bytecode_begin
    uint32_t bytecode_size = 0;
    uint32_t access_flags = 0;        // JVM_ACC_* (native = 0x0100)
    std::string class_name;           // JVM internal form: java/lang/String
    std::string name;
    std::string signature;
    std::string source_file;
    std::vector<LineEntry> lines;     // sorted by start_bci
    bool operator==(const MethodInfo&) const = default;
};

// A Java method as the walk needs it, without its names: the identity and bytecode range of a
// MethodInfo (see there).
struct MethodEntry {
    uint64_t method_id = 0;
    uint64_t method_ptr = 0;
    uint64_t bytecode_begin = 0;
    uint32_t bytecode_size = 0;
    uint32_t access_flags = 0;
    bool operator==(const MethodEntry&) const = default;
};

// Methods announced together without names (a class's at its preparation, a compiled method's
// inlinees): one event where MethodInfo takes one per method, which a run announces 10-50 k of.
// Applied as a MethodInfo per entry with empty strings; a NamedMethod names those a profile
// refers to. Sent by a live profile without recording or filter (docs/recording-format.md).
struct MethodBatch {
    uint64_t time_ns = 0;
    std::vector<MethodEntry> methods;
    bool operator==(const MethodBatch&) const = default;
};

// The names and line table of a method: what a MethodInfo carries beyond its MethodEntry. A
// jmethodID names one method for the JVM's life, so this holds whenever it arrives; `resolved`
// is false when the JVM could no longer say (its class was unloaded).
struct NamedMethod {
    uint64_t time_ns = 0;
    uint64_t method_id = 0;
    bool resolved = false;
    std::string class_name;
    std::string name;
    std::string signature;
    std::string source_file;
    std::vector<LineEntry> lines;
    bool operator==(const NamedMethod&) const = default;
};

// Which row of per-JDK frame and structure facts (hotspot/jdk_facts.hpp) the agent chose: the
// row's release number, or kUnknown when it guessed (the decoder then goes by jdk_major).
enum class VmLayout : uint8_t { kUnknown = 0, kJdk17 = 17, kJdk21 = 21, kJdk25 = 25 };

struct CodeRange {
    uint64_t begin = 0;
    uint64_t end = 0;
    std::string description;
    bool operator==(const CodeRange&) const = default;
};

// The most stack a perf sample of the agent carries: a sample record's size is 16 bits, and with
// the registers the agent samples the kernel cuts a larger request (up to 65528) to this. A
// fragment this large is full whatever was asked.
inline constexpr uint32_t kLargestPerfFragment = 65416;

// The smaller fragment stack=auto has a thread that stays shallow try: half the configured size
// (0: none, below 4 KB). A stream says only the configured size (VmInfo::sample_stack_bytes), so a
// fragment of exactly this size counts as full too: the kernel copied all it was asked, and a walk
// that runs off it is incomplete, not failed.
constexpr uint32_t small_fragment_bytes(uint32_t configured) {
    return configured / 2 >= 4096 ? (configured / 2) & ~7u : 0;
}

// What a sample of a long JVM start keeps of its stack once the start's hold has grown large
// (the agent's Sampler): its top frames only, with the stack going on above. A fragment of exactly
// this size counts as full, so that a walk running off it is incomplete, not failed. A word short
// of a page: a copy the kernel stopped at a page never written ends at a page boundary, and one
// from a page-aligned sp must not pass for trimmed.
inline constexpr uint32_t kTrimmedStartFragment = 4088;

// Whether a fragment of `size` bytes is all the kernel was asked for (the thread's stack may go on
// above it), as opposed to cut short by the thread's stack top. `configured`: 0 when unknown.
constexpr bool fragment_is_full(size_t size, uint32_t configured) {
    const uint32_t small = small_fragment_bytes(configured);
    return configured == 0 || size >= std::min(configured, kLargestPerfFragment) || (small != 0 && size == small) ||
           size == kTrimmedStartFragment;
}

// Facts about the VM that hold for its whole life, sent once before any sample.
struct VmInfo {
    uint64_t time_ns = 0;
    uint32_t pid = 0;
    int32_t jdk_major = 0;
    std::string vm_version;
    VmLayout layout = VmLayout::kUnknown;
    uint64_t call_stub_return = 0;    // *StubRoutines::_call_stub_return_address
    uint64_t interpreter_begin = 0;
    uint64_t interpreter_end = 0;
    std::vector<CodeRange> entry_codelets;   // interpreter "method entry point" codelets
    uint64_t code_cache_low = 0;
    uint64_t code_cache_high = 0;
    uint64_t continuation_return_pc = 0;     // JDK 21+: ContinuationEntry::_return_pc, else 0
    uint32_t sample_stack_bytes = 0;         // requested fragment size (perf copies at most kLargestPerfFragment)
    uint64_t sample_period_ns = 0;
    // The agent's depth=: the most frames a trace keeps (a deeper one keeps its innermost frames
    // under [failed: too_deep]); 0 in recordings made before the option: the decoder's default.
    uint32_t max_frames = 0;
    bool operator==(const VmInfo&) const = default;
};

// How many frames the validator asks AsyncGetCallTrace for: an answer this long may have been cut.
inline constexpr uint32_t kOracleMaxFrames = 1024;

// A sample taken by the validate oracle: the same registers and fragment perf would copy, plus what
// AsyncGetCallTrace returned at that instant (agct_status = num_frames when > 0, else its error code).
struct Oracle {
    Sample sample;
    int32_t agct_status = 0;
    std::vector<MethodBci> frames;    // top first
    bool operator==(const Oracle&) const = default;
};

// What a thread does for the JVM: a Java thread (JVMTI ThreadStart), or one of the VM's own threads
// (found in /proc/self/task), whose samples decode as native frames under a root naming the kind,
// or one of the profiler's own threads (kProfiler: their samples carry the top frame only, see
// StreamDecoder). Recordings made before kProfiler existed announced those as kOther.
enum class ThreadKind : uint8_t { kJava = 0, kGc = 1, kCompiler = 2, kVm = 3, kOther = 4, kProfiler = 5 };
inline constexpr size_t kThreadKinds = 6;
// "java", "gc", "compiler", "vm", "other", "profiler": for reports and json keys.
const char* thread_kind_name(ThreadKind kind);

// A thread was started or ended (names the tid in reports). Recordings made before `kind` existed
// announced Java threads only: their ThreadInfo reads back as kJava.
struct ThreadInfo {
    uint64_t time_ns = 0;
    uint32_t tid = 0;
    bool ended = false;
    std::string name;
    ThreadKind kind = ThreadKind::kJava;
    bool operator==(const ThreadInfo&) const = default;
};

// The kernel or the agent dropped samples.
struct Lost {
    uint64_t time_ns = 0;
    uint32_t tid = 0;                 // 0 when not known
    uint64_t count = 0;
    bool operator==(const Lost&) const = default;
};

// A file mapped executable into the process (from /proc/pid/maps), for unwinding native frames.
struct ModuleMap {
    uint64_t time_ns = 0;
    uint64_t begin = 0;
    uint64_t end = 0;
    uint64_t file_offset = 0;
    std::string path;
    // The file's GNU build id in hex, "" when unknown (no note, or a recording from before
    // 2026-11-26): a decoder whose file at `path` has another build id does not use that file.
    std::string build_id;
    // The mapping's bytes, for executable code no file holds: the vDSO ("[vdso]", ~8 KB), whose
    // unwind tables and symbols name clock_gettime's inner frames. Empty for files.
    std::vector<uint8_t> image;
    bool operator==(const ModuleMap&) const = default;
};

// mode=jvmti: one thread's stack as JVMTI GetAllStackTraces reported it, taken at a safepoint
// (the safepoint-biased baseline). Needs no decoding: the jmethodIDs are those MethodInfo
// announces. JVMTI does not say whether a frame ran compiled, inlined or interpreted.
struct JvmtiTrace {
    uint64_t time_ns = 0;
    uint32_t tid = 0;                 // OS thread id; 0 when not known
    bool truncated = false;           // deeper than the depth asked for: frames are the top part
    std::vector<MethodBci> frames;    // top first
    bool operator==(const JvmtiTrace&) const = default;
};

// The process's CPU time so far (getrusage), emitted when the agent stops: what the samples' CPU
// time is compared with (coverage). A recording may hold several; the last one counts. One with
// `at_start` is emitted right before the sampling events open instead: the CPU time no sample could
// see (the JVM's start up to VMInit, or up to an attach), which coverage reports apart.
// host_busy_ns / host_steal_ns: the whole machine's CPU time so far (/proc/stat, all CPUs) that was
// not idle, and the part of it the hypervisor gave to other guests (steal); 0 when not known. The
// clock events count stolen time as the running thread's, getrusage does not.
struct ProcessCpu {
    uint64_t time_ns = 0;
    uint64_t user_ns = 0;
    uint64_t system_ns = 0;
    bool at_start = false;
    uint64_t host_busy_ns = 0;
    uint64_t host_steal_ns = 0;
    bool operator==(const ProcessCpu&) const = default;
};

using Event = std::variant<Sample, CodeLoad, CodeUnload, Stub, MethodInfo, VmInfo, Oracle, ThreadInfo,
                           Lost, ModuleMap, JvmtiTrace, ProcessCpu, MethodBatch, NamedMethod>;

// Stable names, used by `stackfrag dump --json` and the recording format's kind numbers.
enum class EventKind : uint8_t {
    kSample = 1,
    kCodeLoad = 2,
    kCodeUnload = 3,
    kStub = 4,
    kMethod = 5,
    kVmInfo = 6,
    kOracle = 7,
    kThread = 8,
    kLost = 9,
    kModule = 10,
    kJvmtiTrace = 11,
    kProcessCpu = 12,
    kMethodBatch = 13,
    kNamedMethod = 14,
};

EventKind kind_of(const Event& event);
const char* kind_name(EventKind kind);   // "sample", "code_load", ... "module", "jvmti_trace"
uint64_t time_of(const Event& event);

}  // namespace sf
