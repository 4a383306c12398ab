// `stackfrag diff A B`: how far two profiles of the same program agree — degree of overlap of their
// calling contexts, coverage of each one's hot contexts by the other, correlation of method totals,
// and the contexts whose share differs most. Inputs may come from different profilers.
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include <fmt/core.h>

#include "commands.hpp"
#include "stackfrag/profile/analysis.hpp"

namespace sf::cli {

namespace {

constexpr size_t kWidestContext = 110;

struct DiffArgs {
    std::string a;
    std::string b;
    double threshold = 0.1;
    size_t top = 10;
    bool json = false;
    bool ignore_threads = true;
    bool keep_frame_kinds = false;
    bool weight = false;
};

nlohmann::ordered_json optional_number(const std::optional<double>& value) {
    return value ? nlohmann::ordered_json(*value) : nlohmann::ordered_json(nullptr);
}

std::string joined(const std::vector<std::string>& path) {
    std::string text;
    for (const auto& frame : path) text += (text.empty() ? "" : ";") + frame;
    return text.empty() ? "[root]" : text;
}

// Long stacks keep their innermost frames, where the samples are.
std::string fitted(std::string text) {
    if (text.size() <= kWidestContext) return text;
    return "..." + text.substr(text.size() - (kWidestContext - 3));
}

std::string ratio(const std::optional<double>& value) { return value ? fmt::format("{:.3f}", *value) : "-"; }

nlohmann::ordered_json to_json(const profile::ProfileComparison& c, const DiffArgs& args) {
    using json = nlohmann::ordered_json;
    json out;
    out["a"] = args.a;
    out["b"] = args.b;
    out["overlap"] = c.overlap;
    out["hot_coverage_a_in_b"] = optional_number(c.hot_a_in_b.share());
    out["hot_coverage_b_in_a"] = optional_number(c.hot_b_in_a.share());
    out["method_correlation"] = optional_number(c.methods.pearson);
    out["method_rank_correlation"] = optional_number(c.methods.spearman);
    out["methods"] = c.methods.methods;
    out["contexts_a"] = c.contexts_a;
    out["contexts_b"] = c.contexts_b;
    out["samples_a"] = c.samples_a;
    out["samples_b"] = c.samples_b;
    out["hot_threshold"] = args.threshold;
    out["hot_contexts_a"] = c.hot_a_in_b.hot;
    out["hot_contexts_b"] = c.hot_b_in_a.hot;
    out["hot_present_a_in_b"] = optional_number(c.hot_a_in_b.present_share());
    out["hot_present_b_in_a"] = optional_number(c.hot_b_in_a.present_share());
    out["counter"] = args.weight ? "weight" : "samples";
    out["ignore_threads"] = args.ignore_threads;
    out["merge_frame_kinds"] = !args.keep_frame_kinds;
    json differences = json::array();
    for (const auto& d : c.top_differences) {
        differences.push_back(
            {{"context", d.path}, {"a", d.weight_a}, {"b", d.weight_b}, {"difference", d.weight_b - d.weight_a}});
    }
    out["top_differences"] = std::move(differences);
    return out;
}

void print_text(const profile::ProfileComparison& c, const DiffArgs& args) {
    fmt::print("A: {}\nB: {}\n\n", args.a, args.b);
    const char* unit = args.weight ? "weight (ns)" : "samples";
    fmt::print("{:<34}{:>14}{:>14}\n", "", "A", "B");
    fmt::print("{:<34}{:>14}{:>14}\n", unit, c.samples_a, c.samples_b);
    fmt::print("{:<34}{:>14}{:>14}\n", "calling contexts", c.contexts_a, c.contexts_b);
    fmt::print("{:<34}{:>14}{:>14}\n\n", fmt::format("hot contexts (>= {} x hottest)", args.threshold),
               c.hot_a_in_b.hot, c.hot_b_in_a.hot);
    fmt::print("{:<34}{:>8.3f}\n", "degree of overlap", c.overlap);
    fmt::print("{:<34}{:>8}   {} of {} hot in B too, {} on B's stacks\n", "hot coverage of A in B",
               ratio(c.hot_a_in_b.share()), c.hot_a_in_b.hot_in_other, c.hot_a_in_b.hot, c.hot_a_in_b.present_in_other);
    fmt::print("{:<34}{:>8}   {} of {} hot in A too, {} on A's stacks\n", "hot coverage of B in A",
               ratio(c.hot_b_in_a.share()), c.hot_b_in_a.hot_in_other, c.hot_b_in_a.hot, c.hot_b_in_a.present_in_other);
    fmt::print("{:<34}{:>8}   Spearman {}, over {} methods\n", "method total correlation (Pearson)",
               ratio(c.methods.pearson), ratio(c.methods.spearman), c.methods.methods);
    if (c.top_differences.empty()) {
        fmt::print("\nno context differs in its share of the {}\n", unit);
        return;
    }
    fmt::print("\ncontexts that differ most (self share of all {})\n", unit);
    fmt::print("{:>8} {:>8} {:>8}  {}\n", "A", "B", "B-A", "context");
    for (const auto& d : c.top_differences) {
        fmt::print("{:>7.2f}% {:>7.2f}% {:>+7.2f}%  {}\n", 100 * d.weight_a, 100 * d.weight_b,
                   100 * (d.weight_b - d.weight_a), fitted(joined(d.path)));
    }
}

int run_diff(const DiffArgs& args) {
    if (!(args.threshold >= 0.0 && args.threshold <= 1.0)) {
        fmt::print(stderr, "stackfrag diff: --threshold must be between 0 and 1, not {}\n", args.threshold);
        return 1;
    }
    auto a = profile::read_profile_for_analysis(args.a);
    if (!a.ok()) {
        fmt::print(stderr, "stackfrag diff: {}\n", a.error().describe());
        return 1;
    }
    auto b = profile::read_profile_for_analysis(args.b);
    if (!b.ok()) {
        fmt::print(stderr, "stackfrag diff: {}\n", b.error().describe());
        return 1;
    }
    profile::ComparisonOptions options;
    options.contexts.ignore_threads = args.ignore_threads;
    options.contexts.merge_frame_kinds = !args.keep_frame_kinds;
    options.counter = args.weight ? profile::Counter::kWeight : profile::Counter::kSamples;
    options.hot_threshold = args.threshold;
    options.top_differences = args.top;
    const profile::ProfileComparison comparison = profile::compare_profiles(*a, *b, options);
    if (args.json) {
        fmt::print("{}\n", to_json(comparison, args).dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace));
    } else {
        print_text(comparison, args);
    }
    return 0;
}

}  // namespace

