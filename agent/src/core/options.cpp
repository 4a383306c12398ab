#include "options.hpp"

#include <algorithm>
#include <charconv>

#include "profile_push.hpp"
#include "stackfrag/profile/export.hpp"
#include "stackfrag/profile/trace_filter.hpp"

namespace sf::agent {

namespace {
// depth=: a bound, not a need. A Java frame takes 16 bytes at the least, so 65536 frames are 1 MB
// of stack, past any fragment perf copies (64 KB): only stitched traces get that deep.
constexpr uint32_t kMaxDepthFrames = 65536;

struct OptionSpec {
    std::string_view name;
    bool is_flag;                 // given without a value ("validate"); "=true" / "=false" also work
    // A list whose items are separated by the option separator itself ("events=cpu,switch"): the
    // bare items that follow it and name no option are more of its values.
    bool is_list;
    std::string_view expected;    // completes "expected ..." in a bad-value message
    // False when `value` is not acceptable; leaves `options` unchanged then.
    bool (*apply)(std::string_view value, AgentOptions& options);
};

bool parse_u32(std::string_view text, uint32_t& out) {
    if (text.empty()) return false;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
    return ec == std::errc() && end == text.data() + text.size();
}

bool apply_interval(std::string_view value, AgentOptions& options) {
    if (value == "auto") {
        options.interval_auto = true;
        return true;
    }
    Result<uint64_t> ns = kernel::parse_interval(value);
    // Shorter periods keep a CPU in the timer's interrupt (kernel::kMinSamplingPeriodNs).
    if (!ns.ok() || *ns < kernel::kMinSamplingPeriodNs) return false;
    options.interval_ns = *ns;
    options.interval_auto = false;
    return true;
}

bool apply_budget(std::string_view value, AgentOptions& options) {
    if (!value.ends_with('%')) return false;
    value.remove_suffix(1);
    double percent = 0;
    const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), percent);
    if (ec != std::errc() || end != value.data() + value.size() || !(percent >= 0.01 && percent <= 50)) return false;
    options.budget_percent = percent;
    return true;
}

bool apply_stack(std::string_view value, AgentOptions& options) {
    if (value == "auto") {
        options.stack_bytes = AgentOptions{}.stack_bytes;
        options.stack_auto = true;
        return true;
    }
    uint32_t bytes = 0;
    if (!parse_u32(value, bytes) || bytes == 0 || bytes % 8 != 0 || bytes > 65528) return false;
    options.stack_bytes = bytes;
    options.stack_auto = false;
    return true;
}

bool apply_clock(std::string_view value, AgentOptions& options) {
    if (value == "task") options.clock = kernel::ClockKind::kTask;
    else if (value == "cpu") options.clock = kernel::ClockKind::kCpu;
    else return false;
    return true;
}

bool apply_ring(std::string_view value, AgentOptions& options) {
    uint32_t pages = 0;
    if (!parse_u32(value, pages) || pages == 0 || (pages & (pages - 1)) != 0 || pages > 65536) {
        return false;
    }
    options.ring_pages = pages;
    return true;
}

bool apply_depth(std::string_view value, AgentOptions& options) {
    uint32_t frames = 0;
    if (!parse_u32(value, frames) || frames == 0 || frames > kMaxDepthFrames) return false;
    options.max_frames = frames;
    return true;
}

bool apply_mode(std::string_view value, AgentOptions& options) {
    if (value == "auto") {
        options.mode = SamplingMode::kThread;
        options.mode_auto = true;
        return true;
    }
    if (value == "thread") options.mode = SamplingMode::kThread;
    else if (value == "cpu") options.mode = SamplingMode::kCpu;
    else if (value == "jvmti") options.mode = SamplingMode::kJvmti;
    else return false;
    options.mode_auto = false;
    return true;
}

bool apply_threads(std::string_view value, AgentOptions& options) {
    if (value == "all") options.all_threads = true;
    else if (value == "java") options.all_threads = false;
    else return false;
    return true;
}

