#include "event_queue.hpp"

#include <new>

#include "stackfrag/base/clock.hpp"

namespace sf::agent {

EventQueue::EventQueue(size_t max_pending) : queue_(1024), max_pending_(max_pending) {}

EventQueue::~EventQueue() {
    Event* event = nullptr;
    while (queue_.pop(event)) delete event;
}

void EventQueue::emit(Event&& event) {
    if (closed_.load(std::memory_order_acquire)) {
        dropped_.fetch_add(1, std::memory_order_relaxed);
        return;
    }
    if (pending_.fetch_add(1, std::memory_order_relaxed) >= max_pending_) {
        pending_.fetch_sub(1, std::memory_order_relaxed);
        dropped_.fetch_add(1, std::memory_order_relaxed);
        return;
    }
    Event* boxed = new (std::nothrow) Event(std::move(event));
    if (boxed == nullptr || !queue_.push(boxed)) {
        delete boxed;
        pending_.fetch_sub(1, std::memory_order_relaxed);
        dropped_.fetch_add(1, std::memory_order_relaxed);
    }
}

EventQueue::InFlight::InFlight(EventQueue& queue) {
    const uint64_t now = monotonic_ns();
    for (auto& slot : queue.in_flight_) {
        uint64_t free = 0;
        if (slot.load(std::memory_order_relaxed) == 0 &&
            slot.compare_exchange_strong(free, now, std::memory_order_seq_cst)) {
            slot_ = &slot;
            return;
        }
    }
}

EventQueue::InFlight::~InFlight() {
    if (slot_ != nullptr) slot_->store(0, std::memory_order_seq_cst);
}

uint64_t EventQueue::oldest_in_flight() const {
    uint64_t oldest = 0;
    for (const auto& slot : in_flight_) {
        const uint64_t since = slot.load(std::memory_order_seq_cst);
        if (since != 0 && (oldest == 0 || since < oldest)) oldest = since;
    }
    return oldest;
}

size_t EventQueue::drain(std::vector<Event>& out) {
    size_t count = 0;
    Event* event = nullptr;
    while (queue_.pop(event)) {
        out.push_back(std::move(*event));
        delete event;
        ++count;
    }
    pending_.fetch_sub(count, std::memory_order_relaxed);
    return count;
}

size_t EventQueue::drain_owned(std::vector<std::unique_ptr<Event>>& out) {
    size_t count = 0;
    Event* event = nullptr;
    while (queue_.pop(event)) {
        std::unique_ptr<Event> owned(event);   // freed here if the vector cannot grow
        out.push_back(std::move(owned));
        ++count;
    }
    pending_.fetch_sub(count, std::memory_order_relaxed);
    return count;
}

}  // namespace sf::agent
