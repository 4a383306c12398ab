// Runs a shell command from a test and collects its standard output and exit code, so tests of the
// command-line tools all run it the same way.
#pragma once

#include <sys/wait.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <string>

namespace sf::test {

struct CommandResult {
    int exit_code = -1;
    std::string output;
};

inline CommandResult run_shell(const std::string& command) {
    FILE* pipe = ::popen(command.c_str(), "r");
    REQUIRE(pipe != nullptr);
    CommandResult result;
    char buffer[4096];
    size_t got = 0;
    while ((got = std::fread(buffer, 1, sizeof(buffer), pipe)) > 0) result.output.append(buffer, got);
    const int status = ::pclose(pipe);
    REQUIRE(WIFEXITED(status));
    result.exit_code = WEXITSTATUS(status);
    return result;
}

}  // namespace sf::test
