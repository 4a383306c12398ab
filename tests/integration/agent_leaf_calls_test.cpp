// Leaf calls from compiled Java code straight into the VM, on a real JVM (JDK 17 and, when
// installed, JDK 25): LeafCalls.java spends most of its time in BigInteger.modPow, whose C2 code
// calls SharedRuntime::montgomery_square / montgomery_multiply in libjvm with no stub and no frame
// anchor between (the Montgomery intrinsics). A sample there has native frames on top, and only
// unwinding libjvm's code reaches the compiled BigInteger frame below them, whose return address
// is a call site without a PcDesc of its own (docs/decoding.md, "Leaf calls without a PcDesc").
// Measured: 55-64 % of the samples in such a call, every one of them complete to Thread.run, no
// failures beyond the odd empty stack, agreement with AsyncGetCallTrace 100 % of the pairs where
// both succeeded (JDK 17: ASGCT names the next PcDesc's scope at most such calls, which replay
// counts apart as oracle_leaf_call_scope).
#include <catch2/catch.hpp>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "agent_process.hpp"
#include "collapsed_stacks.hpp"
#include "replay_json.hpp"
#include "test_env.hpp"

namespace {

const std::string kAgent = STACKFRAG_BINARY_DIR "/lib/libstackfrag.so";

bool starts_with(const std::string& s, const std::string& head) { return s.compare(0, head.size(), head) == 0; }

void check_leaf_calls(const std::string& jdk) {
    if (!std::filesystem::exists(jdk + "/bin/java")) {
        WARN(jdk << " is not installed: skipped");
        return;
    }
    sf::test::ScratchDir dir("leaf-it");
    const auto compiled = sf::test::compile_test_program(jdk, "LeafCalls.java", dir.path());
    INFO(compiled.err);
    REQUIRE(compiled.exit_code == 0);
    const std::string rec = dir.file("run.sfr"), collapsed = dir.file("replay.collapsed");
    const auto run = sf::test::run_process({jdk + "/bin/java", "-agentpath:" + kAgent + "=interval=1ms,validate,record=" + rec,
                                            "-cp", dir.path(), "LeafCalls", "2", "3000"},
                                           {}, dir.file("run"), 180);
    INFO(run.err);
    REQUIRE(run.exit_code == 0);
    const nlohmann::json j = sf::test::replay_json(rec, dir.path(), collapsed);
    INFO(j.dump(1));
    sf::test::check_accuracy(j, 1000, 0.01, 100, 0.96);

    // The samples in a Montgomery routine called by a BigInteger frame, and of those the ones whose
    // frames go on below it, through the program's own method, to the thread's first Java frame.
    const std::vector<sf::test::Stack> stacks = sf::test::parse_collapsed(sf::test::read_text_file(collapsed));
    uint64_t in_leaf_call = 0, complete = 0;
    for (const sf::test::Stack& s : stacks) {
        for (size_t i = 1; i < s.frames.size(); ++i) {
            if (!starts_with(s.frames[i], "SharedRuntime::montgomery_") ||
                !starts_with(s.frames[i - 1], "java/math/BigInteger.")) {
                continue;
            }
            in_leaf_call += s.count;
            bool through_work = false;
            for (size_t k = 0; k < i; ++k) through_work = through_work || starts_with(s.frames[k], "LeafCalls.work");
            if (starts_with(s.frames[0], "java/lang/Thread.run") && through_work) complete += s.count;
            break;
        }
    }
    const uint64_t all = sf::test::total(stacks);
    INFO(in_leaf_call << " of " << all << " samples in a Montgomery leaf call, " << complete << " of them complete");
    CHECK(in_leaf_call >= all / 5);
    CHECK(complete >= in_leaf_call - in_leaf_call / 100);
}

}  // namespace

TEST_CASE("leaf calls from C2 code into libjvm decode through to the thread's first frame, JDK 17", "[accuracy]") {
    check_leaf_calls(sf::test::kJdk17);
}

TEST_CASE("leaf calls from C2 code into libjvm decode through to the thread's first frame, JDK 25", "[accuracy]") {
    check_leaf_calls(sf::test::kJdk25);
}
