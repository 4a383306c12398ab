// push= on a real JVM (JDK 17): loop=500ms sends each period's profile to a loopback HTTP receiver
// in the test, which checks the request and reads every body with `go tool pprof`.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include "agent_process.hpp"
#include "ingest_receiver.hpp"
#include "test_env.hpp"

namespace {

const std::string kAgent = STACKFRAG_BINARY_DIR "/lib/libstackfrag.so";
using sf::test::kJdk17;

using sf::test::contains;

}  // namespace

TEST_CASE("push: a JVM with loop=500ms sends every period's profile to the server, the last one at exit", "[push]") {
    const std::string dir = sf::test::temp_dir("push-it");
    const sf::test::ProcessResult javac = sf::test::compile_test_program(kJdk17, "HotSpin.java", dir);
    INFO(javac.err);
    REQUIRE(javac.exit_code == 0);

    sf::test::Receiver receiver;
    // No push_name: the application is named after the main class.
    const std::string options = "interval=1ms,loop=500ms,push=" + receiver.url() + ",push_labels=test=push;run=" +
                                std::to_string(getpid());
    const sf::test::ProcessResult run = sf::test::run_process(
        {kJdk17 + "/bin/java", "-agentpath:" + kAgent + "=" + options, "-cp", dir, "HotSpin", "2000"}, {}, dir + "/jvm", 180);
    INFO(run.err);
    REQUIRE(run.exit_code == 0);

    const std::vector<sf::test::Request> requests = receiver.requests();
    // 2 s of one thread's CPU time in 500 ms periods: at least four periods, the last at exit.
    REQUIRE(requests.size() >= 2);
    CHECK(contains(run.err, "push: " + std::to_string(requests.size()) + " of " + std::to_string(requests.size()) +
                                " profiles sent to " + receiver.url() + "/ingest"));
    long long previous_until = 0;
    uint64_t with_hot = 0;
    for (size_t i = 0; i < requests.size(); ++i) {
        const sf::test::Request& r = requests[i];
        INFO("request " << i << ": " << r.request_line);
        CHECK(r.method == "POST");
        CHECK(r.path == "/ingest");
        CHECK(r.query.at("name") == "HotSpin{test=push,run=" + std::to_string(getpid()) + "}");
        CHECK(r.query.at("format") == "pprof");
        CHECK(r.query.at("sampleRate") == "1000");
        CHECK(r.query.at("spyName") == "stackfrag");
        const long long from = std::stoll(r.query.at("from")), until = std::stoll(r.query.at("until"));
        CHECK(until > from);
        CHECK(from >= previous_until - 1);   // periods follow each other (unix seconds, rounded down)
        CHECK(std::llabs(from - static_cast<long long>(time(nullptr))) < 600);
        previous_until = until;
        const std::string top = sf::test::pprof_top(dir, r.body, "period" + std::to_string(i));
        if (top.empty()) {
            WARN("go is not installed (scripts/setup.sh installs golang-go): the bodies were not read with go tool pprof");
            break;
        }
        with_hot += contains(top, "HotSpin.spin") ? 1 : 0;
    }
    // The worker spins throughout, so nearly every period has it; the one at exit may not.
    CHECK(with_hot + 1 >= requests.size());
    std::filesystem::remove_all(dir);
}

TEST_CASE("push: a server that is away costs the JVM a log line, not its exit", "[push]") {
    char pattern[] = "/tmp/sf-push-it-XXXXXX";
    REQUIRE(mkdtemp(pattern) != nullptr);
    const std::string dir = pattern;
    const sf::test::ProcessResult javac = sf::test::compile_test_program(kJdk17, "HotSpin.java", dir);
    INFO(javac.err);
    REQUIRE(javac.exit_code == 0);
    auto run_with_push = [&](uint16_t port) {
        const std::string options = "interval=1ms,loop=200ms,push=http://127.0.0.1:" + std::to_string(port) + ",push_name=away";
        // Unbounded, the exit would wait for 5 tries of 10 s for each queued profile.
        return sf::test::run_process({kJdk17 + "/bin/java", "-agentpath:" + kAgent + "=" + options, "-cp", dir, "HotSpin", "600"},
                                     {}, dir + "/jvm", 45);
    };
    SECTION("nothing listens: connection refused") {
        uint16_t port = 0;
        ::close(sf::test::listening_socket(port));
        const sf::test::ProcessResult run = run_with_push(port);
        INFO(run.err);
        CHECK_FALSE(run.timed_out);
        CHECK(run.exit_code == 0);
        CHECK(contains(run.out, "worker cpu_ms="));
        CHECK(contains(run.err, "push: cannot send the profile to http://127.0.0.1:" + std::to_string(port) +
                                    "/ingest: Couldn't connect to server; retrying with backoff"));
        CHECK(contains(run.err, "push: 0 of "));
        CHECK(contains(run.err, "stop summary"));   // sampling went on
    }
    SECTION("a server that takes the request and never answers") {
        uint16_t port = 0;
        const int silent = sf::test::listening_socket(port);
        const sf::test::ProcessResult run = run_with_push(port);
        ::close(silent);
        INFO(run.err);
        CHECK_FALSE(run.timed_out);
        CHECK(run.exit_code == 0);
        CHECK(contains(run.err, "push: 0 of "));
        CHECK(contains(run.err, "unsent at stop: "));
        // A request was still waiting for its answer at exit (10 s timeout): it was cut, and the log
        // says so (or that the sender was left inside it).
        CHECK((contains(run.err, "had no answer when the final flush ran out; cut") ||
               contains(run.err, "push: the sender is still inside a request")));
    }
    std::filesystem::remove_all(dir);
}
