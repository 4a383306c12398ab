// `stackfrag attach` against a real JDK 17 JVM: the HotSpot attach handshake (trigger file,
// SIGQUIT, socket, load request, reply code) and the agent's answer through the reply file.
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include "agent_process.hpp"
#include "replay_json.hpp"
#include "shell.hpp"
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>
#include "test_env.hpp"

extern char** environ;

namespace {

const std::string kJava17 = sf::test::kJdk17 + "/bin/java";
const std::string kCli = STACKFRAG_BINARY_DIR "/bin/stackfrag";

using sf::test::CommandResult;
CommandResult shell(const std::string& command) { return sf::test::run_shell(command); }

std::string slurp(const std::string& path) {
    std::ifstream in(path);
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
}

// A JVM that spins a little and sleeps for `seconds`, started from a single source file; it
// prints "ready" once main() runs, which is when the attach listener can start.
class SleepingJvm {
public:
    explicit SleepingJvm(int seconds, const std::vector<std::string>& jvm_options = {}) {
        char tmpl[] = "/tmp/sf-attach-test.XXXXXX";
        REQUIRE(::mkdtemp(tmpl) != nullptr);
        dir_ = tmpl;
        std::ofstream(dir_ + "/Sleeper.java")
            << "public class Sleeper { static volatile long sink;\n"
               "  public static void main(String[] a) throws Exception {\n"
               "    System.out.println(\"ready\"); System.out.flush();\n"
               "    long end = System.nanoTime() + " << seconds << "L * 1000000000L;\n"
               "    while (System.nanoTime() < end) { for (int i = 0; i < 1000000; i++) sink += i * 31; Thread.sleep(5); }\n"
               "  } }\n";
        std::vector<std::string> argv{kJava17, "-Xshare:auto"};
        argv.insert(argv.end(), jvm_options.begin(), jvm_options.end());
        argv.push_back(dir_ + "/Sleeper.java");
        std::vector<char*> args;
        for (auto& a : argv) args.push_back(a.data());
        args.push_back(nullptr);
        posix_spawn_file_actions_t actions;
        posix_spawn_file_actions_init(&actions);
        posix_spawn_file_actions_addopen(&actions, 1, (dir_ + "/out").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
        posix_spawn_file_actions_addopen(&actions, 2, (dir_ + "/err").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
        posix_spawn_file_actions_addchdir_np(&actions, dir_.c_str());
        std::vector<std::string> env_text = sf::test::java_environment();
        std::vector<char*> envp;
        for (std::string& e : env_text) envp.push_back(e.data());
        envp.push_back(nullptr);
        REQUIRE(::posix_spawn(&pid_, kJava17.c_str(), &actions, nullptr, args.data(), envp.data()) == 0);
        posix_spawn_file_actions_destroy(&actions);
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
        while (slurp(dir_ + "/out").find("ready") == std::string::npos) {
            REQUIRE(std::chrono::steady_clock::now() < deadline);
            int status = 0;
            REQUIRE(::waitpid(pid_, &status, WNOHANG) == 0);   // still running
            std::this_thread::sleep_for(std::chrono::milliseconds(50));
        }
    }
    ~SleepingJvm() {
        ::kill(pid_, SIGKILL);
        ::waitpid(pid_, nullptr, 0);
        std::system(("rm -rf '" + dir_ + "'").c_str());
    }
    pid_t pid() const { return pid_; }
    const std::string& dir() const { return dir_; }
    std::string err() const { return slurp(dir_ + "/err"); }
    bool running() const { return ::waitpid(pid_, nullptr, WNOHANG) == 0; }

private:
    std::string dir_;
    pid_t pid_ = -1;
};

std::string attach(pid_t pid, const std::string& rest) {
    return kCli + " attach " + std::to_string(pid) + " " + rest + " 2>&1";
}

}  // namespace

TEST_CASE("attach status: the JVM loads the agent and the agent answers") {
    SleepingJvm jvm(20);
    const CommandResult status = shell(attach(jvm.pid(), "status -v --timeout 30"));
    INFO(status.output);
    INFO(jvm.err());
    CHECK(status.output.find("sending SIGQUIT") != std::string::npos);
    CHECK(status.output.find("load ") != std::string::npos);
    REQUIRE(status.exit_code == 0);
    CHECK(status.output.find("running: no") != std::string::npos);
    CHECK(status.output.ends_with("ok\n"));
    CHECK(jvm.running());
    // No files left behind in the JVM's cwd or /tmp.
    CHECK(::access((jvm.dir() + "/.attach_pid" + std::to_string(jvm.pid())).c_str(), F_OK) != 0);
    // This JVM's reply directories only: other tests may be attaching to theirs meanwhile (ctest -j).
    CHECK(shell("ls -d /tmp/stackfrag-attach." + std::to_string(jvm.pid()) + ".* 2>/dev/null | wc -l").output == "0\n");

    // The listener is up now: a second request goes straight to the socket.
    const CommandResult again = shell(attach(jvm.pid(), "status -v --timeout 30"));
    INFO(again.output);
    CHECK(again.output.find("sending SIGQUIT") == std::string::npos);
    CHECK(again.exit_code == status.exit_code);
}

TEST_CASE("attach start, dump and stop write a profile") {
    SleepingJvm jvm(30);
    const std::string profile = jvm.dir() + "/dump.json";
    const CommandResult start = shell(attach(jvm.pid(), "start -i 1ms --timeout 30"));
    INFO(start.output);
    REQUIRE(start.exit_code == 0);
    std::this_thread::sleep_for(std::chrono::seconds(2));
    const CommandResult dump = shell(attach(jvm.pid(), "dump -f " + profile + " --timeout 30"));
    INFO(dump.output);
    REQUIRE(dump.exit_code == 0);
    CHECK(slurp(profile).find("\"root\"") != std::string::npos);
    const CommandResult stop = shell(attach(jvm.pid(), "stop --timeout 30"));
    INFO(stop.output);
    CHECK(stop.exit_code == 0);
    CHECK(stop.output.find("stop summary") != std::string::npos);
    // mode=auto (the default) on attach: per-CPU inheriting events would miss the threads already
    // running, so per-thread events, and the reply says why.
    CHECK(stop.output.find("mode: thread (mode=auto: attached to a running JVM") != std::string::npos);
    CHECK(jvm.running());

    // An action the agent refuses ends in "error:" and a non-zero exit.
    const CommandResult again = shell(attach(jvm.pid(), "dump -f " + jvm.dir() + "/x.unknown --timeout 30"));
    INFO(again.output);
    CHECK(again.exit_code == 1);
}

TEST_CASE("attach: samples taken during the agent's scan find the compiled code, and stop -f without a live "
          "profile says where the profile comes from") {
    // Sampling starts before the agent's scan of the VM (its classes, then GenerateEvents), which
    // took ~300 ms on a 4-thread program; the compiled code it announced was stamped when its event
    // came, after those samples: 500-600 of ~10,800 samples of this JVM (100 us, 1 s) met code no
    // event had announced and were not resolved by the retry, against 0-3 with the code present at
    // the scan's start stamped then.
    SleepingJvm jvm(30);
    const std::string recording = jvm.dir() + "/attach.sfr";
    const std::string profile = jvm.dir() + "/attach.html";
    const CommandResult start = shell(attach(jvm.pid(), "start -i 100us --record " + recording + " --timeout 30"));
    INFO(start.output);
    REQUIRE(start.exit_code == 0);
    std::this_thread::sleep_for(std::chrono::seconds(1));
    const CommandResult stop = shell(attach(jvm.pid(), "stop -f " + profile + " --timeout 30"));
    INFO(stop.output);
    CHECK(stop.exit_code == 1);
    CHECK(stop.output.find("stopped") != std::string::npos);
    CHECK(stop.output.find("no profile written to " + profile) != std::string::npos);
    CHECK(stop.output.find("stackfrag report " + recording) != std::string::npos);
    CHECK(::access(profile.c_str(), F_OK) != 0);
    CHECK(jvm.running());

    const nlohmann::json replay = sf::test::replay_json(recording, jvm.dir());
    const uint64_t samples = replay["samples"].get<uint64_t>();
    const uint64_t unresolved = replay["retried"]["samples"].get<uint64_t>() - replay["retried"]["resolved"].get<uint64_t>();
    INFO(replay.dump());
    REQUIRE(samples > 1000);
    CHECK(unresolved * 200 <= samples);   // at most 0.5 %
    CHECK(sf::test::failed_samples(replay) * 200 <= samples);
}

TEST_CASE("attach refuses a process that is not a JVM, without signalling it") {
    pid_t child = ::fork();
    REQUIRE(child >= 0);
    if (child == 0) {
        ::execl("/bin/sleep", "sleep", "30", nullptr);
        ::_exit(127);
    }
    const CommandResult result = shell(attach(child, "status"));
    CHECK(result.exit_code == 2);
    CHECK(result.output.find("not a HotSpot JVM") != std::string::npos);
    CHECK(::waitpid(child, nullptr, WNOHANG) == 0);   // SIGQUIT would have ended sleep
    ::kill(child, SIGKILL);
    ::waitpid(child, nullptr, 0);
}

TEST_CASE("attach gives up with a reason when the JVM has attach disabled") {
    SleepingJvm jvm(20, {"-XX:+DisableAttachMechanism"});
    const CommandResult result = shell(attach(jvm.pid(), "status --timeout 2"));
    INFO(result.output);
    CHECK(result.exit_code == 2);
    CHECK(result.output.find("DisableAttachMechanism") != std::string::npos);
    CHECK(jvm.running());
}
