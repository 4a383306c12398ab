// Comparing calling context trees and querying one (the Call Context Map view): how much two
// profiles agree (degree of overlap, hot-context coverage, method correlation), what a method's
// callers, callees and contexts are, which paths are hottest, and which trace a node id stands for.
// docs/analyses.md gives every definition with its formula and source.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "stackfrag/base/result.hpp"
#include "stackfrag/profile/cct.hpp"
#include "stackfrag/profile/export.hpp"

namespace sf::profile {

// What makes two frames "the same" when contexts of different profiles (or profilers) are matched.
struct ContextOptions {
    // Drop "[name tid=N]" frames, so per-thread and merged trees compare, and thread ids of two runs
    // do not make every context differ.
    bool ignore_threads = true;
    // Match frames by name alone: interpreted, compiled, inlined and native-wrapper runs of one
    // method are one frame, as are async-profiler's unannotated Java frames (read as native) and a
    // stub read back from collapsed text; the suffixes "_[j]", "_[i]", "_[0]", "_[1]" and "_[k]" are
    // cut off. Off: frames match only when their type is equal too.
    bool merge_frame_kinds = true;
};

// The name a frame is matched by under `options` (a suffix-free name when kinds are merged).
std::string context_frame_name(const FrameDesc& frame, const ContextOptions& options);

// A copy of `cct` in which frames are identified as `options` says, signatures and call sites are
// dropped (collapsed stacks carry neither), and nodes that then have equal paths are merged. Self
// and total counts are kept; node ids are not.
Cct normalize_contexts(const Cct& cct, const ContextOptions& options = {});

// --- Comparing two profiles. Each function normalises both trees with `options` first. ---

// Degree of overlap: sum over calling contexts c of min(w_A(c), w_B(c)), where w(c) is c's self
// count divided by the profile's total. 1 for equal distributions, 0 when no sample's context is
// in both. 0 when either profile is empty.
double overlap(const Cct& a, const Cct& b, const ContextOptions& options = {}, Counter counter = Counter::kSamples);

struct HotCoverage {
    size_t hot = 0;                // contexts of the first profile with w(c) >= threshold * max w
    size_t hot_in_other = 0;       // of those, the ones hot in the other profile as well
    size_t present_in_other = 0;   // of those, the ones with any sample in the other profile
    // hot_in_other / hot; nullopt when nothing is hot (an empty profile).
    std::optional<double> share() const;
    std::optional<double> present_share() const;
};

// The hot contexts of `a` (self weight at least `threshold` times a's largest) and how many of them
// `b` has too.
HotCoverage hot_coverage(const Cct& a, const Cct& b, double threshold, const ContextOptions& options = {},
                         Counter counter = Counter::kSamples);

struct MethodTotal {
    std::string name;
    uint64_t self = 0;    // samples with the method innermost
    uint64_t total = 0;   // samples with the method anywhere on the stack, each counted once
};

// Per-method self and total over all contexts, by total descending then name. Recursion does not
// count a sample twice. Thread, "[truncated]" and root frames are not methods.
std::vector<MethodTotal> method_totals(const Cct& cct, const ContextOptions& options = {},
                                       Counter counter = Counter::kSamples);

struct Correlation {
    std::optional<double> pearson;    // nullopt when either side has no variance
    std::optional<double> spearman;   // Pearson over ranks, ties given their mean rank
    size_t methods = 0;               // size of the union the coefficients are taken over
};

std::optional<double> pearson_correlation(std::span<const double> x, std::span<const double> y);
std::optional<double> spearman_correlation(std::span<const double> x, std::span<const double> y);

// Correlation of the methods' total shares over the union of both profiles' methods (a method
// missing from one profile counts 0 there).
Correlation method_correlation(const Cct& a, const Cct& b, const ContextOptions& options = {},
                               Counter counter = Counter::kSamples);

struct ContextDifference {
    std::vector<std::string> path;   // frame names, root first
    double weight_a = 0;             // self share in A
    double weight_b = 0;
};

struct ComparisonOptions {
    ContextOptions contexts;
    Counter counter = Counter::kSamples;
    double hot_threshold = 0.1;
    size_t top_differences = 10;
};

struct ProfileComparison {
    double overlap = 0;
    HotCoverage hot_a_in_b;
    HotCoverage hot_b_in_a;
    Correlation methods;
    size_t contexts_a = 0;   // contexts with samples after normalisation, root excluded
    size_t contexts_b = 0;
    uint64_t samples_a = 0;  // the profile's total in the chosen counter
    uint64_t samples_b = 0;
    std::vector<ContextDifference> top_differences;   // largest |weight_a - weight_b| first
};

// All of the above, normalising each tree once.
ProfileComparison compare_profiles(const Cct& a, const Cct& b, const ComparisonOptions& options = {});

// --- Querying one profile (node ids are the tree's own, so they can be decoded with path()). ---

struct WeightedName {
    std::string name;
    uint64_t total = 0;   // samples whose stack has this caller->method (or method->callee) call
};

struct MethodContext {
    NodeId node = kRootNode;
    uint64_t self = 0;
    uint64_t total = 0;
};

struct MethodProfile {
    std::string name;
    uint64_t self = 0;
    uint64_t total = 0;
    std::vector<WeightedName> callers;      // "[root]" when the method is outermost; by total descending
    std::vector<WeightedName> callees;
    std::vector<MethodContext> contexts;    // every node of the method, by total descending
};

// Methods whose context_frame_name equals `query`, or, when none does, contains it; sorted.
std::vector<std::string> find_methods(const Cct& cct, std::string_view query, const ContextOptions& options = {});

// Callers, callees and contexts of the method named `name` (as context_frame_name gives it). Call
// totals count each sample once per distinct call pair, however often recursion repeats it.
Result<MethodProfile> method_profile(const Cct& cct, std::string_view name, const ContextOptions& options = {},
                                     Counter counter = Counter::kSamples);

// Convenience views of method_profile.
std::vector<WeightedName> callers_of(const Cct& cct, std::string_view name, const ContextOptions& options = {});
std::vector<WeightedName> callees_of(const Cct& cct, std::string_view name, const ContextOptions& options = {});

struct HotPath {
    NodeId node = kRootNode;
    uint64_t self = 0;
};

// The `count` nodes with the most self samples (the full stacks most samples ended in), hottest
// first, ties by node id.
std::vector<HotPath> hottest_paths(const Cct& cct, size_t count, Counter counter = Counter::kSamples);

// The frames from the root's child down to node `id`, or an error when the tree has no such node.
Result<std::vector<NodeId>> trace_of(const Cct& cct, uint64_t id);

// Reads a profile for analysis: .json and .collapsed/.folded by ending as read_profile does; any
// other ending (async-profiler's .txt) by content: '{' first is CCT json, anything else collapsed.
Result<Cct> read_profile_for_analysis(const std::string& path);

}  // namespace sf::profile
