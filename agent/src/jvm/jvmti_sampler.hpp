// mode=jvmti, the safepoint-biased baseline stackfrag is compared with: a JVMTI agent thread takes
// GetAllStackTraces every interval and emits one JvmtiTrace per runnable Java thread into the
// event stream, where the live profile, recordings and replay take them as they take samples.
#pragma once

#include <jvmti.h>
#include <sys/types.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <unordered_map>
#include <unordered_set>

#include "event_sink.hpp"
#include "stackfrag/base/result.hpp"
#include "vm_capture.hpp"

namespace sf::agent {

struct JvmtiSamplerStats {
    uint64_t rounds = 0;           // GetAllStackTraces calls that answered
    uint64_t failed_rounds = 0;    // calls that returned an error (e.g. after VMDeath)
    uint64_t late_rounds = 0;      // rounds that began more than an interval late: the rate was not kept
    uint64_t traces = 0;           // JvmtiTrace events emitted
    uint64_t not_runnable = 0;     // stacks skipped: the thread waited, slept, was blocked or suspended
    uint64_t idle_runnable = 0;    // stacks skipped: runnable to the VM, but no CPU used since the last round
    uint64_t without_java = 0;     // runnable threads without a Java frame (the agent's, the VM's own)
    uint64_t no_tid = 0;           // traces emitted with tid 0: the OS thread id could not be read
    uint64_t in_call_ns = 0;       // time spent inside GetAllStackTraces, safepoint included
    uint64_t thread_cpu_ns = 0;    // the sampler thread's CPU time, once it has ended
};

class JvmtiSampler {
public:
    // The deepest stack asked for; a deeper one becomes a truncated trace of its top frames.
    static constexpr jint kMaxDepth = 2048;
    static constexpr const char* kThreadName = "stackfrag-jvmti-sampler";

    // `sink` and `capture` outlive the sampler (the agent is never destroyed).
    JvmtiSampler(jvmtiEnv* jvmti, EventSink& sink, VmCapture& capture, uint64_t interval_ns);
    JvmtiSampler(const JvmtiSampler&) = delete;
    JvmtiSampler& operator=(const JvmtiSampler&) = delete;

    // Starts the sampler thread (RunAgentThread: a daemon the JVM does not wait for at exit);
    // from a thread attached to the VM, in the live phase.
    Status start(JNIEnv* jni);
    // Asks the thread to end and waits at most `timeout_ms` for it. True when it has ended (or
    // never started): from then on it emits nothing.
    bool stop(int timeout_ms);

    JvmtiSamplerStats stats() const;
    // One line for the log: rounds, traces, what was skipped, the time the calls took.
    std::string describe() const;

private:
    static void JNICALL thread_main(jvmtiEnv* jvmti, JNIEnv* jni, void* self);
    void run(JNIEnv* jni);
    void take_round(JNIEnv* jni);
    void emit_trace(const jvmtiStackInfo& stack, uint32_t tid, uint64_t time_ns, uint64_t announce_ns, JNIEnv* jni);
    bool used_cpu_since_last_round(uint32_t tid);

    jvmtiEnv* const jvmti_;
    EventSink& sink_;
    VmCapture& capture_;
    const uint64_t interval_ns_;

    // Sampler-thread state: jmethodIDs already handed to VmCapture (each costs a guarded read once).
    std::unordered_set<jmethodID> announced_;
    // tid -> the thread's CPU clock at the last round it was runnable in; rebuilt every round, so
    // threads that ended are forgotten.
    std::unordered_map<uint32_t, uint64_t> cpu_at_last_round_;
    std::unordered_map<uint32_t, uint64_t> cpu_this_round_;
    bool error_logged_ = false;

    std::mutex mutex_;
    std::condition_variable wake_;
    bool stop_requested_ = false;
    bool started_ = false;
    bool finished_ = false;

    std::atomic<uint64_t> rounds_{0};
    std::atomic<uint64_t> failed_rounds_{0};
    std::atomic<uint64_t> late_rounds_{0};
    std::atomic<uint64_t> traces_{0};
    std::atomic<uint64_t> not_runnable_{0};
    std::atomic<uint64_t> idle_runnable_{0};
    std::atomic<uint64_t> without_java_{0};
    std::atomic<uint64_t> no_tid_{0};
    std::atomic<uint64_t> in_call_ns_{0};
    std::atomic<uint64_t> thread_cpu_ns_{0};
};

}  // namespace sf::agent
