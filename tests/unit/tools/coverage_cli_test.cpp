// Coverage in `replay --json` (key coverage) and `report`, from a recording with a ProcessCpu event:
// the checked-in groundtruth recording, copied with the process's CPU time appended.
#include <catch2/catch.hpp>
#include <algorithm>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>

#include "shell.hpp"
#include "stackfrag/events/recording.hpp"
#include "test_env.hpp"

using namespace sf;

TEST_CASE("replay --json and report give the coverage of a recording") {
    const std::string dir = sf::test::temp_dir("coverage");
    const std::string source = STACKFRAG_SOURCE_DIR "/tests/data/groundtruth-jdk17-validate.sfr";
    const std::string copy = dir + "/with-cpu.sfr";
    uint64_t profile_samples = 0, period_ns = 0, last_ns = 0;
    {
        auto reader = RecordingReader::open(source);
        REQUIRE(reader.ok());
        auto writer = RecordingWriter::create(copy, (*reader)->header());
        REQUIRE(writer.ok());
        while (auto event = (*reader)->next()) {
            if (const auto* s = std::get_if<Sample>(&*event); s && s->source != SampleSource::kPerfSwitch) ++profile_samples;
            if (const auto* vm = std::get_if<VmInfo>(&*event)) period_ns = vm->sample_period_ns;
            last_ns = std::max(last_ns, time_of(*event));
            REQUIRE((*writer)->write(*event).ok());
        }
        // Samples x period is 4/5 of the process's CPU time, a quarter of which was system time.
        const uint64_t process = profile_samples * period_ns * 5 / 4;
        REQUIRE((*writer)->write(ProcessCpu{last_ns + 1, process * 3 / 4, process - process * 3 / 4}).ok());
        REQUIRE((*writer)->close().ok());
    }
    REQUIRE(profile_samples > 0);
    REQUIRE(period_ns > 0);

    const auto replay = sf::test::run_shell(STACKFRAG_BINARY_DIR "/bin/stackfrag replay --json " + copy);
    REQUIRE(replay.exit_code == 0);
    const nlohmann::json doc = nlohmann::json::parse(replay.output);
    const nlohmann::json& coverage = doc["coverage"];
    INFO(coverage.dump());
    CHECK(coverage["samples"].get<uint64_t>() == profile_samples);
    CHECK(coverage["sampled_cpu_ns"].get<uint64_t>() == profile_samples * period_ns);
    CHECK(coverage["ratio"].get<double>() == Approx(0.8).epsilon(0.001));
    CHECK(coverage["process_user_ns"].get<uint64_t>() * 4 == Approx(coverage["process_cpu_ns"].get<uint64_t>() * 3).epsilon(0.001));
    CHECK(coverage["threads"]["java"]["share"].get<double>() > 0.5);

    const auto report = sf::test::run_shell(STACKFRAG_BINARY_DIR "/bin/stackfrag report " + copy + " -o " + dir +
                                            "/p.collapsed 2>&1");
    INFO(report.output);
    CHECK(report.exit_code == 0);
    CHECK(sf::test::contains(report.output, "coverage 80.0% of the process's CPU time"));

    // A recording from before the event: no ratio, said so.
    const auto old = sf::test::run_shell(STACKFRAG_BINARY_DIR "/bin/stackfrag replay --json " + source);
    CHECK(nlohmann::json::parse(old.output)["coverage"]["ratio"].is_null());
    std::system(("rm -rf " + dir).c_str());
}
