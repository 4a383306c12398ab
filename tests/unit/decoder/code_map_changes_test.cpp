// CodeMap::changes_since and the lookup log (code_map.hpp): what the incremental decoder relies on
// to take over a walk's steps across events that changed nothing those steps asked about.
#include <catch2/catch.hpp>

#include <vector>

#include "stackfrag/decoder/code_map.hpp"
#include "synthetic.hpp"

using namespace sf;
using namespace sf::test;

namespace {

bool covers(const std::vector<CodeMap::KeyRange>& changes, uint64_t key) {
    for (const auto& c : changes) {
        if (key >= c.lo && key <= c.hi) return true;
    }
    return false;
}

}  // namespace

TEST_CASE("changes_since names the pages and Method*s each event changed", "[decoder][incremental]") {
    World w;
    const CodeLoad& a = w.add_code(nmethod(kCodeCacheLow + 0x10000, 1, 4));
    std::vector<CodeMap::KeyRange> changes;
    const uint64_t epoch = w.map.epoch();
    REQUIRE(w.map.changes_since(epoch, changes));
    CHECK(changes.empty());

    SECTION("a load over older code: the new code's pages and the retired code's") {
        CodeLoad b = nmethod(kCodeCacheLow + 0x10200, 2, 4);   // overlaps a's second half
        b.code_end = b.code_begin + 0x3000;
        b.time_ns = 5;
        w.map.apply(b);
        REQUIRE(w.map.changes_since(epoch, changes));
        CHECK(covers(changes, CodeMap::page_key(a.code_begin)));
        CHECK(covers(changes, CodeMap::page_key(b.code_end - 1)));
        CHECK_FALSE(covers(changes, CodeMap::page_key(b.code_end + 0x1000)));
        CHECK_FALSE(covers(changes, CodeMap::method_key(method_ptr(2))));
    }
    SECTION("an unload, a stub, a Method*") {
        CodeUnload u;
        u.time_ns = 5;
        u.code_begin = a.code_begin;
        u.method_id = a.method_id;
        w.map.apply(u);
        Stub st;
        st.begin = kCodeCacheLow + 0x80000;
        st.end = st.begin + 0x100;
        st.name = "vtable chunks";
        w.map.apply(st);
        MethodInfo m;
        m.time_ns = 6;
        m.method_id = method_id(40);
        m.method_ptr = method_ptr(40);
        w.map.apply(m);
        REQUIRE(w.map.changes_since(epoch, changes));
        CHECK(covers(changes, CodeMap::page_key(a.code_begin)));
        CHECK(covers(changes, CodeMap::page_key(st.begin)));
        CHECK(covers(changes, CodeMap::method_key(method_ptr(40))));
        CHECK_FALSE(covers(changes, CodeMap::method_key(method_ptr(3))));
        // From a later epoch, only what came after it.
        const uint64_t later = w.map.epoch() - 1;   // before the MethodInfo
        REQUIRE(w.map.changes_since(later, changes));
        CHECK_FALSE(covers(changes, CodeMap::page_key(a.code_begin)));
        CHECK(covers(changes, CodeMap::method_key(method_ptr(40))));
    }
    SECTION("a module map or VmInfo since: not known") {
        ModuleMap mm;
        mm.begin = kNativePc & ~uint64_t{0xfff};
        mm.end = mm.begin + 0x10000;
        mm.path = "/nonexistent/libfoo.so";
        w.map.apply(mm);
        CHECK_FALSE(w.map.changes_since(epoch, changes));
        CHECK(w.map.changes_since(w.map.epoch(), changes));
    }
    SECTION("more events than the log keeps: not known") {
        for (int i = 0; i < 5000; ++i) {
            MethodInfo m;
            m.time_ns = 7;
            m.method_id = method_id(100 + i);
            m.method_ptr = method_ptr(100 + i);
            w.map.apply(m);
        }
        CHECK_FALSE(w.map.changes_since(epoch, changes));
        CHECK(w.map.changes_since(w.map.epoch() - 10, changes));
    }
}

