// push=: the sender against a loopback HTTP receiver in this test (a thread on 127.0.0.1, port 0)
// that records each request and answers with the status the test scripts; the bodies are read
// back with `go tool pprof`. Also the option's checks (URL, labels, application name).
#include <catch2/catch.hpp>

#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "ingest_receiver.hpp"
#include "log.hpp"
#include "options.hpp"
#include "profile_push.hpp"
#include "stackfrag/profile/export.hpp"
#include "test_env.hpp"

using sf::agent::ProfilePusher;
using sf::agent::PushProfile;
using sf::agent::PushSettings;
using sf::test::Clock;
using sf::test::listening_socket;
using sf::test::pprof_top;
using sf::test::read_all;
using sf::test::Receiver;
using sf::test::Request;

namespace {

sf::profile::Cct period_profile(int hot) {
    std::istringstream in("app/Main.main_[j];app/Work.hot_[j] " + std::to_string(hot) +
                          "\napp/Main.main_[j];app/Work.cold_[i] 2\n");
    sf::Result<sf::profile::Cct> cct = sf::profile::read_collapsed(in);
    REQUIRE(cct.ok());
    cct->info().period_ns = 1'000'000;
    return std::move(cct).value();
}

PushSettings settings_for(const std::string& url) {
    PushSettings settings;
    sf::Result<sf::agent::PushUrl> parsed = sf::agent::parse_push_url(url);
    REQUIRE(parsed.ok());
    settings.url = *parsed;
    settings.name = "shop{env=test,region=eu}";
    settings.sample_rate_hz = 1000;
    settings.backoff_first_ms = 50;
    return settings;
}

std::string temp_dir() { return sf::test::temp_dir("push"); }

// Collects the agent's log in a file for the length of a test.
struct LogCapture {
    std::string path;
    explicit LogCapture(const std::string& dir) : path(dir + "/agent.log") {
        REQUIRE(sf::agent::configure_log(path, sf::agent::LogLevel::kInfo).ok());
    }
    ~LogCapture() { (void)sf::agent::configure_log("", sf::agent::LogLevel::kWarn); }
    std::string text() const { return read_all(path); }
};

}  // namespace

