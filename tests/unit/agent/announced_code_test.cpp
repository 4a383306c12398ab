// The VM capture's bookkeeping of what the stream has been told, without a JVM.
#include <catch2/catch.hpp>

#include <algorithm>
#include <map>
#include <optional>
#include <vector>

#include "announced_code.hpp"

using namespace sf::agent;

TEST_CASE("a method is announced once per Method*, again after a redefinition or a failed announcement") {
    AnnouncedCode announced;
    CHECK(announced.claim_method(1, 0x100));
    CHECK_FALSE(announced.claim_method(1, 0x100));
    CHECK(announced.method_id_of(0x100) == 1);
    // RedefineClasses: the jmethodID now leads to a new Method*.
    CHECK(announced.claim_method(1, 0x200));
    CHECK(announced.method_id_of(0x200) == 1);
    CHECK(announced.method_count() == 1);
    // Building the MethodInfo failed: the next claim tries again.
    CHECK(announced.claim_method(2, 0x300));
    announced.unclaim_method(2);
    CHECK(announced.method_count() == 1);
    CHECK(announced.claim_method(2, 0x300));
    CHECK(announced.method_id_of(0x999) == 0);
}

TEST_CASE("the code poll tells a class none of whose methods was announced from one already announced") {
    // JDK 21 prepares some classes without a ClassPrepare (JdkFacts::class_prepare_missed_on_carrier):
    // the poll announces a class whose jmethodIDs were never claimed.
    AnnouncedCode announced;
    const uint64_t announced_class[] = {1, 2, 3};
    const uint64_t missed_class[] = {4, 5};
    const uint64_t partly[] = {3, 6, 0};
    CHECK(announced.unannounced_methods(announced_class, 3) == 3);
    for (uint64_t id : announced_class) REQUIRE(announced.claim_method(id, 0x100 * id));
    CHECK(announced.unannounced_methods(announced_class, 3) == 0);
    CHECK(announced.unannounced_methods(missed_class, 2) == 2);
    CHECK(announced.unannounced_methods(partly, 3) == 1);   // a 0 id is no method
    // A failed announcement is undone: the method counts as unannounced again.
    announced.unclaim_method(2);
    CHECK(announced.unannounced_methods(announced_class, 3) == 1);
}

TEST_CASE("claiming a class's methods at once answers as claiming them one by one") {
    AnnouncedCode batch, single;
    // Announced before: ids 1..50 at Method* id*16; now a class of 200 methods, some of them known,
    // one redefined, one listed twice, one without a Method*.
    for (uint64_t id = 1; id <= 50; ++id) {
        REQUIRE(batch.claim_method(id, id * 16));
        REQUIRE(single.claim_method(id, id * 16));
    }
    std::vector<uint64_t> ids, ptrs;
    for (uint64_t id = 30; id < 230; ++id) {
        ids.push_back(id);
        ptrs.push_back(id * 16);
    }
    ptrs[5] = 0x7777;        // id 35: redefined, another Method*
    ids.push_back(100);      // listed twice: claimed the first time only
    ptrs.push_back(100 * 16);
    ptrs[10] = 0;            // id 40: no Method* (a cleared id): never claimed
    std::vector<bool> claimed;
    batch.claim_methods(ids.data(), ptrs.data(), ids.size(), claimed);
    REQUIRE(claimed.size() == ids.size());
    size_t fresh = 0;
    for (size_t i = 0; i < ids.size(); ++i) {
        INFO("id " << ids[i]);
        CHECK(claimed[i] == single.claim_method(ids[i], ptrs[i]));
        fresh += claimed[i] ? 1 : 0;
    }
    CHECK(fresh == 179 + 1);   // 51..229, and the redefined 35
    CHECK(batch.method_count() == single.method_count());
    CHECK(batch.method_id_of(0x7777) == 35);
}

