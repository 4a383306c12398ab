// The agent under faults, on real JVMs (JDK 17): rings overflowing at the highest rate (lost samples
// counted and shown everywhere, no code or method event lost), 10,000 short-lived threads (no
// descriptor or memory left behind), the JVM exiting while the reader is busy (System.exit and
// Runtime.halt: complete outputs), and an output location that is full (the error names the file,
// the JVM runs on, the profile is kept for the next write and for an attach dump).
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "agent_process.hpp"
#include "shell.hpp"
#include "stackfrag/events/events.hpp"
#include "stackfrag/profile/export.hpp"
#include "test_env.hpp"

namespace {

const std::string kAgent = STACKFRAG_BINARY_DIR "/lib/libstackfrag.so";
const std::string kCli = STACKFRAG_BINARY_DIR "/bin/stackfrag";
using sf::test::kJdk17;
const std::string kJava = kJdk17 + "/bin/java";

using sf::test::contains;

// A directory with Faults.class compiled into it; removed by the destructor.
class FaultsDir {
public:
    explicit FaultsDir(const std::string& tag) {
        std::string pattern = "/tmp/sf-faults-" + tag + "-XXXXXX";
        REQUIRE(mkdtemp(pattern.data()) != nullptr);
        path = pattern;
        const sf::test::ProcessResult r = sf::test::compile_test_program(kJdk17, "Faults.java", path);
        INFO(r.err);
        REQUIRE(r.exit_code == 0);
    }
    ~FaultsDir() { std::filesystem::remove_all(path); }
    std::string path;
};

sf::test::ProcessResult run_faults(const FaultsDir& dir, const std::string& agent_options,
                                   const std::vector<std::string>& args, int timeout = 90) {
    std::vector<std::string> argv{kJava, "-agentpath:" + kAgent + "=" + agent_options, "-cp", dir.path, "Faults"};
    argv.insert(argv.end(), args.begin(), args.end());
    return sf::test::run_process(argv, {}, dir.path + "/jvm", timeout);
}

// "name=N" out of the agent's "events: A=1 B=2" summary list; -1 when absent.
int64_t summary_count(const std::string& log, const std::string& name) {
    std::smatch m;
    if (!std::regex_search(log, m, std::regex("events: .*\\b" + name + "=([0-9]+)"))) return -1;
    return std::stoll(m[1]);
}

nlohmann::json dump_json(const std::string& recording) {
    const sf::test::CommandResult r = sf::test::run_shell(kCli + " dump --json '" + recording + "' 2>/dev/null");
    INFO(r.output.substr(0, 2000));
    REQUIRE(r.exit_code == 0);
    return nlohmann::json::parse(r.output);
}

// A recording reads to its end without damage, and every json profile loads with `query`.
void check_outputs_complete(const std::string& recording, const std::string& profile) {
    const nlohmann::json dumped = dump_json(recording);
    CHECK((!dumped.contains("damage") || dumped["damage"].is_null()));
    CHECK(dumped["samples"].get<uint64_t>() > 0);
    const sf::test::CommandResult query = sf::test::run_shell(kCli + " query '" + profile + "' --top 3 2>&1");
    INFO(query.output);
    CHECK(query.exit_code == 0);
    sf::Result<sf::profile::Cct> loaded = sf::profile::read_profile(profile);
    REQUIRE(loaded.ok());
    CHECK(loaded->total_samples() > 0);
}

}  // namespace

