// stack=auto in the agent: the live profile's decoder thread shows it every decoded sample; it asks
// the StackController for each thread's fragment size, has the reader reopen the thread's events
// with it, and logs each change.
#pragma once

#include <cstdint>

#include "stack_controller.hpp"
#include "stackfrag/decoder/call_trace.hpp"
#include "stackfrag/events/events.hpp"

namespace sf::agent {

class Sampler;

class AutoStack {
public:
    // `sampler` outlives this object.
    AutoStack(StackControllerSettings settings, Sampler& sampler);

    // The decoder thread, for every decoded trace; acts on the profile's Samples (on- and off-CPU).
    void on_trace(const Event& event, const CallTrace& trace);
    // The decoder thread, when the stream says a thread ended (its tid may come back).
    void on_thread_end(uint32_t tid) { controller_.forget(tid); }

    uint64_t grown() const { return grown_; }
    uint64_t shrunk() const { return shrunk_; }

private:
    StackController controller_;
    Sampler& sampler_;
    uint64_t grown_ = 0;
    uint64_t shrunk_ = 0;
};

}  // namespace sf::agent
