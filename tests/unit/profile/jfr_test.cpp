// The JFR exporter, judged by the JDK's own `jfr` tool (JDK 17 and, when installed, JDK 25): it must
// read the file, count the events, and show each sample's thread, time and stack frames (method,
// class, package, line, bci, frame type) and the truncated flag as the profile had them.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "profile_test_support.hpp"
#include "shell.hpp"
#include "stackfrag/profile/cct.hpp"
#include "stackfrag/profile/export.hpp"
#include "test_env.hpp"

using namespace sf;
using namespace sf::profile;

namespace {

const char* const kJdk17Jfr = STACKFRAG_JDK17_HOME "/bin/jfr";
const char* const kJdk25Jfr = STACKFRAG_JDK25_HOME "/bin/jfr";

struct TempFile {
    std::string path;
    explicit TempFile(const std::string& name) {
        char dir[] = "/tmp/sf-jfr-XXXXXX";
        REQUIRE(::mkdtemp(dir) != nullptr);
        path = std::string(dir) + "/" + name;
    }
    ~TempFile() {
        ::unlink(path.c_str());
        ::rmdir(path.substr(0, path.rfind('/')).c_str());
    }
};

// main -> Worker.run (interpreted, bci 7 line 30) -> Worker.compute (compiled, bci 12 line 41) ->
// Math.abs (inlined, bci 3 line 77), or native code on top.
struct Fixture {
    MethodTable names;
    Fixture() {
        names.add(testing::method(1, "com/example/Main", "main", "([Ljava/lang/String;)V", {{0, 10}}));
        names.add(testing::method(2, "com/example/Worker", "run", "()V", {{0, 28}, {5, 30}}));
        names.add(testing::method(3, "com/example/Worker", "compute", "(I)J", {{0, 40}, {10, 41}}));
        names.add(testing::method(4, "java/lang/Math", "abs", "(I)I", {{0, 77}}));
    }
    static CallTrace trace(uint64_t time, uint32_t tid, TraceStatus status, bool native_top) {
        std::vector<Frame> frames;
        if (native_top) frames.push_back(testing::native("memcpy", 0x1000));
        for (Frame f : {testing::inlined(4, 3), testing::compiled(3, 12), testing::interpreted(2, 7), testing::interpreted(1, 2)}) {
            frames.push_back(f);
        }
        CallTrace t = testing::trace(std::move(frames), status, tid);
        t.time_ns = time;
        return t;
    }
};

nlohmann::json jfr_json(const char* tool, const std::string& path, const std::string& events) {
    const auto result = sf::test::run_shell(std::string(tool) + " print --json --stack-depth 64 --events " + events +
                                            " " + path + " 2>&1");
    INFO(result.output.substr(0, 2000));
    REQUIRE(result.exit_code == 0);
    return nlohmann::json::parse(result.output);
}

std::string jfr_summary(const char* tool, const std::string& path) {
    const auto result = sf::test::run_shell(std::string(tool) + " summary " + path + " 2>&1");
    INFO(result.output);
    REQUIRE(result.exit_code == 0);
    return result.output;
}

// The count `jfr summary` gives for an event type (its table: name, count, size).
long summary_count(const std::string& summary, const std::string& type) {
    const size_t at = summary.find(" " + type + " ");
    if (at == std::string::npos) return -1;
    return std::stol(summary.substr(summary.find_first_not_of(' ', at + type.size() + 1)));
}

std::vector<const char*> jfr_tools() {
    std::vector<const char*> tools{kJdk17Jfr};
    if (::access(kJdk25Jfr, X_OK) == 0) tools.push_back(kJdk25Jfr);
    else WARN("JDK 25 is not installed: only JDK 17's jfr reads the files");
    return tools;
}

}  // namespace

