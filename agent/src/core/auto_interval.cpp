#include "auto_interval.hpp"

#include <time.h>

#include <functional>
#include <variant>

#include "log.hpp"
#include "sampler.hpp"

namespace sf::agent {

namespace {

constexpr uint64_t kMeasureEveryNs = 1'000'000'000;

uint64_t this_thread_cpu_ns() {
    timespec ts{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000u + static_cast<uint64_t>(ts.tv_nsec);
}

// What "the same top frame" means: the same Java method (whatever its bci or tier), else the same
// native symbol, else the same pc.
uint64_t top_key(const CallTrace& trace) {
    const Frame& top = trace.frames.front();
    if (top.method_id != 0) return top.method_id;
    if (!top.symbol.empty()) return std::hash<std::string>{}(top.symbol);
    return top.pc;
}

}  // namespace

AutoInterval::AutoInterval(PeriodControllerSettings settings, Sampler& sampler)
    : controller_(settings), sampler_(sampler) {}

void AutoInterval::measure_cost(uint64_t sample_time_ns) {
    // Runs on the decoder thread: its own CPU clock plus the reader's.
    const uint64_t cpu = this_thread_cpu_ns() + sampler_.reader_cpu_now_ns();
    if (measured_at_ns_ != 0 && samples_ != 0 && cpu > cpu_at_measure_ns_) {
        controller_.set_cost_per_sample((cpu - cpu_at_measure_ns_) / samples_ + kKernelCopyNs);
    }
    measured_at_ns_ = sample_time_ns;
    cpu_at_measure_ns_ = cpu;
    samples_ = 0;
}

void AutoInterval::on_trace(const Event& event, const CallTrace& trace) {
    const auto* sample = std::get_if<Sample>(&event);
    if (sample == nullptr || sample->source == SampleSource::kPerfSwitch) return;
    ++samples_;
    if (measured_at_ns_ == 0 || sample->time_ns >= measured_at_ns_ + kMeasureEveryNs) measure_cost(sample->time_ns);
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
