// interval=auto in the agent: the live profile's decoder thread shows it every decoded sample; it
// estimates what a sample costs, asks the PeriodController for each thread's period, has the reader
// apply the changes (PERF_EVENT_IOC_PERIOD) and logs each one.
#pragma once

#include <cstdint>

#include "period_controller.hpp"
#include "sample_cost.hpp"
#include "stackfrag/decoder/call_trace.hpp"
#include "stackfrag/events/events.hpp"

namespace sf::agent {

class Sampler;

// The part of a sample's cost that grows with the rate but is not the decode: the kernel copying
// registers and the 16 KB fragment into the ring in the sampled thread's context (bench_sample_cost
// on this machine: 8-9 us extra CPU per sample at 1 and 10 kHz, under load), and the reader copying
// it out (1-3 us, docs/benchmarks.md). The reader's remaining CPU time (waking every 10 ms,
// writing code events) does not grow with the rate.
inline constexpr uint64_t kCopyCostNs = 10'000;

class AutoInterval {
public:
    // `sampler` outlives this object.
    AutoInterval(PeriodControllerSettings settings, Sampler& sampler);

    // The decoder thread, for every decoded trace with its decode time; acts on on-CPU Samples.
    void on_trace(const Event& event, const CallTrace& trace, uint64_t decode_ns);

    const PeriodController& controller() const { return controller_; }
    uint64_t changes() const { return changes_; }

private:
    PeriodController controller_;
    Sampler& sampler_;
    SampleCost cost_;
    uint64_t changes_ = 0;
};

}  // namespace sf::agent
