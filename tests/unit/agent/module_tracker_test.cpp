// ModuleTracker: each executable file mapping is announced once, anonymous and special mappings
// never (but this process's vDSO, with its bytes), and a library mapped later (or at a new address)
// is announced when it appears.
#include <catch2/catch.hpp>

#include <sys/auxv.h>

#include <cstring>
#include <variant>
#include <vector>

#include "module_tracker.hpp"
#include "stackfrag/base/elf_file.hpp"

namespace {

struct Collect final : sf::agent::EventSink {
    std::vector<sf::Event> events;
    void emit(sf::Event&& event) override { events.push_back(std::move(event)); }
};

}  // namespace

TEST_CASE("file mappings are announced once; anonymous and special ones never (a [vdso] that is not this process's own neither)") {
    using sf::kernel::ExecutableMapping;
    sf::agent::ModuleTracker tracker;
    Collect sink;
    std::vector<ExecutableMapping> maps = {
        {0x1000, 0x2000, 0, ""},
        {0x3000, 0x5000, 0x1000, "/usr/lib/jvm/lib/server/libjvm.so"},
        {0x7000, 0x8000, 0, "[vdso]"},
    };
    CHECK(tracker.announce(maps, 10, sink) == 1);
    CHECK(tracker.announce(maps, 20, sink) == 0);
    maps.push_back({0x9000, 0xa000, 0, "/tmp/libnative.so"});
    CHECK(tracker.announce(maps, 30, sink) == 1);
    REQUIRE(sink.events.size() == 2);
    const auto& jvm = std::get<sf::ModuleMap>(sink.events[0]);
    CHECK(jvm.time_ns == 10);
    CHECK(jvm.begin == 0x3000);
    CHECK(jvm.end == 0x5000);
    CHECK(jvm.file_offset == 0x1000);
    CHECK(jvm.path == "/usr/lib/jvm/lib/server/libjvm.so");
    CHECK(std::get<sf::ModuleMap>(sink.events[1]).time_ns == 30);
}

TEST_CASE("refresh announces this process's own executable files, and its vDSO with the vDSO's bytes") {
    sf::agent::ModuleTracker tracker;
    Collect sink;
    CHECK(tracker.refresh(1, sink) > 0);
    CHECK(tracker.refresh(2, sink) == 0);
    size_t vdsos = 0;
    for (const sf::Event& event : sink.events) {
        const auto& module = std::get<sf::ModuleMap>(event);
        INFO(module.path);
        if (module.path == "[vdso]") {
            ++vdsos;
            // Its own bytes, an ELF image: what the decoder unwinds and names clock_gettime's frames from.
            CHECK(module.begin == getauxval(AT_SYSINFO_EHDR));
            REQUIRE(module.image.size() == module.end - module.begin);
            CHECK(std::memcmp(module.image.data(), reinterpret_cast<const void*>(module.begin), module.image.size()) == 0);
            CHECK(sf::ElfFile(module.image).valid());
        } else {
            CHECK(module.path.front() == '/');
            CHECK(module.image.empty());
        }
    }
    CHECK(vdsos == (getauxval(AT_SYSINFO_EHDR) != 0 ? 1u : 0u));
}

TEST_CASE("the last scan's executable mappings and the CodeCache are known code; the rest is not") {
    using sf::kernel::ExecutableMapping;
    sf::agent::ModuleTracker tracker;
    tracker.set_code_cache({0x100000, 0x200000});
    Collect sink;
    std::vector<sf::agent::ModuleTracker::Range> ranges;
    uint64_t generation = 0;
    CHECK_FALSE(tracker.executable_ranges(ranges, generation));   // no scan yet
    CHECK(tracker.announce({{0x1000, 0x2000, 0, ""}, {0x3000, 0x5000, 0, "/lib/a.so"}, {0x7000, 0x8000, 0, "[vdso]"}},
                           10, sink) == 1);
    REQUIRE(tracker.executable_ranges(ranges, generation));
    CHECK_FALSE(tracker.executable_ranges(ranges, generation));   // nothing newer
    for (uint64_t ip : {0x1000, 0x1fff, 0x3000, 0x4fff, 0x7000, 0x100000, 0x1fffff}) CHECK(tracker.known_code(ranges, ip));
    for (uint64_t ip : {0x0, 0x2000, 0x2fff, 0x5000, 0x6000, 0x8000, 0x200000}) CHECK_FALSE(tracker.known_code(ranges, ip));
    // A library mapped later is unknown until the next scan, and known after it.
    CHECK(tracker.announce({{0x3000, 0x5000, 0, "/lib/a.so"}, {0x9000, 0xa000, 0, "/lib/b.so"}}, 20, sink) == 1);
    CHECK_FALSE(tracker.known_code(ranges, 0x9000));
    REQUIRE(tracker.executable_ranges(ranges, generation));
    CHECK(tracker.known_code(ranges, 0x9000));
    CHECK_FALSE(tracker.known_code(ranges, 0x1000));   // gone from the maps
}
