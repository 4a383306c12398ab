// `stackfrag report REC.sfr -o OUT`: a recording is decoded like `replay` does and written as a
// profile; the checked-in groundtruth recordings must give a non-empty, readable CCT.
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

namespace {

int shell(const std::string& command, std::string& output) {
    FILE* pipe = ::popen(command.c_str(), "r");
    REQUIRE(pipe != nullptr);
    char buffer[4096];
    size_t got = 0;
    while ((got = std::fread(buffer, 1, sizeof(buffer), pipe)) > 0) output.append(buffer, got);
    const int status = ::pclose(pipe);
    REQUIRE(WIFEXITED(status));
    return WEXITSTATUS(status);
}

}  // namespace

TEST_CASE("report decodes a recording into a json profile") {
    const std::string recording = GENERATE(std::string(STACKFRAG_SOURCE_DIR "/tests/data/groundtruth-jdk17-validate.sfr"),
                                           std::string(STACKFRAG_SOURCE_DIR "/tests/data/groundtruth-jdk25-validate.sfr"));
    char dir[] = "/tmp/sf-report-sfr.XXXXXX";
    REQUIRE(::mkdtemp(dir) != nullptr);
    const std::string out = std::string(dir) + "/profile.json";
    std::string output;
    const int code = shell(STACKFRAG_BINARY_DIR "/bin/stackfrag report " + recording + " -o " + out + " 2>&1", output);
    INFO(output);
    REQUIRE(code == 0);
    std::ifstream in(out);
    const nlohmann::json doc = nlohmann::json::parse(in, nullptr, false);
    std::system((std::string("rm -rf ") + dir).c_str());
    REQUIRE(doc.is_object());
    REQUIRE(doc.contains("root"));
    CHECK(doc["root"]["total"].get<uint64_t>() > 0);
    CHECK(doc["traces"]["added"].get<uint64_t>() > 0);
    CHECK(doc["info"]["period_ns"].get<uint64_t>() > 0);
    CHECK(output.find("stackfrag report: wrote") != std::string::npos);
}

TEST_CASE("report names the recording it cannot read") {
    std::string output;
    const int code = shell(STACKFRAG_BINARY_DIR "/bin/stackfrag report /nonexistent/x.sfr -o /tmp/never.json 2>&1", output);
    CHECK(code == 1);
    CHECK(output.find("/nonexistent/x.sfr") != std::string::npos);
}

namespace {

// The samples of the json profile `report` writes from `recording` with `extra` options, or -1
// when it exits with an error; its stderr in `output`.
long long report_samples(const std::string& recording, const std::string& extra, std::string& output) {
    char dir[] = "/tmp/sf-report-window.XXXXXX";
    REQUIRE(::mkdtemp(dir) != nullptr);
    const std::string out = std::string(dir) + "/profile.json";
    const int code = shell(STACKFRAG_BINARY_DIR "/bin/stackfrag report " + recording + " -o " + out + " " + extra + " 2>&1", output);
    std::ifstream in(out);
    const bool written = in.good();
    const nlohmann::json doc = written ? nlohmann::json::parse(in, nullptr, false) : nlohmann::json();
    std::system((std::string("rm -rf ") + dir).c_str());
    if (code != 0) {
        CHECK(!written);   // an error writes nothing
        return -1;
    }
    REQUIRE(doc.is_object());
    return static_cast<long long>(doc["root"]["total"].get<uint64_t>());
}

}  // namespace

TEST_CASE("report --from/--to keeps a recording's samples taken in that window") {
    const std::string recording = STACKFRAG_SOURCE_DIR "/tests/data/groundtruth-jdk17-validate.sfr";
    std::string output;
    const long long all = report_samples(recording, "", output);
    REQUIRE(all > 0);

    // The recording's span, as the window line gives it; its middle splits the samples in two.
    output.clear();
    REQUIRE(report_samples(recording, "--from 0", output) == all);
    const std::string marker = "samples were taken from ";
    const size_t at = output.find(marker);
    INFO(output);
    REQUIRE(at != std::string::npos);
    double first = 0, last = 0;
    REQUIRE(std::sscanf(output.c_str() + at + marker.size(), "%lf s to %lf s", &first, &last) == 2);
    REQUIRE(last > first);
    const std::string middle = std::to_string((first + last) / 2);

    output.clear();
    const long long before = report_samples(recording, "--to " + middle, output);
    output.clear();
    const long long after = report_samples(recording, "--from " + middle, output);
    CHECK(before > 0);
    CHECK(after > 0);
    CHECK(before + after == all);
    CHECK(output.find(std::to_string(after) + " of " + std::to_string(all) + " samples lie in the window from ") !=
          std::string::npos);

    // A window past the last sample, a reversed one, a negative start: an error, and no file.
    output.clear();
    CHECK(report_samples(recording, "--from " + std::to_string(last + 10), output) == -1);
    CHECK(output.find("no sample of") != std::string::npos);
    CHECK(output.find(marker) != std::string::npos);
    output.clear();
    CHECK(report_samples(recording, "--from 2 --to 1", output) == -1);
    CHECK(output.find("--to 1 must come after --from 2") != std::string::npos);
    output.clear();
    CHECK(report_samples(recording, "--from -1", output) == -1);
    CHECK(output.find("--from -1: seconds after the recording's start") != std::string::npos);
}

TEST_CASE("report --from/--to refuses a profile, whose samples carry no times") {
    char dir[] = "/tmp/sf-report-window-profile.XXXXXX";
    REQUIRE(::mkdtemp(dir) != nullptr);
    const std::string collapsed = std::string(dir) + "/in.collapsed";
    std::ofstream(collapsed) << "main;work 5\n";
    std::string output;
    const int code = shell(STACKFRAG_BINARY_DIR "/bin/stackfrag report " + collapsed + " -o " + dir + "/out.json --to 3 2>&1", output);
    const bool written = std::ifstream(std::string(dir) + "/out.json").good();
    std::system((std::string("rm -rf ") + dir).c_str());
    INFO(output);
    CHECK(code == 1);
    CHECK(!written);
    CHECK(output.find("--from/--to: " + collapsed + " is a profile, whose samples carry no times") != std::string::npos);
}
