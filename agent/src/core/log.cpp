#include "log.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace sf::agent {

namespace {
// Plain atomics, never destroyed: the log must keep working while the JVM runs its exit handlers.
std::atomic<int> g_log_fd{STDERR_FILENO};
std::atomic<int> g_log_level{static_cast<int>(LogLevel::kWarn)};

void write_fully(int fd, const char* data, size_t size) {
    while (size > 0) {
        const ssize_t n = ::write(fd, data, size);
        if (n < 0) {
            if (errno == EINTR) continue;
            return;   // nowhere left to report a failing log
        }
        data += n;
        size -= static_cast<size_t>(n);
    }
}
}  // namespace

const char* log_level_name(LogLevel level) {
    switch (level) {
        case LogLevel::kError: return "error";
        case LogLevel::kWarn: return "warn";
        case LogLevel::kInfo: return "info";
        case LogLevel::kDebug: return "debug";
    }
    return "?";
}

Status configure_log(const std::string& path, LogLevel level) {
    int fd = STDERR_FILENO;
    if (!path.empty() && path != "stderr") {
        // Appending to an existing log is fine; following a symlink planted in a shared directory
        // (the JVM may run as root) is not. The log names files and options: 0600.
        fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (fd < 0) {
            const int error = errno;
            return sys_error(Errc::kIo, error,
                             "cannot open log file '" + path + "'" + (error == ELOOP ? " (it is a symbolic link)" : ""),
                             "choose a writable path for log=, or log=stderr");
        }
    }
    const int old_fd = g_log_fd.exchange(fd);
    if (old_fd != STDERR_FILENO && old_fd != fd) ::close(old_fd);
    g_log_level.store(static_cast<int>(level));
    return {};
}

bool log_enabled(LogLevel level) {
    return static_cast<int>(level) <= g_log_level.load(std::memory_order_relaxed);
}

void log_message(LogLevel level, const char* format, ...) {
    char line[2048];
    int used = std::snprintf(line, sizeof line, "[stackfrag] %s: ", log_level_name(level));
    if (used < 0) return;
    va_list args;
    va_start(args, format);
    va_list again;
    va_copy(again, args);
    const int body = std::vsnprintf(line + used, sizeof line - static_cast<size_t>(used), format, args);
    va_end(args);
    if (body < 0) {
        va_end(again);
        return;
    }
    const size_t size = static_cast<size_t>(used) + static_cast<size_t>(body);
    if (size + 1 <= sizeof line) {
        va_end(again);
        line[size] = '\n';
        write_fully(g_log_fd.load(std::memory_order_relaxed), line, size + 1);
        return;
    }
    // The stop summary outgrows any fixed line, and its last parts (off-CPU, per-kind shares) are
    // the ones a cut would lose; a message this long is rare, so it is formatted again in full.
    char* whole = static_cast<char*>(std::malloc(size + 2));
    if (whole == nullptr) {
        va_end(again);
        line[sizeof line - 1] = '\n';
        write_fully(g_log_fd.load(std::memory_order_relaxed), line, sizeof line);
        return;
    }
    std::memcpy(whole, line, static_cast<size_t>(used));
    std::vsnprintf(whole + used, static_cast<size_t>(body) + 1, format, again);
    va_end(again);
    whole[size] = '\n';
    write_fully(g_log_fd.load(std::memory_order_relaxed), whole, size + 1);
    std::free(whole);
}

}  // namespace sf::agent
