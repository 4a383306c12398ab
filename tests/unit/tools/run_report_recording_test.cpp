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
