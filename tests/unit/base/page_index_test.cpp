// PageIndex (base/page_index.hpp) must give the answer a binary search of the whole table gives,
// whatever the table: dense or sparse, with runs of equal addresses, outliers far away, one entry.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <random>
#include <vector>

#include "stackfrag/base/page_index.hpp"

using namespace sf;

namespace {

// Every entry, both its neighbours and random addresses between, before and beyond the table.
void require_same_answers(const std::vector<uint64_t>& table, std::mt19937_64& rng) {
    PageIndex index;
    index.build(table.size(), [&](size_t i) { return table[i]; });
    REQUIRE(index.usable() == !table.empty());
    std::vector<uint64_t> probes = {0, UINT64_MAX, UINT64_MAX - 1};
    for (uint64_t a : table) {
        probes.push_back(a);
        probes.push_back(a - 1);
        probes.push_back(a + 1);
    }
    if (!table.empty()) {
        std::uniform_int_distribution<uint64_t> near(table.front() - std::min<uint64_t>(table.front(), 1 << 16),
                                                     table.back() + (1 << 16));
        for (int i = 0; i < 2000; ++i) probes.push_back(near(rng));
    }
    for (uint64_t a : probes) {
        const size_t want = static_cast<size_t>(std::upper_bound(table.begin(), table.end(), a) - table.begin());
        INFO("address 0x" << std::hex << a);
        REQUIRE(index.upper_bound(a, [&](size_t i) { return table[i]; }) == want);
    }
}

}  // namespace

TEST_CASE("a page index finds the upper bound a search of the whole table finds", "[base]") {
    std::mt19937_64 rng(7);
    for (int round = 0; round < 40; ++round) {
        std::vector<uint64_t> table;
        const uint64_t base = rng() >> (round % 3 == 0 ? 1 : 20);
        const size_t n = 1 + rng() % 3000;
        uint64_t a = base;
        for (size_t i = 0; i < n; ++i) {
            // Mostly small steps (functions in a library), some equal, a few far jumps.
            const uint64_t r = rng() % 100;
            a += r < 10 ? 0 : r < 97 ? rng() % 512 : rng() % (uint64_t{1} << 30);
            table.push_back(a);
        }
        if (round % 5 == 0) table.push_back(table.back() + (uint64_t{1} << 44));   // an outlier far above
        require_same_answers(table, rng);
    }
    std::vector<uint64_t> one = {0x400000};
    require_same_answers(one, rng);
    std::vector<uint64_t> at_zero = {0, 0, 16, 4096, 4096, 8192};
    require_same_answers(at_zero, rng);
    std::vector<uint64_t> none;
    require_same_answers(none, rng);
}

TEST_CASE("a page index over an unsorted table is not used", "[base]") {
    const std::vector<uint64_t> table = {0x1000, 0x3000, 0x2000};
    PageIndex index;
    index.build(table.size(), [&](size_t i) { return table[i]; });
    CHECK_FALSE(index.usable());
    // Without an index the search covers the whole table.
    size_t lo = 1, hi = 0;
    index.slice(0x2800, lo, hi);
    CHECK(lo == 0);
    CHECK(hi == table.size());
}
