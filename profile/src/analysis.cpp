// Comparing two calling context trees: normalisation, degree of overlap, hot-context coverage,
// method correlation and the contexts that differ most.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <numeric>
#include <unordered_map>

#include "stackfrag/profile/analysis.hpp"

namespace sf::profile {

namespace {

constexpr NodeId kNoNode = UINT32_MAX;

// async-profiler's frame-kind annotations (and the C1 and kernel ones), which say how a frame ran,
// not which code it is.
constexpr std::string_view kKernelSuffix = "_[k]";
constexpr std::string_view kKindSuffixes[] = {"_[j]", "_[i]", "_[0]", "_[1]", kKernelSuffix};

std::string strip_kind_suffix(std::string_view name) {
    for (std::string_view suffix : kKindSuffixes) {
        if (name.size() > suffix.size() && name.ends_with(suffix)) {
            return std::string(name.substr(0, name.size() - suffix.size()));
        }
    }
    return std::string(name);
}

// A hidden class (lambda, LambdaForm) is named with its address, "app/Main$$Lambda$16.0x00007f03f00b7d78":
// the address differs from run to run, so two runs would never share a context through one. The
// ".0x<hex>" part is dropped where a class name ends (before the method's '.' or an inner '$').
std::string without_hidden_class_address(std::string name) {
    for (size_t at = name.find(".0x"); at != std::string::npos; at = name.find(".0x", at + 1)) {
        size_t end = at + 3;
        while (end < name.size() && std::isxdigit(static_cast<unsigned char>(name[end]))) ++end;
        if (end > at + 3 && (end == name.size() || name[end] == '.' || name[end] == '$')) name.erase(at, end - at);
    }
    return name;
}

// A C++ function's demangled name with its parameter list (and what follows it: " const"), as
// stackfrag writes native frames, "PhaseChaitin::Split(unsigned int, ResourceArea*)": async-profiler
// writes "PhaseChaitin::Split", so without this no native context of the two would ever match. The
// list is the last parenthesised group, found from its ')' back to the '(' that balances it, so
// parentheses in the function's own name ("(anonymous namespace)::f(int)",
// "{lambda(int)#1}::operator()(int) const") stay, and so does a name already cut. A name that
// would be left empty stays whole.
std::string without_arguments(std::string name) {
    const size_t close = name.rfind(')');
    if (close == std::string::npos) return name;
    int depth = 0;
    for (size_t i = close + 1; i-- > 0;) {
        if (name[i] == ')') ++depth;
        if (name[i] == '(' && --depth == 0) {
            // "X::operator()" is the call operator's name, which async-profiler's cut leaves.
            const bool call_operator = close == i + 1 && std::string_view(name).substr(0, i).ends_with("operator");
            if (i > 0 && !call_operator) name.resize(i);
            return name;
        }
    }
    return name;
}

uint64_t self_of(const Node& node, Counter counter) {
    return counter == Counter::kSamples ? node.self_samples : node.self_weight;
}
uint64_t total_of(const Node& node, Counter counter) {
    return counter == Counter::kSamples ? node.total_samples : node.total_weight;
}

// For every node of `a`, the node of `b` with the same frame path, or kNoNode. Both trees must be
// normalised (call_bci -1 everywhere, frames without signatures).
std::vector<NodeId> match_nodes(const Cct& a, const Cct& b) {
    std::vector<std::optional<FrameId>> frame_in_b(a.frame_count());
    for (FrameId f = 0; f < a.frame_count(); ++f) {
        const FrameDesc& desc = a.frame(f);
        frame_in_b[f] = f == kRootFrame ? std::optional<FrameId>(kRootFrame) : b.find_frame(desc.type, desc.name, {});
    }
    std::vector<NodeId> matched(a.node_count(), kNoNode);
    matched[kRootNode] = kRootNode;
    // Parents have smaller ids than their children, so id order visits every parent first.
    for (NodeId id = 1; id < a.node_count(); ++id) {
        const Node& n = a.node(id);
        NodeId parent_in_b = matched[n.parent];
        if (parent_in_b == kNoNode || !frame_in_b[n.frame]) continue;
        if (auto child = b.child(parent_in_b, *frame_in_b[n.frame], -1)) matched[id] = *child;
    }
    return matched;
}

// Self shares of the normalised tree's nodes (self / profile total); all 0 for an empty profile.
std::vector<double> self_shares(const Cct& cct, Counter counter) {
    std::vector<double> shares(cct.node_count(), 0.0);
    const uint64_t total = total_of(cct.node(kRootNode), counter);
    if (total == 0) return shares;
    for (NodeId id = 0; id < cct.node_count(); ++id) {
        shares[id] = static_cast<double>(self_of(cct.node(id), counter)) / static_cast<double>(total);
    }
    return shares;
}

double overlap_of_normalized(const Cct& a, const Cct& b, const std::vector<NodeId>& a_in_b, Counter counter) {
    const uint64_t total_a = total_of(a.node(kRootNode), counter);
    const uint64_t total_b = total_of(b.node(kRootNode), counter);
    if (total_a == 0 || total_b == 0) return 0.0;
    // min(x/A, y/B) = min(x*B, y*A) / (A*B): summed in integers, equal profiles give exactly 1 instead
    // of a sum of rounded shares. 128 bits, as weights in ns times totals overflow 64.
    __extension__ using Wide = unsigned __int128;
    Wide sum = 0;
    for (NodeId id = 0; id < a.node_count(); ++id) {
        if (a_in_b[id] == kNoNode) continue;
        const Wide x = Wide{self_of(a.node(id), counter)} * total_b;
        const Wide y = Wide{self_of(b.node(a_in_b[id]), counter)} * total_a;
        sum += std::min(x, y);
    }
    return static_cast<double>(static_cast<long double>(sum) /
                               (static_cast<long double>(total_a) * static_cast<long double>(total_b)));
}

uint64_t hottest_self(const Cct& cct, Counter counter) {
    uint64_t hottest = 0;
    for (NodeId id = 0; id < cct.node_count(); ++id) hottest = std::max(hottest, self_of(cct.node(id), counter));
    return hottest;
}

bool is_hot(uint64_t self, uint64_t hottest, double threshold) {
    return self > 0 && static_cast<double>(self) >= threshold * static_cast<double>(hottest);
}

HotCoverage hot_coverage_of_normalized(const Cct& a, const Cct& b, const std::vector<NodeId>& a_in_b,
                                       double threshold, Counter counter) {
    HotCoverage coverage;
    const uint64_t hottest_a = hottest_self(a, counter);
    const uint64_t hottest_b = hottest_self(b, counter);
    for (NodeId id = 0; id < a.node_count(); ++id) {
        if (!is_hot(self_of(a.node(id), counter), hottest_a, threshold)) continue;
        ++coverage.hot;
        NodeId other = a_in_b[id];
        if (other == kNoNode) continue;
        if (total_of(b.node(other), counter) > 0) ++coverage.present_in_other;
        if (is_hot(self_of(b.node(other), counter), hottest_b, threshold)) ++coverage.hot_in_other;
    }
    return coverage;
}

Correlation method_correlation_of_normalized(const Cct& a, const Cct& b, const ContextOptions& options,
                                             Counter counter) {
    struct Shares {
        double a = 0;
        double b = 0;
    };
    std::unordered_map<std::string, Shares> by_name;
    auto collect = [&](const Cct& cct, double Shares::*side) {
        const double total = static_cast<double>(total_of(cct.node(kRootNode), counter));
        if (total == 0) return;
        for (const MethodTotal& m : method_totals(cct, options, counter)) {
            by_name[m.name].*side = static_cast<double>(m.total) / total;
        }
    };
    collect(a, &Shares::a);
    collect(b, &Shares::b);
    std::vector<double> xs, ys;
    xs.reserve(by_name.size());
    ys.reserve(by_name.size());
    for (const auto& [name, shares] : by_name) {
        xs.push_back(shares.a);
        ys.push_back(shares.b);
    }
    Correlation result;
    result.methods = xs.size();
    result.pearson = pearson_correlation(xs, ys);
    result.spearman = spearman_correlation(xs, ys);
    return result;
}

size_t contexts_with_samples(const Cct& cct, Counter counter) {
    size_t count = 0;
    for (NodeId id = 1; id < cct.node_count(); ++id) count += total_of(cct.node(id), counter) > 0 ? 1 : 0;
    return count;
}

std::vector<std::string> path_names(const Cct& cct, NodeId id) {
    std::vector<std::string> names;
    for (NodeId n : cct.path(id)) names.push_back(cct.frame_of(n).name);
    return names;
}

std::vector<ContextDifference> largest_differences(const Cct& a, const Cct& b, const std::vector<NodeId>& a_in_b,
                                                   Counter counter, size_t count) {
    std::vector<double> wa = self_shares(a, counter);
    std::vector<double> wb = self_shares(b, counter);
    struct Candidate {
        double difference;
        NodeId in_a;   // kNoNode: only in b
        NodeId in_b;   // kNoNode: only in a
    };
    std::vector<Candidate> candidates;
    std::vector<bool> b_matched(b.node_count(), false);
    for (NodeId id = 0; id < a.node_count(); ++id) {
        NodeId other = a_in_b[id];
        if (other != kNoNode) b_matched[other] = true;
        double share_b = other == kNoNode ? 0.0 : wb[other];
        if (wa[id] != share_b) candidates.push_back({std::abs(wa[id] - share_b), id, other});
    }
    for (NodeId id = 0; id < b.node_count(); ++id) {
        if (!b_matched[id] && wb[id] > 0) candidates.push_back({wb[id], kNoNode, id});
    }
    const size_t kept = std::min(count, candidates.size());
    std::partial_sort(candidates.begin(), candidates.begin() + static_cast<ptrdiff_t>(kept), candidates.end(),
                      [](const Candidate& x, const Candidate& y) { return x.difference > y.difference; });
    std::vector<ContextDifference> differences;
    for (size_t i = 0; i < kept; ++i) {
        const Candidate& c = candidates[i];
        ContextDifference d;
        d.path = c.in_a != kNoNode ? path_names(a, c.in_a) : path_names(b, c.in_b);
        d.weight_a = c.in_a != kNoNode ? wa[c.in_a] : 0.0;
        d.weight_b = c.in_b != kNoNode ? wb[c.in_b] : 0.0;
        differences.push_back(std::move(d));
    }
    return differences;
}

std::vector<double> ranks(std::span<const double> values) {
    std::vector<size_t> order(values.size());
    std::iota(order.begin(), order.end(), size_t{0});
    std::sort(order.begin(), order.end(), [&](size_t x, size_t y) { return values[x] < values[y]; });
    std::vector<double> rank(values.size());
    for (size_t i = 0; i < order.size();) {
        size_t j = i;
        while (j < order.size() && values[order[j]] == values[order[i]]) ++j;
        // Tied values share the mean of the ranks i+1 .. j.
        const double mean_rank = (static_cast<double>(i + 1) + static_cast<double>(j)) / 2.0;
        for (size_t k = i; k < j; ++k) rank[order[k]] = mean_rank;
        i = j;
    }
    return rank;
}

// The root stackfrag puts above a JVM thread's stacks, "[C2 CompilerThread]", "[GC Thread]"
// (CallTrace::root): which threads, as a thread frame says, so dropped with them. A bracketed native frame under the
// root with frames below it; a lone "[kernel]" or "[unknown]" sample stays.
bool is_thread_kind_root(const Cct& cct, NodeId id) {
    const Node& n = cct.node(id);
    if (n.parent != kRootNode || cct.children(id).empty()) return false;
    const FrameDesc& desc = cct.frame(n.frame);
    return desc.type == FrameType::kNative && desc.name.size() > 2 && desc.name.front() == '[' && desc.name.back() == ']';
}

}  // namespace

std::string context_frame_name(const FrameDesc& frame, const ContextOptions& options) {
    if (!options.merge_frame_kinds) return without_hidden_class_address(collapsed_frame_name(frame));
    return without_hidden_class_address(strip_kind_suffix(frame.name));
}

Cct normalize_contexts(const Cct& cct, const ContextOptions& options) {
    Cct out;
    out.info() = cct.info();
    out.mutable_trace_counts() = cct.trace_counts();
    std::vector<FrameId> frame_map(cct.frame_count(), kRootFrame);
    // A kernel-mode sample: stackfrag marks it with one "[kernel]" frame (the kernel's own stack is not
    // copied), async-profiler lists the kernel's frames ("do_syscall_64_[k]"). Every kernel frame is
    // "[kernel]", and a run of them one frame, so that the two say the same of where the time went.
    FrameId kernel_frame = kRootFrame;   // "[kernel]" in `out`, once met
    for (FrameId f = 1; f < cct.frame_count(); ++f) {
        const FrameDesc& desc = cct.frame(f);
        FrameDesc normal;
        const bool kernel = options.merge_frame_kinds &&
                            (desc.name == kKernelFrameName ||
                             (desc.name.size() > kKernelSuffix.size() && desc.name.ends_with(kKernelSuffix)));
        if (kernel) {
            normal.name = kKernelFrameName;
        } else {
            normal.name = without_hidden_class_address(options.merge_frame_kinds ? strip_kind_suffix(desc.name) : desc.name);
            // Thread frames and markers ("[worker (2) tid=7]", "[truncated]") are names, not signatures.
            if (desc.type != FrameType::kThread && !is_marker(desc.type) && !normal.name.starts_with('[')) {
                normal.name = without_arguments(std::move(normal.name));
            }
        }
        const bool keeps_type = !options.merge_frame_kinds || is_marker(desc.type);
        normal.type = keeps_type ? desc.type : FrameType::kNative;
        frame_map[f] = out.intern_frame(normal);
        if (kernel) kernel_frame = frame_map[f];
    }
    std::vector<NodeId> node_map(cct.node_count(), kRootNode);
    for (NodeId id = 0; id < cct.node_count(); ++id) {
        const Node& n = cct.node(id);
        NodeId mapped = kRootNode;
        if (id != kRootNode) {
            mapped = node_map[n.parent];
            const FrameId frame = frame_map[n.frame];
            const bool dropped = frame != kernel_frame && options.ignore_threads &&
                                 (cct.frame(n.frame).type == FrameType::kThread || is_thread_kind_root(cct, id));
            const bool kernel_run = frame == kernel_frame && out.node(mapped).frame == kernel_frame;
            if (!dropped && !kernel_run) mapped = out.child_or_create(mapped, frame, -1);
        }
        node_map[id] = mapped;
        if (n.self_samples > 0 || n.self_weight > 0) out.add_samples(mapped, n.self_samples, n.self_weight);
    }
    return out;
}

std::optional<double> HotCoverage::share() const {
    if (hot == 0) return std::nullopt;
    return static_cast<double>(hot_in_other) / static_cast<double>(hot);
}

std::optional<double> HotCoverage::present_share() const {
    if (hot == 0) return std::nullopt;
    return static_cast<double>(present_in_other) / static_cast<double>(hot);
}

double overlap(const Cct& a, const Cct& b, const ContextOptions& options, Counter counter) {
    Cct na = normalize_contexts(a, options);
    Cct nb = normalize_contexts(b, options);
    return overlap_of_normalized(na, nb, match_nodes(na, nb), counter);
}

HotCoverage hot_coverage(const Cct& a, const Cct& b, double threshold, const ContextOptions& options,
                         Counter counter) {
    Cct na = normalize_contexts(a, options);
    Cct nb = normalize_contexts(b, options);
    return hot_coverage_of_normalized(na, nb, match_nodes(na, nb), threshold, counter);
}

std::optional<double> pearson_correlation(std::span<const double> x, std::span<const double> y) {
    if (x.size() != y.size() || x.size() < 2) return std::nullopt;
    const double n = static_cast<double>(x.size());
    const double mean_x = std::accumulate(x.begin(), x.end(), 0.0) / n;
    const double mean_y = std::accumulate(y.begin(), y.end(), 0.0) / n;
    double covariance = 0, variance_x = 0, variance_y = 0;
    for (size_t i = 0; i < x.size(); ++i) {
        const double dx = x[i] - mean_x;
        const double dy = y[i] - mean_y;
        covariance += dx * dy;
        variance_x += dx * dx;
        variance_y += dy * dy;
    }
    if (variance_x <= 0 || variance_y <= 0) return std::nullopt;
    return std::clamp(covariance / std::sqrt(variance_x * variance_y), -1.0, 1.0);
}

std::optional<double> spearman_correlation(std::span<const double> x, std::span<const double> y) {
    if (x.size() != y.size()) return std::nullopt;
    std::vector<double> rank_x = ranks(x);
    std::vector<double> rank_y = ranks(y);
    return pearson_correlation(rank_x, rank_y);
}

Correlation method_correlation(const Cct& a, const Cct& b, const ContextOptions& options, Counter counter) {
    return method_correlation_of_normalized(normalize_contexts(a, options), normalize_contexts(b, options), options,
                                            counter);
}

ProfileComparison compare_profiles(const Cct& a, const Cct& b, const ComparisonOptions& options) {
    const Cct na = normalize_contexts(a, options.contexts);
    const Cct nb = normalize_contexts(b, options.contexts);
    const std::vector<NodeId> a_in_b = match_nodes(na, nb);
    const std::vector<NodeId> b_in_a = match_nodes(nb, na);
    ProfileComparison result;
    result.overlap = overlap_of_normalized(na, nb, a_in_b, options.counter);
    result.hot_a_in_b = hot_coverage_of_normalized(na, nb, a_in_b, options.hot_threshold, options.counter);
    result.hot_b_in_a = hot_coverage_of_normalized(nb, na, b_in_a, options.hot_threshold, options.counter);
    result.methods = method_correlation_of_normalized(na, nb, options.contexts, options.counter);
    result.contexts_a = contexts_with_samples(na, options.counter);
    result.contexts_b = contexts_with_samples(nb, options.counter);
    result.samples_a = total_of(na.node(kRootNode), options.counter);
    result.samples_b = total_of(nb.node(kRootNode), options.counter);
    result.top_differences = largest_differences(na, nb, a_in_b, options.counter, options.top_differences);
    return result;
}

}  // namespace sf::profile
