#include "stackfrag/profile/trace_filter.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>

namespace sf::profile {

namespace {

// '/' and '.' are one separator, so internal and dotted class names compare equal.
char separator_as_dot(char c) { return c == '/' ? '.' : c; }

bool same_name(std::string_view a, std::string_view b) {
    if (a.size() != b.size()) return false;
    for (size_t i = 0; i < a.size(); ++i) {
        if (separator_as_dot(a[i]) != separator_as_dot(b[i])) return false;
    }
    return true;
}

// JVMS 4.2.2: unqualified names have no '.', ';', '[' or '/'; method names no '<' or '>' but
// for the two special ones. Whitespace, controls, ',' and '(' ')' cannot be meant either.
bool bad_name_char(char c) {
    const auto u = static_cast<unsigned char>(c);
    return u <= ' ' || u == 0x7f || c == ';' || c == '[' || c == ']' || c == ',' || c == '(' || c == ')' ||
           c == '<' || c == '>';
}

// Java frames are named by their method, the others by their symbol, as Cct::add names them.
bool is_java_kind(FrameKind kind) { return is_java(frame_type_of(kind)); }

}  // namespace

Result<MethodPattern> MethodPattern::parse(std::string_view text) {
    auto bad = [&](std::string_view why) {
        return make_error(Errc::kInvalidArgument, fmt::format("bad method pattern '{}': {}", text, why),
                          "give a method as pkg.Class.method or a class as pkg.Class (nested classes with $)");
    };
    if (text.empty()) return bad("empty");
    size_t name_start = 0;
    for (size_t i = 0; i <= text.size(); ++i) {
        if (i < text.size() && text[i] != '.' && text[i] != '/') continue;
        const std::string_view name = text.substr(name_start, i - name_start);
        if (name.empty()) return bad("a name between separators is empty");
        const bool last = i == text.size();
        const bool special = last && name_start > 0 && (name == "<init>" || name == "<clinit>");
        if (!special) {
            for (char c : name) {
                if (bad_name_char(c)) return bad(fmt::format("'{}' is in no Java class or method name", c));
            }
        }
        name_start = i + 1;
    }
    MethodPattern pattern;
    pattern.text_ = std::string(text);
    const size_t last_slash = text.rfind('/');
    const size_t last_dot = text.rfind('.');
    if (last_dot != std::string_view::npos && (last_slash == std::string_view::npos || last_dot > last_slash)) {
        pattern.method_start_ = last_dot + 1;
        // "a/b/C.d" says where the class ends; "a.b.C.d" does not.
        pattern.may_be_class_ = last_slash == std::string_view::npos;
    }
    const std::string_view last_name = text.substr(pattern.method_start_);
    if ((last_name == "<init>" || last_name == "<clinit>")) pattern.may_be_class_ = false;
    return pattern;
}

bool MethodPattern::matches(std::string_view class_name, std::string_view method_name) const {
    const std::string_view text = text_;
    if (method_start_ > 0 && method_name == text.substr(method_start_) &&
        same_name(class_name, text.substr(0, method_start_ - 1))) {
        return true;
    }
    return may_be_class_ && same_name(class_name, text);
}

bool MethodPattern::matches(const FrameDesc& frame) const {
    if (frame.type == FrameType::kRoot || is_marker(frame.type)) return false;
    const std::string_view name = frame.name;
    const size_t dot = name.rfind('.');
    if (dot == std::string_view::npos || dot == 0) return false;
    return matches(name.substr(0, dot), name.substr(dot + 1));
}

Result<TraceFilter> TraceFilter::parse(std::span<const std::string> focus, std::span<const std::string> exclude) {
    TraceFilter filter;
    auto add = [](std::span<const std::string> texts, const char* option, std::vector<MethodPattern>& into) -> Status {
        for (const std::string& text : texts) {
            if (text.empty()) continue;
            Result<MethodPattern> pattern = MethodPattern::parse(text);
            if (!pattern.ok()) {
                Error e = std::move(pattern).take_error();
                e.message = std::string(option) + ": " + e.message;
                return e;
            }
            into.push_back(std::move(*pattern));
        }
        return {};
    };
    if (Status s = add(focus, "focus", filter.focus_); !s.ok()) return std::move(s).take_error();
    if (Status s = add(exclude, "exclude", filter.exclude_); !s.ok()) return std::move(s).take_error();
    return filter;
}

std::string TraceFilter::describe() const {
    std::string out;
    auto list = [&](const char* option, const std::vector<MethodPattern>& patterns) {
        for (const MethodPattern& p : patterns) out += fmt::format("{}{}={}", out.empty() ? "" : " ", option, p.text());
    };
    list("focus", focus_);
    list("exclude", exclude_);
    return out;
}

uint8_t TraceFilter::method_hits(std::string_view class_name, std::string_view method_name) const {
    uint8_t hits = 0;
    for (const MethodPattern& p : focus_) {
        if (p.matches(class_name, method_name)) hits |= kFocusHit;
    }
    for (const MethodPattern& p : exclude_) {
        if (p.matches(class_name, method_name)) hits |= kExcludeHit;
    }
    return hits;
}

uint8_t TraceFilter::frame_hits(const FrameDesc& frame) const {
    uint8_t hits = 0;
    for (const MethodPattern& p : focus_) {
        if (p.matches(frame)) hits |= kFocusHit;
    }
    for (const MethodPattern& p : exclude_) {
        if (p.matches(frame)) hits |= kExcludeHit;
    }
    return hits;
}

FilterVerdict TraceFilter::verdict(uint8_t stack_hits) const {
    if (stack_hits & kExcludeHit) return FilterVerdict::kExcluded;
    if (!focus_.empty() && !(stack_hits & kFocusHit)) return FilterVerdict::kNotInFocus;
    return FilterVerdict::kKeep;
}

FilterVerdict TraceFilter::judge(const CallTrace& trace, const MethodNames* names) {
    // A failed trace is judged by the frames it kept, like a truncated one: its marker names no method.
    if (empty()) return FilterVerdict::kKeep;
    uint8_t hits = 0;
    for (const Frame& f : trace.frames) {
        if (is_java_kind(f.kind)) {
            auto known = hits_by_method_.find(f.method_id);
            if (known != hits_by_method_.end()) {
                hits |= known->second;
                continue;
            }
            const MethodInfo* info = names != nullptr ? names->find(f.method_id) : nullptr;
            // Not remembered while unknown: the MethodInfo may still arrive (as Cct::add does).
            if (info == nullptr) continue;
            const uint8_t h = method_hits(info->class_name, info->name);
            hits_by_method_.emplace(f.method_id, h);
            hits |= h;
        } else {
            // Native and stub frames by symbol, as the Cct names them.
            const std::string_view symbol = f.symbol.view();
            const size_t dot = symbol.rfind('.');
            if (dot != std::string_view::npos && dot > 0) hits |= method_hits(symbol.substr(0, dot), symbol.substr(dot + 1));
        }
        // The exclude verdict cannot change any more.
        if (hits & kExcludeHit) break;
    }
    return verdict(hits);
}

Cct filter_cct(const Cct& cct, const TraceFilter& filter, FilterCounts* counts) {
    Cct out(nullptr, cct.options());
    out.info() = cct.info();
    TraceCounts& kept_counts = out.mutable_trace_counts();
    const TraceCounts& in_counts = cct.trace_counts();
    // Failures counted but not in the tree (profiles written before failed stacks were kept) cannot be
    // judged and stay counted; those in the tree count as their marker's stacks are kept.
    uint64_t failed_in_tree = 0;
    std::array<uint64_t, static_cast<size_t>(FailReason::kCount)> failed_in_tree_by_reason{};
    for (NodeId id = 0; id < cct.node_count(); ++id) {
        const FrameDesc& frame = cct.frame_of(id);
        if (frame.type != FrameType::kFailed) continue;
        failed_in_tree += cct.node(id).total_samples;
        if (const std::optional<FailReason> why = failed_frame_reason(frame.name)) {
            failed_in_tree_by_reason[static_cast<size_t>(*why)] += cct.node(id).total_samples;
        }
    }
    kept_counts.failed = in_counts.failed - std::min(in_counts.failed, failed_in_tree);
    for (size_t r = 0; r < kept_counts.failed_by_reason.size(); ++r) {
        kept_counts.failed_by_reason[r] =
            in_counts.failed_by_reason[r] - std::min(in_counts.failed_by_reason[r], failed_in_tree_by_reason[r]);
    }

    std::vector<uint8_t> hits_of_frame(cct.frame_count());
    for (FrameId f = 0; f < cct.frame_count(); ++f) hits_of_frame[f] = filter.frame_hits(cct.frame(f));

    // Depth-first with each node's stack hits and whether a "[truncated]" frame is above it; a
    // kept node's path is copied on demand, so only nodes that lead to kept samples appear.
    struct Pending {
        NodeId node;
        uint8_t hits;
        bool truncated;
        std::optional<FailReason> failed;   // under "[failed: reason]"
    };
    std::vector<Pending> pending;
    const std::span<const NodeId> top = cct.children(kRootNode);
    for (auto it = top.rbegin(); it != top.rend(); ++it) pending.push_back({*it, 0, false, std::nullopt});
    std::vector<NodeId> copy_of(cct.node_count(), kRootNode);
    std::vector<bool> copied(cct.node_count(), false);
    copied[kRootNode] = true;
    std::vector<NodeId> uncopied;   // a kept node's ancestors not yet in `out`, innermost first
    while (!pending.empty()) {
        const Pending p = pending.back();
        pending.pop_back();
        const Node& n = cct.node(p.node);
        const uint8_t hits = p.hits | hits_of_frame[n.frame];
        const bool truncated = p.truncated || cct.frame(n.frame).type == FrameType::kTruncated;
        std::optional<FailReason> failed = p.failed;
        if (cct.frame(n.frame).type == FrameType::kFailed) {
            failed = failed_frame_reason(cct.frame(n.frame).name).value_or(FailReason::kNone);
        }
        if (n.self_samples != 0 || n.self_weight != 0) {
            const FilterVerdict v = filter.verdict(hits);
            if (v == FilterVerdict::kKeep) {
                uncopied.clear();
                for (NodeId id = p.node; !copied[id]; id = cct.node(id).parent) uncopied.push_back(id);
                for (auto id = uncopied.rbegin(); id != uncopied.rend(); ++id) {
                    const Node& c = cct.node(*id);
                    copy_of[*id] = out.child_or_create(copy_of[c.parent], out.intern_frame(cct.frame(c.frame)),
                                                       c.call_bci, c.call_line);
                    copied[*id] = true;
                }
                out.add_samples(copy_of[p.node], n.self_samples, n.self_weight);
                if (failed) {
                    kept_counts.failed += n.self_samples;
                    kept_counts.failed_by_reason[static_cast<size_t>(*failed)] += n.self_samples;
                } else {
                    kept_counts.added += n.self_samples;
                    if (truncated) kept_counts.incomplete += n.self_samples;
                }
            } else if (counts != nullptr) {
                (v == FilterVerdict::kExcluded ? counts->excluded : counts->not_in_focus) += n.self_samples;
            }
        }
        const std::span<const NodeId> kids = cct.children(p.node);
        for (auto it = kids.rbegin(); it != kids.rend(); ++it) pending.push_back({*it, hits, truncated, failed});
    }
    return out;
}

std::string filter_sentence(const TraceFilter& filter, uint64_t kept, uint64_t judged, const FilterCounts& counts,
                            std::string_view what) {
    return fmt::format("{}: kept {} of {} {}; dropped {} ({} not in focus, {} excluded)", filter.describe(), kept,
                       judged, what, counts.dropped(), counts.not_in_focus, counts.excluded);
}

}  // namespace sf::profile
