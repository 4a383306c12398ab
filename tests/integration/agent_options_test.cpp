// The agent in a real JVM, loaded with -agentpath: a bad option keeps the JVM from starting and
// the message names the option; good options let it run and exit normally.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <string>

#include "agent_process.hpp"
#include "agent_recording_summary.hpp"
#include "options.hpp"
#include "test_env.hpp"

namespace {

const std::string kAgent = STACKFRAG_BINARY_DIR "/lib/libstackfrag.so";
const std::string kJava17 = sf::test::kJdk17 + "/bin/java";

sf::test::ProcessResult java_version(const std::string& agent_options) {
    const sf::test::ScratchDir scratch("agent-options");   // the outputs are read into the result
    return sf::test::run_process({kJava17, "-agentpath:" + kAgent + "=" + agent_options, "-version"}, {},
                                 scratch.file("java"), 120);
}

}  // namespace

TEST_CASE("a bad option stops the JVM from starting, naming the option") {
    struct Case {
        const char* options;
        const char* message;
    };
    const Case cases[] = {
        // Later options are appended to the accepted list: check the ones every version has.
        {"bogus=1", "stackfrag: unknown option 'bogus' (accepted: interval, budget, stack, clock, ring, mode, threads, backend, events, record, validate, log, loglevel"},
        {"intervall=1ms", "stackfrag: unknown option 'intervall'"},
        {"interval=fast", "stackfrag: bad value 'fast' for interval: expected a duration of at least 50us (like 100us, 1ms, 10ms), or auto"},
        {"stack=12", "stackfrag: bad value '12' for stack"},
        {"clock=wall", "stackfrag: bad value 'wall' for clock: expected task or cpu"},
        {"ring=3", "stackfrag: bad value '3' for ring"},
        {"depth=0", "stackfrag: bad value '0' for depth: expected a number of frames from 1 to 65536"},
        {"mode=all", "stackfrag: bad value 'all' for mode"},
        {"loglevel=loud", "stackfrag: bad value 'loud' for loglevel"},
        {"log=/nonexistent-dir/x.log", "stackfrag: bad value '/nonexistent-dir/x.log' for log"},
        {"record=/nonexistent-dir/x.sfr", "stackfrag: bad value '/nonexistent-dir/x.sfr' for record"},
    };
    for (const Case& c : cases) {
        INFO("options " << c.options);
        const sf::test::ProcessResult result = java_version(c.options);
        REQUIRE(result.started);
        CHECK_FALSE(result.timed_out);
        CHECK(result.exit_code != 0);
        INFO("stderr: " << result.err);
        CHECK(result.err.find(c.message) != std::string::npos);
    }
}

TEST_CASE("every option of the agent's table refuses a bad value at start, naming the option") {
    // The names come from the table itself, so an option added later is covered without a new line
    // here; each gets the first of these values its parser refuses.
    const std::string names = sf::agent::accepted_option_names();
    size_t checked = 0;
    for (size_t begin = 0; begin < names.size();) {
        const size_t end = std::min(names.find(", ", begin), names.size());
        const std::string name = names.substr(begin, end - begin);
        begin = end + 2;
        std::string item;
        for (const std::string& candidate : {name + "=#bad#", name + "="}) {
            if (!sf::agent::parse_options(candidate).ok()) {
                item = candidate;
                break;
            }
        }
        INFO("option " << name << ", item " << item);
        REQUIRE_FALSE(item.empty());   // an option that accepts anything could not be mistyped
        const sf::test::ProcessResult result = java_version(item);
        REQUIRE(result.started);
        CHECK_FALSE(result.timed_out);
        CHECK(result.exit_code != 0);
        INFO("stderr: " << result.err);
        CHECK(result.err.find("stackfrag: ") != std::string::npos);
        CHECK(result.err.find("for " + name + ": expected") != std::string::npos);
        CHECK(result.err.find("version \"17") == std::string::npos);   // the JVM did not run
        ++checked;
    }
    CHECK(checked >= 20);
}

TEST_CASE("good options let the JVM start and exit normally") {
    const std::string recording = "/tmp/sf-agent-options-" + std::to_string(getpid()) + ".sfr";
    std::remove(recording.c_str());
    for (const std::string& options :
         {std::string(""), std::string("interval=10ms,stack=8192,clock=cpu,ring=64,loglevel=warn"),
          std::string("mode=cpu,record=/dev/null,log=stderr,loglevel=error"),
          "interval=100us,validate,record=" + recording}) {
        INFO("options " << options);
        const sf::test::ProcessResult result = java_version(options);
        INFO("stderr: " << result.err);
        CHECK(result.exit_code == 0);
        CHECK(result.err.find("version \"17") != std::string::npos);
        CHECK(result.err.find("[stackfrag] error") == std::string::npos);
    }
    CHECK(access(recording.c_str(), R_OK) == 0);
    // At the default log level too, the executable files are announced before any sample (native
    // frames need them to be unwound and named); they once were only where debug logging was on.
    const sf::test::RecordingSummary summary = sf::test::summarize_recording(recording);
    REQUIRE(summary.opened);
    CHECK(summary.modules_before_first_sample >= 3);   // java, libjvm, libc at least
    // The recording refuses to overwrite: the user is told, the JVM does not start.
    const sf::test::ProcessResult again = java_version("record=" + recording);
    CHECK(again.exit_code != 0);
    CHECK(again.err.find("bad value '" + recording + "' for record") != std::string::npos);
    std::remove(recording.c_str());
}

