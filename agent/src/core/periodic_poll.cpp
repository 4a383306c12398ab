#include "periodic_poll.hpp"

#include <algorithm>

#include "stackfrag/base/clock.hpp"

namespace sf::agent {

std::chrono::milliseconds PeriodicPoll::next_interval(std::chrono::milliseconds current, bool found,
                                                      std::chrono::milliseconds base, std::chrono::milliseconds max) {
    return found ? base : std::min(2 * current, max);
}

void PeriodicPoll::run(const std::function<bool()>& poll) {
    std::unique_lock<std::mutex> lock(mutex_);
    std::chrono::milliseconds interval = base_;
    while (!stop_) {
        wakeup_.wait_for(lock, interval);
        if (stop_) break;
        lock.unlock();
        const bool found = poll();
        polls_++;
        interval = next_interval(interval, found, base_, max_);
        cpu_ns_.store(thread_cpu_ns());
        lock.lock();
    }
}

void PeriodicPoll::stop() {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
    wakeup_.notify_all();
}

}  // namespace sf::agent