TEST_CASE("jfr: one ExecutionSample per sample, with its thread, time and frames, that JDK 17 and 25 read") {
    Fixture fixture;
    CctOptions options;
    options.keep_samples = true;
    Cct cct(&fixture.names, options);
    cct.set_thread_name(101, "main");
    cct.set_thread_name(102, "worker-1");
    const uint64_t base = 5'000'000'000;   // CLOCK_MONOTONIC ns
    const int64_t to_unix = 1'700'000'000'000'000'000 - static_cast<int64_t>(base);
    cct.info().monotonic_to_unix_ns = to_unix;
    cct.info().period_ns = 1'000'000;
    REQUIRE(cct.add(Fixture::trace(base + 1'000'000, 101, TraceStatus::kComplete, false)));
    REQUIRE(cct.add(Fixture::trace(base + 2'000'000, 102, TraceStatus::kComplete, true)));
    REQUIRE(cct.add(Fixture::trace(base + 3'000'000, 101, TraceStatus::kIncomplete, false)));
    CallTrace failed = Fixture::trace(base + 4'000'000, 101, TraceStatus::kFailed, false);
    failed.failure = FailReason::kUnknownPc;
    REQUIRE(cct.add(failed));   // kept, under its marker
    REQUIRE(cct.samples().size() == 4);

    TempFile file("profile.jfr");
    REQUIRE(write_profile(cct, file.path).ok());
    for (const char* tool : jfr_tools()) {
        INFO(tool);
        CHECK(summary_count(jfr_summary(tool, file.path), "jdk.ExecutionSample") == 4);
        const nlohmann::json doc = jfr_json(tool, file.path, "jdk.ExecutionSample");
        const auto& events = doc.at("recording").at("events");
        REQUIRE(events.size() == 4);
        std::map<std::string, int> per_thread;
        for (const auto& event : events) {
            const auto& values = event.at("values");
            per_thread[values.at("sampledThread").at("osName").get<std::string>()]++;
            CHECK(values.at("state").get<std::string>() == "STATE_RUNNABLE");
        }
        CHECK(per_thread == std::map<std::string, int>{{"main", 3}, {"worker-1", 1}});

        // Events in the file's order are the samples' order; times are the samples' own.
        const auto& first = events.at(0).at("values");
        CHECK(first.at("startTime").get<std::string>().rfind("2023-11-14T22:13:20.001", 0) == 0);
        CHECK(first.at("sampledThread").at("osThreadId").get<long>() == 101);
        const auto& stack = first.at("stackTrace");
        CHECK(stack.at("truncated").get<bool>() == false);
        const auto& frames = stack.at("frames");
        REQUIRE(frames.size() == 4);
        const auto& top = frames.at(0);
        CHECK(top.at("method").at("name").get<std::string>() == "abs");
        CHECK(top.at("method").at("descriptor").get<std::string>() == "(I)I");
        // Class and package names in internal form, as the JVM writes them (jfr shows them with dots).
        CHECK(top.at("method").at("type").at("name").get<std::string>() == "java/lang/Math");
        CHECK(top.at("method").at("type").at("package").at("name").get<std::string>() == "java/lang");
        CHECK(top.at("type").get<std::string>() == "Inlined");
        CHECK(top.at("bytecodeIndex").get<int>() == 3);
        CHECK(top.at("lineNumber").get<int>() == 77);
        // A caller frame's bci and line are where it called the frame above it.
        CHECK(frames.at(1).at("method").at("name").get<std::string>() == "compute");
        CHECK(frames.at(1).at("type").get<std::string>() == "JIT compiled");
        CHECK(frames.at(1).at("bytecodeIndex").get<int>() == 12);
        CHECK(frames.at(1).at("lineNumber").get<int>() == 41);
        CHECK(frames.at(2).at("type").get<std::string>() == "Interpreted");
        CHECK(frames.at(2).at("method").at("type").at("name").get<std::string>() == "com/example/Worker");
        CHECK(frames.at(2).at("bytecodeIndex").get<int>() == 7);
        CHECK(frames.at(2).at("lineNumber").get<int>() == 30);
        CHECK(frames.at(3).at("method").at("name").get<std::string>() == "main");

        // The text form, as users read it.
        const auto text = sf::test::run_shell(std::string(tool) + " print --events jdk.ExecutionSample " + file.path);
        CHECK(text.exit_code == 0);
        CHECK(text.output.find("java.lang.Math.abs(int) line: 77") != std::string::npos);
        CHECK(text.output.find("com.example.Worker.compute(int) line: 41") != std::string::npos);
        CHECK(text.output.find("\"worker-1\" (osThreadId = 102)") != std::string::npos);

        const auto& native = events.at(1).at("values").at("stackTrace").at("frames");
        REQUIRE(native.size() == 5);
        CHECK(native.at(0).at("method").at("name").get<std::string>() == "memcpy");
        CHECK(native.at(0).at("type").get<std::string>() == "Native");

        // Our incomplete trace: the stack trace says it is truncated, and holds no marker frame.
        const auto& cut = events.at(2).at("values").at("stackTrace");
        CHECK(cut.at("truncated").get<bool>() == true);
        CHECK(cut.at("frames").size() == 4);

        // A failed walk: its frames, then the marker naming the reason as the outermost frame.
        const auto& failed_stack = events.at(3).at("values").at("stackTrace");
        CHECK(failed_stack.at("truncated").get<bool>() == true);
        const auto& failed_frames = failed_stack.at("frames");
        REQUIRE(failed_frames.size() == 5);
        CHECK(failed_frames.at(0).at("method").at("name").get<std::string>() == "abs");
        CHECK(failed_frames.at(4).at("method").at("name").get<std::string>().find("failed: unknown_pc") !=
              std::string::npos);
    }
}

