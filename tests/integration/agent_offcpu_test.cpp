// Off-CPU sampling on a real JVM (JDK 17): with events=cpu,switch the agent writes the on-CPU
// profile to file= and the context-switch samples to its ".offcpu" sibling. OffCpu.java blocks in
// Thread.sleep, on a contended monitor and in a loopback socket read, each from its own method,
// beside one busy thread; a recording of the same run replays to the same off-CPU traces.
#include <catch2/catch.hpp>

#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <regex>
#include <string>
#include <vector>

#include "agent_process.hpp"
#include "collapsed_stacks.hpp"
#include "test_env.hpp"

namespace {

const std::string kAgent = STACKFRAG_BINARY_DIR "/lib/libstackfrag.so";
const std::string kCli = STACKFRAG_BINARY_DIR "/bin/stackfrag";
using sf::test::kJdk17;

using sf::test::parse_collapsed;
using sf::test::Stack;
using sf::test::containing;
using sf::test::total;

// Samples in which `method` called something whose frames (below it) include `callee_part`
// (empty: any frame at all), i.e. `method` is a caller of where the thread was.
uint64_t as_caller(const std::vector<Stack>& stacks, const std::string& method, const std::string& callee_part = {}) {
    uint64_t sum = 0;
    for (const Stack& s : stacks) {
        for (size_t i = 0; i + 1 < s.frames.size(); ++i) {
            if (s.frames[i].find(method) == std::string::npos) continue;
            bool callee = callee_part.empty();
            for (size_t j = i + 1; j < s.frames.size() && !callee; ++j) callee = s.frames[j].find(callee_part) != std::string::npos;
            if (callee) sum += s.count;
            break;
        }
    }
    return sum;
}


}  // namespace

TEST_CASE("events=cpu,switch: the off-CPU profile shows where threads block, the on-CPU one the busy method",
          "[offcpu]") {
    std::string dir = "/tmp/sf-offcpu-it-XXXXXX";
    REQUIRE(mkdtemp(dir.data()) != nullptr);
    const auto compiled = sf::test::compile_test_program(kJdk17, "OffCpu.java", dir);
    INFO(compiled.err);
    REQUIRE(compiled.exit_code == 0);

    const std::string rec = dir + "/run.sfr", on_cpu = dir + "/p.collapsed", off_cpu = dir + "/p.offcpu.collapsed";
    const auto r = sf::test::run_process({kJdk17 + "/bin/java",
                                          "-agentpath:" + kAgent + "=events=cpu,switch,interval=1ms,record=" + rec +
                                              ",file=" + on_cpu,
                                          "-cp", dir, "OffCpu", "3"},
                                         {}, dir + "/jvm", 120);
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    CHECK(r.err.find("off-CPU: ") != std::string::npos);   // the stop summary's own line

    const std::vector<Stack> off = parse_collapsed(sf::test::read_text_file(off_cpu));
    const std::vector<Stack> on = parse_collapsed(sf::test::read_text_file(on_cpu));
    const uint64_t sleeping = as_caller(off, "OffCpu.sleepingWaiter", "Thread.sleep");
    const uint64_t locked = as_caller(off, "OffCpu.lockContender");
    const uint64_t reading = as_caller(off, "OffCpu.socketReader", "read");
    const uint64_t busy_on = containing(on, "OffCpu.busyComputation");
    INFO("off-CPU: " << total(off) << " switches; sleep " << sleeping << ", lock " << locked << ", socket read "
                     << reading << "; on-CPU: " << total(on) << " samples, busy " << busy_on);
    // The sleeper and the reader block ~every 2 ms, the contender every ~3 ms, for 3 s: hundreds each.
    CHECK(sleeping >= 100);
    CHECK(locked >= 50);
    CHECK(reading >= 100);
    // The busy thread runs all the time the others wait: it dominates the on-CPU profile, and the
    // waits (which cost no CPU) hardly appear there.
    CHECK(busy_on * 2 > total(on));
    CHECK(containing(on, "OffCpu.sleepingWaiter") * 10 < busy_on);

    // The recording replays to the same off-CPU traces, unless the live queue dropped samples.
    const std::string replayed = dir + "/replay.offcpu.collapsed";
    const auto replay =
        sf::test::run_process({kCli, "replay", rec, "--offcpu-collapsed", replayed}, {}, dir + "/replay", 120);
    INFO(replay.err);
    REQUIRE(replay.exit_code == 0);
    std::smatch m;
    REQUIRE(std::regex_search(r.err, m, std::regex("(\\d+) \\(live queue full\\)")));
    if (m[1] == "0") {
        CHECK(sf::test::read_text_file(replayed) == sf::test::read_text_file(off_cpu));
    } else {
        WARN("the live queue dropped " << m[1] << " samples; live and replay not compared");
    }
    std::filesystem::remove_all(dir);
}

