#include "stackfrag/profile/coverage.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace sf::profile {

std::optional<double> Coverage::ratio() const {
    if (process_ns() == 0) return std::nullopt;
    return double(sampled_ns) / double(process_ns());
}

std::optional<double> Coverage::ratio_while_sampling() const {
    if (!at_start || process_ns() <= before_start_ns()) return std::nullopt;
    return double(sampled_ns) / double(process_ns() - before_start_ns());
}

std::optional<double> host_steal_share(const ProcessCpu& start, const ProcessCpu& stop) {
    if (start.host_busy_ns == 0 || stop.host_busy_ns <= start.host_busy_ns || stop.host_steal_ns < start.host_steal_ns) {
        return std::nullopt;
    }
    const uint64_t busy = stop.host_busy_ns - start.host_busy_ns;
    const uint64_t steal = std::min(stop.host_steal_ns - start.host_steal_ns, busy);
    return double(steal) / double(busy);
}

std::optional<double> Coverage::host_steal_share() const {
    if (!at_start || !process) return std::nullopt;
    return profile::host_steal_share(*at_start, *process);
}

double Coverage::share(ThreadKind kind) const {
    const size_t k = static_cast<size_t>(kind);
    return sampled_ns != 0 && k < kKinds ? double(sampled_ns_by_kind[k]) / double(sampled_ns) : 0.0;
}

void CoverageTally::observe(const Event& event) {
    uint32_t tid = 0;
    if (const auto* sample = std::get_if<Sample>(&event)) {
        if (sample->source == SampleSource::kPerfSwitch) return;   // off-CPU: a blocking, not CPU time
        tid = sample->tid;
    } else if (const auto* trace = std::get_if<JvmtiTrace>(&event)) {
        tid = trace->tid;
    } else if (const auto* thread = std::get_if<ThreadInfo>(&event)) {
        if (!thread->ended) kinds_[thread->tid] = thread->kind;
        return;
    } else if (const auto* vm = std::get_if<VmInfo>(&event)) {
        period_ns_ = vm->sample_period_ns;
        return;
    } else if (const auto* lost = std::get_if<Lost>(&event)) {
        coverage_.lost_samples += lost->count;
        coverage_.lost_ns += lost->count * period_ns_;
        return;
    } else if (const auto* cpu = std::get_if<ProcessCpu>(&event)) {
        (cpu->at_start ? coverage_.at_start : coverage_.process) = *cpu;
        return;
    } else {
        return;   // code, methods, oracle samples (the validator's, not the application's), ...
    }
    const auto known = kinds_.find(tid);
    size_t kind = static_cast<size_t>(known != kinds_.end() ? known->second : ThreadKind::kOther);
    if (kind >= Coverage::kKinds) kind = static_cast<size_t>(ThreadKind::kOther);
    if (const auto* sample = std::get_if<Sample>(&event); sample && sample->source == SampleSource::kPerfKernel) {
        ++coverage_.kernel_samples;
    }
    ++coverage_.samples;
    ++coverage_.samples_by_kind[kind];
    coverage_.sampled_ns += period_ns_;
    coverage_.sampled_ns_by_kind[kind] += period_ns_;
}

std::string coverage_text(const Coverage& c) {
    std::string shares;
    for (size_t k = 0; k < Coverage::kKinds; ++k) {
        const auto kind = static_cast<ThreadKind>(k);
        shares += fmt::format("{}{} {:.1f}%", shares.empty() ? "" : ", ", thread_kind_name(kind), 100.0 * c.share(kind));
    }
    shares += fmt::format("; in the kernel {:.1f}%", c.samples ? 100.0 * double(c.kernel_samples) / double(c.samples) : 0.0);
    const double sampled_ms = double(c.sampled_ns) / 1e6;
    if (!c.ratio()) {
        return fmt::format("coverage unknown: samples {:.1f} ms of CPU time ({} samples), the process's CPU time is not "
                           "in the stream (a recording from before process_cpu events, or a stop that did not finish); "
                           "threads: {}",
                           sampled_ms, c.samples, shares);
    }
    std::string before;
    if (const std::optional<double> rest = c.ratio_while_sampling()) {
        before = fmt::format("; before sampling began {:.1f} ms ({:.1f}%), samples {:.1f}% of the rest",
                             double(c.before_start_ns()) / 1e6,
                             100.0 * double(c.before_start_ns()) / double(c.process_ns()), 100.0 * *rest);
    }
    if (c.lost_samples != 0) {
        before += fmt::format("; lost in full rings {} samples ({:.1f} ms, {:.1f}%)", c.lost_samples,
                              double(c.lost_ns) / 1e6, 100.0 * double(c.lost_ns) / double(c.process_ns()));
    }
    // Below a tenth of a per cent it changes no figure of the line.
    if (const std::optional<double> steal = c.host_steal_share(); steal && *steal >= 0.001) {
        before += fmt::format("; the hypervisor took {:.1f}% of the machine's busy CPU time while sampling (steal), "
                              "which the clock events count as the running thread's and the process's CPU time does "
                              "not: samples can exceed it by that much",
                              100.0 * *steal);
    }
    return fmt::format("coverage {:.1f}% of the process's CPU time: samples {:.1f} ms of {:.1f} ms (user {:.1f} ms, "
                       "sys {:.1f} ms){}; threads: {}",
                       100.0 * *c.ratio(), sampled_ms, double(c.process_ns()) / 1e6, double(c.process->user_ns) / 1e6,
                       double(c.process->system_ns) / 1e6, before, shares);
}

}  // namespace sf::profile
