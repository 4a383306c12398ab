// interval=auto in the agent: the live profile's decoder thread shows it every decoded sample; it
// measures what a sample costs, asks the PeriodController for each thread's period, has the reader
// apply the changes (PERF_EVENT_IOC_PERIOD) and logs each one.
#pragma once

#include <cstdint>

#include "period_controller.hpp"
#include "stackfrag/decoder/call_trace.hpp"
#include "stackfrag/events/events.hpp"

namespace sf::agent {

class Sampler;

// The kernel's share of a sample's cost, which no thread's CPU clock of ours shows: copying the
// registers and the 16 KB fragment into the ring in the sampled thread's context. An estimate, not
// measured on its own: the reader copies the same bytes in 1-3 us (docs/benchmarks.md), and the
// kernel's copy from the user stack is of the same kind, plus the interrupt around it.
inline constexpr uint64_t kKernelCopyNs = 4'000;

class AutoInterval {
public:
    // `sampler` outlives this object.
    AutoInterval(PeriodControllerSettings settings, Sampler& sampler);

    // The decoder thread, for every decoded Sample (Oracle and switch samples are ignored).
    void on_trace(const Event& event, const CallTrace& trace);

    const PeriodController& controller() const { return controller_; }
    uint64_t changes() const { return changes_; }

private:
    void measure_cost(uint64_t sample_time_ns);

    PeriodController controller_;
    Sampler& sampler_;
    uint64_t samples_ = 0;              // since the last measurement
    uint64_t measured_at_ns_ = 0;       // sample time of the last measurement
    uint64_t cpu_at_measure_ns_ = 0;    // reader + decoder CPU then
    uint64_t changes_ = 0;
};

}  // namespace sf::agent
