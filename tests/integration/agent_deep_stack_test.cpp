// stack=auto with only record= (no live decoder), on a real JVM (JDK 17): DeepStack.java's
// "deep-worker" spins about 40 KB deep in its stack, "shallow-worker" near its stack's top. With a
// fixed 16 KB fragment about half the samples (the deep thread's) decode incomplete; with stack=auto
// the agent sees from where the deep thread's fragments end below its stack top that they cannot
// reach its outermost frame, grows that thread's fragment (the shallow thread's stays), and the
// replayed recording's incomplete share drops far below (48.5 % -> 0.1-0.5 % when measured).
#include <catch2/catch.hpp>

#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <algorithm>
#include <set>
#include <string>

#include "agent_process.hpp"
#include "collapsed_stacks.hpp"
#include "replay_json.hpp"
#include "stackfrag/events/recording.hpp"
#include "test_env.hpp"

namespace {

const std::string kAgent = STACKFRAG_BINARY_DIR "/lib/libstackfrag.so";
const std::string kCli = STACKFRAG_BINARY_DIR "/bin/stackfrag";
using sf::test::kJdk17;

struct DeepRun {
    double incomplete_share = 0;
    std::map<std::string, std::set<size_t>> fragment_sizes;   // by thread name
    std::string log;
};

DeepRun run_deep(const std::string& dir, const std::string& name, const std::string& stack) {
    const std::string rec = dir + "/" + name + ".sfr";
    const auto r = sf::test::run_process({kJdk17 + "/bin/java", "-agentpath:" + kAgent + "=mode=thread,interval=1ms,stack=" + stack +
                                                                    ",record=" + rec + ",loglevel=debug",
                                          "-cp", dir, "DeepStack", "1500", "300"},
                                         {}, dir + "/" + name, 180);
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    DeepRun run;
    run.log = r.err;
    const auto replay = sf::test::run_process({kCli, "replay", "--json", rec}, {}, dir + "/" + name + "-replay", 180);
    REQUIRE(replay.exit_code == 0);
    const nlohmann::json j = nlohmann::json::parse(replay.out);
    const double samples = j["profile"]["samples"].get<double>();
    REQUIRE(samples > 1000);
    run.incomplete_share = j["profile"]["incomplete"].get<double>() / samples;

    sf::Result<std::unique_ptr<sf::RecordingReader>> reader = sf::RecordingReader::open(rec);
    REQUIRE(reader.ok());
    std::map<uint32_t, std::string> names;
    std::map<uint32_t, std::set<size_t>> sizes;
    while (std::optional<sf::Event> event = (*reader)->next()) {
        if (const auto* thread = std::get_if<sf::ThreadInfo>(&*event); thread && !thread->ended) {
            names[thread->tid] = thread->name;
        } else if (const auto* sample = std::get_if<sf::Sample>(&*event);
                   sample && sample->source == sf::SampleSource::kPerf && !sample->stack.empty()) {
            sizes[sample->tid].insert(sample->stack.size());
        }
    }
    for (const auto& [tid, set] : sizes) run.fragment_sizes[names[tid]].insert(set.begin(), set.end());
    return run;
}

}  // namespace