bool apply_backend(std::string_view value, AgentOptions& options) {
    if (value == "auto") options.backend = SamplingBackend::kAuto;
    else if (value == "perf") options.backend = SamplingBackend::kPerf;
    else if (value == "signal") options.backend = SamplingBackend::kSignal;
    else return false;
    return true;
}

// The first item of events= replaces the default (cpu); later items add to it.
bool apply_events(std::string_view value, AgentOptions& options, bool first) {
    if (value != "cpu" && value != "switch") return false;
    if (first) options.sample_cpu = options.sample_switch = false;
    (value == "cpu" ? options.sample_cpu : options.sample_switch) = true;
    return true;
}
bool apply_events_first(std::string_view value, AgentOptions& options) { return apply_events(value, options, true); }
bool apply_events_more(std::string_view value, AgentOptions& options) { return apply_events(value, options, false); }

bool apply_focus(std::string_view value, AgentOptions& options) {
    if (value.empty() || !profile::MethodPattern::parse(value).ok()) return false;
    options.focus = std::string(value);
    return true;
}

bool apply_exclude(std::string_view value, AgentOptions& options) {
    if (value.empty() || !profile::MethodPattern::parse(value).ok()) return false;
    options.exclude = std::string(value);
    return true;
}

bool apply_record(std::string_view value, AgentOptions& options) {
    if (value.empty()) return false;
    options.record_path = std::string(value);
    return true;
}

bool apply_validate(std::string_view value, AgentOptions& options) {
    if (value.empty() || value == "true") options.validate = true;
    else if (value == "false") options.validate = false;
    else return false;
    return true;
}

bool apply_log(std::string_view value, AgentOptions& options) {
    if (value.empty()) return false;
    options.log_path = std::string(value);
    return true;
}

bool apply_log_level(std::string_view value, AgentOptions& options) {
    for (LogLevel level : {LogLevel::kError, LogLevel::kWarn, LogLevel::kInfo, LogLevel::kDebug}) {
        if (value == log_level_name(level)) {
            options.log_level = level;
            return true;
        }
    }
    return false;
}

bool apply_group(std::string_view value, AgentOptions& options) {
    if (value == "none") options.group = ThreadGrouping::kNone;
    else if (value == "thread") options.group = ThreadGrouping::kThread;
    else if (value == "pool") options.group = ThreadGrouping::kPool;
    else return false;
    return true;
}

bool apply_breadcrumbs(std::string_view value, AgentOptions& options) {
    if (value == "on") options.breadcrumbs = true;
    else if (value == "off") options.breadcrumbs = false;
    else return false;
    return true;
}

bool apply_reader(std::string_view value, AgentOptions& options) {
    if (value == "realtime") options.realtime_reader = true;
    else if (value == "normal") options.realtime_reader = false;
    else return false;
    return true;
}

bool apply_file(std::string_view value, AgentOptions& options) {
    // The format comes from the ending; a typo is reported at load, not when the JVM exits.
    if (value.empty() || !profile::format_for_path(value).ok()) return false;
    options.file = std::string(value);
    return true;
}

bool apply_loop(std::string_view value, AgentOptions& options) {
    uint64_t scale = 0;
    std::string_view number = value;
    if (value.ends_with("ms")) scale = 1'000'000, number.remove_suffix(2);
    else if (value.ends_with('s')) scale = 1'000'000'000, number.remove_suffix(1);
    else if (value.ends_with('m')) scale = 60'000'000'000, number.remove_suffix(1);
    else if (value.ends_with('h')) scale = 3'600'000'000'000, number.remove_suffix(1);
    uint32_t count = 0;
    if (scale == 0 || !parse_u32(number, count) || count > 1'000'000) return false;
    const uint64_t ns = count * scale;
    if (ns < 100'000'000) return false;   // each rotation writes a file
    options.loop_ns = ns;
    return true;
}

bool apply_push(std::string_view value, AgentOptions& options) {
    if (!parse_push_url(value).ok()) return false;
    options.push_url = std::string(value);
    return true;
}

