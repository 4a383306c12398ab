#include "options.hpp"

#include <algorithm>
#include <charconv>

#include "stackfrag/profile/export.hpp"

namespace sf::agent {

namespace {

struct OptionSpec {
    std::string_view name;
    bool is_flag;                 // given without a value ("validate"); "=true" / "=false" also work
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
    Result<uint64_t> ns = kernel::parse_interval(value);
    // Below the kernel's floor for software clocks the period would silently be raised.
    if (!ns.ok() || *ns < kernel::kMinPeriodNs) return false;
    options.interval_ns = *ns;
    return true;
}

bool apply_stack(std::string_view value, AgentOptions& options) {
    uint32_t bytes = 0;
    if (!parse_u32(value, bytes) || bytes == 0 || bytes % 8 != 0 || bytes > 65528) return false;
    options.stack_bytes = bytes;
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

bool apply_mode(std::string_view value, AgentOptions& options) {
    if (value == "thread") options.mode = SamplingMode::kThread;
    else if (value == "cpu") options.mode = SamplingMode::kCpu;
    else return false;
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

bool apply_breadcrumbs(std::string_view value, AgentOptions& options) {
    if (value == "on") options.breadcrumbs = true;
    else if (value == "off") options.breadcrumbs = false;
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

constexpr OptionSpec kOptions[] = {
    {"interval", false, "a duration like 100us, 1ms, 10ms", apply_interval},
    {"stack", false, "a number of bytes, a multiple of 8 from 8 to 65528 (default 16384)", apply_stack},
    {"clock", false, "task or cpu", apply_clock},
    {"ring", false, "a number of pages, a power of two from 1 to 65536 (default: 10 ms of samples, 128 to 1024)", apply_ring},
    {"mode", false, "thread or cpu", apply_mode},
    {"record", false, "a file name (a new file; /dev/null discards)", apply_record},
    {"validate", true, "no value, true or false", apply_validate},
    {"log", false, "a file name or stderr", apply_log},
    {"loglevel", false, "error, warn, info or debug", apply_log_level},
    {"breadcrumbs", false, "on or off", apply_breadcrumbs},
    {"file", false, "a file name ending in .collapsed, .folded, .html, .pb.gz or .json (%p pid, %t time)", apply_file},
    {"loop", false, "a duration of at least 100ms, like 500ms, 30s, 5m, 1h", apply_loop},
    {"title", false, "a text (no commas)", apply_title},
    {"start", true, "no value, and no other action", apply_action<AgentAction::kStart>},
    {"stop", true, "no value, and no other action", apply_action<AgentAction::kStop>},
    {"dump", true, "no value, and no other action", apply_action<AgentAction::kDump>},
    {"status", true, "no value, and no other action", apply_action<AgentAction::kStatus>},
    {"reply", false, "an absolute file name", apply_reply},
};

const OptionSpec* find_option(std::string_view name) {
    for (const OptionSpec& spec : kOptions) {
        if (spec.name == name) return &spec;
    }
    return nullptr;
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
        return make_error(Errc::kInvalidArgument, "bad value '" + std::string(value) + "' for " +
                                                      std::string(spec->name) + ": expected " +
                                                      std::string(spec->expected));
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

uint32_t AgentOptions::auto_ring_pages() const {
    constexpr uint64_t kSlackNs = 10'000'000;
    constexpr uint32_t kMaxPages = 1024;
    const uint64_t samples = kSlackNs / std::max<uint64_t>(interval_ns, 1) + 1;
    const uint64_t bytes = samples * kernel::sample_record_bytes(stack_bytes);
    uint32_t pages = kernel::SamplingConfig{}.ring_pages;
    while (static_cast<uint64_t>(pages) * 4096 < bytes && pages < kMaxPages) pages *= 2;
    return pages;
}

Result<AgentOptions> parse_options(std::string_view text) {
    AgentOptions options;
    while (!text.empty()) {
        const size_t comma = text.find(',');
        const std::string_view item = text.substr(0, comma);
        text = comma == std::string_view::npos ? std::string_view() : text.substr(comma + 1);
        if (item.empty()) continue;   // tolerate "a=1,,b=2" and a trailing comma
        Status applied = apply_item(item, options);
        if (!applied.ok()) return std::move(applied).take_error();
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
    std::string out = "interval=" + std::to_string(options.interval_ns) + "ns";
    out += ",stack=" + std::to_string(options.stack_bytes);
    out += options.clock == kernel::ClockKind::kTask ? ",clock=task" : ",clock=cpu";
    out += ",ring=" + std::to_string(options.sampling_config().ring_pages);
    out += options.mode == SamplingMode::kThread ? ",mode=thread" : ",mode=cpu";
    out += ",record=" + (options.records() ? options.record_path : std::string("(none)"));
    out += options.validate ? ",validate" : "";
    out += ",log=" + (options.log_path.empty() ? std::string("stderr") : options.log_path);
    out += ",loglevel=";
    out += log_level_name(options.log_level);
    out += options.breadcrumbs ? ",breadcrumbs=on" : ",breadcrumbs=off";
    out += ",file=" + (options.file.empty() ? std::string("(none)") : options.file);
    if (options.loop_ns != 0) out += ",loop=" + std::to_string(options.loop_ns / 1'000'000) + "ms";
    if (!options.title.empty()) out += ",title=" + options.title;
    return out;
}

}  // namespace sf::agent
