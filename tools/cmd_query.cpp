// `stackfrag query PROFILE`: the profile as a Call Context Map — per-method self and total, one
// method's callers, callees and contexts, the hottest paths, and the trace behind a node id.
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

constexpr size_t kCandidatesShown = 20;

struct QueryArgs {
    std::string input;
    std::string method;
    size_t top = 20;
    size_t paths = 0;
    std::optional<uint64_t> id;
    bool json = false;
    bool ignore_threads = true;
    bool keep_frame_kinds = false;
    bool weight = false;
};

using json = nlohmann::ordered_json;

struct Query {
    const profile::Cct& cct;
    const QueryArgs& args;
    profile::ContextOptions options;
    profile::Counter counter;
    uint64_t profile_total;

    double percent(uint64_t count) const {
        return profile_total == 0 ? 0.0 : 100.0 * static_cast<double>(count) / static_cast<double>(profile_total);
    }
    std::vector<std::string> names(profile::NodeId id) const {
        std::vector<std::string> out;
        for (profile::NodeId n : cct.path(id)) out.push_back(profile::context_frame_name(cct.frame_of(n), options));
        return out;
    }
    std::string stack(profile::NodeId id) const {
        std::string text;
        for (const auto& name : names(id)) text += (text.empty() ? "" : ";") + name;
        return text.empty() ? "[root]" : text;
    }
    uint64_t self_of(profile::NodeId id) const {
        const auto& n = cct.node(id);
        return counter == profile::Counter::kSamples ? n.self_samples : n.self_weight;
    }
    uint64_t total_of(profile::NodeId id) const {
        const auto& n = cct.node(id);
        return counter == profile::Counter::kSamples ? n.total_samples : n.total_weight;
    }
};

template <class T>
std::span<const T> first(const std::vector<T>& items, size_t count) {
    return std::span<const T>(items.data(), std::min(count, items.size()));
}

// --- the method table ---

json methods_json(const Query& q, const std::vector<profile::MethodTotal>& totals) {
    json rows = json::array();
    for (const auto& m : first(totals, q.args.top)) rows.push_back({{"name", m.name}, {"self", m.self}, {"total", m.total}});
    return rows;
}

void print_methods(const Query& q, const std::vector<profile::MethodTotal>& totals) {
    fmt::print("{} methods; the {} with the largest totals (samples with the method anywhere on the stack)\n",
               totals.size(), std::min(q.args.top, totals.size()));
    fmt::print("{:>10} {:>7} {:>10} {:>7}  {}\n", "self", "", "total", "", "method");
    for (const auto& m : first(totals, q.args.top)) {
        fmt::print("{:>10} {:>6.2f}% {:>10} {:>6.2f}%  {}\n", m.self, q.percent(m.self), m.total, q.percent(m.total),
                   m.name);
    }
}

// --- one method ---

json method_json(const Query& q, const profile::MethodProfile& m) {
    auto weighted = [&](const std::vector<profile::WeightedName>& list) {
        json rows = json::array();
        for (const auto& w : first(list, q.args.top)) rows.push_back({{"name", w.name}, {"total", w.total}});
        return rows;
    };
    json contexts = json::array();
    for (const auto& c : first(m.contexts, q.args.top)) {
        contexts.push_back({{"id", c.node}, {"self", c.self}, {"total", c.total}, {"path", q.names(c.node)}});
    }
    return {{"name", m.name},         {"self", m.self},
            {"total", m.total},       {"context_count", m.contexts.size()},
            {"callers", weighted(m.callers)}, {"callees", weighted(m.callees)},
            {"contexts", std::move(contexts)}};
}

void print_method(const Query& q, const profile::MethodProfile& m) {
    fmt::print("{}\n  self {} ({:.2f}%), total {} ({:.2f}%), in {} contexts\n", m.name, m.self, q.percent(m.self),
               m.total, q.percent(m.total), m.contexts.size());
    auto print_list = [&](const char* title, const std::vector<profile::WeightedName>& list) {
        fmt::print("\n{} (samples with the call on the stack)\n", title);
        if (list.empty()) fmt::print("  none\n");
        for (const auto& w : first(list, q.args.top)) {
            fmt::print("{:>10} {:>6.2f}%  {}\n", w.total, q.percent(w.total), w.name);
        }
    };
    print_list("callers", m.callers);
    print_list("callees", m.callees);
    fmt::print("\ncontexts\n{:>10} {:>10} {:>10}  {}\n", "id", "self", "total", "path");
    for (const auto& c : first(m.contexts, q.args.top)) {
        fmt::print("{:>10} {:>10} {:>10}  {}\n", c.node, c.self, c.total, q.stack(c.node));
    }
}

// --- hottest paths ---

json paths_json(const Query& q, const std::vector<profile::HotPath>& paths) {
    json rows = json::array();
    for (const auto& p : paths) rows.push_back({{"id", p.node}, {"self", p.self}, {"path", q.names(p.node)}});
    return rows;
}

void print_paths(const Query& q, const std::vector<profile::HotPath>& paths) {
    fmt::print("hottest paths (self samples of the full stack)\n{:>10} {:>10} {:>7}  {}\n", "id", "self", "", "path");
    for (const auto& p : paths) {
        fmt::print("{:>10} {:>10} {:>6.2f}%  {}\n", p.node, p.self, q.percent(p.self), q.stack(p.node));
    }
}

// --- id -> trace ---

