// Native unwinding on a real stack: this test process snapshots its own stack (registers + a copy
// from sp upwards, as perf would), announces its mappings as ModuleMap events, and the decoder must
// walk the C++ frames with libunwind and name them from the ELF symbol tables.
#include <catch2/catch.hpp>

#include <dlfcn.h>
#include <sys/auxv.h>
#include <pthread.h>
#include <signal.h>
#include <ucontext.h>

#include <algorithm>
#include <cstring>
#include <optional>
#include <filesystem>
#include <fstream>
#include <string>

#include "stackfrag/base/elf_file.hpp"
#include "stackfrag/decoder/breadcrumb.hpp"
#include "synthetic.hpp"

using namespace sf;

namespace {

Sample g_snapshot;

// Copies the live stack as the kernel would: all of it, including what ASan poisons between the
// callers' locals, so the copy is not instrumented (and a loop, since memcpy would be intercepted).
__attribute__((no_sanitize_address, optimize("no-tree-loop-distribute-patterns"))) void copy_own_stack(
    uint8_t* out, const volatile uint8_t* in, size_t n) {
    for (size_t i = 0; i < n; ++i) out[i] = in[i];
}

// The stack's top and a full-size buffer, found before take_snapshot runs: it may run in a signal
// handler, where neither pthread_getattr_np (it reads /proc/self/maps) nor malloc may be called.
uint64_t g_stack_hi = 0;
void prepare_snapshot() {
    pthread_attr_t attr;
    void* stack_lo = nullptr;
    size_t stack_size = 0;
    pthread_getattr_np(pthread_self(), &attr);
    pthread_attr_getstack(&attr, &stack_lo, &stack_size);
    pthread_attr_destroy(&attr);
    g_stack_hi = reinterpret_cast<uint64_t>(stack_lo) + stack_size;
    g_snapshot.stack.resize(test::kStackBytes);
}

__attribute__((noinline)) void take_snapshot() {
    uint64_t sp, bp, ip, bx;
    asm volatile("mov %%rsp, %0\n\tmov %%rbp, %1\n\tlea 0(%%rip), %2\n\tmov %%rbx, %3"
                 : "=r"(sp), "=r"(bp), "=r"(ip), "=r"(bx));
    const size_t n = std::min<uint64_t>(g_snapshot.stack.size(), g_stack_hi - sp);
    g_snapshot.regs.ip = ip;
    g_snapshot.regs.sp = sp;
    g_snapshot.regs.bp = bp;
    g_snapshot.regs.bx = bx;
    g_snapshot.stack_sp = sp;
    g_snapshot.stack.resize(n);   // never grows: no allocation
    copy_own_stack(g_snapshot.stack.data(), reinterpret_cast<const volatile uint8_t*>(sp), n);
    g_snapshot.time_ns = 1000;
}

__attribute__((noinline)) void unwind_level3() { take_snapshot(); asm volatile("" ::: "memory"); }
__attribute__((noinline)) void unwind_level2() { unwind_level3(); asm volatile("" ::: "memory"); }
__attribute__((noinline)) void unwind_level1() { unwind_level2(); asm volatile("" ::: "memory"); }

__attribute__((noinline)) void snapshot_in_handler(int) { take_snapshot(); asm volatile("" ::: "memory"); }
__attribute__((noinline)) void signal_level2() { raise(SIGUSR2); asm volatile("" ::: "memory"); }
__attribute__((noinline)) void signal_level1() { signal_level2(); asm volatile("" ::: "memory"); }

// The offset in the snapshot's stack of the first word equal to `value` (the stack's size if none).
size_t offset_of_word(const Sample& snapshot, uint64_t value) {
    size_t at = 0;
    for (; at + 8 <= snapshot.stack.size(); at += 8) {
        uint64_t word = 0;
        std::memcpy(&word, snapshot.stack.data() + at, sizeof word);
        if (word == value) return at;
    }
    return snapshot.stack.size();
}

std::string symbols_of(const CallTrace& t) {
    std::string names;
    for (const auto& f : t.frames) names += f.symbol.str() + "\n";
    return names;
}

}  // namespace

TEST_CASE("native frames are unwound with libunwind and named from the ELF symbols", "[decoder][native]") {
    prepare_snapshot();
    unwind_level1();
    test::World w;
    for (const auto& m : test::self_modules()) w.map.apply(Event{m});
    DecoderOptions options;   // libunwind and symbols on
    Decoder d(w.map, options);
    CallTrace t = d.decode(g_snapshot);
    // No Java code on this stack: the walk ends when unwinding stops, with native frames found.
    std::string names;
    for (const auto& f : t.frames) names += f.symbol.str() + "\n";
    INFO(names << fail_reason_name(t.failure) << " libunwind " << d.stats().libunwind_steps << " rbp "
               << d.stats().rbp_steps);
    REQUIRE(t.frames.size() >= 4);
    CHECK(names.find("take_snapshot") != std::string::npos);
    CHECK(names.find("unwind_level3") != std::string::npos);
    CHECK(names.find("unwind_level2") != std::string::npos);
    CHECK(names.find("unwind_level1") != std::string::npos);
    CHECK(d.stats().libunwind_steps >= 3);
}

// A call that is its function's last instruction, as a compiler emits one to a function that never
// returns (G1's GangWorker::run ends in `call GangWorker::loop`): the return address is the next
// function's first byte. Here the next function, sf_test_after_last_call, is the rest of the caller
// (`pop rbp; ret`), so the test's callee may return.
extern "C" void sf_test_last_call(void (*callee)());
extern "C" void sf_test_after_last_call();
asm(".text\n.globl sf_test_last_call\n.type sf_test_last_call, @function\nsf_test_last_call:\n"
    "    .cfi_startproc\n"
    "    push %rbp\n    .cfi_adjust_cfa_offset 8\n    .cfi_rel_offset %rbp, 0\n"
    "    mov %rsp, %rbp\n    .cfi_def_cfa_register %rbp\n"
    "    call *%rdi\n"
    "    .cfi_endproc\n.size sf_test_last_call, .-sf_test_last_call\n"
    ".globl sf_test_after_last_call\n.type sf_test_after_last_call, @function\nsf_test_after_last_call:\n"
    "    .cfi_startproc\n    .cfi_def_cfa %rbp, 16\n    .cfi_offset %rbp, -16\n"
    "    pop %rbp\n    .cfi_def_cfa %rsp, 8\n    ret\n"
    "    .cfi_endproc\n.size sf_test_after_last_call, .-sf_test_after_last_call\n");

namespace {
__attribute__((noinline)) void snapshot_below_last_call() { take_snapshot(); asm volatile("" ::: "memory"); }
__attribute__((noinline)) void calls_last_call() { sf_test_last_call(&snapshot_below_last_call); asm volatile("" ::: "memory"); }
}  // namespace

TEST_CASE("a caller whose call is its last instruction is named by the call, not by the code after it",
          "[decoder][native]") {
    prepare_snapshot();
    calls_last_call();
    test::World w;
    for (const auto& m : test::self_modules()) w.map.apply(Event{m});
    for (int pass = 0; pass < 2; ++pass) {   // the second from the caller's memo line
        Decoder d(w.map, DecoderOptions{});
        CallTrace t = d.decode(g_snapshot);
        if (pass == 1) t = d.decode(g_snapshot);
        INFO(symbols_of(t) << fail_reason_name(t.failure));
        const auto at = std::find_if(t.frames.begin(), t.frames.end(), [](const Frame& f) {
            return f.pc == reinterpret_cast<uint64_t>(&sf_test_after_last_call);
        });
        REQUIRE(at != t.frames.end());
        CHECK(at->symbol.str() == "sf_test_last_call");
        // The walk went on through it, by the call's unwind row, to the function that called it.
        REQUIRE(at + 1 != t.frames.end());
        CHECK((at + 1)->symbol.str().find("calls_last_call") != std::string::npos);
    }
}

