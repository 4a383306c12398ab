// The live-profile and attach options: file (format by extension), loop, title, the attach
// actions and reply; the live profile's settings they make.
#include <catch2/catch.hpp>

#include <string>

#include "live_profile.hpp"
#include "options.hpp"
#include "options_test_support.hpp"

using sf::agent::AgentAction;
using sf::agent::AgentOptions;
using sf::agent::parse_options;

namespace {

using sf::test::parse_error;
using sf::test::parse_ok;

}  // namespace

TEST_CASE("file takes a profile name whose ending picks the format") {
    CHECK(parse_ok("").file.empty());
    for (const char* name : {"/tmp/p.html", "p.collapsed", "p.folded", "/x/p-%p-%t.pb.gz", "p.json", "p.jfr"}) {
        CHECK(parse_ok(std::string("file=") + name).file == name);
    }
    CHECK(parse_error("file=/tmp/p.txt").find("bad value '/tmp/p.txt' for file: expected a file name ending in .collapsed") == 0);
    CHECK(parse_error("file=") == "missing value for file: expected a file name ending in .collapsed, .folded, .html, "
                                  ".pb.gz, .json or .jfr (%p pid, %t time)");
}

TEST_CASE("loop takes a duration of at least 100 ms") {
    CHECK(parse_ok("").loop_ns == 0);
    CHECK(parse_ok("loop=30s").loop_ns == 30'000'000'000);
    CHECK(parse_ok("loop=500ms").loop_ns == 500'000'000);
    CHECK(parse_ok("loop=5m").loop_ns == 300'000'000'000);
    CHECK(parse_ok("loop=1h").loop_ns == 3'600'000'000'000);
    for (const char* bad : {"10ms", "30", "s", "-1s", "1.5s", "2d", "99999999h"}) {
        CHECK(parse_error(std::string("loop=") + bad) ==
              "bad value '" + std::string(bad) + "' for loop: expected a duration of at least 100ms, like 500ms, 30s, 5m, 1h");
    }
}

TEST_CASE("title, reply and the attach actions") {
    CHECK(parse_ok("title=My service").title == "My service");
    CHECK(parse_ok("").action == AgentAction::kNone);
    CHECK(parse_ok("start,file=/tmp/a.html").action == AgentAction::kStart);
    CHECK(parse_ok("stop").action == AgentAction::kStop);
    CHECK(parse_ok("dump,file=/x.html,reply=/tmp/r/reply").action == AgentAction::kDump);
    CHECK(parse_ok("dump,file=/x.html,reply=/tmp/r/reply").reply_path == "/tmp/r/reply");
    CHECK(parse_ok("status").action == AgentAction::kStatus);
    CHECK(parse_ok("dump,dump").action == AgentAction::kDump);
    CHECK(parse_error("stop,dump") == "bad value '' for dump: expected no value, and no other action");
    CHECK(parse_error("status=1") == "bad value '1' for status: expected no value, and no other action");
    CHECK(parse_error("reply=relative") == "bad value 'relative' for reply: expected an absolute file name");
}

TEST_CASE("a live profile unless the run only records; its settings come from the options") {
    using sf::agent::live_settings_from;
    // record= alone is decoded offline: no live profile, whatever focus= says.
    CHECK_FALSE(live_settings_from(parse_ok("record=/tmp/r.sfr"), 1).has_value());
    CHECK_FALSE(live_settings_from(parse_ok("record=/tmp/r.sfr,focus=a.B.c"), 1).has_value());
    // interval=auto watches the decoded top frames, push= sends decoded periods: both decode live.
    CHECK(live_settings_from(parse_ok("record=/tmp/r.sfr,interval=auto"), 1).has_value());
    CHECK(live_settings_from(parse_ok("record=/tmp/r.sfr,push=http://127.0.0.1:4040,loop=10s"), 1).has_value());
    // Nothing asked for at all: the stop summary still says what was hot.
    auto summary_only = live_settings_from(parse_ok(""), 1);
    REQUIRE(summary_only);
    CHECK(summary_only->file.empty());

    auto settings = live_settings_from(parse_ok("file=/tmp/p-%p.collapsed,loop=30s,title=T,events=cpu,switch,"
                                                "focus=a.B.c,record=/tmp/r.sfr"),
                                       4242);
    REQUIRE(settings);
    CHECK(settings->file == "/tmp/p-%p.collapsed");
    CHECK(settings->loop_ns == 30'000'000'000ull);
    CHECK(settings->title == "T");
    CHECK(settings->pid == 4242);
    CHECK(settings->off_cpu);
    CHECK_FALSE(settings->filter.empty());
    CHECK(settings->filter.describe() == "focus=a.B.c");
    CHECK_FALSE(live_settings_from(parse_ok("file=/tmp/p.html"), 1)->off_cpu);
}