bool apply_push_name(std::string_view value, AgentOptions& options) {
    if (!valid_push_app_name(value)) return false;
    options.push_name = std::string(value);
    return true;
}

bool apply_push_labels(std::string_view value, AgentOptions& options) {
    Result<std::string> labels = push_labels_text(value);
    if (!labels.ok()) return false;
    options.push_labels = std::move(labels).value();
    return true;
}

bool apply_title(std::string_view value, AgentOptions& options) {
    options.title = std::string(value);
    return true;
}

bool apply_reply(std::string_view value, AgentOptions& options) {
    if (value.empty() || value.front() != '/') return false;
    options.reply_path = std::string(value);
    return true;
}

template <AgentAction kAction>
bool apply_action(std::string_view value, AgentOptions& options) {
    if (!value.empty()) return false;
    if (options.action != AgentAction::kNone && options.action != kAction) return false;
    options.action = kAction;
    return true;
}

// The file endings come from the output-format table.
std::string_view file_expected() {
    static const std::string text = std::string("a file name ending in ") + profile::accepted_profile_extensions_phrase() +
                                    " (%p pid, %t time)";
    return text;
}

const OptionSpec kOptions[] = {
    {"interval", false, false, "a duration of at least 50us (like 100us, 1ms, 10ms), or auto", apply_interval},
    {"budget", false, false, "a percentage from 0.01% to 50% (default 1%)", apply_budget},
    {"stack", false, false, "auto (the default: 16384, up to 65528 for deep threads) or a number of bytes, a multiple of 8 from 8 to 65528", apply_stack},
    {"clock", false, false, "task or cpu", apply_clock},
    {"ring", false, false, "a number of pages, a power of two from 1 to 65536 (default: 10 ms of samples, 128 to 1024)", apply_ring},
    {"mode", false, false, "auto, thread, cpu or jvmti", apply_mode},
    {"threads", false, false, "all or java", apply_threads},
    {"backend", false, false, "auto, perf or signal", apply_backend},
    {"events", false, true, "cpu, switch or both (events=cpu,switch)", apply_events_first},
    {"record", false, false, "a file name (a new file; /dev/null discards)", apply_record},
    {"validate", true, false, "no value, true or false", apply_validate},
    {"log", false, false, "a file name or stderr", apply_log},
    {"loglevel", false, false, "error, warn, info or debug", apply_log_level},
    {"breadcrumbs", false, false, "on or off", apply_breadcrumbs},
    {"reader", false, false, "realtime (the default: real-time priority where permitted) or normal", apply_reader},
    {"file", false, false, file_expected(), apply_file},
    {"loop", false, false, "a duration of at least 100ms, like 500ms, 30s, 5m, 1h", apply_loop},
    {"push", false, false, "an http:// or https:// URL of a Pyroscope-compatible server, like http://pyroscope:4040 (with loop=)", apply_push},
    {"push_name", false, false, "an application name: letters, digits, '.', '_', '-'", apply_push_name},
    {"push_labels", false, false, "key=value pairs separated by ';', like env=prod;region=eu", apply_push_labels},
    {"focus", false, false, "a method (pkg.Class.method) or class (pkg.Class)", apply_focus},
    {"exclude", false, false, "a method (pkg.Class.method) or class (pkg.Class)", apply_exclude},
    {"title", false, false, "a text (no commas)", apply_title},
    {"group", false, false, "none, thread (a subtree per thread) or pool (per thread pool)", apply_group},
    {"depth", false, false, "a number of frames from 1 to 65536 (default 2048)", apply_depth},
    {"start", true, false, "no value, and no other action", apply_action<AgentAction::kStart>},
    {"stop", true, false, "no value, and no other action", apply_action<AgentAction::kStop>},
    {"dump", true, false, "no value, and no other action", apply_action<AgentAction::kDump>},
    {"status", true, false, "no value, and no other action", apply_action<AgentAction::kStatus>},
    {"reply", false, false, "an absolute file name", apply_reply},
};

