// The agent's live profile on real JVMs (JDK 17): the live profile equals `stackfrag replay` of the
// same run's recording; profiles in all four formats at exit with the stop summary; attach
// start/status/dump/stop through `jcmd JVMTI.agent_load` with reply files; and the unloading test
// (classes and compiled code churned while sampling, checked against AsyncGetCallTrace).
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "agent_process.hpp"
#include "stackfrag/profile/export.hpp"
#include "test_env.hpp"

extern char** environ;

namespace {

const std::string kAgent = STACKFRAG_BINARY_DIR "/lib/libstackfrag.so";
const std::string kCli = STACKFRAG_BINARY_DIR "/bin/stackfrag";
using sf::test::kJdk17;
const std::string kJava = kJdk17 + "/bin/java";

std::string temp_dir(const std::string& tag) { return sf::test::temp_dir("live-it-" + tag); }

// javac SOURCE into DIR once per test.
void javac(const std::string& source, const std::string& dir) {
    const sf::test::ProcessResult r =
        sf::test::run_process({kJdk17 + "/bin/javac", "-d", dir, source}, {}, dir + "/javac", 120);
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
}

std::string demo_classes(const std::string& dir) {
    javac(STACKFRAG_SOURCE_DIR "/demo/java/demo/Demo.java", dir);
    return dir;
}

sf::test::ProcessResult run_java(const std::vector<std::string>& args, const std::string& prefix, int timeout = 120) {
    std::vector<std::string> argv{kJava};
    argv.insert(argv.end(), args.begin(), args.end());
    return sf::test::run_process(argv, {}, prefix, timeout);
}

using sf::test::contains;

std::string reply_file(const std::string& dir, const std::string& name) {
    const std::string path = dir + "/" + name;
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL, 0600);
    REQUIRE(fd >= 0);
    ::close(fd);
    return path;
}

// jcmd PID JVMTI.agent_load AGENT OPTIONS; the answer is in the reply file. jcmd's own parser
// takes name=value apart unless the argument is quoted inside: the options go in double quotes.
std::string agent_command(pid_t pid, const std::string& options, const std::string& reply, const std::string& dir) {
    const sf::test::ProcessResult r = sf::test::run_process(
        {kJdk17 + "/bin/jcmd", std::to_string(pid), "JVMTI.agent_load", kAgent, "\"" + options + "\""}, {}, dir + "/jcmd", 60);
    INFO("jcmd: " << r.out << r.err);
    REQUIRE(r.exit_code == 0);
    return sf::test::read_text_file(reply);
}

}  // namespace

TEST_CASE("the live profile equals stackfrag replay of the same run's recording", "[live]") {
    const std::string dir = temp_dir("replay");
    demo_classes(dir);
    const std::string rec = dir + "/run.sfr", live = dir + "/live.collapsed", replayed = dir + "/replay.collapsed";
    const auto r = run_java({"-agentpath:" + kAgent + "=record=" + rec + ",file=" + live, "-cp", dir, "demo.Demo", "2"},
                            dir + "/jvm");
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    const auto replay = sf::test::run_process({kCli, "replay", rec, "--collapsed", replayed}, {}, dir + "/replay", 120);
    REQUIRE(replay.exit_code == 0);
    const std::string live_text = sf::test::read_text_file(live);
    REQUIRE(!live_text.empty());
    // Equal unless the live decoder fell so far behind that its queue dropped samples (a loaded
    // machine); the summary says how many.
    std::smatch m;
    REQUIRE(std::regex_search(r.err, m, std::regex("(\\d+) \\(live queue full\\)")));
    if (m[1] == "0") {
        CHECK(live_text == sf::test::read_text_file(replayed));
    } else {
        WARN("the live queue dropped " << m[1] << " samples; live and replay not compared");
    }
    // Not only equal but meaningful: the demo's own methods are in it.
    CHECK(contains(live_text, "demo/Demo."));
    // Coverage comes from the stream: the stop summary's line is replay's, and has a ratio.
    std::smatch coverage;
    REQUIRE(std::regex_search(r.err, coverage, std::regex("coverage [^\n]*")));
    CHECK(contains(replay.out, coverage.str() + "\n"));
    CHECK(coverage.str().starts_with("coverage "));
    CHECK_FALSE(contains(coverage.str(), "unknown"));
    std::filesystem::remove_all(dir);
}

