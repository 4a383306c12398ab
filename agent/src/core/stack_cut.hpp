// Where each thread's fragments can end: just above the highest stack bytes its complete walks read
// (the first entry frame of a Java thread, a native thread's clone3 frame), learned by the decoder thread.
// The reader then copies no thread descriptor, TLS or outer native frames (~5 KB a sample).
#pragma once

#include <cstdint>
#include <optional>
#include <unordered_map>

namespace sf::agent {

// Pure policy, on the decoder thread: what the thread's top for the reader's cut becomes. A
// thread's outermost frames stay where they are while it lives, so one complete walk tells where
// all its later ones stop reading. A thread whose walks then run off at the cut (a native thread
// that calls into Java from different depths) gets its stack back, and keeps it.
class StackCutLearner {
public:
    // Bytes left above the highest byte a walk read: the same walk at the outermost frame reads
    // the same words, but nothing is gained by cutting closer.
    static constexpr uint64_t kSlackBytes = 256;
    // A cut that saves less than this per sample is not worth a change of the shared tops.
    static constexpr uint64_t kMinGainBytes = 1024;

    // `tid`'s walk was complete and read up to `needed_end`; `known_top` is its top as the shared
    // tops have it now (nullopt: not asked, the learner already knows the thread; 0: unknown).
    // Returns the new top to publish, if any. `wants_top` says whether known_top is needed.
    bool wants_top(uint32_t tid) const { return threads_.find(tid) == threads_.end(); }
    std::optional<uint64_t> on_complete(uint32_t tid, uint64_t needed_end, std::optional<uint64_t> known_top);
    // `tid`'s walk ran off a fragment that ended at `fragment_end`: when that was the learned cut,
    // returns the top to publish instead (the one known before the cut; 0: none).
    std::optional<uint64_t> on_ran_off(uint32_t tid, uint64_t fragment_end);
    // The thread ended. Returns whether a cut of it was published (to be taken back).
    bool forget(uint32_t tid) {
        auto found = threads_.find(tid);
        if (found == threads_.end()) return false;
        const bool published = found->second.cut != 0 || found->second.given_back;
        threads_.erase(found);
        return published;
    }

    uint64_t threads_cut() const { return cut_; }
    uint64_t threads_given_back() const { return given_back_; }

private:
    struct Thread {
        uint64_t top_before = 0;   // as the shared tops had it before the cut (0: unknown)
        uint64_t cut = 0;          // 0: none
        bool given_back = false;   // its walks ran off at the cut: no more cuts
    };
    std::unordered_map<uint32_t, Thread> threads_;
    uint64_t cut_ = 0;
    uint64_t given_back_ = 0;
};

}  // namespace sf::agent