TEST_CASE("push: each profile is a POST to /ingest with the Pyroscope parameters, its body the gzip'd pprof") {
    Receiver receiver;
    const std::string dir = temp_dir();
    ProfilePusher pusher(settings_for(receiver.url()));
    REQUIRE(pusher.start().ok());
    REQUIRE(pusher.offer(period_profile(7), 1'700'000'000, 1'700'000'010));
    REQUIRE(pusher.offer(period_profile(3), 1'700'000'010, 1'700'000'020));
    REQUIRE(receiver.wait_for(2, 20));
    pusher.stop(2000);

    const std::vector<Request> requests = receiver.requests();
    REQUIRE(requests.size() == 2);
    for (size_t i = 0; i < requests.size(); ++i) {
        const Request& r = requests[i];
        INFO(r.request_line);
        CHECK(r.method == "POST");
        CHECK(r.path == "/ingest");
        CHECK(r.request_line.ends_with(" HTTP/1.1"));
        CHECK(r.query.at("name") == "shop{env=test,region=eu}");
        CHECK(r.query.at("from") == std::to_string(1'700'000'000 + 10 * i));
        CHECK(r.query.at("until") == std::to_string(1'700'000'010 + 10 * i));
        CHECK(r.query.at("format") == "pprof");
        CHECK(r.query.at("sampleRate") == "1000");
        CHECK(r.query.at("spyName") == "stackfrag");
        CHECK(r.query.size() == 6);
        CHECK(r.headers.at("content-type") == "application/octet-stream");
        CHECK(r.headers.count("expect") == 0);
        REQUIRE(r.body.size() > 2);
        CHECK(static_cast<unsigned char>(r.body[0]) == 0x1f);   // gzip
        CHECK(static_cast<unsigned char>(r.body[1]) == 0x8b);
    }
    // The profiles themselves, in order, as pprof reads them: hot has 7 then 3 samples.
    const std::string first = pprof_top(dir, requests[0].body, "first");
    if (first.empty()) {
        WARN("go is not installed (scripts/setup.sh installs golang-go): the bodies were not read with go tool pprof");
    } else {
        const std::string second = pprof_top(dir, requests[1].body, "second");
        CHECK_THAT(first, Catch::Matches("(.|\n)*\n +7 +77\\.78% .*app/Work\\.hot(.|\n)*"));
        CHECK_THAT(first, Catch::Contains("app/Work.cold"));
        CHECK_THAT(second, Catch::Matches("(.|\n)*\n +3 +60(\\.00)?% .*app/Work\\.hot(.|\n)*"));
    }
    const sf::agent::PushCounts counts = pusher.counts();
    CHECK(counts.offered == 2);
    CHECK(counts.sent == 2);
    CHECK(counts.failed_attempts == 0);
    CHECK(counts.dropped + counts.rejected + counts.unsent == 0);
    CHECK_THAT(pusher.summary_text(), Catch::Contains("push: 2 of 2 profiles sent to " + receiver.url() + "/ingest"));
    std::filesystem::remove_all(dir);
}

TEST_CASE("push: a 503 or 429 is retried after a backoff and the profile arrives once, a 400 is not retried") {
    const std::string dir = temp_dir();
    LogCapture log(dir);
    Receiver receiver({503, 429, 200, 400});
    ProfilePusher pusher(settings_for(receiver.url()));
    REQUIRE(pusher.start().ok());
    REQUIRE(pusher.offer(period_profile(5), 100, 110));
    REQUIRE(receiver.wait_for(3, 20));
    // The receiver records a request before it answers: wait for the sender to have the answer.
    const auto deadline = Clock::now() + std::chrono::seconds(20);
    while (pusher.counts().sent == 0 && Clock::now() < deadline) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    // The same profile three times, each try after the backoff (50 ms, then 100 ms).
    std::vector<Request> requests = receiver.requests();
    CHECK(requests[1].body == requests[0].body);
    CHECK(requests[2].body == requests[0].body);
    CHECK(requests[2].query.at("from") == "100");
    CHECK(requests[1].at - requests[0].at >= std::chrono::milliseconds(50));
    CHECK(requests[2].at - requests[1].at >= std::chrono::milliseconds(100));
    CHECK_THAT(log.text(), Catch::Contains("push: cannot send the profile to " + receiver.url() +
                                           "/ingest: HTTP 503 try later; retrying with backoff"));
    CHECK_THAT(log.text(), Catch::Contains("accepts profiles again"));

    // A refusal the server will repeat (bad name, too large) is logged and not tried again.
    REQUIRE(pusher.offer(period_profile(5), 110, 120));
    REQUIRE(receiver.wait_for(4, 20));
    pusher.stop(2000);
    CHECK(receiver.requests().size() == 4);
    const sf::agent::PushCounts counts = pusher.counts();
    CHECK(counts.sent == 1);
    CHECK(counts.failed_attempts == 3);
    CHECK(counts.rejected == 1);
    CHECK(counts.unsent == 0);
    CHECK_THAT(log.text(), Catch::Contains("refused the profile: HTTP 400 try later; it is not sent again"));
    std::filesystem::remove_all(dir);
}

TEST_CASE("push: an unreachable server gets a log line, offers never wait, the queue stays bounded") {
    const std::string dir = temp_dir();
    LogCapture log(dir);
    SECTION("connection refused") {
        uint16_t port = 0;
        ::close(listening_socket(port));   // nothing listens there any more
        PushSettings settings = settings_for("http://127.0.0.1:" + std::to_string(port));
        settings.max_attempts = 2;
        ProfilePusher pusher(settings);
        REQUIRE(pusher.start().ok());
        REQUIRE(pusher.offer(period_profile(1), 1, 2));
        const auto deadline = Clock::now() + std::chrono::seconds(20);
        while (pusher.counts().rejected == 0 && Clock::now() < deadline) std::this_thread::sleep_for(std::chrono::milliseconds(10));
        pusher.stop(1000);
        const sf::agent::PushCounts counts = pusher.counts();
        CHECK(counts.failed_attempts == 2);
        CHECK(counts.rejected == 1);   // given up after max_attempts
        CHECK(counts.sent == 0);
        INFO(log.text());
        CHECK_THAT(log.text(), Catch::Contains("push: cannot send the profile to http://127.0.0.1:" + std::to_string(port) +
                                               "/ingest: Couldn't connect to server; retrying with backoff"));
        CHECK_THAT(pusher.summary_text(), Catch::Contains("0 of 1 profiles sent"));
    }
    SECTION("a server that takes the request and never answers") {
        uint16_t port = 0;
        const int silent = listening_socket(port);   // the kernel accepts; nobody reads or answers
        PushSettings settings = settings_for("http://127.0.0.1:" + std::to_string(port));
        settings.queue_limit = 3;
        ProfilePusher pusher(settings);
        REQUIRE(pusher.start().ok());
        std::vector<PushProfile> profiles;
        for (int i = 0; i < 10; ++i) profiles.push_back(PushProfile{"profile " + std::to_string(i), 10 * i, 10 * i + 10});
        REQUIRE(pusher.offer(period_profile(1), 0, 1));   // the sender gets stuck with the first it takes
        const auto begin = Clock::now();
        for (PushProfile& profile : profiles) REQUIRE(pusher.offer(std::move(profile)));
        const auto offered = Clock::now() - begin;
        // The sender is stuck in its first request (10 s timeout); offering did not wait for it.
        CHECK(offered < std::chrono::milliseconds(1000));
        sf::agent::PushCounts counts = pusher.counts();
        CHECK(counts.offered == 11);
        CHECK(counts.queued == 3);
        CHECK(counts.dropped == 8);
        CHECK_THAT(log.text(), Catch::Contains("3 profiles are waiting for http://127.0.0.1:" + std::to_string(port) +
                                               "/ingest; the oldest"));
        // stop is bounded although a request is in flight: the request is cut.
        const auto stopping = Clock::now();
        pusher.stop(300);
        CHECK(Clock::now() - stopping < std::chrono::milliseconds(2500));
        counts = pusher.counts();
        CHECK(counts.sent == 0);
        CHECK(counts.unsent == 3);
        CHECK_THAT(pusher.summary_text(), Catch::Contains("dropped for a full queue: 8,"));
        CHECK_THAT(pusher.summary_text(), Catch::Contains("unsent at stop: 3)"));
        ::close(silent);
    }
    std::filesystem::remove_all(dir);
}

TEST_CASE("push=: the URL is checked when the options are parsed, with the reason") {
    sf::Result<sf::agent::PushUrl> url = sf::agent::parse_push_url("http://pyroscope:4040");
    REQUIRE(url.ok());
    CHECK(url->endpoint() == "http://pyroscope:4040/ingest");
    CHECK(sf::agent::parse_push_url("https://p.example/prefix/")->endpoint() == "https://p.example:443/prefix/ingest");
    CHECK(sf::agent::parse_push_url("HTTP://10.0.0.1/ingest")->endpoint() == "http://10.0.0.1:80/ingest");
    CHECK(sf::agent::parse_push_url("http://[::1]:4040")->endpoint() == "http://[::1]:4040/ingest");

    auto error = [](const std::string& options) {
        sf::Result<sf::agent::AgentOptions> parsed = sf::agent::parse_options(options);
        REQUIRE_FALSE(parsed.ok());
        return parsed.error().describe();
    };
    CHECK_THAT(error("loop=10s,push=ftp://x"), Catch::Contains("bad value 'ftp://x' for push: expected an http:// or https:// URL") &&
                                                   Catch::Contains("scheme 'ftp' is not supported"));
    CHECK_THAT(error("loop=10s,push=pyroscope:4040"), Catch::Contains("for push") && Catch::Contains("is not a URL"));
    CHECK_THAT(error("loop=10s,push=http://h:99999"), Catch::Contains("bad port '99999'"));
    CHECK_THAT(error("loop=10s,push=http://h:4040/ingest?x=1"), Catch::Contains("has a query"));
    CHECK_THAT(error("loop=10s,push=http://u:pw@h:4040"), Catch::Contains("credentials"));
    CHECK_THAT(error("loop=10s,push=http://:4040"), Catch::Contains("bad host"));
    CHECK_THAT(error("push=http://h:4040"), Catch::Contains("push needs loop") && Catch::Contains("loop=10s"));
    CHECK_THAT(error("loop=10s,push=http://h,push_name=my app"), Catch::Contains("bad value 'my app' for push_name"));
    CHECK_THAT(error("loop=10s,push=http://h,push_labels=env"), Catch::Contains("for push_labels") && Catch::Contains("bad label 'env'"));
    CHECK_THAT(error("loop=10s,push=http://h,push_labels=env=a{b}"), Catch::Contains("bad label 'env=a{b}'"));

    sf::Result<sf::agent::AgentOptions> options =
        sf::agent::parse_options("interval=2ms,loop=10s,push=http://h:4040,push_name=shop,push_labels=env=prod;region=eu-1");
    REQUIRE(options.ok());
    CHECK(options->push_labels == "{env=prod,region=eu-1}");
    const PushSettings settings = sf::agent::push_settings_from(*options, "ignored.Main");
    CHECK(settings.name == "shop{env=prod,region=eu-1}");
    CHECK(settings.sample_rate_hz == 500);
    CHECK(settings.url.endpoint() == "http://h:4040/ingest");
    CHECK_THAT(sf::agent::describe(*options), Catch::Contains(",push=http://h:4040,push_name=shop,push_labels={env=prod,region=eu-1}"));
}

TEST_CASE("push: without push_name the application is named after the main class or the jar") {
    using sf::agent::push_app_name_from_command;
    CHECK(push_app_name_from_command("com.example.shop.ShopServer --port 8080") == "ShopServer");
    CHECK(push_app_name_from_command("/opt/app/lib/shop-1.2.jar serve") == "shop-1.2");
    CHECK(push_app_name_from_command("shop.module/com.example.Main") == "Main");
    CHECK(push_app_name_from_command("Outer$Inner") == "Outer_Inner");
    CHECK(push_app_name_from_command("") == "java");
    sf::Result<sf::agent::AgentOptions> options = sf::agent::parse_options("loop=1s,push=http://h");
    REQUIRE(options.ok());
    CHECK(sf::agent::push_settings_from(*options, "Busy 2").name == "Busy");
}
