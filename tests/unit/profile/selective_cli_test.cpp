// Selective profiling from the command line, on a checked-in recording: replay and report with
// --focus keep exactly the stacks that contain the method, --exclude the others, and the two
// partition the samples; report gives the same tree from a recording, a CCT json or collapsed stacks.
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "shell.hpp"
#include "stackfrag/profile/export.hpp"
#include "stackfrag/profile/trace_filter.hpp"
#include "test_env.hpp"

using namespace sf;
using namespace sf::profile;

namespace {

constexpr const char* kCli = STACKFRAG_BINARY_DIR "/bin/stackfrag";
constexpr const char* kRecording = STACKFRAG_SOURCE_DIR "/tests/data/groundtruth-jdk17-validate.sfr";

sf::test::CommandResult stackfrag(const std::string& arguments) {
    struct stat info{};
    REQUIRE(::stat(kCli, &info) == 0);   // build the stackfrag_cli target first
    return sf::test::run_shell(std::string(kCli) + " " + arguments + " 2>&1");
}

std::string temp_dir() { return sf::test::temp_dir("select"); }

Cct read(const std::string& path) {
    Result<Cct> cct = read_profile(path);
    INFO(path << ": " << (cct.ok() ? "" : cct.error().describe()));
    REQUIRE(cct.ok());
    return std::move(*cct);
}

std::string collapsed(const Cct& cct) {
    std::ostringstream out;
    REQUIRE(write_collapsed(cct, out).ok());
    return out.str();
}

// Whether every stack with samples does (or does not) have a frame the pattern matches.
bool every_stack_has(const Cct& cct, const MethodPattern& pattern, bool wanted) {
    bool all = true;
    cct.visit([&](NodeId id, const Node& node) {
        if (id == kRootNode || node.self_samples == 0) return;
        bool has = false;
        for (NodeId n : cct.path(id)) has = has || pattern.matches(cct.frame_of(n));
        if (has != wanted) all = false;
    });
    return all;
}

}  // namespace

TEST_CASE("replay --focus keeps the stacks inside a method, --exclude the rest: a partition") {
    // A class (every method of it) and a method in the internal form, of a nested class.
    const std::string pattern_text = GENERATE(std::string("groundtruth.FFT"),
                                              std::string("groundtruth/GroundTruth$Worker.measureSOR"));
    INFO(pattern_text);
    const MethodPattern pattern = *MethodPattern::parse(pattern_text);
    const std::string dir = temp_dir();
    const std::string quoted = "'" + pattern_text + "'";

    auto all = stackfrag(std::string("replay ") + kRecording + " --collapsed " + dir + "/all.collapsed");
    INFO(all.output);
    REQUIRE(all.exit_code == 0);
    auto in = stackfrag(std::string("replay ") + kRecording + " --focus " + quoted + " --collapsed " + dir + "/in.collapsed");
    INFO(in.output);
    REQUIRE(in.exit_code == 0);
    CHECK(in.output.find("filter               focus=" + pattern_text + ": kept ") != std::string::npos);
    auto out = stackfrag(std::string("replay ") + kRecording + " --exclude " + quoted + " --collapsed " + dir + "/out.collapsed");
    INFO(out.output);
    REQUIRE(out.exit_code == 0);

    const Cct whole = read(dir + "/all.collapsed");
    const Cct inside = read(dir + "/in.collapsed");
    const Cct outside = read(dir + "/out.collapsed");
    CHECK(inside.total_samples() > 0);
    CHECK(outside.total_samples() > 0);
    CHECK(every_stack_has(inside, pattern, true));
    CHECK(every_stack_has(outside, pattern, false));
    CHECK(inside.total_samples() + outside.total_samples() == whole.total_samples());
    Cct merged = inside;
    merged.merge(outside);
    CHECK(collapsed(merged) == collapsed(whole));

    // report filters a finished tree; from the recording, its CCT json or its collapsed stacks it
    // must keep what replay kept while decoding.
    auto json = stackfrag(std::string("report ") + kRecording + " -o " + dir + "/all.json");
    REQUIRE(json.exit_code == 0);
    for (const std::string& input : {std::string(kRecording), dir + "/all.json", dir + "/all.collapsed"}) {
        INFO(input);
        auto report = stackfrag("report " + input + " -o " + dir + "/report.collapsed --focus " + quoted);
        INFO(report.output);
        REQUIRE(report.exit_code == 0);
        CHECK(report.output.find("focus=" + pattern_text + ": kept " + std::to_string(inside.total_samples()) + " of " +
                                 std::to_string(whole.total_samples()) + " samples") != std::string::npos);
        CHECK(collapsed(read(dir + "/report.collapsed")) == collapsed(inside));
    }
    auto both = stackfrag(std::string("report ") + dir + "/all.json -o " + dir + "/none.collapsed --focus " + quoted +
                          " --exclude " + quoted);
    REQUIRE(both.exit_code == 0);
    CHECK(read(dir + "/none.collapsed").total_samples() == 0);
    std::system(("rm -rf " + dir).c_str());
}

TEST_CASE("a bad pattern is refused before anything is read, naming the option") {
    auto report = stackfrag(std::string("report ") + kRecording + " -o /tmp/never.json --exclude 'a..b'");
    CHECK(report.exit_code == 1);
    CHECK(report.output.find("exclude: bad method pattern 'a..b'") != std::string::npos);
    auto replay = stackfrag(std::string("replay ") + kRecording + " --focus 'pkg.Class.m(I)V'");
    CHECK(replay.exit_code == 2);
    CHECK(replay.output.find("focus: bad method pattern 'pkg.Class.m(I)V'") != std::string::npos);
}