const OptionSpec* find_option(std::string_view name) {
    for (const OptionSpec& spec : kOptions) {
        if (spec.name == name) return &spec;
    }
    return nullptr;
}

// A further item of a list option: only events= is one.
bool apply_list_more(const OptionSpec& spec, std::string_view item, AgentOptions& options) {
    return spec.name == "events" && apply_events_more(item, options);
}

Status apply_item(std::string_view item, AgentOptions& options) {
    const size_t eq = item.find('=');
    const std::string_view name = item.substr(0, eq);
    const bool has_value = eq != std::string_view::npos;
    const std::string_view value = has_value ? item.substr(eq + 1) : std::string_view();

    const OptionSpec* spec = find_option(name);
    if (spec == nullptr) {
        return make_error(Errc::kInvalidArgument, "unknown option '" + std::string(name) +
                                                      "' (accepted: " + accepted_option_names() + ")");
    }
    if (!spec->is_flag && (!has_value || value.empty())) {
        return make_error(Errc::kInvalidArgument, "missing value for " + std::string(spec->name) +
                                                      ": expected " + std::string(spec->expected));
    }
    if (!spec->apply(value, options)) {
        // A URL can be wrong in many ways: say which.
        std::string reason;
        if (spec->name == "push") reason = " (" + parse_push_url(value).error().message + ")";
        else if (spec->name == "push_labels") reason = " (" + push_labels_text(value).error().message + ")";
        return make_error(Errc::kInvalidArgument, "bad value '" + std::string(value) + "' for " +
                                                      std::string(spec->name) + ": expected " +
                                                      std::string(spec->expected) + reason);
    }
    return {};
}

}  // namespace

kernel::SamplingConfig AgentOptions::sampling_config() const {
    kernel::SamplingConfig config;
    config.clock = clock;
    config.period_ns = interval_ns;
    config.stack_bytes = stack_bytes;
    config.ring_pages = ring_pages != 0 ? ring_pages : auto_ring_pages();
    return config;
}

namespace {
// An automatic ring holds this much time of samples of a thread (or CPU) that runs without pause,
// up to this many pages.
constexpr uint64_t kRingSlackNs = 10'000'000;
constexpr uint32_t kMaxAutoRingPages = 1024;

// mode=cpu's stack=auto: the largest fragment (every thread gets the same) whose samples of
// kRingSlackNs still fit the ring (the largest automatic one unless ring= is given). A per-CPU ring
// takes every sample of its CPU, and perf reserves the whole requested size per record, so at
// 100 us 65528 bytes overflowed it (xalan: 5.4 % of the samples lost in full rings).
uint32_t cpu_mode_stack_bytes(uint64_t interval_ns, uint32_t ring_pages, uint32_t cpus) {
    const uint64_t samples = kRingSlackNs / std::max<uint64_t>(interval_ns, 1) + 1;
    const uint64_t ring = static_cast<uint64_t>(ring_pages != 0 ? ring_pages : cpu_mode_auto_ring_pages(cpus)) * 4096;
    const uint64_t per_sample = ring / samples;
    const uint64_t overhead = kernel::sample_record_bytes(0);
    const uint64_t bytes = per_sample > overhead ? (per_sample - overhead) / 8 * 8 : 0;
    return static_cast<uint32_t>(std::clamp<uint64_t>(bytes, AgentOptions{}.stack_bytes, kernel::kMaxStackBytes));
}

// mode=cpu's events belong to the process and give every thread one fragment size, so stack=auto
// cannot grow a deep thread's fragment there: it takes the largest its ring can hold from the
// start (65528 at 1 ms, ~41 KB at 100 us). The kernel copies only up to the first unmapped byte
// above the stack's top, so a shallow thread's samples stay small to read (a 200-thread pool of
// deep lambda chains: 26 KB on average, no incomplete trace where 16 KB left 2.2 %).
void size_cpu_mode_stack(AgentOptions& options) {
    if (!options.stack_auto) return;
    options.stack_bytes = cpu_mode_stack_bytes(options.interval_ns, options.ring_pages, options.cpus_allowed);
    options.stack_auto = false;
}

// Why mode=auto cannot take per-CPU events, or nullptr when it can.
const char* per_thread_reason(const AgentOptions& options, bool attach) {
    if (attach) return "attached to a running JVM, whose threads per-CPU events would not follow";
    if (options.backend == SamplingBackend::kSignal) return "backend=signal times each thread";
    if (options.sample_switch) return "events=switch needs per-thread events";
    if (!options.all_threads) return "threads=java samples Java threads only";
    if (options.interval_auto) return "interval=auto adapts each thread's period";
    // Measured on 2 CPUs at 100 us (docs/benchmarks.md, mode=thread and mode=cpu side by side): a
    // CPU's ring holds ~10 ms of samples with nothing in hand when the reader is held up, and lost
    // 228-5,438 of ~300,000 samples where per-thread rings lost 75-304.
    if (options.interval_ns < kMinCpuModeIntervalNs) {
        return "intervals below 1 ms fill a per-CPU ring faster than per-thread rings, which lose fewer samples";
    }
    return nullptr;
}
}  // namespace