json trace_json(const Query& q, profile::NodeId id, const std::vector<profile::NodeId>& trace) {
    json frames = json::array();
    for (profile::NodeId n : trace) {
        const auto& node = q.cct.node(n);
        const auto& frame = q.cct.frame_of(n);
        json entry{{"id", n}, {"name", frame.name}, {"type", profile::frame_type_name(frame.type)}};
        if (!frame.signature.empty()) entry["signature"] = frame.signature;
        if (node.call_bci >= 0) entry["call_bci"] = node.call_bci;
        if (node.call_line > 0) entry["call_line"] = node.call_line;
        frames.push_back(std::move(entry));
    }
    return {{"id", id}, {"self", q.self_of(id)}, {"total", q.total_of(id)}, {"trace", std::move(frames)}};
}

void print_trace(const Query& q, profile::NodeId id, const std::vector<profile::NodeId>& trace) {
    fmt::print("node {}: self {}, total {} ({:.2f}%), root first\n", id, q.self_of(id), q.total_of(id),
               q.percent(q.total_of(id)));
    for (profile::NodeId n : trace) {
        const auto& node = q.cct.node(n);
        const auto& frame = q.cct.frame_of(n);
        std::string call_site;
        if (node.call_bci >= 0) call_site = fmt::format("  called at bci {}", node.call_bci);
        if (node.call_line > 0) call_site += fmt::format(" (line {})", node.call_line);
        fmt::print("{:>10}  {:<14} {}{}{}\n", n, profile::frame_type_name(frame.type), frame.name, frame.signature,
                   call_site);
    }
}

int run_query(const QueryArgs& args) {
    auto loaded = profile::read_profile_for_analysis(args.input);
    if (!loaded.ok()) {
        fmt::print(stderr, "stackfrag query: {}\n", loaded.error().describe());
        return 1;
    }
    const profile::Cct& cct = *loaded;
    Query q{cct, args, {}, args.weight ? profile::Counter::kWeight : profile::Counter::kSamples, 0};
    q.options.ignore_threads = args.ignore_threads;
    q.options.merge_frame_kinds = !args.keep_frame_kinds;
    q.profile_total = q.total_of(profile::kRootNode);

    json out;
    out["profile"] = args.input;
    out[args.weight ? "weight" : "samples"] = q.profile_total;
    bool printed = false;
    auto separate = [&] {
        if (printed && !args.json) fmt::print("\n");
        printed = true;
    };

    if (args.method.empty() && args.paths == 0 && !args.id) {
        const auto totals = profile::method_totals(cct, q.options, q.counter);
        if (args.json) out["methods"] = methods_json(q, totals);
        else print_methods(q, totals);
        printed = true;
    }
    if (!args.method.empty()) {
        const auto candidates = profile::find_methods(cct, args.method, q.options);
        if (candidates.size() != 1) {
            fmt::print(stderr, "stackfrag query: {} methods match \"{}\"{}\n", candidates.size(), args.method,
                       candidates.empty() ? "" : "; give one of them exactly:");
            for (const auto& name : first(candidates, kCandidatesShown)) fmt::print(stderr, "  {}\n", name);
            if (candidates.size() > kCandidatesShown) fmt::print(stderr, "  ...\n");
            return 1;
        }
        auto method = profile::method_profile(cct, candidates.front(), q.options, q.counter);
        if (!method.ok()) {
            fmt::print(stderr, "stackfrag query: {}\n", method.error().describe());
            return 1;
        }
        separate();
        if (args.json) out["method"] = method_json(q, *method);
        else print_method(q, *method);
    }
    if (args.paths > 0) {
        const auto paths = profile::hottest_paths(cct, args.paths, q.counter);
        separate();
        if (args.json) out["paths"] = paths_json(q, paths);
        else print_paths(q, paths);
    }
    if (args.id) {
        auto trace = profile::trace_of(cct, *args.id);
        if (!trace.ok()) {
            fmt::print(stderr, "stackfrag query: {}\n", trace.error().describe());
            return 1;
        }
        const auto id = static_cast<profile::NodeId>(*args.id);
        separate();
        if (args.json) out["node"] = trace_json(q, id, *trace);
        else print_trace(q, id, *trace);
    }
    if (args.json) fmt::print("{}\n", out.dump(2, ' ', false, json::error_handler_t::replace));
    return 0;
}

}  // namespace

void add_query(CLI::App& app, int& exit_code) {
    auto* cmd = app.add_subcommand("query", "Query a profile: method totals, callers/callees, hottest paths, node ids");
    auto args = std::make_shared<QueryArgs>();
    cmd->add_option("profile", args->input, "CCT .json or collapsed stacks (.collapsed, .folded, .txt, ...)")->required();
    cmd->add_option("--method", args->method,
                    "a method's callers, callees and contexts; the exact name (pkg/Class.method) or a unique part of it");
    cmd->add_option("--top", args->top, "rows per list")->capture_default_str();
    cmd->add_option("--paths", args->paths, "list the N full stacks with the most samples");
    cmd->add_option("--id", args->id, "print the trace (root first) of the node with this id");
    cmd->add_flag("--json", args->json, "print one json object");
    cmd->add_flag("--ignore-threads,!--keep-threads", args->ignore_threads,
                  "callers of a thread's outermost method are \"[root]\" (default; --keep-threads names the thread)");
    cmd->add_flag("--keep-frame-kinds", args->keep_frame_kinds,
                  "interpreted, compiled and inlined runs of a method are different methods (default: one)");
    cmd->add_flag("--weight", args->weight, "use summed sample weights (ns) instead of sample counts");
    cmd->footer(
        "Without --method, --paths or --id, prints the method table. Totals count a sample once per\n"
        "method however deep the recursion. Definitions: docs/analyses.md.\n"
        "Examples:\n"
        "  stackfrag query cpu.json --top 30\n"
        "  stackfrag query cpu.json --method String.indexOf\n"
        "  stackfrag query cpu.json --paths 10\n"
        "  stackfrag query cpu.json --id 4711 --json\n");
    cmd->callback([args, &exit_code] { exit_code = run_query(*args); });
}

}  // namespace sf::cli