TEST_CASE("sampling begins before the agent's code-map scan, and the CPU time before it and after the last sample "
          "is reported apart", "[live][coverage]") {
    const std::string dir = temp_dir("start");
    demo_classes(dir);
    const std::string rec = dir + "/run.sfr", live = dir + "/live.collapsed";
    const auto r = run_java({"-agentpath:" + kAgent + "=interval=100us,record=" + rec + ",file=" + live, "-cp", dir,
                             "demo.Demo", "1"},
                            dir + "/jvm");
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    // The scan runs on the VMInit thread for tens of ms; its samples were never taken while the
    // events opened after it.
    const std::string profile = sf::test::read_text_file(live);
    CHECK(contains(profile, "sf::agent::VmCapture::scan"));
    CHECK(contains(r.err, "before sampling began"));
    CHECK(contains(r.err, "after the last sample: stopping and writing the profile took"));
    const auto replay = sf::test::run_process({kCli, "replay", rec, "--json"}, {}, dir + "/replay", 120);
    REQUIRE(replay.exit_code == 0);
    const nlohmann::json coverage = nlohmann::json::parse(replay.out).at("coverage");
    INFO(coverage.dump());
    REQUIRE(coverage.at("process_cpu_before_sampling_ns").is_number());
    const uint64_t before = coverage.at("process_cpu_before_sampling_ns").get<uint64_t>();
    CHECK(before > 0);
    CHECK(before < coverage.at("process_cpu_ns").get<uint64_t>());
    std::filesystem::remove_all(dir);
}

