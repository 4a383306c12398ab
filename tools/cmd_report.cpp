// `stackfrag report IN -o OUT`: turns a profile into another profile format (flame graph, pprof,
// collapsed stacks, CCT json), reading IN with the loader its file name ending selects;
// --focus/--exclude keep only the samples with (without) a method on their stacks; --from/--to
// only a recording's samples taken in that time window.
#include <algorithm>
#include <cerrno>
#include <fstream>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/core.h>

#include "commands.hpp"
#include "stackfrag/decoder/stream_decoder.hpp"
#include "stackfrag/events/recording.hpp"
#include "stackfrag/profile/coverage.hpp"
#include "stackfrag/profile/export.hpp"
#include "stackfrag/profile/trace_filter.hpp"

namespace sf::cli {

namespace {

// Seconds from a recording's start (its header's monotonic time, which the samples' times share).
struct TimeWindow {
    std::optional<double> from_s, to_s;
    bool set() const { return from_s || to_s; }
    bool contains(double at_s) const { return (!from_s || at_s >= *from_s) && (!to_s || at_s < *to_s); }
    std::string text() const {
        return fmt::format("the window from {} to {}", from_s ? fmt::format("{:.3f} s", *from_s) : std::string("the start"),
                           to_s ? fmt::format("{:.3f} s", *to_s) : std::string("the end"));
    }
};

// A loader gets the tree's options for how a recording's samples are grouped by thread
// (--group: per_thread, per_pool) and the time window to keep; other inputs keep their tree's
// and have no sample times.
struct LoadOptions {
    profile::CctOptions group;
    TimeWindow window;
};
struct InputLoader {
    std::string_view ending;
    std::string_view description;
    std::function<Result<profile::Cct>(const std::string& path, const LoadOptions& options)> load;
    bool decodes = false;   // a recording: `load` can group samples by thread and knows their times
};

// A recording decodes through the same StreamDecoder as `replay` and the agent's live profile, each
// sample weighted by the period, so the profile equals the one the agent would have written.
Result<profile::Cct> decode_recording(const std::string& path, const LoadOptions& load) {
    auto reader = RecordingReader::open(path);
    if (!reader.ok()) return reader.error();
    profile::CctOptions cct_options = load.group;
    struct Names final : profile::MethodNames {
        const CodeMap* map = nullptr;
        const MethodInfo* find(uint64_t id) const override { return map->method_by_id(id); }
    };
    // The names are only looked up inside add(), which ends with the decoding below.
    auto names = std::make_unique<Names>();
    // Samples kept one by one (time, thread) for outputs that list them (JFR).
    cct_options.keep_samples = true;
    profile::Cct cct(names.get(), cct_options);
    StreamDecoder* decoder = nullptr;
    const uint64_t start_ns = (*reader)->header().created_monotonic_ns;
    uint64_t taken = 0;
    std::optional<double> first_s, last_s;   // the samples' span, for the window's report
    StreamDecoder stream(StreamDecoderOptions{}, [&](const Event& e, const CallTrace& trace) {
        if (!is_profile_sample(e)) return;
        if (load.window.set()) {
            const uint64_t at_ns = time_of(e);
            const double at_s = at_ns > start_ns ? double(at_ns - start_ns) / 1e9 : 0.0;
            ++taken;
            first_s = std::min(first_s.value_or(at_s), at_s);
            last_s = std::max(last_s.value_or(at_s), at_s);
            if (!load.window.contains(at_s)) return;
        }
        (void)cct.add(trace, decoder->period_ns());
    });
    decoder = &stream;
    names->map = &stream.code_map();
    uint64_t lost = 0;   // the kernel's Lost counts, which the outputs show as the live profile's do
    profile::CoverageTally coverage;
    decode_recording(**reader, stream, [&lost, &cct, &coverage](const Event& event) {
        coverage.observe(event);
        if (const auto* l = std::get_if<Lost>(&event)) lost += l->count;
        if (const auto* t = std::get_if<ThreadInfo>(&event); t && !t->name.empty()) cct.set_thread_name(t->tid, t->name);
    });
    for (const RecordingDamage& damage : (*reader)->damages()) {
        fmt::print(stderr, "stackfrag report: {} is damaged; the profile covers the intact chunks: {}\n", path,
                   damage.describe());
    }
    if (const uint64_t n = cct.trace_counts().failed_by_reason[static_cast<size_t>(FailReason::kLostEvents)]) {
        fmt::print(stderr, "stackfrag report: {} samples failed with lost_events (they needed what the damage lost)\n", n);
    }
    cct.info().period_ns = stream.period_ns();
    cct.info().start_unix_ns = (*reader)->header().created_unix_ns;
    cct.info().monotonic_to_unix_ns = static_cast<int64_t>((*reader)->header().created_unix_ns) -
                                      static_cast<int64_t>((*reader)->header().created_monotonic_ns);
    cct.info().lost_samples = lost;
    fmt::print(stderr, "stackfrag report: {}: {}\n", path, profile::coverage_text(coverage.coverage()));
    if (load.window.set()) {
        const std::string span =
            first_s ? fmt::format("the recording's samples were taken from {:.3f} s to {:.3f} s after its start", *first_s, *last_s)
                    : std::string("the recording has no samples");
        if (cct.total_samples() == 0) {
            return make_error(Errc::kInvalidArgument, fmt::format("--from/--to: no sample of {} lies in {}", path, load.window.text()),
                              span);
        }
        fmt::print(stderr, "stackfrag report: {}: {} of {} samples lie in {} ({}); the coverage above is the whole recording's\n",
                   path, cct.total_samples(), taken, load.window.text(), span);
    }
    for (const std::string& module : stream.decoder().changed_modules()) {
        fmt::print(stderr,
                   "stackfrag report: {} here is another build than the one recorded: its native frames are walked by "
                   "the rbp chain only and left unnamed\n",
                   module);
    }
    return cct;
}

// One row per input kind: the output formats stackfrag reads back (profile/export.hpp's table),
// then recordings and async-profiler's .txt.
const std::vector<InputLoader>& input_loaders() {
    static const std::vector<InputLoader> loaders = [] {
        std::vector<InputLoader> out;
        for (const profile::OutputFormat& format : profile::output_formats()) {
            if (format.read == nullptr) continue;
            for (std::string_view ending : format.endings) {
                out.push_back({ending, format.description,
                               [](const std::string& path, const LoadOptions&) { return profile::read_profile(path); }});
            }
        }
        out.push_back({".sfr", "a recording (agent record=FILE), decoded as replay does",
                       [](const std::string& path, const LoadOptions& options) { return decode_recording(path, options); }, true});
        out.push_back({".txt", "collapsed stacks, as async-profiler names them with -o collapsed",
                       [](const std::string& path, const LoadOptions&) -> Result<profile::Cct> {
                           std::ifstream in(path, std::ios::binary);
                           if (!in) return sys_error(Errc::kIo, errno, fmt::format("cannot open {}", path));
                           return profile::read_collapsed(in);
                       }});
        return out;
    }();
    return loaders;
}

std::string accepted_inputs() {
    std::string out;
    for (const auto& l : input_loaders()) out += fmt::format("{}{}", out.empty() ? "" : ", ", l.ending);
    return out;
}

Result<profile::Cct> load_input(const std::string& path, const LoadOptions& options) {
    for (const auto& loader : input_loaders()) {
        if (path.size() < loader.ending.size() || !path.ends_with(loader.ending)) continue;
        if (options.group.per_thread && !loader.decodes) {
            return make_error(Errc::kInvalidArgument, fmt::format("--group: {} is a profile, whose threads are as it was written", path),
                              "--group applies to recordings (.sfr); the agent's group= option writes grouped profiles");
        }
        if (options.window.set() && !loader.decodes) {
            return make_error(Errc::kInvalidArgument, fmt::format("--from/--to: {} is a profile, whose samples carry no times", path),
                              "--from/--to apply to recordings (.sfr): record with the agent's record=FILE");
        }
        return loader.load(path, options);
    }
    return make_error(Errc::kInvalidArgument, fmt::format("{}: unknown input format", path),
                      fmt::format("report reads {}", accepted_inputs()));
}

struct ReportArgs {
    std::string input;
    std::string output;
    std::string title;
    bool weight = false;
    std::vector<std::string> focus, exclude;
    std::string group = "none";
    TimeWindow window;
};

int run_report(const ReportArgs& args) {
    Result<profile::TraceFilter> filter = profile::TraceFilter::parse(args.focus, args.exclude);
    if (!filter.ok()) {
        fmt::print(stderr, "stackfrag report: {}\n", filter.error().describe());
        return 1;
    }
    for (const auto& [name, value] : {std::pair{"--from", args.window.from_s}, std::pair{"--to", args.window.to_s}}) {
        if (value && !(*value >= 0)) {
            fmt::print(stderr, "stackfrag report: {} {}: seconds after the recording's start, 0 or more\n", name, *value);
            return 1;
        }
    }
    if (args.window.from_s && args.window.to_s && *args.window.to_s <= *args.window.from_s) {
        fmt::print(stderr, "stackfrag report: --to {} must come after --from {}\n", *args.window.to_s, *args.window.from_s);
        return 1;
    }
    LoadOptions load;
    load.group.per_thread = args.group != "none";
    load.group.per_pool = args.group == "pool";
    load.window = args.window;
    auto cct = load_input(args.input, load);
    if (!cct.ok()) {
        fmt::print(stderr, "stackfrag report: {}\n", cct.error().describe());
        return 1;
    }
    if (!filter->empty()) {
        // Each stack of the tree is judged as a decoded trace would be, so a recording gives the
        // profile the agent writes with the same focus=/exclude= options.
        profile::FilterCounts dropped;
        profile::Cct kept = profile::filter_cct(*cct, *filter, &dropped);
        fmt::print(stderr, "stackfrag report: {}\n",
                   profile::filter_sentence(*filter, kept.total_samples(), cct->total_samples(), dropped, "samples"));
        *cct = std::move(kept);
    }
    profile::HtmlOptions options;
    options.title = args.title.empty() ? cct->info().title : args.title;
    if (options.title.empty()) {
        size_t slash = args.input.rfind('/');
        options.title = args.input.substr(slash == std::string::npos ? 0 : slash + 1);
    }
    options.counter = args.weight ? profile::Counter::kWeight : profile::Counter::kSamples;
    if (Status written = profile::write_profile(*cct, args.output, options); !written.ok()) {
        fmt::print(stderr, "stackfrag report: {}\n", written.error().describe());
        return 1;
    }
    const auto& counts = cct->trace_counts();
    fmt::print(stderr, "stackfrag report: wrote {} ({} samples, {} nodes, {} frames{})\n", args.output,
               cct->total_samples(), cct->node_count() - 1, cct->frame_count() - 1,
               counts.failed > 0 ? fmt::format(", {} of them failed walks under [failed: ...] frames", counts.failed) : "");
    return 0;
}

}  // namespace

void add_report(CLI::App& app, int& exit_code) {
    auto* cmd = app.add_subcommand("report", "Convert a profile to a flame graph, pprof, collapsed stacks or CCT json");
    auto args = std::make_shared<ReportArgs>();
    cmd->add_option("input", args->input, "profile to read: " + accepted_inputs())->required();
    cmd->add_option("-o,--output", args->output,
                    std::string("file to write; its ending picks the format: ") +
                        profile::accepted_profile_extensions())
        ->required();
    cmd->add_option("--title", args->title, "title of the html page (default: the input's title or file name)");
    cmd->add_flag("--weight", args->weight,
                  "collapsed/html: show the summed sample weights (ns) instead of sample counts");
    cmd->add_option("--focus", args->focus,
                    "keep only samples with this method (pkg.Class.method) or class (pkg.Class) on the stack; repeatable")
        ->allow_extra_args(false);
    cmd->add_option("--group", args->group,
                    "a recording's samples: none (all threads merged, the default), thread (a subtree per thread, "
                    "\"[name tid=N]\") or pool (per thread pool: \"[http-nio-8080-exec-*]\")")
        ->check(CLI::IsMember({"none", "thread", "pool"}));
    cmd->add_option("--exclude", args->exclude, "drop samples with this method or class on the stack; repeatable")
        ->allow_extra_args(false);
    cmd->add_option_function<double>(
           "--from", [args](double seconds) { args->window.from_s = seconds; },
           "a recording's samples: keep those taken this many seconds after its start or later")
        ->type_name("SECONDS");
    cmd->add_option_function<double>(
           "--to", [args](double seconds) { args->window.to_s = seconds; },
           "a recording's samples: keep those taken before this many seconds after its start")
        ->type_name("SECONDS");
    cmd->footer(
        "Examples:\n"
        "  stackfrag report cpu.json -o cpu.html          interactive flame graph (one self-contained file)\n"
        "  stackfrag report cpu.json -o cpu.pb.gz         for `go tool pprof -http=: cpu.pb.gz`\n"
        "  stackfrag report cpu.json -o cpu.collapsed     for flamegraph.pl, speedscope, diffs\n"
        "  stackfrag report async.collapsed -o async.json read another profiler's collapsed stacks\n"
        "  stackfrag report app.sfr -o q.html --focus org.h2.command.Command.executeQuery\n"
        "                                                 only the samples inside that method\n"
        "  stackfrag report app.sfr -o spike.html --from 30 --to 45\n"
        "                                                 only the samples of seconds 30 to 45 of the recording\n"
        "Outputs are written to a temporary file and renamed, so a reader never sees half a profile.\n");
    cmd->callback([args, &exit_code] { exit_code = run_report(*args); });
}

}  // namespace sf::cli