// A frame found through rbx, as glibc's _dl_runtime_resolve keeps its own: it saves rbp and rbx,
// points rbx at them, aligns rsp down and calls on with rbp zeroed. Its callee saves rbx and puts
// something else there, so rbx's value in this frame is only in the callee's save slot.
extern "C" void sf_test_frame_in_rbx(void (*callee)());
extern "C" uint64_t sf_test_frame_rbx;   // the value the function gave rbx
uint64_t sf_test_frame_rbx = 0;
asm(".text\n.globl sf_test_frame_in_rbx\n.type sf_test_frame_in_rbx, @function\nsf_test_frame_in_rbx:\n"
    "    .cfi_startproc\n"
    "    push %rbp\n    .cfi_adjust_cfa_offset 8\n    .cfi_rel_offset %rbp, 0\n"
    "    push %rbx\n    .cfi_adjust_cfa_offset 8\n    .cfi_rel_offset %rbx, 0\n"
    "    mov %rsp, %rbx\n    .cfi_def_cfa_register %rbx\n"
    "    mov %rbx, sf_test_frame_rbx(%rip)\n"
    "    and $-64, %rsp\n    sub $0x40, %rsp\n    xor %ebp, %ebp\n"
    "    call *%rdi\n"
    "    mov %rbx, %rsp\n    .cfi_def_cfa_register %rsp\n"
    "    pop %rbx\n    .cfi_adjust_cfa_offset -8\n    .cfi_restore %rbx\n"
    "    pop %rbp\n    .cfi_adjust_cfa_offset -8\n    .cfi_restore %rbp\n"
    "    ret\n    .cfi_endproc\n.size sf_test_frame_in_rbx, .-sf_test_frame_in_rbx\n");

namespace {
__attribute__((noinline)) void clobbers_rbx_then_snapshots() {
    asm volatile("mov $0x5bad, %%rbx" ::: "rbx");   // saved in the prologue, by its CFI
    take_snapshot();
    asm volatile("" ::: "memory");
}
__attribute__((noinline)) void calls_frame_in_rbx() {
    sf_test_frame_in_rbx(&clobbers_rbx_then_snapshots);
    asm volatile("" ::: "memory");
}
}  // namespace

TEST_CASE("a frame whose CFA is rbx (glibc's lazy binding) is stepped with rbx recovered from the top",
          "[decoder][native]") {
    prepare_snapshot();
    calls_frame_in_rbx();
    test::World w;
    for (const auto& m : test::self_modules()) w.map.apply(Event{m});
    Decoder d(w.map, DecoderOptions{});
    CallTrace t = d.decode(g_snapshot);
    const std::string names = symbols_of(t);
    INFO(names << fail_reason_name(t.failure));
    CHECK(t.status != TraceStatus::kFailed);
    const size_t rbx_frame = names.find("sf_test_frame_in_rbx\n");
    REQUIRE(rbx_frame != std::string::npos);
    CHECK(names.find("calls_frame_in_rbx", rbx_frame) != std::string::npos);
    SECTION("the frame's rbx is the callee's saved copy: with that slot overwritten, no caller is found") {
        Sample damaged = g_snapshot;
        size_t overwritten = 0;
        for (size_t at = 0; at + 8 <= damaged.stack.size(); at += 8) {
            uint64_t word = 0;
            std::memcpy(&word, damaged.stack.data() + at, sizeof word);
            if (word != sf_test_frame_rbx) continue;
            const uint64_t bad = 0x5bad;
            std::memcpy(damaged.stack.data() + at, &bad, sizeof bad);
            ++overwritten;
        }
        REQUIRE(overwritten >= 1);
        CallTrace t2 = Decoder(w.map, DecoderOptions{}).decode(damaged);
        CHECK(symbols_of(t2).find("calls_frame_in_rbx") == std::string::npos);
    }
}

TEST_CASE("a signal frame is crossed the same way whether or not libunwind has its row cached", "[decoder][native]") {
    // The snapshot is taken in a signal handler: above it, glibc's sigreturn trampoline, whose
    // unwind row is made of DWARF expressions that libunwind reads from libc's .eh_frame when it
    // applies the row. The second decode finds the row in libunwind's cache, so it makes no
    // find_proc_info call; it must still read those expressions, or it walks on by rbp instead and
    // the trace depends on what was decoded before (the live profile and replay then differed).
    struct sigaction action {}, previous {};
    action.sa_handler = snapshot_in_handler;
    sigemptyset(&action.sa_mask);
    REQUIRE(sigaction(SIGUSR2, &action, &previous) == 0);
    prepare_snapshot();
    signal_level1();
    sigaction(SIGUSR2, &previous, nullptr);
    test::World w;
    for (const auto& m : test::self_modules()) w.map.apply(Event{m});
    DecoderOptions options;
    options.incremental = false;   // the second walk must step again, not take over the first
    Decoder d(w.map, options);
    const CallTrace first = d.decode(g_snapshot);
    const CallTrace second = d.decode(g_snapshot);
    INFO("first:\n" << symbols_of(first) << "second:\n" << symbols_of(second));
    CHECK(symbols_of(first).find("snapshot_in_handler") != std::string::npos);
    CHECK(symbols_of(first).find("signal_level2") != std::string::npos);
    CHECK(symbols_of(first).find("signal_level1") != std::string::npos);
    CHECK(second.frames == first.frames);
    // The handler returns to the trampoline's first byte, which no call pushed: the frame is named
    // by that pc, not by the byte before it (a nop no symbol covers, "[libc.so.6]").
    const std::string libc_id = ElfFile("/usr/lib/x86_64-linux-gnu/libc.so.6").build_id();
    if (libc_id.size() > 4 && std::filesystem::exists(std::string(ElfFile::kDebugRoot) + "/.build-id/" +
                                                      libc_id.substr(0, 2) + "/" + libc_id.substr(2) + ".debug")) {
        CHECK(symbols_of(first).find("__restore_rt") != std::string::npos);
        CHECK(symbols_of(first).find("[libc.so.6]") == std::string::npos);
    } else {
        WARN("no detached debug file for libc.so.6 (libc6-dbg): its trampoline has no name to check");
    }
}

namespace {
// A function without unwind info (no CFI directives), as ld.so finds a library's `_init`.
extern "C" void sf_test_no_cfi_entry();
asm(".text\n.globl sf_test_no_cfi_entry\n.type sf_test_no_cfi_entry, @function\nsf_test_no_cfi_entry:\n"
    "    ret\n.size sf_test_no_cfi_entry, .-sf_test_no_cfi_entry\n");

// The real stack of a call through a pointer: the callee notes its return address and takes the
// snapshot, whose words above that return address are its caller's frames.
uint64_t g_indirect_return = 0;
__attribute__((noinline)) void snapshot_after_indirect_call() {
    g_indirect_return = reinterpret_cast<uint64_t>(__builtin_return_address(0));
    take_snapshot();
    asm volatile("" ::: "memory");
}
// Calls through a pointer the compiler cannot see through: `call *reg` or `call *[rip + d]`.
void (*volatile g_indirect_target)() = nullptr;
__attribute__((noinline)) void call_through_pointer() {
    g_indirect_target();
    asm volatile("" ::: "memory");
}
}  // namespace

