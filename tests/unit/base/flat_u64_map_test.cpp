#include <catch2/catch.hpp>

#include <cstdint>
#include <random>
#include <unordered_map>

#include "stackfrag/base/flat_u64_map.hpp"

using namespace sf;

TEST_CASE("FlatU64Map answers as a node-based map does, through growth and overwrites") {
    FlatU64Map<uint64_t> flat;
    std::unordered_map<uint64_t, uint64_t> reference;
    std::mt19937_64 random(7);
    for (int i = 0; i < 50'000; ++i) {
        // Addresses 8-aligned and clustered, as Method* and jmethodIDs are, plus a few wide ones.
        const uint64_t key = (i % 7 == 0) ? (random() | 1) : 0x7f0000000000ull + (random() % 20'000) * 8;
        if (i % 3 == 0) {
            flat[key] = static_cast<uint64_t>(i);
            reference[key] = static_cast<uint64_t>(i);
        } else {
            const auto [value, inserted] = flat.try_emplace(key, static_cast<uint64_t>(i));
            const auto [it, ref_inserted] = reference.try_emplace(key, static_cast<uint64_t>(i));
            REQUIRE(inserted == ref_inserted);
            REQUIRE(*value == it->second);
        }
    }
    REQUIRE(flat.size() == reference.size());
    for (const auto& [key, value] : reference) {
        const uint64_t* found = flat.find(key);
        REQUIRE(found != nullptr);
        CHECK(*found == value);
    }
    CHECK(flat.find(0x7f0000000000ull + 20'001 * 8) == nullptr);
    CHECK(flat.find(0) == nullptr);   // 0 marks a free slot: never a key
}

TEST_CASE("FlatU64Map's reserve keeps what it holds") {
    FlatU64Map<int> flat;
    for (uint64_t key = 8; key <= 800; key += 8) flat[key] = static_cast<int>(key);
    flat.reserve(100'000);
    CHECK(flat.size() == 100);
    for (uint64_t key = 8; key <= 800; key += 8) {
        REQUIRE(flat.find(key) != nullptr);
        CHECK(*flat.find(key) == static_cast<int>(key));
    }
}
