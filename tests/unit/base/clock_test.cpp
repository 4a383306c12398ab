#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <thread>

#include <catch2/catch.hpp>

#include "stackfrag/base/clock.hpp"

using namespace sf;

TEST_CASE("thread_page_faults counts the calling thread's first touches of fresh pages", "[base][clock]") {
    constexpr size_t kPages = 64;
    constexpr size_t kPage = 4096;
    void* memory = mmap(nullptr, kPages * kPage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    REQUIRE(memory != MAP_FAILED);
    const uint64_t before = thread_page_faults();
    auto* bytes = static_cast<volatile unsigned char*>(memory);
    for (size_t page = 0; page < kPages; ++page) bytes[page * kPage] = 1;
    const uint64_t after_first = thread_page_faults();
    // Touching them again faults no more (the count may still grow by a stray fault elsewhere).
    for (size_t page = 0; page < kPages; ++page) bytes[page * kPage] = 2;
    const uint64_t after_second = thread_page_faults();
    munmap(memory, kPages * kPage);
    CHECK(after_first - before >= kPages);
    CHECK(after_second - after_first < kPages / 4);
}

TEST_CASE("thread_cpu_ns_if_alive tells a thread that ended from one that is alive", "[base][clock]") {
    const auto own = thread_cpu_ns_if_alive(static_cast<pid_t>(gettid()));
    REQUIRE(own.has_value());
    CHECK(*own > 0);
    std::atomic<pid_t> tid{0};
    std::thread ended([&] { tid = static_cast<pid_t>(gettid()); });
    ended.join();
    REQUIRE(tid.load() != 0);
    // The thread is gone: no reading, where thread_cpu_ns_of says 0 as for a thread not run yet.
    CHECK_FALSE(thread_cpu_ns_if_alive(tid.load()).has_value());
    CHECK(thread_cpu_ns_of(tid.load()) == 0);
}
