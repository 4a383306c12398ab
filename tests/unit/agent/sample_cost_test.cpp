// interval=auto's per-sample cost: what the decoder typically spends, not what it spent once on a
// first meeting or while preempted. The budget floor divides by it, so one 16 ms outlier taken at
// face value held every thread at the 100 ms maximum for thousands of samples.
#include <catch2/catch.hpp>

#include "sample_cost.hpp"

using sf::agent::SampleCost;

TEST_CASE("the sample cost is unknown until a few samples were seen") {
    SampleCost cost;
    for (size_t i = 0; i + 1 < SampleCost::kMinSamples; ++i) cost.add(2'000);
    CHECK(cost.estimate_ns() == 0);
    cost.add(2'000);
    CHECK(cost.estimate_ns() == 2'000);
}

TEST_CASE("a first sample that met a library's symbols does not pass for the cost of every sample") {
    // Live, on JDK 17 (PhaseChange): the first decode took 16 ms, the median of the next 250 11 us.
    SampleCost cost;
    cost.add(16'000'000);
    for (int i = 0; i < 63; ++i) cost.add(1'000 + (i % 5) * 100);
    CHECK(cost.estimate_ns() >= 1'000);
    CHECK(cost.estimate_ns() <= 1'300);
}

TEST_CASE("slow samples that recur are counted, capped at a multiple of the median") {
    SampleCost cost;
    // One in eight samples costs 100x the rest: they raise the estimate, by at most the cap.
    for (int i = 0; i < 64; ++i) cost.add(i % 8 == 0 ? 100'000 : 1'000);
    const uint64_t capped = (56 * 1'000 + 8 * 1'000 * SampleCost::kCapOverMedian) / 64;
    CHECK(cost.estimate_ns() == capped);
    CHECK(cost.estimate_ns() > 1'000);
}

TEST_CASE("the sample cost follows a change in what samples cost") {
    SampleCost cost;
    for (int i = 0; i < 64; ++i) cost.add(1'000);
    CHECK(cost.estimate_ns() == 1'000);
    for (int i = 0; i < 64; ++i) cost.add(30'000);
    CHECK(cost.estimate_ns() == 30'000);
}
