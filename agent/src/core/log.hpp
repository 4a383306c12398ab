// The agent's log: one line per message, prefixed "[stackfrag]", to stderr or a file, filtered by
// level. Usable from any thread except inside signal handlers (it formats on the stack and writes
// each line with a single write(2), so lines of concurrent threads never interleave).
#pragma once

#include <string>

#include "stackfrag/base/result.hpp"

namespace sf::agent {

enum class LogLevel : int { kError = 0, kWarn = 1, kInfo = 2, kDebug = 3 };

const char* log_level_name(LogLevel level);

// Sends the log to `path` ("" or "stderr": standard error; otherwise the file is appended to).
// Until configured, everything of level warn and above goes to stderr.
Status configure_log(const std::string& path, LogLevel level);
bool log_enabled(LogLevel level);

void log_message(LogLevel level, const char* format, ...) __attribute__((format(printf, 2, 3)));

}  // namespace sf::agent

#define SF_LOG(level, ...)                                           \
    do {                                                             \
        if (::sf::agent::log_enabled(level)) ::sf::agent::log_message(level, __VA_ARGS__); \
    } while (0)
#define SF_LOG_ERROR(...) SF_LOG(::sf::agent::LogLevel::kError, __VA_ARGS__)
#define SF_LOG_WARN(...) SF_LOG(::sf::agent::LogLevel::kWarn, __VA_ARGS__)
#define SF_LOG_INFO(...) SF_LOG(::sf::agent::LogLevel::kInfo, __VA_ARGS__)
#define SF_LOG_DEBUG(...) SF_LOG(::sf::agent::LogLevel::kDebug, __VA_ARGS__)