uint32_t cpu_mode_auto_ring_pages(uint32_t cpus) {
    // A host's every CPU gets a ring, pinned for the JVM's life; 64 CPUs at 4 MB would be 256 MB.
    constexpr uint64_t kAllRingsPages = 16384;   // 64 MB
    constexpr uint32_t kFloorPages = 256;        // 1 MB: 16 fragments of 64 KB, ~8 ms of a busy CPU at 1 kHz
    uint32_t pages = kMaxAutoRingPages;
    while (pages > kFloorPages && static_cast<uint64_t>(pages) * std::max<uint32_t>(cpus, 1) > kAllRingsPages) pages /= 2;
    return pages;
}

void resolve_mode(AgentOptions& options, bool attach, const RingProbe& map_rings) {
    if (!options.mode_auto) {
        options.mode_reason.clear();
        return;
    }
    if (const char* reason = per_thread_reason(options, attach)) {
        options.mode = SamplingMode::kThread;
        options.mode_reason = reason;
        return;
    }
    // mode=cpu with `pages` per CPU (0: the automatic ring), stack=auto sized for it.
    const auto as_cpu = [&options](uint32_t pages) {
        AgentOptions cpu = options;
        cpu.mode = SamplingMode::kCpu;
        if (pages != 0) cpu.ring_pages = pages;
        size_cpu_mode_stack(cpu);
        return cpu;
    };
    AgentOptions cpu = as_cpu(0);
    std::string reason = "loaded at the JVM's start with perf events: one inheriting event and ring per CPU";
    if (options.cpus_allowed != 0 && options.cpus_allowed < options.cpus_online) {
        reason += " it may run on (" + std::to_string(options.cpus_allowed) + " of " +
                  std::to_string(options.cpus_online) + " online: its affinity or cpuset)";
    }
    if (options.ring_pages == 0 && cpu.sampling_config().ring_pages < kMaxAutoRingPages) {
        reason += "; ring " + std::to_string(cpu.sampling_config().ring_pages) + " pages per CPU, at most 64 MB for " +
                  std::to_string(options.cpus_allowed) + " CPUs";
    }
    Status mapped = map_rings ? map_rings(cpu.sampling_config()) : Status{};
    if (!mapped.ok() && mapped.error().code == Errc::kResourceLimit && options.ring_pages == 0) {
        // Automatic rings only: ring= is what the user asked for.
        const uint32_t full = cpu.sampling_config().ring_pages;
        for (uint32_t pages = full / 2; pages >= kMinCpuRingPages && !mapped.ok() &&
                                        mapped.error().code == Errc::kResourceLimit;
             pages /= 2) {
            cpu = as_cpu(pages);
            mapped = map_rings(cpu.sampling_config());
        }
        if (mapped.ok()) {
            reason += "; ring " + std::to_string(cpu.ring_pages) + " pages per CPU, not " + std::to_string(full) +
                      ": no more ring memory may be locked (kernel.perf_event_mlock_kb per CPU and ulimit -l)";
        }
    }
    if (!mapped.ok()) {
        options.mode = SamplingMode::kThread;
        if (mapped.error().code == Errc::kResourceLimit) {
            options.mode_reason = "the per-CPU rings cannot be locked (" + mapped.error().describe() + ")";
        } else {
            // What to change comes once, where the per-thread events fail the same way (or fall back).
            Error without_hint = mapped.error();
            without_hint.hint.clear();
            options.mode_reason = "per-CPU events cannot be opened (" + without_hint.describe() + ")";
        }
        options.mode_reason += "; per-thread events instead";
        return;
    }
    options = std::move(cpu);
    options.mode_reason = std::move(reason);
}

