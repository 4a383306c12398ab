// Incremental decoding: what one walk did, step by step, kept per thread so that the walk of the
// thread's next snapshot can take over the steps whose every input is unchanged (the callers below
// the running code rarely change between two samples) instead of examining those frames again.
#pragma once

#include <cstdint>
#include <algorithm>
#include <cstddef>
#include <utility>
#include <vector>

#include "stack_view.hpp"
#include "stackfrag/decoder/call_trace.hpp"
#include "stackfrag/decoder/code_map.hpp"

namespace sf::detail {

// Everything a step of the walk depends on besides the stack bytes it reads, the code map and the
// sample's time. The top frame's registers are not in it: the top step is never taken over.
struct WalkState {
    uint64_t pc = 0, sp = 0, fp = 0;
    uint64_t native_run_sp = 0;
    uint32_t count = 0;              // frames found before the step
    uint32_t native_run_first = 0;   // frame index where the current run of native frames began
    uint32_t native_frames = 0;      // native frames walked so far
    uint8_t flags = 0;               // Walk's booleans, one bit each
    uint64_t context = 0;            // an interrupted frame's: where its signal's saved registers lie

    bool operator==(const WalkState&) const = default;
};

// WalkState::flags bit for "inside a run of native frames": the run's start is then part of the state.
inline constexpr uint8_t kInNativeRunFlag = 16;

// One step: the state it started from, everything it asked of the stack view, and what it did.
struct StepRecord {
    WalkState at;
    ViewAccess access;
    uint32_t bytes_offset = 0;          // the bytes read, [access.read_lo, access.read_hi), in WalkJournal::bytes
    uint32_t count_after = 0;           // frames found after the step: it wrote frames [at.count, count_after)
    uint32_t peak_count = 0;            // the highest frame count compared with DecoderOptions::max_frames
    uint32_t native_frames_after = 0;
    uint32_t counters = 0;              // the DecodeStats counters the step bumped, once each, one bit each
    bool reusable = false;              // false: it also asked where the fragment ends, or was not kept whole
    bool consults_flags = false;        // it read the flags that say how the walk got here (see decoder.cpp)
    bool consults_run = false;          // it read where the current run of native frames began (a rescan)
    bool stopped = false;               // the walk ended with this step, with status and failure:
    TraceStatus status = TraceStatus::kFailed;
    FailReason failure = FailReason::kNone;
    CodeMap::LookupKeys lookups;        // what it asked the code map (pc pages, Method*s)
};

// A vector whose first elements can be replaced by more or fewer without moving the rest: it keeps
// unused room in front. A thread's journal keeps its outer steps and frames from one sample to the
// next while the steps at the top change in number; moving the kept ones (160 bytes a step) each
// time the depth changed cost more than the rest of the splice.
template <class T>
class FrontGapVector {
public:
    size_t size() const { return buf_.size() - head_; }
    bool empty() const { return size() == 0; }
    T& operator[](size_t i) { return buf_[head_ + i]; }
    const T& operator[](size_t i) const { return buf_[head_ + i]; }
    T* begin() { return buf_.data() + head_; }
    T* end() { return buf_.data() + buf_.size(); }
    const T* begin() const { return buf_.data() + head_; }
    const T* end() const { return buf_.data() + buf_.size(); }
    T& back() { return buf_.back(); }
    const T& back() const { return buf_.back(); }
    void clear() {
        buf_.clear();
        head_ = 0;
    }
    void resize(size_t n) { buf_.resize(head_ + n); }
    template <class... Args>
    T& emplace_back(Args&&... args) {
        return buf_.emplace_back(std::forward<Args>(args)...);
    }
    // Makes the first `old_front` elements `new_front` ones, the others staying as they are, in order,
    // after them. The new front elements hold whatever was there (the caller assigns every one).
    void replace_front(size_t old_front, size_t new_front) {
        if (new_front <= old_front) {
            head_ += old_front - new_front;
            if (head_ > kMaxRoom && head_ > size()) {   // bounded: give back room a shrunk stack left
                const size_t n = size();
                std::move(buf_.begin() + static_cast<std::ptrdiff_t>(head_), buf_.end(),
                          buf_.begin() + static_cast<std::ptrdiff_t>(kSlack));
                buf_.resize(kSlack + n);
                head_ = kSlack;
            }
            return;
        }
        const size_t grow = new_front - old_front;
        if (head_ < grow) {   // room for this and some more growth later
            const size_t shift = grow - head_ + kSlack;
            const size_t old_size = buf_.size();
            buf_.resize(old_size + shift);
            std::move_backward(buf_.begin() + static_cast<std::ptrdiff_t>(head_),
                               buf_.begin() + static_cast<std::ptrdiff_t>(old_size), buf_.end());
            head_ += shift;
        }
        head_ -= grow;
    }
    // Room in front now, for tests.
    size_t front_room() const { return head_; }

private:
    static constexpr size_t kSlack = 8;
    static constexpr size_t kMaxRoom = 64;
    std::vector<T> buf_;
    size_t head_ = 0;
};

// One walk of one snapshot. Valid for another snapshot of the thread when the map answers every
// step's lookups as it did: at the same CodeMap epoch, or at a later one whose changes since touch
// none of the steps' lookups (CodeMap::changes_since); and for a sample time that the map of then
// answered alike (both after its time horizon, or equal).
struct WalkJournal {
    bool valid = false;
    uint64_t epoch = 0;
    uint64_t horizon = 0;   // the map's time_horizon() at `epoch`
    uint64_t time_ns = 0;
    // Whether the walk's fragment counted as full: a step that ran off its end stopped incomplete
    // if so and failed if not, so it is taken over only by a walk that counts its own alike.
    bool fragment_full = true;
    FrontGapVector<StepRecord> steps;   // the steps after the top one, in walk order (sp increasing)
    std::vector<uint8_t> bytes;      // the stack bytes each step read
    FrontGapVector<Frame> frames;       // the trace the walk produced

