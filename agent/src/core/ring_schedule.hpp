// Which threads get ring memory when the kernel will lock no more (mode=thread for a user without
// the privilege to lock more): waiting threads that ran take the rings of ring holders that did not.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <vector>

namespace sf::agent {

// A thread the kernel refused a ring, and its CPU time in the last window.
struct WaitingThread {
    pid_t tid = 0;
    uint64_t cpu_ns = 0;
};

// A thread with a ring: its CPU time in the last window, how many windows in a row it ran less
// than a sampling period, and whether its ring may be taken (open for a whole window at least,
// not one of the profiler's own threads).
struct RingHolder {
    uint64_t key = 0;
    uint64_t cpu_ns = 0;
    uint32_t idle_windows = 0;
    bool takeable = false;
};

struct RingSchedule {
    std::vector<pid_t> to_open;       // waiting threads that ran at least two periods, busiest first
    std::vector<uint64_t> to_take;    // rings of holders that ran less than a period, longest idle first
};

// A waiting thread that ran two periods in the window would have given samples; a holder that ran
// less than one gave none. Nothing moves between threads that both ran: a ring handed back and forth
// would lose each one's samples in turn.
RingSchedule plan_ring_schedule(std::vector<WaitingThread> waiting, std::vector<RingHolder> holders,
                                uint64_t period_ns);

}  // namespace sf::agent