TEST_CASE("stack=auto with only a recording grows a deep thread's fragment and completes its traces", "[stack]") {
    const std::string dir = sf::test::temp_dir("deep-it");
    const auto compiled = sf::test::compile_test_program(kJdk17, "DeepStack.java", dir);
    INFO(compiled.err);
    REQUIRE(compiled.exit_code == 0);

    DeepRun fixed = run_deep(dir, "fixed", "16384");
    DeepRun grown = run_deep(dir, "auto", "auto");
    INFO("incomplete: 16 KB " << 100 * fixed.incomplete_share << " %, stack=auto " << 100 * grown.incomplete_share
                              << " %\n" << grown.log);
    // The deep thread's samples (about half) cannot complete in 16 KB.
    REQUIRE(fixed.incomplete_share > 0.2);
    // Fixed at 16 KB, never larger (a sample taken while the deep thread was still shallow, at its
    // start, ends at its stack's top below that: the thread registered itself).
    REQUIRE(!fixed.fragment_sizes["deep-worker"].empty());
    CHECK(*fixed.fragment_sizes["deep-worker"].rbegin() == 16384);
    // Without a live decoder the agent says how it judged, and grew the deep thread's fragment
    // (65528 asked; the deep thread registered itself, so its fragments end at its stack's top,
    // beyond 16 KB); the shallow thread's never changed.
    CHECK(sf::test::contains(grown.log, "judged by where fragments end below the stack tops"));
    std::smatch m;
    REQUIRE(std::regex_search(grown.log, m, std::regex("stack=auto: fragments grew (\\d+) times")));
    CHECK(std::stoi(m[1]) >= 1);
    REQUIRE(!grown.fragment_sizes["deep-worker"].empty());
    CHECK(*grown.fragment_sizes["deep-worker"].rbegin() > 16384);
    // (The kernel copies a shallow thread's stack only up to its end: fragments of 6-7 KB here.)
    REQUIRE(!grown.fragment_sizes["shallow-worker"].empty());
    CHECK(*grown.fragment_sizes["shallow-worker"].rbegin() <= 16384);
    // Only the samples before the first reopen (and any after a failed shrink trial) stay incomplete.
    CHECK(grown.incomplete_share < fixed.incomplete_share / 10);
    std::filesystem::remove_all(dir);
}

// depth=: the deep thread's stack (300 interpreted frames, about 40 KB) is cut at 100 frames, its
// innermost ones kept under [failed: too_deep]; the recording's VmInfo carries the limit, so the
// replay cuts at the same frame and gives the live profile's stacks exactly.
TEST_CASE("depth= cuts the live profile and its replay at the same frame", "[stack]") {
    const std::string dir = sf::test::temp_dir("depth-it");
    const auto compiled = sf::test::compile_test_program(kJdk17, "DeepStack.java", dir);
    INFO(compiled.err);
    REQUIRE(compiled.exit_code == 0);
    const std::string rec = dir + "/run.sfr", live = dir + "/live.collapsed", replayed = dir + "/replay.collapsed";
    const auto r = sf::test::run_process({kJdk17 + "/bin/java",
                                          "-agentpath:" + kAgent + "=mode=thread,interval=1ms,depth=100,record=" + rec +
                                              ",file=" + live,
                                          "-cp", dir, "DeepStack", "1500", "300"},
                                         {}, dir + "/jvm", 180);
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    CHECK(sf::test::contains(r.err, "stacks had more than 100 frames"));
    const nlohmann::json j = sf::test::replay_json(rec, dir, replayed);
    INFO(j.dump(1));
    const double samples = j["profile"]["samples"].get<double>();
    REQUIRE(samples > 1000);
    // The deep thread's samples, about half, are cut; the shallow thread's are not.
    REQUIRE(j["failed"].contains("too_deep"));
    CHECK(j["failed"]["too_deep"].get<double>() > 0.3 * samples);

    const std::string replay_text = sf::test::read_text_file(replayed);
    CHECK(sf::test::read_text_file(live) == replay_text);
    const auto has_frame = [](const sf::test::Stack& stack, const std::string& part) {
        return std::any_of(stack.frames.begin(), stack.frames.end(),
                           [&](const std::string& f) { return f.find(part) != std::string::npos; });
    };
    size_t cut = 0, cut_at_100 = 0, cut_elsewhere = 0;
    for (const sf::test::Stack& stack : sf::test::parse_collapsed(replay_text)) {
        if (!has_frame(stack, "[failed: too_deep]")) continue;
        ++cut;
        // Method frames: not the markers ("[failed: ...]", a thread's root), which are bracketed.
        const auto frames = static_cast<size_t>(std::count_if(stack.frames.begin(), stack.frames.end(),
                                                              [](const std::string& f) { return f.empty() || f[0] != '['; }));
        CHECK(frames <= 100);
        cut_at_100 += frames == 100 ? 1 : 0;
        cut_elsewhere += has_frame(stack, "DeepStack.descend") ? 0 : 1;   // not the deep thread
    }
    CHECK(cut > 0);
    CHECK(cut_at_100 == cut);
    CHECK(cut_elsewhere == 0);
    std::filesystem::remove_all(dir);
}
