// /proc/PID/maps parsing: executable mappings only, paths with spaces kept, anonymous and special
// mappings recognised as not being files.
#include <catch2/catch.hpp>

#include <dlfcn.h>
#include <pthread.h>
#include <sys/mman.h>
#include <unistd.h>

#include "stackfrag/kernel/proc_maps.hpp"

using sf::kernel::ExecutableMapping;
using sf::kernel::parse_executable_maps;
using sf::kernel::read_executable_maps;

TEST_CASE("only executable mappings are kept, sorted by address") {
    const std::string text =
        "7f0000002000-7f0000003000 r-xp 00002000 08:01 42 /usr/lib/libz.so.1\n"
        "55d000000000-55d000001000 r--p 00000000 08:01 7 /usr/bin/java\n"
        "7f0000000000-7f0000001000 r-xp 00001000 08:01 43   /opt/my libs/libjni.so\n"
        "7e0000000000-7e0000100000 rwxp 00000000 00:00 0 \n"
        "7ffc00000000-7ffc00002000 r-xp 00000000 00:00 0                          [vdso]\n"
        "garbage line\n"
        "7f0000004000-7f0000005000 r-xp 00000000 08:01 44 /tmp/libgone.so (deleted)";
    const std::vector<ExecutableMapping> maps = parse_executable_maps(text);
    REQUIRE(maps.size() == 5);
    CHECK(maps[0] == ExecutableMapping{0x7e0000000000, 0x7e0000100000, 0, ""});
    CHECK(maps[1] == ExecutableMapping{0x7f0000000000, 0x7f0000001000, 0x1000, "/opt/my libs/libjni.so"});
    CHECK(maps[2].path == "/usr/lib/libz.so.1");
    CHECK(maps[2].offset == 0x2000);
    CHECK(maps[3].path == "/tmp/libgone.so (deleted)");
    CHECK(maps[4].path == "[vdso]");
    CHECK_FALSE(maps[0].is_file());
    CHECK(maps[1].is_file());
    CHECK(maps[2].is_file());
    CHECK_FALSE(maps[3].is_file());
    CHECK_FALSE(maps[4].is_file());
}

TEST_CASE("this process's maps contain the code of this test") {
    Dl_info info{};
    REQUIRE(dladdr(reinterpret_cast<void*>(&parse_executable_maps), &info) != 0);
    const auto here = reinterpret_cast<uint64_t>(&parse_executable_maps);
    bool found = false;
    for (const ExecutableMapping& m : read_executable_maps()) {
        if (m.begin <= here && here < m.end) found = m.is_file();
    }
    CHECK(found);
    CHECK(read_executable_maps(-1).empty());   // no such process: empty, no error thrown
}

TEST_CASE("the mapping holding an address bounds a thread's stack") {
    const std::string text =
        "7f0000000000-7f0000001000 ---p 00000000 00:00 0 \n"
        "7f0000001000-7f0000081000 rw-p 00000000 00:00 0 \n"
        "garbage line\n"
        "7ffc00000000-7ffc00021000 rw-p 00000000 00:00 0                          [stack]";
    CHECK(sf::kernel::mapping_end_at(text, 0x7f0000050000) == 0x7f0000081000);
    CHECK(sf::kernel::mapping_end_at(text, 0x7f0000001000) == 0x7f0000081000);
    CHECK(sf::kernel::mapping_end_at(text, 0x7f0000081000) == 0);   // the end is exclusive
    CHECK(sf::kernel::mapping_end_at(text, 0x7ffc00020ff8) == 0x7ffc00021000);
    CHECK(sf::kernel::mapping_end_at(text, 0x1000) == 0);
    // This thread's own stack: the mapping holding a local ends at or above the top glibc reports.
    int local = 0;
    pthread_attr_t attr;
    REQUIRE(pthread_getattr_np(pthread_self(), &attr) == 0);
    void* low = nullptr;
    size_t size = 0;
    REQUIRE(pthread_attr_getstack(&attr, &low, &size) == 0);
    pthread_attr_destroy(&attr);
    const uint64_t top = reinterpret_cast<uint64_t>(low) + size;
    const uint64_t end = sf::kernel::read_mapping_end_at(reinterpret_cast<uint64_t>(&local));
    CHECK(end >= top);
    CHECK(sf::kernel::read_mapping_end_at(reinterpret_cast<uint64_t>(&local), -1) == 0);
}

TEST_CASE("a page of a mapping no one touched gets a page-table entry when read through the kernel, an unmapped one is refused") {
    // A perf sample's copy of a thread's stack cannot fault: it stops at such a page, even inside
    // a live stack (a large local never written). Reading it through the kernel maps it.
    const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    void* region = mmap(nullptr, 3 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    REQUIRE(region != MAP_FAILED);
    auto* base = static_cast<uint8_t*>(region);
    REQUIRE(munmap(base + 2 * page, page) == 0);   // the third page: no mapping at all
    unsigned char resident[2] = {1, 1};
    REQUIRE(mincore(base, 2 * page, resident) == 0);
    CHECK((resident[0] & 1) == 0);
    CHECK((resident[1] & 1) == 0);
    CHECK(sf::kernel::fault_in_readable(reinterpret_cast<uint64_t>(base + page + 100)));
    REQUIRE(mincore(base, 2 * page, resident) == 0);
    CHECK((resident[0] & 1) == 0);   // only the page read
    CHECK((resident[1] & 1) == 1);
    CHECK(base[page + 100] == 0);    // still the zero-filled page it was
    CHECK_FALSE(sf::kernel::fault_in_readable(reinterpret_cast<uint64_t>(base + 2 * page)));
    munmap(base, 2 * page);
}