TEST_CASE("a top at the first byte of a function without unwind info, called through a pointer", "[decoder][native]") {
    // Nothing is pushed at a function's first byte, so [sp] is the return address whatever call
    // entered it; before, only a direct call into the function was taken (the JVM's start:
    // ld.so calling libjsvml.so's `_init`, native_unwind_failed). The sample is the snapshot's
    // stack from that return address's slot, with the pc at the first byte of a function without
    // CFI: as if call_through_pointer had called that one.
    prepare_snapshot();
    g_indirect_target = &snapshot_after_indirect_call;
    call_through_pointer();
    REQUIRE(g_indirect_return != 0);
    const size_t slot = offset_of_word(g_snapshot, g_indirect_return);
    REQUIRE(slot + 8 < g_snapshot.stack.size());
    Sample sample;
    sample.time_ns = 1000;
    sample.regs.ip = reinterpret_cast<uint64_t>(&sf_test_no_cfi_entry);
    sample.regs.sp = g_snapshot.stack_sp + slot;
    sample.regs.bp = 0x10;   // no frame pointer to follow
    sample.stack_sp = sample.regs.sp;
    sample.stack.assign(g_snapshot.stack.begin() + static_cast<std::ptrdiff_t>(slot), g_snapshot.stack.end());
    test::World w;
    for (const auto& m : test::self_modules()) w.map.apply(Event{m});
    DecoderOptions options;
    options.incremental = false;
    Decoder d(w.map, options);
    const CallTrace t = d.decode(sample);
    INFO(symbols_of(t) << fail_reason_name(t.failure));
    // (The walk may stop further up: the copy ends where the test's own frames run past it.)
    CHECK(d.stats().native_leaf_tops == 1);
    REQUIRE(t.frames.size() >= 2);
    CHECK(t.frames[0].symbol.str() == "sf_test_no_cfi_entry");
    CHECK(t.frames[1].symbol.str().find("call_through_pointer") != std::string::npos);
}

TEST_CASE("a sample taken inside rt_sigreturn steps through the saved context", "[decoder][native]") {
    // The kernel reports the instruction after the trampoline's syscall, where its unwind rows have
    // ended; sp is the saved context's address. Seen on JDK 17 and 25 after the VM's SIGSEGV
    // handling (safepoint polls) and validate's SIGPROF: libunwind found no row there, and a rescan
    // took a stale return address (a wrong trace or bad_return_address).
    struct sigaction action {}, previous {}, installed {};
    action.sa_handler = snapshot_in_handler;
    sigemptyset(&action.sa_mask);
    REQUIRE(sigaction(SIGUSR2, &action, &previous) == 0);
    REQUIRE(sigaction(SIGUSR2, nullptr, &installed) == 0);
    prepare_snapshot();
    signal_level1();
    sigaction(SIGUSR2, &previous, nullptr);
    const uint64_t restorer = reinterpret_cast<uint64_t>(installed.sa_restorer);
    REQUIRE(restorer != 0);
    // The handler's return address into the trampoline; the context lies right above it.
    const size_t slot = offset_of_word(g_snapshot, restorer);
    REQUIRE(slot + 8 < g_snapshot.stack.size());
    const size_t context = slot + 8;
    const auto* uc = reinterpret_cast<const ucontext_t*>(g_snapshot.stack.data() + context);
    constexpr uint64_t kPastSyscall = 9;   // `mov $15, %rax` (7 bytes), `syscall` (2)
    Sample in_sigreturn;
    in_sigreturn.time_ns = 1000;
    in_sigreturn.regs.ip = restorer + kPastSyscall;
    in_sigreturn.regs.sp = g_snapshot.stack_sp + context;
    in_sigreturn.regs.bp = static_cast<uint64_t>(uc->uc_mcontext.gregs[REG_RBP]);
    in_sigreturn.stack_sp = in_sigreturn.regs.sp;
    in_sigreturn.stack.assign(g_snapshot.stack.begin() + static_cast<std::ptrdiff_t>(context), g_snapshot.stack.end());
    test::World w;
    for (const auto& m : test::self_modules()) w.map.apply(Event{m});
    Decoder d(w.map, DecoderOptions{});
    const CallTrace t = d.decode(in_sigreturn);
    INFO(symbols_of(t) << fail_reason_name(t.failure));
    REQUIRE(!t.frames.empty());
    CHECK(d.stats().signal_frames == 1);
    CHECK(symbols_of(t).find("signal_level2") != std::string::npos);
    CHECK(symbols_of(t).find("signal_level1") != std::string::npos);
}

namespace {
// The same three levels, 256 bytes further down the stack (their frames at other sp and rbp).
__attribute__((noinline)) void unwind_level1_deeper() {
    volatile char pad[256];
    pad[0] = 1;
    unwind_level1();
    asm volatile("" ::: "memory");
    (void)pad[0];
}

// `s` as a sample of thread `tid`. A decoder keeps what a thread's last complete walk found (its
// outermost sp, by which a fragment cut at a page boundary below it counts as full: incomplete,
// not failed), which a new decoder has not seen: tests that compare a decoder's walks with a new
// one's give each sample a thread of its own, so that only the decoder-wide caches carry over.
// (A 400-byte cut of the same thread's snapshot ended at a page boundary in 1 of ~50 runs, as
// ASLR placed the stack, and came out incomplete with the memo decoder and failed with the new one.)
Sample on_thread_of_its_own(const Sample& s, uint32_t tid) {
    Sample own = s;
    own.tid = tid;
    return own;
}

// The three levels' snapshot taken at two depths, and a map of this process's modules.
struct TwoDepths {
    test::World world;
    Sample shallow, deeper;
};
void snapshot_two_depths(TwoDepths& out) {
    for (const auto& m : test::self_modules()) out.world.map.apply(Event{m});
    prepare_snapshot();
    unwind_level1();
    out.shallow = g_snapshot;
    prepare_snapshot();
    unwind_level1_deeper();
    out.deeper = g_snapshot;
    REQUIRE(out.deeper.regs.sp < out.shallow.regs.sp);
}
}  // namespace

TEST_CASE("a native frame's unwind rule, once confirmed, answers as libunwind does", "[decoder][native]") {
    // From its second step through an ip on, the decoder knows the ip's rule (the CFA from rsp or
    // rbp, the return address and the saved rbp at fixed offsets from it) and steps without
    // libunwind: every walk must equal a new decoder's, which has only libunwind.
    TwoDepths two;
    snapshot_two_depths(two);
    const test::World& w = two.world;
    const Sample& shallow = two.shallow;
    const Sample& deeper = two.deeper;
    DecoderOptions options;
    options.incremental = false;   // every walk steps through every frame
    Decoder d(w.map, options);
    uint32_t tid = 100;
    for (const Sample* s : {&shallow, &shallow, &shallow, &deeper, &shallow, &deeper}) {
        const Sample own = on_thread_of_its_own(*s, tid++);
        const CallTrace t = d.decode(own);
        const CallTrace fresh = Decoder(w.map, options).decode(own);
        INFO("cached:\n" << symbols_of(t) << "libunwind only:\n" << symbols_of(fresh));
        CHECK(t == fresh);
        CHECK(symbols_of(t).find("unwind_level1") != std::string::npos);
    }
    // The first walk saw each ip once, the second confirmed the rules: later walks used them,
    // the deeper stack's frames at their own sp and rbp too.
    CHECK(d.native_rule_steps() >= 3 * 3);
}

TEST_CASE("a caller frame met before steps from its memo line, as the full native step does", "[decoder][native]") {
    // Once a walk has stepped through a caller frame by its module's CFI row, the frame's symbol
    // and rule come from one memo line (NativeUnwinder::CallerFacts). Every later walk must equal a
    // new decoder's: the same functions at another depth, and fragments cut short inside them, where
    // a memoized rule's slots lie past the end and the full step decides.
    TwoDepths two;
    snapshot_two_depths(two);
    const test::World& w = two.world;
    const Sample& shallow = two.shallow;
    std::vector<Sample> samples{shallow, shallow, two.deeper, shallow};
    for (size_t keep : {16, 48, 120, 256, 400, 800, 1500, 3000, 6000}) {
        if (keep >= shallow.stack.size()) continue;
        Sample cut = shallow;
        cut.stack.resize(keep);
        samples.push_back(cut);
    }
    DecoderOptions options;
    options.incremental = false;
    Decoder d(w.map, options);
    uint32_t tid = 100;
    for (const Sample& s : samples) {
        const uint64_t memo_steps = d.native_caller_steps();
        const Sample own = on_thread_of_its_own(s, tid++);
        const CallTrace t = d.decode(own);
        const CallTrace fresh = Decoder(w.map, options).decode(own);
        INFO(s.stack.size() << " bytes, memoized:\n" << symbols_of(t) << "fresh:\n" << symbols_of(fresh));
        CHECK(t == fresh);
        if (&s != &samples.front() && s.stack.size() == shallow.stack.size()) CHECK(d.native_caller_steps() > memo_steps);
    }
}

