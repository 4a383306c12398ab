// radix_sort_by_key must give what std::stable_sort gives: symbol tables have aliases (equal
// addresses) whose order decides which name a lookup returns.
#include <algorithm>
#include <cstdint>
#include <random>
#include <vector>

#include <catch2/catch.hpp>

#include "stackfrag/base/radix_sort.hpp"

namespace {

struct Entry {
    uint64_t address;
    uint32_t original_index;
};

std::vector<Entry> random_entries(size_t n, uint64_t base, uint64_t span, uint32_t seed) {
    std::mt19937_64 random(seed);
    std::vector<Entry> entries(n);
    for (size_t i = 0; i < n; ++i) {
        // Every eighth entry repeats an earlier address: aliases.
        const uint64_t address = (i % 8 == 7) ? entries[random() % i].address : base + random() % span;
        entries[i] = Entry{address, static_cast<uint32_t>(i)};
    }
    return entries;
}

void check_like_stable_sort(std::vector<Entry> entries) {
    std::vector<Entry> expected = entries;
    std::stable_sort(expected.begin(), expected.end(),
                     [](const Entry& a, const Entry& b) { return a.address < b.address; });
    sf::radix_sort_by_key(entries, [](const Entry& e) { return e.address; });
    REQUIRE(entries.size() == expected.size());
    for (size_t i = 0; i < entries.size(); ++i) {
        INFO("position " << i);
        REQUIRE(entries[i].address == expected[i].address);
        REQUIRE(entries[i].original_index == expected[i].original_index);
    }
}

}  // namespace

TEST_CASE("radix_sort_by_key orders like std::stable_sort, aliases in their original order") {
    SECTION("a library's span (25 bits, three passes)") { check_like_stable_sort(random_entries(60000, 0x400000, 1u << 25, 1)); }
    SECTION("an odd number of passes leaves the result in place") {
        check_like_stable_sort(random_entries(5000, 0, 1u << 11, 2));
        check_like_stable_sort(random_entries(5000, 0, 1u << 22, 3));
    }
    SECTION("the whole 64-bit range") { check_like_stable_sort(random_entries(20000, 0, UINT64_MAX, 4)); }
    SECTION("already sorted, reversed, all equal, tiny") {
        std::vector<Entry> sorted;
        for (uint32_t i = 0; i < 1000; ++i) sorted.push_back({uint64_t{i} * 16, i});
        check_like_stable_sort(sorted);
        std::vector<Entry> reversed(sorted.rbegin(), sorted.rend());
        check_like_stable_sort(reversed);
        std::vector<Entry> equal;
        for (uint32_t i = 0; i < 100; ++i) equal.push_back({42, i});
        check_like_stable_sort(equal);
        check_like_stable_sort({});
        check_like_stable_sort({{7, 0}});
        check_like_stable_sort({{9, 0}, {3, 1}});
    }
}
