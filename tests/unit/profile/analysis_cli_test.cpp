// `stackfrag diff` and `stackfrag query` run as a user would: the built CLI on files, --json parsed.
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include "shell.hpp"
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "profile_test_support.hpp"
#include "stackfrag/profile/analysis.hpp"
#include "stackfrag/profile/export.hpp"

using namespace sf;
using namespace sf::profile;
using namespace sf::profile::testing;

namespace {

constexpr const char* kCli = STACKFRAG_BINARY_DIR "/bin/stackfrag";

using sf::test::CommandResult;

CommandResult run_stackfrag(const std::string& arguments, const std::string& redirect = "2>/dev/null") {
    struct stat info{};
    REQUIRE(::stat(kCli, &info) == 0);   // build the stackfrag_cli target first
    const std::string command = std::string(kCli) + " " + arguments + " " + redirect;
    return sf::test::run_shell(command);
}

nlohmann::json run_json(const std::string& arguments) {
    CommandResult result = run_stackfrag(arguments);
    INFO(result.output);
    REQUIRE(result.exit_code == 0);
    return nlohmann::json::parse(result.output);
}

// A directory of its own per test case, removed at the end.
struct ScratchDir {
    std::string path;
    ScratchDir() {
        char pattern[] = "/tmp/sf-analysis-XXXXXX";
        REQUIRE(::mkdtemp(pattern) != nullptr);
        path = pattern;
    }
    ~ScratchDir() { (void)std::system(("rm -rf '" + path + "'").c_str()); }
    std::string file(const std::string& name, const std::string& content) const {
        const std::string full = path + "/" + name;
        std::ofstream(full, std::ios::binary) << content;
        return full;
    }
};

std::string json_text(const Cct& cct) {
    std::ostringstream out;
    REQUIRE(write_json(cct, out).ok());
    return out.str();
}

std::string collapsed_text(const Cct& cct) {
    std::ostringstream out;
    REQUIRE(write_collapsed(cct, out).ok());
    return out.str();
}

// A per-thread profile with call sites, compiled and interpreted runs of one method, and recursion.
Cct sample_profile(MethodTable& names) {
    names.add(method(1, "app/Main", "main"));
    names.add(method(2, "app/Main", "work"));
    names.add(method(3, "app/Main", "leaf"));
    Cct cct(&names, CctOptions{.per_thread = true});
    cct.set_thread_name(1, "main");
    cct.set_thread_name(2, "worker");
    for (int i = 0; i < 6; ++i) (void)cct.add(trace({compiled(3, 2), compiled(2, 4), interpreted(1, 5)}, TraceStatus::kComplete, 1));
    for (int i = 0; i < 3; ++i) (void)cct.add(trace({inlined(2, 1), interpreted(1, 9)}, TraceStatus::kComplete, 2));
    (void)cct.add(trace({compiled(2, 7), compiled(2, 4), interpreted(1, 5)}, TraceStatus::kComplete, 2));
    (void)cct.add(trace({native("memcpy"), interpreted(1, 5)}, TraceStatus::kComplete, 1));
    return cct;
}

}  // namespace

TEST_CASE("stackfrag diff of a profile against itself, as json and as collapsed stacks") {
    MethodTable names;
    const Cct cct = sample_profile(names);
    ScratchDir dir;
    const std::string json_file = dir.file("self.json", json_text(cct));
    const std::string collapsed_file = dir.file("self.collapsed", collapsed_text(cct));
    // async-profiler names its collapsed output .txt; the content decides.
    const std::string txt_file = dir.file("self.txt", collapsed_text(cct));

    for (const auto& [a, b] : {std::pair{json_file, json_file}, std::pair{json_file, collapsed_file},
                               std::pair{collapsed_file, txt_file}}) {
        INFO(a << " vs " << b);
        nlohmann::json diff = run_json("diff " + a + " " + b + " --json");
        CHECK(diff["overlap"].get<double>() == Approx(1.0));
        CHECK(diff["hot_coverage_a_in_b"].get<double>() == Approx(1.0));
        CHECK(diff["hot_coverage_b_in_a"].get<double>() == Approx(1.0));
        CHECK(diff["method_correlation"].get<double>() == Approx(1.0));
        CHECK(diff["samples_a"] == 11);
        CHECK(diff["samples_b"] == 11);
        // Threads dropped, call sites and kinds merged: main, main;work, main;work;leaf,
        // main;work;work, main;memcpy.
        CHECK(diff["contexts_a"] == 5);
        CHECK(diff["contexts_b"] == 5);
        CHECK(diff["top_differences"].empty());
    }

    nlohmann::json by_thread = run_json("diff " + json_file + " " + collapsed_file + " --json --keep-threads");
    CHECK(by_thread["overlap"].get<double>() == Approx(1.0));
    // [main tid=1] with main, main;work, main;work;leaf, main;memcpy; [worker tid=2] with main,
    // main;work, main;work;work.
    CHECK(by_thread["contexts_a"] == 9);
}

