#include "ring_schedule.hpp"

#include <algorithm>

namespace sf::agent {

RingSchedule plan_ring_schedule(std::vector<WaitingThread> waiting, std::vector<RingHolder> holders,
                                uint64_t period_ns) {
    RingSchedule schedule;
    std::erase_if(waiting, [&](const WaitingThread& w) { return w.cpu_ns < 2 * period_ns; });
    if (waiting.empty()) return schedule;
    std::stable_sort(waiting.begin(), waiting.end(),
                     [](const WaitingThread& a, const WaitingThread& b) { return a.cpu_ns > b.cpu_ns; });
    for (const WaitingThread& w : waiting) schedule.to_open.push_back(w.tid);
    std::erase_if(holders, [&](const RingHolder& h) { return !h.takeable || h.idle_windows == 0 || h.cpu_ns >= period_ns; });
    std::stable_sort(holders.begin(), holders.end(), [](const RingHolder& a, const RingHolder& b) {
        return a.idle_windows != b.idle_windows ? a.idle_windows > b.idle_windows : a.cpu_ns < b.cpu_ns;
    });
    for (const RingHolder& h : holders) schedule.to_take.push_back(h.key);
    return schedule;
}

}  // namespace sf::agent
