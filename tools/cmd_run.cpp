// `stackfrag run [options] -- java ...`: starts a JVM with the agent loaded from its first instant,
// so nothing the VM compiles or loads before main() is missed, and exits as the JVM exits.
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <fmt/core.h>

#include "agent_flags.hpp"
#include "commands.hpp"

namespace sf::cli {

namespace {

struct RunArgs {
    AgentFlags flags;
    std::vector<std::string> command;
    bool dry_run = false;
};

std::string base_name(const std::string& path) {
    const size_t slash = path.rfind('/');
    return slash == std::string::npos ? path : path.substr(slash + 1);
}

// Wrappers such as `env X=1 java ...` or `taskset -c 0 java ...` come first, so the agent goes
// after the first word named java.
std::optional<size_t> java_position(const std::vector<std::string>& command) {
    for (size_t i = 0; i < command.size(); ++i) {
        if (base_name(command[i]) == "java") return i;
    }
    return std::nullopt;
}

// What to exec: the command, with the agent in its java's arguments or, when no word is named java
// (a launcher: jruby, groovy, mvn, a script), in JAVA_TOOL_OPTIONS, which every HotSpot JVM reads
// whatever started it. The JVM splits that variable at white space outside quotes.
struct Launch {
    std::vector<std::string> argv;
    std::optional<std::string> tool_options;   // JAVA_TOOL_OPTIONS' new value
};

Result<std::string> with_tool_option(const char* existing, const std::string& option) {
    std::string token = option;
    if (option.find_first_of(" \t\n\r\f\v") != std::string::npos) {
        if (option.find('"') == std::string::npos) {
            token = '"' + option + '"';
        } else if (option.find('\'') == std::string::npos) {
            token = '\'' + option + '\'';
        } else {
            return make_error(Errc::kInvalidArgument, "the agent option holds white space and both quote characters",
                              "JAVA_TOOL_OPTIONS cannot carry it: drop the quotes from --title or the paths");
        }
    }
    if (existing == nullptr || *existing == '\0') return token;
    return std::string(existing) + " " + token;
}

Result<Launch> launch_of(const RunArgs& args) {
    if (args.command.empty()) {
        return make_error(Errc::kInvalidArgument, "no command to run",
                          "give the java command after --: stackfrag run -f out.html -- java -jar app.jar");
    }
    Result<std::string> library = agent_library(args.flags);
    if (!library.ok()) return library.error();
    Result<std::string> options = agent_option_text(args.flags, false);
    if (!options.ok()) return options.error();
    std::string agent = "-agentpath:" + *library;
    if (!options->empty()) agent += "=" + *options;
    Launch launch;
    launch.argv = args.command;
    if (const std::optional<size_t> java = java_position(launch.argv)) {
        launch.argv.insert(launch.argv.begin() + static_cast<long>(*java) + 1, agent);
        return launch;
    }
    Result<std::string> tool_options = with_tool_option(std::getenv("JAVA_TOOL_OPTIONS"), agent);
    if (!tool_options.ok()) return tool_options.error();
    launch.tool_options = *tool_options;
    return launch;
}

std::string shell_quoted(const std::vector<std::string>& words) {
    std::string out;
    for (const std::string& w : words) {
        if (!out.empty()) out += ' ';
        if (!w.empty() && w.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./:=,+%@") ==
                              std::string::npos) {
            out += w;
            continue;
        }
        out += '\'';
        for (char c : w) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
        out += '\'';
    }
    return out;
}

int run_java(const RunArgs& args) {
    Result<Launch> launch = launch_of(args);
    if (!launch.ok()) {
        fmt::print(stderr, "stackfrag run: {}\n", launch.error().describe());
        return 2;
    }
    std::vector<std::string>& command = launch->argv;
    if (args.dry_run) {
        fmt::print("{}{}\n", launch->tool_options ? shell_quoted({"JAVA_TOOL_OPTIONS=" + *launch->tool_options}) + " " : "",
                   shell_quoted(command));
        return 0;
    }
    if (launch->tool_options) {
        // Each JVM the launcher starts loads the agent: a profile file without %p is written by the
        // last one to exit, and a recording's file can be created only once.
        const bool shared_file = (!args.flags.file.empty() && args.flags.file.find("%p") == std::string::npos) ||
                                 !args.flags.record.empty();
        fmt::print(stderr,
                   "stackfrag run: no word of the command is named java: the agent goes in JAVA_TOOL_OPTIONS, "
                   "which every JVM that {} starts reads{}\n",
                   base_name(command[0]),
                   shared_file ? " (if it starts several, give -f a %p and leave --record out)" : "");
        ::setenv("JAVA_TOOL_OPTIONS", launch->tool_options->c_str(), 1);
    }
    std::vector<char*> argv;
    for (std::string& word : command) argv.push_back(word.data());
    argv.push_back(nullptr);
    std::fflush(nullptr);
    // exec rather than fork: the JVM keeps our pid (so %p names it), signals and the terminal reach
    // it directly, and its exit status is ours without any forwarding.
    ::execvp(argv[0], argv.data());
    const int err = errno;
    fmt::print(stderr, "stackfrag run: cannot start {}: {}\n", command[0], std::strerror(err));
    return err == ENOENT ? 127 : 126;
}

}  // namespace

void add_run(CLI::App& app, int& exit_code) {
    auto* cmd = app.add_subcommand("run", "Run a java command with the stackfrag agent loaded");
    auto args = std::make_shared<RunArgs>();
    add_agent_flags(cmd, args->flags);
    cmd->add_flag("-n,--dry-run", args->dry_run, "print the java command line instead of running it");
    cmd->add_option("command", args->command, "the java command, after --")->required();
    cmd->footer(
        "The agent option -agentpath:LIB=OPTIONS is inserted right after the first word named java, and\n"
        "the JVM's exit status is stackfrag's. A command with no word named java (jruby, groovy, mvn, a\n"
        "script) gets the option in JAVA_TOOL_OPTIONS instead, which every JVM it starts reads.\n"
        "Examples:\n"
        "  stackfrag run -f cpu.html -- java -jar app.jar          flame graph when the JVM exits\n"
        "  stackfrag run -i 1ms -f cpu-%p.pb.gz -- java -cp app.jar Main\n"
        "                                                          1 kHz per thread, pprof named by pid\n"
        "  stackfrag run -f cpu-%t.html --loop 60s -- java ...     a new flame graph every minute\n"
        "  stackfrag run --record app.sfr -- java ...              raw recording; later: stackfrag report app.sfr -o x.html\n"
        "  stackfrag run -o interval=100us,stack=8192 -f x.json -- java ...   any agent option (docs/usage.md)\n"
        "  stackfrag run -n -f x.html -- java -version             show the command line only\n"
        "  stackfrag run -f ruby.html -- jruby app.rb              a launcher: the agent via JAVA_TOOL_OPTIONS\n");
    cmd->callback([args, &exit_code] { exit_code = run_java(*args); });
}

}  // namespace sf::cli
