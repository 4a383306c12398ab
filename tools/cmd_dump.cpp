// `stackfrag dump REC [--json] [--verbose]`: what a recording holds, for people and for scripts.
#include <fmt/core.h>
#include <time.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <sys/stat.h>
#include <unordered_map>
#include <vector>

#include "commands.hpp"
#include "stackfrag/events/events.hpp"
#include "stackfrag/events/recording.hpp"

namespace sf::cli {

namespace {

constexpr size_t kTopListLength = 20;

struct DumpOptions {
    std::string path;
    bool json = false;
    bool verbose = false;
};

struct MethodName {
    std::string class_name;
    std::string name;
    std::string signature;
};

struct CompiledCode {
    uint64_t method_id = 0;
    uint64_t begin = 0;
    uint64_t end = 0;
    int32_t comp_level = 0;
    CodeKind kind = CodeKind::kNmethod;
    int32_t osr_bci = -1;
};

struct StubCode {
    std::string name;
    uint64_t begin = 0;
    uint64_t end = 0;
    int32_t frame_size_words = -1;
};

struct Summary {
    RecordingHeader header;
    uint64_t file_bytes = 0;
    uint64_t events = 0;
    std::map<EventKind, uint64_t> per_kind;
    uint64_t skipped_unknown = 0;
    std::optional<uint64_t> first_time_ns;
    std::optional<uint64_t> last_time_ns;
    uint64_t samples = 0;
    uint64_t stack_bytes = 0;
    std::map<uint32_t, uint64_t> samples_per_tid;
    std::map<uint32_t, uint64_t> stack_bytes_per_tid;   // how much of each thread's stack its samples carry
    std::map<SampleSource, uint64_t> samples_per_source;
    std::map<uint32_t, std::string> thread_names;
    uint64_t lost = 0;
    std::optional<VmInfo> vm_info;
    std::unordered_map<uint64_t, MethodName> methods;
    std::vector<CompiledCode> compiled;
    std::vector<StubCode> stubs;
    std::vector<RecordingDamage> damages;
};

void count(Summary& summary, const Event& event) {
    const EventKind kind = kind_of(event);
    ++summary.events;
    ++summary.per_kind[kind];
    const uint64_t time = time_of(event);
    if (!summary.first_time_ns || time < *summary.first_time_ns) summary.first_time_ns = time;
    if (!summary.last_time_ns || time > *summary.last_time_ns) summary.last_time_ns = time;

    if (const auto* sample = std::get_if<Sample>(&event)) {
        ++summary.samples;
        summary.stack_bytes += sample->stack.size();
        ++summary.samples_per_tid[sample->tid];
        summary.stack_bytes_per_tid[sample->tid] += sample->stack.size();
        ++summary.samples_per_source[sample->source];
    } else if (const auto* thread = std::get_if<ThreadInfo>(&event)) {
        // A thread may be renamed; the latest non-empty name is the one people recognise.
        if (!thread->name.empty()) summary.thread_names[thread->tid] = thread->name;
    } else if (const auto* lost = std::get_if<Lost>(&event)) {
        summary.lost += lost->count;
    } else if (const auto* vm = std::get_if<VmInfo>(&event)) {
        if (!summary.vm_info) summary.vm_info = *vm;
    } else if (const auto* method = std::get_if<MethodInfo>(&event)) {
        summary.methods[method->method_id] = MethodName{method->class_name, method->name, method->signature};
    } else if (const auto* named = std::get_if<NamedMethod>(&event); named && named->resolved) {
        summary.methods[named->method_id] = MethodName{named->class_name, named->name, named->signature};
    } else if (const auto* load = std::get_if<CodeLoad>(&event)) {
        summary.compiled.push_back(
            CompiledCode{load->method_id, load->code_begin, load->code_end, load->comp_level, load->kind, load->osr_bci});
    } else if (const auto* stub = std::get_if<Stub>(&event)) {
        summary.stubs.push_back(StubCode{stub->name, stub->begin, stub->end, stub->frame_size_words});
    }
}

// Where a sample came from: "clock" (on-CPU), "switch" (off-CPU), "signal".
std::string source_name(SampleSource source) {
    switch (source) {
        case SampleSource::kPerf: return "clock";
        case SampleSource::kPerfSwitch: return "switch";
        case SampleSource::kPerfKernel: return "clock-kernel";
        case SampleSource::kSignal: return "signal";
        case SampleSource::kThreadClock: return "thread-clock";
    }
    return "source" + std::to_string(static_cast<int>(source));
}

uint64_t size_of(uint64_t begin, uint64_t end) {
    return end > begin ? end - begin : 0;
}

// Biggest first; the address breaks ties so that the listing is stable.
template <class Code>
void sort_by_size(std::vector<Code>& code) {
    std::sort(code.begin(), code.end(), [](const Code& a, const Code& b) {
        const uint64_t size_a = size_of(a.begin, a.end);
        const uint64_t size_b = size_of(b.begin, b.end);
        return size_a != size_b ? size_a > size_b : a.begin < b.begin;
    });
}

std::string method_label(const Summary& summary, uint64_t method_id) {
    const auto found = summary.methods.find(method_id);
    if (found == summary.methods.end()) return fmt::format("<unknown method {:#x}>", method_id);
    std::string class_name = found->second.class_name;
    std::replace(class_name.begin(), class_name.end(), '/', '.');
    return class_name + "." + found->second.name + found->second.signature;
}

const char* code_kind_name(CodeKind kind) {
    switch (kind) {
        case CodeKind::kNmethod: return "nmethod";
        case CodeKind::kOsr: return "osr";
        case CodeKind::kNativeWrapper: return "native_wrapper";
        case CodeKind::kMethodHandleIntrinsic: return "mh_intrinsic";
    }
    return "unknown";
}

std::string layout_name(VmLayout layout) {
    switch (layout) {
        case VmLayout::kUnknown: return "unknown";
        case VmLayout::kJdk17: return "jdk17";
        case VmLayout::kJdk21: return "jdk21";
        case VmLayout::kJdk25: return "jdk25";
    }
    return "layout " + std::to_string(static_cast<int>(layout));
}

// Recorded strings are arbitrary bytes; control characters must not reach the terminal.
std::string printable(const std::string& text) {
    std::string out = text;
    for (auto& c : out) {
        const auto byte = static_cast<unsigned char>(c);
        if (byte < 0x20 || byte == 0x7f) c = '?';
    }
    return out;
}

std::string utc_time(uint64_t unix_ns) {
    const time_t seconds = static_cast<time_t>(unix_ns / 1'000'000'000);
    struct tm parts {};
    if (gmtime_r(&seconds, &parts) == nullptr) return "?";
    char text[64];
    if (strftime(text, sizeof(text), "%Y-%m-%d %H:%M:%S UTC", &parts) == 0) return "?";
    return text;
}

std::string human_bytes(uint64_t bytes) {
    if (bytes < 10 * 1024) return fmt::format("{} B", bytes);
    if (bytes < 10 * 1024 * 1024) return fmt::format("{:.1f} KiB", bytes / 1024.0);
    if (bytes < 10ull * 1024 * 1024 * 1024) return fmt::format("{:.1f} MiB", bytes / (1024.0 * 1024.0));
    return fmt::format("{:.1f} GiB", bytes / (1024.0 * 1024.0 * 1024.0));
}

std::vector<EventKind> all_kinds() {
    std::vector<EventKind> kinds;
    for (int kind = static_cast<int>(EventKind::kSample); kind <= static_cast<int>(EventKind::kNamedMethod); ++kind) {
        kinds.push_back(static_cast<EventKind>(kind));
    }
    return kinds;
}

uint64_t kind_count(const Summary& summary, EventKind kind) {
    const auto found = summary.per_kind.find(kind);
    return found == summary.per_kind.end() ? 0 : found->second;
}

std::string listing_title(size_t shown, size_t total, const char* what) {
    if (shown == total) return fmt::format("all {} {}", total, what);
    return fmt::format("top {} of {} {} (--verbose for all)", shown, total, what);
}

void print_text(const Summary& summary, const DumpOptions& options) {
    const RecordingHeader& header = summary.header;
    fmt::print("recording   {}  ({}, format v{})\n", options.path, human_bytes(summary.file_bytes), header.version);
    fmt::print("producer    {}\n", printable(header.producer));
    fmt::print("command     {}\n", printable(header.command_line));
    fmt::print("pid         {}\n", header.pid);
    fmt::print("created     {}  (monotonic {:.6f} s)\n", utc_time(header.created_unix_ns),
               header.created_monotonic_ns / 1e9);
    if (summary.first_time_ns) {
        fmt::print("time span   {:.3f} s  (monotonic {:.6f} s to {:.6f} s)\n",
                   (*summary.last_time_ns - *summary.first_time_ns) / 1e9, *summary.first_time_ns / 1e9,
                   *summary.last_time_ns / 1e9);
    }

    fmt::print("\nevents      {}\n", summary.events);
    for (EventKind kind : all_kinds()) fmt::print("  {:<12} {:>10}\n", kind_name(kind), kind_count(summary, kind));
    if (summary.skipped_unknown > 0) {
        fmt::print("  {:<12} {:>10}  (kinds newer than this stackfrag, skipped)\n", "unknown", summary.skipped_unknown);
    }

    fmt::print("\nsamples     {}", summary.samples);
    if (summary.samples > 0) {
        fmt::print("  (stack bytes {}, mean {} per sample)", human_bytes(summary.stack_bytes),
                   human_bytes(summary.stack_bytes / summary.samples));
        std::string sources;
        for (const auto& [source, n] : summary.samples_per_source) {
            sources += fmt::format("{}{} {}", sources.empty() ? "" : ", ", source_name(source), n);
        }
        fmt::print("\n  by source {}", sources);
    }
    fmt::print("\nlost        {}\n", summary.lost);
    fmt::print("threads     {} with samples, {} named\n", summary.samples_per_tid.size(), summary.thread_names.size());
    std::vector<std::pair<uint32_t, uint64_t>> threads(summary.samples_per_tid.begin(), summary.samples_per_tid.end());
    std::stable_sort(threads.begin(), threads.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
    if (!threads.empty()) fmt::print("  {:>8} {:>10} {:>12}  {}\n", "tid", "samples", "stack mean", "name");
    for (const auto& [tid, samples] : threads) {
        const auto name = summary.thread_names.find(tid);
        fmt::print("  {:>8} {:>10} {:>12}  {}\n", tid, samples, human_bytes(summary.stack_bytes_per_tid.at(tid) / samples),
                   name == summary.thread_names.end() ? std::string("-") : printable(name->second));
    }

    fmt::print("\n");
    if (const auto& vm = summary.vm_info) {
        fmt::print("vm          JDK {} \"{}\", layout {}, pid {}\n", vm->jdk_major, printable(vm->vm_version),
                   layout_name(vm->layout), vm->pid);
        fmt::print("  interpreter          {:#x}-{:#x} ({})\n", vm->interpreter_begin, vm->interpreter_end,
                   human_bytes(size_of(vm->interpreter_begin, vm->interpreter_end)));
        fmt::print("  entry codelets       {}\n", vm->entry_codelets.size());
        fmt::print("  code cache           {:#x}-{:#x} ({})\n", vm->code_cache_low, vm->code_cache_high,
                   human_bytes(size_of(vm->code_cache_low, vm->code_cache_high)));
        fmt::print("  call stub return     {:#x}\n", vm->call_stub_return);
        fmt::print("  continuation return  {:#x}\n", vm->continuation_return_pc);
        fmt::print("  sample stack bytes   {}\n", vm->sample_stack_bytes);
        fmt::print("  sample period        {} ns\n", vm->sample_period_ns);
        if (vm->max_frames != 0) fmt::print("  max frames (depth=)  {}\n", vm->max_frames);
    } else {
        fmt::print("vm          (no vm_info event)\n");
    }

    fmt::print("\nmethods     {} in the method table\n", summary.methods.size());
    fmt::print("code        code_load {}, code_unload {}, stub {}\n", kind_count(summary, EventKind::kCodeLoad),
               kind_count(summary, EventKind::kCodeUnload), kind_count(summary, EventKind::kStub));
    const size_t compiled_shown = options.verbose ? summary.compiled.size()
                                                  : std::min(summary.compiled.size(), kTopListLength);
    if (compiled_shown > 0) {
        fmt::print("  {} by code size:\n", listing_title(compiled_shown, summary.compiled.size(), "compiled methods"));
        fmt::print("    {:>10}  {:<18} {:>5}  {:<14} {}\n", "bytes", "begin", "level", "kind", "method");
        for (size_t i = 0; i < compiled_shown; ++i) {
            const CompiledCode& code = summary.compiled[i];
            std::string label = printable(method_label(summary, code.method_id));
            if (code.kind == CodeKind::kOsr) label += fmt::format(" @bci {}", code.osr_bci);
            fmt::print("    {:>10}  {:<#18x} {:>5}  {:<14} {}\n", size_of(code.begin, code.end), code.begin,
                       code.comp_level, code_kind_name(code.kind), label);
        }
    }
    const size_t stubs_shown = options.verbose ? summary.stubs.size() : std::min(summary.stubs.size(), kTopListLength);
    if (stubs_shown > 0) {
        fmt::print("  {} by size:\n", listing_title(stubs_shown, summary.stubs.size(), "stubs"));
        fmt::print("    {:>10}  {:<18} {:>5}  {}\n", "bytes", "begin", "frame", "name");
        for (size_t i = 0; i < stubs_shown; ++i) {
            const StubCode& stub = summary.stubs[i];
            fmt::print("    {:>10}  {:<#18x} {:>5}  {}\n", size_of(stub.begin, stub.end), stub.begin,
                       stub.frame_size_words, printable(stub.name));
        }
    }

    for (const RecordingDamage& damage : summary.damages) {
        fmt::print("\ndamage      at offset {}: {}\n", damage.offset, damage.describe());
    }
}

nlohmann::ordered_json to_json(const Summary& summary, const DumpOptions& options) {
    // Ordered: people read this too, header first and damage last.
    using json = nlohmann::ordered_json;
    const RecordingHeader& header = summary.header;
    json out;
    out["file"] = options.path;
    out["file_bytes"] = summary.file_bytes;
    out["header"] = {{"version", header.version},
                     {"pid", header.pid},
                     {"created_unix_ns", header.created_unix_ns},
                     {"created_monotonic_ns", header.created_monotonic_ns},
                     {"producer", header.producer},
                     {"command_line", header.command_line}};
    out["total_events"] = summary.events;
    json events = json::object();
    for (EventKind kind : all_kinds()) events[kind_name(kind)] = kind_count(summary, kind);
    out["events"] = events;
    out["unknown_events_skipped"] = summary.skipped_unknown;
    out["first_time_ns"] = summary.first_time_ns ? json(*summary.first_time_ns) : json(nullptr);
    out["last_time_ns"] = summary.last_time_ns ? json(*summary.last_time_ns) : json(nullptr);
    out["samples"] = summary.samples;
    json sources = json::object();
    for (const auto& [source, n] : summary.samples_per_source) sources[source_name(source)] = n;
    out["samples_by_source"] = sources;
    out["stack_bytes"] = summary.stack_bytes;
    json threads = json::object();
    for (const auto& [tid, samples] : summary.samples_per_tid) threads[std::to_string(tid)] = samples;
    out["threads"] = threads;
    json thread_stack_bytes = json::object();
    for (const auto& [tid, bytes] : summary.stack_bytes_per_tid) thread_stack_bytes[std::to_string(tid)] = bytes;
    out["thread_stack_bytes"] = thread_stack_bytes;
    json names = json::object();
    for (const auto& [tid, name] : summary.thread_names) names[std::to_string(tid)] = name;
    out["thread_names"] = names;
    out["lost"] = summary.lost;

    if (const auto& vm = summary.vm_info) {
        json codelets = json::array();
        for (const auto& codelet : vm->entry_codelets) {
            codelets.push_back({{"begin", codelet.begin}, {"end", codelet.end}, {"description", codelet.description}});
        }
        out["vm_info"] = {{"time_ns", vm->time_ns},
                          {"pid", vm->pid},
                          {"jdk_major", vm->jdk_major},
                          {"vm_version", vm->vm_version},
                          {"layout", layout_name(vm->layout)},
                          {"call_stub_return", vm->call_stub_return},
                          {"interpreter_begin", vm->interpreter_begin},
                          {"interpreter_end", vm->interpreter_end},
                          {"entry_codelets", codelets},
                          {"code_cache_low", vm->code_cache_low},
                          {"code_cache_high", vm->code_cache_high},
                          {"continuation_return_pc", vm->continuation_return_pc},
                          {"sample_stack_bytes", vm->sample_stack_bytes},
                          {"sample_period_ns", vm->sample_period_ns},
                          {"max_frames", vm->max_frames}};
    } else {
        out["vm_info"] = nullptr;
    }

    out["method_table_size"] = summary.methods.size();
    const size_t compiled_shown = options.verbose ? summary.compiled.size()
                                                  : std::min(summary.compiled.size(), kTopListLength);
    json compiled = json::array();
    for (size_t i = 0; i < compiled_shown; ++i) {
        const CompiledCode& code = summary.compiled[i];
        const auto method = summary.methods.find(code.method_id);
        compiled.push_back({{"method_id", code.method_id},
                            {"method", method == summary.methods.end() ? json(nullptr)
                                                                       : json(method_label(summary, code.method_id))},
                            {"begin", code.begin},
                            {"end", code.end},
                            {"size", size_of(code.begin, code.end)},
                            {"comp_level", code.comp_level},
                            {"kind", code_kind_name(code.kind)},
                            {"osr_bci", code.osr_bci}});
    }
    const size_t stubs_shown = options.verbose ? summary.stubs.size() : std::min(summary.stubs.size(), kTopListLength);
    json stubs = json::array();
    for (size_t i = 0; i < stubs_shown; ++i) {
        const StubCode& stub = summary.stubs[i];
        stubs.push_back({{"name", stub.name},
                         {"begin", stub.begin},
                         {"end", stub.end},
                         {"size", size_of(stub.begin, stub.end)},
                         {"frame_size_words", stub.frame_size_words}});
    }
    out["code"] = {{"code_load", kind_count(summary, EventKind::kCodeLoad)},
                   {"code_unload", kind_count(summary, EventKind::kCodeUnload)},
                   {"stub", kind_count(summary, EventKind::kStub)},
                   {"compiled_by_size", compiled},
                   {"stubs_by_size", stubs}};

    // "damage": the first damaged region (null when intact); "damages": all of them.
    auto damage_json = [](const RecordingDamage& damage) {
        nlohmann::ordered_json d = {{"offset", damage.offset},
                                    {"code", errc_name(damage.error.code)},
                                    {"reason", damage.error.describe()},
                                    {"lost_bytes", damage.lost_bytes}};
        d["resumed_at"] = damage.resumed_at ? nlohmann::ordered_json(*damage.resumed_at) : nlohmann::ordered_json();
        d["lost_events"] = damage.lost_events ? nlohmann::ordered_json(*damage.lost_events) : nlohmann::ordered_json();
        if (damage.lost_events) {
            d["lost_min_time_ns"] = damage.lost_min_time_ns;
            d["lost_max_time_ns"] = damage.lost_max_time_ns;
        }
        return d;
    };
    out["damage"] = summary.damages.empty() ? nlohmann::ordered_json() : damage_json(summary.damages.front());
    out["damages"] = nlohmann::ordered_json::array();
    for (const RecordingDamage& damage : summary.damages) out["damages"].push_back(damage_json(damage));
    return out;
}

int run_dump(const DumpOptions& options) {
    auto reader = RecordingReader::open(options.path);
    if (!reader.ok()) {
        // The error names the file already.
        fmt::print(stderr, "stackfrag dump: {}\n", reader.error().describe());
        return 2;
    }
    Summary summary;
    summary.header = (*reader)->header();
    struct stat info {};
    if (::stat(options.path.c_str(), &info) == 0) summary.file_bytes = static_cast<uint64_t>(info.st_size);
    while (auto event = (*reader)->next()) count(summary, *event);
    summary.skipped_unknown = (*reader)->skipped_events();
    summary.damages = (*reader)->damages();
    sort_by_size(summary.compiled);
    sort_by_size(summary.stubs);

    if (options.json) {
        // Recorded strings are bytes, not necessarily UTF-8: replace what JSON cannot carry.
        const std::string text = to_json(summary, options).dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
        fmt::print("{}\n", text);
    } else {
        print_text(summary, options);
    }
    std::fflush(stdout);
    for (const RecordingDamage& damage : summary.damages) {
        fmt::print(stderr, "stackfrag dump: {} is damaged at offset {}: {}\n", options.path, damage.offset,
                   damage.describe());
    }
    if (!summary.damages.empty()) return 1;
    return 0;
}

}  // namespace

void add_dump(CLI::App& app, int& exit_code) {
    auto* cmd = app.add_subcommand("dump", "Print a recording's header, event counts, threads, VM facts and code");
    // CLI11 keeps the callback (and so the options) alive as long as the app.
    auto options = std::make_shared<DumpOptions>();
    cmd->add_option("recording", options->path, "recording file (.sfr)")->required();
    cmd->add_flag("--json", options->json, "print one JSON object instead of text");
    cmd->add_flag("-v,--verbose", options->verbose, "list every compiled method and stub, not the top 20");
    cmd->footer("Exit status: 0 intact, 1 damaged (every intact chunk is still read: a damaged chunk is skipped "
                "and listed with what it lost), "
                "2 the file cannot be read.");
    cmd->callback([options, &exit_code] { exit_code = run_dump(*options); });
}

}  // namespace sf::cli