TEST_CASE("rings overflowing at the highest rate: lost samples are counted in the summary and every output, "
          "no code or method event is lost", "[faults]") {
    FaultsDir dir("lost");
    const std::string rec = dir.path + "/run.sfr", live = dir.path + "/live.json";
    // 50us is the option's floor (at perf's own 10us the timer interrupts held a CPU for up to 52 s:
    // kernel::kMinSamplingPeriodNs); two pages hold three 2 KB samples, so the kernel drops many.
    // What the test checks is the accounting, not the time.
    const auto r = run_faults(dir, "interval=50us,ring=2,stack=2048,record=" + rec + ",file=" + live, {"busy", "4", "2500"},
                              300);
    INFO(r.err);
    REQUIRE(r.exit_code == 0);

    std::smatch m;
    REQUIRE(std::regex_search(r.err, m, std::regex("summary: ([0-9]+) samples, ([0-9]+) lost.*, ([0-9]+) events dropped")));
    const uint64_t samples = std::stoull(m[1]), kernel_lost = std::stoull(m[2]), events_dropped = std::stoull(m[3]);
    REQUIRE(std::regex_search(r.err, m, std::regex("lost ([0-9]+) \\(kernel\\), ([0-9]+) \\(live queue full\\)")));
    const uint64_t stop_kernel = std::stoull(m[1]), queue_full = std::stoull(m[2]);
    std::printf("faults: 50us, ring=2, 4 busy threads: %llu samples, %llu lost by the kernel, %llu dropped by the live queue\n",
                static_cast<unsigned long long>(samples), static_cast<unsigned long long>(kernel_lost),
                static_cast<unsigned long long>(queue_full));
    CHECK(kernel_lost > 0);
    CHECK(stop_kernel == kernel_lost);
    CHECK(events_dropped == 0);   // the agent's own event queue: code, methods, threads
    CHECK_FALSE(contains(r.err, "code events dropped"));

    // The recording holds every event the agent counted: nothing announced by the VM went missing.
    const nlohmann::json dumped = dump_json(rec);
    for (const char* kind : {"code_load", "code_unload", "method", "stub", "vm_info", "thread", "module", "lost"}) {
        INFO(kind);
        const int64_t agent_count = summary_count(r.err, kind);
        const uint64_t recorded = dumped["events"].value(kind, uint64_t{0});
        CHECK(static_cast<int64_t>(recorded) == std::max<int64_t>(agent_count, 0));
    }
    CHECK(summary_count(r.err, "code_load") > 0);
    CHECK(summary_count(r.err, "method") > 0);

    // The live json says what it is missing; the offline outputs say what the kernel lost.
    sf::Result<sf::profile::Cct> profile = sf::profile::read_profile(live);
    REQUIRE(profile.ok());
    CHECK(profile->info().lost_samples == kernel_lost + queue_full);
    for (const std::string& out : {dir.path + "/off.html", dir.path + "/off.pb.gz", dir.path + "/off.json"}) {
        const sf::test::CommandResult report = sf::test::run_shell(kCli + " report '" + rec + "' -o '" + out + "' 2>&1");
        INFO(report.output);
        REQUIRE(report.exit_code == 0);
    }
    const std::string lost_text = std::to_string(kernel_lost) + " samples lost";
    CHECK(contains(sf::test::read_text_file(dir.path + "/off.html"), lost_text));
    CHECK(sf::test::run_shell("gzip -dc '" + dir.path + "/off.pb.gz' | grep -ac '" + lost_text + "'").output != "0\n");
    sf::Result<sf::profile::Cct> offline = sf::profile::read_profile(dir.path + "/off.json");
    REQUIRE(offline.ok());
    CHECK(offline->info().lost_samples == kernel_lost);
}

TEST_CASE("10,000 short-lived threads at 1 kHz leave no descriptor and no memory behind", "[faults]") {
    FaultsDir dir("churn");
    const auto r = run_faults(dir, "mode=thread,interval=1ms,file=" + dir.path + "/churn.json", {"churn", "10000", "50"}, 240);
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    std::smatch m;
    REQUIRE(std::regex_search(r.out, m,
                              std::regex("fds_before=([0-9]+) fds_after=([0-9]+) rss_kb_before=([0-9]+) "
                                         "rss_kb_after=([0-9]+) threads_before=([0-9]+) threads_after=([0-9]+)")));
    const long fds_before = std::stol(m[1]), fds_after = std::stol(m[2]);
    const long rss_before = std::stol(m[3]), rss_after = std::stol(m[4]);
    const long threads_before = std::stol(m[5]), threads_after = std::stol(m[6]);
    std::printf("faults: 10,000 threads in batches of 50 at 1 kHz: fds %ld -> %ld, RSS %ld KB -> %ld KB, "
                "live threads %ld -> %ld (%.1f s)\n",
                fds_before, fds_after, rss_before, rss_after, threads_before, threads_after, r.wall_seconds);
    // Each sampled thread had a perf event descriptor; all of them are closed again (a leak would be
    // thousands). Threads still alive keep theirs, and a few descriptors are opened once, lazily:
    // libunwind's memory-validation pipe (2) at the first native frame the decoder unwinds, which
    // may come only during the churn (seen: fds 18 -> 21 with the pipe, live threads 23 -> 23).
    CHECK(fds_after <= fds_before + 4 + std::max(0L, threads_after - threads_before));
    // The heap may still grow into its reserve and code be compiled: a leak of even 1 KB per thread
    // (10 MB) would still pass 32 MB, one of 4 KB would not.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
    // Under scripts/sanitize.sh the JVM runs with a sanitizer runtime whose allocator holds freed
    // memory back (ASan's quarantine, 256 MB by default; TSan's caches and shadow): RSS says nothing
    // about leaks there (the unit tests run LeakSanitizer).
    WARN("sanitizer build: the RSS bound is not checked (RSS " << rss_before << " -> " << rss_after << " KB)");
#else
    CHECK(rss_after <= rss_before + 32 * 1024);
#endif
    const std::string summary = r.err.substr(r.err.find("summary:"));
    CHECK(std::regex_search(summary, m, std::regex("([0-9]+) rings opened")));
    CHECK(std::stoul(m[1]) >= 10000);
}

