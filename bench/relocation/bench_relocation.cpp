// bench_relocation REC [ROUNDS]: the two ways of relocating a stack fragment, measured on the real
// samples of a recording. Translation view (what the decoder does): every stack read maps its
// address into the copy and bounds-checks it. Eager rewrite: one pass over the fragment turns
// every word that points into [sp, sp + size) into a pointer into the copy, after which reads
// are plain loads — but still bounds-checked, since a rewritten fragment stays hostile input.
// Prints, per sample, the rewrite pass, a whole decode through the view, and the cost of one
// translated read vs one direct read, so the choice in docs/decoding.md can be checked.
#include <fmt/core.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "stack_view.hpp"
#include "stackfrag/decoder/code_map.hpp"
#include "stackfrag/decoder/decoder.hpp"
#include "stackfrag/events/recording.hpp"
#include "../common/recording_samples.hpp"

namespace {

using Clock = std::chrono::steady_clock;

uint64_t ns_between(Clock::time_point a, Clock::time_point b) {
    return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(b - a).count());
}

// The eager rewrite: returns how many words pointed into the fragment (and were rewritten).
size_t rewrite_in_place(uint64_t sp, std::vector<uint8_t>& copy) {
    const uint64_t size = copy.size();
    const uint64_t delta = reinterpret_cast<uint64_t>(copy.data()) - sp;
    size_t rewritten = 0;
    for (size_t off = 0; off + 8 <= size; off += 8) {
        uint64_t word;
        std::memcpy(&word, copy.data() + off, 8);
        if (word - sp < size) {   // unsigned: also false below sp
            word += delta;
            std::memcpy(copy.data() + off, &word, 8);
            ++rewritten;
        }
    }
    return rewritten;
}

uint64_t percentile(std::vector<uint64_t> v, double p) {
    if (v.empty()) return 0;
    std::sort(v.begin(), v.end());
    return v[std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size())))];
}

}  // namespace

int main(int argc, char** argv) {
    if (argc < 2) {
        fmt::print(stderr, "usage: bench_relocation REC [ROUNDS]\n");
        return 2;
    }
    const int rounds = argc > 2 ? std::max(1, std::atoi(argv[2])) : 10;
    sf::CodeMap map;
    std::vector<sf::Sample> samples;
    if (!sf::bench::load_recording_samples(argv[1], map, samples)) return 2;
    if (samples.empty()) {
        fmt::print(stderr, "no samples in {}\n", argv[1]);
        return 2;
    }

    sf::Decoder decoder(map);
    sf::CallTrace trace;
    std::vector<uint64_t> decode_ns, rewrite_ns, pointer_words;
    std::vector<uint8_t> scratch;
    for (int r = 0; r < rounds; ++r) {
        for (const sf::Sample& s : samples) {
            auto t0 = Clock::now();
            decoder.decode(s, trace);
            auto t1 = Clock::now();
            decode_ns.push_back(ns_between(t0, t1));

            scratch.assign(s.stack.begin(), s.stack.end());   // the copy perf already gave us
            t0 = Clock::now();
            const size_t rewritten = rewrite_in_place(s.stack_sp, scratch);
            t1 = Clock::now();
            rewrite_ns.push_back(ns_between(t0, t1));
            if (r == 0) pointer_words.push_back(rewritten);
        }
    }

    // One read either way, over random in-fragment addresses of the largest sample: through the
    // view (translate + check) or through a rewritten pointer (check against the copy + load).
    const sf::Sample& big = *std::max_element(samples.begin(), samples.end(), [](const auto& a, const auto& b) {
        return a.stack.size() < b.stack.size();
    });
    const sf::detail::StackView view(big.stack_sp, big.stack.data(), big.stack.size());
    std::mt19937_64 random(42);
    constexpr size_t kReads = 1 << 22;
    std::vector<uint64_t> addresses(4096);
    for (uint64_t& a : addresses) a = big.stack_sp + (random() % (big.stack.size() / 8)) * 8;
    uint64_t sum = 0, value = 0;
    auto t0 = Clock::now();
    for (size_t i = 0; i < kReads; ++i) {
        if (view.read(addresses[i & 4095], value)) sum += value;
    }
    auto t1 = Clock::now();
    const uint8_t* const lo = big.stack.data();
    const uint8_t* const hi = lo + big.stack.size();
    std::vector<const uint8_t*> pointers(addresses.size());
    for (size_t i = 0; i < addresses.size(); ++i) pointers[i] = lo + (addresses[i] - big.stack_sp);
    auto t2 = Clock::now();
    for (size_t i = 0; i < kReads; ++i) {
        const uint8_t* p = pointers[i & 4095];
        if (p >= lo && hi - p >= 8) {
            std::memcpy(&value, p, 8);
            sum += value;
        }
    }
    auto t3 = Clock::now();

    fmt::print("{} samples x {} rounds (checksum {})\n", samples.size(), rounds, sum & 1);
    fmt::print("decode through the view   median {:>6} ns  p99 {:>7} ns\n", percentile(decode_ns, 0.5),
               percentile(decode_ns, 0.99));
    fmt::print("eager rewrite pass alone  median {:>6} ns  p99 {:>7} ns  ({} words rewritten per sample, median)\n",
               percentile(rewrite_ns, 0.5), percentile(rewrite_ns, 0.99), percentile(pointer_words, 0.5));
    fmt::print("one read: view {:.2f} ns, rewritten pointer {:.2f} ns\n",
               static_cast<double>(ns_between(t0, t1)) / kReads, static_cast<double>(ns_between(t2, t3)) / kReads);
    return 0;
}
