// Querying one calling context tree as a Call Context Map: per-method totals, a method's callers,
// callees and contexts, the hottest paths, and node id -> trace.
#include <algorithm>
#include <fstream>
#include <unordered_map>

#include <fmt/format.h>

#include "stackfrag/profile/analysis.hpp"

namespace sf::profile {

namespace {

constexpr uint32_t kNoKey = UINT32_MAX;

uint64_t self_of(const Node& node, Counter counter) {
    return counter == Counter::kSamples ? node.self_samples : node.self_weight;
}
uint64_t total_of(const Node& node, Counter counter) {
    return counter == Counter::kSamples ? node.total_samples : node.total_weight;
}

bool is_method(FrameType type) {
    return type != FrameType::kRoot && !is_marker(type);
}

// Every frame of the tree keyed by the name it is matched by, so frames that differ only in how
// they ran (or in signature and call site) share a key.
struct FrameKeys {
    std::vector<uint32_t> key_of_frame;
    std::vector<std::string> names;
    std::vector<bool> method;

    FrameKeys(const Cct& cct, const ContextOptions& options) : key_of_frame(cct.frame_count(), kNoKey) {
        std::unordered_map<std::string, uint32_t> keys;
        for (FrameId f = 0; f < cct.frame_count(); ++f) {
            const FrameDesc& desc = cct.frame(f);
            std::string name = context_frame_name(desc, options);
            auto [it, inserted] = keys.try_emplace(name, static_cast<uint32_t>(names.size()));
            if (inserted) {
                names.push_back(std::move(name));
                method.push_back(is_method(desc.type));
            } else if (is_method(desc.type)) {
                method[it->second] = true;
            }
            key_of_frame[f] = it->second;
        }
    }
    uint32_t of(const Cct& cct, NodeId id) const { return key_of_frame[cct.node(id).frame]; }
    size_t size() const { return names.size(); }
};

// Depth-first walk calling enter(id) before a node's subtree and leave(id) after it, iteratively so
// deep stacks do not overflow ours.
template <class Enter, class Leave>
void walk(const Cct& cct, Enter&& enter, Leave&& leave) {
    struct Pending {
        NodeId id;
        size_t next_child;
    };
    std::vector<Pending> stack{{kRootNode, 0}};
    enter(kRootNode);
    while (!stack.empty()) {
        const NodeId id = stack.back().id;
        const size_t next = stack.back().next_child;
        const std::span<const NodeId> kids = cct.children(id);
        if (next < kids.size()) {
            ++stack.back().next_child;
            const NodeId child = kids[next];
            enter(child);
            stack.push_back({child, 0});
        } else {
            leave(id);
            stack.pop_back();
        }
    }
}

// The caller a node's method is credited to: its parent, passing over thread frames when they are
// ignored, so top-level methods of every thread have the caller "[root]".
NodeId caller_node(const Cct& cct, NodeId id, const ContextOptions& options) {
    NodeId parent = cct.node(id).parent;
    while (options.ignore_threads && parent != kRootNode && cct.frame_of(parent).type == FrameType::kThread) {
        parent = cct.node(parent).parent;
    }
    return parent;
}

std::vector<WeightedName> sorted_by_total(const FrameKeys& keys, const std::vector<uint64_t>& totals) {
    std::vector<WeightedName> out;
    for (uint32_t k = 0; k < totals.size(); ++k) {
        if (totals[k] > 0) out.push_back({keys.names[k], totals[k]});
    }
    std::sort(out.begin(), out.end(), [](const WeightedName& x, const WeightedName& y) {
        return x.total != y.total ? x.total > y.total : x.name < y.name;
    });
    return out;
}

}  // namespace

std::vector<MethodTotal> method_totals(const Cct& cct, const ContextOptions& options, Counter counter) {
    const FrameKeys keys(cct, options);
    std::vector<uint64_t> self(keys.size(), 0), total(keys.size(), 0);
    std::vector<uint32_t> on_path(keys.size(), 0);
    walk(
        cct,
        [&](NodeId id) {
            const uint32_t key = keys.of(cct, id);
            self[key] += self_of(cct.node(id), counter);
            // Only the outermost frame of a method on the path adds its subtree: the inner ones'
            // samples are already in it.
            if (on_path[key]++ == 0) total[key] += total_of(cct.node(id), counter);
        },
        [&](NodeId id) { --on_path[keys.of(cct, id)]; });
    std::vector<MethodTotal> out;
    for (uint32_t k = 0; k < keys.size(); ++k) {
        if (keys.method[k] && total[k] > 0) out.push_back({keys.names[k], self[k], total[k]});
    }
    std::sort(out.begin(), out.end(), [](const MethodTotal& x, const MethodTotal& y) {
        return x.total != y.total ? x.total > y.total : x.name < y.name;
    });
    return out;
}

std::vector<std::string> find_methods(const Cct& cct, std::string_view query, const ContextOptions& options) {
    const FrameKeys keys(cct, options);
    std::vector<std::string> contains;
    for (uint32_t k = 0; k < keys.size(); ++k) {
        if (!keys.method[k]) continue;
        if (keys.names[k] == query) return {keys.names[k]};
        if (keys.names[k].find(query) != std::string::npos) contains.push_back(keys.names[k]);
    }
    std::sort(contains.begin(), contains.end());
    return contains;
}

Result<MethodProfile> method_profile(const Cct& cct, std::string_view name, const ContextOptions& options,
                                     Counter counter) {
    const FrameKeys keys(cct, options);
    uint32_t target = kNoKey;
    for (uint32_t k = 0; k < keys.size(); ++k) {
        if (keys.method[k] && keys.names[k] == name) target = k;
    }
    if (target == kNoKey) {
        return make_error(Errc::kInvalidArgument, fmt::format("no method named {} in the profile", name),
                          "give the name as the method table shows it, e.g. java/lang/String.indexOf");
    }
    MethodProfile profile;
    profile.name = std::string(name);
    std::vector<uint64_t> caller_totals(keys.size(), 0), callee_totals(keys.size(), 0);
    std::vector<uint32_t> callers_on_path(keys.size(), 0), callees_on_path(keys.size(), 0);
    uint32_t target_on_path = 0;
    auto caller_key = [&](NodeId id) { return keys.of(cct, caller_node(cct, id, options)); };
    walk(
        cct,
        [&](NodeId id) {
            if (id == kRootNode) return;   // the root is no call
            const uint32_t key = keys.of(cct, id);
            const uint32_t caller = caller_key(id);
            const Node& n = cct.node(id);
            if (key == target) {
                profile.self += self_of(n, counter);
                if (target_on_path++ == 0) profile.total += total_of(n, counter);
                profile.contexts.push_back({id, self_of(n, counter), total_of(n, counter)});
                if (callers_on_path[caller]++ == 0) caller_totals[caller] += total_of(n, counter);
            }
            if (caller == target && keys.method[key] && callees_on_path[key]++ == 0) {
                callee_totals[key] += total_of(n, counter);
            }
        },
        [&](NodeId id) {
            if (id == kRootNode) return;
            const uint32_t key = keys.of(cct, id);
            const uint32_t caller = caller_key(id);
            if (key == target) {
                --target_on_path;
                --callers_on_path[caller];
            }
            if (caller == target && keys.method[key]) --callees_on_path[key];
        });
    profile.callers = sorted_by_total(keys, caller_totals);
    profile.callees = sorted_by_total(keys, callee_totals);
    std::sort(profile.contexts.begin(), profile.contexts.end(), [](const MethodContext& x, const MethodContext& y) {
        return x.total != y.total ? x.total > y.total : x.node < y.node;
    });
    return profile;
}

std::vector<WeightedName> callers_of(const Cct& cct, std::string_view name, const ContextOptions& options) {
    auto profile = method_profile(cct, name, options);
    return profile.ok() ? profile->callers : std::vector<WeightedName>{};
}

std::vector<WeightedName> callees_of(const Cct& cct, std::string_view name, const ContextOptions& options) {
    auto profile = method_profile(cct, name, options);
    return profile.ok() ? profile->callees : std::vector<WeightedName>{};
}

std::vector<HotPath> hottest_paths(const Cct& cct, size_t count, Counter counter) {
    std::vector<HotPath> paths;
    for (NodeId id = 1; id < cct.node_count(); ++id) {
        if (uint64_t self = self_of(cct.node(id), counter); self > 0) paths.push_back({id, self});
    }
    const size_t kept = std::min(count, paths.size());
    std::partial_sort(paths.begin(), paths.begin() + static_cast<ptrdiff_t>(kept), paths.end(),
                      [](const HotPath& x, const HotPath& y) { return x.self != y.self ? x.self > y.self : x.node < y.node; });
    paths.resize(kept);
    return paths;
}

Result<std::vector<NodeId>> trace_of(const Cct& cct, uint64_t id) {
    if (id >= cct.node_count()) {
        return make_error(Errc::kInvalidArgument,
                          fmt::format("node id {} is not in the profile (ids 0 to {})", id, cct.node_count() - 1),
                          "ids are the \"id\" members of the CCT json, or those query lists");
    }
    return cct.path(static_cast<NodeId>(id));
}

Result<Cct> read_profile_for_analysis(const std::string& path) {
    if (auto format = format_for_path(path); format.ok()) return read_profile(path);
    std::ifstream in(path, std::ios::binary);
    if (!in) return sys_error(Errc::kIo, errno, fmt::format("cannot open {}", path));
    in >> std::ws;
    const bool json = in.peek() == '{';
    auto cct = json ? read_json(in) : read_collapsed(in);
    if (!cct.ok()) {
        Error e = std::move(cct).take_error();
        e.message = path + ": " + e.message;
        return e;
    }
    return cct;
}

}  // namespace sf::profile
