#include <algorithm>
#include <charconv>
#include <string_view>
#include <unordered_map>
#include <utility>

#include <fmt/format.h>

#include "stackfrag/profile/export.hpp"

namespace sf::profile {

std::string collapsed_frame_name(const FrameDesc& frame) {
    switch (frame.type) {
        case FrameType::kCompiled:
        case FrameType::kNativeWrapper: return frame.name + "_[j]";
        case FrameType::kInlined: return frame.name + "_[i]";
        case FrameType::kInterpreted: return frame.name + "_[0]";
        default: return frame.name;
    }
}

namespace {

uint64_t self_count(const Node& n, Counter counter) {
    return counter == Counter::kSamples ? n.self_samples : n.self_weight;
}

// Appends "STACK COUNT\n" and hands the buffer to the stream when it is large.
void append_line(std::string& buffer, std::string_view stack, uint64_t count, std::ostream& out) {
    buffer.append(stack);
    buffer.push_back(' ');
    fmt::format_to(std::back_inserter(buffer), "{}\n", count);
    if (buffer.size() > (1u << 16)) {
        out.write(buffer.data(), static_cast<std::streamsize>(buffer.size()));
        buffer.clear();
    }
}

// The reference order: every line's full text built, sorted, equal texts merged.
void write_sorted_lines(const Cct& cct, const std::vector<std::string>& names, Counter counter, std::string& buffer,
                        std::ostream& out) {
    std::vector<std::pair<std::string, uint64_t>> lines;
    std::string stack;
    // (node, length of the parent's stack text): the text is cut back to the parent's prefix
    // whenever the depth-first walk moves to a sibling.
    std::vector<std::pair<NodeId, size_t>> pending;
    const std::span<const NodeId> top = cct.children(kRootNode);
    for (auto it = top.rbegin(); it != top.rend(); ++it) pending.emplace_back(*it, 0);
    while (!pending.empty()) {
        auto [id, prefix] = pending.back();
        pending.pop_back();
        const Node& n = cct.node(id);
        stack.resize(prefix);
        if (prefix > 0) stack.push_back(';');
        stack.append(names[n.frame]);
        if (uint64_t count = self_count(n, counter); count > 0) lines.emplace_back(stack, count);
        const std::span<const NodeId> kids = cct.children(id);
        for (auto c = kids.rbegin(); c != kids.rend(); ++c) pending.emplace_back(*c, stack.size());
    }
    std::sort(lines.begin(), lines.end());
    for (size_t i = 0; i < lines.size();) {
        uint64_t count = 0;
        size_t j = i;
        for (; j < lines.size() && lines[j].first == lines[i].first; ++j) count += lines[j].second;
        append_line(buffer, lines[i].first, count, out);
        i = j;
    }
}

// The same lines in the same byte order without building or comparing whole lines: a depth-first
// walk over the tree of name texts (siblings with equal texts merged, as their lines would be).
// Under one prefix S, a child named c has its own line "S;c" and the block of lines "S;c;...";
// sorting the keys "c" and "c;" of all children orders them exactly as the full lines sort,
// because no name holds ';' (a name "c!" sorts between "c" and "c;..."). Only valid when no
// name is empty or contains ';' (the caller checks).
void write_ordered_walk(const Cct& cct, const std::vector<std::string>& names, Counter counter, std::string& buffer,
                        std::ostream& out) {
    // One id per distinct text; each text's two keys ranked once, by byte order.
    std::unordered_map<std::string_view, uint32_t> text_ids;
    std::vector<uint32_t> text_of(names.size());
    std::vector<std::string_view> texts;
    for (size_t f = 0; f < names.size(); ++f) {
        auto [it, added] = text_ids.emplace(names[f], static_cast<uint32_t>(texts.size()));
        if (added) texts.push_back(names[f]);
        text_of[f] = it->second;
    }
    // Key 2t is text t alone (its own line), 2t+1 is "t;" (the block below it).
    std::vector<uint32_t> keys(2 * texts.size());
    for (uint32_t k = 0; k < keys.size(); ++k) keys[k] = k;
    auto key_less = [&](uint32_t a, uint32_t b) {
        std::string_view ta = texts[a / 2], tb = texts[b / 2];
        const size_t common = std::min(ta.size(), tb.size());
        if (int c = std::char_traits<char>::compare(ta.data(), tb.data(), common); c != 0) return c < 0;
        // One text is a prefix of the other (or they are equal): the next byte is the end (own
        // line, below every byte), ';' (block), or the longer text's byte.
        auto next = [](std::string_view t, uint32_t key, size_t at) -> int {
            if (at < t.size()) return static_cast<unsigned char>(t[at]);
            return key % 2 == 0 ? -1 : ';';
        };
        const int na = next(ta, a, common), nb = next(tb, b, common);
        if (na != nb) return na < nb;
        return false;   // beyond: ';' in a name, excluded by the caller
    };
    std::sort(keys.begin(), keys.end(), key_less);
    std::vector<uint32_t> rank(keys.size());
    for (uint32_t r = 0; r < keys.size(); ++r) rank[keys[r]] = r;

    // A step: one rank's key over a group of tree nodes sharing the same name path (a range of
    // `pool`), and the length of the parent's text.
    struct Step {
        uint32_t key;
        uint32_t begin, end;
        size_t prefix;
    };
    // Every node enters the pool once, as its parent's child: reserved whole, it never moves.
    std::vector<NodeId> pool;
    pool.reserve(cct.node_count());
    std::vector<Step> pending;
    std::vector<std::pair<uint32_t, NodeId>> children;   // (text, node)
    std::vector<Step> level;
    std::string stack;
    auto push_children = [&](const NodeId* group, size_t group_size, size_t prefix) {
        children.clear();
        for (size_t g = 0; g < group_size; ++g) {
            for (NodeId c : cct.children(group[g])) children.emplace_back(text_of[cct.node(c).frame], c);
        }
        // Grouped by text; the order inside a group does not reach the output (its counts are
        // summed and its children sorted again one level down).
        if (children.size() > 1) std::sort(children.begin(), children.end());
        level.clear();
        for (size_t i = 0; i < children.size();) {
            const uint32_t text = children[i].first;
            const auto begin = static_cast<uint32_t>(pool.size());
            for (; i < children.size() && children[i].first == text; ++i) pool.push_back(children[i].second);
            const auto end = static_cast<uint32_t>(pool.size());
            level.push_back(Step{2 * text, begin, end, prefix});
            level.push_back(Step{2 * text + 1, begin, end, prefix});
        }
        // One text alone is already in order: "t" sorts before "t;".
        if (level.size() > 2) {
            std::sort(level.begin(), level.end(), [&](const Step& a, const Step& b) { return rank[a.key] < rank[b.key]; });
        }
        pending.insert(pending.end(), level.rbegin(), level.rend());
    };
    const NodeId root = kRootNode;
    push_children(&root, 1, 0);
    while (!pending.empty()) {
        const Step step = pending.back();
        pending.pop_back();
        stack.resize(step.prefix);
        if (step.prefix > 0) stack.push_back(';');
        stack.append(texts[step.key / 2]);
        if (step.key % 2 == 0) {
            uint64_t count = 0;
            for (uint32_t g = step.begin; g < step.end; ++g) count += self_count(cct.node(pool[g]), counter);
            if (count > 0) append_line(buffer, stack, count, out);
        } else {
            push_children(pool.data() + step.begin, step.end - step.begin, stack.size());
        }
    }
}

}  // namespace

Status write_collapsed(const Cct& cct, std::ostream& out, Counter counter, CollapsedOrder order) {
    std::vector<std::string> names(cct.frame_count());
    bool walkable = true;
    for (FrameId f = 0; f < cct.frame_count(); ++f) {
        names[f] = collapsed_frame_name(cct.frame(f));
        if (f != kRootFrame && (names[f].empty() || names[f].find(';') != std::string::npos)) walkable = false;
    }
    std::string buffer;
    if (walkable && order == CollapsedOrder::kAuto) {
        write_ordered_walk(cct, names, counter, buffer, out);
    } else {
        write_sorted_lines(cct, names, counter, buffer, out);
    }
    out.write(buffer.data(), static_cast<std::streamsize>(buffer.size()));
    out.flush();
    if (!out) return make_error(Errc::kIo, "writing collapsed stacks failed");
    return {};
}

namespace {

bool ends_with(std::string_view text, std::string_view suffix) {
    return text.size() >= suffix.size() && text.substr(text.size() - suffix.size()) == suffix;
}

FrameDesc parse_collapsed_frame(std::string_view text, bool first) {
    FrameDesc desc;
    struct Suffix {
        std::string_view text;
        FrameType type;
    };
    static constexpr Suffix kSuffixes[] = {
        {"_[j]", FrameType::kCompiled},
        {"_[1]", FrameType::kCompiled},   // async-profiler's C1 marker
        {"_[i]", FrameType::kInlined},
        {"_[0]", FrameType::kInterpreted},
    };
    for (const auto& s : kSuffixes) {
        if (ends_with(text, s.text) && text.size() > s.text.size()) {
            desc.type = s.type;
            desc.name = std::string(text.substr(0, text.size() - s.text.size()));
            return desc;
        }
    }
    desc.name = std::string(text);
    bool bracketed = text.size() >= 2 && text.front() == '[' && text.back() == ']';
    if (bracketed && text == kTruncatedFrameName) {
        desc.type = FrameType::kTruncated;
    } else if (bracketed && failed_frame_reason(text)) {
        desc.type = FrameType::kFailed;
    } else if (bracketed && first && (text.starts_with("[tid=") || text.find(" tid=") != std::string_view::npos)) {
        desc.type = FrameType::kThread;
    } else {
        desc.type = FrameType::kNative;
    }
    return desc;
}

}  // namespace

Result<Cct> read_collapsed(std::istream& in) {
    Cct cct;
    std::string line;
    uint64_t line_number = 0;
    while (std::getline(in, line)) {
        ++line_number;
        if (!line.empty() && line.back() == '\r') line.pop_back();
        if (line.empty() || line[0] == '#') continue;
        size_t space = line.rfind(' ');
        uint64_t count = 0;
        const char* number_end = line.data() + line.size();
        auto parsed = space == std::string::npos
                          ? std::from_chars_result{line.data(), std::errc::invalid_argument}
                          : std::from_chars(line.data() + space + 1, number_end, count);
        if (space == 0 || parsed.ec != std::errc{} || parsed.ptr != number_end) {
            return make_error(Errc::kCorrupt, fmt::format("collapsed stacks line {}: expected 'frame;frame;... COUNT'",
                                                          line_number));
        }
        std::string_view stack(line.data(), space);
        NodeId at = kRootNode;
        bool first = true;
        bool truncated = false;
        std::optional<FailReason> failed;
        while (!stack.empty()) {
            size_t end = stack.find(';');
            std::string_view text = stack.substr(0, end);
            if (!text.empty()) {
                FrameDesc desc = parse_collapsed_frame(text, first);
                truncated = truncated || desc.type == FrameType::kTruncated;
                if (desc.type == FrameType::kFailed) failed = failed_frame_reason(desc.name);
                at = cct.child_or_create(at, cct.intern_frame(desc), -1, 0);
                first = false;
            }
            if (end == std::string_view::npos) break;
            stack.remove_prefix(end + 1);
        }
        if (at == kRootNode) {
            return make_error(Errc::kCorrupt, fmt::format("collapsed stacks line {}: no frames", line_number));
        }
        cct.add_samples(at, count, 0);
        TraceCounts& counts = cct.mutable_trace_counts();
        if (failed) {
            counts.failed += count;
            counts.failed_by_reason[static_cast<size_t>(*failed)] += count;
        } else {
            counts.added += count;
            if (truncated) counts.incomplete += count;
        }
    }
    if (in.bad()) return make_error(Errc::kIo, "reading collapsed stacks failed");
    return cct;
}

}  // namespace sf::profile
