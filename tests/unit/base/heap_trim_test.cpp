#include <catch2/catch.hpp>

#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#include "stackfrag/base/heap_trim.hpp"

using namespace sf;

TEST_CASE("resident_bytes: reads the process's resident memory, which grows as pages are touched") {
    const int64_t before = resident_bytes();
    REQUIRE(before > 0);
    std::vector<char> block(64u << 20);
    std::memset(block.data(), 1, block.size());
    CHECK(resident_bytes() >= before + (48 << 20));
}

// The shape the agent's live queue leaves after a start's backlog drained: a thread allocated
// fragment buffers of a few KB with small objects between them, freed them all but a few of the small
// ones (held spares), and the freed runs lie inside its arena, below memory still in use, where
// free() gives nothing back.
TEST_CASE("trim_free_heap: the pages of freed buffers inside an arena go back to the kernel") {
    constexpr size_t kBuffers = 16384;   // 64 MB of 4 KB buffers
    std::vector<void*> kept;
    std::thread allocator([&] {
        std::vector<void*> buffers, small;
        buffers.reserve(kBuffers);
        small.reserve(kBuffers);
        for (size_t i = 0; i < kBuffers; ++i) {
            buffers.push_back(std::malloc(4096));
            std::memset(buffers.back(), 1, 4096);
            small.push_back(std::malloc(96));
        }
        for (size_t i = 0; i < kBuffers; ++i) {
            std::free(buffers[i]);
            if (i % 256 == 255) kept.push_back(small[i]);   // every MB something stays in use
            else std::free(small[i]);
        }
    });
    allocator.join();
    const HeapTrim t = trim_free_heap();
    REQUIRE(t.resident_before > 0);
    REQUIRE(t.resident_after > 0);
    // Nearly all 64 MB: each freed run but its ends' partial pages.
    CHECK(t.given_back() >= (48u << 20));
    for (void* p : kept) std::free(p);
}
