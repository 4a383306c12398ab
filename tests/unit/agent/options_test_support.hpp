// Parsing helpers shared by the option tests: parse text expecting success (failing the test with
// the error otherwise) or expecting an error (returning its message).
#pragma once

#include <catch2/catch.hpp>
#include <string>

#include "options.hpp"

namespace sf::test {

inline agent::AgentOptions parse_ok(const std::string& text) {
    Result<agent::AgentOptions> parsed = agent::parse_options(text);
    INFO("options: " << text);
    if (!parsed.ok()) FAIL("unexpected error: " << parsed.error().describe());
    return *parsed;
}

inline std::string parse_error(const std::string& text) {
    Result<agent::AgentOptions> parsed = agent::parse_options(text);
    INFO("options: " << text);
    REQUIRE_FALSE(parsed.ok());
    return parsed.error().describe();
}

}  // namespace sf::test
