#include <algorithm>
#include <charconv>
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

Status write_collapsed(const Cct& cct, std::ostream& out, Counter counter) {
    std::vector<std::string> names(cct.frame_count());
    for (FrameId f = 0; f < cct.frame_count(); ++f) names[f] = collapsed_frame_name(cct.frame(f));

    std::vector<std::pair<std::string, uint64_t>> lines;
    std::string stack;
    // (node, length of the parent's stack text): the text is cut back to the parent's prefix
    // whenever the depth-first walk moves to a sibling.
    std::vector<std::pair<NodeId, size_t>> pending;
    for (auto it = cct.node(kRootNode).children.rbegin(); it != cct.node(kRootNode).children.rend(); ++it) {
        pending.emplace_back(*it, 0);
    }
    while (!pending.empty()) {
        auto [id, prefix] = pending.back();
        pending.pop_back();
        const Node& n = cct.node(id);
        stack.resize(prefix);
        if (prefix > 0) stack.push_back(';');
        stack.append(names[n.frame]);
        uint64_t count = counter == Counter::kSamples ? n.self_samples : n.self_weight;
        if (count > 0) lines.emplace_back(stack, count);
        for (auto c = n.children.rbegin(); c != n.children.rend(); ++c) pending.emplace_back(*c, stack.size());
    }
    std::sort(lines.begin(), lines.end());

    std::string buffer;
    for (size_t i = 0; i < lines.size();) {
        uint64_t count = 0;
        size_t j = i;
        for (; j < lines.size() && lines[j].first == lines[i].first; ++j) count += lines[j].second;
        buffer.append(lines[i].first);
        buffer.push_back(' ');
        fmt::format_to(std::back_inserter(buffer), "{}\n", count);
        if (buffer.size() > (1u << 16)) {
            out.write(buffer.data(), static_cast<std::streamsize>(buffer.size()));
            buffer.clear();
        }
        i = j;
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
