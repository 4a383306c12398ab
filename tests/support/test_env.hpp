// What many tests share: the JDKs they run (STACKFRAG_JDK17 / STACKFRAG_JDK25 in tests/CMakeLists.txt),
// a fresh directory under /tmp, and a substring check for messages and outputs.
#pragma once

#include <stdlib.h>

#include <catch2/catch.hpp>
#include <string>

#ifndef STACKFRAG_JDK17_HOME
#define STACKFRAG_JDK17_HOME "/usr/lib/jvm/java-17-openjdk-amd64"
#endif
#ifndef STACKFRAG_JDK25_HOME
#define STACKFRAG_JDK25_HOME "/usr/lib/jvm/temurin-25-jdk-amd64"
#endif

namespace sf::test {

inline const std::string kJdk17 = STACKFRAG_JDK17_HOME;
inline const std::string kJdk25 = STACKFRAG_JDK25_HOME;

// A new directory /tmp/sf-TAG-XXXXXX (the test removes it when it wants to).
inline std::string temp_dir(const std::string& tag) {
    std::string pattern = "/tmp/sf-" + tag + "-XXXXXX";
    REQUIRE(::mkdtemp(pattern.data()) != nullptr);
    return pattern;
}

inline bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

}  // namespace sf::test
