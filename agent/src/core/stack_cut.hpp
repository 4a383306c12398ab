// Where each thread's fragments can end: just above the highest stack bytes a walk of it to its first
// native frame reads (start_thread), learned by the decoder thread; the reader copies nothing above.
// Java threads, whose walks end at their first entry frame, get the same cut from their stack's top.
#pragma once

#include <cstdint>
#include <optional>
#include <unordered_map>
#include <vector>

#include "stackfrag/decoder/call_trace.hpp"

namespace sf::agent {

// Pure policy, on the decoder thread: what a thread's top for the reader's cut becomes.
//
// A walk that reached the thread's first native frame read nothing above it, and nothing ever
// runs above that frame while the thread lives: the thread descriptor, TLS and whatever mapping
// follows (the kernel copies into the next thread's stack when their mappings merged) need not
// be copied. A Java thread's walks end lower, at its first entry frame, but it runs VM code above
// that frame at its start and end (JavaThread::exit): its cut comes instead from its own stack
// top (pthread_getattr_np) less the distance every glibc thread of the process has between its
// stack block's end and its first frame, once two threads with such a top have shown the same
// distance. A thread whose walks then fail or run off at the cut gets its stack back, for good.
class StackCutLearner {
public:
    // Bytes left above the highest byte a walk read.
    static constexpr uint64_t kSlackBytes = 256;
    // A cut that saves less than this per sample is not worth a change of the shared tops.
    static constexpr uint64_t kMinGainBytes = 1024;
    // Two threads' distances from the top to the first frame agree within this (alignment).
    static constexpr uint64_t kGapAgreement = 64;

    struct Walk {
        uint64_t needed_end = 0;       // Decoder::needed_end (0: unknown)
        bool to_first_native = false;  // the walk's outermost frame is native (not a Java thread's entry)
    };
    // Whether on_complete needs the thread's tops (first sight of the thread).
    bool wants_top(uint32_t tid) const { return threads_.find(tid) == threads_.end(); }
    // `tid`'s walk was complete. `top`: its top as the shared tops have it (0: unknown), `exact_top`
    // its top if the thread registered it itself (0 otherwise); both only looked at when wants_top.
    // Returns the new top to publish, if any.
    std::optional<uint64_t> on_complete(uint32_t tid, const Walk& walk, uint64_t top, uint64_t exact_top);
    // Whether a walk can fail for this reason when bytes above the fragment's end are missing (a
    // frame's sp past it, unwind rules reading there, an entry or interpreter frame cut in two).
    // Every fragment of a cut thread ends at the cut: other failures (a stale return address, an
    // unknown method) say nothing about it.
    static bool from_missing_bytes(FailReason reason);
    // `tid`'s walk did not complete with a fragment that ended at `fragment_end`: when that was the
    // cut, returns the top to publish instead (the one known before the cut; 0: none).
    std::optional<uint64_t> on_ran_off(uint32_t tid, uint64_t fragment_end);
    // The thread ended. Returns whether a cut of it was published (to be taken back).
    bool forget(uint32_t tid);

    // The distance from a glibc thread's stack top to the end of its first frame's bytes, once known.
    std::optional<uint64_t> gap() const { return gap_; }
    uint64_t threads_cut() const { return cut_; }
    uint64_t threads_given_back() const { return given_back_; }

private:
    struct Thread {
        uint64_t top_before = 0;   // as the shared tops had it before the cut (0: unknown)
        uint64_t exact_top = 0;    // as the thread registered it (0: it did not)
        uint64_t cut = 0;          // 0: none
        bool gap_seen = false;     // its distance is among gaps_
        bool given_back = false;   // its walks did not complete at the cut: no more cuts
    };
    std::optional<uint64_t> publish(Thread& t, uint64_t wanted);
    void observe_gap(uint64_t gap);
    std::unordered_map<uint32_t, Thread> threads_;
    std::vector<uint64_t> gaps_;   // a few threads' distances, until two agree
    std::optional<uint64_t> gap_;
    uint64_t cut_ = 0;
    uint64_t given_back_ = 0;
};

}  // namespace sf::agent
