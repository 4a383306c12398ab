// Puts the events of the reader's sources (rings, oracle buffer, callback queue) into time order
// before they are written: each source is in order on its own, but a sample drained from a ring
// may be older than a CodeUnload already queued, and the decoder must see the code map as it was
// at the sample's time. Events are held back a little (the horizon) so that late arrivals of the
// same instant still sort in.
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "stackfrag/events/events.hpp"

namespace sf::agent {

class ReorderBuffer {
public:
    // `arrival_ns` orders events that carry no time of their own (time 0).
    void add(Event&& event, uint64_t arrival_ns) {
        const uint64_t time = time_of(event);
        const uint32_t slot = store(slots_, free_, std::move(event));
        keys_.push_back(Key{time != 0 ? time : arrival_ns, next_sequence_++, slot});
    }

    // An event as its producer allocated it (EventQueue::drain_owned): held and passed on as it
    // is, never moved.
    void add_owned(std::unique_ptr<Event> event, uint64_t arrival_ns) {
        const uint64_t time = time_of(*event);
        const uint32_t index = store(boxed_, free_boxed_, std::move(event));
        keys_.push_back(Key{time != 0 ? time : arrival_ns, next_sequence_++, index | kBoxed});
    }

    // A sample at `time_ns` (not 0), filled in place by the caller before the next call: add()'s
    // moves of a Sample into and out of a temporary Event cost the reader per sample.
    Sample& add_sample(uint64_t time_ns, uint64_t arrival_ns) {
        uint32_t slot = 0;
        if (!free_.empty()) {
            slot = free_.back();
            free_.pop_back();
        } else {
            slot = static_cast<uint32_t>(slots_.size());
            slots_.emplace_back();
        }
        keys_.push_back(Key{time_ns != 0 ? time_ns : arrival_ns, next_sequence_++, slot});
        return slots_[slot].emplace<Sample>();
    }

    // Passes every held event with time <= horizon to `out` (an Event&; one added by add_owned
    // goes to `out_owned`, a std::unique_ptr<Event>&&, instead), oldest first (ties keep arrival order).
    // Only the small keys are sorted and shifted; an event stays in its slot from add() until it
    // is passed on (events that wait across passes were moved on every pass when held by value,
    // a visible share of the reader's time with a 20 ms hold-back).
    template <class Out, class OutOwned>
    void release_until(uint64_t horizon, Out&& out, OutOwned&& out_owned) {
        // What stayed held after the last release is still in order: sort only the keys added
        // since and merge, rather than re-sorting everything on every pass of the reader.
        const auto earlier = [](const Key& a, const Key& b) {
            return a.time != b.time ? a.time < b.time : a.sequence < b.sequence;
        };
        const auto unsorted = keys_.begin() + static_cast<std::ptrdiff_t>(sorted_count_);
        std::sort(unsorted, keys_.end(), earlier);
        std::inplace_merge(keys_.begin(), unsorted, keys_.end(), earlier);
        size_t released = 0;
        // The slots go out in time order, not in slot order, and a slot was last touched when its
        // event came in (a cycle or two ago, cold since): asked for two events ahead, each slot's
        // miss overlaps with the work on the ones before it.
        for (size_t ahead = 0; ahead < 2 && ahead < keys_.size(); ++ahead) prefetch_slot(keys_[ahead].slot);
        while (released < keys_.size() && keys_[released].time <= horizon) {
            if (released + 2 < keys_.size()) prefetch_slot(keys_[released + 2].slot);
            const uint32_t slot = keys_[released].slot;
            if ((slot & kBoxed) != 0) {
                const uint32_t index = slot & ~kBoxed;
                out_owned(std::move(boxed_[index]));
                free_boxed_.push_back(index);
            } else {
                out(slots_[slot]);
                free_.push_back(slot);
            }
            ++released;
        }
        keys_.erase(keys_.begin(), keys_.begin() + static_cast<std::ptrdiff_t>(released));
        sorted_count_ = keys_.size();
        if (keys_.empty()) {
            // Nothing held: give back the slots' memory (moved-from events hold none of note).
            slots_.clear();
            free_.clear();
            boxed_.clear();
            free_boxed_.clear();
        }
    }

    // As above, an owned event passed to `out` before it is freed.
    template <class Out>
    void release_until(uint64_t horizon, Out&& out) {
        release_until(horizon, out, [&out](std::unique_ptr<Event>&& event) {
            out(*event);
            event.reset();
        });
    }

    template <class Out>
    void release_all(Out&& out) {
        release_until(UINT64_MAX, out);
    }
    template <class Out, class OutOwned>
    void release_all(Out&& out, OutOwned&& out_owned) {
        release_until(UINT64_MAX, out, out_owned);
    }

    size_t size() const { return keys_.size(); }

private:
    // Into a free slot of `slots` if there is one, else a new one; returns its index.
    template <class T>
    static uint32_t store(std::vector<T>& slots, std::vector<uint32_t>& free, T&& value) {
        if (free.empty()) {
            slots.push_back(std::move(value));
            return static_cast<uint32_t>(slots.size() - 1);
        }
        const uint32_t slot = free.back();
        free.pop_back();
        slots[slot] = std::move(value);
        return slot;
    }
    void prefetch_slot(uint32_t slot) const {
        const char* at = (slot & kBoxed) != 0 ? reinterpret_cast<const char*>(boxed_[slot & ~kBoxed].get())
                                              : reinterpret_cast<const char*>(&slots_[slot]);
        __builtin_prefetch(at);
        __builtin_prefetch(at + 64);
    }
    struct Key {
        uint64_t time;
        uint64_t sequence;
        uint32_t slot;   // index into slots_, or with kBoxed into boxed_
    };
    static constexpr uint32_t kBoxed = 0x8000'0000u;
    std::vector<Key> keys_;
    std::vector<Event> slots_;
    std::vector<uint32_t> free_;
    std::vector<std::unique_ptr<Event>> boxed_;   // add_owned's events
    std::vector<uint32_t> free_boxed_;
    size_t sorted_count_ = 0;   // keys_[0, sorted_count_) is in release order
    uint64_t next_sequence_ = 0;
};

}  // namespace sf::agent
