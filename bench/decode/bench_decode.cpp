// bench_decode REC [ROUNDS]: decode every sample of a recording ROUNDS times against the CodeMap as
// it stood when the sample was read, and print ns per decode (median, p90, p99) by top-frame kind.
// Separates the decoder's own cost from reading and decompressing the recording.
#include <fmt/core.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <string>
#include <vector>

#include "stackfrag/decoder/code_map.hpp"
#include "stackfrag/decoder/decoder.hpp"
#include "stackfrag/events/recording.hpp"

int main(int argc, char** argv) {
    if (argc < 2) {
        fmt::print(stderr, "usage: bench_decode REC [ROUNDS]\n");
        return 2;
    }
    const int rounds = argc > 2 ? std::max(1, std::atoi(argv[2])) : 20;
    auto reader = sf::RecordingReader::open(argv[1]);
    if (!reader) {
        fmt::print(stderr, "{}\n", reader.error().describe());
        return 2;
    }
    // Samples are decoded after all events are applied: the CodeMap's time rules give each sample
    // the code valid at its time, as in a live decode.
    sf::CodeMap map;
    std::vector<sf::Sample> samples;
    while (auto e = (*reader)->next()) {
        if (auto* s = std::get_if<sf::Sample>(&*e)) samples.push_back(std::move(*s));
        else if (auto* o = std::get_if<sf::Oracle>(&*e)) samples.push_back(std::move(o->sample));
        else map.apply(*e);
    }
    sf::Decoder decoder(map);
    sf::CallTrace trace;
    std::map<std::string, std::vector<uint64_t>> by_kind;
    std::vector<uint64_t> all;
    using Clock = std::chrono::steady_clock;
    for (int r = 0; r < rounds; ++r) {
        for (const auto& s : samples) {
            const auto t0 = Clock::now();
            decoder.decode(s, trace);
            const auto t1 = Clock::now();
            const uint64_t ns = uint64_t(std::chrono::duration_cast<std::chrono::nanoseconds>(t1 - t0).count());
            all.push_back(ns);
            std::string kind = trace.status == sf::TraceStatus::kFailed ? "failed"
                               : trace.frames.empty()                    ? "empty"
                                                                         : sf::frame_kind_name(trace.frames[0].kind);
            by_kind[kind].push_back(ns);
        }
    }
    auto report = [](const std::string& name, std::vector<uint64_t> v) {
        std::sort(v.begin(), v.end());
        auto pct = [&](double p) { return v[std::min(v.size() - 1, size_t(p * double(v.size())))]; };
        fmt::print("{:<16} n={:<8} median {:>7} ns  p90 {:>7} ns  p99 {:>8} ns\n", name, v.size(), pct(0.5), pct(0.9),
                   pct(0.99));
    };
    fmt::print("{} samples x {} rounds\n", samples.size(), rounds);
    report("all", all);
    for (auto& [k, v] : by_kind) report("top " + k, v);
    return 0;
}
