// MethodBatch and NamedMethod in the CodeMap: a batch stands for one MethodInfo per entry (same
// lookups, same change records), and names fill in the announcement of their id whenever they come.
#include <catch2/catch.hpp>

#include <vector>

#include "stackfrag/decoder/code_map.hpp"

using namespace sf;

namespace {

bool covers(const std::vector<CodeMap::KeyRange>& changes, uint64_t key) {
    for (const auto& c : changes) {
        if (key >= c.lo && key <= c.hi) return true;
    }
    return false;
}

}  // namespace

TEST_CASE("a MethodBatch announces each entry as a MethodInfo without names would", "[decoder]") {
    CodeMap map;
    const uint64_t epoch = map.epoch();
    map.apply(MethodBatch{1000, {MethodEntry{0x10, 0x7000, 0x7100, 20, 0x1},
                                 MethodEntry{0x20, 0x8000, 0x8100, 0, 0x101}}});
    CHECK(map.epoch() == epoch + 2);
    CHECK(map.time_horizon() >= 1000);
    std::vector<CodeMap::KeyRange> changes;
    REQUIRE(map.changes_since(epoch, changes));
    CHECK(changes.size() == 2);
    CHECK(covers(changes, CodeMap::method_key(0x7000)));
    CHECK(covers(changes, CodeMap::method_key(0x8000)));

    const MethodInfo* first = map.method_by_ptr(0x7000, 2000);
    REQUIRE(first != nullptr);
    CHECK(first->method_id == 0x10);
    CHECK(first->bytecode_begin == 0x7100);
    CHECK(first->bytecode_size == 20);
    CHECK(first->access_flags == 0x1);
    CHECK(first->name.empty());
    CHECK(map.method_by_id(0x20) == map.method_by_ptr(0x8000, 2000));
    CHECK(map.method_by_id(0x20)->access_flags == 0x101);
    CHECK(map.method_count() == 2);
}

TEST_CASE("a NamedMethod names its id's announcement, changes no walk, and never unnames", "[decoder]") {
    CodeMap map;
    map.apply(MethodBatch{1000, {MethodEntry{0x10, 0x7000, 0x7100, 20, 0}}});
    const uint64_t epoch = map.epoch();
    map.apply(NamedMethod{3000, 0x10, true, "app/A", "run", "()V", "A.java", {{0, 7}, {4, 8}}});
    CHECK(map.epoch() == epoch);
    const MethodInfo* named = map.method_by_ptr(0x7000, 2000);
    REQUIRE(named != nullptr);
    CHECK(named == map.method_by_id(0x10));
    CHECK(named->class_name == "app/A");
    CHECK(named->name == "run");
    CHECK(named->signature == "()V");
    CHECK(named->source_file == "A.java");
    CHECK(named->lines.size() == 2);
    CHECK(named->bytecode_size == 20);   // the batch's facts stay

    // A second answer (resolved or not) does not change the names.
    map.apply(NamedMethod{4000, 0x10, false, {}, {}, {}, {}, {}});
    map.apply(NamedMethod{4000, 0x10, true, "other/B", "x", "()I", {}, {}});
    CHECK(map.method_by_id(0x10)->name == "run");

    // An answer that the JVM could not give leaves the method unnamed.
    map.apply(MethodBatch{5000, {MethodEntry{0x30, 0x9000, 0x9100, 4, 0}}});
    map.apply(NamedMethod{6000, 0x30, false, {}, {}, {}, {}, {}});
    REQUIRE(map.method_by_id(0x30) != nullptr);
    CHECK(map.method_by_id(0x30)->name.empty());

    // Names for an id nothing announced: kept for naming alone, no Method* resolves to it.
    map.apply(NamedMethod{7000, 0x40, true, "app/C", "c", "()V", {}, {}});
    REQUIRE(map.method_by_id(0x40) != nullptr);
    CHECK(map.method_by_id(0x40)->name == "c");
    CHECK(map.method_by_id(0x40)->method_ptr == 0);
}