namespace {
// Deeper than the 16 KB copied: each level keeps a buffer the compiler cannot drop.
__attribute__((noinline)) int deep_native(int depth) {
    volatile char pad[512];
    pad[0] = static_cast<char>(depth);
    if (depth == 0) {
        take_snapshot();
        return pad[0];
    }
    const int r = deep_native(depth - 1);
    asm volatile("" ::: "memory");
    return r + pad[0];
}
void* deep_snapshot_on_new_thread(void*) {
    prepare_snapshot();
    deep_native(64);
    return nullptr;
}

void* snapshot_on_new_thread(void*) {
    prepare_snapshot();
    unwind_level1();
    return nullptr;
}

// The same with frame pointers kept (as in libjvm's and JNI libraries' functions), so that an rbp
// chain leads through these frames too.
#define SF_KEEP_FP __attribute__((noinline, optimize("no-omit-frame-pointer")))
SF_KEEP_FP void fp_level3() { take_snapshot(); asm volatile("" ::: "memory"); }
SF_KEEP_FP void fp_level2() { fp_level3(); asm volatile("" ::: "memory"); }
SF_KEEP_FP void fp_level1() { fp_level2(); asm volatile("" ::: "memory"); }
SF_KEEP_FP void* fp_snapshot_on_new_thread(void*) {
    prepare_snapshot();
    fp_level1();
    asm volatile("" ::: "memory");
    return nullptr;
}
#undef SF_KEEP_FP
// g_snapshot taken on a new thread by `body` (its stack is short and whole), and a World that knows
// this process's modules.
void snapshot_new_thread(void* (*body)(void*), test::World& w) {
    pthread_t thread;
    REQUIRE(pthread_create(&thread, nullptr, body, nullptr) == 0);
    pthread_join(thread, nullptr);
    for (const auto& m : test::self_modules()) w.map.apply(Event{m});
}

}  // namespace

TEST_CASE("a thread that never ran Java decodes completely down to its first frame; a kernel-mode sample gets a "
          "[kernel] leaf",
          "[decoder][native]") {
    // A new thread's stack is short: the snapshot holds it all, from take_snapshot to glibc's clone3,
    // whose unwind row says it is the thread's first frame (as for a GC or compiler thread).
    test::World w;
    snapshot_new_thread(&snapshot_on_new_thread, w);
    Decoder d(w.map, DecoderOptions{});
    const CallTrace user = d.decode(g_snapshot);
    INFO(symbols_of(user) << fail_reason_name(user.failure));
    CHECK(user.status == TraceStatus::kComplete);
    REQUIRE(user.frames.size() >= 5);
    CHECK(user.frames[0].symbol.str().find("take_snapshot") != std::string::npos);
    CHECK(symbols_of(user).find("snapshot_on_new_thread") != std::string::npos);
    // Every frame is named: by its function, or where no symbol covers it (glibc's thread start in
    // a stripped libc) by its file.
    for (const Frame& f : user.frames) {
        INFO(f.symbol);
        CHECK_FALSE(f.symbol.empty());
        if (f.symbol.str().front() == '[') CHECK(f.symbol.str().find(".so") != std::string::npos);
    }

    Sample in_kernel = g_snapshot;
    in_kernel.source = SampleSource::kPerfKernel;
    const CallTrace kernel = d.decode(in_kernel);
    CHECK(kernel.status == TraceStatus::kComplete);
    REQUIRE(kernel.frames.size() == user.frames.size() + 1);
    CHECK(kernel.frames[0].kind == FrameKind::kNative);
    CHECK(kernel.frames[0].symbol == kKernelFrameName);
    CHECK(std::equal(user.frames.begin(), user.frames.end(), kernel.frames.begin() + 1));
    // The leaf is not kept in the incremental decoder's journal: the next user sample has none.
    CHECK(d.decode(g_snapshot) == user);
}

TEST_CASE("a leaf stub called from the VM's C++ code (the icache flush stub) returns to the native caller at [sp]",
          "[decoder][native]") {
    // A compiler or VM thread that installs code flushes the icache through a frameless stub in the
    // code cache: its sample's pc is in the stub and [sp] holds the return address into libjvm. Built
    // from a real native snapshot: one more word pushed, the old pc as the return address.
    test::World w;
    snapshot_new_thread(&snapshot_on_new_thread, w);
    const uint64_t stub_begin = test::kCodeCacheLow + 0x70000;
    w.map.apply(Event{Stub{1, "flush_icache_stub", stub_begin, stub_begin + 0x40, -1}});
    Decoder d(w.map, DecoderOptions{});
    const CallTrace native = d.decode(g_snapshot);
    REQUIRE(native.status == TraceStatus::kComplete);

    Sample in_stub = g_snapshot;
    const uint64_t ret = g_snapshot.regs.ip;
    in_stub.regs.ip = stub_begin + 0x10;
    in_stub.regs.sp -= 8;
    in_stub.stack_sp -= 8;
    in_stub.stack.insert(in_stub.stack.begin(), reinterpret_cast<const uint8_t*>(&ret),
                         reinterpret_cast<const uint8_t*>(&ret) + 8);
    Decoder fresh(w.map, DecoderOptions{});
    const CallTrace t = fresh.decode(in_stub);
    INFO(symbols_of(t) << fail_reason_name(t.failure));
    CHECK(t.status == TraceStatus::kComplete);
    REQUIRE(t.frames.size() == native.frames.size() + 1);
    CHECK(t.frames[0].kind == FrameKind::kStub);
    CHECK(t.frames[0].symbol == "flush_icache_stub");
    CHECK(t.frames[1].symbol.str().find("take_snapshot") != std::string::npos);
    CHECK(symbols_of(t).find("snapshot_on_new_thread") != std::string::npos);

    // Not when [sp] is no native code: a stub's data word does not send the walk into a module.
    Sample garbage = in_stub;
    const uint64_t data = 0x1234;
    std::memcpy(garbage.stack.data(), &data, 8);
    const CallTrace g = Decoder(w.map, DecoderOptions{}).decode(garbage);
    CHECK(g.status != TraceStatus::kComplete);
}

