#include <algorithm>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "stackfrag/profile/export.hpp"
#include "text_util.hpp"

namespace sf::profile {
namespace {

constexpr std::string_view kFormatName = "stackfrag-cct";
constexpr int kFormatVersion = 1;

// A frame's members (name, type, signature, file, first_line), quoted once per frame rather than
// once per node that has it; `cache` holds them by FrameId, empty until first needed.
const std::string& frame_fields(const Cct& cct, FrameId frame, std::vector<std::string>& cache) {
    std::string& out = cache[frame];
    if (!out.empty()) return out;
    const FrameDesc& f = cct.frame(frame);
    out.append(",\"name\":");
    append_quoted(out, f.name);
    fmt::format_to(std::back_inserter(out), ",\"type\":\"{}\"", frame_type_name(f.type));
    if (!f.signature.empty()) {
        out.append(",\"signature\":");
        append_quoted(out, f.signature);
    }
    if (!f.source_file.empty()) {
        out.append(",\"file\":");
        append_quoted(out, f.source_file);
    }
    if (f.first_line != 0) fmt::format_to(std::back_inserter(out), ",\"first_line\":{}", f.first_line);
    return out;
}

void append_node_fields(std::string& out, const Cct& cct, NodeId id, std::vector<std::string>& frame_cache) {
    const Node& n = cct.node(id);
    fmt::format_to(std::back_inserter(out), "{{\"id\":{}", id);
    out.append(frame_fields(cct, n.frame, frame_cache));
    if (n.call_bci >= 0) fmt::format_to(std::back_inserter(out), ",\"call_bci\":{}", n.call_bci);
    if (n.call_line != 0) fmt::format_to(std::back_inserter(out), ",\"call_line\":{}", n.call_line);
    fmt::format_to(std::back_inserter(out), ",\"self\":{},\"total\":{}", n.self_samples, n.total_samples);
    if (n.total_weight != 0) {
        fmt::format_to(std::back_inserter(out), ",\"self_weight\":{},\"total_weight\":{}", n.self_weight,
                       n.total_weight);
    }
}

}  // namespace

Status write_json(const Cct& cct, std::ostream& out) {
    std::string buffer;
    auto drain = [&](bool force) {
        if (force || buffer.size() > (1u << 16)) {
            out.write(buffer.data(), static_cast<std::streamsize>(buffer.size()));
            buffer.clear();
        }
    };
    const ProfileInfo& info = cct.info();
    fmt::format_to(std::back_inserter(buffer), "{{\"format\":\"{}\",\"version\":{},\"info\":{{\"title\":", kFormatName,
                   kFormatVersion);
    append_quoted(buffer, info.title);
    fmt::format_to(std::back_inserter(buffer), ",\"period_ns\":{},\"start_unix_ns\":{},\"duration_ns\":{},\"lost_samples\":{}}}",
                   info.period_ns, info.start_unix_ns, info.duration_ns, info.lost_samples);
    const TraceCounts& counts = cct.trace_counts();
    fmt::format_to(std::back_inserter(buffer), ",\n\"traces\":{{\"added\":{},\"incomplete\":{},\"failed\":{},\"failed_by_reason\":{{",
                   counts.added, counts.incomplete, counts.failed);
    bool first_reason = true;
    for (size_t r = 0; r < counts.failed_by_reason.size(); ++r) {
        if (counts.failed_by_reason[r] == 0) continue;
        fmt::format_to(std::back_inserter(buffer), "{}\"{}\":{}", first_reason ? "" : ",",
                       fail_reason_name(static_cast<FailReason>(r)), counts.failed_by_reason[r]);
        first_reason = false;
    }
    buffer.append("}},\n\"root\":");

    // Depth-first with an explicit stack of (node, index of the next child to write), so deep
    // trees need no deep recursion.
    std::vector<std::pair<NodeId, size_t>> open{{kRootNode, 0}};
    std::vector<std::string> frame_cache(cct.frame_count());
    append_node_fields(buffer, cct, kRootNode, frame_cache);
    while (!open.empty()) {
        auto& [id, next] = open.back();
        const std::span<const NodeId> kids = cct.children(id);
        if (kids.empty()) {
            buffer.push_back('}');
            open.pop_back();
            continue;
        }
        if (next == kids.size()) {
            buffer.append("]}");
            open.pop_back();
            continue;
        }
        buffer.append(next == 0 ? ",\"children\":[\n" : ",\n");
        NodeId c = kids[next++];
        append_node_fields(buffer, cct, c, frame_cache);
        open.emplace_back(c, 0);
        drain(false);
    }
    buffer.append("}\n");
    drain(true);
    out.flush();
    if (!out) return make_error(Errc::kIo, "writing the CCT json failed");
    return {};
}

namespace {

using nlohmann::json;

Error corrupt(std::string what) {
    return make_error(Errc::kCorrupt, "CCT json: " + std::move(what), "was it written by stackfrag (write_json)?");
}

// The member as an unsigned number, `fallback` when absent; false when present with another type.
bool get_u64(const json& object, const char* key, uint64_t& value, uint64_t fallback = 0) {
    auto it = object.find(key);
    if (it == object.end()) {
        value = fallback;
        return true;
    }
    if (!it->is_number_unsigned()) return false;
    value = it->get<uint64_t>();
    return true;
}

bool get_i32(const json& object, const char* key, int32_t& value, int32_t fallback) {
    auto it = object.find(key);
    if (it == object.end()) {
        value = fallback;
        return true;
    }
    if (!it->is_number_integer()) return false;
    int64_t v = it->get<int64_t>();
    if (v < INT32_MIN || v > INT32_MAX) return false;
    value = static_cast<int32_t>(v);
    return true;
}

bool get_string(const json& object, const char* key, std::string& value) {
    auto it = object.find(key);
    if (it == object.end()) {
        value.clear();
        return true;
    }
    if (!it->is_string()) return false;
    value = it->get<std::string>();
    return true;
}

struct NodeRecord {
    uint64_t id = 0;
    uint64_t parent = 0;
    FrameDesc frame;
    int32_t call_bci = -1;
    int32_t call_line = 0;
    uint64_t self = 0;
    uint64_t total = 0;
    uint64_t self_weight = 0;
    uint64_t total_weight = 0;
};

Result<NodeRecord> parse_node(const json& node, uint64_t parent) {
    NodeRecord r;
    r.parent = parent;
    std::string type;
    if (!node.is_object()) return corrupt("a node is not an object");
    if (!node.contains("id") || !get_u64(node, "id", r.id)) return corrupt("a node has no numeric id");
    if (!get_string(node, "name", r.frame.name) || !get_string(node, "type", type) ||
        !get_string(node, "signature", r.frame.signature) || !get_string(node, "file", r.frame.source_file) ||
        !get_i32(node, "first_line", r.frame.first_line, 0) || !get_i32(node, "call_bci", r.call_bci, -1) ||
        !get_i32(node, "call_line", r.call_line, 0) || !get_u64(node, "self", r.self) ||
        !get_u64(node, "total", r.total) || !get_u64(node, "self_weight", r.self_weight) ||
        !get_u64(node, "total_weight", r.total_weight)) {
        return corrupt(fmt::format("node {} has a member of the wrong type", r.id));
    }
    auto parsed_type = frame_type_from_name(type);
    if (!parsed_type) return corrupt(fmt::format("node {} has unknown type '{}'", r.id, type));
    r.frame.type = *parsed_type;
    return r;
}

}  // namespace

Result<Cct> read_json(std::istream& in) {
    json doc = json::parse(in, nullptr, /*allow_exceptions=*/false);
    if (doc.is_discarded()) return corrupt("not valid json");
    auto format = doc.is_object() ? doc.find("format") : doc.end();
    if (!doc.is_object() || format == doc.end() || !format->is_string() || format->get<std::string>() != kFormatName) {
        return corrupt(fmt::format("no \"format\": \"{}\" member", kFormatName));
    }
    auto version = doc.find("version");
    if (version == doc.end() || !version->is_number_integer() || version->get<int64_t>() != kFormatVersion) {
        return make_error(Errc::kUnsupported, fmt::format("CCT json: only version {} is known", kFormatVersion));
    }

    Cct cct;
    if (auto info = doc.find("info"); info != doc.end() && info->is_object()) {
        ProfileInfo& pi = cct.info();
        if (!get_string(*info, "title", pi.title) || !get_u64(*info, "period_ns", pi.period_ns) ||
            !get_u64(*info, "start_unix_ns", pi.start_unix_ns) || !get_u64(*info, "duration_ns", pi.duration_ns) ||
            !get_u64(*info, "lost_samples", pi.lost_samples)) {
            return corrupt("\"info\" has a member of the wrong type");
        }
    }
    if (auto traces = doc.find("traces"); traces != doc.end() && traces->is_object()) {
        TraceCounts& tc = cct.mutable_trace_counts();
        if (!get_u64(*traces, "added", tc.added) || !get_u64(*traces, "incomplete", tc.incomplete) ||
            !get_u64(*traces, "failed", tc.failed)) {
            return corrupt("\"traces\" has a member of the wrong type");
        }
        if (auto reasons = traces->find("failed_by_reason"); reasons != traces->end() && reasons->is_object()) {
            for (size_t r = 0; r < tc.failed_by_reason.size(); ++r) {
                if (!get_u64(*reasons, fail_reason_name(static_cast<FailReason>(r)), tc.failed_by_reason[r])) {
                    return corrupt("\"failed_by_reason\" has a count of the wrong type");
                }
            }
        }
    }
    auto root = doc.find("root");
    if (root == doc.end()) return corrupt("no \"root\" node");

    std::vector<NodeRecord> records;
    std::vector<std::pair<const json*, uint64_t>> pending{{&*root, 0}};
    while (!pending.empty()) {
        auto [node, parent] = pending.back();
        pending.pop_back();
        auto record = parse_node(*node, parent);
        if (!record.ok()) return std::move(record).take_error();
        uint64_t id = record->id;
        records.push_back(std::move(record).value());
        if (auto children = node->find("children"); children != node->end()) {
            if (!children->is_array()) return corrupt(fmt::format("node {}: \"children\" is not an array", id));
            for (const json& c : *children) pending.emplace_back(&c, id);
        }
    }
    std::sort(records.begin(), records.end(), [](const NodeRecord& a, const NodeRecord& b) { return a.id < b.id; });
    if (records[0].id != kRootNode || records[0].frame.type != FrameType::kRoot) {
        return corrupt("the root node is not node 0 of type root");
    }
    for (size_t i = 1; i < records.size(); ++i) {
        const NodeRecord& r = records[i];
        // Ids are creation order, so 0..N-1 with every parent before its children; recreating in
        // id order then gives every node its old id.
        if (r.id != i) return corrupt(fmt::format("node ids are not 0..{} without gaps (found {})", records.size() - 1, r.id));
        if (r.parent >= r.id) return corrupt(fmt::format("node {} has an id below its parent's", r.id));
        if (r.frame.type == FrameType::kRoot) return corrupt(fmt::format("node {} has type root", r.id));
        NodeId made = cct.child_or_create(static_cast<NodeId>(r.parent), cct.intern_frame(r.frame), r.call_bci,
                                          r.call_line);
        if (made != r.id) return corrupt(fmt::format("node {} repeats a sibling's frame and call site", r.id));
    }
    for (const NodeRecord& r : records) {
        if (r.self != 0 || r.self_weight != 0) cct.add_samples(static_cast<NodeId>(r.id), r.self, r.self_weight);
    }
    for (const NodeRecord& r : records) {
        const Node& n = cct.node(static_cast<NodeId>(r.id));
        if (n.total_samples != r.total || n.total_weight != r.total_weight) {
            return corrupt(fmt::format("node {}: total {} is not the sum of the self counts below it ({})", r.id,
                                       r.total, n.total_samples));
        }
    }
    return cct;
}

}  // namespace sf::profile
