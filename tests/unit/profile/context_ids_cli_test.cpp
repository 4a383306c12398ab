// Calling-context ids: `stackfrag replay REC --ids FILE --cct TREE.json` gives every sample the id
// of its node in TREE, and that id decodes (profile::trace_of, `stackfrag query --id`) back to
// exactly the trace the sample decoded to — checked for every sample of a checked-in recording
// against an independent in-process decode of the same recording.
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "shell.hpp"
#include "stackfrag/decoder/stream_decoder.hpp"
#include "stackfrag/events/recording.hpp"
#include "stackfrag/profile/analysis.hpp"
#include "stackfrag/profile/export.hpp"

using namespace sf;
using namespace sf::profile;

namespace {

constexpr const char* kCli = STACKFRAG_BINARY_DIR "/bin/stackfrag";

sf::test::CommandResult stackfrag(const std::string& arguments) {
    struct stat info{};
    REQUIRE(::stat(kCli, &info) == 0);   // build the stackfrag_cli target first
    return sf::test::run_shell(std::string(kCli) + " " + arguments + " 2>&1");
}

struct DecodedSample {
    uint64_t time_ns = 0;
    uint32_t tid = 0;
    std::string stack;   // the collapsed line of this one sample without its count, or failed:REASON
};

class MapNames final : public MethodNames {
public:
    const CodeMap* map = nullptr;
    const MethodInfo* find(uint64_t id) const override { return map->method_by_id(id); }
};

// Every sample of the recording as its own one-trace profile, written as collapsed stacks.
std::vector<DecodedSample> decode_each_sample(const std::string& path) {
    auto reader = RecordingReader::open(path);
    REQUIRE(reader.ok());
    MapNames names;
    std::vector<DecodedSample> out;
    StreamDecoder stream(StreamDecoderOptions{}, [&](const Event& e, const CallTrace& trace) {
        if (!std::holds_alternative<Sample>(e)) return;
        DecodedSample s{trace.time_ns, trace.tid, {}};
        {   // failed traces too: under their [failed: reason] frame
            Cct one(&names);
            (void)one.add(trace);
            std::ostringstream text;
            REQUIRE(write_collapsed(one, text).ok());
            s.stack = text.str();
            REQUIRE(s.stack.size() > 3);
            REQUIRE(s.stack.substr(s.stack.size() - 3) == " 1\n");
            s.stack.resize(s.stack.size() - 3);
        }
        out.push_back(std::move(s));
    });
    names.map = &stream.code_map();
    while (auto event = (*reader)->next()) stream.consume(std::move(*event));
    stream.flush();
    return out;
}

std::string stack_of(const Cct& cct, const std::vector<NodeId>& path) {
    std::string text;
    for (NodeId n : path) {
        if (!text.empty()) text += ';';
        text += collapsed_frame_name(cct.frame_of(n));
    }
    return text;
}

}  // namespace

