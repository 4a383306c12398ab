// stack=auto: chooses each thread's fragment size from how its samples decoded. A pure class (no
// clock, no threads): decoded samples in, size changes out; the Sampler reopens the thread's event.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <unordered_map>

#include "stackfrag/decoder/call_trace.hpp"

namespace sf::agent {

struct StackControllerSettings {
    uint32_t base_bytes = 16384;   // every thread starts here and returns here
    uint32_t max_bytes = 65528;    // the largest stack= perf takes
    // What perf copies at most when asked for max_bytes: a sample record's size is 16 bits, so with
    // our registers the fragment is cut to 65416 bytes.
    uint32_t largest_fragment = 65416;
    // A larger fragment is kept this many samples without an incomplete one, then halved as a
    // trial (stitching usually completes the traces of a stack that stays deep). A trial that
    // fails soon, within twice that, doubles the thread's wait before the next one, up to
    // max_quiet_samples.
    uint32_t quiet_samples = 1000;
    uint32_t max_quiet_samples = 64000;
};

struct StackChange {
    uint32_t tid = 0;
    uint32_t old_bytes = 0;
    uint32_t new_bytes = 0;
    const char* why = "";
};

class StackController {
public:
    explicit StackController(StackControllerSettings settings);

    // One decoded profile sample of `tid` whose fragment held `fragment_bytes`. Returns the change
    // when the thread's fragment size should change. Incomplete samples with a fragment smaller
    // than the thread's current size were taken before its last change and are not counted.
    std::optional<StackChange> on_sample(uint32_t tid, TraceStatus status, size_t fragment_bytes);
    // The thread ended.
    void forget(uint32_t tid) { threads_.erase(tid); }
    // The thread's current fragment size (base_bytes for a thread never changed).
    uint32_t bytes_of(uint32_t tid) const;
    const StackControllerSettings& settings() const { return settings_; }

private:
    struct Thread {
        uint32_t bytes = 0;
        uint32_t before_shrink = 0;   // the size the last trial shrank from (0: the last change grew)
        uint64_t quiet = 0;           // samples since the last change or incomplete sample
        uint32_t quiet_needed = 0;
    };
    uint32_t smaller(uint32_t bytes) const;

    StackControllerSettings settings_;
    std::unordered_map<uint32_t, Thread> threads_;   // threads whose size changed at least once
};

}  // namespace sf::agent
