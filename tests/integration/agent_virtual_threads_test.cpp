// Virtual threads on JDK 21 and 25 (VirtualThreads.java): a task's frames thawed after a sleep return into
// the continuation return barrier, whose caller the decoder must name as HotSpot does
// (Continuation.enterSpecial at the entry's return pc) to agree with AsyncGetCallTrace.
#include <catch2/catch.hpp>

#include <sys/stat.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "agent_process.hpp"
#include "replay_json.hpp"
#include "test_env.hpp"

namespace {
const std::string kAgent = STACKFRAG_BINARY_DIR "/lib/libstackfrag.so";

void check_virtual_threads(const std::string& jdk) {
    struct stat info {};
    if (stat((jdk + "/bin/java").c_str(), &info) != 0) {
        WARN(jdk << " is not installed: skipped");
        return;
    }
    const std::string dir = sf::test::temp_dir("vthreads-it");
    const auto compiled = sf::test::compile_test_program(jdk, "VirtualThreads.java", dir);
    INFO(compiled.err);
    REQUIRE(compiled.exit_code == 0);
    const std::string rec = dir + "/run.sfr";
    const auto run = sf::test::run_process(
        {jdk + "/bin/java", "-agentpath:" + kAgent + "=interval=1ms,validate,record=" + rec, "-cp", dir, "VirtualThreads", "20000"},
        {}, dir + "/jvm", 300);
    INFO(run.err);
    REQUIRE(run.exit_code == 0);
    const nlohmann::json j = sf::test::replay_json(rec, dir);
    INFO(j.dump(1));
    const double samples = j["samples"].get<double>();
    REQUIRE(samples > 1000);
    CHECK(sf::test::failed_samples(j) / samples <= 0.02);
    CHECK(j["stats"]["return_barriers_crossed"].get<uint64_t>() > 100);
    REQUIRE(j["oracle_both_ok"].get<double>() > 100);
    // Before the decoder knew the barrier: 110 of 350 (it named the barrier stub, not enterSpecial).
    CHECK(sf::test::agreement_except_top_bci(j) >= 0.95);
    std::filesystem::remove_all(dir);
}

}  // namespace

TEST_CASE("virtual threads (JDK 21): frames above the continuation return barrier decode like ASGCT",
          "[virtualthreads]") {
    check_virtual_threads(sf::test::kJdk21);
}

TEST_CASE("virtual threads (JDK 25): frames above the continuation return barrier decode like ASGCT",
          "[virtualthreads]") {
    check_virtual_threads(sf::test::kJdk25);
}
