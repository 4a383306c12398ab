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
    std::unique_lock<std::mutex> lock(mutex_);
    std::chrono::milliseconds interval = base_;
    auto due = std::chrono::steady_clock::now() + interval;
    while (!stop_) {
        wakeup_.wait_until(lock, due, [this] { return stop_ || woken_; });
        if (stop_) break;
        if (woken_) {
            woken_ = false;
            if (on_wake) {
                lock.unlock();
                on_wake();
                cpu_ns_.store(thread_cpu_ns());
                lock.lock();
            }
            if (std::chrono::steady_clock::now() < due) continue;
        }
        lock.unlock();
        const bool found = poll();
        polls_++;
        interval = next_interval(interval, found, base_, max_);
        cpu_ns_.store(thread_cpu_ns());
        due = std::chrono::steady_clock::now() + interval;
        lock.lock();
    }
}

void PeriodicPoll::wake() {
    std::lock_guard<std::mutex> lock(mutex_);
    woken_ = true;
    wakeup_.notify_all();
}

void PeriodicPoll::stop() {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
    wakeup_.notify_all();
}

}  // namespace sf::agent
