#include "sample_cost.hpp"

#include <algorithm>

namespace sf::agent {

void SampleCost::add(uint64_t decode_ns) {
    recent_[seen_ % kRecent] = decode_ns;
    ++seen_;
    // A recompute sorts 64 values: every 8th sample keeps it off the per-sample cost, and a
    // period decision needs 10 samples or more anyway.
    if (seen_ >= kMinSamples && seen_ % kMinSamples == 0) recompute();
}

void SampleCost::recompute() {
    const size_t n = std::min(seen_, kRecent);
    std::array<uint64_t, kRecent> sorted = recent_;
    std::nth_element(sorted.begin(), sorted.begin() + n / 2, sorted.begin() + n);
    const uint64_t cap = sorted[n / 2] * kCapOverMedian;
    uint64_t sum = 0;
    for (size_t i = 0; i < n; ++i) sum += std::min(recent_[i], cap);
    estimate_ns_ = sum / n;
}

}  // namespace sf::agent
