// The agent's log: every message reaches the file whole, however long (the stop summary's last
// lines, e.g. off-CPU, come after a list of top methods and once fell past a fixed-size line).
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "log.hpp"
#include "test_env.hpp"

namespace {

std::string file_text(const std::string& path) {
    std::ifstream in(path);
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
}

struct LogFile {
    std::string path;
    explicit LogFile(const std::string& dir) : path(dir + "/agent.log") {
        REQUIRE(sf::agent::configure_log(path, sf::agent::LogLevel::kInfo).ok());
    }
    ~LogFile() { (void)sf::agent::configure_log("", sf::agent::LogLevel::kWarn); }
};

}  // namespace

TEST_CASE("log: a message longer than a line buffer is written whole, on one record ending in a newline") {
    const std::string dir = sf::test::temp_dir("log");
    std::string text;
    {
        LogFile log(dir);
        std::string body;
        for (int i = 0; i < 400; ++i) body += "  method" + std::to_string(i) + "\n";   // ~5 KB
        body += "  off-CPU: the last line";
        SF_LOG_INFO("summary:\n%s", body.c_str());
        SF_LOG_INFO("short %d", 42);
        text = file_text(log.path);
        REQUIRE(text.size() > 4096);
    }
    CHECK(text.find("[stackfrag] info: summary:\n  method0\n") == 0);
    CHECK(text.find("  method399\n  off-CPU: the last line\n[stackfrag] info: short 42\n") != std::string::npos);
    CHECK(text.back() == '\n');
    std::filesystem::remove_all(dir);
}

TEST_CASE("log: messages below the level are not written") {
    const std::string dir = sf::test::temp_dir("log");
    LogFile log(dir);
    REQUIRE(sf::agent::configure_log(log.path, sf::agent::LogLevel::kWarn).ok());
    SF_LOG_INFO("hidden");
    SF_LOG_WARN("shown");
    const std::string text = file_text(log.path);
    CHECK(text.find("hidden") == std::string::npos);
    CHECK(text.find("[stackfrag] warn: shown\n") != std::string::npos);
    std::filesystem::remove_all(dir);
}
