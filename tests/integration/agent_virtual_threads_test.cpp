// Virtual threads on JDK 25 (VirtualThreads.java): a task's frames thawed after a sleep return into
// the continuation return barrier, whose caller the decoder must name as HotSpot does
// (Continuation.enterSpecial at the entry's return pc) to agree with AsyncGetCallTrace.
#include <catch2/catch.hpp>

#include <sys/stat.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "agent_process.hpp"
#include "test_env.hpp"

namespace {
const std::string kAgent = STACKFRAG_BINARY_DIR "/lib/libstackfrag.so";
const std::string kCli = STACKFRAG_BINARY_DIR "/bin/stackfrag";
}  // namespace

TEST_CASE("virtual threads (JDK 25): frames above the continuation return barrier decode like ASGCT",
          "[virtualthreads]") {
    const std::string jdk = sf::test::kJdk25;
    struct stat info {};
    if (stat((jdk + "/bin/java").c_str(), &info) != 0) {
        WARN(jdk << " is not installed: skipped");
        return;
    }
    const std::string dir = sf::test::temp_dir("vthreads-it");
    const auto compiled = sf::test::run_process(
        {jdk + "/bin/javac", "-d", dir, STACKFRAG_SOURCE_DIR "/tests/integration/java/VirtualThreads.java"}, {},
        dir + "/javac", 120);
    INFO(compiled.err);
    REQUIRE(compiled.exit_code == 0);
    const std::string rec = dir + "/run.sfr";
    const auto run = sf::test::run_process(
        {jdk + "/bin/java", "-agentpath:" + kAgent + "=interval=1ms,validate,record=" + rec, "-cp", dir, "VirtualThreads", "20000"},
        {}, dir + "/jvm", 300);
    INFO(run.err);
    REQUIRE(run.exit_code == 0);
    const auto replay = sf::test::run_process({kCli, "replay", "--json", rec}, {}, dir + "/replay", 300);
    REQUIRE(replay.exit_code == 0);
    const nlohmann::json j = nlohmann::json::parse(replay.out);
    INFO(j.dump(1));
    const double samples = j["samples"].get<double>();
    REQUIRE(samples > 1000);
    uint64_t failed = 0;
    for (const auto& [reason, n] : j["failed"].items()) failed += n.get<uint64_t>();
    CHECK(failed / samples <= 0.02);
    CHECK(j["stats"]["return_barriers_crossed"].get<uint64_t>() > 100);
    const double both_ok = j["oracle_both_ok"].get<double>();
    REQUIRE(both_ok > 100);
    // Before the decoder knew the barrier: 110 of 350 (it named the barrier stub, not enterSpecial).
    CHECK(j["oracle_identical_except_top_bci"].get<double>() / both_ok >= 0.95);
    std::filesystem::remove_all(dir);
}