TEST_CASE("a stub the VM's C++ code called that pushed registers without an rbp frame (VM_Version's CPUID stubs) "
          "returns to the first word above sp that a call ends at",
          "[decoder][native]") {
    // At the JVM's start VM_Version::initialize calls get_cpu_info_stub and detect_virt_stub: each
    // pushes rbp, rbx, rsi and runs CPUID, which a hypervisor traps, so samples land there for
    // milliseconds. Built from a real snapshot with frame pointers: fp_level3 "called" such a stub
    // instead of take_snapshot; the stub pushed the caller's rbp and two registers, then reused rbp.
    test::World w;
    snapshot_new_thread(&fp_snapshot_on_new_thread, w);
    const uint64_t stub_begin = test::kCodeCacheLow + 0x70000;
    w.map.apply(Event{Stub{1, "VM_Version stub", stub_begin, stub_begin + 0x200, -1}});
    const CallTrace native = Decoder(w.map, DecoderOptions{}).decode(g_snapshot);
    REQUIRE(native.status == TraceStatus::kComplete);
    REQUIRE(native.frames.size() >= 5);
    REQUIRE(native.frames[1].symbol.str().find("fp_level3") != std::string::npos);

    // Where take_snapshot's return address into fp_level3 lies, and fp_level3's rbp.
    const uint64_t ret = native.frames[1].pc;
    uint64_t ret_slot = 0;
    for (size_t off = 0; off + 8 <= g_snapshot.stack.size(); off += 8) {
        uint64_t word = 0;
        std::memcpy(&word, g_snapshot.stack.data() + off, 8);
        if (word == ret) {
            ret_slot = g_snapshot.stack_sp + off;
            break;
        }
    }
    REQUIRE(ret_slot != 0);
    uint64_t caller_fp = g_snapshot.regs.bp;
    if (caller_fp == ret_slot - 8) std::memcpy(&caller_fp, g_snapshot.stack.data() + (ret_slot - 8 - g_snapshot.stack_sp), 8);
    REQUIRE(caller_fp > ret_slot);

    auto in_stub_with = [&](uint64_t return_word) {
        Sample s = g_snapshot;
        const uint64_t pushed[] = {0x202, 0x7, caller_fp, return_word};   // flags, rsi, rbx's place: rbp, return
        s.stack.assign(reinterpret_cast<const uint8_t*>(pushed), reinterpret_cast<const uint8_t*>(pushed) + sizeof pushed);
        s.stack.insert(s.stack.end(), g_snapshot.stack.begin() + static_cast<ptrdiff_t>(ret_slot + 8 - g_snapshot.stack_sp),
                       g_snapshot.stack.end());
        s.stack_sp = s.regs.sp = ret_slot - 24;
        s.regs.bp = 0x600000;   // get_cpu_info's data, no stack address
        s.regs.ip = stub_begin + 0x30;
        return s;
    };
    Decoder d(w.map, DecoderOptions{});
    const CallTrace t = d.decode(in_stub_with(ret));
    INFO(symbols_of(t) << fail_reason_name(t.failure));
    CHECK(t.status == TraceStatus::kComplete);
    CHECK(d.stats().stub_vm_pushes == 1);
    REQUIRE(t.frames.size() == native.frames.size());
    CHECK(t.frames[0].kind == FrameKind::kStub);
    CHECK(t.frames[0].symbol == "VM_Version stub");
    CHECK(std::equal(t.frames.begin() + 1, t.frames.end(), native.frames.begin() + 1));

    // Not through a word no call ends at: a code address there is data, not a return.
    Decoder other(w.map, DecoderOptions{});
    const CallTrace g = other.decode(in_stub_with(ret - 1));
    CHECK(g.status != TraceStatus::kComplete);
    CHECK(other.stats().stub_vm_pushes == 0);

    // Nor when [sp] itself returns into Java code: a frameless stub (itable, vtable stubs, an
    // adapter) was called from there, and the VM word above it is stale (h2, JDK 25:
    // Reflection::reflect_new_array named as an itable stub's caller).
    Sample java_at_sp = in_stub_with(ret);
    const uint64_t java_return = test::kInterpReturnPc;
    std::memcpy(java_at_sp.stack.data(), &java_return, 8);
    Decoder third(w.map, DecoderOptions{});
    third.decode(java_at_sp);
    CHECK(third.stats().stub_vm_pushes == 0);
}

TEST_CASE("a native stack deeper than the fragment is incomplete, not failed, where libunwind needs the words above it",
          "[decoder][native]") {
    // 64 levels of 512+ bytes: the 16 KB copy ends inside deep_native's frames, so the step that
    // needs the next frame's return address reads above the fragment's end.
    test::World w;
    snapshot_new_thread(&deep_snapshot_on_new_thread, w);
    REQUIRE(g_snapshot.stack.size() == test::kStackBytes);   // full: the stack goes on above it
    const CallTrace t = Decoder(w.map, DecoderOptions{}).decode(g_snapshot);
    INFO(symbols_of(t) << fail_reason_name(t.failure));
    CHECK(t.status == TraceStatus::kIncomplete);
    REQUIRE(t.frames.size() >= 10);
    CHECK(t.frames[0].symbol.str().find("take_snapshot") != std::string::npos);
    CHECK(t.frames.back().symbol.str().find("deep_native") != std::string::npos);
}

namespace {
uint64_t g_big_frame_pc = 0;
__attribute__((noinline)) void note_return_pc() {
    g_big_frame_pc = reinterpret_cast<uint64_t>(__builtin_return_address(0));
    asm volatile("" ::: "memory");
}
// A function with more locals than a fragment holds (as HotSpot's
// ThreadSafepointState::handle_polling_page_exception, 9.6 KB): its return address lies 20 KB
// above the sp of any call it makes.
__attribute__((noinline, optimize("omit-frame-pointer"))) int big_frame() {
    volatile char pad[20480];
    pad[0] = 1;
    note_return_pc();
    return pad[0] + pad[20479];
}
}  // namespace

TEST_CASE("a native frame whose return address lies above the fragment ends the walk incomplete, not at a stale "
          "Java return address below it",
          "[decoder][native]") {
    // The demo at 100 us, a Java thread's fragment cut to 8 KB by stack=auto, sampled in the
    // safepoint handler's frame: the unwind row put the return address above the fragment's end,
    // and the rescan that follows a failed native step took a return into compiled code from the
    // handler's uninitialised locals (a frame of the recursion that had run there before).
    REQUIRE(big_frame() == 1);
    test::World w;
    for (const auto& m : test::self_modules()) w.map.apply(Event{m});
    const uint64_t d_begin = test::kCodeCacheLow + 0x20000;
    CodeLoad d = test::nmethod(d_begin, 5, 6);
    test::add_scope(d, 0x30, {{test::method_id(5), 21}});
    w.add_code(d);
    test::FakeStack s;
    const uint64_t sp = s.at(0);
    const uint64_t stale_sp = sp + 0x80;   // a stale frame of D's under the big frame's locals
    const uint64_t fp_stub = s.at(0x400);
    s.put(stale_sp - 8, d_begin + 0x30);
    s.put(stale_sp + 5 * 8, test::kCallStubReturn);
    s.put(stale_sp + 4 * 8, fp_stub);
    w.entry_frame(s, fp_stub);
    DecoderOptions options;   // libunwind and symbols on, as live
    Decoder decoder(w.map, options);
    const CallTrace t = decoder.decode(test::sample_of(s, g_big_frame_pc, sp, 0x10));
    INFO(symbols_of(t) << fail_reason_name(t.failure));
    CHECK(t.status == TraceStatus::kIncomplete);
    CHECK(test::java_frames(t).empty());
    REQUIRE(t.frames.size() == 1);
    CHECK(t.frames[0].symbol.str().find("big_frame") != std::string::npos);
    CHECK(decoder.stats().native_rescans == 0);
}

TEST_CASE("a module file of another build than the recorded one is not used to unwind or name frames",
          "[decoder][native]") {
    pthread_t thread;
    REQUIRE(pthread_create(&thread, nullptr, &fp_snapshot_on_new_thread, nullptr) == 0);
    pthread_join(thread, nullptr);
    const std::string self = std::filesystem::read_symlink("/proc/self/exe").string();
    const std::string self_id = ElfFile(self).build_id();
    REQUIRE_FALSE(self_id.empty());   // ld --build-id, Debian's default
    auto decode_with = [&](const std::string& recorded_id) {
        test::World w;
        for (ModuleMap m : test::self_modules()) {
            m.build_id = m.path == self ? recorded_id : ElfFile(m.path).build_id();
            w.map.apply(Event{m});
        }
        Decoder d(w.map, DecoderOptions{});
        CallTrace t = d.decode(g_snapshot);
        return std::make_pair(t, d.changed_modules());
    };
    const auto [same, none] = decode_with(self_id);
    INFO(symbols_of(same));
    CHECK(none == std::vector<std::string>{});
    CHECK(same.status == TraceStatus::kComplete);
    REQUIRE_FALSE(same.frames.empty());
    CHECK(same.frames[0].symbol.str().find("take_snapshot") != std::string::npos);

    std::string other_id = self_id;
    other_id[0] = other_id[0] == '0' ? '1' : '0';
    const auto [other, changed] = decode_with(other_id);
    CHECK(changed == std::vector<std::string>{self});
    INFO(symbols_of(other));
    INFO(fail_reason_name(other.failure));
    // The test binary's frames are left unnamed: its symbols would name another build's code.
    CHECK(symbols_of(other).find("take_snapshot") == std::string::npos);
    CHECK(symbols_of(other).find("snapshot_on_new_thread") == std::string::npos);
    // Nor is the walk continued by following rbp through that code: it fails at its first step,
    // which keeps no frame (a failed step's own frame is dropped).
    CHECK(other.status == TraceStatus::kFailed);
    CHECK(other.failure == FailReason::kNativeUnwindFailed);
    CHECK(other.frames.empty());
}