const char* mode_name(SamplingMode mode) {
    return mode == SamplingMode::kThread ? "thread" : mode == SamplingMode::kCpu ? "cpu" : "jvmti";
}

std::string mode_text(const AgentOptions& options) {
    const std::string name = mode_name(options.mode);
    if (options.mode_auto) return name + " (mode=auto: " + options.mode_reason + ")";
    return name + " (mode=" + name + ")";
}

uint32_t AgentOptions::auto_ring_pages() const {
    constexpr uint64_t kSlackNs = kRingSlackNs;
    constexpr uint32_t kMaxPages = kMaxAutoRingPages;
    // mode=cpu: the largest automatic ring the CPUs allow (cpu_mode_auto_ring_pages), which
    // cpu_mode_stack_bytes sized the fragment for. Sized for 10 ms of 64 KB samples instead (1 MB
    // at 1 ms) it held 15 samples, and the reader, whose cadence is half a ring's fill time, cycled
    // every 7.5 ms with ~1,500 watermark wake-ups per httpserver run: 12-17 us of reader time per
    // sample against mode=thread's 9-11 (docs/benchmarks.md, 2026-11-28). Only a host of more than
    // 16 CPUs pays that, for pinning 64 MB instead of 4 MB a CPU.
    if (mode == SamplingMode::kCpu) return cpu_mode_auto_ring_pages(cpus_allowed);
    const uint64_t samples = kSlackNs / std::max<uint64_t>(interval_ns, 1) + 1;
    const uint64_t bytes = samples * kernel::sample_record_bytes(stack_bytes);
    uint32_t pages = kernel::SamplingConfig{}.ring_pages;
    while (static_cast<uint64_t>(pages) * 4096 < bytes && pages < kMaxPages) pages *= 2;
    return pages;
}

Result<AgentOptions> parse_options(std::string_view text) {
    AgentOptions options;
    const OptionSpec* open_list = nullptr;   // the list option the previous item belonged to
    while (!text.empty()) {
        const size_t comma = text.find(',');
        const std::string_view item = text.substr(0, comma);
        text = comma == std::string_view::npos ? std::string_view() : text.substr(comma + 1);
        if (item.empty()) continue;   // tolerate "a=1,,b=2" and a trailing comma
        if (open_list != nullptr && item.find('=') == std::string_view::npos && find_option(item) == nullptr) {
            if (!apply_list_more(*open_list, item, options)) {
                return make_error(Errc::kInvalidArgument, "bad value '" + std::string(item) + "' for " +
                                                              std::string(open_list->name) + ": expected " +
                                                              std::string(open_list->expected));
            }
            continue;
        }
        Status applied = apply_item(item, options);
        if (!applied.ok()) return std::move(applied).take_error();
        const OptionSpec* spec = find_option(item.substr(0, item.find('=')));
        open_list = spec != nullptr && spec->is_list ? spec : nullptr;
    }
    // Context-switch events are opened per thread, with the perf backend only (mode=auto then
    // picks mode=thread).
    if (options.sample_switch && !options.mode_auto && options.mode != SamplingMode::kThread) {
        return make_error(Errc::kInvalidArgument, "events=switch needs mode=thread (or mode=auto, the default)",
                          "drop mode=cpu/jvmti, or sample with events=cpu only");
    }
    if (options.sample_switch && options.backend == SamplingBackend::kSignal) {
        return make_error(Errc::kInvalidArgument, "events=switch needs perf events, not backend=signal",
                          "use backend=perf or auto");
    }
    // mode=cpu: stack=auto is one fragment size for every thread (size_cpu_mode_stack).
    // (mode=auto: resolve_mode does this once it has chosen mode=cpu.)
    if (options.mode == SamplingMode::kCpu && !options.mode_auto) size_cpu_mode_stack(options);
    // Each loop period is one profile sent; the rest of push= is checked by apply_push.
    if (!options.push_url.empty() && options.loop_ns == 0) {
        return make_error(Errc::kInvalidArgument, "push needs loop: each loop period is one profile sent",
                          "add loop=10s (or another period) to push=" + options.push_url);
    }
    return options;
}

