// Puts the events of the reader's sources (rings, oracle buffer, callback queue) into time order
// before they are written: each source is in order on its own, but a sample drained from a ring
// may be older than a CodeUnload already queued, and the decoder must see the code map as it was
// at the sample's time. Events are held back a little (the horizon) so that late arrivals of the
// same instant still sort in.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "stackfrag/events/events.hpp"

namespace sf::agent {

class ReorderBuffer {
public:
    // `arrival_ns` orders events that carry no time of their own (time 0).
    void add(Event&& event, uint64_t arrival_ns) {
        const uint64_t time = time_of(event);
        held_.push_back(Held{time != 0 ? time : arrival_ns, next_sequence_++, std::move(event)});
    }

    // Passes every held event with time <= horizon to `out`, oldest first (ties keep arrival order).
    template <class Out>
    void release_until(uint64_t horizon, Out&& out) {
        // What stayed held after the last release is still in order: sort only the events added
        // since and merge, rather than re-sorting everything on every pass of the reader.
        const auto earlier = [](const Held& a, const Held& b) {
            return a.time != b.time ? a.time < b.time : a.sequence < b.sequence;
        };
        const auto unsorted = held_.begin() + static_cast<std::ptrdiff_t>(sorted_count_);
        std::sort(unsorted, held_.end(), earlier);
        std::inplace_merge(held_.begin(), unsorted, held_.end(), earlier);
        size_t released = 0;
        while (released < held_.size() && held_[released].time <= horizon) {
            out(held_[released].event);
            ++released;
        }
        held_.erase(held_.begin(), held_.begin() + static_cast<std::ptrdiff_t>(released));
        sorted_count_ = held_.size();
    }

    template <class Out>
    void release_all(Out&& out) {
        release_until(UINT64_MAX, out);
    }

    size_t size() const { return held_.size(); }

private:
    struct Held {
        uint64_t time;
        uint64_t sequence;
        Event event;
    };
    std::vector<Held> held_;
    size_t sorted_count_ = 0;   // held_[0, sorted_count_) is in release order
    uint64_t next_sequence_ = 0;
};

}  // namespace sf::agent
