// plan_ring_schedule: which waiting threads get a ring and whose rings they take when ring memory
// runs out (Sampler::schedule_rings applies it every window).
#include <catch2/catch.hpp>

#include "ring_schedule.hpp"

using sf::agent::plan_ring_schedule;
using sf::agent::RingHolder;
using sf::agent::WaitingThread;

namespace {
constexpr uint64_t kPeriod = 1'000'000;   // 1 ms
}

TEST_CASE("ring schedule: waiting threads that ran get the rings of holders that did not, busiest and idlest first",
          "[ring_schedule]") {
    const auto schedule = plan_ring_schedule(
        {{101, 150 * kPeriod}, {102, 0}, {103, 2 * kPeriod}, {104, kPeriod}, {105, 190 * kPeriod}},
        {{1, 0, 3, true}, {2, kPeriod / 2, 1, true}, {3, 0, 7, true}, {4, 0, 1, true}}, kPeriod);
    // 102 did not run; 104 ran one period (it may not have given a sample): both keep waiting.
    CHECK(schedule.to_open == std::vector<pid_t>{105, 101, 103});
    // Longest idle first; equally long, the one that ran less.
    CHECK(schedule.to_take == std::vector<uint64_t>{3, 1, 4, 2});
}

TEST_CASE("ring schedule: no ring changes hands between threads that both ran", "[ring_schedule]") {
    const auto schedule =
        plan_ring_schedule({{101, 50 * kPeriod}}, {{1, kPeriod, 1, true}, {2, 20 * kPeriod, 0, true}}, kPeriod);
    CHECK(schedule.to_open == std::vector<pid_t>{101});   // it takes what ended threads left, if anything
    CHECK(schedule.to_take.empty());
}

TEST_CASE("ring schedule: rings opened within the window, or not to be taken, stay", "[ring_schedule]") {
    const auto schedule =
        plan_ring_schedule({{101, 50 * kPeriod}}, {{1, 0, 1, false}, {2, 0, 0, true}, {3, 0, 2, true}}, kPeriod);
    CHECK(schedule.to_take == std::vector<uint64_t>{3});
}

TEST_CASE("ring schedule: nothing waits that ran, nothing is taken", "[ring_schedule]") {
    const auto schedule = plan_ring_schedule({{101, kPeriod}}, {{1, 0, 9, true}}, kPeriod);
    CHECK(schedule.to_open.empty());
    CHECK(schedule.to_take.empty());
}