TEST_CASE("jfr: context-switch samples are events of their own type") {
    Fixture fixture;
    CctOptions options;
    options.keep_samples = true;
    Cct cct(&fixture.names, options);
    cct.info().off_cpu = true;
    for (int i = 0; i < 5; ++i) REQUIRE(cct.add(Fixture::trace(1000 + i, 7, TraceStatus::kComplete, false)));
    TempFile file("profile.offcpu.jfr");
    REQUIRE(write_profile(cct, file.path).ok());
    for (const char* tool : jfr_tools()) {
        INFO(tool);
        const std::string summary = jfr_summary(tool, file.path);
        CHECK(summary_count(summary, "stackfrag.OffCpuSample") == 5);
        CHECK(summary_count(summary, "jdk.ExecutionSample") == 0);
        const nlohmann::json doc = jfr_json(tool, file.path, "stackfrag.OffCpuSample");
        REQUIRE(doc.at("recording").at("events").size() == 5);
        CHECK(doc.at("recording").at("events").at(0).at("values").at("sampledThread").at("osName").get<std::string>() ==
              "[tid=7]");
    }
}

TEST_CASE("jfr: a tree without its samples gives one event per count, at synthetic times a period apart") {
    Fixture fixture;
    Cct cct(&fixture.names);   // no keep_samples, as a tree read from json
    for (int i = 0; i < 3; ++i) REQUIRE(cct.add(Fixture::trace(0, 1, TraceStatus::kComplete, false)));
    REQUIRE(cct.add(Fixture::trace(0, 1, TraceStatus::kComplete, true)));
    cct.info().start_unix_ns = 1'700'000'000'000'000'000;
    cct.info().period_ns = 10'000'000;
    TempFile file("counts.jfr");
    REQUIRE(write_profile(cct, file.path).ok());
    const nlohmann::json doc = jfr_json(kJdk17Jfr, file.path, "jdk.ExecutionSample");
    const auto& events = doc.at("recording").at("events");
    REQUIRE(events.size() == 4);
    std::map<std::string, int> tops;
    for (const auto& event : events) tops[event.at("values").at("stackTrace").at("frames").at(0).at("method").at("name")]++;
    CHECK(tops == std::map<std::string, int>{{"abs", 3}, {"memcpy", 1}});
    CHECK(events.at(1).at("values").at("startTime").get<std::string>().rfind("2023-11-14T22:13:20.01", 0) == 0);
}

TEST_CASE("jfr: two files concatenated are one recording of two chunks") {
    Fixture fixture;
    CctOptions options;
    options.keep_samples = true;
    Cct on_cpu(&fixture.names, options), off_cpu(&fixture.names, options);
    off_cpu.info().off_cpu = true;
    REQUIRE(on_cpu.add(Fixture::trace(10, 3, TraceStatus::kComplete, false)));
    REQUIRE(off_cpu.add(Fixture::trace(20, 3, TraceStatus::kComplete, true)));
    TempFile a("a.jfr"), b("b.jfr"), both("both.jfr");
    REQUIRE(write_profile(on_cpu, a.path).ok());
    REQUIRE(write_profile(off_cpu, b.path).ok());
    REQUIRE(sf::test::run_shell("cat " + a.path + " " + b.path + " > " + both.path).exit_code == 0);
    const std::string summary = jfr_summary(kJdk17Jfr, both.path);
    CHECK(summary_count(summary, "jdk.ExecutionSample") == 1);
    CHECK(summary_count(summary, "stackfrag.OffCpuSample") == 1);
}