TEST_CASE("events=switch alone writes only the off-CPU profile's samples", "[offcpu]") {
    std::string dir = "/tmp/sf-offcpu-it-XXXXXX";
    REQUIRE(mkdtemp(dir.data()) != nullptr);
    const auto compiled = sf::test::compile_test_program(kJdk17, "OffCpu.java", dir);
    REQUIRE(compiled.exit_code == 0);
    const auto r = sf::test::run_process(
        {kJdk17 + "/bin/java", "-agentpath:" + kAgent + "=events=switch,file=" + dir + "/p.html", "-cp", dir, "OffCpu", "1"},
        {}, dir + "/jvm", 120);
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    // profile.html -> profile.offcpu.html; the on-CPU one exists but is empty.
    const std::string off_html = sf::test::read_text_file(dir + "/p.offcpu.html");
    CHECK(off_html.find("OffCpu.sleepingWaiter") != std::string::npos);
    std::smatch m;
    REQUIRE(std::regex_search(r.err, m, std::regex("stop summary: (\\d+) samples taken")));
    CHECK(m[1] == "0");
    std::filesystem::remove_all(dir);
}

TEST_CASE("a user whom the kernel does not let count context switches gets on-CPU sampling and one error",
          "[offcpu]") {
    // Needs root to become another user, and kernel.perf_event_paranoid 2 (or more) to be refused.
    const std::string paranoid = sf::test::read_text_file("/proc/sys/kernel/perf_event_paranoid");
    if (geteuid() != 0 || paranoid.empty() || std::stoi(paranoid) < 2 || std::stoi(paranoid) > 2) {
        WARN("not root or perf_event_paranoid is not 2: the refusal cannot be shown here");
        return;
    }
    std::string dir = "/tmp/sf-offcpu-it-XXXXXX";
    REQUIRE(mkdtemp(dir.data()) != nullptr);
    std::filesystem::permissions(dir, std::filesystem::perms::all);
    const auto compiled = sf::test::compile_test_program(kJdk17, "OffCpu.java", dir);
    REQUIRE(compiled.exit_code == 0);
    const auto r = sf::test::run_process({"/usr/bin/setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
                                          kJdk17 + "/bin/java",
                                          "-agentpath:" + kAgent + "=events=cpu,switch,file=" + dir + "/p.collapsed",
                                          "-cp", dir, "OffCpu", "1"},
                                         {}, dir + "/jvm", 120);
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    size_t errors = 0;
    for (size_t at = r.err.find("[stackfrag] error"); at != std::string::npos; at = r.err.find("[stackfrag] error", at + 1)) {
        ++errors;
    }
    CHECK(errors == 1);
    CHECK(r.err.find("off-CPU sampling (events=switch) is off, on-CPU sampling goes on") != std::string::npos);
    CHECK(r.err.find("perf_event_paranoid at 1 or lower") != std::string::npos);
    // The clock events opened as usual.
    std::smatch m;
    REQUIRE(std::regex_search(r.err, m, std::regex("stop summary: (\\d+) samples taken")));
    CHECK(std::stoull(m[1]) > 0);
    CHECK(parse_collapsed(sf::test::read_text_file(dir + "/p.collapsed")).size() > 0);
    std::filesystem::remove_all(dir);
}
