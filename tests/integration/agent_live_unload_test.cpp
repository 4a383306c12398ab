// Code and class unloading never corrupt a decode. tests/integration/java/Churn.java defines a
// class anew in a fresh class loader every round, runs it until compiled, drops the loader and
// forces GCs, in an 8 MB code cache: classes, their methods and their nmethods are unloaded while
// samples are taken, and code addresses are reused by the next round's code. The recording (with
// the validate oracle) is replayed and compared with AsyncGetCallTrace pair by pair.
//
// Threshold: >= 95% of the pairs in which both succeeded are identical apart from the documented
// interpreted top-bci difference. Measured: 97.0% (360 of 371) on a loaded 2-CPU machine; the
// rest are top frames at a method boundary (entry of a callee, inlined call), whose callers agree.
// Code looked up without its time (the map as it is at the end, or before an unload) would
// attribute every sample in reused code to the wrong class version: with hundreds of unloads per
// run that is a large share of the Payload samples, far below the threshold.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>
#include <string>

#include "agent_process.hpp"
#include "test_env.hpp"

namespace {

const std::string kAgent = STACKFRAG_BINARY_DIR "/lib/libstackfrag.so";
const std::string kCli = STACKFRAG_BINARY_DIR "/bin/stackfrag";
using sf::test::kJdk17;

bool contains_text(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

size_t count_of(const std::string& text, const std::string& part) {
    size_t n = 0;
    for (size_t at = text.find(part); at != std::string::npos; at = text.find(part, at + 1)) ++n;
    return n;
}

}  // namespace

TEST_CASE("unloaded classes and code never misattribute a decoded frame (JDK 17, vs ASGCT)", "[live][unload]") {
    std::string dir = "/tmp/sf-live-it-unload-XXXXXX";
    REQUIRE(mkdtemp(dir.data()) != nullptr);
    const auto javac = sf::test::compile_test_program(kJdk17, "Churn.java", dir);
    REQUIRE(javac.exit_code == 0);
    const std::string rec = dir + "/churn.sfr", live = dir + "/live.collapsed";
    auto run_churn = [&] {
        return sf::test::run_process(
            {kJdk17 + "/bin/java", "-agentpath:" + kAgent + "=record=" + rec + ",validate,file=" + live,
             "-Xlog:class+unload=info:file=" + dir + "/unload.log", "-XX:ReservedCodeCacheSize=8m", "-cp", dir, "Churn", "3000"},
            {}, dir + "/jvm", 120);
    };
    auto r = run_churn();
    // JDK 17.0.15's own race under this churn: its ServiceThread posts a deferred CompiledMethodLoad
    // for an nmethod whose class is being unloaded by then, and a guarantee in
    // JvmtiExport::post_compiled_method_load aborts the VM before any agent code runs (seen twice in
    // ~15 runs on a loaded 2-CPU machine, 2026-12-03; hs_err names that guarantee). Not the agent's
    // doing, but every agent that enables the event (async-profiler too) exposes it: one run again.
    if (r.exit_code != 0 && contains_text(r.out, "post_compiled_method_load") && contains_text(r.out, "is_unloading")) {
        WARN("the JVM aborted in its own CompiledMethodLoad posting race (JDK bug); ran again");
        r = run_churn();
    }
    INFO(r.err);
    INFO(r.out);
    REQUIRE(r.exit_code == 0);

    std::smatch m;
    REQUIRE(std::regex_search(r.err, m, std::regex("code_unload=(\\d+)")));
    CHECK(std::stoul(m[1]) > 0);
    const size_t classes_unloaded = count_of(sf::test::read_text_file(dir + "/unload.log"), "unloading class Churn$Payload");
    CHECK(classes_unloaded > 0);

    const std::string replayed = dir + "/replay.collapsed";
    const auto replay = sf::test::run_process({kCli, "replay", rec, "--json", "--collapsed", replayed}, {}, dir + "/replay", 300);
    REQUIRE(replay.exit_code == 0);
    const nlohmann::json j = nlohmann::json::parse(replay.out);
    const double both_ok = j["oracle_both_ok"].get<double>();
    const double same = j["oracle_identical_except_top_bci"].get<double>();
    INFO("both ok " << both_ok << ", identical except top bci " << same << ", code_unload " << m[1]
                    << ", classes unloaded " << classes_unloaded << "\n" << replay.out);
    std::printf("unload: both ok %.0f, identical except top bci %.0f (%.1f%%), code_unload %s, classes unloaded %zu, "
                "decoded again %llu (%llu resolved)\n",
                both_ok, same, 100.0 * same / both_ok, m[1].str().c_str(), classes_unloaded,
                j["retried"]["samples"].get<unsigned long long>(), j["retried"]["resolved"].get<unsigned long long>());
    std::fflush(stdout);
    REQUIRE(both_ok >= 50);
#if defined(__SANITIZE_THREAD__)
    // No reference under TSan: it defers an asynchronous signal that arrives in uninstrumented code
    // (the JIT's) to the thread's next libc call it intercepts, then runs the handler with the
    // context of the arrival. The oracle's registers then come from one moment, its stack copy and
    // AsyncGetCallTrace from a later one (seen: registers in compiled Payload.step, ASGCT in
    // System.currentTimeMillis), so its pairs disagree for reasons that are not the decoder's
    // (91-96 % here). The perf samples the profile is made of are taken by the kernel and are not
    // affected; the ASan and normal builds check the agreement.
    if (same / both_ok < 0.95) WARN("TSan: agreement with ASGCT " << 100.0 * same / both_ok << "% (not checked)");
#else
    CHECK(same / both_ok >= 0.95);
#endif
    // Live decoding saw the same churn the same way.
    REQUIRE(std::regex_search(r.err, m, std::regex("(\\d+) \\(live queue full\\)")));
    if (m[1] == "0") CHECK(sf::test::read_text_file(live) == sf::test::read_text_file(replayed));
    std::filesystem::remove_all(dir);
}

TEST_CASE("without a recording, classes unloaded before their names are read switch naming back to class preparation",
          "[live][unload]") {
    std::string dir = "/tmp/sf-live-it-churn-names-XXXXXX";
    REQUIRE(mkdtemp(dir.data()) != nullptr);
    const auto javac = sf::test::compile_test_program(kJdk17, "Churn.java", dir);
    REQUIRE(javac.exit_code == 0);
    const std::string live = dir + "/live.collapsed";
    const auto r = sf::test::run_process({kJdk17 + "/bin/java", "-agentpath:" + kAgent + "=file=" + live + ",loglevel=info",
                                          "-XX:ReservedCodeCacheSize=8m", "-cp", dir, "Churn", "3000"},
                                         {}, dir + "/jvm", 120);
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    // Each round's Payload class lives a few milliseconds: the first answers say "no longer known",
    // and from then on every prepared class comes with its names.
    CHECK(std::regex_search(r.err, std::regex("\\d+ methods' classes were unloaded before their names could be read: every "
                                              "method is named at its class's preparation from now on")));
    CHECK(contains_text(r.err, "(then every method named at class preparation: classes were being unloaded)"));
    uint64_t samples = 0, unnamed = 0;
    std::istringstream lines(sf::test::read_text_file(live));
    for (std::string line; std::getline(lines, line);) {
        const uint64_t count = std::stoull(line.substr(line.rfind(' ') + 1));
        samples += count;
        if (line.find("[unknown_method 0x") != std::string::npos) unnamed += count;
    }
    INFO("samples " << samples << ", under a placeholder " << unnamed);
    REQUIRE(samples > 500);
    // Only the samples before the switch (about the first second of ~3) keep placeholders; without
    // it, more than half of this run's samples did.
    CHECK(unnamed * 4 < samples);
    CHECK(count_of(sf::test::read_text_file(live), "Churn$Payload.") > 0);
    std::filesystem::remove_all(dir);
}