void add_diff(CLI::App& app, int& exit_code) {
    auto* cmd = app.add_subcommand("diff", "Compare two profiles: context overlap, hot-context coverage, method correlation");
    auto args = std::make_shared<DiffArgs>();
    cmd->add_option("a", args->a, "first profile: CCT .json or collapsed stacks (.collapsed, .folded, .txt, ...)")
        ->required();
    cmd->add_option("b", args->b, "second profile, in either format")->required();
    cmd->add_option("--threshold", args->threshold,
                    "a context is hot when its self share is at least this fraction of the hottest one's")
        ->capture_default_str();
    cmd->add_option("--top", args->top, "how many of the most different contexts to list")->capture_default_str();
    cmd->add_flag("--json", args->json, "print one json object instead of the table");
    cmd->add_flag("--ignore-threads,!--keep-threads", args->ignore_threads,
                  "drop \"[name tid=N]\" frames before matching contexts (default; --keep-threads matches them)");
    cmd->add_flag("--keep-frame-kinds", args->keep_frame_kinds,
                  "an interpreted, compiled or inlined run of a method is a different frame (default: the same)");
    cmd->add_flag("--weight", args->weight, "compare summed sample weights (ns) instead of sample counts");
    cmd->footer(
        "Contexts are full root-to-frame paths matched by frame name; call sites, signatures and the\n"
        "suffixes _[j] _[i] _[0] _[1] _[k] are ignored. Definitions: docs/analyses.md.\n"
        "Examples:\n"
        "  stackfrag diff stackfrag.json async-profiler.collapsed\n"
        "  stackfrag diff run1.json run2.json --threshold 0.05 --json\n");
    cmd->callback([args, &exit_code] { exit_code = run_diff(*args); });
}

}  // namespace sf::cli