TEST_CASE("stackfrag diff reports the worked example's values and differences") {
    ScratchDir dir;
    const std::string a = dir.file("a.collapsed", "main;work;leaf 6\nmain;work 2\nmain;idle 2\n");
    const std::string b = dir.file("b.folded", "main;work;leaf 3\nmain;work 1\nmain;other 4\n");
    nlohmann::json diff = run_json("diff " + a + " " + b + " --json --threshold 0.5 --top 1");
    CHECK(diff["overlap"].get<double>() == Approx(0.5));
    CHECK(diff["hot_coverage_a_in_b"].get<double>() == Approx(1.0));
    CHECK(diff["hot_coverage_b_in_a"].get<double>() == Approx(0.5));
    CHECK(diff["samples_a"] == 10);
    CHECK(diff["samples_b"] == 8);
    REQUIRE(diff["top_differences"].size() == 1);
    CHECK(diff["top_differences"][0]["context"] == nlohmann::json::array({"main", "other"}));
    CHECK(diff["top_differences"][0]["b"].get<double>() == Approx(0.5));

    CommandResult text = run_stackfrag("diff " + a + " " + b);
    REQUIRE(text.exit_code == 0);
    CHECK(text.output.find("degree of overlap") != std::string::npos);
    CHECK(text.output.find("0.500") != std::string::npos);
    CHECK(text.output.find("main;other") != std::string::npos);

    CommandResult missing = run_stackfrag("diff " + a + " " + dir.path + "/absent.json", "2>&1");
    CHECK(missing.exit_code == 1);
    CHECK(missing.output.find("absent.json") != std::string::npos);
    CHECK(run_stackfrag("diff " + a + " " + b + " --threshold 2").exit_code == 1);
}

TEST_CASE("stackfrag query: method table, one method, hottest paths, node id") {
    MethodTable names;
    const Cct cct = sample_profile(names);
    ScratchDir dir;
    const std::string file = dir.file("profile.json", json_text(cct));

    nlohmann::json table = run_json("query " + file + " --json");
    CHECK(table["samples"] == 11);
    REQUIRE(table["methods"].size() == 4);
    CHECK(table["methods"][0]["name"] == "app/Main.main");
    CHECK(table["methods"][0]["total"] == 11);
    CHECK(table["methods"][1]["name"] == "app/Main.work");
    CHECK(table["methods"][1]["total"] == 10);   // the recursive sample once
    CHECK(table["methods"][1]["self"] == 4);     // 3 inlined + 1 in the inner work

    nlohmann::json work = run_json("query " + file + " --json --method Main.work");
    CHECK(work["method"]["name"] == "app/Main.work");
    CHECK(work["method"]["callers"] == nlohmann::json::parse(
                                           R"([{"name":"app/Main.main","total":10},{"name":"app/Main.work","total":1}])"));
    CHECK(work["method"]["callees"] == nlohmann::json::parse(
                                           R"([{"name":"app/Main.leaf","total":6},{"name":"app/Main.work","total":1}])"));
    // Per thread and call site in main: [main tid=1] at bci 5; [worker tid=2] at bci 9 and at bci 5,
    // and under that one the recursive work.
    CHECK(work["method"]["context_count"] == 4);

    CHECK(run_stackfrag("query " + file + " --method Main").exit_code == 1);   // ambiguous
    CHECK(run_stackfrag("query " + file + " --method nothing").exit_code == 1);

    nlohmann::json paths = run_json("query " + file + " --json --paths 1");
    REQUIRE(paths["paths"].size() == 1);
    CHECK(paths["paths"][0]["self"] == 6);
    CHECK(paths["paths"][0]["path"] ==
          nlohmann::json::array({"[main tid=1]", "app/Main.main", "app/Main.work", "app/Main.leaf"}));

    const uint64_t hottest = paths["paths"][0]["id"].get<uint64_t>();
    nlohmann::json node = run_json("query " + file + " --json --id " + std::to_string(hottest));
    CHECK(node["node"]["self"] == 6);
    REQUIRE(node["node"]["trace"].size() == 4);
    CHECK(node["node"]["trace"][0]["type"] == "thread");
    CHECK(node["node"]["trace"][2]["name"] == "app/Main.work");
    CHECK(node["node"]["trace"][2]["call_bci"] == 5);
    CHECK(node["node"]["trace"][3]["type"] == "compiled");
    CHECK(node["node"]["trace"][3]["id"] == hottest);
    CHECK(run_stackfrag("query " + file + " --id 100000").exit_code == 1);
}
