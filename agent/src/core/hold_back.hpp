// How long the reader holds events back to write them in time order, and the samples that came
// later than that: a sample is stamped when its tick fires and published in the ring when the
// kernel has copied it, and a CPU held up in between (the hypervisor took the vCPU) can publish it
// after newer samples from other rings went out.
#pragma once

#include <algorithm>
#include <cstdint>

namespace sf::agent {

class HoldBack {
public:
    // `base_ns`: the hold-back to start with; `max_ns`: how far late samples may grow it (the held
    // samples' memory grows with it).
    constexpr HoldBack(uint64_t base_ns, uint64_t max_ns) : ns_(base_ns), max_ns_(std::max(base_ns, max_ns)) {}

    uint64_t ns() const { return ns_; }

    // A sample stamped `time_ns` and read at `now_ns`, when events up to `released_until_ns` were
    // written already (0: none yet). A late one (stamped at or before that) is counted, and the
    // hold-back grows to what it would have needed: at most how long ago it was stamped, plus
    // half the base again as a margin, up to the maximum. It is still written, out of order: a
    // sample is never dropped for it, and the decoder looks code up at the sample's own time.
    // Returns whether it was late.
    bool late(uint64_t time_ns, uint64_t released_until_ns, uint64_t now_ns) {
        if (released_until_ns == 0 || time_ns == 0 || time_ns > released_until_ns) return false;
        ++late_samples_;
        const uint64_t delay = now_ns > time_ns ? now_ns - time_ns : 0;
        max_delay_ns_ = std::max(max_delay_ns_, delay);
        ns_ = std::min(max_ns_, std::max(ns_, delay + ns_ / 2));
        return true;
    }

    uint64_t late_samples() const { return late_samples_; }
    // The longest time between a late sample's stamp and its read.
    uint64_t max_delay_ns() const { return max_delay_ns_; }

private:
    uint64_t ns_;
    uint64_t max_ns_;
    uint64_t late_samples_ = 0;
    uint64_t max_delay_ns_ = 0;
};

}  // namespace sf::agent
