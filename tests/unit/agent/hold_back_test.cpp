// The reader's hold-back: samples published after newer events went out are counted, and the
// hold-back grows to what they would have needed, within its bounds.
#include <catch2/catch.hpp>

#include "hold_back.hpp"

using namespace sf::agent;

namespace {
constexpr uint64_t kMs = 1'000'000;
}

TEST_CASE("hold-back: a sample newer than what was written is on time") {
    HoldBack hold(20 * kMs, 80 * kMs);
    CHECK_FALSE(hold.late(1000 * kMs, 0, 1010 * kMs));             // nothing written yet
    CHECK_FALSE(hold.late(1000 * kMs, 999 * kMs, 1030 * kMs));     // after the released horizon
    CHECK_FALSE(hold.late(0, 999 * kMs, 1030 * kMs));              // no time of its own
    CHECK(hold.late_samples() == 0);
    CHECK(hold.ns() == 20 * kMs);
}

TEST_CASE("hold-back: a late sample is counted and grows it to its delay and a margin, up to the maximum") {
    HoldBack hold(20 * kMs, 80 * kMs);
    // Written up to 1000 ms; a sample stamped at 999 ms read at 1025 ms: 26 ms from its tick.
    CHECK(hold.late(999 * kMs, 1000 * kMs, 1025 * kMs));
    CHECK(hold.late_samples() == 1);
    CHECK(hold.max_delay_ns() == 26 * kMs);
    CHECK(hold.ns() == 36 * kMs);   // 26 + half of 20
    // At the horizon itself: late too (the horizon's events went out).
    CHECK(hold.late(1000 * kMs, 1000 * kMs, 1001 * kMs));
    CHECK(hold.late_samples() == 2);
    CHECK(hold.ns() == 36 * kMs);   // a shorter delay leaves it
    // A long stall: bounded by the maximum (the held samples' memory).
    CHECK(hold.late(900 * kMs, 1000 * kMs, 1200 * kMs));
    CHECK(hold.max_delay_ns() == 300 * kMs);
    CHECK(hold.ns() == 80 * kMs);
}

TEST_CASE("hold-back: a maximum below the start keeps the start") {
    HoldBack hold(20 * kMs, 10 * kMs);
    CHECK(hold.late(1 * kMs, 2 * kMs, 100 * kMs));
    CHECK(hold.ns() == 20 * kMs);
}
