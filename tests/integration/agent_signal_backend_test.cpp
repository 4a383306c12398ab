// The signal backend on a real JVM (JDK 17), with a program whose hot method is known (HotSpin):
// denied perf_event_open by a seccomp filter, backend=auto falls back to CPU-time timers with one
// log line saying why and still writes a profile dominated by the hot method; backend=signal does
// the same where perf would work, and with validate each tick is also an oracle sample.
#include <catch2/catch.hpp>

#include <stdlib.h>

#include <filesystem>
#include <regex>
#include <sstream>
#include <string>

#include "agent_process.hpp"
#include "agent_recording_summary.hpp"
#include "test_env.hpp"

namespace {

const std::string kAgent = STACKFRAG_BINARY_DIR "/lib/libstackfrag.so";
using sf::test::kJdk17;
constexpr int kWorkerCpuMs = 1500;

std::string temp_dir() { return sf::test::temp_dir("signal-it"); }

size_t count_of(const std::string& text, const std::string& part) {
    size_t n = 0;
    for (size_t at = text.find(part); at != std::string::npos; at = text.find(part, at + 1)) ++n;
    return n;
}

struct CollapsedCounts {
    uint64_t total = 0;
    uint64_t hot = 0;   // samples with HotSpin.spin anywhere on the stack
};

CollapsedCounts count_collapsed(const std::string& path) {
    CollapsedCounts counts;
    std::istringstream in(sf::test::read_text_file(path));
    std::string line;
    while (std::getline(in, line)) {
        const size_t space = line.rfind(' ');
        if (space == std::string::npos) continue;
        const uint64_t n = std::stoull(line.substr(space + 1));
        counts.total += n;
        if (line.find("HotSpin.spin") != std::string::npos) counts.hot += n;
    }
    return counts;
}

struct HotRun {
    sf::test::ProcessResult process;
    int worker_cpu_ms = 0;
    CollapsedCounts profile;
};

HotRun run_hot(const std::string& dir, const std::string& tag, const std::string& agent_options, bool deny_perf) {
    HotRun run;
    const std::string profile = dir + "/" + tag + ".collapsed";
    run.process = sf::test::run_process({kJdk17 + "/bin/java", "-agentpath:" + kAgent + "=" + agent_options + ",file=" + profile,
                                         "-cp", dir, "HotSpin", std::to_string(kWorkerCpuMs)},
                                        {}, dir + "/" + tag, 120, deny_perf);
    std::smatch m;
    if (std::regex_search(run.process.out, m, std::regex("worker cpu_ms=(\\d+)"))) run.worker_cpu_ms = std::stoi(m[1]);
    if (std::filesystem::exists(profile)) run.profile = count_collapsed(profile);
    return run;
}

// The profile of a 1 ms-interval run: dominated by the hot method, and as many samples as the
// worker's CPU time allows with CPU-time timers. They fire only on scheduler ticks that find the
// thread running (CONFIG_HZ, 100 to 1000 a second, fewer when the CPU is shared: 150/s at load 19
// on 2 CPUs), so between a twentieth and all of the worker's milliseconds (plus JVM start-up).
void check_hot_profile(const HotRun& run) {
    INFO("worker cpu " << run.worker_cpu_ms << " ms, samples " << run.profile.total << ", in HotSpin.spin "
                       << run.profile.hot);
    REQUIRE(run.worker_cpu_ms >= kWorkerCpuMs);
    CHECK(run.profile.hot >= static_cast<uint64_t>(run.worker_cpu_ms) / 20);
    CHECK(run.profile.total <= static_cast<uint64_t>(run.worker_cpu_ms) + 1000);
    CHECK(run.profile.hot * 10 >= run.profile.total * 7);
}

}  // namespace

TEST_CASE("perf denied: backend=auto falls back to signals, says why once, and profiles the hot method", "[signal]") {
    const std::string dir = temp_dir();
    const auto javac = sf::test::compile_test_program(kJdk17, "HotSpin.java", dir);
    REQUIRE(javac.exit_code == 0);

    const HotRun run = run_hot(dir, "auto", "backend=auto,interval=1ms", true);
    INFO("stderr: " << run.process.err);
    REQUIRE(run.process.exit_code == 0);
    CHECK(count_of(run.process.err, "perf events are denied, sampling with the signal backend") == 1);
    CHECK(count_of(run.process.err, "kernel.perf_event_paranoid is") == 1);   // the hint, in that line
    CHECK(count_of(run.process.err, "[stackfrag] error") == 0);
    CHECK(count_of(run.process.err, "sampling is off") == 0);
    CHECK(count_of(run.process.err, "backend: signal (perf denied)") == 1);   // the stop summary
    check_hot_profile(run);
    std::filesystem::remove_all(dir);
}