TEST_CASE("the poll finds the methods whose jmethodID leads to another Method* than announced") {
    AnnouncedCode announced;
    // More methods than one slice of the lock, some unclaimed (each moves the last one into its place).
    std::map<uint64_t, uint64_t> vm;   // jmethodID -> the Method* it leads to now
    for (uint64_t id = 1; id <= 10000; ++id) {
        REQUIRE(announced.claim_method(id, id * 16));
        vm[id] = id * 16;
    }
    for (uint64_t id = 2; id <= 10000; id += 1000) {
        announced.unclaim_method(id);
        vm.erase(id);
    }
    CHECK(announced.method_count() == 9990);
    auto current = [&](uint64_t id) -> std::optional<uint64_t> {
        auto it = vm.find(id);
        if (it == vm.end()) return std::nullopt;
        return it->second;
    };
    CHECK(announced.redefined(current).empty());
    vm[1] = 0x77;        // redefined
    vm[5000] = 0x88;     // redefined
    vm[10000] = 0x99;    // redefined, and the last of the list (moved by the first unclaim)
    vm.erase(7);         // unreadable: skipped
    std::vector<uint64_t> changed = announced.redefined(current);
    std::sort(changed.begin(), changed.end());
    CHECK(changed == std::vector<uint64_t>{1, 5000, 10000});
    // Announced again with the new Method*: no longer a finding.
    CHECK(announced.claim_method(5000, 0x88));
    changed = announced.redefined(current);
    std::sort(changed.begin(), changed.end());
    CHECK(changed == std::vector<uint64_t>{1, 10000});
    // An unclaimed method is not looked at; claimed again, it is.
    announced.unclaim_method(1);
    CHECK(announced.redefined(current) == std::vector<uint64_t>{10000});
    CHECK(announced.claim_method(1, 16));
    changed = announced.redefined(current);
    std::sort(changed.begin(), changed.end());
    CHECK(changed == std::vector<uint64_t>{1, 10000});
}

TEST_CASE("a CodeLoad goes out when it adds something: new code, scopes, or other code at the address") {
    AnnouncedCode announced;
    CHECK_FALSE(announced.code_known(0x1000));
    // Found by the CodeCache walk first (no scopes), then its CompiledMethodLoad brings the scopes.
    CHECK(announced.claim_code(0x1000, 7, false));
    CHECK(announced.code_known(0x1000));
    CHECK_FALSE(announced.claim_code(0x1000, 7, false));
    CHECK(announced.claim_code(0x1000, 7, true));
    CHECK_FALSE(announced.claim_code(0x1000, 7, true));
    CHECK_FALSE(announced.claim_code(0x1000, 7, false));   // scopes are never taken back
    // The address reused by another method before its unload arrived.
    CHECK(announced.claim_code(0x1000, 8, false));
    // The first method's late unload does not forget the second's code; its own does.
    announced.forget_code(0x1000, 7);
    CHECK(announced.code_known(0x1000));
    announced.forget_code(0x1000, 8);
    CHECK_FALSE(announced.code_known(0x1000));
    CHECK(announced.claim_code(0x1000, 8, false));
}

TEST_CASE("stubs go out once per range and name; unannounced nmethods are remembered for one poll") {
    AnnouncedCode announced;
    CHECK(announced.claim_stub(0x10, 0x20, "adapter"));
    CHECK_FALSE(announced.claim_stub(0x10, 0x20, "adapter"));
    CHECK(announced.claim_stub(0x10, 0x20, "other name"));
    CHECK(announced.claim_stub(0x10, 0x30, "adapter"));

    CHECK_FALSE(announced.unannounced_at_last_poll(0x1000));
    announced.set_unannounced_at_this_poll({0x1000, 0x2000});
    CHECK(announced.unannounced_at_last_poll(0x1000));
    announced.set_unannounced_at_this_poll({0x2000});
    CHECK_FALSE(announced.unannounced_at_last_poll(0x1000));
    CHECK(announced.unannounced_at_last_poll(0x2000));
}
