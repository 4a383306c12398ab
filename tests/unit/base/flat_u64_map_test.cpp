#include <catch2/catch.hpp>

#include <cstdint>
#include <random>
#include <unordered_map>
#include <vector>

#include "stackfrag/base/flat_u64_map.hpp"

#include "minor_faults.hpp"

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

using sf::test::minor_faults;

TEST_CASE("FlatU64Map reserved for many entries touches only the pages its entries use") {
    const long before = minor_faults();
    FlatU64Map<uint64_t> flat;
    flat.reserve(1 << 20);   // 2 M slots of 16 bytes: 32 MB, 8,192 pages if written
    for (uint64_t key = 1; key <= 64; ++key) flat[key * 4096] = key;
    const long faults = minor_faults() - before;
    CHECK(faults < 200);
    for (uint64_t key = 1; key <= 64; ++key) {
        REQUIRE(flat.find(key * 4096) != nullptr);
        CHECK(*flat.find(key * 4096) == key);
    }
}

TEST_CASE("FlatU64Map copies and moves keep every entry") {
    FlatU64Map<uint64_t> flat;
    for (uint64_t key = 8; key <= 8000; key += 8) flat[key] = key * 3;
    FlatU64Map<uint64_t> copy = flat;
    flat[8] = 1;   // the copy is its own
    FlatU64Map<uint64_t> moved = std::move(copy);
    FlatU64Map<uint64_t> assigned;
    assigned[16] = 0;
    assigned = moved;
    for (const FlatU64Map<uint64_t>* map : {&moved, &assigned}) {
        CHECK(map->size() == 1000);
        for (uint64_t key = 8; key <= 8000; key += 8) {
            REQUIRE(map->find(key) != nullptr);
            CHECK(*map->find(key) == key * 3);
        }
    }
    CHECK(*flat.find(8) == 1);
}

TEST_CASE("FlatU64Map lookups that miss read no page an entry was never written to") {
    FlatU64Map<uint64_t> flat;
    flat.reserve(1 << 20);   // 8,192 pages
    flat[4096] = 1;
    const long before = minor_faults();
    std::mt19937_64 random(11);
    int found = 0;
    for (int i = 0; i < 20'000; ++i) found += flat.find((random() | 1) << 3) != nullptr;
    // Read, each page would be mapped to the kernel's zero page: a fault per page, and a second
    // one, with a TLB shootdown, when an entry is later written there.
    CHECK(minor_faults() - before < 50);
    CHECK(found == 0);
    REQUIRE(flat.find(4096) != nullptr);
    CHECK(*flat.find(4096) == 1);
}

TEST_CASE("FlatU64Map fills to 3/4 before it grows: a reserved map's pages are its entries' 4/3") {
    FlatU64Map<uint64_t> flat;
    flat.reserve(24'576);   // 32 k slots of 16 bytes: 128 pages
    std::mt19937_64 random(5);
    std::vector<uint64_t> keys(24'576);
    for (uint64_t& key : keys) key = (random() | 1) << 3;
    const long before = minor_faults();
    for (size_t i = 0; i < keys.size(); ++i) flat[keys[i]] = i;
    // Hashed keys land on every page; half full, the same entries took 256 pages.
    CHECK(minor_faults() - before < 128 + 40);
    CHECK(flat.size() == keys.size());
    for (size_t i = 0; i < keys.size(); ++i) {
        REQUIRE(flat.find(keys[i]) != nullptr);
        CHECK(*flat.find(keys[i]) == i);
    }
}
