// The agent's options: "key=value,key=value,flag", in the style of async-profiler. One table
// (options.cpp) lists every option with the values it accepts; adding an option is one row.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "log.hpp"
#include "stackfrag/base/result.hpp"
#include "stackfrag/decoder/decoder.hpp"
#include "stackfrag/kernel/perf_events.hpp"

namespace sf::agent {

// thread: one perf event per Java thread (opened at ThreadStart); cpu: one inheriting event per
// CPU for the whole process, which also samples the JVM's non-Java threads; jvmti: no snapshots,
// a sampler thread taking GetAllStackTraces every interval (the safepoint-biased baseline).
// mode=auto (the default, AgentOptions::mode_auto) is one of thread / cpu, chosen by resolve_mode.
enum class SamplingMode : uint8_t { kThread, kCpu, kJvmti };

// Where snapshots come from: perf events, or a per-thread CPU-time timer whose signal handler
// copies the registers and stack (for machines where perf_event_open is denied); auto tries perf
// first and falls back to signals with one log line saying why.
enum class SamplingBackend : uint8_t { kAuto, kPerf, kSignal };

// What an attach (jcmd JVMTI.agent_load) asks of an agent that may already be running; at start-up
// (-agentpath) only kNone / kStart make sense. docs/usage.md, "Attach protocol".
enum class AgentAction : uint8_t { kNone, kStart, kStop, kDump, kStatus };

// group=: how the live profile keeps threads apart. kNone merges them; kThread puts each thread's
// stacks under "[name tid=N]"; kPool under "[name]" with the name's trailing number as '*'.
enum class ThreadGrouping : uint8_t { kNone, kThread, kPool };

struct AgentOptions {
    uint64_t interval_ns = 1'000'000;
    bool interval_auto = false;   // interval=auto: each thread's period adapts (starts at interval_ns)
    double budget_percent = 1.0;  // interval=auto: CPU share sampling may cost, in percent
    uint32_t stack_bytes = 16384;   // per sample; with stack_auto, what each thread starts with
    // stack=auto (the default): a thread whose samples run off the fragment is sampled with up to
    // 65528 bytes until they stop (needs the live profile's decoder: file=).
    bool stack_auto = true;
    kernel::ClockKind clock = kernel::ClockKind::kTask;
    uint32_t ring_pages = 0;      // 0: sized from interval and stack (auto_ring_pages)
    // depth=: the most frames a trace keeps; a deeper stack keeps its innermost ones under
    // [failed: too_deep]. Recorded in the VmInfo, so that a replay keeps as many.
    uint32_t max_frames = static_cast<uint32_t>(kDefaultMaxFrames);
    // The CPUs per-CPU events are opened on: those the JVM may run on (kernel::cpus_allowed),
    // and how many are online. 0: unknown (taken as one CPU, all of them allowed).
    uint32_t cpus_allowed = 0;
    uint32_t cpus_online = 0;
    // With mode_auto (mode=auto, the default) `mode` is kThread until resolve_mode picks one
    // (agent_load does, right after parsing); mode_reason then says why.
    SamplingMode mode = SamplingMode::kThread;
    bool mode_auto = true;
    std::string mode_reason;      // mode=auto: why resolve_mode chose `mode`; empty when mode= was given
    // threads=all: the JVM's own threads (GC, compiler, VM, other native threads, found in
    // /proc/self/task) are sampled and announced too; java: Java threads only (mode=thread).
    bool all_threads = true;
    SamplingBackend backend = SamplingBackend::kAuto;
    bool sample_cpu = true;       // events=cpu: on-CPU samples (the clock event)
    bool sample_switch = false;   // events=switch: a sample at each context switch (off-CPU profile)
    std::string focus;            // keep only samples inside this method's dynamic extent
    std::string exclude;          // drop samples inside this method's dynamic extent
    std::string record_path;      // empty or /dev/null: events are counted, not stored
    bool validate = false;        // also sample with a CPU-time timer + AsyncGetCallTrace
    std::string log_path;         // empty or "stderr": standard error
    LogLevel log_level = LogLevel::kInfo;
    bool breadcrumbs = true;      // JNI natives bound through thunks (docs/decoding.md, Breadcrumbs)
    // reader=realtime: the reader thread asks for SCHED_FIFO 1 where permitted (else a short EEVDF
    // slice); normal: it keeps the scheduling every JVM thread gets.
    bool realtime_reader = true;
    std::string file;             // live profile output (%p pid, %t time); format by extension
    uint64_t loop_ns = 0;         // > 0: a new file every loop_ns (rotation)
    std::string title;            // html page title
    ThreadGrouping group = ThreadGrouping::kNone;   // group=: one subtree per thread or thread pool
    std::string push_url;         // push=: a Pyroscope-compatible server (profile_push.hpp); needs loop
    std::string push_name;        // push_name=: the application name; empty: from the main class
    std::string push_labels;      // push_labels=: "{k=v,k=v}" (given as k=v;k=v), or empty
    AgentAction action = AgentAction::kNone;
    std::string reply_path;       // attach: an existing file the agent appends its answer to