namespace {

// glibc's clone3 in this process's libc: the pc right after its syscall (where its FDE has ended,
// cfi_endproc before the syscall), its entry, and the return address of a direct call to it
// (__clone_internal's). Found by the bytes `mov $435, %eax; syscall` and `mov $-EINVAL, %eax`.
struct Clone3 {
    uint64_t after_syscall = 0, entry = 0, caller_ret = 0;
};

std::optional<Clone3> find_clone3(const std::vector<ModuleMap>& modules) {
    static const uint8_t kSyscall[] = {0xb8, 0xb3, 0x01, 0x00, 0x00, 0x0f, 0x05};
    static const uint8_t kEinval[] = {0xb8, 0xea, 0xff, 0xff, 0xff};
    for (const ModuleMap& m : modules) {
        if (m.path.find("/libc.so") == std::string::npos) continue;
        const auto* text = reinterpret_cast<const uint8_t*>(m.begin);
        const size_t size = m.end - m.begin;
        const auto* at = std::search(text, text + size, std::begin(kSyscall), std::end(kSyscall));
        if (at == text + size) return std::nullopt;
        Clone3 c;
        c.after_syscall = reinterpret_cast<uint64_t>(at) + sizeof kSyscall;
        for (const uint8_t* p = at; p > at - 48 && p > text; --p) {
            if (std::equal(std::begin(kEinval), std::end(kEinval), p)) c.entry = reinterpret_cast<uint64_t>(p);
        }
        if (c.entry == 0) return std::nullopt;
        for (size_t i = 0; i + 5 <= size; ++i) {
            if (text[i] != 0xe8) continue;
            int32_t rel = 0;
            std::memcpy(&rel, text + i + 1, 4);
            const uint64_t ret = m.begin + i + 5;
            if (ret + static_cast<uint64_t>(int64_t{rel}) == c.entry) {
                c.caller_ret = ret;
                return c;
            }
        }
    }
    return std::nullopt;
}

}  // namespace

TEST_CASE("a sample right after clone3's syscall: the parent returns to its caller at [sp], the new thread has no "
          "frame above it",
          "[decoder][native]") {
    // clone3 ends its unwind info before the syscall (the new thread goes on from there on its own
    // stack), so no unwind row covers the pc where both threads are sampled in the kernel's clone.
    // Before, the walk scanned the stack above for a return into Java code: a thread-creating
    // thread's stack holds stale wrapper frames of earlier native calls (Thread.setPriority0 under
    // Thread.<init>), and 2.6 % of a thread-per-request workload's samples failed or named them.
    test::World w;
    const std::vector<ModuleMap> modules = test::self_modules();
    for (const auto& m : modules) w.map.apply(Event{m});
    const std::optional<Clone3> clone3 = find_clone3(modules);
    if (!clone3) {
        WARN("this libc's clone3 is not the one the test knows (glibc 2.34+ on x86-64)");
        return;
    }
    Sample parent;
    parent.time_ns = 1000;
    parent.regs.ip = clone3->after_syscall;
    parent.regs.sp = parent.stack_sp = test::kStackBase;
    parent.regs.bp = 0x1230;   // glibc keeps the new thread's descriptor there: no frame pointer
    parent.stack.assign(4096, 0);
    std::memcpy(parent.stack.data(), &clone3->caller_ret, 8);
    // Only [sp] is set (the caller's own frame is zeros, where the walk stops): the step to it is
    // what is checked, by the decoder's count of such steps.
    Decoder dp(w.map, DecoderOptions{});
    const CallTrace p = dp.decode(parent);
    INFO(symbols_of(p) << fail_reason_name(p.failure));
    REQUIRE_FALSE(p.frames.empty());
    CHECK(p.frames[0].pc == clone3->after_syscall);
    CHECK(dp.stats().native_leaf_tops == 1);

    // The new thread: fresh pages, nothing pushed; or sp at the very top of its stack, where the
    // kernel had nothing to copy (httpserver, JDK 17: empty_stack before). Complete, one frame.
    Sample child = parent;
    std::memset(child.stack.data(), 0, 8);
    Sample at_top = child;
    at_top.stack.clear();
    for (const Sample& first : {child, at_top}) {
        const CallTrace c = Decoder(w.map, DecoderOptions{}).decode(first);
        INFO(symbols_of(c) << fail_reason_name(c.failure) << " with " << first.stack.size() << " bytes");
        CHECK(c.status == TraceStatus::kComplete);
        REQUIRE(c.frames.size() == 1);
        CHECK(c.frames[0].pc == clone3->after_syscall);
    }
    // The new thread at its first call (`xor ebp, ebp; and rsp, -16; mov rdi, r8; call *rdx`, 17
    // bytes on), whose push faults in its stack's first page: sampled in the kernel there, nothing
    // to copy.
    Sample first_call = at_top;
    first_call.regs.ip = clone3->after_syscall + 17;
    first_call.regs.bp = 0;
    first_call.source = SampleSource::kPerfKernel;
    const CallTrace fc = Decoder(w.map, DecoderOptions{}).decode(first_call);
    INFO(symbols_of(fc) << fail_reason_name(fc.failure));
    CHECK(fc.status == TraceStatus::kComplete);
    REQUIRE_FALSE(fc.frames.empty());
    CHECK(fc.frames.back().pc == first_call.regs.ip);
    // Not with rbp still set (no thread that has just begun), nor elsewhere with an empty fragment.
    first_call.regs.bp = 0x1230;
    CHECK(Decoder(w.map, DecoderOptions{}).decode(first_call).failure == FailReason::kEmptyStack);
    Sample elsewhere_empty = at_top;
    elsewhere_empty.regs.ip = clone3->caller_ret;
    CHECK(Decoder(w.map, DecoderOptions{}).decode(elsewhere_empty).failure == FailReason::kEmptyStack);

    // A return address whose call goes elsewhere (another function of libc) is no caller of clone3.
    Sample stale = parent;
    const uint64_t elsewhere = clone3->caller_ret + 0x10000;
    std::memcpy(stale.stack.data(), &elsewhere, 8);
    Decoder ds(w.map, DecoderOptions{});
    const CallTrace s = ds.decode(stale);
    INFO(symbols_of(s) << fail_reason_name(s.failure));
    CHECK(ds.stats().native_leaf_tops == 0);
    CHECK(s.status != TraceStatus::kComplete);
}