std::string accepted_option_names() {
    std::string names;
    for (const OptionSpec& spec : kOptions) {
        if (!names.empty()) names += ", ";
        names += spec.name;
    }
    return names;
}

std::string describe(const AgentOptions& options) {
    std::string out = options.interval_auto
                          ? "interval=auto(from " + std::to_string(options.interval_ns) + "ns),budget=" +
                                std::to_string(options.budget_percent).substr(0, 4) + "%"
                          : "interval=" + std::to_string(options.interval_ns) + "ns";
    out += options.stack_auto ? ",stack=auto(from " + std::to_string(options.stack_bytes) + ")"
                              : ",stack=" + std::to_string(options.stack_bytes);
    out += options.clock == kernel::ClockKind::kTask ? ",clock=task" : ",clock=cpu";
    out += ",ring=" + std::to_string(options.sampling_config().ring_pages);
    out += options.mode_auto ? ",mode=auto(" + std::string(mode_name(options.mode)) + ")"
                             : ",mode=" + std::string(mode_name(options.mode));
    out += options.all_threads ? ",threads=all" : ",threads=java";
    out += options.backend == SamplingBackend::kAuto   ? ",backend=auto"
           : options.backend == SamplingBackend::kPerf ? ",backend=perf"
                                                       : ",backend=signal";
    out += options.sample_cpu && options.sample_switch ? ",events=cpu,switch"
           : options.sample_switch                     ? ",events=switch"
                                                       : ",events=cpu";
    if (!options.focus.empty()) out += ",focus=" + options.focus;
    if (!options.exclude.empty()) out += ",exclude=" + options.exclude;
    out += ",record=" + (options.records() ? options.record_path : std::string("(none)"));
    out += options.validate ? ",validate" : "";
    out += ",log=" + (options.log_path.empty() ? std::string("stderr") : options.log_path);
    out += ",loglevel=";
    out += log_level_name(options.log_level);
    out += options.breadcrumbs ? ",breadcrumbs=on" : ",breadcrumbs=off";
    out += options.realtime_reader ? ",reader=realtime" : ",reader=normal";
    out += ",file=" + (options.file.empty() ? std::string("(none)") : options.file);
    if (options.loop_ns != 0) out += ",loop=" + std::to_string(options.loop_ns / 1'000'000) + "ms";
    if (!options.push_url.empty()) {
        out += ",push=" + options.push_url + ",push_name=" + (options.push_name.empty() ? "(main class)" : options.push_name);
        if (!options.push_labels.empty()) out += ",push_labels=" + options.push_labels;
    }
    if (!options.title.empty()) out += ",title=" + options.title;
    if (options.group == ThreadGrouping::kThread) out += ",group=thread";
    if (options.group == ThreadGrouping::kPool) out += ",group=pool";
    return out;
}

}  // namespace sf::agent