TEST_CASE("sampling begins at the agent's load: the JVM's start before VMInit is in the profile, decoded, in both "
          "modes", "[live][coverage]") {
    const std::string mode = GENERATE("thread", "cpu");
    const std::string dir = temp_dir("early-" + mode);
    demo_classes(dir);
    const std::string rec = dir + "/run.sfr", live = dir + "/live.collapsed";
    const auto r = run_java({"-agentpath:" + kAgent + "=interval=100us,mode=" + mode + ",record=" + rec + ",file=" + live,
                             "-cp", dir, "demo.Demo", "1"},
                            dir + "/jvm");
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    // The VM's initialisation (heap, stubs, the interpreter, the first classes) runs on the thread
    // that loaded the agent, between its load and VMInit: native frames of libjvm under
    // Threads::create_vm, not the agent's own work at VMInit (post_vm_initialized).
    uint64_t start_samples = 0;
    std::istringstream lines(sf::test::read_text_file(live));
    for (std::string line; std::getline(lines, line);) {
        if (contains(line, "Threads::create_vm") && !contains(line, "post_vm_initialized")) {
            start_samples += std::stoull(line.substr(line.rfind(' ') + 1));
        }
    }
    CHECK(start_samples >= 20);   // ~30 ms of the main thread's CPU time at 100 us
    std::smatch m;
    REQUIRE(std::regex_search(r.err, m, std::regex("stop summary: (\\d+) samples taken; decoded ([0-9.]+)% .*failed ([0-9.]+)%")));
    CHECK(std::stod(m[3]) < 1.0);   // the held samples decode once the VM is announced
    // The CPU time before sampling is the process's before the agent's load: a few ms, not the
    // tens of ms up to VMInit.
    const auto replay = sf::test::run_process({kCli, "replay", rec, "--json"}, {}, dir + "/replay", 120);
    REQUIRE(replay.exit_code == 0);
    const nlohmann::json coverage = nlohmann::json::parse(replay.out).at("coverage");
    INFO(coverage.dump());
    const uint64_t before = coverage.at("process_cpu_before_sampling_ns").get<uint64_t>();
    CHECK(before > 0);
    // Less than the start's sampled time, with the samples the rings lost counted in: on a loaded
    // machine mode=cpu at 100 us lost half of them (the start's 334 kept samples stood for ~65 ms,
    // the CPU time before the load was 35 ms).
    const double samples = coverage.at("samples").get<double>();
    const double lost = coverage.at("lost_samples").get<double>();
    REQUIRE(samples > 0);
    CHECK(static_cast<double>(before) < static_cast<double>(start_samples) * 100'000 * (samples + lost) / samples);
    // The live profile is what replay makes of the recording, early samples included.
    const auto replayed = sf::test::run_process({kCli, "replay", rec, "--collapsed", dir + "/replay.collapsed"}, {},
                                                dir + "/replay2", 120);
    REQUIRE(replayed.exit_code == 0);
    if (!std::regex_search(r.err, m, std::regex("(\\d+) \\(live queue full\\)")) || m[1] == "0") {
        CHECK(sf::test::read_text_file(dir + "/replay.collapsed") == sf::test::read_text_file(live));
    }
    std::filesystem::remove_all(dir);
}

TEST_CASE("the reader keeps of each fragment only what the live decoder's walks of its thread read", "[live]") {
    const std::string dir = temp_dir("cut");
    demo_classes(dir);
    // KiB per sample the kernel wrote and the reader kept, and the threads cut, from the log.
    auto run = [&](const std::string& options) {
        const auto r = run_java({"-agentpath:" + kAgent + "=" + options, "-cp", dir, "demo.Demo", "2"}, dir + "/jvm");
        INFO(options << "\n" << r.err);
        REQUIRE(r.exit_code == 0);
        std::smatch m;
        REQUIRE(std::regex_search(r.err, m, std::regex("stack per sample ([0-9.]+) KiB from the kernel, ([0-9.]+) KiB kept")));
        return std::make_pair(std::stod(m[2]), r.err);
    };
    // A recording alone has no live decoder: fragments are cut at the threads' tops only.
    const std::string recorded_log = run("record=" + dir + "/run.sfr").second;
    CHECK_FALSE(contains(recorded_log, "fragments cut where the walks stop reading"));
    const std::string live_log = run("file=" + dir + "/live.collapsed,loglevel=debug").second;
    std::smatch m;
    REQUIRE(std::regex_search(live_log, m, std::regex("fragments cut where the walks stop reading [^:]*: (\\d+) threads")));
    CHECK(std::stoul(m[1]) >= 2);   // the demo's main thread and the JIT's at least
    // Each cut lies above the sample that taught it, within the largest fragment perf copies.
    // (How many bytes it saves against a run without a live profile varies with which threads
    // show the process's gap early: 5.4-7.6 against 7.5-8.5 KiB a sample on the demo; the unit
    // test over the recorded workloads measures the bytes.)
    size_t cuts = 0;
    const std::regex cut_line("stack cut: thread \\d+ '[^']*' cut at 0x([0-9a-f]+) \\(sp 0x([0-9a-f]+), complete\\)");
    for (auto it = std::sregex_iterator(live_log.begin(), live_log.end(), cut_line); it != std::sregex_iterator(); ++it) {
        const uint64_t at = std::stoull((*it)[1].str(), nullptr, 16), sp = std::stoull((*it)[2].str(), nullptr, 16);
        CHECK(at > sp);
        CHECK(at - sp <= 65536);
        ++cuts;
    }
    CHECK(cuts >= 2);
    // Nothing lost for it: every sample decodes as before.
    REQUIRE(std::regex_search(live_log, m, std::regex("stop summary: \\d+ samples taken; decoded ([0-9.]+)% .*incomplete ([0-9.]+)%")));
    CHECK(std::stod(m[1]) > 99.0);
    CHECK(std::stod(m[2]) < 0.5);
    std::filesystem::remove_all(dir);
}

TEST_CASE("profiles in every format at exit, with the stop summary in the log", "[live]") {
    const std::string dir = temp_dir("formats");
    demo_classes(dir);
    for (const std::string ending : {".collapsed", ".html", ".pb.gz", ".json"}) {
        const std::string out = dir + "/profile-%p" + ending;
        const auto r = run_java({"-agentpath:" + kAgent + "=file=" + out + ",title=Demo live", "-cp", dir, "demo.Demo", "1"},
                                dir + "/jvm");
        INFO(ending << "\n" << r.err);
        REQUIRE(r.exit_code == 0);
        std::smatch m;
        REQUIRE(std::regex_search(r.err, m, std::regex("profile written to (\\S+) \\((\\d+) samples\\)")));
        const std::string written = m[1];
        CHECK(std::regex_match(written, std::regex(dir + "/profile-[0-9]+" + std::regex_replace(ending, std::regex("\\."), "\\."))));
        CHECK(std::filesystem::file_size(written) > 100);
        CHECK(std::stoul(m[2]) > 100);
        // The stop summary: one block with decode rates and the hottest methods.
        REQUIRE(std::regex_search(r.err, m, std::regex("stop summary: (\\d+) samples taken; decoded ([0-9.]+)% .*")));
        CHECK(std::stod(m[2]) > 90.0);
        CHECK(contains(r.err, "top methods by self samples:"));
        if (ending == ".json" || ending == ".collapsed") {
            auto cct = sf::profile::read_profile(written);
            REQUIRE(cct.ok());
            CHECK(cct->total_samples() > 100);
        }
        if (ending == ".html") CHECK(contains(sf::test::read_text_file(written), "Demo live"));
        std::filesystem::remove(written);
    }
    std::filesystem::remove_all(dir);
}

TEST_CASE("without a recording, methods are named on demand and the profile at exit names every one", "[live]") {
    const std::string dir = temp_dir("lazy-names");
    demo_classes(dir);
    const std::string live = dir + "/live.collapsed";
    const auto r = run_java({"-agentpath:" + kAgent + "=file=" + live + ",loglevel=info", "-cp", dir, "demo.Demo", "2"},
                            dir + "/jvm");
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    std::smatch m;
    REQUIRE(std::regex_search(r.err, m, std::regex("method names on demand: (\\d+) methods announced, (\\d+) named for the "
                                                   "profile, (\\d+) no longer known")));
    const unsigned long announced = std::stoul(m[1]), named = std::stoul(m[2]);
    CHECK(named > 10);
    CHECK(named * 5 < announced);   // a profile refers to a few per cent of what a run loads
    const std::string text = sf::test::read_text_file(live);
    CHECK(contains(text, "demo/Demo."));
    CHECK_FALSE(contains(text, "[unknown_method"));
    // The own threads' CPU time until the last sample is part of their whole time, the stop's work
    // (the last decode, the names read at the stop, the file) the rest.
    std::smatch total, sampling;
    REQUIRE(std::regex_search(r.err, total, std::regex("agent threads CPU: ([0-9.]+) ms")));
    REQUIRE(std::regex_search(r.err, sampling, std::regex("agent threads CPU while sampling: ([0-9.]+) ms = ([0-9.]+)% "
                                                          "of the process's ([0-9]+) ms until the last sample; the "
                                                          "stop \\([^)]*\\) took them ([0-9.]+) ms more")));
    CHECK(std::stod(sampling[1]) > 0);
    CHECK(std::stod(sampling[1]) <= std::stod(total[1]) + 0.1);
    CHECK(std::stod(sampling[1]) + std::stod(sampling[4]) == Approx(std::stod(total[1])).margin(0.2));
    // A recording keeps announcing every method with its names, as replay and filters need them.
    const auto recorded = run_java({"-agentpath:" + kAgent + "=record=" + dir + "/r.sfr,file=" + live + ",loglevel=info",
                                    "-cp", dir, "demo.Demo", "1"},
                                   dir + "/jvm2");
    REQUIRE(recorded.exit_code == 0);
    CHECK_FALSE(contains(recorded.err, "method names on demand"));
    std::filesystem::remove_all(dir);
}

TEST_CASE("attach: start, status, dump and stop through jcmd JVMTI.agent_load, answered in reply files", "[live][attach]") {
    const std::string dir = temp_dir("attach");
    demo_classes(dir);
    // The JVM runs without the agent; it is loaded into it later.
    // The attach listener from the start, so jcmd never has to wake it with SIGQUIT (which would
    // end a JVM still starting on a loaded machine); its socket says the JVM is ready.
    std::vector<std::string> args{kJava, "-XX:+StartAttachListener", "-cp", dir, "demo.Demo", "30"};
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 2, (dir + "/jvm.err").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
    std::vector<std::string> env_text = sf::test::java_environment();
    std::vector<char*> envp;
    for (std::string& e : env_text) envp.push_back(e.data());
    envp.push_back(nullptr);
    pid_t pid = 0;
    REQUIRE(posix_spawn(&pid, kJava.c_str(), &actions, nullptr, argv.data(), envp.data()) == 0);
    posix_spawn_file_actions_destroy(&actions);
    struct Reaper {
        pid_t pid;
        ~Reaper() {
            kill(pid, SIGKILL);
            waitpid(pid, nullptr, 0);
        }
    } reaper{pid};
    const std::string socket = "/tmp/.java_pid" + std::to_string(pid);
    for (int i = 0; i < 400 && !std::filesystem::exists(socket); ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    REQUIRE(std::filesystem::exists(socket));

    std::string answer = agent_command(pid, "status,reply=" + reply_file(dir, "r0"), dir + "/r0", dir);
    CHECK(answer == "running: no\nok\n");
    answer = agent_command(pid, "dump,file=" + dir + "/x.html,reply=" + reply_file(dir, "r1"), dir + "/r1", dir);
    CHECK(answer == "error: not running\n");

    const std::string final_json = dir + "/final.json";
    answer = agent_command(pid, "start,interval=1ms,file=" + final_json + ",reply=" + reply_file(dir, "r2"), dir + "/r2", dir);
    CHECK(answer.starts_with("started: interval=1000000ns"));
    CHECK(answer.ends_with("\nok\n"));
    std::this_thread::sleep_for(std::chrono::milliseconds(1500));

    answer = agent_command(pid, "status,reply=" + reply_file(dir, "r3"), dir + "/r3", dir);
    CHECK(answer.starts_with("running: yes\nsamples: "));
    CHECK(contains(answer, "file: " + final_json));
    answer = agent_command(pid, "start,reply=" + reply_file(dir, "r4"), dir + "/r4", dir);
    CHECK(contains(answer, "already running"));

    answer = agent_command(pid, "dump,file=" + dir + "/now-%p.collapsed,reply=" + reply_file(dir, "r5"), dir + "/r5", dir);
    const std::string dumped = dir + "/now-" + std::to_string(pid) + ".collapsed";
    CHECK(answer == "written " + dumped + "\nok\n");
    auto now = sf::profile::read_profile(dumped);
    REQUIRE(now.ok());
    CHECK(now->total_samples() > 50);
    CHECK(contains(sf::test::read_text_file(dumped), "demo/Demo."));

    // A bad option is answered, and the agent runs on.
    answer = agent_command(pid, "dump,file=/tmp/x.txt,reply=" + reply_file(dir, "r6"), dir + "/r6", dir);
    CHECK(answer.starts_with("error: bad value '/tmp/x.txt' for file"));
    // The agent never creates a reply file.
    (void)sf::test::run_process({kJdk17 + "/bin/jcmd", std::to_string(pid), "JVMTI.agent_load", kAgent,
                                 "\"status,reply=" + dir + "/missing\""}, {}, dir + "/jcmd", 60);
    CHECK_FALSE(std::filesystem::exists(dir + "/missing"));

    answer = agent_command(pid, "stop,reply=" + reply_file(dir, "r7"), dir + "/r7", dir);
    CHECK(answer.starts_with("stopped\nstop summary: "));
    CHECK(answer.ends_with("\nok\n"));
    auto final_profile = sf::profile::read_profile(final_json);
    REQUIRE(final_profile.ok());
    CHECK(final_profile->total_samples() >= now->total_samples());
    answer = agent_command(pid, "status,reply=" + reply_file(dir, "r8"), dir + "/r8", dir);
    CHECK(answer == "running: no\nok\n");
    // The JVM is unharmed by all of it.
    CHECK(kill(pid, 0) == 0);
    std::filesystem::remove_all(dir);
}
