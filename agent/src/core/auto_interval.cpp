#include "auto_interval.hpp"

#include <functional>
#include <string>
#include <variant>

#include "log.hpp"
#include "sampler.hpp"

namespace sf::agent {

namespace {

// What "the same top frame" means: the same Java method (whatever its bci or tier), else the same
// native symbol, else the same pc.
uint64_t top_key(const CallTrace& trace) {
    const Frame& top = trace.frames.front();
    if (top.method_id != 0) return top.method_id;
    if (!top.symbol.empty()) return std::hash<InternedName>{}(top.symbol);
    return top.pc;
}

}  // namespace

AutoInterval::AutoInterval(PeriodControllerSettings settings, Sampler& sampler)
    : controller_(settings), sampler_(sampler) {}

void AutoInterval::on_trace(const Event& event, const CallTrace& trace, uint64_t decode_ns) {
    const auto* sample = std::get_if<Sample>(&event);
    // Not the profiler's threads' clock samples: no event to steer, no decode cost to learn.
    if (sample == nullptr || sample->source == SampleSource::kPerfSwitch || sample->source == SampleSource::kThreadClock) {
        return;
    }
    cost_.add(decode_ns);
    if (cost_.estimate_ns() != 0) controller_.set_cost_per_sample(cost_.estimate_ns() + kCopyCostNs);
    if (trace.status == TraceStatus::kFailed || trace.frames.empty()) return;
    std::optional<PeriodChange> change = controller_.on_sample(trace.tid, trace.time_ns, top_key(trace));
    if (!change) return;
    ++changes_;
    sampler_.request_period(static_cast<pid_t>(change->tid), change->new_ns);
    SF_LOG_INFO("interval=auto: thread %u period %llu -> %llu ns (%s)", change->tid,
                static_cast<unsigned long long>(change->old_ns), static_cast<unsigned long long>(change->new_ns),
                change->why.c_str());
}

}  // namespace sf::agent
