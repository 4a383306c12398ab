// interval=auto's estimate of what one more sample per second costs: the mean of recent decode
// times with one-off costs (a library's symbols met for the first time, the decoder thread
// preempted mid-decode) capped, so that they do not pass for a rate-dependent cost.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

namespace sf::agent {

class SampleCost {
public:
    // One sample's decode time (wall clock of the decoder thread).
    void add(uint64_t decode_ns);
    // The estimate in ns; 0 until enough samples were seen to tell a typical one from an outlier.
    uint64_t estimate_ns() const { return estimate_ns_; }

    // Decode times above this multiple of the recent median count as this multiple.
    static constexpr uint64_t kCapOverMedian = 4;
    static constexpr size_t kRecent = 64;
    static constexpr size_t kMinSamples = 8;

private:
    void recompute();

    std::array<uint64_t, kRecent> recent_{};
    size_t seen_ = 0;
    uint64_t estimate_ns_ = 0;
};

}  // namespace sf::agent