TEST_CASE("perf denied: backend=perf runs the JVM to its end unsampled, with the perf error", "[signal]") {
    const std::string dir = temp_dir();
    const auto javac = sf::test::compile_test_program(kJdk17, "HotSpin.java", dir);
    REQUIRE(javac.exit_code == 0);

    const HotRun run = run_hot(dir, "perf", "backend=perf,interval=1ms", true);
    INFO("stderr: " << run.process.err);
    REQUIRE(run.process.exit_code == 0);
    CHECK(run.worker_cpu_ms >= kWorkerCpuMs);
    CHECK(count_of(run.process.err, "[stackfrag] error") == 1);
    CHECK(count_of(run.process.err, "sampling is off, the JVM runs on without it") == 1);
    CHECK(count_of(run.process.err, "kernel.perf_event_paranoid is") == 1);
    CHECK(count_of(run.process.err, "signal backend") == 0);
    CHECK(count_of(run.process.err, "backend: perf") == 1);
    CHECK(run.profile.total == 0);
    std::filesystem::remove_all(dir);
}

TEST_CASE("backend=signal profiles the hot method where perf works, and validate checks the same snapshots", "[signal]") {
    const std::string dir = temp_dir();
    const auto javac = sf::test::compile_test_program(kJdk17, "HotSpin.java", dir);
    REQUIRE(javac.exit_code == 0);

    const std::string recording = dir + "/signal.sfr";
    const HotRun run = run_hot(dir, "signal", "backend=signal,interval=1ms,validate,record=" + recording, false);
    INFO("stderr: " << run.process.err);
    REQUIRE(run.process.exit_code == 0);
    CHECK(count_of(run.process.err, "[stackfrag] error") == 0);
    CHECK(count_of(run.process.err, "on the signal backend") == 1);   // "sampling every ... in mode thread (mode=auto: backend=signal ...), on the signal backend"
    CHECK(count_of(run.process.err, "backend: signal (backend=signal)") == 1);
    check_hot_profile(run);

    // One timer tick, two events: the profile's Sample and validate's Oracle of the same fragment.
    const sf::test::RecordingSummary summary = sf::test::summarize_recording(recording);
    REQUIRE(summary.opened);
    CHECK_FALSE(summary.damage.has_value());
    CHECK(summary.samples == summary.oracles);
    CHECK(summary.samples >= static_cast<uint64_t>(run.worker_cpu_ms) / 20);
    CHECK(summary.oracles_ok * 10 >= summary.oracles * 8);
    CHECK(summary.samples_of_threads_named("hot-worker") * 10 >= summary.samples * 7);
    std::filesystem::remove_all(dir);
}

TEST_CASE("mode=auto at the JVM's start: per-CPU events at 1 ms, per-thread ones below 1 ms, each saying why", "[signal]") {
    const std::string dir = temp_dir();
    const auto javac = sf::test::compile_test_program(kJdk17, "HotSpin.java", dir);
    REQUIRE(javac.exit_code == 0);

    const HotRun cpu = run_hot(dir, "auto-1ms", "interval=1ms", false);
    INFO("stderr: " << cpu.process.err);
    REQUIRE(cpu.process.exit_code == 0);
    CHECK(count_of(cpu.process.err, "[stackfrag] error") == 0);
    CHECK(count_of(cpu.process.err, "in mode cpu (mode=auto: loaded at the JVM's start") == 1);
    CHECK(count_of(cpu.process.err, "mode: cpu (mode=auto: loaded at the JVM's start") == 1);   // the stop summary
    check_hot_profile(cpu);

    const HotRun thread = run_hot(dir, "auto-500us", "interval=500us", false);
    INFO("stderr: " << thread.process.err);
    REQUIRE(thread.process.exit_code == 0);
    CHECK(count_of(thread.process.err, "in mode thread (mode=auto: intervals below 1 ms") == 1);
    CHECK(thread.profile.total > 0);
    std::filesystem::remove_all(dir);
}
