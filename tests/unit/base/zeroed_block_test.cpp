#include <catch2/catch.hpp>

#include <cstdint>

#include "stackfrag/base/zeroed_block.hpp"

#include <fstream>
#include <string>

#include "stackfrag/base/huge_page_allocator.hpp"

#include "minor_faults.hpp"

using namespace sf;

using sf::test::minor_faults;

TEST_CASE("ZeroedBlock's pages start zero and unprepared, and prepare() marks only the pages asked for") {
    for (const size_t bytes : {size_t{1000}, size_t{20'000}, size_t{1 << 20}, size_t{5 << 20}}) {   // calloc'd, mmap'd, on huge pages
        ZeroedBlock block(bytes);
        REQUIRE(block.size() == bytes);
        for (size_t offset = 0; offset < bytes; offset += ZeroedBlock::kPageBytes) CHECK_FALSE(block.prepared(offset));
        const size_t middle = bytes / 2;
        block.prepare(middle);
        CHECK(block.prepared(middle));
        CHECK(block.prepared(middle / ZeroedBlock::kPageBytes * ZeroedBlock::kPageBytes));
        const bool same_page = (bytes - 1) / ZeroedBlock::kPageBytes == middle / ZeroedBlock::kPageBytes;
        CHECK(block.prepared(bytes - 1) == same_page);
        // A range across a page boundary prepares both pages.
        if (bytes > 2 * ZeroedBlock::kPageBytes) {
            block.prepare(ZeroedBlock::kPageBytes - 4, 8);
            CHECK(block.prepared(0));
            CHECK(block.prepared(ZeroedBlock::kPageBytes));
        }
        const auto* data = static_cast<const unsigned char*>(block.data());
        for (size_t offset = 0; offset < bytes; offset += ZeroedBlock::kPageBytes) {
            if (block.prepared(offset)) CHECK(data[offset] == 0);
        }
    }
}

TEST_CASE("ZeroedBlock: a prepared page costs one fault however it is then used") {
    constexpr size_t kPages = 256;
    ZeroedBlock block(kPages * ZeroedBlock::kPageBytes);
    auto* data = static_cast<volatile uint64_t*>(block.data());
    const long before = minor_faults();
    uint64_t sum = 0;
    for (size_t page = 0; page < kPages; ++page) {
        const size_t offset = page * ZeroedBlock::kPageBytes;
        block.prepare(offset);
        sum += data[offset / 8];   // a read first, as a hash probe does
        data[offset / 8] = page;
    }
    // Read before any write, each page would fault twice: once onto the zero page, once to copy it.
    CHECK(minor_faults() - before < static_cast<long>(kPages + kPages / 4));
    CHECK(sum == 0);
    for (size_t page = 0; page < kPages; ++page) CHECK(data[page * ZeroedBlock::kPageBytes / 8] == page);
}

TEST_CASE("ZeroedBlock moves its pages and their marks") {
    ZeroedBlock block(1 << 20);
    block.prepare(8192);
    static_cast<unsigned char*>(block.data())[8192] = 7;
    ZeroedBlock moved(std::move(block));
    CHECK(moved.prepared(8192));
    CHECK_FALSE(moved.prepared(0));
    CHECK(static_cast<unsigned char*>(moved.data())[8192] == 7);
    ZeroedBlock assigned(100);
    assigned = std::move(moved);
    CHECK(assigned.size() == size_t{1} << 20);
    CHECK(assigned.prepared(8192));
}

TEST_CASE("ZeroedBlock: a block of 2 MB or more is advised for huge pages, a smaller one is not") {
    std::ifstream in("/sys/kernel/mm/transparent_hugepage/enabled");
    std::string modes;
    std::getline(in, modes);
    ZeroedBlock small(1 << 20), large(5 << 20);
    small.prepare(0);
    large.prepare(0);
    CHECK_FALSE(huge_pages::advised(small.data()));
    if (modes.find("[never]") == std::string::npos && !modes.empty()) CHECK(huge_pages::advised(large.data()));
    // One fault brings in the whole first huge page: preparing its other small pages costs none.
    const long before = minor_faults();
    for (size_t offset = ZeroedBlock::kPageBytes; offset < huge_pages::kBytes; offset += ZeroedBlock::kPageBytes) {
        large.prepare(offset);
    }
    if (modes.find("[never]") == std::string::npos && !modes.empty()) CHECK(minor_faults() - before < 64);
}
