// mode=jvmti on real JVMs: GetAllStackTraces every interval gives a profile of the runnable threads
// (tests/integration/java/JvmtiHot.java: a known hot method, a known number of busy threads) with
// no perf event opened, and a recording made in that mode replays to the live profile's traces.
#include <catch2/catch.hpp>

#include <stdlib.h>

#include <filesystem>
#include <map>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "agent_process.hpp"
#include "test_env.hpp"

namespace {

const std::string kAgent = STACKFRAG_BINARY_DIR "/lib/libstackfrag.so";
const std::string kCli = STACKFRAG_BINARY_DIR "/bin/stackfrag";
using sf::test::kJdk17;
using sf::test::kJdk25;

std::string temp_dir(const std::string& tag) { return sf::test::temp_dir("jvmti-it-" + tag); }

void compile_jvmti_hot(const std::string& dir) {
    // --release 17: the classes run on both JDKs.
    const auto r = sf::test::compile_test_program(kJdk17, "JvmtiHot.java", dir, {"--release", "17"});
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
}

// Collapsed stacks: leaf frame -> samples, and the total.
struct Leaves {
    std::map<std::string, uint64_t> self;
    uint64_t total = 0;
};

Leaves leaves_of(const std::string& collapsed) {
    Leaves out;
    std::istringstream in(collapsed);
    std::string line;
    while (std::getline(in, line)) {
        const size_t space = line.rfind(' ');
        if (space == std::string::npos) continue;
        const uint64_t count = std::stoull(line.substr(space + 1));
        const std::string stack = line.substr(0, space);
        const size_t semicolon = stack.rfind(';');
        out.self[semicolon == std::string::npos ? stack : stack.substr(semicolon + 1)] += count;
        out.total += count;
    }
    return out;
}

uint64_t first_number(const std::string& text, const std::string& pattern) {
    std::smatch m;
    REQUIRE(std::regex_search(text, m, std::regex(pattern)));
    return std::stoull(m[1]);
}

}  // namespace

TEST_CASE("mode=jvmti samples the runnable threads every interval, without perf events", "[jvmti]") {
    const std::string dir = temp_dir("rate");
    compile_jvmti_hot(dir);
    constexpr double kSeconds = 3.0;
    constexpr int kThreads = 2;
    constexpr double kIntervalMs = 50.0;
    for (const std::string& jdk : {kJdk17, sf::test::kJdk21, kJdk25}) {
        if (!std::filesystem::exists(jdk + "/bin/java")) {
            WARN("no JDK at " << jdk);
            continue;
        }
        const std::string out = dir + "/profile.collapsed";
        const auto r = sf::test::run_process(
            {jdk + "/bin/java", "-agentpath:" + kAgent + "=mode=jvmti,interval=50ms,file=" + out, "-cp", dir, "JvmtiHot",
             std::to_string(kSeconds), std::to_string(kThreads)},
            {}, dir + "/jvm", 120);
        INFO(jdk << "\n" << r.err);
        REQUIRE(r.exit_code == 0);
        CHECK(r.err.find("(jvmti mode") != std::string::npos);
        // No perf event was opened, and every sample in the stream is a JVMTI trace.
        CHECK(first_number(r.err, "summary: (\\d+) samples") == 0);
        CHECK(first_number(r.err, "(\\d+) rings opened") == 0);
        CHECK(first_number(r.err, "stop summary: (\\d+) samples taken \\(jvmti mode") > 0);

        const Leaves leaves = leaves_of(sf::test::read_text_file(out));
        // The workers were runnable for kSeconds: about kSeconds / interval rounds of kThreads
        // traces. Loose bounds: a loaded machine delays rounds (fewer), JVM start-up and exit add a
        // few traces of the main thread (more).
        const double expected = kSeconds * 1000.0 / kIntervalMs * kThreads;
        INFO("samples " << leaves.total << ", expected about " << expected);
        CHECK(static_cast<double>(leaves.total) > 0.4 * expected);
        CHECK(static_cast<double>(leaves.total) < 1.3 * expected);
        // The hot code is where nearly every sample ends. At a safepoint, the leaf is spin or the
        // worker's loop around it (the bias this mode exists to show); both are JvmtiHot's.
        uint64_t hot = 0, spin = 0;
        for (const auto& [leaf, n] : leaves.self) {
            if (leaf.starts_with("JvmtiHot.")) hot += n;
            if (leaf == "JvmtiHot.spin") spin += n;
            // JVMTI does not say how a frame ran: no _[j], _[i] or _[0] on Java frames.
            CHECK(leaf.find("_[") == std::string::npos);
        }
        CHECK(static_cast<double>(hot) > 0.8 * static_cast<double>(leaves.total));
        CHECK(spin > 0);
    }
    std::filesystem::remove_all(dir);
}

TEST_CASE("a recording made in mode=jvmti replays to the live profile's traces", "[jvmti]") {
    const std::string dir = temp_dir("replay");
    compile_jvmti_hot(dir);
    const std::string rec = dir + "/run.sfr", live = dir + "/live.collapsed", replayed = dir + "/replay.collapsed";
    const auto r = sf::test::run_process({kJdk17 + "/bin/java",
                                          "-agentpath:" + kAgent + "=mode=jvmti,interval=5ms,record=" + rec + ",file=" + live,
                                          "-cp", dir, "JvmtiHot", "2", "2"},
                                         {}, dir + "/jvm", 120);
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    const auto replay = sf::test::run_process({kCli, "replay", rec, "--collapsed", replayed}, {}, dir + "/replay", 120);
    INFO(replay.out << replay.err);
    REQUIRE(replay.exit_code == 0);
    const std::string live_text = sf::test::read_text_file(live);
    REQUIRE(leaves_of(live_text).total > 100);
    CHECK(live_text.find("JvmtiHot.spin") != std::string::npos);
    if (first_number(r.err, "(\\d+) \\(live queue full\\)") == 0) {
        CHECK(live_text == sf::test::read_text_file(replayed));
    } else {
        WARN("the live queue dropped samples; live and replay not compared");
    }
    // The recording holds the traces as events of their own kind.
    const auto dump = sf::test::run_process({kCli, "dump", rec}, {}, dir + "/dump", 60);
    CHECK(dump.out.find("jvmti_trace") != std::string::npos);
    std::filesystem::remove_all(dir);
}
