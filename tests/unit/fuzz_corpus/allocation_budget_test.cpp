// A reader must not let a few damaged bytes decide how much it allocates (the corpus replay cannot
// see this: without the fuzzer's malloc limit an oversized allocation just succeeds). This binary
// replaces the global operator new to remember the largest single request made while reading.
#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <new>
#include <string>

#include <catch2/catch.hpp>

#include "stackfrag/events/recording.hpp"

namespace {

std::atomic<bool> tracking{false};
std::atomic<size_t> largest{0};

void* allocate(size_t size) {
    if (tracking.load(std::memory_order_relaxed)) {
        size_t seen = largest.load(std::memory_order_relaxed);
        while (size > seen && !largest.compare_exchange_weak(seen, size, std::memory_order_relaxed)) {}
    }
    if (void* p = std::malloc(size == 0 ? 1 : size)) return p;
    throw std::bad_alloc();
}

struct ReadOutcome {
    size_t events = 0;
    size_t largest_allocation = 0;
    std::string damage;
};

ReadOutcome read_tracked(const std::string& path) {
    ReadOutcome outcome;
    largest = 0;
    tracking = true;
    {
        auto opened = sf::RecordingReader::open(path);
        REQUIRE(opened);
        while ((*opened)->next()) ++outcome.events;
        if ((*opened)->damage()) outcome.damage = (*opened)->damage()->error.message;
    }
    tracking = false;
    outcome.largest_allocation = largest;
    return outcome;
}

const std::string kRegressions = std::string(STACKFRAG_SOURCE_DIR) + "/tests/data/fuzz/recording/";

}  // namespace

void* operator new(size_t size) { return allocate(size); }
void* operator new[](size_t size) { return allocate(size); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, size_t) noexcept { std::free(p); }
void operator delete[](void* p, size_t) noexcept { std::free(p); }
// The nothrow forms too: a sanitizer runtime provides its own, and memory from them must not reach
// the free() above (ASan reports that as alloc-dealloc-mismatch; Catch allocates with nothrow new).
void* operator new(size_t size, const std::nothrow_t&) noexcept {
    try {
        return allocate(size);
    } catch (const std::bad_alloc&) {
        return nullptr;
    }
}
void* operator new[](size_t size, const std::nothrow_t& tag) noexcept { return operator new(size, tag); }
void operator delete(void* p, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept { std::free(p); }

TEST_CASE("a chunk length beyond the end of a small file does not allocate that length", "[fuzz][recording]") {
    // 103 bytes whose one chunk claims a 64 MiB stored payload.
    const ReadOutcome read = read_tracked(kRegressions + "regress-payload-length-beyond-file.sfr");
    CHECK(read.events == 0);
    CHECK(read.damage.find("truncated") != std::string::npos);
    CHECK(read.largest_allocation <= (size_t{1} << 20) + 4096);
}

TEST_CASE("an event count of 5-byte unknown events does not reserve room for known ones", "[fuzz][recording]") {
    // A 300-byte zstd chunk of 8 MiB of zeros: 1.68 million empty frames of kind 0, all skipped.
    // The raw buffer needs its 8 MiB; the event vector once reserved 1.68 M x sizeof(Event) (335 MB;
    // 2.7 GB at the 64 MiB chunk bound) for events that were never there.
    const ReadOutcome read = read_tracked(kRegressions + "regress-event-count-reservation.sfr");
    CHECK(read.events == 0);
    CHECK(read.damage.empty());
    CHECK(read.largest_allocation <= (size_t{8} << 20) + 4096);
}
