// What `stackfrag run` and `stackfrag attach` share: the command-line flags that become agent
// options, and where the agent library is. Header-only so the two commands stay independent files.
#pragma once

#include <limits.h>
#include <sys/stat.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <fmt/core.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "stackfrag/base/result.hpp"
#include "stackfrag/kernel/perf_events.hpp"
#include "stackfrag/profile/export.hpp"

namespace sf::cli {

struct AgentFlags {
    std::string interval;
    std::string file;
    std::string record;
    std::string loop;
    std::string title;
    std::string group;
    std::string log;
    std::string loglevel;
    std::vector<std::string> raw;   // -o key=value[,key=value...], passed through as written
    std::string agent;              // --agent: library to load instead of the one beside the CLI
};

inline void add_agent_flags(CLI::App* cmd, AgentFlags& flags) {
    cmd->add_option("-i,--interval", flags.interval, "sampling interval per thread: 10ms, 1ms, 100us (agent default 1ms)");
    cmd->add_option("-f,--file", flags.file,
                    std::string("write the profile here; the ending picks the format (") +
                        profile::accepted_profile_extensions() + "); %p is the pid, %t a timestamp");
    cmd->add_option("--record", flags.record, "also record the raw event stream to this file (.sfr) for replay");
    cmd->add_option("--loop", flags.loop, "with --file: write a new profile every DURATION (e.g. 60s), then start over");
    cmd->add_option("--title", flags.title, "title of the html page");
    cmd->add_option("--group", flags.group,
                    "keep threads apart in the profile: thread (a root per thread) or pool (per thread pool, "
                    "\"[http-nio-8080-exec-*]\"); default: merged")
        ->check(CLI::IsMember({"none", "thread", "pool"}));
    cmd->add_option("--log", flags.log, "agent log: a file name or stderr (default)");
    cmd->add_option("--loglevel", flags.loglevel, "error, warn, info or debug");
    cmd->add_option("-o,--option", flags.raw,
                    "raw agent options, key=value[,key=value...] (see docs/usage.md); may repeat")
        ->allow_extra_args(false);   // one value per -o, so a following word is not swallowed
    cmd->add_option("--agent", flags.agent, "agent library to use (default: ../lib/libstackfrag.so beside this program)");
}

// Paths the agent opens are resolved by the JVM, whose working directory may not be ours.
inline std::string absolute_path(const std::string& path) {
    if (path.empty() || path[0] == '/' || path == "stderr") return path;
    char cwd[PATH_MAX];
    if (::getcwd(cwd, sizeof cwd) == nullptr) return path;
    return std::string(cwd) + "/" + path;
}

// The first comma-separated item of a raw -o value that has no '=' and reads as a file name (a
// '/' in it, or a profile's or recording's ending), or empty. Bare items are otherwise legitimate:
// flags such as "validate", and more values of the option before them.
inline std::string_view bare_path_item(std::string_view raw) {
    while (!raw.empty()) {
        const size_t comma = raw.find(',');
        const std::string_view item = raw.substr(0, comma);
        if (item.find('=') == std::string_view::npos &&
            (item.find('/') != std::string_view::npos || profile::output_format_of(item) != nullptr || item.ends_with(".sfr"))) {
            return item;
        }
        if (comma == std::string_view::npos) break;
        raw.remove_prefix(comma + 1);
    }
    return {};
}

// The option text after "=" in -agentpath:LIB=OPTIONS, or why the flags cannot make one.
inline Result<std::string> agent_option_text(const AgentFlags& flags, bool absolute_paths) {
    std::vector<std::string> items;
    auto add = [&](const char* key, const std::string& value, bool is_path) -> Status {
        if (value.empty()) return {};
        // The agent splits its options at commas; a comma inside a value would split it.
        if (value.find(',') != std::string::npos) {
            return make_error(Errc::kInvalidArgument, fmt::format("--{} '{}' contains a comma", key, value),
                              "the agent separates its options with commas; rename the file");
        }
        items.push_back(fmt::format("{}={}", key, is_path && absolute_paths ? absolute_path(value) : value));
        return {};
    };
    if (!flags.interval.empty()) {
        Result<uint64_t> ns = kernel::parse_interval(flags.interval);
        if (!ns.ok() || *ns < kernel::kMinSamplingPeriodNs) {
            return make_error(Errc::kInvalidArgument, fmt::format("bad --interval '{}'", flags.interval),
                              "give a duration like 100us, 1ms or 10ms (at least 50us)");
        }
    }
    for (const Status& s : {add("interval", flags.interval, false), add("file", flags.file, true),
                            add("record", flags.record, true), add("loop", flags.loop, false),
                            add("title", flags.title, false), add("group", flags.group, false), add("log", flags.log, true),
                            add("loglevel", flags.loglevel, false)}) {
        if (!s.ok()) return s.error();
    }
    for (const std::string& raw : flags.raw) {
        if (raw.empty() || raw.front() == '=' ) {
            return make_error(Errc::kInvalidArgument, fmt::format("bad -o '{}'", raw), "write -o key=value");
        }
        // `-o out.html` is how many tools (and `stackfrag report`) name their output. The agent would
        // only reject it once the JVM starts, as an unknown option, without saying what was meant.
        if (const std::string_view path = bare_path_item(raw); !path.empty()) {
            const bool profile = profile::output_format_of(path) != nullptr;
            return make_error(Errc::kInvalidArgument,
                              fmt::format("-o '{}': -o takes agent options (key=value), and '{}' is a file name", raw, path),
                              profile ? fmt::format("write the profile with -f {}", path)
                              : path.ends_with(".sfr") ? fmt::format("record with --record {}", path)
                                                       : std::string("a profile goes to -f FILE, a recording to --record FILE"));
        }
        items.push_back(raw);
    }
    std::string text;
    for (const std::string& item : items) text += (text.empty() ? "" : ",") + item;
    return text;
}

// <dir of this program>/../lib/libstackfrag.so, made absolute: the JVM loads it from its own cwd.
inline Result<std::string> agent_library(const AgentFlags& flags) {
    std::string path = flags.agent;
    if (path.empty()) {
        char self[PATH_MAX];
        const ssize_t n = ::readlink("/proc/self/exe", self, sizeof self - 1);
        if (n <= 0) return sys_error(Errc::kIo, errno, "cannot read /proc/self/exe");
        std::string exe(self, static_cast<size_t>(n));
        path = exe.substr(0, exe.rfind('/')) + "/../lib/libstackfrag.so";
    }
    char resolved[PATH_MAX];
    if (::realpath(path.c_str(), resolved) == nullptr) {
        return sys_error(Errc::kIo, errno, fmt::format("no agent library at {}", path),
                         "build it (scripts/build.sh) or name one with --agent");
    }
    std::string out(resolved);
    // -agentpath:LIB=OPTIONS ends the library name at the first '='.
    if (out.find('=') != std::string::npos) {
        return make_error(Errc::kInvalidArgument, fmt::format("the agent path {} contains '='", out),
                          "the JVM cuts -agentpath at the first '='; move the library");
    }
    return out;
}

}  // namespace sf::cli
