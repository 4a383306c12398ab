// Where everything the agent learns goes: JVMTI callbacks and the ring reader hand events to the
// sink, which forwards them to the recording and (later) the live decoder, in arrival order.
#pragma once

#include "stackfrag/events/events.hpp"

namespace sf::agent {

class EventSink {
public:
    virtual ~EventSink() = default;
    // Thread-safe; called from JVMTI callbacks (any thread) and the reader thread. Never blocks
    // for long: it may drop and count if a bounded buffer is full.
    virtual void emit(Event&& event) = 0;
};

}  // namespace sf::agent
