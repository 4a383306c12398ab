// stack=auto: chooses each thread's fragment size from how its samples decoded (or, with no decoder,
// from where their fragments end). Pure: samples in, size changes out; the Sampler reopens the event.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "stackfrag/decoder/call_trace.hpp"
#include "stackfrag/events/events.hpp"

namespace sf::agent {

struct StackControllerSettings {
    uint32_t base_bytes = 16384;   // every thread starts here and returns here
    uint32_t max_bytes = 65528;    // the largest stack= perf takes
    // What perf copies at most when asked for max_bytes (the record's size is 16 bits).
    uint32_t largest_fragment = kLargestPerfFragment;
    // A larger fragment is kept this many samples without an incomplete one, then halved as a
    // trial (stitching usually completes the traces of a stack that stays deep). A trial that
    // fails soon, within twice that, doubles the thread's wait before the next one, up to
    // max_quiet_samples. Once samples ran off a size above the base, the thread tries that size
    // or a smaller one again only when its quiet samples would all have fit there: a stack whose
    // depth varies from call to call cannot be stitched, and each trial cut its deepest samples.
    uint32_t quiet_samples = 1000;
    uint32_t max_quiet_samples = 64000;
    // Without a decoder (record= only): a fragment ending within this many bytes below the
    // thread's stack top may still reach its outermost Java frame (fragment_short_of_outermost).
    // The walk ends at the thread's first entry frame, below what lies at the top: glibc's thread
    // descriptor and static TLS, the start routine's and JavaThread::run's frames, HotSpot's random
    // alloca of up to 896 bytes in thread_native_entry, JavaCalls' frames and the entry frame itself.
    // Measured with the live decoder's verdicts (16 KB fragments, a thread sweeping its depth):
    // samples complete up to 5216 bytes and run off from 5264-5312 on for Thread.start threads,
    // 5376 / 5424-5472 for the main thread, JDK 17 and 25 alike. 4096 stays below every such
    // thread's margin: a thread within about 1 KB of the limit may grow without need (a cost),
    // but none whose samples run off is missed (incomplete traces).
    uint32_t entry_margin_bytes = 4096;
    // In a family of more than StackController::kEagerFamilyMembers threads, a thread counts as
    // running (it grows with its family) from this many samples on: a thread's own start (the
    // JVM's setup, the agent's callbacks, ~0.1-0.3 ms of CPU) gives an idle one of a pool a sample
    // or two at 10 kHz. The agent asks for 2 ms of CPU time at the interval.
    uint32_t active_samples = 2;
    // A thread whose samples all kept at most this many bytes less shallow_slack_bytes (the stack
    // up to its top, or to where the walks stop reading) for quiet_samples in a row tries this
    // smaller size (0: never below base_bytes): the kernel copies the whole fragment from sp at
    // every sample, whatever lies above the top, so a shallow thread paid for 16 KB to use 6.
    // The trial backs off as the larger sizes' trials do.
    uint32_t small_bytes = 0;
    uint32_t shallow_slack_bytes = 512;
};

// The decode-free signal (stack=auto with only record=): a walk over a fragment that ends more than
// `entry_margin` bytes below the thread's stack top (the highest address of its stack) cannot reach
// the thread's outermost Java frame (the entry frame JavaCalls puts below the thread's start
// routine), so it comes out incomplete (or stitched). A fragment ending within the margin may
// still reach it. An unknown top (0) or a top below the fragment says nothing: false.
bool fragment_short_of_outermost(uint64_t sp, size_t fragment_bytes, uint64_t stack_top, uint32_t entry_margin);

// A thread pool's threads run the same code, so one of them running off its fragment says its
// siblings will: the family of a thread's name is the name without its trailing digits
// ("http-worker-12" -> "http-worker-"). Empty (no family) for a name without trailing digits and
// for "Thread-N", the JDK's name for threads created without one, which says nothing of what they run.
std::string thread_family(std::string_view name);

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
    // A thread that started (or was found) is sampled now; `family` from thread_family (empty:
    // none). If a thread of that family has run off its fragment and none has settled back at the
    // base since, the new thread starts at the largest size (the returned change) when the family
    // has at most kEagerFamilyMembers threads; in a larger one it grows once it runs (on_sample's
    // change at its active_samples-th sample): a pool of thousands of threads of which a few run
    // would otherwise pin four times the ring memory for its idle ones.
    std::optional<StackChange> on_thread_started(uint32_t tid, const std::string& family);
    static constexpr uint32_t kEagerFamilyMembers = 256;
    // `tid` starts at the largest size (its first samples would run off, see AutoStack::
    // thread_started); nullopt if it is tracked already or the base is the largest size.
    std::optional<StackChange> start_large(uint32_t tid, const char* why);
    // The size a thread not tracked yet would start at, by on_thread_started with `family` (as its
    // next member) or, if `large`, by start_large: max_bytes or base_bytes. Changes nothing.
    uint32_t start_bytes(const std::string& family, bool large) const;
    // The changes the last on_sample implied for other threads: when a thread's fragment grows
    // from the base, its family's threads still at the base grow with it (each once per episode of
    // the family: until one of them has stayed at the base as long as an episode's end asks); in a
    // family of more than kEagerFamilyMembers only those that run (active_samples since they
    // started), the others once they do.
    std::vector<StackChange> take_family_changes() { return std::exchange(family_changes_, {}); }
    // The thread ended.
    void forget(uint32_t tid);
    // Whether the thread's size was changed and its episode is not over (see on_sample).
    bool tracks(uint32_t tid) const { return threads_.count(tid) != 0; }
    // The thread's current fragment size (base_bytes for a thread never changed).
    uint32_t bytes_of(uint32_t tid) const;
    const StackControllerSettings& settings() const { return settings_; }
    // Changes whenever tracks() or bytes_of() may answer differently for some thread (from 1 on).
    uint64_t generation() const { return generation_; }

private:
    struct Thread {
        uint32_t bytes = 0;
        uint32_t before_shrink = 0;   // the size the last trial shrank from (0: the last change grew)
        uint64_t quiet = 0;           // samples since the last change or incomplete sample
        uint32_t quiet_needed = 0;
        uint32_t max_kept = 0;        // the most bytes a quiet sample kept (less than `bytes`: cut at its top)
        // The largest size above the base its samples ran off (a failed trial, or a deeper phase
        // later): a trial at or below it needs quiet samples that would all have fit (0: none).
        uint32_t ran_off_at = 0;
    };
    // A thread at the base, not tracked: its samples in a row that would have fit small_bytes, and
    // how many it takes (quiet_samples, doubled by each small trial that failed soon).
    struct Shallow {
        uint64_t quiet = 0;
        uint32_t quiet_needed = 0;
    };
    bool has_small() const { return settings_.small_bytes != 0 && settings_.small_bytes < settings_.base_bytes; }
    Shallow& shallow_of(uint32_t tid);
    std::optional<StackChange> judge_shallow(uint32_t tid, TraceStatus status, size_t fragment_bytes);
    uint32_t smaller(uint32_t bytes) const;
    Thread& track(uint32_t tid, uint32_t bytes);
    // `tid` grew from the base: its family runs deep, and its siblings at the base grow.
    void family_ran_off(uint32_t tid);

    StackControllerSettings settings_;
    std::unordered_map<uint32_t, Thread> threads_;   // threads whose size changed at least once
    std::unordered_map<uint32_t, Shallow> shallow_;  // with small_bytes: threads at the base
    struct Member {
        std::string family;
        uint32_t samples = 0;   // seen by on_sample since it started, up to active_samples
    };
    std::unordered_map<uint32_t, Member> family_of_;   // started threads with a family
    std::unordered_map<std::string, bool> family_deep_;      // families seen running off; false: settled since
    std::unordered_map<std::string, uint32_t> family_members_;   // threads in family_of_ per family
    // At most kEagerFamilyMembers threads, with `joining` more.
    bool eager(const std::string& family, uint32_t joining = 0) const;
    void leave_family(uint32_t tid);
    std::vector<StackChange> family_changes_;
    uint64_t generation_ = 1;
};

}  // namespace sf::agent
