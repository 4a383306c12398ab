#include <catch2/catch.hpp>

#include <sys/mman.h>

#include <cerrno>
#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

#include "stackfrag/base/huge_page_allocator.hpp"

#include "minor_faults.hpp"

using namespace sf;
using sf::test::minor_faults;

namespace {
// Whether the kernel backs madvised ranges with huge pages ("always" or "madvise", not "never").
bool huge_pages_enabled() {
    std::ifstream in("/sys/kernel/mm/transparent_hugepage/enabled");
    std::string modes;
    std::getline(in, modes);
    return modes.find("[always]") != std::string::npos || modes.find("[madvise]") != std::string::npos;
}

bool mapped(const void* p) {
    unsigned char v = 0;
    return mincore(const_cast<void*>(p), 4096, &v) == 0 || errno != ENOMEM;
}
}  // namespace

TEST_CASE("HugePageAllocator: a large array is its own aligned mapping, advised for huge pages, zeroed, unmapped when freed") {
    const void* data = nullptr;
    {
        std::vector<uint64_t, HugePageAllocator<uint64_t>> big(3 << 18);   // 6 MB
        data = big.data();
        CHECK(reinterpret_cast<uintptr_t>(data) % huge_pages::kBytes == 0);
        if (huge_pages_enabled()) CHECK(huge_pages::advised(data));
        bool zero = true;
        for (size_t i = 0; i < big.size(); i += 512) zero = zero && big[i] == 0;
        CHECK(zero);
        big[12345] = 7;
        big.resize(big.size() * 2);   // a new mapping; the contents move along
        CHECK(big[12345] == 7);
        CHECK_FALSE(mapped(data));
        data = big.data();
        CHECK(mapped(data));
    }
    CHECK_FALSE(mapped(data));
}

TEST_CASE("HugePageAllocator: a small array comes from operator new, not a mapping of its own") {
    std::vector<uint64_t, HugePageAllocator<uint64_t>> small(1000, 1);
    CHECK_FALSE(huge_pages::advised(small.data()));
    small.push_back(2);
    CHECK(small.back() == 2);
    CHECK(small.front() == 1);
}

TEST_CASE("HugePageAllocator: filling a large array costs a fault a huge page, not one a 4 KB page") {
    if (!huge_pages_enabled()) {
        WARN("transparent huge pages are off on this kernel: nothing to check");
        return;
    }
    constexpr size_t kBytes = 16 << 20;
    std::vector<uint8_t, HugePageAllocator<uint8_t>> filled;
    filled.reserve(kBytes);   // no pages touched yet: a reserve writes nothing
    const long before = minor_faults();
    filled.resize(kBytes, 1);
    const long faults = minor_faults() - before;
    // 4,096 with 4 KB pages; 8 with huge pages, a few more where the kernel had no free one at hand.
    CHECK(faults < static_cast<long>(kBytes / 4096 / 4));
}