    kernel::SamplingConfig sampling_config() const;
    // Enough ring for ~10 ms of samples at the configured rate, so that a reader thread waiting
    // for a busy CPU loses nothing; at least the kernel-interface default, at most 4 MB.
    uint32_t auto_ring_pages() const;
    bool records() const { return !record_path.empty() && record_path != "/dev/null"; }
};

// Parses the text after "=" in -agentpath:libstackfrag.so=TEXT (null or empty: all defaults).
// The error message names the offending option and what it accepts; it carries no prefix.
Result<AgentOptions> parse_options(std::string_view text);

// mode=auto: picks mode=cpu when the agent is loaded at the JVM's start (not attached) and no
// option needs per-thread events (backend=signal, events=switch, threads=java, interval=auto) and the interval is at least 1 ms,
// mode=thread otherwise, and says why in options.mode_reason; mode=cpu's stack=auto sizing
// follows. An explicit mode= is left as it is.
//
// Before it settles on mode=cpu it asks `map_rings` (when given) to map one ring per online CPU
// with the configuration it would sample with, all at once, and to release them: a user without
// CAP_IPC_LOCK may lock only kernel.perf_event_mlock_kb per CPU plus RLIMIT_MEMLOCK, which
// mode=cpu's automatic ring (4 MB per CPU) can exceed. A kResourceLimit answer halves the ring
// (and stack=auto's fragment with it) down to kMinCpuRingPages; if even that cannot be locked, or
// ring= was given, or perf events cannot be opened at all, mode=auto takes mode=thread. Either
// way mode_reason says so.
using RingProbe = std::function<Status(const kernel::SamplingConfig&)>;
void resolve_mode(AgentOptions& options, bool attach, const RingProbe& map_rings = {});

// mode=auto's smallest per-CPU ring (pages) before it gives up mode=cpu: 512 KB, the per-thread
// default, which still holds 10 ms of 16 KB samples at 1 kHz.
inline constexpr uint32_t kMinCpuRingPages = 128;

// mode=cpu's automatic ring per CPU for `cpus` CPUs (a power of two): 4 MB each up to 16 CPUs, then
// smaller so that all of them pin at most 64 MB, but not below 1 MB (16 fragments of 64 KB).
uint32_t cpu_mode_auto_ring_pages(uint32_t cpus);

// mode=auto takes per-thread events below this interval (per-CPU rings overflow first at high rates).
inline constexpr uint64_t kMinCpuModeIntervalNs = 1'000'000;

// "thread", "cpu" or "jvmti".
const char* mode_name(SamplingMode mode);

// "cpu (mode=auto: why)" when mode=auto chose, "thread (mode=thread)" when it was given.
std::string mode_text(const AgentOptions& options);

// "interval, stack, clock, ..." in table order.
std::string accepted_option_names();

// One line for the log: every option's effective value.
std::string describe(const AgentOptions& options);

}  // namespace sf::agent
