// The many-producers, one-consumer end of the event pipeline: JVMTI callbacks (any thread) emit,
// the reader thread drains. Lock-free, so a callback never waits for the reader.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <vector>

#include <boost/lockfree/queue.hpp>

#include "event_sink.hpp"

namespace sf::agent {

class EventQueue final : public EventSink {
public:
    // Beyond `max_pending` undrained events, emit() drops and counts: memory stays bounded even
    // if the reader stalls.
    explicit EventQueue(size_t max_pending = 4'000'000);
    ~EventQueue() override;

    void emit(Event&& event) override;

    // Moves every queued event to the end of `out`, in the order they were emitted; returns how many.
    size_t drain(std::vector<Event>& out);
    // Later emits are dropped and counted (after shutdown the events have nowhere to go).
    void close() { closed_.store(true, std::memory_order_release); }

    uint64_t dropped() const { return dropped_.load(std::memory_order_relaxed); }
    size_t pending() const { return pending_.load(std::memory_order_relaxed); }

private:
    boost::lockfree::queue<Event*> queue_;
    const size_t max_pending_;
    std::atomic<size_t> pending_{0};
    std::atomic<uint64_t> dropped_{0};
    std::atomic<bool> closed_{false};
};

}  // namespace sf::agent
