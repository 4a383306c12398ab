// The agent in a real JVM, loaded with -agentpath: a bad option keeps the JVM from starting and
// the message names the option; good options let it run and exit normally.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <unistd.h>

#include <string>

#include "agent_process.hpp"

namespace {

const std::string kAgent = STACKFRAG_BINARY_DIR "/lib/libstackfrag.so";
const std::string kJava17 = "/usr/lib/jvm/java-17-openjdk-amd64/bin/java";

sf::test::ProcessResult java_version(const std::string& agent_options) {
    const std::string prefix = "/tmp/sf-agent-options-" + std::to_string(getpid());
    return sf::test::run_process({kJava17, "-agentpath:" + kAgent + "=" + agent_options, "-version"}, {}, prefix, 120);
}

}  // namespace

TEST_CASE("a bad option stops the JVM from starting, naming the option") {
    struct Case {
        const char* options;
        const char* message;
    };
    const Case cases[] = {
        {"bogus=1", "stackfrag: unknown option 'bogus' (accepted: interval, stack, clock, ring, mode, record, validate, log, loglevel)"},
        {"intervall=1ms", "stackfrag: unknown option 'intervall'"},
        {"interval=fast", "stackfrag: bad value 'fast' for interval: expected a duration like 100us, 1ms, 10ms"},
        {"stack=12", "stackfrag: bad value '12' for stack"},
        {"clock=wall", "stackfrag: bad value 'wall' for clock: expected task or cpu"},
        {"ring=3", "stackfrag: bad value '3' for ring"},
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
    // The recording refuses to overwrite: the user is told, the JVM does not start.
    const sf::test::ProcessResult again = java_version("record=" + recording);
    CHECK(again.exit_code != 0);
    CHECK(again.err.find("bad value '" + recording + "' for record") != std::string::npos);
    std::remove(recording.c_str());
}
