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
    // (monotonic). `exact`: the thread said so itself (pthread_getattr_np: its stack block's end),
    // not a mapping's end (which may hold the next thread's stack too) nor a cut.
    void remember(uint32_t tid, uint64_t top, uint64_t since_ns, bool exact = false);
    // Any thread: `tid` ended at `ended_ns`; its top is dropped only if it was set before then (a
    // new thread with the same tid may have registered before the old one's end was seen).
    void forget(uint32_t tid, uint64_t ended_ns);
    // nullopt: never remembered (or forgotten); 0: looked for, not found.
    std::optional<uint64_t> lookup(uint32_t tid) const;
    // The top if the thread remembered it itself (see remember), else 0.
    uint64_t exact_top(uint32_t tid) const;
    // Changes with every remember or forget that changed something; never 0.
    uint64_t generation() const { return generation_.load(std::memory_order_acquire); }

    // One reader's copy of every top: a per-CPU ring's samples are of many threads, and a lookup
    // per sample must not take the mutex. Taken again by refresh() when the generation moved, which
    // the reader calls once per drain of a ring, so that a server starting and ending threads by
    // the thousand costs it one copy per cycle, not one per sample. Until then a new thread's
    // samples are left whole, and an ended one's top still applies to its tid: a later thread of
    // the tid runs on the same stack block (glibc reuses them) or far from it (no cut applies).
    class Copy {
    public:
        void refresh(const StackTops& tops) {
            if (generation_ != tops.generation()) tops.copy_to(*this);
        }
        // The top of `tid`'s stack as of the last refresh, 0 when unknown.
        uint64_t top_of(uint32_t tid) const {
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
        bool exact = false;
    };
    mutable std::mutex mutex_;
    std::unordered_map<uint32_t, Top> tops_;
    std::atomic<uint64_t> generation_{1};   // bumped under mutex_
};

}  // namespace sf::agent