TEST_CASE("a sample right after a syscall in a function with a frame is no new thread's first frame, whatever [sp] "
          "holds",
          "[decoder][native]") {
    // glibc's write, when other threads exist, builds a 0x28-byte frame around its syscall and never
    // writes its lowest word. A server's thread sampled there had a zero at [sp] and a return address
    // (into a JNI function, whose own return goes to a breadcrumb thunk the stream names no module
    // for) that the unwind row found at sp + 0x28: the walk took the zero for a new thread's empty
    // stack and ended "complete" with one frame, where AsyncGetCallTrace had the Java stack.
    test::World w;
    for (const auto& m : test::self_modules()) w.map.apply(Event{m});
    static const uint8_t kFrame[] = {0x48, 0x83, 0xec, 0x28};                      // sub $0x28, %rsp
    static const uint8_t kSyscall[] = {0xb8, 0x01, 0x00, 0x00, 0x00, 0x0f, 0x05};   // mov $1, %eax; syscall
    const auto* entry = reinterpret_cast<const uint8_t*>(dlsym(RTLD_DEFAULT, "write"));
    REQUIRE(entry != nullptr);
    const uint8_t* frame = std::search(entry, entry + 0x40, std::begin(kFrame), std::end(kFrame));
    const uint8_t* call = frame == entry + 0x40 ? nullptr
                                                : std::search(frame, entry + 0x80, std::begin(kSyscall), std::end(kSyscall));
    if (call == nullptr || call == entry + 0x80) {
        WARN("this libc's write is not the one the test knows (glibc 2.36 on x86-64)");
        return;
    }
    Sample s;
    s.time_ns = 1000;
    s.regs.ip = reinterpret_cast<uint64_t>(call) + sizeof kSyscall;
    s.regs.sp = s.stack_sp = test::kStackBase;
    s.regs.bp = 0;
    s.stack.assign(4096, 0);
    const uint64_t unnamed_caller = 0x700000001000;   // in no module the stream announced
    std::memcpy(s.stack.data() + 0x28, &unnamed_caller, 8);
    const CallTrace t = Decoder(w.map, DecoderOptions{}).decode(s);
    INFO(symbols_of(t) << fail_reason_name(t.failure));
    // Nothing but the unnamed caller and zeros: a failed walk (counted as such), not a complete one.
    CHECK(t.status == TraceStatus::kFailed);
}

namespace {

// A return address after a call through a function pointer in this binary, as libjvm's calls into
// StubRoutines (`call *%rax` or `call *ptr(%rip)`).
__attribute__((noinline)) uint64_t return_address_here() {
    return reinterpret_cast<uint64_t>(__builtin_return_address(0));
}
uint64_t (*volatile g_through_pointer)() = &return_address_here;

}  // namespace

namespace {

// A function with a frame pointer and an unwind row that names its caller at [rbp+8]: what the
// JDK's JNI functions are (Java_sun_nio_ch_SocketDispatcher_read0 right after its call to read).
// Returns the pc after its call, where that row holds.
__attribute__((noinline, optimize("no-omit-frame-pointer"))) uint64_t pc_in_framed_function() {
    volatile uint64_t pc = g_through_pointer();
    return pc;
}

}  // namespace

TEST_CASE("a JNI function whose unwind row returns into a breadcrumb thunk: the breadcrumb, not a stale [sp]",
          "[decoder][native]") {
    // Temurin 25, a loopback socket read (bench/probes/Natives.java, 100 us): the top was
    // SocketDispatcher_read0 right after `call read`, its row gave the thunk's pc (in no module), and
    // [sp] held a stale return into SocketDispatcher.write0's native wrapper after a call to an
    // address no event names (the write0 thunk). The rule for a frameless leaf took that word and
    // the walk failed two frames on (12 of ~150,000 samples, bad_return_address). A function whose
    // row gave a caller is no frameless leaf: the rbp chain and then the breadcrumb decide.
    test::World w;
    for (const auto& m : test::self_modules()) w.map.apply(Event{m});
    const uint64_t top_pc = pc_in_framed_function();
    const uint64_t d_begin = test::kCodeCacheLow + 0x20000, stale_begin = test::kCodeCacheLow + 0x30000;
    CodeLoad d = test::nmethod(d_begin, 5, 6);
    test::add_scope(d, 0x30, {{test::method_id(5), 21}});
    w.add_code(d);
    CodeLoad stale = test::nmethod(stale_begin, 6, 10, CodeKind::kNativeWrapper);
    stale.code.assign(0x100, 0x90);
    test::put_call(stale, 0x40, test::kCodeCacheLow - 0x100000);   // into a thunk: no announced code
    w.add_code(stale);
    test::FakeStack s;
    const uint64_t b = s.at(0);
    const uint64_t thunk_pc = 0x700000001000;      // in no module the stream announced
    const uint64_t e = b + 0x80;                    // the thunk's rsp at its entry
    s.put(b, stale_begin + 0x45);                   // stale: the write0 wrapper's return from its thunk
    s.put(b + 0x20, e - 8);                         // the JNI function's frame: saved rbp (the thunk's)
    s.put(b + 0x28, thunk_pc);                      // and its return into the thunk
    s.put(e - 48, breadcrumb::kMagic0);             // the thunk's record
    s.put(e - 40, breadcrumb::kMagic1);
    s.put(e - 32, e + 8);                           // java_sp
    s.put(e - 24, d_begin + 0x30);                  // java_pc: D's call of the native method
    s.put(e - 16, 0);
    s.put(e - 8, 0x4444);
    s.put(e, d_begin + 0x30);
    const uint64_t fp_stub = s.at(0x400);
    s.put(e + 8 + 5 * 8, test::kCallStubReturn);    // D (6 words): its return into the call stub
    s.put(e + 8 + 4 * 8, fp_stub);
    w.entry_frame(s, fp_stub);
    DecoderOptions options = test::test_options();
    options.use_libunwind = true;
    options.symbolize_native = true;
    Decoder decoder(w.map, options);
    const CallTrace t = decoder.decode(test::sample_of(s, top_pc, b, b + 0x20));
    INFO(symbols_of(t) << fail_reason_name(t.failure));
    REQUIRE(t.status == TraceStatus::kComplete);
    CHECK(test::java_frames(t) == std::vector<MethodBci>{test::mb(5, 21)});
    CHECK(decoder.stats().breadcrumbs_used == 1);
    CHECK(decoder.stats().native_leaf_tops == 0);
}

TEST_CASE("a stub the VM's C++ code called, sampled past its enter: its caller is the native return at rbp + 8",
          "[decoder][native][stub]") {
    // Unsafe_CopyMemory0 calls jlong_disjoint_arraycopy through StubRoutines' pointer; sampled in the
    // stub (rbp == sp after `enter`), the scan for a return into Java code stepped over the VM's
    // return address and took a stale one further up: "jlong_disjoint_arraycopy <-
    // RequestFacade.setAttribute", then failed (8 of 25,000 samples of a Tomcat server, JDK 25).
    test::World w;
    for (const auto& m : test::self_modules()) w.map.apply(Event{m});
    CodeLoad a = test::nmethod(test::kCodeCacheLow + 0x20000, 5, 6);
    test::add_scope(a, 0x30, {{test::method_id(5), 21}});
    w.add_code(a);
    const Stub stub{1, "jlong_disjoint_arraycopy", test::kCodeCacheLow + 0x50000, test::kCodeCacheLow + 0x50200, -1};
    w.map.apply(Event{stub});
    const uint64_t vm_return = g_through_pointer();
    test::FakeStack s;
    const uint64_t sp = s.at(0x100);
    s.put(sp, s.at(0x400));                  // the VM function's rbp, saved by `enter`
    s.put(sp + 8, vm_return);                // the stub returns into the VM
    s.put(sp + 0x18, a.code_begin + 0x30);   // stale: a return into Java code from an earlier call,
    s.put(sp + 0x10, s.at(0x200));           // whose frame still looks whole
    const uint64_t sp_a = sp + 0x20, fp_entry = s.at(0x800);
    s.put(sp_a + 40, test::kCallStubReturn);
    s.put(sp_a + 32, fp_entry);
    w.entry_frame(s, fp_entry);
    Decoder d(w.map, DecoderOptions{});
    const CallTrace t = d.decode(test::sample_of(s, stub.begin + 0x40, sp, sp));
    INFO(symbols_of(t) << fail_reason_name(t.failure));
    // The step went into the VM's code, not to A. (Beyond it this test's stack holds none of the
    // VM's frames, and what the walk makes of that is not the point.)
    CHECK(d.stats().stub_rbp_frames == 1);
    CHECK(d.stats().stub_scans == 0);
    REQUIRE(t.frames.size() >= 2);
    CHECK(t.frames[0].kind == FrameKind::kStub);
    CHECK(t.frames[1].kind == FrameKind::kNative);
    CHECK(t.frames[1].pc == vm_return);

    // rbp elsewhere (the stub has not built its frame, or it is C2 code's): no native return is
    // taken from [rbp + 8], and the scan finds A, as it did for the sample above before.
    Decoder d2(w.map, DecoderOptions{});
    const CallTrace u = d2.decode(test::sample_of(s, stub.begin + 0x40, sp + 0x10, 0x1234));
    INFO(symbols_of(u) << fail_reason_name(u.failure));
    CHECK(d2.stats().stub_rbp_frames == 0);
    CHECK(u.status == TraceStatus::kComplete);
    CHECK(test::java_frames(u) == std::vector<MethodBci>{test::mb(5, 21)});
}

