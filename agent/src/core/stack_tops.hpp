// Where each thread's stack ends (its top), by tid: set by a thread that knows its own (its start,
// pthread_getattr_np) or found in /proc/self/maps, read by the reader to cut a fragment at the top.
// Shared by stack=auto's judgement of fragments and the reader of per-CPU rings.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <optional>
#include <unordered_map>

namespace sf::agent {

class StackTops {
public:
    // Any thread: `tid`'s stack ends at `top` (0: looked for, not found), known since `since_ns`
    // (monotonic).
    void remember(uint32_t tid, uint64_t top, uint64_t since_ns);
    // Any thread: `tid` ended at `ended_ns`; its top is dropped only if it was set before then (a
    // new thread with the same tid may have registered before the old one's end was seen).
    void forget(uint32_t tid, uint64_t ended_ns);
    // nullopt: never remembered (or forgotten); 0: looked for, not found.
    std::optional<uint64_t> lookup(uint32_t tid) const;
    // Changes with every remember or forget that changed something; never 0.
    uint64_t generation() const { return generation_.load(std::memory_order_acquire); }

    // One reader's copy of every top, taken again only when the generation moved: a per-CPU ring's
    // samples are of many threads, and a lookup per sample must not take the mutex.
    class Copy {
    public:
        // The top of `tid`'s stack, 0 when unknown.
        uint64_t top_of(const StackTops& tops, uint32_t tid) {
            if (generation_ != tops.generation()) tops.copy_to(*this);
            auto found = tops_.find(tid);
            return found == tops_.end() ? 0 : found->second;
        }

    private:
        friend class StackTops;
        uint64_t generation_ = 0;
        std::unordered_map<uint32_t, uint64_t> tops_;
    };

private:
    void copy_to(Copy& copy) const;

    struct Top {
        uint64_t top = 0;
        uint64_t since_ns = 0;
    };
    mutable std::mutex mutex_;
    std::unordered_map<uint32_t, Top> tops_;
    std::atomic<uint64_t> generation_{1};   // bumped under mutex_
};

}  // namespace sf::agent
