// `stackfrag run [options] -- java ...`: starts a JVM with the agent loaded from its first instant,
// so nothing the VM compiles or loads before main() is missed, and exits as the JVM exits.
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <memory>
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
// after the first word named java; a launcher with another name is taken to be the JVM itself.
size_t java_position(const std::vector<std::string>& command) {
    for (size_t i = 0; i < command.size(); ++i) {
        if (base_name(command[i]) == "java") return i;
    }
    return 0;
}

Result<std::vector<std::string>> java_command(const RunArgs& args) {
    if (args.command.empty()) {
        return make_error(Errc::kInvalidArgument, "no command to run",
                          "give the java command after --: stackfrag run -f out.html -- java -jar app.jar");
    }
    Result<std::string> library = agent_library(args.flags);
    if (!library.ok()) return library.error();
    Result<std::string> options = agent_option_text(args.flags, false);
    if (!options.ok()) return options.error();
    std::vector<std::string> out = args.command;
    std::string agent = "-agentpath:" + *library;
    if (!options->empty()) agent += "=" + *options;
    out.insert(out.begin() + static_cast<long>(java_position(out)) + 1, agent);
    return out;
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
    Result<std::vector<std::string>> command = java_command(args);
    if (!command.ok()) {
        fmt::print(stderr, "stackfrag run: {}\n", command.error().describe());
        return 2;
    }
    if (args.dry_run) {
        fmt::print("{}\n", shell_quoted(*command));
        return 0;
    }
    std::vector<char*> argv;
    for (std::string& word : *command) argv.push_back(word.data());
    argv.push_back(nullptr);
    std::fflush(nullptr);
    // exec rather than fork: the JVM keeps our pid (so %p names it), signals and the terminal reach
    // it directly, and its exit status is ours without any forwarding.
    ::execvp(argv[0], argv.data());
    const int err = errno;
    fmt::print(stderr, "stackfrag run: cannot start {}: {}\n", (*command)[0], std::strerror(err));
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
        "The agent option -agentpath:LIB=OPTIONS is inserted right after the first word named java\n"
        "(or after the first word), and the JVM's exit status is stackfrag's.\n"
        "Examples:\n"
        "  stackfrag run -f cpu.html -- java -jar app.jar          flame graph when the JVM exits\n"
        "  stackfrag run -i 1ms -f cpu-%p.pb.gz -- java -cp app.jar Main\n"
        "                                                          1 kHz per thread, pprof named by pid\n"
        "  stackfrag run -f cpu-%t.html --loop 60s -- java ...     a new flame graph every minute\n"
        "  stackfrag run --record app.sfr -- java ...              raw recording; later: stackfrag report app.sfr -o x.html\n"
        "  stackfrag run -o interval=100us,stack=8192 -f x.json -- java ...   any agent option (docs/usage.md)\n"
        "  stackfrag run -n -f x.html -- java -version             show the command line only\n");
    cmd->callback([args, &exit_code] { exit_code = run_java(*args); });
}

}  // namespace sf::cli
