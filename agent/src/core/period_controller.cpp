#include "period_controller.hpp"

#include <algorithm>
#include <cstdio>

#include "stackfrag/kernel/perf_events.hpp"

namespace sf::agent {

PeriodController::PeriodController(PeriodControllerSettings settings) : settings_(settings) {
    settings_.window = std::max<uint32_t>(settings_.window, 2);
    settings_.min_window = std::clamp<uint32_t>(settings_.min_window, 2, settings_.window);
    settings_.min_ns = std::max<uint64_t>(settings_.min_ns, kernel::kMinSamplingPeriodNs);
    settings_.max_ns = std::max(settings_.max_ns, settings_.min_ns);
    settings_.start_ns = std::clamp(settings_.start_ns, settings_.min_ns, settings_.max_ns);
}

uint64_t PeriodController::period_of(uint32_t tid) const {
    auto found = threads_.find(tid);
    return found != threads_.end() ? found->second.period_ns : settings_.start_ns;
}

uint64_t PeriodController::budget_floor_ns(size_t active_threads) const {
    if (cost_ns_ == 0 || settings_.budget <= 0) return settings_.min_ns;
    // n threads each sampled every p ns of their CPU time cost n * cost / p of a core at most.
    const double floor = static_cast<double>(cost_ns_) * static_cast<double>(std::max<size_t>(active_threads, 1)) /
                         settings_.budget;
    return std::clamp(static_cast<uint64_t>(floor), settings_.min_ns, settings_.max_ns);
}

size_t PeriodController::active_threads(uint64_t now_ns) const {
    size_t active = 0;
    for (const auto& [tid, thread] : threads_) {
        if (thread.last_time_ns + settings_.active_ns >= now_ns) ++active;
    }
    return active;
}

std::optional<PeriodChange> PeriodController::on_sample(uint32_t tid, uint64_t time_ns, uint64_t top) {
    auto [found, created] = threads_.try_emplace(tid);
    Thread& thread = found->second;
    if (created) thread.period_ns = settings_.start_ns;
    thread.last_time_ns = std::max(thread.last_time_ns, time_ns);
    if (thread.has_last && thread.last_top == top) ++thread.repeats;
    thread.last_top = top;
    thread.has_last = true;
    if (thread.in_window++ == 0) thread.window_start_ns = time_ns;
    const bool full = thread.in_window >= settings_.window;
    const bool long_enough = thread.in_window >= settings_.min_window &&
                             time_ns >= thread.window_start_ns + settings_.max_window_ns;
    if (!full && !long_enough) return std::nullopt;

    // n samples give n - 1 consecutive pairs.
    const double share = static_cast<double>(thread.repeats) / static_cast<double>(thread.in_window - 1);
    thread.in_window = 0;
    thread.repeats = 0;
    thread.has_last = false;   // the next window's pairs start with its own first sample

    const uint64_t old_ns = thread.period_ns;
    uint64_t wanted = old_ns;
    char why[160];
    if (share >= settings_.grow_above) {
        wanted = std::min(settings_.max_ns, old_ns * 2);
        snprintf(why, sizeof why, "the top frame repeated in %.0f%% of samples", share * 100);
    } else if (share <= settings_.shrink_below) {
        wanted = std::max(settings_.min_ns, old_ns / 2);
        snprintf(why, sizeof why, "the top frame repeated in only %.0f%% of samples", share * 100);
    } else {
        snprintf(why, sizeof why, "the top frame repeated in %.0f%% of samples", share * 100);
    }
    const size_t active = active_threads(time_ns);
    const uint64_t floor = budget_floor_ns(active);
    if (wanted < floor) {
        wanted = floor;
        snprintf(why, sizeof why, "budget: %.2f%% of a core over %zu active threads at %llu ns per sample allows no less",
                 settings_.budget * 100, active, static_cast<unsigned long long>(cost_ns_));
    }
    if (wanted == old_ns) return std::nullopt;
    thread.period_ns = wanted;
    return PeriodChange{tid, old_ns, wanted, share, why};
}

}  // namespace sf::agent
