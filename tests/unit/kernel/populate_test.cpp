// populate_for_write maps a fresh buffer's pages before the reader's copy: every page under the
// range (the partial ones at both ends too) is resident afterwards, nothing beyond it, and the
// bytes already there stay as they were.
#include <catch2/catch.hpp>

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "stackfrag/kernel/perf_events.hpp"

namespace {

std::vector<bool> resident(const char* base, size_t pages, size_t page) {
    std::vector<unsigned char> vec(pages);
    REQUIRE(mincore(const_cast<char*>(base), pages * page, vec.data()) == 0);
    std::vector<bool> out(pages);
    for (size_t i = 0; i < pages; ++i) out[i] = (vec[i] & 1) != 0;
    return out;
}

}  // namespace

TEST_CASE("populate_for_write makes the pages under a range resident and changes no byte") {
    const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    constexpr size_t kPages = 8;
    auto* base = static_cast<char*>(mmap(nullptr, kPages * page, PROT_READ | PROT_WRITE,
                                         MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
    REQUIRE(base != MAP_FAILED);
    base[5 * page + 7] = 42;   // page 5 is there already, with a byte that must stay

    // From the middle of page 1 to the middle of page 4: pages 1-4, not 0, 6 or 7.
    const bool done = sf::kernel::populate_for_write(base + page + page / 2, 3 * page);
    if (!done) {
        // Kernels before 5.14 do not know MADV_POPULATE_WRITE: then the copy faults the pages in.
        CHECK(errno == EINVAL);
        WARN("MADV_POPULATE_WRITE unsupported by this kernel");
    } else {
        const std::vector<bool> r = resident(base, kPages, page);
        CHECK_FALSE(r[0]);
        CHECK(r[1]);
        CHECK(r[2]);
        CHECK(r[3]);
        CHECK(r[4]);
        CHECK(r[5]);
        CHECK_FALSE(r[6]);
        CHECK_FALSE(r[7]);
    }
    CHECK(base[5 * page + 7] == 42);
    for (size_t i = page; i < 5 * page; ++i) REQUIRE(base[i] == 0);
    CHECK_FALSE(sf::kernel::populate_for_write(nullptr, page));
    // An empty fragment (a sample whose stack the kernel could not copy) is no refusal: the reader
    // goes on populating the buffers after it.
    CHECK(sf::kernel::populate_for_write(base, 0));
    munmap(base, kPages * page);
}