    // Bounds on what one thread's journal holds: a 16 KB fragment has at most 1024 frames of two
    // words; steps beyond these limits are walked every time.
    static constexpr size_t kMaxSteps = 1024;
    static constexpr size_t kMaxBytes = 64 * 1024;
    // A step that read more (a scan for a return address or a breadcrumb) is kept as a state only:
    // copying its bytes would cost more than walking it again, and they rarely stay equal.
    static constexpr size_t kMaxStepBytes = 1024;

    void start() {
        valid = false;
        steps.clear();
        bytes.clear();
    }
};

template <class To>
void copy_frames(To& to, const std::vector<Frame>& from) {
    to.resize(from.size());
    for (size_t i = 0; i < from.size(); ++i) to[i] = from[i];
}

// A walk that took over the rest of the last walk from step `from` on, its frame indices shifted by
// `delta` and its native frame count by `native_delta`.
struct Splice {
    size_t from = 0;
    int64_t delta = 0;
    int64_t native_delta = 0;
    uint8_t sticky_diff = 0;   // flags that last the walk and differ between the two walks
    uint8_t first_flags = 0;   // this walk's flags where it took over
    // Where the run of native frames the walk was in when it took over began, when that differs from
    // the last walk's: the steps taken over that stay in the run start from this one.
    bool run_diff = false;
    uint64_t run_sp = 0;
    uint32_t run_first = 0;
};

// Makes `last` the journal of a walk that consists of the steps in `top` followed by last's own steps
// from splice.from on, whose trace is `frames`. In place: the steps taken over are neither copied nor
// re-recorded, only moved when the top has another number of steps. `top` is left as scratch.
void splice_journal(WalkJournal& last, WalkJournal& top, const Splice& splice, const std::vector<Frame>& frames);

// The last walk of a thread, and the buffer the next one is written to (swapped after each decode,
// so a steady state allocates nothing).
struct ThreadJournals {
    WalkJournal last;
    WalkJournal next;
    // The sp of the outermost frame of the thread's last complete walk (0: none yet), kept with or
    // without incremental decoding: a later fragment that ends below it is short of frames the
    // thread still has (Decoder::decode).
    uint64_t outermost_sp = 0;
};

}  // namespace sf::detail
