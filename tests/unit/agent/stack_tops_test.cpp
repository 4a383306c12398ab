#include <catch2/catch.hpp>

#include "stack_tops.hpp"

using namespace sf::agent;

TEST_CASE("a thread's stack top is kept until its end, unless a new thread of its tid registered since") {
    StackTops tops;
    CHECK_FALSE(tops.lookup(7).has_value());
    const uint64_t first = tops.generation();
    tops.remember(7, 0x7000, 100);
    CHECK(tops.lookup(7) == 0x7000u);
    CHECK(tops.generation() != first);

    // The old thread's end arrives after a new thread of the same tid registered (at 300).
    tops.remember(7, 0x9000, 300);
    tops.forget(7, 200);
    CHECK(tops.lookup(7) == 0x9000u);
    tops.forget(7, 400);
    CHECK_FALSE(tops.lookup(7).has_value());

    // 0: looked for and not found, which is not "never looked for".
    tops.remember(8, 0, 500);
    CHECK(tops.lookup(8) == 0u);
}

TEST_CASE("a reader's copy of the tops follows every change when refreshed, and only then") {
    StackTops tops;
    StackTops::Copy copy;
    copy.refresh(tops);
    CHECK(copy.top_of(5) == 0);
    tops.remember(5, 0x5000, 1);
    CHECK(copy.top_of(5) == 0);   // not refreshed yet
    copy.refresh(tops);
    CHECK(copy.top_of(5) == 0x5000);
    tops.remember(6, 0x6000, 2);
    tops.forget(5, 3);
    CHECK(copy.top_of(5) == 0x5000);
    copy.refresh(tops);
    CHECK(copy.top_of(5) == 0);
    CHECK(copy.top_of(6) == 0x6000);
}
