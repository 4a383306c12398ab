// interval=auto: chooses each thread's sampling period from its decoded samples. A pure class (no
// clock, no threads): samples in, period changes out, so its behaviour is testable sample by sample.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>

namespace sf::agent {

struct PeriodControllerSettings {
    uint64_t start_ns = 1'000'000;
    uint64_t min_ns = 100'000;
    uint64_t max_ns = 100'000'000;
    // Samples per decision. Each decision looks at how often the innermost frame of a sample equals
    // the previous sample's: a thread that stays in one place is oversampled (each sample tells
    // little new), one that moves around is undersampled.
    uint32_t window = 50;
    // ... or fewer, at least min_window, once they span this much time: at long periods a window
    // of 50 would take seconds, and a phase change would go unanswered that long.
    uint32_t min_window = 10;
    uint64_t max_window_ns = 1'000'000'000;
    double grow_above = 0.8;     // repeat share at or above which the period doubles
    double shrink_below = 0.3;   // repeat share at or below which it halves
    // CPU share of one core that sampling may cost (budget=1% -> 0.01).
    double budget = 0.01;
    // A thread counts towards the budget while it had a sample in this much time.
    uint64_t active_ns = 1'000'000'000;
};

struct PeriodChange {
    uint32_t tid = 0;
    uint64_t old_ns = 0;
    uint64_t new_ns = 0;
    double repeat_share = 0;   // of the window that decided it
    std::string why;
};

class PeriodController {
public:
    explicit PeriodController(PeriodControllerSettings settings);

    // One decoded sample of `tid` at `time_ns` whose innermost frame is `top` (any stable key of
    // the frame: method id, or pc for native code). Returns the change when this sample completes a
    // window and the thread's period changes.
    std::optional<PeriodChange> on_sample(uint32_t tid, uint64_t time_ns, uint64_t top);
    // What one sample costs in CPU time (kernel copy, reader, decoder); 0 = unknown (no budget clamp).
    void set_cost_per_sample(uint64_t cost_ns) { cost_ns_ = cost_ns; }
    // The thread ended.
    void forget(uint32_t tid) { threads_.erase(tid); }

    uint64_t period_of(uint32_t tid) const;
    // The smallest period the budget allows each of `active_threads` threads running all the time.
    uint64_t budget_floor_ns(size_t active_threads) const;
    const PeriodControllerSettings& settings() const { return settings_; }

private:
    struct Thread {
        uint64_t period_ns = 0;
        uint64_t last_top = 0;
        bool has_last = false;
        uint32_t in_window = 0;
        uint32_t repeats = 0;
        uint64_t window_start_ns = 0;
        uint64_t last_time_ns = 0;
    };
    size_t active_threads(uint64_t now_ns) const;

    PeriodControllerSettings settings_;
    uint64_t cost_ns_ = 0;
    std::unordered_map<uint32_t, Thread> threads_;
};

}  // namespace sf::agent
