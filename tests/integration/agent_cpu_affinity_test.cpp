// mode=cpu opens its per-CPU events on the CPUs the JVM may run on (taskset, a container's
// cpuset), not on every CPU online: a JVM limited to one CPU of this machine gets one ring and
// still has all its time sampled. A thread that later widens its affinity is named at the stop.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <regex>
#include <string>

#include "agent_process.hpp"
#include "test_env.hpp"

#include "stackfrag/kernel/perf_events.hpp"

namespace {

const std::string kAgent = STACKFRAG_BINARY_DIR "/lib/libstackfrag.so";

long peak_rings(const std::string& log) {
    std::smatch m;
    if (!std::regex_search(log, m, std::regex(R"(ring memory \(pinned by the kernel\): peak [0-9.]+ MB in (\d+) rings)"))) {
        return -1;
    }
    return std::stol(m[1]);
}

double coverage_percent(const std::string& log) {
    std::smatch m;
    if (!std::regex_search(log, m, std::regex(R"(coverage ([0-9.]+)% of the process's CPU time)"))) return -1;
    return std::stod(m[1]);
}

}  // namespace

TEST_CASE("mode=cpu under taskset: one ring, on the JVM's one CPU, and all its time sampled", "[affinity]") {
    const auto online = sf::kernel::cpus_allowed();
    REQUIRE(online.ok());
    if (online->size() < 2) {
        WARN("one CPU: a JVM limited to it is no test of per-CPU events on fewer CPUs");
        return;
    }
    const int cpu = online->back();
    sf::test::ScratchDir dir("cpu-affinity-it");
    const auto compiled = sf::test::compile_test_program(sf::test::kJdk17, "HotSpin.java", dir.path());
    INFO(compiled.err);
    REQUIRE(compiled.exit_code == 0);

    SECTION("the affinity stays: nothing to warn of") {
        const auto run = sf::test::run_process(
            {"/usr/bin/taskset", "-c", std::to_string(cpu), sf::test::kJdk17 + "/bin/java",
             "-agentpath:" + kAgent + "=interval=1ms,file=" + dir.file("live.collapsed"), "-cp", dir.path(), "HotSpin",
             "1500"},
            {}, dir.file("jvm"), 180);
        INFO(run.err);
        REQUIRE(run.exit_code == 0);
        CHECK(run.err.find("ring per CPU it may run on (1 of " + std::to_string(online->size()) + " online") !=
              std::string::npos);
        CHECK(peak_rings(run.err) == 1);
        CHECK(run.err.find("may now run on CPUs") == std::string::npos);
        std::smatch m;
        REQUIRE(std::regex_search(run.err, m, std::regex(R"(stop summary: (\d+) samples taken; decoded [0-9.]+% \((\d+)\))")));
        CHECK(std::stod(m[1]) >= 1000);   // the worker's 1.5 s of CPU, sampled on the one ring
        CHECK(std::stod(m[2]) / std::stod(m[1]) >= 0.99);
        CHECK(coverage_percent(run.err) >= 80);
    }

    SECTION("the threads widened to every CPU mid-run: the stop names them and the CPUs left unsampled") {
        const std::string all = "0-" + std::to_string(cpu);
        const std::string script = "taskset -c " + std::to_string(cpu) + " " + sf::test::kJdk17 + "/bin/java -agentpath:" +
                                   kAgent + "=interval=1ms -cp " + dir.path() +
                                   " HotSpin 2500 & pid=$!; sleep 1.5; taskset -a -p -c " + all +
                                   " $pid > /dev/null; wait $pid";
        const auto run = sf::test::run_process({"/bin/bash", "-c", script}, {}, dir.file("widened"), 180);
        INFO(run.err);
        REQUIRE(run.exit_code == 0);
        CHECK(peak_rings(run.err) == 1);
        std::smatch m;
        REQUIRE(std::regex_search(run.err, m,
                                  std::regex(R"((\d+) threads \(e\.g\. .*\) may now run on CPUs ([0-9,-]+), where no per-CPU event samples them \(they were opened on CPUs ([0-9,-]+),)")));
        CHECK(std::stoi(m[1]) >= 2);   // the worker and the JVM's threads
        const auto beyond = sf::kernel::parse_cpu_list(m[2].str());
        REQUIRE(beyond.ok());
        CHECK(beyond->size() == online->size() - 1);
        CHECK(m[3].str() == std::to_string(cpu));
    }
}