TEST_CASE("replay --ids gives each sample the id of its context in --cct, and the id decodes to its trace") {
    const std::string recording = GENERATE(std::string(STACKFRAG_SOURCE_DIR "/tests/data/groundtruth-jdk17-validate.sfr"),
                                           std::string(STACKFRAG_SOURCE_DIR "/tests/data/groundtruth-jdk25-validate.sfr"));
    INFO(recording);
    char dir[] = "/tmp/sf-ids-XXXXXX";
    REQUIRE(::mkdtemp(dir) != nullptr);
    const std::string ids_path = std::string(dir) + "/ids.txt";
    const std::string tree_path = std::string(dir) + "/tree.json";
    auto replay = stackfrag("replay " + recording + " --ids " + ids_path + " --cct " + tree_path);
    INFO(replay.output);
    REQUIRE(replay.exit_code == 0);

    Result<Cct> tree = read_profile(tree_path);
    REQUIRE(tree.ok());
    const std::vector<DecodedSample> expected = decode_each_sample(recording);
    REQUIRE(expected.size() > 100);

    std::ifstream ids(ids_path);
    std::string line;
    size_t index = 0, decoded = 0, failed = 0;
    std::vector<std::pair<NodeId, std::string>> some;   // a few ids for the command-line query
    while (std::getline(ids, line)) {
        REQUIRE(index < expected.size());
        const DecodedSample& want = expected[index++];
        INFO("line " << index << ": " << line);
        std::istringstream fields(line);
        uint64_t time_ns = 0;
        uint32_t tid = 0;
        std::string id;
        REQUIRE(fields >> time_ns >> tid >> id);
        CHECK(time_ns == want.time_ns);
        CHECK(tid == want.tid);
        if (id.starts_with("failed:")) {
            CHECK(id == want.stack);
            ++failed;
            continue;
        }
        REQUIRE(id.find_first_not_of("0123456789") == std::string::npos);
        Result<std::vector<NodeId>> path = trace_of(*tree, std::stoull(id));
        REQUIRE(path.ok());
        CHECK(stack_of(*tree, *path) == want.stack);
        CHECK(tree->node(static_cast<NodeId>(std::stoull(id))).self_samples > 0);
        if (decoded++ % 997 == 0) some.emplace_back(static_cast<NodeId>(std::stoull(id)), want.stack);
    }
    CHECK(index == expected.size());
    CHECK(decoded == tree->total_samples());
    CHECK(decoded + failed == expected.size());

    // The same through `stackfrag query --id`, as a user decodes an id.
    REQUIRE_FALSE(some.empty());
    for (const auto& [id, stack] : some) {
        auto query = stackfrag("query " + tree_path + " --id " + std::to_string(id) + " --json");
        INFO(query.output);
        REQUIRE(query.exit_code == 0);
        const nlohmann::json doc = nlohmann::json::parse(query.output);
        std::string text;
        for (const auto& frame : doc["node"]["trace"]) {
            FrameDesc desc;
            desc.type = *frame_type_from_name(frame["type"].get<std::string>());
            desc.name = frame["name"].get<std::string>();
            if (!text.empty()) text += ';';
            text += collapsed_frame_name(desc);
        }
        CHECK(text == stack);
    }
    std::system((std::string("rm -rf ") + dir).c_str());
}

TEST_CASE("replay --ids marks the samples a filter dropped") {
    char dir[] = "/tmp/sf-ids-XXXXXX";
    REQUIRE(::mkdtemp(dir) != nullptr);
    const std::string base = dir;
    auto replay = stackfrag(std::string("replay " STACKFRAG_SOURCE_DIR "/tests/data/groundtruth-jdk17-validate.sfr") +
                            " --focus groundtruth.SOR --ids " + base + "/ids.txt --cct " + base + "/tree.json");
    INFO(replay.output);
    REQUIRE(replay.exit_code == 0);
    Result<Cct> tree = read_profile(base + "/tree.json");
    REQUIRE(tree.ok());
    std::ifstream ids(base + "/ids.txt");
    std::string line;
    uint64_t kept = 0, filtered = 0;
    while (std::getline(ids, line)) {
        const std::string id = line.substr(line.rfind(' ') + 1);
        if (id == "filtered") {
            ++filtered;
        } else if (!id.starts_with("failed:")) {
            ++kept;
            Result<std::vector<NodeId>> path = trace_of(*tree, std::stoull(id));
            REQUIRE(path.ok());
            // Failed walks are kept whatever their (partial) frames, as the live filter keeps them.
            const std::string stack = stack_of(*tree, *path);
            if (!stack.starts_with("[failed: ")) CHECK(stack.find("groundtruth/SOR.") != std::string::npos);
        }
    }
    CHECK(kept == tree->total_samples());
    CHECK(kept > 0);
    CHECK(filtered > 0);
    auto bad = stackfrag(std::string("replay " STACKFRAG_SOURCE_DIR "/tests/data/groundtruth-jdk17-validate.sfr") +
                         " --ids " + base + "/ids.txt --cct " + base + "/tree.html");
    CHECK(bad.exit_code == 2);
    CHECK(bad.output.find("name it .json") != std::string::npos);
    std::system(("rm -rf " + base).c_str());
}
