// interval=auto's controller as a pure function of the top frames it is shown: a thread stuck in
// one frame gets a longer period, up to the maximum; one that moves around a shorter one, down to
// the minimum or the budget's floor; a phase change turns the direction around.
#include <catch2/catch.hpp>

#include <optional>
#include <vector>

#include "period_controller.hpp"

using sf::agent::PeriodChange;
using sf::agent::PeriodController;
using sf::agent::PeriodControllerSettings;

namespace {

constexpr uint32_t kTid = 42;

// Feeds `samples` samples of kTid, the top frame given by `top(i)`, `spacing` apart from `time`;
// returns the changes.
template <class Top>
std::vector<PeriodChange> feed(PeriodController& controller, uint64_t& time, int samples, Top top,
                               uint64_t spacing = 1'000'000) {
    std::vector<PeriodChange> changes;
    for (int i = 0; i < samples; ++i) {
        time += spacing;
        if (std::optional<PeriodChange> change = controller.on_sample(kTid, time, top(i))) changes.push_back(*change);
    }
    return changes;
}

PeriodControllerSettings settings() {
    PeriodControllerSettings s;
    s.start_ns = 1'000'000;
    s.min_ns = 100'000;
    s.max_ns = 100'000'000;
    s.window = 50;
    return s;
}

}  // namespace

TEST_CASE("a thread stuck in one frame has its period doubled each window up to the maximum") {
    PeriodController controller(settings());
    uint64_t time = 0;
    const auto changes = feed(controller, time, 50 * 10, [](int) { return 7u; });
    REQUIRE(changes.size() == 7);   // 1 ms -> 2, 4, 8, 16, 32, 64 ms, then 100 ms (the maximum)
    CHECK(changes[0].old_ns == 1'000'000);
    CHECK(changes[0].new_ns == 2'000'000);
    CHECK(changes[0].repeat_share == Approx(1.0));
    CHECK(changes.back().new_ns == 100'000'000);
    CHECK(controller.period_of(kTid) == 100'000'000);
    CHECK(changes[0].why.find("repeated in 100%") != std::string::npos);
}

TEST_CASE("a thread whose top frame keeps changing has its period halved down to the minimum") {
    PeriodController controller(settings());
    uint64_t time = 0;
    const auto changes = feed(controller, time, 50 * 10, [](int i) { return static_cast<uint64_t>(i % 17); });
    REQUIRE(changes.size() == 4);   // 1 ms -> 500, 250, 125 us, then 100 us (the minimum)
    CHECK(changes[0].new_ns == 500'000);
    CHECK(changes[0].repeat_share == Approx(0.0));
    CHECK(controller.period_of(kTid) == 100'000);
}

TEST_CASE("a mixed thread keeps its period") {
    PeriodController controller(settings());
    uint64_t time = 0;
    // Each frame twice in a row: half the pairs repeat.
    const auto changes = feed(controller, time, 50 * 6, [](int i) { return static_cast<uint64_t>(i / 2); });
    CHECK(changes.empty());
    CHECK(controller.period_of(kTid) == 1'000'000);
}

TEST_CASE("a phase change turns the period around: it converges each way") {
    PeriodController controller(settings());
    uint64_t time = 0;
    feed(controller, time, 50 * 4, [](int) { return 1u; });   // tight loop
    const uint64_t after_loop = controller.period_of(kTid);
    CHECK(after_loop == 16'000'000);
    feed(controller, time, 50 * 12, [](int i) { return static_cast<uint64_t>(i % 31); });   // many methods
    CHECK(controller.period_of(kTid) == 100'000);
    feed(controller, time, 50 * 12, [](int) { return 2u; });   // a loop again
    CHECK(controller.period_of(kTid) == 100'000'000);
}

TEST_CASE("the budget keeps the period above cost x active threads / budget") {
    PeriodControllerSettings s = settings();
    s.budget = 0.01;
    PeriodController controller(s);
    controller.set_cost_per_sample(6'000);   // 6 us per sample: 1% of a core allows one per 600 us
    CHECK(controller.budget_floor_ns(1) == 600'000);
    CHECK(controller.budget_floor_ns(4) == 2'400'000);
    uint64_t time = 0;
    const auto changes = feed(controller, time, 50 * 10, [](int i) { return static_cast<uint64_t>(i % 17); });
    REQUIRE(!changes.empty());
    CHECK(controller.period_of(kTid) == 600'000);   // not 500 us (the halving) or 100 us
    CHECK(changes.back().why.find("budget") != std::string::npos);

    // More active threads raise the floor for each (here: three more, sampled just now).
    for (uint32_t other = 1; other <= 3; ++other) (void)controller.on_sample(other, time, 1);
    const auto more = feed(controller, time, 50, [](int i) { return static_cast<uint64_t>(i % 17); });
    REQUIRE(more.size() == 1);
    CHECK(more[0].new_ns == 2'400'000);
    // A thread that has not been sampled for a second no longer counts.
    time += 2'000'000'000;
    feed(controller, time, 50 * 4, [](int i) { return static_cast<uint64_t>(i % 17); });
    CHECK(controller.period_of(kTid) == 600'000);
    controller.forget(kTid);
    CHECK(controller.period_of(kTid) == 1'000'000);   // a new thread starts at the start period
}

TEST_CASE("at long periods a window closes after a second of samples, not after 50") {
    PeriodController controller(settings());
    uint64_t time = 0;
    // 100 ms apart: the 11th sample is a second after the window's first.
    auto changes = feed(controller, time, 10, [](int) { return 3u; }, 100'000'000);
    CHECK(changes.empty());
    changes = feed(controller, time, 1, [](int) { return 3u; }, 100'000'000);
    REQUIRE(changes.size() == 1);
    CHECK(changes[0].new_ns == 2'000'000);
    // Fewer than min_window samples never decide, however long they take.
    changes = feed(controller, time, 9, [](int i) { return static_cast<uint64_t>(i); }, 1'000'000'000);
    CHECK(changes.empty());
    changes = feed(controller, time, 1, [](int) { return 99u; }, 1'000'000'000);
    REQUIRE(changes.size() == 1);
    CHECK(changes[0].new_ns == 1'000'000);
}
