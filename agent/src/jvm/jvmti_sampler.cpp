#include "jvmti_sampler.hpp"

#include <time.h>

#include <chrono>
#include <cstdio>
#include <exception>
#include <optional>
#include <vector>

#include "stackfrag/base/clock.hpp"
#include "log.hpp"
#include "vmstructs.hpp"

namespace sf::agent {

namespace {

// A CPU profile, as the perf path's is: only threads the VM calls runnable (and, below, that used
// CPU time since the previous round: the VM also calls threads runnable that block in native code
// or inside the VM, such as the Reference Handler waiting for work).
bool is_runnable(jint state) {
    return (state & JVMTI_THREAD_STATE_RUNNABLE) != 0 && (state & JVMTI_THREAD_STATE_SUSPENDED) == 0;
}

}  // namespace

JvmtiSampler::JvmtiSampler(jvmtiEnv* jvmti, EventSink& sink, VmCapture& capture, uint64_t interval_ns)
    : jvmti_(jvmti), sink_(sink), capture_(capture), interval_ns_(interval_ns > 0 ? interval_ns : 1) {}

Status JvmtiSampler::start(JNIEnv* jni) {
    jclass thread_class = jni->FindClass("java/lang/Thread");
    jmethodID constructor = thread_class ? jni->GetMethodID(thread_class, "<init>", "(Ljava/lang/String;)V") : nullptr;
    jstring name = jni->NewStringUTF(kThreadName);
    jobject thread = constructor && name ? jni->NewObject(thread_class, constructor, name) : nullptr;
    if (jni->ExceptionCheck()) jni->ExceptionClear();
    Status status;
    if (thread == nullptr) {
        status = make_error(Errc::kResourceLimit, "cannot create the jvmti sampler's Thread object");
    } else {
        {
            std::lock_guard<std::mutex> lock(mutex_);
            started_ = true;
        }
        const jvmtiError error = jvmti_->RunAgentThread(thread, &JvmtiSampler::thread_main, this,
                                                        JVMTI_THREAD_NORM_PRIORITY);
        if (error != JVMTI_ERROR_NONE) {
            std::lock_guard<std::mutex> lock(mutex_);
            started_ = false;
            status = make_error(Errc::kResourceLimit, "RunAgentThread failed with JVMTI error " + std::to_string(error));
        }
    }
    if (thread != nullptr) jni->DeleteLocalRef(thread);
    if (name != nullptr) jni->DeleteLocalRef(name);
    if (thread_class != nullptr) jni->DeleteLocalRef(thread_class);
    return status;
}

void JNICALL JvmtiSampler::thread_main(jvmtiEnv*, JNIEnv* jni, void* self) {
    auto* sampler = static_cast<JvmtiSampler*>(self);
    try {
        sampler->run(jni);
    } catch (const std::exception& e) {   // never into the JVM
        SF_LOG_ERROR("jvmti sampler stopped: %s", e.what());
    } catch (...) {
        SF_LOG_ERROR("jvmti sampler stopped by an unknown error");
    }
    sampler->thread_cpu_ns_.store(thread_cpu_ns());
    std::lock_guard<std::mutex> lock(sampler->mutex_);
    sampler->finished_ = true;
    sampler->wake_.notify_all();
}

void JvmtiSampler::run(JNIEnv* jni) {
    using Clock = std::chrono::steady_clock;   // CLOCK_MONOTONIC, the stream's clock
    const auto interval = std::chrono::nanoseconds(interval_ns_);
    auto next = Clock::now() + interval;
    std::unique_lock<std::mutex> lock(mutex_);
    while (true) {
        wake_.wait_until(lock, next, [this] { return stop_requested_; });
        if (stop_requested_) break;
        lock.unlock();
        take_round(jni);
        lock.lock();
        // A fixed schedule, so the rate does not drift by the time each round takes; when a round
        // overran (a slow safepoint), the next starts one interval from now instead of a burst.
        next += interval;
        const auto now = Clock::now();
        if (next <= now) {
            late_rounds_.fetch_add(1, std::memory_order_relaxed);
            next = now + interval;
        }
    }
}

void JvmtiSampler::take_round(JNIEnv* jni) {
    jvmtiStackInfo* stacks = nullptr;
    jint count = 0;
    const uint64_t begin = monotonic_ns();
    const jvmtiError error = jvmti_->GetAllStackTraces(kMaxDepth, &stacks, &count);
    const uint64_t end = monotonic_ns();
    if (error != JVMTI_ERROR_NONE) {
        failed_rounds_.fetch_add(1, std::memory_order_relaxed);
        if (!error_logged_ && error != JVMTI_ERROR_WRONG_PHASE) {
            error_logged_ = true;
            SF_LOG_WARN("jvmti sampler: GetAllStackTraces failed with JVMTI error %d", static_cast<int>(error));
        }
        return;
    }
    rounds_.fetch_add(1, std::memory_order_relaxed);
    in_call_ns_.fetch_add(end - begin, std::memory_order_relaxed);
    cpu_this_round_.clear();
    for (jint i = 0; i < count; ++i) {
        const jvmtiStackInfo& stack = stacks[i];
        if (!is_runnable(stack.state)) {
            not_runnable_.fetch_add(1, std::memory_order_relaxed);
        } else if (stack.frame_count <= 0) {
            // Agent threads (this one included) run no Java code: they never reach the profile.
            without_java_.fetch_add(1, std::memory_order_relaxed);
        } else {
            Result<pid_t> tid = vm::os_tid_of(jni, stack.thread);
            const uint32_t os_tid = tid.ok() ? static_cast<uint32_t>(*tid) : 0;
            if (os_tid == 0) no_tid_.fetch_add(1, std::memory_order_relaxed);
            if (os_tid != 0 && !used_cpu_since_last_round(os_tid)) {
                idle_runnable_.fetch_add(1, std::memory_order_relaxed);
            } else {
                // The stacks were taken at one safepoint between begin and end; methods the trace
                // needs are announced at `begin`, so the stream names them before the trace's time.
                emit_trace(stack, os_tid, end, begin, jni);
            }
        }
        // Local references of a thread that never returns to Java would pile up: free each one.
        if (stack.thread != nullptr) jni->DeleteLocalRef(stack.thread);
    }
    jvmti_->Deallocate(reinterpret_cast<unsigned char*>(stacks));
    cpu_at_last_round_.swap(cpu_this_round_);
}

bool JvmtiSampler::used_cpu_since_last_round(uint32_t tid) {
    const std::optional<uint64_t> now = thread_cpu_ns_if_alive(static_cast<pid_t>(tid));
    if (!now) return true;   // not measurable: trust the VM's word
    cpu_this_round_[tid] = *now;
    const auto last = cpu_at_last_round_.find(tid);
    // First sight: runnable now and some CPU used in its life is all that is known.
    if (last == cpu_at_last_round_.end()) return *now > 0;
    return *now > last->second;
}

void JvmtiSampler::emit_trace(const jvmtiStackInfo& stack, uint32_t tid, uint64_t time_ns, uint64_t announce_ns,
                              JNIEnv* jni) {
    JvmtiTrace trace;
    trace.time_ns = time_ns;
    trace.tid = tid;
    trace.truncated = stack.frame_count >= kMaxDepth;
    trace.frames.reserve(static_cast<size_t>(stack.frame_count));
    for (jint f = 0; f < stack.frame_count; ++f) {
        const jvmtiFrameInfo& frame = stack.frame_buffer[f];
        // Methods of hidden classes (lambdas, method handles) get no ClassPrepare: announce on first sight.
        if (announced_.insert(frame.method).second) capture_.announce_method(jni, frame.method, announce_ns);
        // JVMTI's location is the bci for Java methods and -1 for native ones.
        trace.frames.push_back(MethodBci{reinterpret_cast<uint64_t>(frame.method), static_cast<int32_t>(frame.location)});
    }
    sink_.emit(std::move(trace));
    traces_.fetch_add(1, std::memory_order_relaxed);
}

bool JvmtiSampler::stop(int timeout_ms) {
    std::unique_lock<std::mutex> lock(mutex_);
    if (!started_) return true;
    stop_requested_ = true;
    wake_.notify_all();
    return wake_.wait_for(lock, std::chrono::milliseconds(timeout_ms), [this] { return finished_; });
}

JvmtiSamplerStats JvmtiSampler::stats() const {
    JvmtiSamplerStats s;
    s.rounds = rounds_.load();
    s.failed_rounds = failed_rounds_.load();
    s.late_rounds = late_rounds_.load();
    s.traces = traces_.load();
    s.not_runnable = not_runnable_.load();
    s.idle_runnable = idle_runnable_.load();
    s.without_java = without_java_.load();
    s.no_tid = no_tid_.load();
    s.in_call_ns = in_call_ns_.load();
    s.thread_cpu_ns = thread_cpu_ns_.load();
    return s;
}

std::string JvmtiSampler::describe() const {
    const JvmtiSamplerStats s = stats();
    char line[512];
    std::snprintf(line, sizeof line,
                  "jvmti mode: %llu GetAllStackTraces rounds (%llu failed, %llu late), %llu traces of runnable "
                  "threads (%llu without OS tid); skipped %llu not runnable, %llu runnable without CPU use, "
                  "%llu without Java frames; %.3f ms per call (safepoint included), sampler CPU %.1f ms",
                  static_cast<unsigned long long>(s.rounds), static_cast<unsigned long long>(s.failed_rounds),
                  static_cast<unsigned long long>(s.late_rounds), static_cast<unsigned long long>(s.traces),
                  static_cast<unsigned long long>(s.no_tid), static_cast<unsigned long long>(s.not_runnable),
                  static_cast<unsigned long long>(s.idle_runnable),
                  static_cast<unsigned long long>(s.without_java),
                  s.rounds ? static_cast<double>(s.in_call_ns) / 1e6 / static_cast<double>(s.rounds) : 0.0,
                  static_cast<double>(s.thread_cpu_ns) / 1e6);
    return line;
}

}  // namespace sf::agent