TEST_CASE("the lookup log holds the pages and Method*s looked up, up to its size", "[decoder][incremental]") {
    World w;
    w.add_code(nmethod(kCodeCacheLow + 0x10000, 1, 4));
    CodeMap::LookupKeys log;
    w.map.set_lookup_log(&log);
    (void)w.map.find_code(kCodeCacheLow + 0x10010, 10);
    (void)w.map.find_code(kCodeCacheLow + 0x10020, 10);   // the same page: one key
    (void)w.map.method_by_ptr(method_ptr(3), 10);
    CHECK(log.count == 2);
    CHECK(log.keys[0] == CodeMap::page_key(kCodeCacheLow + 0x10010));
    CHECK(log.keys[1] == CodeMap::method_key(method_ptr(3)));
    CHECK_FALSE(log.overflow);
    for (int i = 0; i < 3; ++i) (void)w.map.find_compiled(kCodeCacheLow + 0x100000 * uint64_t(i + 1), 10);
    CHECK(log.overflow);
    w.map.set_lookup_log(nullptr);
    CodeMap::LookupKeys untouched;
    (void)w.map.find_code(kCodeCacheLow + 0x10010, 10);
    CHECK(untouched.count == 0);
}

// MethodBatch and NamedMethod: a batch stands for one MethodInfo per entry (same lookups, same
// change records); names fill in the announcement of their id whenever they come.
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

TEST_CASE("a method announced again without names (a redefinition in a MethodBatch) keeps its id's names", "[decoder]") {
    CodeMap map;
    map.apply(MethodBatch{1000, {MethodEntry{0x10, 0x7000, 0x7100, 20, 0}}});
    map.apply(NamedMethod{2000, 0x10, true, "app/A", "run", "()V", "A.java", {{0, 7}}});
    // Redefined: the same jmethodID, a new Method* and bytecodes, announced nameless.
    map.apply(MethodBatch{3000, {MethodEntry{0x10, 0x9000, 0x9100, 24, 0}}});
    const MethodInfo* latest = map.method_by_id(0x10);
    REQUIRE(latest != nullptr);
    CHECK(latest->method_ptr == 0x9000);
    CHECK(latest->name == "run");
    CHECK(latest->class_name == "app/A");
    CHECK(latest->lines.size() == 1);
    REQUIRE(map.method_by_ptr(0x9000, 4000) == latest);
    // The older version is unchanged.
    CHECK(map.method_by_ptr(0x7000, 1500)->bytecode_size == 20);
}

// A batch's methods are kept as records until a lookup asks (CodeMap::MethodRecord): whichever
// lookup comes first, by Method* or by id, before or after the names, all answer with one MethodInfo.
TEST_CASE("a batch method looked up before it is named answers the same named MethodInfo after", "[decoder]") {
    CodeMap map;
    map.apply(MethodBatch{1000, {MethodEntry{0x10, 0x7000, 0x7100, 20, 0x1}, MethodEntry{0x20, 0x8000, 0x8100, 8, 0}}});
    const MethodInfo* by_ptr = map.method_by_ptr(0x7000, 2000);   // the walk's lookup first
    REQUIRE(by_ptr != nullptr);
    CHECK(by_ptr->name.empty());
    CHECK(by_ptr->bytecode_size == 20);
    map.apply(NamedMethod{3000, 0x10, true, "app/A", "run", "()V", "A.java", {{0, 7}}});
    CHECK(map.method_by_ptr(0x7000, 2000) == by_ptr);
    CHECK(map.method_by_id(0x10) == by_ptr);
    CHECK(by_ptr->name == "run");
    CHECK(by_ptr->time_ns == 1000);   // the announcement's time, not the names'

    map.apply(NamedMethod{3000, 0x20, true, "app/B", "go", "()I", {}, {}});   // named before any lookup
    const MethodInfo* second = map.method_by_ptr(0x8000, 2000);
    REQUIRE(second != nullptr);
    CHECK(second == map.method_by_id(0x20));
    CHECK(second->name == "go");
    CHECK(second->bytecode_begin == 0x8100);
    CHECK(second->method_ptr == 0x8000);
    CHECK(map.method_by_ptr(0x9000, 2000) == nullptr);
}
