// The many-producers, one-consumer end of the event pipeline: JVMTI callbacks (any thread) emit,
// the reader thread drains. Lock-free, so a callback never waits for the reader.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
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
    // The same, handing over each event as the producer allocated it: no move, no free here (the
    // reader's way; each moved copy of a ~200-byte event cost it more than the rest of its work
    // on the event while the JVM loads classes).
    size_t drain_owned(std::vector<std::unique_ptr<Event>>& out);
    // Later emits are dropped and counted (after shutdown the events have nowhere to go).
    void close() { closed_.store(true, std::memory_order_release); }

    uint64_t dropped() const { return dropped_.load(std::memory_order_relaxed); }

    // A producer that stamps its events before it emits them (a JVMTI callback making JVMTI
    // calls in between, the code poll walking the CodeCache) holds one of these meanwhile, so
    // that the reader does not release past its stamps however long it takes (a loaded machine,
    // a sanitizer): the reader asks oldest_in_flight() before each drain. Beyond kInFlightSlots
    // concurrent producers, the others rely on the reader's fixed hold-back alone.
    class InFlight {
    public:
        explicit InFlight(EventQueue& queue);
        ~InFlight();
        InFlight(const InFlight&) = delete;
        InFlight& operator=(const InFlight&) = delete;

    private:
        std::atomic<uint64_t>* slot_ = nullptr;
    };
    // The time the longest-running InFlight began (0: none); every event its holder emits is
    // stamped at or after it.
    uint64_t oldest_in_flight() const;
    size_t pending() const { return pending_.load(std::memory_order_relaxed); }

private:
    boost::lockfree::queue<Event*> queue_;
    const size_t max_pending_;
    std::atomic<size_t> pending_{0};
    std::atomic<uint64_t> dropped_{0};
    std::atomic<bool> closed_{false};
    static constexpr size_t kInFlightSlots = 64;
    std::array<std::atomic<uint64_t>, kInFlightSlots> in_flight_{};
};

}  // namespace sf::agent
