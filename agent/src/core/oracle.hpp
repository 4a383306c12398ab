// The timer sampler: a POSIX timer on each Java thread's CPU clock sends SIGPROF to that thread;
// the handler copies the same registers and stack fragment perf would. It serves two uses, per
// thread and possibly both from one snapshot: the validate oracle (it also calls AsyncGetCallTrace
// at that instant, so the decoder's answer for the fragment can be checked against the JVM's own)
// and the signal backend (plain Sample events, source kSignal, where perf_event_open is denied).
// The handler is async-signal-safe: it takes a preallocated buffer entry through lock-free queues,
// never allocates or locks, and copies the stack without ever faulting.
#pragma once

#include <jni.h>
#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include <boost/lockfree/queue.hpp>

#include "stackfrag/base/result.hpp"
#include "stackfrag/events/events.hpp"

namespace sf::agent {

// HotSpot's AsyncGetCallTrace ABI (exported by libjvm.so, declared by no public header).
struct AsgctFrame {
    jint lineno;          // the bci for Java frames
    jmethodID method_id;
};
struct AsgctTrace {
    JNIEnv* env_id;
    jint num_frames;      // > 0: frames filled; <= 0: an error code
    AsgctFrame* frames;
};
using AsgctFunction = void (*)(AsgctTrace* trace, jint depth, void* ucontext);

// What a thread's timer ticks become (a bit set, see OracleSampler::add_thread).
enum TimerUse : uint8_t {
    kUseOracle = 1,   // Oracle events: the fragment and AsyncGetCallTrace's answer (validate)
    kUseSample = 2,   // Sample events with source kSignal: the signal backend's profile
};

struct OracleSettings {
    uint64_t interval_ns = 1'000'000;
    uint32_t stack_bytes = 16384;
    uint32_t max_frames = kOracleMaxFrames; // 0: no room for AsyncGetCallTrace's frames (no oracle use)
    uint32_t buffer_entries = 512;          // taken but not yet drained; beyond: dropped
    // stack=auto: a thread given a larger fragment (set_stack_bytes) is copied with that many bytes,
    // up to large_stack_bytes, into one of large_entries entries of that size; 0: every tick copies
    // stack_bytes.
    uint32_t large_stack_bytes = 0;
    uint32_t large_entries = 0;
    AsgctFunction asgct = nullptr;          // null: samples only, agct_status 0
    JavaVM* vm = nullptr;                   // resolves a thread's JNIEnv when not given
};

struct OracleStats {
    uint64_t taken = 0;
    uint64_t dropped = 0;                   // the buffer was full
    uint64_t cut = 0;                       // a grown thread's tick found no large entry: stack_bytes copied
    uint64_t threads = 0;
};

// A thread's stack as far as it is known: [bottom, top), or top 0 when unknown.
struct StackRange {
    uint64_t bottom = 0;
    uint64_t top = 0;
};

// Copies up to `size` bytes from `sp` upwards into `out` and returns how many it copied; what the
// handler does. Within a known range, up to its top (memcpy: the thread's own live stack); else
// page by page up to the first unreadable page (process_vm_readv, which reports a bad address
// instead of faulting; 0 if that call is denied too). Async-signal-safe, never faults.
size_t copy_stack_fragment(uint64_t sp, StackRange known, uint8_t* out, size_t size);

class OracleSampler {
public:
    // Allocates the buffer and installs the SIGPROF handler; at most one per process.
    static Result<std::unique_ptr<OracleSampler>> create(const OracleSettings& settings);
    ~OracleSampler();

    // On the thread to sample (ThreadStart, VMInit): records its stack bounds and JNIEnv and
    // starts a timer on its CPU clock. `uses`: kUseOracle and/or kUseSample; a thread already
    // added keeps its timer and gains the uses it lacked.
    Status add_current_thread(JNIEnv* jni, uint8_t uses = kUseOracle);
    // From any thread, for a thread that existed before the agent: its stack top is unknown, so
    // the handler copies until the first unreadable page (as perf does), and its JNIEnv is looked
    // up on first use.
    Status add_thread(pid_t tid, uint8_t uses = kUseOracle);
    // Any thread (stack=auto, when the thread's perf event is reopened): `tid`'s ticks copy `bytes`
    // of stack from now on, at most large_stack_bytes, so that a validate oracle sample holds as
    // much of the stack as the thread's profile samples do. Unknown threads are ignored.
    void set_stack_bytes(pid_t tid, uint32_t bytes);
    // Stops sampling `tid` (ThreadEnd); from any thread.
    void remove_thread(pid_t tid);
    // Stops every timer; the handler stays installed and ignores late signals.
    void stop();

    // Reader thread: moves the taken samples to `out`, oldest first per thread: an Oracle event
    // for each tick of a kUseOracle thread, a Sample for each of a kUseSample thread, and a Lost
    // (tid 0) for the kUseSample ticks dropped since the last drain because the buffer was full.
    size_t drain(std::vector<Event>& out);
    // Reader thread, before drain(): the oldest time stamp of a tick still inside its handler
    // (0: none). Its entry may reach the buffer only after this drain; everything it will hold is
    // at or after this time, so the reader holds back the events from then on.
    uint64_t in_flight_since() const;
    OracleStats stats() const;

    struct ThreadSlot;
    struct Buffer;

private:
    explicit OracleSampler(const OracleSettings& settings);
    Status start_timer(ThreadSlot& slot, bool on_current_thread);
    Status add_slot(ThreadSlot* slot, bool on_current_thread);

    OracleSettings settings_;
    std::unique_ptr<Buffer> buffer_;
    mutable std::mutex threads_mutex_;
    // The ticking threads. A slot outlives its thread's removal (a signal raised just before
    // timer_delete may still arrive), so ended threads' slots stay in retired_ until the sampler
    // itself goes, which the agent never does; tests destroy it after their threads are gone.
    std::unordered_map<pid_t, ThreadSlot*> threads_;
    std::vector<ThreadSlot*> retired_;
    uint64_t threads_added_ = 0;
    uint64_t samples_dropped_reported_ = 0;   // reader thread
};

}  // namespace sf::agent