TEST_CASE("the JVM exiting while the reader is busy leaves complete outputs", "[faults]") {
    FaultsDir dir("exit");
    // halt runs no shutdown hooks, but HotSpot still posts VMDeath before it ends the process.
    for (const std::string how : {"exit", "halt"}) {
        INFO(how);
        const std::string rec = dir.path + "/" + how + ".sfr", live = dir.path + "/" + how + ".json";
        const auto r = run_faults(dir, "interval=100us,record=" + rec + ",file=" + live, {how, "8", "1500"});
        INFO(r.err);
        CHECK(r.exit_code == 0);
        CHECK(contains(r.out, "exiting with " + how));
        CHECK(contains(r.err, "profile written to " + live));
        CHECK(contains(r.err, "stop summary"));
        check_outputs_complete(rec, live);
    }
}

TEST_CASE("a full output location: the error names the file and why, the JVM runs on, the profile is kept "
          "for the next write and an attach dump", "[faults]") {
    FaultsDir dir("full");
    // A 4 MB tmpfs, filled before the JVM starts, mounted in a mount namespace of the JVM's own
    // (unshare -m as root; a user namespace otherwise) so it goes away with the JVM. Once the
    // filler is gone the whole profile must fit: with native frames named (long C++ names), 256 KB
    // was too small under ASan, where the writes went on failing after the space came back.
    const bool root = geteuid() == 0;
    if (sf::test::run_shell(std::string("unshare ") + (root ? "-m" : "-rm") + " true 2>&1").exit_code != 0) {
        WARN("SKIPPED: neither root nor user namespaces here; cannot mount a full file system");
        return;
    }
    const std::string full = dir.path + "/full";
    std::filesystem::create_directory(full);
    const std::string java = kJava + " -agentpath:" + kAgent + "=interval=1ms,loop=1s,file=" + full +
                             "/prof.json -cp " + dir.path + " Faults busy 2 9000";
    const std::string script = "mount -t tmpfs -o size=4m tmpfs " + full + " && (dd if=/dev/zero of=" + full +
                               "/filler bs=4k >/dev/null 2>&1; true) && exec " + sf::test::java_preload_prefix() + java;
    sf::test::BackgroundProcess jvm({"/usr/bin/unshare", root ? "-m" : "-rm", "/bin/sh", "-c", script}, dir.path + "/jvm");
    const pid_t pid = jvm.pid();   // unshare and sh exec: this is the JVM
    auto err = [&] { return jvm.err(); };

    // Two rotations fail for want of space.
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    auto failures = [&] {
        const std::string text = err();
        size_t n = 0;
        for (size_t at = text.find("No space left on device"); at != std::string::npos;
             at = text.find("No space left on device", at + 1)) {
            ++n;
        }
        return n;
    };
    while (failures() < 2) {
        INFO(err());
        REQUIRE(std::chrono::steady_clock::now() < deadline);
        REQUIRE(jvm.running());
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    CHECK(contains(err(), "cannot write the profile: cannot write " + full + "/prof.json"));
    CHECK(contains(err(), "its samples stay in memory"));

    uint64_t dumped_samples = 0;
    if (root) {
        // An attach dump to a writable place has everything sampled so far.
        const std::string dumped = dir.path + "/dump.json";
        const sf::test::CommandResult attach =
            sf::test::run_shell(kCli + " attach " + std::to_string(pid) + " dump -f " + dumped + " 2>&1");
        INFO(attach.output << err());
        CHECK(attach.exit_code == 0);
        sf::Result<sf::profile::Cct> profile = sf::profile::read_profile(dumped);
        REQUIRE(profile.ok());
        dumped_samples = profile->total_samples();
        CHECK(dumped_samples > 0);
        // It spans the intervals whose writes failed, not only the current one.
        CHECK(profile->info().duration_ns > 2'000'000'000);
    } else {
        WARN("attach dump not checked: the JVM runs in a user namespace");
    }

    // Space again: the next rotation writes everything since the start, the dump's samples included.
    const std::string inside = "/proc/" + std::to_string(pid) + "/root" + full;
    REQUIRE(::unlink((inside + "/filler").c_str()) == 0);
    const auto deadline2 = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (!contains(err(), "profile written to " + full + "/prof.json")) {
        INFO(err());
        REQUIRE(std::chrono::steady_clock::now() < deadline2);
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    sf::Result<sf::profile::Cct> rotated = sf::profile::read_profile(inside + "/prof.json");
    REQUIRE(rotated.ok());
    CHECK(rotated->total_samples() >= dumped_samples);
    CHECK(rotated->info().duration_ns > 2'000'000'000);
    std::printf("faults: full disk: %zu failed writes; attach dump %llu samples; first file written %llu samples over %llu ms\n",
                failures(), static_cast<unsigned long long>(dumped_samples),
                static_cast<unsigned long long>(rotated->total_samples()),
                static_cast<unsigned long long>(rotated->info().duration_ns / 1'000'000));

    const int exit_code = jvm.wait(60);
    INFO(err());
    CHECK(exit_code == 0);
    CHECK(contains(err(), "stop summary"));
}
