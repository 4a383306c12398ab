// The JVM's start, sampled from the agent's load: the thread that loads the agent runs
// Threads::create_vm, and on JDK 25 (Temurin) a page of that frame is never written. The kernel
// copies a sample's user stack without faulting pages in, so before the agent made its stack's pages
// present, every sample of that thread taken below the page got a fragment ending at it (java
// -version at 100 us: 1,178 of 1,872 samples) and its native walk failed. Checked on the recording:
// no fragment of the main thread may end at a page boundary short of the requested size while the
// thread's stack goes on above it (another of its samples has its sp there).
#include <catch2/catch.hpp>

#include <stdlib.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <optional>
#include <regex>
#include <sstream>
#include <string>
#include <variant>
#include <vector>

#include "agent_process.hpp"
#include "stackfrag/events/recording.hpp"
#include "test_env.hpp"

namespace {

const std::string kAgent = STACKFRAG_BINARY_DIR "/lib/libstackfrag.so";
constexpr uint64_t kStackBytes = 16384;
constexpr uint64_t kPage = 4096;

struct MainFragments {
    std::string error;
    uint64_t samples = 0;   // clock samples of the main thread with a fragment
    uint64_t cut = 0;       // ... whose fragment ended at a page the thread's stack went on past
    std::string first_cut;
};

MainFragments main_fragments(const std::string& rec) {
    MainFragments result;
    auto opened = sf::RecordingReader::open(rec);
    if (!opened.ok()) {
        result.error = opened.error().describe();
        return result;
    }
    uint32_t main_tid = 0;
    std::vector<sf::Sample> main_samples;
    while (std::optional<sf::Event> event = (*opened)->next()) {
        if (const auto* thread = std::get_if<sf::ThreadInfo>(&*event)) {
            if (main_tid == 0 && !thread->ended && thread->name == "main") main_tid = thread->tid;
        } else if (const auto* sample = std::get_if<sf::Sample>(&*event)) {
            if (main_tid != 0 && sample->tid == main_tid && sf::is_clock_sample(sample->source) && !sample->stack.empty()) {
                main_samples.push_back(*sample);
            }
        }
    }
    uint64_t highest_sp = 0;
    for (const sf::Sample& s : main_samples) highest_sp = std::max(highest_sp, s.stack_sp);
    result.samples = main_samples.size();
    for (const sf::Sample& s : main_samples) {
        const uint64_t end = s.stack_sp + s.stack.size();
        if (s.stack.size() < kStackBytes && end % kPage == 0 && end <= highest_sp) {
            if (result.cut++ == 0) {
                result.first_cut = "sp " + std::to_string(s.stack_sp) + ", " + std::to_string(s.stack.size()) +
                                   " bytes, another sample's sp " + std::to_string(highest_sp);
            }
        }
    }
    return result;
}

// A fresh directory for a run of `jdk`'s java, or none (with a warning) where that JDK is absent.
std::optional<std::string> run_dir_for(const std::string& jdk, const std::string& name) {
    if (!std::filesystem::exists(jdk + "/bin/java")) {
        WARN("no JDK at " << jdk);
        return std::nullopt;
    }
    std::string dir = "/tmp/sf-" + name + "-it-XXXXXX";
    REQUIRE(mkdtemp(dir.data()) != nullptr);
    return dir;
}

void check_start_fragments(const std::string& jdk) {
    const std::optional<std::string> run_dir = run_dir_for(jdk, "start");
    if (!run_dir) return;
    const std::string& dir = *run_dir;
    const std::string rec = dir + "/run.sfr";
    // The launcher's -version: the JVM's whole start and a little Java, ~0.1 s of the main thread.
    // 100 us: the shortest interval sampled from the agent's load.
    const auto r = sf::test::run_process(
        {jdk + "/bin/java", "-agentpath:" + kAgent + "=interval=100us,stack=" + std::to_string(kStackBytes) + ",record=" + rec,
         "-version"},
        {}, dir + "/jvm", 120);
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    const MainFragments main = main_fragments(rec);
    INFO(main.error << "; main thread: " << main.samples << " samples, " << main.cut << " cut short (first: " << main.first_cut
                    << ")");
    REQUIRE(main.error.empty());
    // ~1,000-1,900 on an idle machine; a loaded one gives the JVM less CPU, not fewer ticks of it.
    CHECK(main.samples >= 50);
    CHECK(main.cut == 0);
    std::filesystem::remove_all(dir);
}

}  // namespace

TEST_CASE("the main thread's fragments during the JVM's start are whole (JDK 25: a page of Threads::create_vm's "
          "frame is never written)",
          "[start]") {
    check_start_fragments(STACKFRAG_JDK25_HOME);
}

