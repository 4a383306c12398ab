// Classes redefined and retransformed while their methods run (Redefinitions.java, the way JFR and
// Java agents instrument loaded classes): the agent announces the new Method*s as soon as the VM
// has swapped them in, so the interpreted frames that name them decode, live and in replay alike.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>
#include <string>

#include "agent_process.hpp"
#include "replay_json.hpp"
#include "test_env.hpp"

namespace {

const std::string kAgent = STACKFRAG_BINARY_DIR "/lib/libstackfrag.so";

uint64_t logged_number(const std::string& log, const std::string& pattern) {
    std::smatch m;
    REQUIRE(std::regex_search(log, m, std::regex(pattern)));
    return std::stoull(m[1]);
}

// Samples of the collapsed profile whose stack contains `part`, and all of them.
std::pair<uint64_t, uint64_t> samples_with(const std::string& collapsed, const std::string& part) {
    std::istringstream in(collapsed);
    std::string line;
    uint64_t with = 0, total = 0;
    while (std::getline(in, line)) {
        const size_t space = line.rfind(' ');
        if (space == std::string::npos) continue;
        const uint64_t n = std::stoull(line.substr(space + 1));
        total += n;
        if (line.find(part) != std::string::npos) with += n;
    }
    return {with, total};
}

}  // namespace

TEST_CASE("methods of redefined and retransformed classes are announced at once and decode", "[redefinition]") {
    for (const std::string& jdk : {sf::test::kJdk17, sf::test::kJdk21, sf::test::kJdk25}) {
        if (!std::filesystem::exists(jdk + "/bin/java")) {
            WARN("no JDK at " << jdk);
            continue;
        }
        sf::test::ScratchDir dir("redefinitions-it");
        std::filesystem::create_directories(dir.file("classes"));
        const auto compiled = sf::test::compile_test_program(jdk, "Redefinitions.java", dir.file("classes"), {"--release", "17"});
        INFO(compiled.err);
        REQUIRE(compiled.exit_code == 0);
        {
            std::ofstream manifest(dir.file("manifest.txt"));
            manifest << "Main-Class: Redefinitions\nLauncher-Agent-Class: Redefinitions\n"
                        "Can-Redefine-Classes: true\nCan-Retransform-Classes: true\n";
        }
        const auto jarred = sf::test::run_process({jdk + "/bin/jar", "--create", "--file", dir.file("run.jar"), "--manifest",
                                                   dir.file("manifest.txt"), "-C", dir.file("classes"), "."},
                                                  {}, dir.file("jar"), 120);
        INFO(jarred.err);
        REQUIRE(jarred.exit_code == 0);

        const std::string rec = dir.file("run.sfr"), live = dir.file("live.collapsed"), replayed = dir.file("replay.collapsed");
        const auto run = sf::test::run_process({jdk + "/bin/java", "-XX:CompileCommand=quiet",
                                                "-XX:CompileCommand=exclude,Redefinitions$Hot::*",
                                                "-agentpath:" + kAgent + "=interval=1ms,record=" + rec + ",file=" + live,
                                                "-jar", dir.file("run.jar"), "3"},
                                               {}, dir.file("jvm"), 300);
        INFO(jdk << "\n" << run.out << run.err);
        REQUIRE(run.exit_code == 0);
        REQUIRE(sf::test::contains(run.out, "retransformed at"));

        const nlohmann::json replay = sf::test::replay_json(rec, dir.path(), replayed);
        INFO(replay.dump(1));
        const double samples = replay["samples"].get<double>();
        REQUIRE(samples > 1000);
        // Two thirds of the run come after the first redefinition; while the new Method*s were
        // unknown (until the code poll, 5 s on), ~70 % of the samples failed as unknown_method.
        CHECK(static_cast<double>(sf::test::failed_samples(replay)) <= 0.01 * samples);
        const auto [hot, total] = samples_with(sf::test::read_text_file(replayed), "Redefinitions$Hot.step");
        CHECK(static_cast<double>(hot) >= 0.5 * static_cast<double>(total));
        sf::test::check_live_matches_replay(run.err, live, replayed);
        // Both replacements were seen through the hook, and each gave Hot's methods anew.
        CHECK(logged_number(run.err, "classes redefined or retransformed: (\\d+)") >= 2);
        CHECK(logged_number(run.err, "their new methods announced: (\\d+)") >= 4);
    }
}
