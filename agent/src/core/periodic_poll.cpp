#include "periodic_poll.hpp"

#include <algorithm>

#include "stackfrag/base/clock.hpp"

namespace sf::agent {

std::chrono::milliseconds PeriodicPoll::next_interval(std::chrono::milliseconds current, bool found,
                                                      std::chrono::milliseconds base, std::chrono::milliseconds max) {
    return found ? base : std::min(2 * current, max);
}

void PeriodicPoll::run(const std::function<bool()>& poll) { run(poll, {}); }

void PeriodicPoll::run(const std::function<bool()>& poll, const std::function<void()>& on_wake) {
    using Clock = std::chrono::steady_clock;
    std::unique_lock<std::mutex> lock(mutex_);
    std::chrono::milliseconds interval = base_;
    auto due = Clock::now() + interval;
    while (!stop_) {
        const auto until = wake_due_ && *wake_due_ < due ? *wake_due_ : due;
        wakeup_.wait_until(lock, until, [&] { return stop_ || (wake_due_ && *wake_due_ < until); });
        if (stop_) break;
        const auto now = Clock::now();
        if (wake_due_ && now >= *wake_due_) {
            wake_due_.reset();
            if (on_wake) {
                lock.unlock();
                on_wake();
                cpu_ns_.store(thread_cpu_ns());
                lock.lock();
            }
            continue;
        }
        if (now < due) continue;
        lock.unlock();
        const bool found = poll();
        polls_++;
        interval = next_interval(interval, found, base_, max_);
        cpu_ns_.store(thread_cpu_ns());
        due = Clock::now() + interval;
        lock.lock();
    }
}

void PeriodicPoll::wake() { wake_in(std::chrono::milliseconds(0)); }

void PeriodicPoll::wake_in(std::chrono::milliseconds delay) {
    std::lock_guard<std::mutex> lock(mutex_);
    const auto at = std::chrono::steady_clock::now() + delay;
    if (wake_due_ && *wake_due_ <= at) return;   // already due sooner: a burst of calls wakes the thread once
    wake_due_ = at;
    wakeup_.notify_all();
}

void PeriodicPoll::stop() {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
    wakeup_.notify_all();
}

}  // namespace sf::agent
