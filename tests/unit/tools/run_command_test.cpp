// `stackfrag run`: the java command line it builds (seen through a fake java that prints its
// arguments), the exit status it passes on, and the errors for bad options.
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include "shell.hpp"
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

namespace {

using sf::test::CommandResult;
CommandResult shell(const std::string& command) { return sf::test::run_shell(command); }

// A directory with a fake `java` (prints one argument per line, exits with $FAKE_JAVA_EXIT) and a
// stand-in agent library, so the test needs neither a JDK nor a built agent.
struct FakeJava {
    std::string dir;
    std::string agent;
    FakeJava() {
        char tmpl[] = "/tmp/sf-run-test.XXXXXX";
        REQUIRE(::mkdtemp(tmpl) != nullptr);
        dir = tmpl;
        std::ofstream(dir + "/java") << "#!/bin/sh\nfor a in \"$@\"; do echo \"arg:$a\"; done\nexit ${FAKE_JAVA_EXIT:-0}\n";
        REQUIRE(::chmod((dir + "/java").c_str(), 0755) == 0);
        // A launcher as jruby or groovy are: starts the JVM itself, here only shows what it got.
        std::ofstream(dir + "/launcher") << "#!/bin/sh\necho \"tool:$JAVA_TOOL_OPTIONS\"\n"
                                            "for a in \"$@\"; do echo \"arg:$a\"; done\n";
        REQUIRE(::chmod((dir + "/launcher").c_str(), 0755) == 0);
        agent = dir + "/libstackfrag.so";
        std::ofstream(agent) << "not really a library";
    }
    ~FakeJava() { std::system(("rm -rf '" + dir + "'").c_str()); }

    CommandResult run(const std::string& arguments, const std::string& env = "") const {
        return shell(env + " " STACKFRAG_BINARY_DIR "/bin/stackfrag run --agent " + agent + " " + arguments + " 2>&1");
    }
};

std::vector<std::string> args_of(const std::string& output) {
    std::vector<std::string> args;
    size_t at = 0;
    while ((at = output.find("arg:", at)) != std::string::npos) {
        const size_t end = output.find('\n', at);
        args.push_back(output.substr(at + 4, end - at - 4));
        at = end;
    }
    return args;
}

}  // namespace

TEST_CASE("run puts -agentpath with the options right after java") {
    FakeJava fake;
    const auto result = fake.run("-i 1ms -f /tmp/out.html --record /tmp/x.sfr --title 'my app' -- " + fake.dir +
                                 "/java -Xmx1g -cp app.jar Main arg1");
    INFO(result.output);
    REQUIRE(result.exit_code == 0);
    const auto args = args_of(result.output);
    REQUIRE(args.size() == 6);
    CHECK(args[0] == "-agentpath:" + fake.agent + "=interval=1ms,file=/tmp/out.html,record=/tmp/x.sfr,title=my app");
    CHECK(args[1] == "-Xmx1g");
    CHECK(args[5] == "arg1");
}

TEST_CASE("run passes raw -o options through and makes relative paths absolute only for attach") {
    FakeJava fake;
    const auto result = fake.run("-o interval=100us,stack=8192 -o loglevel=debug -f rel.json -- " + fake.dir + "/java Main");
    INFO(result.output);
    REQUIRE(result.exit_code == 0);
    const auto args = args_of(result.output);
    REQUIRE(args.size() == 2);
    CHECK(args[0] == "-agentpath:" + fake.agent + "=file=rel.json,interval=100us,stack=8192,loglevel=debug");
}

TEST_CASE("run inserts the agent after a wrapper, before the java options") {
    FakeJava fake;
    const auto result = fake.run("-- env FOO=1 " + fake.dir + "/java -version");
    INFO(result.output);
    REQUIRE(result.exit_code == 0);
    const auto args = args_of(result.output);
    REQUIRE(args.size() == 2);
    CHECK(args[0] == "-agentpath:" + fake.agent);
    CHECK(args[1] == "-version");
}

