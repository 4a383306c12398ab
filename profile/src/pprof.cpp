#include <cstdint>
#include <unordered_map>

#include <fmt/format.h>
#include <protozero/pbf_writer.hpp>
#include <zlib.h>

#include "stackfrag/profile/export.hpp"

namespace sf::profile {
namespace {

// Field numbers of perftools.profiles.Profile (github.com/google/pprof proto/profile.proto).
namespace pb {
enum Profile : protozero::pbf_tag_type {
    kSampleType = 1, kSample = 2, kLocation = 4, kFunction = 5, kStringTable = 6,
    kTimeNanos = 9, kDurationNanos = 10, kPeriodType = 11, kPeriod = 12, kComment = 13,
    kDefaultSampleType = 14,
};
enum ValueType : protozero::pbf_tag_type { kType = 1, kUnit = 2 };
enum Sample : protozero::pbf_tag_type { kLocationId = 1, kValue = 2, kLabel = 3 };
enum Label : protozero::pbf_tag_type { kKey = 1, kStr = 2 };
enum Location : protozero::pbf_tag_type { kLocId = 1, kLine = 4 };
enum Line : protozero::pbf_tag_type { kFunctionId = 1, kLineNumber = 2 };
enum Function : protozero::pbf_tag_type { kFuncId = 1, kName = 2, kSystemName = 3, kFilename = 4, kStartLine = 5 };
}  // namespace pb

class StringTable {
public:
    StringTable() { index(""); }   // string_table[0] must be ""
    int64_t index(const std::string& s) {
        auto [it, inserted] = ids_.try_emplace(s, static_cast<int64_t>(strings_.size()));
        if (inserted) strings_.push_back(s);
        return it->second;
    }
    const std::vector<std::string>& strings() const { return strings_; }

private:
    std::unordered_map<std::string, int64_t> ids_;
    std::vector<std::string> strings_;
};

// pprof wants a path; the class file only names the file, so the package supplies the directory
// ("java/lang/String.indexOf" + "String.java" -> "java/lang/String.java").
std::string java_source_path(const FrameDesc& f) {
    if (f.source_file.empty()) return {};
    size_t dot = f.name.rfind('.');
    std::string_view class_name = std::string_view(f.name).substr(0, dot == std::string::npos ? 0 : dot);
    size_t slash = class_name.rfind('/');
    if (slash == std::string_view::npos) return f.source_file;
    return std::string(class_name.substr(0, slash + 1)) + f.source_file;
}

Result<std::string> gzip(const std::string& data) {
    z_stream z{};
    // windowBits 15 + 16 asks zlib for a gzip header and trailer instead of a zlib one.
    if (deflateInit2(&z, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK) {
        return make_error(Errc::kInternal, "zlib deflateInit2 failed");
    }
    std::string out(deflateBound(&z, data.size()) + 32, '\0');
    z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
    z.avail_in = static_cast<uInt>(data.size());
    z.next_out = reinterpret_cast<Bytef*>(out.data());
    z.avail_out = static_cast<uInt>(out.size());
    int rc = deflate(&z, Z_FINISH);
    size_t produced = z.total_out;
    deflateEnd(&z);
    if (rc != Z_STREAM_END) return make_error(Errc::kInternal, "zlib deflate did not finish");
    out.resize(produced);
    return out;
}

}  // namespace

Status write_pprof(const Cct& cct, std::ostream& out) {
    StringTable strings;
    std::string body;
    protozero::pbf_writer profile(body);

    const bool has_weight = cct.total_weight() > 0;
    const uint64_t period = cct.info().period_ns;
    const bool has_cpu = has_weight || period > 0;
    auto value_type = [&](protozero::pbf_tag_type tag, const char* type, const char* unit) {
        protozero::pbf_writer vt(profile, tag);
        vt.add_int64(pb::kType, strings.index(type));
        vt.add_int64(pb::kUnit, strings.index(unit));
    };
    value_type(pb::kSampleType, "samples", "count");
    if (has_cpu) value_type(pb::kSampleType, "cpu", "nanoseconds");

    // Functions per frame and locations per (function, line), numbered 1..N in order of first use.
    std::vector<uint64_t> function_of_frame(cct.frame_count(), 0);
    std::vector<FrameId> functions;
    struct PairHash {
        size_t operator()(const std::pair<uint64_t, int64_t>& p) const {
            return std::hash<uint64_t>()(p.first * 0x9E3779B97F4A7C15ull ^ static_cast<uint64_t>(p.second));
        }
    };
    std::unordered_map<std::pair<uint64_t, int64_t>, uint64_t, PairHash> location_ids;
    std::vector<std::pair<uint64_t, int64_t>> locations;
    auto location_for = [&](const Node& node, int64_t line) {
        uint64_t& fn = function_of_frame[node.frame];
        if (fn == 0) {
            functions.push_back(node.frame);
            fn = functions.size();
        }
        auto [it, inserted] = location_ids.try_emplace({fn, line}, locations.size() + 1);
        if (inserted) locations.emplace_back(fn, line);
        return it->second;
    };

    // Samples: one per node with self samples, its stack leaf first. A frame's line is where it
    // was when the sample hit: the call site of the next frame towards the leaf (unknown, 0, for
    // the leaf itself, whose own bci the tree does not keep).
    std::vector<NodeId> stack;
    std::vector<uint64_t> location_stack;
    // The location of a node's parent frame at the node's call line, found once: every later
    // sample through the node reuses the id the lookup would give again, so ids are still
    // numbered in order of first use. (A leaf is one sample's, looked up once anyway.)
    // A thread frame has no location: marked so, it is not looked at again either.
    std::vector<uint32_t> caller_location(cct.node_count(), 0);
    constexpr uint32_t kThreadFrame = UINT32_MAX;
    int64_t thread_label = strings.index("thread");
    std::vector<std::pair<NodeId, size_t>> pending{{kRootNode, 0}};
    while (!pending.empty()) {
        auto [id, depth] = pending.back();
        pending.pop_back();
        stack.resize(depth);
        stack.push_back(id);
        const Node& n = cct.node(id);
        const std::span<const NodeId> kids = cct.children(id);
        for (auto c = kids.rbegin(); c != kids.rend(); ++c) pending.emplace_back(*c, depth + 1);
        if ((n.self_samples == 0 && n.self_weight == 0) || id == kRootNode) continue;

        location_stack.clear();
        const std::string* thread_name = nullptr;
        for (size_t k = stack.size(); k-- > 1;) {
            if (k + 1 == stack.size()) {
                const Node& at = cct.node(stack[k]);
                const FrameDesc& f = cct.frame(at.frame);
                if (f.type == FrameType::kThread) {
                    thread_name = &f.name;
                } else {
                    location_stack.push_back(location_for(at, 0));
                }
                continue;
            }
            uint32_t& memo = caller_location[stack[k + 1]];
            if (memo == 0) {
                const Node& at = cct.node(stack[k]);
                memo = cct.frame(at.frame).type == FrameType::kThread
                           ? kThreadFrame
                           : static_cast<uint32_t>(location_for(at, cct.node(stack[k + 1]).call_line));
            }
            if (memo == kThreadFrame) {
                thread_name = &cct.frame_of(stack[k]).name;
                continue;
            }
            location_stack.push_back(memo);
        }
        protozero::pbf_writer sample(profile, pb::kSample);
        sample.add_packed_uint64(pb::kLocationId, location_stack.begin(), location_stack.end());
        std::vector<int64_t> values{static_cast<int64_t>(n.self_samples)};
        if (has_cpu) {
            values.push_back(static_cast<int64_t>(has_weight ? n.self_weight : n.self_samples * period));
        }
        sample.add_packed_int64(pb::kValue, values.begin(), values.end());
        if (thread_name != nullptr && !thread_name->empty()) {
            protozero::pbf_writer label(sample, pb::kLabel);
            label.add_int64(pb::kKey, thread_label);
            label.add_int64(pb::kStr, strings.index(*thread_name));
        }
    }

    for (size_t i = 0; i < locations.size(); ++i) {
        protozero::pbf_writer loc(profile, pb::kLocation);
        loc.add_uint64(pb::kLocId, i + 1);
        protozero::pbf_writer line(loc, pb::kLine);
        line.add_uint64(pb::kFunctionId, locations[i].first);
        if (locations[i].second != 0) line.add_int64(pb::kLineNumber, locations[i].second);
    }
    for (size_t i = 0; i < functions.size(); ++i) {
        const FrameDesc& f = cct.frame(functions[i]);
        protozero::pbf_writer fn(profile, pb::kFunction);
        fn.add_uint64(pb::kFuncId, i + 1);
        fn.add_int64(pb::kName, strings.index(f.name));
        fn.add_int64(pb::kSystemName, strings.index(f.name + f.signature));
        if (is_java(f.type)) {
            std::string path = java_source_path(f);
            if (!path.empty()) fn.add_int64(pb::kFilename, strings.index(path));
            if (f.first_line != 0) fn.add_int64(pb::kStartLine, f.first_line);
        }
    }
    const ProfileInfo& info = cct.info();
    if (info.start_unix_ns != 0) profile.add_int64(pb::kTimeNanos, static_cast<int64_t>(info.start_unix_ns));
    if (info.duration_ns != 0) profile.add_int64(pb::kDurationNanos, static_cast<int64_t>(info.duration_ns));
    if (has_cpu) {
        value_type(pb::kPeriodType, "cpu", "nanoseconds");
        if (period > 0) profile.add_int64(pb::kPeriod, static_cast<int64_t>(period));
        profile.add_int64(pb::kDefaultSampleType, strings.index("cpu"));
    }
    // pprof has no field for samples that never made it; a comment is what `pprof -comments` shows.
    if (info.lost_samples != 0) {
        profile.add_int64(pb::kComment, strings.index(fmt::format("{} samples lost (kernel ring or live queue full)", info.lost_samples)));
    }
    // Last, because every message above may have added strings.
    for (const std::string& s : strings.strings()) profile.add_string(pb::kStringTable, s);

    auto compressed = gzip(body);
    if (!compressed.ok()) return std::move(compressed).take_error();
    out.write(compressed->data(), static_cast<std::streamsize>(compressed->size()));
    out.flush();
    if (!out) return make_error(Errc::kIo, "writing the pprof profile failed");
    return {};
}

}  // namespace sf::profile
