#include "event_queue.hpp"

#include <new>

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

}  // namespace sf::agent
