// file=PROFILE.jfr on a real JVM (JDK 17) with events=cpu,switch: the JDK's own `jfr` tool (JDK 17,
// and JDK 25 when installed) reads both files the agent writes, with one event per sample,
// each at a time inside the run, on a named thread, with typed Java frames; `stackfrag report` of the
// run's recording writes the same kind of file.
#include <catch2/catch.hpp>

#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "agent_process.hpp"
#include "test_env.hpp"

namespace {

const std::string kAgent = STACKFRAG_BINARY_DIR "/lib/libstackfrag.so";
const std::string kCli = STACKFRAG_BINARY_DIR "/bin/stackfrag";
const std::string kJdk17 = STACKFRAG_JDK17_HOME;
const std::string kJdk25 = STACKFRAG_JDK25_HOME;

std::vector<std::string> jfr_tools() {
    std::vector<std::string> tools{kJdk17 + "/bin/jfr"};
    if (::access((kJdk25 + "/bin/jfr").c_str(), X_OK) == 0) tools.push_back(kJdk25 + "/bin/jfr");
    else WARN("JDK 25 is not installed: only JDK 17's jfr reads the files");
    return tools;
}

nlohmann::json events_of(const std::string& tool, const std::string& file, const std::string& type, const std::string& dir) {
    const auto r = sf::test::run_process({tool, "print", "--json", "--stack-depth", "256", "--events", type, file}, {},
                                         dir + "/jfr-print", 300);
    INFO(r.err.substr(0, 2000));
    REQUIRE(r.exit_code == 0);
    return nlohmann::json::parse(r.out).at("recording").at("events");
}

int64_t unix_now_ms() { return static_cast<int64_t>(::time(nullptr)) * 1000; }

// "2026-11-25T21:03:04.123456789Z" (or with an offset) -> ms since the epoch, by the seconds only.
int64_t iso_to_unix_ms(const std::string& text) {
    tm parts{};
    REQUIRE(strptime(text.c_str(), "%Y-%m-%dT%H:%M:%S", &parts) != nullptr);
    return static_cast<int64_t>(timegm(&parts)) * 1000;
}

}  // namespace

TEST_CASE("file=*.jfr: JDK 17's and 25's jfr read one event per sample, on-CPU and off-CPU", "[jfr]") {
    std::string dir = "/tmp/sf-jfr-it-XXXXXX";
    REQUIRE(mkdtemp(dir.data()) != nullptr);
    const auto compiled = sf::test::compile_test_program(kJdk17, "OffCpu.java", dir);
    REQUIRE(compiled.exit_code == 0);
    const std::string rec = dir + "/run.sfr", on_cpu = dir + "/p.jfr", off_cpu = dir + "/p.offcpu.jfr";
    const int64_t started_ms = unix_now_ms();
    const auto r = sf::test::run_process({kJdk17 + "/bin/java",
                                          "-agentpath:" + kAgent + "=events=cpu,switch,interval=1ms,record=" + rec +
                                              ",file=" + on_cpu,
                                          "-cp", dir, "OffCpu", "2"},
                                         {}, dir + "/jvm", 120);
    const int64_t ended_ms = unix_now_ms() + 1000;
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    std::smatch m;
    REQUIRE(std::regex_search(r.err, m, std::regex("decoded [0-9.]+% \\((\\d+)\\)")));
    const uint64_t decoded = std::stoull(m[1]);
    REQUIRE(decoded > 0);
    REQUIRE(std::regex_search(r.err, m, std::regex("failed [0-9.]+% \\((\\d+)\\)")));
    const uint64_t failed = std::stoull(m[1]);

    for (const std::string& tool : jfr_tools()) {
        INFO(tool);
        const auto summary = sf::test::run_process({tool, "summary", on_cpu}, {}, dir + "/jfr-summary", 120);
        REQUIRE(summary.exit_code == 0);
        CHECK(summary.out.find("jdk.ExecutionSample") != std::string::npos);

        const nlohmann::json samples = events_of(tool, on_cpu, "jdk.ExecutionSample", dir);
        // Every on-CPU sample is one event: a failed one too, under its [failed: reason] marker.
        CHECK(samples.size() == decoded + failed);
        std::set<std::string> threads, types;
        bool busy_seen = false;
        for (const auto& event : samples) {
            const auto& values = event.at("values");
            const int64_t at = iso_to_unix_ms(values.at("startTime").get<std::string>());
            CHECK(at >= started_ms - 1000);
            CHECK(at <= ended_ms);
            threads.insert(values.at("sampledThread").at("osName").get<std::string>());
            for (const auto& frame : values.at("stackTrace").at("frames")) {
                types.insert(frame.at("type").get<std::string>());
                if (frame.at("method").at("name") == "busyComputation") busy_seen = true;
            }
        }
        INFO("threads: " << threads.size());
        CHECK(threads.size() >= 2);
        CHECK(threads.count("[tid=0]") == 0);
        CHECK(busy_seen);
        CHECK(types.count("JIT compiled") + types.count("Interpreted") >= 1);
        for (const std::string& type : types) {
            CHECK((type == "Interpreted" || type == "JIT compiled" || type == "Inlined" || type == "Native"));
        }

        const nlohmann::json switches = events_of(tool, off_cpu, "stackfrag.OffCpuSample", dir);
        CHECK(switches.size() > 50);
        bool sleeper_seen = false;
        for (const auto& event : switches) {
            for (const auto& frame : event.at("values").at("stackTrace").at("frames")) {
                if (frame.at("method").at("name") == "sleepingWaiter") sleeper_seen = true;
            }
        }
        CHECK(sleeper_seen);
    }

    // The recording, reported as JFR, holds the same on-CPU samples' events (report puts the
    // context switches into its one tree too).
    const std::string reported = dir + "/report.jfr";
    const auto report = sf::test::run_process({kCli, "report", rec, "-o", reported}, {}, dir + "/report", 120);
    INFO(report.err);
    REQUIRE(report.exit_code == 0);
    const nlohmann::json from_recording = events_of(kJdk17 + "/bin/jfr", reported, "jdk.ExecutionSample", dir);
    CHECK(from_recording.size() >= decoded);
    std::filesystem::remove_all(dir);
}