// backend=perf: no fallback to signals (agent_signal_backend_test.cpp has backend=auto).
TEST_CASE("without permission to open perf events the JVM runs on unsampled and the log says why, once") {
    const std::string tag = "/tmp/sf-agent-noperm-" + std::to_string(getpid());
    const std::string recording = tag + ".sfr";
    std::remove(recording.c_str());
    const std::map<std::string, std::string> env = {
        {"ITER", "2"}, {"GT_SLICE_MS", "200"}, {"THREADS", "2"},
        {"JAVA_OPTS", "-agentpath:" + kAgent + "=backend=perf,interval=1ms,record=" + recording}};
    const sf::test::ProcessResult run = sf::test::run_process(
        {"/bin/bash", STACKFRAG_SHARED_DIR "/bench/workloads/groundtruth/run.sh"}, env, tag, 300, true);
    INFO("stderr: " << run.err);
    REQUIRE(run.started);
    CHECK_FALSE(run.timed_out);
    CHECK(run.exit_code == 0);
    size_t errors = 0;
    for (size_t at = run.err.find("[stackfrag] error"); at != std::string::npos;
         at = run.err.find("[stackfrag] error", at + 1)) {
        ++errors;
    }
    CHECK(errors == 1);
    CHECK(run.err.find("sampling is off") != std::string::npos);
    CHECK(run.err.find("perf_event_open") != std::string::npos);
    CHECK(run.err.find("perf_event_paranoid") != std::string::npos);   // the hint: what to change

    const sf::test::RecordingSummary summary = sf::test::summarize_recording(recording);
    REQUIRE(summary.opened);
    CHECK_FALSE(summary.damage.has_value());
    CHECK(summary.samples == 0);
    CHECK(summary.vm_infos == 1);
    CHECK(summary.samples_of_threads_named("gt-worker-") == 0);
    bool worker_named = false;
    for (const auto& [tid, thread] : summary.threads) worker_named |= thread.name.rfind("gt-worker-", 0) == 0;
    CHECK(worker_named);
    std::remove(recording.c_str());
    std::remove((tag + ".out").c_str());
    std::remove((tag + ".err").c_str());
}

// mode=auto's fallback when the per-CPU rings cannot be locked: a user without CAP_IPC_LOCK may
// lock kernel.perf_event_mlock_kb per CPU plus RLIMIT_MEMLOCK, and with 64 KB of the latter the
// automatic 1024-page ring per CPU is refused; the agent halves it until it maps and says so once
// in the start line and once in the stop summary.
TEST_CASE("mode=auto: per-CPU rings an unprivileged user cannot lock are shrunk, and the log says so") {
    const std::string paranoid = sf::test::read_text_file("/proc/sys/kernel/perf_event_paranoid");
    if (geteuid() != 0 || paranoid.empty() || std::stoi(paranoid) > 2) {
        WARN("not root, or perf events refused to users: the lock limit cannot be shown here");
        return;
    }
    const std::string prefix = "/tmp/sf-agent-memlock-" + std::to_string(getpid());
    const sf::test::ProcessResult result = sf::test::run_process(
        {"/usr/bin/prlimit", "--memlock=65536", "/usr/bin/setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
         kJava17, "-agentpath:" + kAgent + "=interval=1ms", "-version"},
        {}, prefix, 120);
    INFO("stderr: " << result.err);
    REQUIRE(result.exit_code == 0);
    const std::string shrunk = "pages per CPU, not 1024: no more ring memory may be locked";
    CHECK(result.err.find("in mode cpu (mode=auto: loaded at the JVM's start") != std::string::npos);
    const size_t first = result.err.find(shrunk);
    REQUIRE(first != std::string::npos);
    const size_t second = result.err.find(shrunk, first + 1);
    REQUIRE(second != std::string::npos);   // the stop summary's "mode:" line
    CHECK(result.err.find(shrunk, second + 1) == std::string::npos);
    CHECK(result.err.find("mode: cpu (mode=auto:") != std::string::npos);
    CHECK(result.err.find("cannot sample a thread") == std::string::npos);
    std::remove((prefix + ".out").c_str());
    std::remove((prefix + ".err").c_str());
}
