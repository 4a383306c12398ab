// `stackfrag attach PID start|stop|dump|status [options]`: loads the agent into a running HotSpot JVM
// through its dynamic attach mechanism (the same as jcmd / VirtualMachine.loadAgentPath) and prints
// the agent's answer. Spoken directly, so no JDK tools or jdk.attach module are needed.
//
// The attach handshake, as HotSpot implements it on Linux:
//  - the JVM starts its attach listener on SIGQUIT when a file .attach_pid<PID> exists in its
//    working directory or /tmp (PID as the JVM sees itself, i.e. in its pid namespace); without
//    that file SIGQUIT only prints a thread dump;
//  - the listener is a Unix socket /tmp/.java_pid<PID> in the JVM's mount namespace; it only accepts
//    a peer whose effective uid and gid equal the JVM's, or root;
//  - a request is: protocol version "1", the command, then exactly three arguments, each NUL-ended
//    (at most 1024 bytes each); the reply is "<code>\n" and text; for "load" the text carries the
//    Agent_OnAttach return value ("return code: N" on JDK 17), and the connection is closed after it.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>

#include <fmt/core.h>

#include "agent_flags.hpp"
#include "commands.hpp"

namespace sf::cli {

namespace {

using Clock = std::chrono::steady_clock;
constexpr size_t kMaxArgBytes = 1024;   // HotSpot's limit per attach argument

struct AttachArgs {
    int pid = 0;
    std::string action;
    AgentFlags flags;
    double timeout_s = 10;
    bool verbose = false;
};

struct Target {
    int pid = 0;            // as we see it
    int ns_pid = 0;         // as it sees itself: names its attach files
    uid_t euid = 0;
    gid_t egid = 0;
    std::string root;       // prefix that reaches the target's filesystem: "" or /proc/PID/root
};

// The effective id is the second field of the Uid:/Gid: lines; NSpid's last field is the pid in the
// innermost namespace.
Result<Target> inspect(int pid) {
    Target t;
    t.pid = pid;
    std::ifstream status(fmt::format("/proc/{}/status", pid));
    if (!status) {
        return make_error(Errc::kInvalidArgument, fmt::format("no process {}", pid), "check the pid (jps, pgrep java)");
    }
    std::string line;
    while (std::getline(status, line)) {
        std::istringstream fields(line);
        std::string key;
        fields >> key;
        if (key == "Uid:") {
            unsigned real = 0, eff = 0;
            fields >> real >> eff;
            t.euid = eff;
        } else if (key == "Gid:") {
            unsigned real = 0, eff = 0;
            fields >> real >> eff;
            t.egid = eff;
        } else if (key == "NSpid:") {
            int p = 0;
            while (fields >> p) t.ns_pid = p;
        }
    }
    if (t.ns_pid == 0) t.ns_pid = pid;

    // SIGQUIT kills a process that is not a JVM, so make sure it is one before signalling it.
    std::ifstream maps(fmt::format("/proc/{}/maps", pid));
    if (!maps) {
        return sys_error(Errc::kPermission, errno, fmt::format("cannot read /proc/{}/maps", pid),
                         "attach as the JVM's user or as root");
    }
    bool jvm = false;
    while (!jvm && std::getline(maps, line)) jvm = line.find("/libjvm.so") != std::string::npos;
    if (!jvm) {
        return make_error(Errc::kInvalidArgument, fmt::format("process {} is not a HotSpot JVM (no libjvm.so)", pid));
    }

    if (::geteuid() != 0 && (::geteuid() != t.euid || ::getegid() != t.egid)) {
        return make_error(Errc::kPermission,
                          fmt::format("process {} runs as uid {} gid {}, we as uid {} gid {}", pid, t.euid, t.egid,
                                      ::geteuid(), ::getegid()),
                          "the JVM only accepts attach requests from its own user or root");
    }

    // A JVM in a container has its own /tmp; reach it through /proc/PID/root unless it shares ours.
    struct stat ours {}, theirs {};
    const std::string their_root = fmt::format("/proc/{}/root", pid);
    if (::stat("/", &ours) == 0 && ::stat(their_root.c_str(), &theirs) == 0 &&
        (ours.st_dev != theirs.st_dev || ours.st_ino != theirs.st_ino)) {
        t.root = their_root;
    }
    return t;
}

std::string socket_path(const Target& t) { return fmt::format("{}/tmp/.java_pid{}", t.root, t.ns_pid); }

Result<int> connect_socket(const Target& t) {
    const std::string path = socket_path(t);
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0) return sys_error(Errc::kIo, errno, "no attach socket " + path);
    // Only the JVM's user can have made the real one; anything else is not the JVM's.
    if (!S_ISSOCK(st.st_mode) || st.st_uid != t.euid) {
        return make_error(Errc::kPermission, fmt::format("{} is not a socket owned by uid {}", path, t.euid));
    }
    sockaddr_un address{};
    address.sun_family = AF_UNIX;
    if (path.size() >= sizeof address.sun_path) return make_error(Errc::kInvalidArgument, "socket path too long: " + path);
    std::memcpy(address.sun_path, path.c_str(), path.size() + 1);
    const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return sys_error(Errc::kInternal, errno, "socket(AF_UNIX)");
    if (::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0) {
        const int err = errno;
        ::close(fd);
        return sys_error(Errc::kIo, err, "cannot connect to " + path);
    }
    return fd;
}

// Creates the trigger file, signals the JVM and waits for its listener's socket.
Result<int> start_listener(const Target& t, Clock::time_point deadline, bool verbose) {
    std::string trigger = fmt::format("/proc/{}/cwd/.attach_pid{}", t.pid, t.ns_pid);
    int fd = ::open(trigger.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0) {   // a read-only working directory: HotSpot also looks in /tmp
        trigger = fmt::format("{}/tmp/.attach_pid{}", t.root, t.ns_pid);
        fd = ::open(trigger.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
    }
    if (fd < 0) return sys_error(Errc::kIo, errno, "cannot create " + trigger);
    ::close(fd);
    struct Remove {
        std::string path;
        ~Remove() { ::unlink(path.c_str()); }
    } remove{trigger};
    if (verbose) fmt::print(stderr, "stackfrag attach: created {}, sending SIGQUIT to {}\n", trigger, t.pid);
    if (::kill(t.pid, SIGQUIT) != 0) return sys_error(Errc::kPermission, errno, fmt::format("kill({}, SIGQUIT)", t.pid));

    auto wait = std::chrono::milliseconds(20);
    while (true) {
        Result<int> connected = connect_socket(t);
        if (connected.ok()) return connected;
        if (Clock::now() + wait > deadline) {
            return make_error(Errc::kIo,
                              fmt::format("JVM {} did not open {} in time", t.pid, socket_path(t)),
                              "the JVM may run with -XX:+DisableAttachMechanism or -Xrs, be still starting, "
                              "or be hung; try --timeout");
        }
        std::this_thread::sleep_for(wait);
        wait = std::min(wait * 2, std::chrono::milliseconds(500));
    }
}

Status send_all(int fd, const std::string& bytes) {
    size_t sent = 0;
    while (sent < bytes.size()) {
        const ssize_t n = ::send(fd, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return sys_error(Errc::kIo, errno, "writing the attach request");
        sent += static_cast<size_t>(n);
    }
    return {};
}

Result<std::string> read_until_closed(int fd, Clock::time_point deadline) {
    std::string reply;
    char buffer[4096];
    while (true) {
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
        if (left <= 0) return make_error(Errc::kIo, "the JVM did not answer in time", "try --timeout");
        pollfd p{fd, POLLIN, 0};
        const int ready = ::poll(&p, 1, static_cast<int>(left));
        if (ready < 0 && errno == EINTR) continue;
        if (ready <= 0) continue;
        const ssize_t n = ::recv(fd, buffer, sizeof buffer, 0);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) return sys_error(Errc::kIo, errno, "reading the attach reply");
        if (n == 0) return reply;
        reply.append(buffer, static_cast<size_t>(n));
    }
}

struct LoadReply {
    int code = -1;          // the attach command's status: 0 the library was loaded and run
    std::string text;       // for code 0 the Agent_OnAttach return value, else HotSpot's message
};

Result<LoadReply> load_agent(const Target& t, const std::string& library, const std::string& options,
                             Clock::time_point deadline, bool verbose) {
    for (const std::string* arg : {&library, &options}) {
        if (arg->size() >= kMaxArgBytes) {
            return make_error(Errc::kInvalidArgument,
                              fmt::format("attach argument longer than {} bytes: {}", kMaxArgBytes - 1, *arg),
                              "HotSpot rejects longer ones; shorten the paths");
        }
    }
    Result<int> fd = connect_socket(t);
    if (!fd.ok()) fd = start_listener(t, deadline, verbose);
    if (!fd.ok()) return fd.error();
    struct Close {
        int fd;
        ~Close() { ::close(fd); }
    } close_fd{*fd};

    using namespace std::string_literals;
    const std::string request = "1\0load\0"s + library + '\0' + "true\0"s + options + '\0';
    if (verbose) fmt::print(stderr, "stackfrag attach: load {} options '{}'\n", library, options);
    if (Status sent = send_all(*fd, request); !sent.ok()) return sent.error();
    Result<std::string> reply = read_until_closed(*fd, deadline);
    if (!reply.ok()) return reply.error();
    LoadReply out;
    const size_t newline = reply->find('\n');
    const std::string head = reply->substr(0, newline);
    char* end = nullptr;
    out.code = static_cast<int>(std::strtol(head.c_str(), &end, 10));
    if (head.empty() || *end != '\0') {
        return make_error(Errc::kCorrupt, fmt::format("unexpected attach reply '{}'", *reply));
    }
    out.text = newline == std::string::npos ? "" : reply->substr(newline + 1);
    while (!out.text.empty() && (out.text.back() == '\n' || out.text.back() == '\r')) out.text.pop_back();
    return out;
}

// A private directory for the agent's answer that the JVM can reach and write: ours is 0700, so
// only its owner — the JVM's user, handed over when we attach as root — can get at the file.
struct ReplyFile {
    std::string dir;          // as we reach it
    std::string path;         // as we reach it
    std::string jvm_path;     // as the JVM names it
    ~ReplyFile() {
        if (!path.empty()) ::unlink(path.c_str());
        if (!dir.empty()) ::rmdir(dir.c_str());
    }
};

Status make_reply_file(const Target& t, ReplyFile& reply) {
    // Named after the JVM (as it sees itself), so that whoever finds one left behind knows whose it
    // was, and so that concurrent attaches to other JVMs (the tests under ctest -j) can tell theirs.
    std::string dir_template = t.root + "/tmp/stackfrag-attach." + std::to_string(t.ns_pid) + ".XXXXXX";
    if (::mkdtemp(dir_template.data()) == nullptr) return sys_error(Errc::kIo, errno, "mkdtemp " + dir_template);
    reply.dir = dir_template;
    reply.path = reply.dir + "/reply";
    reply.jvm_path = reply.path.substr(t.root.size());
    const int fd = ::open(reply.path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0) return sys_error(Errc::kIo, errno, "cannot create " + reply.path);
    int err = 0;
    if (::geteuid() != t.euid && (::fchown(fd, t.euid, t.egid) != 0 || ::chown(reply.dir.c_str(), t.euid, t.egid) != 0)) {
        err = errno;
    }
    ::close(fd);
    if (err != 0) return sys_error(Errc::kPermission, err, "cannot hand " + reply.path + " to the JVM's user");
    return {};
}

std::string read_file(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
}

std::string last_line(const std::string& text) {
    std::string t = text;
    while (!t.empty() && t.back() == '\n') t.pop_back();
    const size_t nl = t.rfind('\n');
    return nl == std::string::npos ? t : t.substr(nl + 1);
}

// After a load, HotSpot reports Agent_OnAttach's return value as "return code: N" (JDK 17) or as
// just "N" (older JDKs); other text means the library had no Agent_OnAttach or failed to load.
bool agent_returned_ok(const std::string& text) {
    const size_t digits = text.find_last_not_of("0123456789-");
    const std::string number = digits == std::string::npos ? text : text.substr(digits + 1);
    const std::string before = digits == std::string::npos ? "" : text.substr(0, digits + 1);
    return number == "0" && (before.empty() || before == "return code: ");
}

bool finished(const std::string& answer) {
    const std::string last = last_line(answer);
    return last == "ok" || last.starts_with("error:");
}

int run_attach(const AttachArgs& args) {
    auto fail = [](const Error& e) {
        fmt::print(stderr, "stackfrag attach: {}\n", e.describe());
        return 2;
    };
    const auto deadline = Clock::now() + std::chrono::milliseconds(static_cast<int64_t>(args.timeout_s * 1000));
    Result<Target> target = inspect(args.pid);
    if (!target.ok()) return fail(target.error());
    Result<std::string> library = agent_library(args.flags);
    if (!library.ok()) return fail(library.error());
    Result<std::string> flag_options = agent_option_text(args.flags, true);
    if (!flag_options.ok()) return fail(flag_options.error());

    ReplyFile reply;
    if (Status made = make_reply_file(*target, reply); !made.ok()) return fail(made.error());
    std::string options = args.action;
    if (!flag_options->empty()) options += "," + *flag_options;
    options += ",reply=" + reply.jvm_path;

    Result<LoadReply> loaded = load_agent(*target, *library, options, deadline, args.verbose);
    if (!loaded.ok()) return fail(loaded.error());

    // The agent answers in the file before Agent_OnAttach returns, or shortly after for actions it
    // finishes on its own thread; wait for the closing line until the deadline.
    std::string answer = read_file(reply.path);
    const bool accepted = loaded->code == 0 && agent_returned_ok(loaded->text);
    while (accepted && !finished(answer) && Clock::now() < deadline) {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        answer = read_file(reply.path);
    }
    if (!answer.empty()) fmt::print("{}{}", answer, answer.back() == '\n' ? "" : "\n");

    if (loaded->code != 0) {
        fmt::print(stderr, "stackfrag attach: the JVM could not load {} (attach status {}): {}\n", *library,
                   loaded->code, loaded->text);
        return 1;
    }
    if (!accepted) {
        fmt::print(stderr, "stackfrag attach: the agent refused '{}' ({}); the JVM's stderr or the agent's log says why\n",
                   args.action, loaded->text);
        return 1;
    }
    if (last_line(answer).starts_with("error:")) return 1;
    if (!finished(answer)) {
        fmt::print(stderr, "stackfrag attach: the agent was loaded but gave no answer within {} s\n", args.timeout_s);
        return 1;
    }
    return 0;
}

}  // namespace

void add_attach(CLI::App& app, int& exit_code) {
    auto* cmd = app.add_subcommand("attach", "Start, stop, dump or query profiling in a running JVM");
    auto args = std::make_shared<AttachArgs>();
    cmd->add_option("pid", args->pid, "process id of the JVM")->required();
    cmd->add_option("action", args->action, "start, stop, dump or status")
        ->required()
        ->check(CLI::IsMember({"start", "stop", "dump", "status"}));
    add_agent_flags(cmd, args->flags);
    cmd->add_option("--timeout", args->timeout_s, "seconds to wait for the JVM and the agent (default 10)");
    cmd->add_flag("-v,--verbose", args->verbose, "say what is done at each step of the attach handshake");
    cmd->footer(
        "Relative paths are made absolute here, since the JVM's working directory may differ.\n"
        "Examples:\n"
        "  stackfrag attach 4242 start -i 1ms             start sampling every thread at 1 kHz\n"
        "  stackfrag attach 4242 dump -f now.html         write the profile so far, keep sampling\n"
        "  stackfrag attach 4242 stop -f cpu.pb.gz        write the profile and stop sampling\n"
        "  stackfrag attach 4242 status                   is it sampling, at what rate, how many samples\n"
        "  stackfrag attach 4242 start --loop 5m -f 'cpu-%t.html'   a new flame graph every 5 minutes\n"
        "The JVM must run as the same user (or attach as root). Exit status: 0 the agent answered ok,\n"
        "1 the agent or the JVM refused (its message is printed), 2 the attach itself failed.\n");
    cmd->callback([args, &exit_code] { exit_code = run_attach(*args); });
}

}  // namespace sf::cli