TEST_CASE("run gives a launcher with no word named java the agent in JAVA_TOOL_OPTIONS") {
    FakeJava fake;
    const auto result = fake.run("-i 1ms -f cpu-%p.html -- " + fake.dir + "/launcher app.rb --fast");
    INFO(result.output);
    REQUIRE(result.exit_code == 0);
    CHECK(args_of(result.output) == std::vector<std::string>{"app.rb", "--fast"});   // the command as given
    CHECK(result.output.find("tool:-agentpath:" + fake.agent + "=interval=1ms,file=cpu-%p.html\n") != std::string::npos);
    CHECK(result.output.find("the agent goes in JAVA_TOOL_OPTIONS") != std::string::npos);
    CHECK(result.output.find("give -f a %p") == std::string::npos);   // it has one

    SECTION("after what the variable held, quoted where the JVM would split it") {
        const auto more = fake.run("--title 'my app' -f cpu.html -- " + fake.dir + "/launcher", "JAVA_TOOL_OPTIONS=-Xss2m");
        INFO(more.output);
        CHECK(more.output.find("tool:-Xss2m \"-agentpath:" + fake.agent + "=file=cpu.html,title=my app\"\n") !=
              std::string::npos);
        CHECK(more.output.find("give -f a %p") != std::string::npos);   // several JVMs would share cpu.html
    }
    SECTION("--dry-run shows the variable") {
        const auto dry = fake.run("-n -i 10ms -- " + fake.dir + "/launcher app.rb");
        CHECK(dry.exit_code == 0);
        CHECK(dry.output.find("tool:") == std::string::npos);
        CHECK(dry.output.find("JAVA_TOOL_OPTIONS=-agentpath:" + fake.agent + "=interval=10ms " + fake.dir + "/launcher app.rb") !=
              std::string::npos);
    }
}

TEST_CASE("run exits with the JVM's exit status") {
    FakeJava fake;
    CHECK(fake.run("-- " + fake.dir + "/java Main", "FAKE_JAVA_EXIT=3").exit_code == 3);
    CHECK(fake.run("-- " + fake.dir + "/java Main", "FAKE_JAVA_EXIT=0").exit_code == 0);
    CHECK(fake.run("-- " + fake.dir + "/java Main", "FAKE_JAVA_EXIT=143").exit_code == 143);
}

TEST_CASE("run --dry-run prints the command line without running it") {
    FakeJava fake;
    const auto result = fake.run("-n -i 10ms -- " + fake.dir + "/java -jar 'my app.jar'", "FAKE_JAVA_EXIT=9");
    CHECK(result.exit_code == 0);
    CHECK(result.output.find("arg:") == std::string::npos);
    CHECK(result.output.find("-agentpath:" + fake.agent + "=interval=10ms -jar 'my app.jar'") != std::string::npos);
    const auto grouped = fake.run("-n --group pool -- " + fake.dir + "/java Main", "");
    CHECK(grouped.output.find("=group=pool Main") != std::string::npos);
    const auto wrong = fake.run("-n --group threads -- " + fake.dir + "/java Main", "");
    CHECK(wrong.exit_code != 0);
    CHECK(wrong.output.find("--group") != std::string::npos);
}

TEST_CASE("run rejects bad options with a message naming them") {
    FakeJava fake;
    const std::string java = fake.dir + "/java Main";

    // Refused before any JVM starts, with a message that names what was wrong.
    const auto refused = [&](const std::string& options, const std::string& message) {
        const auto result = fake.run(options + " -- " + java);
        INFO(result.output);
        CHECK(result.exit_code == 2);
        CHECK(result.output.find(message) != std::string::npos);
        CHECK(result.output.find("arg:") == std::string::npos);
    };
    refused("-i fast", "bad --interval 'fast'");
    refused("-f a,b.html", "contains a comma");
    // -o names the output in many tools (and in `stackfrag report`); here it takes agent options.
    refused("-o /tmp/out.html", "-o '/tmp/out.html': -o takes agent options");
    refused("-o /tmp/out.html", "write the profile with -f /tmp/out.html");
    refused("-o interval=1ms,app.sfr", "record with --record app.sfr");
    // Bare items that are no file names stay the agent's to judge: flags, a list's further values.
    auto flags = fake.run("-o validate,events=cpu,switch -- " + java);
    CHECK(flags.exit_code == 0);
    CHECK(flags.output.find("=validate,events=cpu,switch\n") != std::string::npos);

    auto no_agent = shell(STACKFRAG_BINARY_DIR "/bin/stackfrag run --agent /nonexistent/lib.so -- " + java + " 2>&1");
    CHECK(no_agent.exit_code == 2);
    CHECK(no_agent.output.find("no agent library at /nonexistent/lib.so") != std::string::npos);

    auto no_command = fake.run("-i 1ms");
    CHECK(no_command.exit_code != 0);
    CHECK(no_command.output.find("command") != std::string::npos);

    auto missing_java = fake.run("-- " + fake.dir + "/no-such-java Main");
    CHECK(missing_java.exit_code == 127);
    CHECK(missing_java.output.find("cannot start") != std::string::npos);
}