TEST_CASE("an FFM upcall stub under a Java frame: its caller is the native function at rbp + 8, not a Java "
          "return further up",
          "[decoder][native][stub]") {
    // Linker.upcallStub (JDK 25): glibc's qsort calls the upcall stub, which calls the Java
    // comparator. The stub begins with `enter` and is announced without a frame size; the scan for a
    // return into Java code passed over qsort's frames and the downcall stub under them and took the
    // interpreted frame that had called qsort (every such sample of an FFM test program).
    test::World w;
    for (const auto& m : test::self_modules()) w.map.apply(Event{m});
    CodeLoad cmp = test::nmethod(test::kCodeCacheLow + 0x20000, 5, 4);   // the comparator
    test::add_scope(cmp, 0x30, {{test::method_id(5), 40}});
    w.add_code(cmp);
    CodeLoad sorter = test::nmethod(test::kCodeCacheLow + 0x30000, 6, 6);   // called qsort, long ago
    test::add_scope(sorter, 0x50, {{test::method_id(6), 77}});
    w.add_code(sorter);
    const uint64_t native_return = g_through_pointer();   // qsort's call into the stub returns here
    test::FakeStack s;
    const uint64_t sp = s.at(0x100);
    const uint64_t stub_sp = sp + 4 * 8, stub_fp = stub_sp + 0x80;
    s.put(sp + 2 * 8, stub_fp);                 // the comparator saved the stub's rbp
    s.put(sp + 3 * 8, 0);                       // its return address, set per case below
    // A stale return into Java code inside the stub's frame, whose frame still looks whole.
    const uint64_t stale_slot = stub_sp + 0x20, sorter_sp = stale_slot + 8, fp_entry = s.at(0x800);
    s.put(stale_slot, sorter.code_begin + 0x50);
    s.put(sorter_sp + 4 * 8, fp_entry);
    s.put(sorter_sp + 5 * 8, test::kCallStubReturn);
    w.entry_frame(s, fp_entry);
    s.put(stub_fp, s.at(0x400));                // the native caller's rbp
    s.put(stub_fp + 8, native_return);
    // The Java frame that called the native code (through a downcall stub, in the program): this
    // test's stack holds none of the native frames between, so the walk finds it by rescanning.
    const uint64_t caller_slot = stub_fp + 0x40, caller_sp = caller_slot + 8;
    s.put(caller_slot, sorter.code_begin + 0x50);
    s.put(caller_sp + 4 * 8, fp_entry);
    s.put(caller_sp + 5 * 8, test::kCallStubReturn);

    uint64_t stub_begin = test::kCodeCacheLow + 0x50000;
    for (const char* name : {"upcall_stub", "some_other_stub"}) {
        const Stub stub{1, name, stub_begin, stub_begin + 0x100, -1};
        stub_begin += 0x1000;
        w.map.apply(Event{stub});
        s.put(sp + 3 * 8, stub.begin + 0x9b);
        Decoder d(w.map, DecoderOptions{});
        const CallTrace t = d.decode(test::sample_of(s, cmp.code_begin + 0x2c, sp, 0x1234));
        INFO(name << "\n" << symbols_of(t) << fail_reason_name(t.failure));
        CHECK(t.status == TraceStatus::kComplete);
        CHECK(test::java_frames(t) == std::vector<MethodBci>{test::mb(5, 40), test::mb(6, 77)});
        REQUIRE(t.frames.size() >= 3);
        CHECK(t.frames[1].kind == FrameKind::kStub);
        if (std::string(name) == "upcall_stub") {
            // Into the native caller, and from there to the Java frame that called it.
            CHECK(d.stats().stub_rbp_frames == 1);
            CHECK(d.stats().stub_scans == 0);
            CHECK(t.frames[2].kind == FrameKind::kNative);
            CHECK(t.frames[2].pc == native_return);
            CHECK(t.frames.back().pc == sorter.code_begin + 0x50);
        } else {
            // Any other stub of unknown size under Java code is scanned, as before: the stale return.
            CHECK(d.stats().stub_scans == 1);
            CHECK(t.frames[2].pc == sorter.code_begin + 0x50);
            CHECK(t.frames[2].kind == FrameKind::kCompiled);
            CHECK(t.frames.size() == 3);
        }
    }
}

namespace {
// This process's vDSO as the agent announces it: where the auxiliary vector puts it, with its bytes.
std::optional<ModuleMap> own_vdso() {
    const uint64_t ehdr = getauxval(AT_SYSINFO_EHDR);
    if (ehdr == 0) return std::nullopt;
    std::ifstream maps("/proc/self/maps");
    std::string line;
    while (std::getline(maps, line)) {
        if (line.find("[vdso]") == std::string::npos) continue;
        ModuleMap m;
        m.time_ns = 1;
        m.begin = std::stoull(line.substr(0, line.find('-')), nullptr, 16);
        m.end = std::stoull(line.substr(line.find('-') + 1), nullptr, 16);
        m.path = "[vdso]";
        if (m.begin != ehdr) return std::nullopt;
        const auto* bytes = reinterpret_cast<const uint8_t*>(m.begin);
        m.image.assign(bytes, bytes + (m.end - m.begin));
        m.build_id = ElfFile(m.image).build_id();
        return m;
    }
    return std::nullopt;
}
}  // namespace

TEST_CASE("a sample in the vDSO is named and unwound from the bytes its ModuleMap carries", "[decoder][native]") {
    const std::optional<ModuleMap> vdso = own_vdso();
    if (!vdso) {
        WARN("no vDSO in this process");
        return;
    }
    // The first function of the vDSO's symbol table (clock_gettime, gettimeofday, ...), entered: its
    // return address at [sp], into the snapshot's innermost frame.
    ElfFile elf(vdso->image);
    REQUIRE(elf.valid());
    uint64_t bias = 0;
    REQUIRE(elf.bias_for(vdso->begin, 0, bias));
    std::optional<ElfFile::Function> function;
    for (uint64_t vaddr = vdso->begin - bias; vaddr < vdso->end - bias && !function; ++vaddr) {
        function = elf.function_at(vaddr);
    }
    REQUIRE(function);
    const std::string name(function->name);
    prepare_snapshot();
    unwind_level1();
    Sample entered = g_snapshot;
    entered.regs.sp -= 8;
    entered.stack_sp = entered.regs.sp;
    entered.stack.insert(entered.stack.begin(), 8, 0);
    std::memcpy(entered.stack.data(), &g_snapshot.regs.ip, 8);
    entered.regs.ip = function->vaddr + bias;

    test::World w;
    for (const auto& m : test::self_modules()) w.map.apply(Event{m});
    {
        // Without the vDSO's module the frame has no name.
        Decoder d(w.map, DecoderOptions{});
        const CallTrace t = d.decode(entered);
        REQUIRE_FALSE(t.frames.empty());
        CHECK(t.frames.front().symbol.str().find(name) == std::string::npos);
    }
    w.map.apply(Event{*vdso});
    Decoder d(w.map, DecoderOptions{});
    const CallTrace t = d.decode(entered);
    INFO(name << ":\n" << symbols_of(t) << fail_reason_name(t.failure));
    REQUIRE(t.frames.size() >= 5);
    CHECK(t.frames[0].symbol.str() == name);
    CHECK(t.frames[1].symbol.str().find("take_snapshot") != std::string::npos);
    CHECK(symbols_of(t).find("unwind_level1") != std::string::npos);
}
