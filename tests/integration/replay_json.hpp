// What the accuracy tests read from `stackfrag replay --json` of a run's recording: the parsed
// object, and the figures each of them holds to a bound.
#pragma once

#include <catch2/catch.hpp>

#include <cstdint>
#include <nlohmann/json.hpp>
#include <regex>
#include <string>
#include <vector>

#include "agent_process.hpp"

namespace sf::test {

// `stackfrag replay --json RECORDING` (with `--collapsed COLLAPSED` when one is given), run with its
// output files in `dir`; fails the test when the replay fails.
inline nlohmann::json replay_json(const std::string& recording, const std::string& dir,
                                  const std::string& collapsed = "") {
    std::vector<std::string> args = {STACKFRAG_BINARY_DIR "/bin/stackfrag", "replay", "--json", recording};
    if (!collapsed.empty()) {
        args.push_back("--collapsed");
        args.push_back(collapsed);
    }
    const auto replay = run_process(args, {}, dir + "/replay", 300);
    INFO(replay.err);
    REQUIRE(replay.exit_code == 0);
    return nlohmann::json::parse(replay.out);
}

// Failed samples, every reason together.
inline uint64_t failed_samples(const nlohmann::json& replay) {
    uint64_t failed = 0;
    for (const auto& [reason, n] : replay["failed"].items()) failed += n.get<uint64_t>();
    return failed;
}

// Of the oracle pairs where both walks succeeded, the share that agree apart from the top bci.
inline double agreement_except_top_bci(const nlohmann::json& replay) {
    const double both_ok = replay["oracle_both_ok"].get<double>();
    return both_ok > 0 ? replay["oracle_identical_except_top_bci"].get<double>() / both_ok : 0.0;
}

// A validate run's replay holds to the accuracy bounds: more than `min_samples` samples, at most
// `max_failed` of them failed, more than `min_pairs` oracle pairs where both walks succeeded, and
// at least `min_agreement` of those equal apart from the top bci.
inline void check_accuracy(const nlohmann::json& replay, double min_samples, double max_failed, double min_pairs,
                           double min_agreement) {
    const double samples = replay["samples"].get<double>();
    REQUIRE(samples > min_samples);
    CHECK(static_cast<double>(failed_samples(replay)) / samples <= max_failed);
    REQUIRE(replay["oracle_both_ok"].get<double>() > min_pairs);
    CHECK(agreement_except_top_bci(replay) >= min_agreement);
}

// Live decoding gives the replay's profile: the agent's collapsed file `live` equals `replayed`
// (replay --collapsed of the same run's recording), unless the live queue dropped samples, which
// the agent's stop summary in `agent_log` says.
inline void check_live_matches_replay(const std::string& agent_log, const std::string& live, const std::string& replayed) {
    std::smatch m;
    if (std::regex_search(agent_log, m, std::regex("(\\d+) \\(live queue full\\)")) && m[1] == "0") {
        CHECK(read_text_file(live) == read_text_file(replayed));
    } else {
        WARN("the live queue dropped samples (or no stop summary); live and replay not compared");
    }
}

}  // namespace sf::test
