#include <catch2/catch.hpp>

#include <cstdint>
#include <vector>

#include "spare_buffers.hpp"

using sf::agent::fragment_buffer_bytes;
using sf::agent::kSpareFitScan;
using sf::agent::release_buffer_pages;
using sf::agent::take_spare;

namespace {

std::vector<uint8_t> buffer_of(size_t capacity) {
    std::vector<uint8_t> b;
    b.reserve(capacity);
    return b;
}

}  // namespace

TEST_CASE("a spare large enough for the sample is taken before a smaller one returned later") {
    std::vector<std::vector<uint8_t>> pool;
    pool.push_back(buffer_of(16384));
    pool.push_back(buffer_of(32768));
    const uint8_t* large = pool.back().data();
    pool.push_back(buffer_of(16384));
    pool.push_back(buffer_of(16384));

    std::vector<uint8_t> out;
    REQUIRE(take_spare(pool, 20000, out));
    CHECK(out.data() == large);   // the same allocation, not a copy
    CHECK(out.capacity() >= 32768);
    CHECK(pool.size() == 3);
    for (const auto& left : pool) CHECK(left.capacity() >= 16384);   // nothing lost on the way

    // A sample that any spare holds takes the last one, as before.
    const uint8_t* last = pool.back().data();
    REQUIRE(take_spare(pool, 4096, out));
    CHECK(out.data() == last);
    CHECK(pool.size() == 2);
}

TEST_CASE("without a spare that fits, the last one is taken; beyond the scan nothing is looked at") {
    std::vector<std::vector<uint8_t>> pool;
    pool.push_back(buffer_of(65536));   // fits, but lies before the scanned window
    for (size_t i = 0; i < kSpareFitScan; ++i) pool.push_back(buffer_of(16384));
    const uint8_t* last = pool.back().data();
    std::vector<uint8_t> out;
    REQUIRE(take_spare(pool, 40000, out));
    CHECK(out.data() == last);
    CHECK(out.capacity() < 40000);   // the taker grows it
    CHECK(pool.size() == kSpareFitScan);
    CHECK(pool.front().capacity() >= 65536);
}

TEST_CASE("an empty pool gives nothing and leaves the buffer alone") {
    std::vector<std::vector<uint8_t>> pool;
    std::vector<uint8_t> out{1, 2, 3};
    CHECK_FALSE(take_spare(pool, 1, out));
    CHECK(out.size() == 3);
}

TEST_CASE("a fragment's buffer: 4, 8 or 16 KB up to 16 KB, whole pages above") {
    CHECK(fragment_buffer_bytes(0) == 4096);
    CHECK(fragment_buffer_bytes(1) == 4096);
    CHECK(fragment_buffer_bytes(4096) == 4096);
    CHECK(fragment_buffer_bytes(4097) == 8192);
    CHECK(fragment_buffer_bytes(9000) == 16384);
    CHECK(fragment_buffer_bytes(16384) == 16384);
    CHECK(fragment_buffer_bytes(16385) == 20480);
    CHECK(fragment_buffer_bytes(65528) == 65536);
    for (size_t bytes = 0; bytes <= 70000; bytes += 97) CHECK(fragment_buffer_bytes(bytes) >= bytes);
}

TEST_CASE("a buffer's pages given back read as zeros, and the buffer stays usable until freed") {
    std::vector<uint8_t> buffer(64 * 1024, 0xab);
    release_buffer_pages(buffer);
    // Its whole pages are zero now, the bytes before the first page boundary untouched.
    const auto first_page = static_cast<size_t>((4096 - reinterpret_cast<uintptr_t>(buffer.data()) % 4096) % 4096);
    CHECK(buffer[first_page] == 0);
    CHECK(buffer[first_page + 40000] == 0);
    if (first_page > 0) CHECK(buffer[0] == 0xab);
    buffer[first_page + 5] = 7;
    CHECK(buffer[first_page + 5] == 7);
    std::vector<uint8_t> empty;
    release_buffer_pages(empty);   // nothing to give back
    CHECK(empty.empty());
}
