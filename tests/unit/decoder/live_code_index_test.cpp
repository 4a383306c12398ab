// The code map's bucket index of live code (live_code_index.hpp) must answer every pc as a search of
// the ranges themselves would, through loads address after address, unloads, reuse of freed ranges,
// growth below and above what it covers, and say it does not know once it is off.
#include <catch2/catch.hpp>

#include <map>
#include <random>

#include "live_code_index.hpp"

using sf::detail::LiveCodeIndex;

namespace {

struct Code {
    uint64_t begin, end;
};

// What the index must say: the range holding pc, by a search of the ranges.
const Code* expected_at(const std::map<uint64_t, Code*>& live, uint64_t pc) {
    auto it = live.upper_bound(pc);
    if (it == live.begin()) return nullptr;
    --it;
    return pc < it->second->end ? it->second : nullptr;
}

}  // namespace

TEST_CASE("the live code index answers every pc as a search of the ranges does") {
    constexpr uint64_t kBucket = uint64_t{1} << LiveCodeIndex<Code>::kBucketBits;
    std::mt19937_64 rng(GENERATE(1u, 2u, 3u));
    const bool reserved = GENERATE(false, true);
    const uint64_t base = 0x7f0000000000ull + (rng() % 64) * kBucket;
    const uint64_t span = 64 * kBucket;   // codes of 48 bytes to 40 KB over a megabyte
    LiveCodeIndex<Code> index;
    if (reserved) index.reserve(base, base + span / 2);
    std::map<uint64_t, Code*> live;
    std::vector<std::unique_ptr<Code>> owned;
    uint64_t next = base + span / 2;   // installs go up from the middle, others land anywhere

    for (int round = 0; round < 2000; ++round) {
        const uint64_t size = (rng() % 4 == 0) ? 48 + rng() % (40 * 1024) : 48 + rng() % 4096;
        uint64_t begin;
        if (rng() % 3 == 0) {
            begin = base - span / 4 + rng() % (span + span / 4);   // below the first load, and reuse
        } else {
            begin = next;
            next += size + rng() % 256;
        }
        begin &= ~uint64_t{31};
        const uint64_t end = begin + size;
        // A load replaces whatever it overlaps (freed before it was reused), as apply_load does.
        auto it = live.lower_bound(begin);
        if (it != live.begin() && std::prev(it)->second->end > begin) --it;
        while (it != live.end() && it->first < end) {
            index.erase(it->second->begin, it->second->end, it->second);
            it = live.erase(it);
        }
        owned.push_back(std::make_unique<Code>(Code{begin, end}));
        index.insert(begin, end, owned.back().get());
        live.emplace(begin, owned.back().get());
        if (rng() % 4 == 0 && !live.empty()) {   // an unload
            auto victim = live.begin();
            std::advance(victim, static_cast<long>(rng() % live.size()));
            index.erase(victim->second->begin, victim->second->end, victim->second);
            live.erase(victim);
        }
        if (round % 100 == 99) {
            REQUIRE_FALSE(index.off());
            for (int probe = 0; probe < 2000; ++probe) {
                const uint64_t pc = base - span / 2 + rng() % (2 * span + (next - base));
                const auto answer = index.find(pc);
                const Code* want = expected_at(live, pc);
                if (!answer.known) {
                    // Only outside everything the index covers, where nothing was ever loaded.
                    REQUIRE(want == nullptr);
                    continue;
                }
                REQUIRE(answer.value == want);
            }
            for (const auto& [begin_at, code] : live) {   // every range's first and last byte
                REQUIRE(index.find(begin_at).value == code);
                REQUIRE(index.find(code->end - 1).value == code);
            }
        }
    }
}

TEST_CASE("the live code index turns off past a gigabyte of address space and then never answers") {
    LiveCodeIndex<Code> index;
    Code low{0x7f0000000000ull, 0x7f0000001000ull}, far{0x7f0080000000ull, 0x7f0080000100ull};
    index.insert(low.begin, low.end, &low);
    REQUIRE(index.find(low.begin + 8).known);
    CHECK(index.find(low.begin + 8).value == &low);
    CHECK(index.find(low.end).value == nullptr);
    index.insert(far.begin, far.end, &far);   // 2 GB above: more buckets than it may have
    CHECK(index.off());
    CHECK_FALSE(index.find(low.begin + 8).known);
    CHECK_FALSE(index.find(far.begin).known);
    index.insert(low.begin, low.end, &low);   // stays off
    CHECK_FALSE(index.find(low.begin).known);
}
