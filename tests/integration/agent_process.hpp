// Runs a child process (a JVM or a workload script) with extra environment variables, its output
// in files, under a time limit, and reports its exit status and CPU time (rusage).
#pragma once

#include <fcntl.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstddef>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

extern char** environ;

namespace sf::test {

struct ProcessResult {
    bool started = false;
    bool timed_out = false;
    int exit_code = -1;          // -1 when killed by a signal
    int signal = 0;
    double cpu_seconds = 0;      // user + sys of the child and its waited-for children
    double wall_seconds = 0;
    std::string out;
    std::string err;
};

inline std::string read_text_file(const std::string& path) {
    std::ifstream in(path);
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
}

// In the child before exec: perf_event_open fails with EACCES, as it does for a user whom
// kernel.perf_event_paranoid does not allow to sample. Async-signal-safe (runs after fork).
inline bool deny_perf_event_open() {
    sock_filter filter[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, arch)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_perf_event_open, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (EACCES & SECCOMP_RET_DATA)),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    sock_fprog program{static_cast<unsigned short>(sizeof filter / sizeof filter[0]), filter};
    return prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0 &&
           prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &program) == 0;
}

// scripts/sanitize.sh thread: a TSan-built agent needs libtsan loaded before the JVM starts, but
// shells die with libtsan preloaded, so the runtime named by STACKFRAG_TEST_JAVA_PRELOAD is
// preloaded into java only.
inline void preload_for_java(const std::vector<std::string>& argv, std::map<std::string, std::string>& env) {
    const char* preload = std::getenv("STACKFRAG_TEST_JAVA_PRELOAD");
    // java itself, or a launcher that execs it (setpriv … /path/java …) and passes the environment on.
    bool runs_java = false;
    for (const std::string& arg : argv) runs_java |= arg.size() >= 5 && arg.substr(arg.size() - 5) == "/java";
    if (preload != nullptr && *preload != '\0' && runs_java) env["LD_PRELOAD"] = preload;
}

// This process's environment for a java it starts itself (posix_spawn, execve): with the preload.
inline std::vector<std::string> java_environment() {
    std::vector<std::string> out;
    const char* preload = std::getenv("STACKFRAG_TEST_JAVA_PRELOAD");
    const bool preloading = preload != nullptr && *preload != '\0';
    for (char** entry = environ; *entry != nullptr; ++entry) {
        if (!preloading || std::string(*entry).rfind("LD_PRELOAD=", 0) != 0) out.emplace_back(*entry);
    }
    if (preloading) out.push_back(std::string("LD_PRELOAD=") + preload);
    return out;
}

// The same for a java started by a shell command: "exec " + java_preload_prefix() + java ...
inline std::string java_preload_prefix() {
    const char* preload = std::getenv("STACKFRAG_TEST_JAVA_PRELOAD");
    return preload != nullptr && *preload != '\0' ? std::string("env LD_PRELOAD=") + preload + " " : std::string();
}