TEST_CASE("the main thread's fragments during the JVM's start are whole (JDK 17)", "[start]") {
    check_start_fragments(STACKFRAG_JDK17_HOME);
}

// -XX:+AlwaysPreTouch has the GC threads fault in every page of the heap before VMInit, which the
// agent holds the samples of the start for: with a 4 GB heap that start took 11-14 s and 20-26 k
// samples on the 2-CPU VM, and the hold's old 10 s limit let them go before the VM's layout was
// known (no_code_map for up to 61 % of the samples, up to 17,400 more dropped by the full live
// queue). Now the hold waits, keeping only the top 4 KB of each sample past its first 128 MB, and
// the live queue has room for all of them.
namespace {

void check_pretouched_start(const std::string& jdk) {
    const std::optional<std::string> run_dir = run_dir_for(jdk, "pretouch");
    if (!run_dir) return;
    const std::string& dir = *run_dir;
    const std::string profile = dir + "/pretouch.collapsed";
    const auto compiled = sf::test::compile_test_program(jdk, "HotSpin.java", dir);
    REQUIRE(compiled.exit_code == 0);
    // A second of work after the start: the start's backlog drains while the JVM runs on.
    const auto r = sf::test::run_process({jdk + "/bin/java", "-Xms4g", "-Xmx4g", "-XX:+AlwaysPreTouch",
                                          "-agentpath:" + kAgent + "=interval=1ms,file=" + profile, "-cp", dir,
                                          "HotSpin", "1000"},
                                         {}, dir + "/jvm", 240);
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    std::smatch m;
    REQUIRE(std::regex_search(r.err, m, std::regex("stop summary: ([0-9]+) samples taken; decoded [0-9.]+% \\(([0-9]+)\\)"
                                                   ".*failed [0-9.]+% \\(([0-9]+)\\); lost [0-9]+ \\(kernel\\), "
                                                   "([0-9]+) \\(live queue full\\)")));
    const uint64_t samples = std::stoull(m[1]), decoded = std::stoull(m[2]), failed = std::stoull(m[3]),
                   dropped = std::stoull(m[4]);
    CHECK(samples >= 2000);   // seconds of pre-touching on any machine
    CHECK(dropped == 0);
    CHECK(failed * 1000 <= samples);   // at most 0.1 %
    CHECK(decoded + failed == samples);
    CHECK(r.err.find("no_code_map") == std::string::npos);
    // The backlog's buffers went back to the allocator as it drained, most of them 4 KB: once it
    // had drained, the allocator was asked to give its free pages back, and did.
    REQUIRE(std::regex_search(r.err, m, std::regex("live queue: at most [0-9.]+ MB of fragments waited for the decoder, "
                                                   "in ([0-9.]+) MB of buffers")));
    if (std::stod(m[1]) * 1e6 >= double(32u << 20)) {
        REQUIRE(std::regex_search(r.err, m, std::regex("after it the allocator gave ([0-9.]+) MB of free memory back "
                                                       "\\(malloc_trim, [0-9.]+ ms\\)")));
        CHECK(std::stod(m[1]) >= 1.0);
    }
    // Where the start's time went: the GC threads touching the heap.
    std::ifstream in(profile);
    uint64_t total = 0, pretouch = 0, worker = 0;
    for (std::string line; std::getline(in, line);) {
        const size_t space = line.rfind(' ');
        if (space == std::string::npos) continue;
        const uint64_t n = std::stoull(line.substr(space + 1));
        total += n;
        if (line.find("pretouch_memory") != std::string::npos) pretouch += n;
        if (line.find("HotSpin.spin") != std::string::npos) worker += n;
    }
    INFO(total << " samples in the profile, " << pretouch << " in os::pretouch_memory, " << worker << " in HotSpin.spin");
    CHECK(total == samples);
    CHECK(worker >= 500);
    CHECK(pretouch * 2 >= total - worker);
    std::filesystem::remove_all(dir);
}

}  // namespace

TEST_CASE("a long JVM start (a pre-touched 4 GB heap) is held for VMInit and decoded whole (JDK 17)", "[start]") {
    check_pretouched_start(STACKFRAG_JDK17_HOME);
}

// JDK 25's walks ran off the trimmed fragments inside native frames: 0.5 % failed until a trimmed
// fragment counted as full.
TEST_CASE("a long JVM start (a pre-touched 4 GB heap) is held for VMInit and decoded whole (JDK 25)", "[start]") {
    check_pretouched_start(STACKFRAG_JDK25_HOME);
}
