// What many tests share: the JDKs they run (STACKFRAG_JDK17 / 21 / 25 in tests/CMakeLists.txt),
// a fresh directory under /tmp, a substring check for messages and outputs, and whether a path exists.
#pragma once

#include <stdlib.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <string>

#ifndef STACKFRAG_JDK17_HOME
#define STACKFRAG_JDK17_HOME "/usr/lib/jvm/java-17-openjdk-amd64"
#endif
#ifndef STACKFRAG_JDK21_HOME
#define STACKFRAG_JDK21_HOME "/usr/lib/jvm/java-21-openjdk-amd64"
#endif
#ifndef STACKFRAG_JDK25_HOME
#define STACKFRAG_JDK25_HOME "/usr/lib/jvm/temurin-25-jdk-amd64"
#endif

namespace sf::test {

inline const std::string kJdk17 = STACKFRAG_JDK17_HOME;
// Debian 12 packages no JDK 21: tests on it run where one is installed (or STACKFRAG_JDK21 names
// one) and are skipped elsewhere, as JDK 25's are.
inline const std::string kJdk21 = STACKFRAG_JDK21_HOME;
inline const std::string kJdk25 = STACKFRAG_JDK25_HOME;

// A new directory /tmp/sf-TAG-XXXXXX (the test removes it when it wants to).
inline std::string temp_dir(const std::string& tag) {
    std::string pattern = "/tmp/sf-" + tag + "-XXXXXX";
    REQUIRE(::mkdtemp(pattern.data()) != nullptr);
    return pattern;
}

// A temp_dir removed with everything in it when the test is done with it, passed or failed (a CI
// machine's /tmp kept 17 MB of recordings, logs and outputs per run); SF_KEEP_TEST_FILES=1 keeps it
// for a look after a local run.
class ScratchDir {
public:
    explicit ScratchDir(const std::string& tag = "test") : path_(temp_dir(tag)) {}
    ~ScratchDir() {
        const char* keep = ::getenv("SF_KEEP_TEST_FILES");
        if (keep != nullptr && *keep != '\0' && *keep != '0') return;
        std::error_code ignored;
        std::filesystem::remove_all(path_, ignored);
    }
    ScratchDir(const ScratchDir&) = delete;
    ScratchDir& operator=(const ScratchDir&) = delete;
    const std::string& path() const { return path_; }
    std::string file(const std::string& name) const { return path_ + "/" + name; }

private:
    std::string path_;
};

inline bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// Whether a file or directory is there (a JDK, a package's jar, a workload's script).
inline bool exists(const std::string& path) {
    std::error_code ignored;
    return std::filesystem::exists(path, ignored);
}

}  // namespace sf::test