inline ProcessResult run_process(const std::vector<std::string>& argv, const std::map<std::string, std::string>& env,
                                 const std::string& output_prefix, int timeout_seconds,
                                 bool without_perf_events = false) {
    ProcessResult result;
    std::map<std::string, std::string> merged;
    for (char** entry = environ; *entry != nullptr; ++entry) {
        const std::string text(*entry);
        const size_t eq = text.find('=');
        if (eq != std::string::npos) merged[text.substr(0, eq)] = text.substr(eq + 1);
    }
    for (const auto& [key, value] : env) merged[key] = value;
    preload_for_java(argv, merged);
    std::vector<std::string> env_text;
    for (const auto& [key, value] : merged) env_text.push_back(key + "=" + value);
    std::vector<char*> env_pointers;
    for (std::string& text : env_text) env_pointers.push_back(text.data());
    env_pointers.push_back(nullptr);
    std::vector<std::string> args = argv;
    std::vector<char*> arg_pointers;
    for (std::string& arg : args) arg_pointers.push_back(arg.data());
    arg_pointers.push_back(nullptr);

    const std::string out_path = output_prefix + ".out";
    const std::string err_path = output_prefix + ".err";
    const auto begin = std::chrono::steady_clock::now();
    const pid_t pid = fork();
    if (pid < 0) return result;
    if (pid == 0) {
        const int out = open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
        const int err = open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (out < 0 || err < 0 || dup2(out, 1) < 0 || dup2(err, 2) < 0) _exit(126);
        if (without_perf_events && !deny_perf_event_open()) _exit(126);
        execve(arg_pointers[0], arg_pointers.data(), env_pointers.data());
        _exit(127);
    }
    result.started = true;

    int status = 0;
    rusage usage{};
    while (true) {
        const pid_t done = wait4(pid, &status, WNOHANG, &usage);
        if (done == pid) break;
        if (std::chrono::steady_clock::now() - begin > std::chrono::seconds(timeout_seconds)) {
            result.timed_out = true;
            kill(pid, SIGKILL);
            wait4(pid, &status, 0, &usage);
            break;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    result.wall_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
    result.cpu_seconds = static_cast<double>(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) +
                         static_cast<double>(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6;
    if (WIFEXITED(status)) result.exit_code = WEXITSTATUS(status);
    if (WIFSIGNALED(status)) result.signal = WTERMSIG(status);
    result.out = read_text_file(out_path);
    result.err = read_text_file(err_path);
    return result;
}

// A child started without waiting for it (output in PREFIX.out / PREFIX.err), for tests that look
// at a running JVM; killed and reaped by the destructor if still running.
class BackgroundProcess {
public:
    BackgroundProcess(const std::vector<std::string>& argv, const std::string& output_prefix)
        : out_path_(output_prefix + ".out"), err_path_(output_prefix + ".err") {
        std::vector<std::string> args = argv;
        std::vector<char*> pointers;
        for (std::string& arg : args) pointers.push_back(arg.data());
        pointers.push_back(nullptr);
        std::map<std::string, std::string> extra;
        preload_for_java(argv, extra);
        std::vector<std::string> env_text;
        for (char** entry = environ; *entry != nullptr; ++entry) {
            if (extra.count("LD_PRELOAD") == 0 || std::string(*entry).rfind("LD_PRELOAD=", 0) != 0) env_text.emplace_back(*entry);
        }
        for (const auto& [key, value] : extra) env_text.push_back(key + "=" + value);
        std::vector<char*> environment;
        for (std::string& text : env_text) environment.push_back(text.data());
        environment.push_back(nullptr);
        pid_ = fork();
        if (pid_ == 0) {
            const int out = open(out_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
            const int err = open(err_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
            if (out < 0 || err < 0 || dup2(out, 1) < 0 || dup2(err, 2) < 0) _exit(126);
            execve(pointers[0], pointers.data(), environment.data());
            _exit(127);
        }
    }
    ~BackgroundProcess() {
        if (pid_ > 0 && !reaped_) {
            kill(pid_, SIGKILL);
            waitpid(pid_, nullptr, 0);
        }
    }
    BackgroundProcess(const BackgroundProcess&) = delete;
    BackgroundProcess& operator=(const BackgroundProcess&) = delete;

    pid_t pid() const { return pid_; }
    bool running() {
        if (pid_ <= 0 || reaped_) return false;
        const pid_t done = waitpid(pid_, &status_, WNOHANG);
        if (done == pid_) reaped_ = true;
        return done == 0;
    }
    // Waits up to `timeout_seconds`; the exit code, or -1 (killed by a signal, or still running).
    int wait(int timeout_seconds) {
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_seconds);
        while (running() && std::chrono::steady_clock::now() < deadline) {
            std::this_thread::sleep_for(std::chrono::milliseconds(50));
        }
        return reaped_ && WIFEXITED(status_) ? WEXITSTATUS(status_) : -1;
    }
    std::string out() const { return read_text_file(out_path_); }
    std::string err() const { return read_text_file(err_path_); }

private:
    std::string out_path_, err_path_;
    pid_t pid_ = -1;
    int status_ = 0;
    bool reaped_ = false;
};

// Compiles tests/integration/java/`source` with `jdk`'s javac into `dir` (its output in dir/javac.*).
inline ProcessResult compile_test_program(const std::string& jdk, const std::string& source, const std::string& dir,
                                          const std::vector<std::string>& flags = {}) {
    std::vector<std::string> argv{jdk + "/bin/javac"};
    argv.insert(argv.end(), flags.begin(), flags.end());
    argv.insert(argv.end(), {"-d", dir, std::string(STACKFRAG_SOURCE_DIR "/tests/integration/java/") + source});
    return run_process(argv, {}, dir + "/javac", 120);
}

}  // namespace sf::test
