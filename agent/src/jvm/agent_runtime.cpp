#include "agent_runtime.hpp"

#include "attach_control.hpp"

#include <dirent.h>
#include <dlfcn.h>
#include <jvmti.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "process_cpu.hpp"
#include "callback_cpu.hpp"
#include "cpu_affinity.hpp"
#include "stackfrag/base/clock.hpp"
#include "event_queue.hpp"
#include "jvmti_sampler.hpp"
#include "live_profile.hpp"
#include "module_tracker.hpp"
#include "log.hpp"
#include "native_bind.hpp"
#include "options.hpp"
#include "open_lag.hpp"
#include "oracle.hpp"
#include "own_threads.hpp"
#include "periodic_poll.hpp"
#include "profile_push.hpp"
#include "auto_interval.hpp"
#include "auto_stack.hpp"
#include "sampler.hpp"
#include "stack_pages.hpp"
#include "stackfrag/events/recording.hpp"
#include "stackfrag/kernel/proc_maps.hpp"
#include "stream_writer.hpp"
#include "task_watcher.hpp"
#include "thread_registry.hpp"
#include "vm_capture.hpp"
#include "vmstructs.hpp"

namespace sf::agent {

namespace {

constexpr int kShutdownTimeoutMs = 5000;
// VMDeath: how long sampling may go on while the live decoder catches up with its queue.
constexpr int kCatchUpTimeoutMs = 1000;
// push=: how long the JVM's exit may wait for the last profiles to reach the server.
constexpr int kPushFlushTimeoutMs = 2000;
// The code poll (redefined methods, nmethods no event announced, new libraries) re-reads every
// announced Method* and walks the CodeCache: ~3 ms on httpserver (20k methods, 8 MB of code read
// a window at a time; ~15 ms when it copied the method table and read each block with a system
// call of its own). What it catches is rare (redefinitions; nmethods JVMTI missed: none seen), so
// it runs every 5 s at first, and backs off to once a minute while it keeps finding nothing; a
// finding brings it back to 5 s.
constexpr int kCodePollIntervalMs = 5000;
constexpr int kCodePollMaxIntervalMs = 60000;
const char* const kCodePollThreadName = "stackfrag-code-poll";
// Where the VM prepares classes without a ClassPrepare (JDK 21: VmCapture::misses_class_prepares),
// the code-poll thread looks for them 1 s after the start, then twice as long after each look that
// found none, up to a minute; and when asked (Agent::ask_for_class_check), at most every 200 ms,
// twice as long after each that found none.
constexpr std::chrono::milliseconds kClassCheckFirst{1000};
constexpr std::chrono::milliseconds kClassCheckMax{60000};
constexpr std::chrono::milliseconds kClassCheckSpacing{200};
// How soon after a ClassFileLoadHook for a class being redefined the code poll looks for its new
// Method*s, and again while they have not appeared: the VM replaces the methods after the hooks of
// all the classes of one call returned (JFR retransforms ~10 JDK classes at its start, a Java
// agent may retransform hundreds).
constexpr std::chrono::milliseconds kRedefinitionRecheck{20};
const char* const kProducer = "stackfrag-agent 0.1";

pid_t current_tid() { return static_cast<pid_t>(syscall(SYS_gettid)); }

std::string read_command_line() {
    std::ifstream in("/proc/self/cmdline", std::ios::binary);
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    while (!text.empty() && text.back() == '\0') text.pop_back();
    for (char& c : text) {
        if (c == '\0') c = ' ';
    }
    return text;
}

uint64_t unix_time_ns() { return realtime_ns(); }

std::string jvmti_error_text(jvmtiEnv* jvmti, jvmtiError error) {
    char* name = nullptr;
    std::string text = "JVMTI error " + std::to_string(error);
    if (jvmti != nullptr && jvmti->GetErrorName(error, &name) == JVMTI_ERROR_NONE && name != nullptr) {
        text += " (" + std::string(name) + ")";
        jvmti->Deallocate(reinterpret_cast<unsigned char*>(name));
    }
    return text;
}

class Agent;
// Never destroyed: callbacks, the handler and daemon threads may outlive every exit hook.
// Atomic: it is set on the thread that loads the agent and read by JVMTI callbacks on any JVM
// thread, ordered only by HotSpot's own locking around event enabling, which a sanitizer (and the
// C++ memory model) cannot see; the acquire load costs nothing on x86.
std::atomic<Agent*> g_agent{nullptr};
Agent* the_agent() { return g_agent.load(std::memory_order_acquire); }

class Agent {
public:
    Agent(JavaVM* vm, jvmtiEnv* jvmti, AgentOptions options, std::unique_ptr<RecordingWriter> recording)
        : vm_(vm), jvmti_(jvmti), options_(std::move(options)), writer_(std::move(recording)),
          backend_(options_.backend, options_.mode) {}

    // OnLoad / OnAttach, after the options were accepted.
    void setup(bool attach) {
        attach_ = attach;
        SF_LOG_DEBUG("process CPU at load: %.1f ms", static_cast<double>(process_cpu_ns()) / 1e6);
        // At OnLoad this thread is inside Threads::create_vm and runs the JVM's start, VMInit and
        // main(): its samples' fragments must not stop at a page of the frames above that was
        // never written (JDK 25: ~80 samples per xalan run failed so, native_unwind_failed).
        if (!attach) {
            const size_t pages = touch_stack_pages_above_current_frame();
            SF_LOG_DEBUG("%zu stack pages above the agent's load made present", pages);
        }
        if (backend_.signal_from_start()) {
            use_signal_backend("backend=signal");
        } else if (options_.validate) {
            create_oracle(false);
        }
        sampler_ = std::make_unique<Sampler>(sampling_config(), queue_, writer_, timer());
        sampler_->set_fallback_available(options_.backend == SamplingBackend::kAuto);
        // Before any per-CPU event opens (add_cpus below, mode=thread's early ones): the agent's
        // threads are created by a helper that no inheriting event follows, and counted by their
        // thread clocks instead of perf samples, each of which cost them ~45 us on this project's
        // VM (the agent's share at 10 kHz on xalan: 22-23 % with them sampled, 12-14 % without).
        if (Status spawner = start_own_thread_spawner([this](pid_t tid) {
                if (counts_own_threads_by_clock()) sampler_->account_by_clock(tid);
            });
            !spawner.ok()) {
            SF_LOG_DEBUG("own threads created directly (inheriting events sample them): %s", spawner.error().describe().c_str());
        }
        sampler_->set_events(options_.sample_cpu, options_.sample_switch);
        sampler_->set_realtime_reader(options_.realtime_reader);
        sampler_->set_lazy_rings(options_.ring_pages == 0);
        sampler_->set_module_tracker(&modules_);
        sampler_->set_stack_tops(&stack_tops_);
        create_live_profile();
        if (!setup_jvmti()) {
            disabled_ = true;
            return;
        }
        // Per-CPU events follow only threads created after they are opened, so open them now:
        // at OnLoad nearly every JVM thread is yet to come (they are enabled when the reader starts).
        if (options_.mode == SamplingMode::kCpu && !attach && !backend_.signal() &&
            !sampler_->add_cpus(current_tid()).ok()) {
            fall_back_to_signals_if_denied();
        }
        if (!attach) start_sampling_early();
    }

    // At OnLoad: sampling begins now, not at VMInit. Most of the JVM's start comes after the
    // agent's load (xalan, JDK 17: 9 ms of CPU time at OnLoad, 50 ms at VMInit; groundtruth's
    // 1.3-1.6 % of its CPU time "before sampling began" was mostly that). Those samples cannot be
    // decoded before the VM's layout, its code and its libraries are announced at VMInit, so the
    // reader holds them (an InFlight from now, which it honours for up to 10 s while the samples
    // it holds stay under 256 MB: Sampler::hold_for_start) until go_live has emitted the VmInfo
    // and the ModuleMaps stamped with this moment: the VM's layout and the
    // period hold from the load on, libraries are valid for the VM's life, and the code the
    // samples ran (the interpreter, stubs, the few methods compiled so early) existed when they
    // were taken; code announced later is found by the decoder's second decode like any code
    // whose announcement comes after a sample (docs/decoding.md). Not with the signal backend,
    // validate or mode=jvmti, whose machinery needs the live phase.
    void start_sampling_early() {
        // events=switch (alone or with cpu): the early per-CPU events are clock events only, and
        // no switch would be sampled until VMInit anyway. Intervals under 100 us: the kernel's
        // work per sample (~9 us on the 2-CPU VM) is then a large share of each period, and while
        // VMInit hands the threads from the per-CPU events to their own, a thread carries both:
        // at 10 us the JVM's start scan took 45 s instead of 0.1 s (a livelock, not a slowdown).
        if (disabled_ || backend_.signal() || options_.validate || timer() != nullptr ||
            !options_.sample_cpu || options_.sample_switch || options_.interval_ns < 100'000 ||
            (options_.mode != SamplingMode::kThread && options_.mode != SamplingMode::kCpu) ||
            (options_.mode == SamplingMode::kThread && !options_.all_threads)) {   // threads=java: the
            return;                                                            // per-CPU events see all
        }
        early_from_ns_ = monotonic_ns();
        early_hold_ = std::make_unique<EventQueue::InFlight>(queue_);
        sampler_->hold_for_start(true);
        const pid_t self = current_tid();
        // The thread loading the agent runs VMInit and then main(): a Java thread, registered
        // under its Java name at VMInit.
        early_java_tid_.store(self, std::memory_order_relaxed);
        queue_.emit(ThreadInfo{monotonic_ns(), static_cast<uint32_t>(self), false, "main"});
        if (options_.mode == SamplingMode::kThread) {
            // Until VMInit, mode=thread samples as mode=cpu does: per-CPU events that every thread
            // created from now on inherits, so that the JVM's threads (GC workers, the VM thread,
            // compiler threads that compile at once) are sampled from their first instant, not
            // from the watcher's next look. At VMInit every thread gets its own event and these
            // close (end_cpus).
            if (!sampler_->add_cpus(self).ok()) fall_back_to_signals_if_denied(self);
            if (backend_.signal()) {   // denied: the signal backend starts at VMInit, as before
                release_early_hold();
                early_from_ns_ = 0;
                return;
            }
        }
        cpu_at_start_ = process_cpu_now(true);
        queue_.emit(cpu_at_start_);
        if (Status started = sampler_->start(); !started.ok()) {
            SF_LOG_ERROR("cannot start the reader thread, sampling is off: %s", started.error().describe().c_str());
            release_early_hold();
            disable_events();
            disabled_ = true;
            return;
        }
        // The JVM's own threads appear during its start: the watcher names them from now on (their
        // samples' root frames); in mode=thread it opens no event until VMInit.
        start_task_watcher(/*announce_only=*/true);
        SF_LOG_DEBUG("sampling from the agent's load on (process CPU %.1f ms)", static_cast<double>(process_cpu_ns()) / 1e6);
    }

    // The reader may write the samples since the agent's load from now on.
    void release_early_hold() {
        early_hold_.reset();
        if (sampler_) sampler_->hold_for_start(false);
    }

    // VMInit, or right after setup when attaching (live phase, on a thread attached to the VM).
    void go_live(JNIEnv* jni) {
        if (disabled_) return;
        SamplingParameters parameters;
        parameters.sample_stack_bytes = options_.stack_bytes;
        parameters.sample_period_ns = options_.interval_ns;
        parameters.max_frames = options_.max_frames;
        parameters.valid_from_ns = early_from_ns_;   // 0 unless sampling began at OnLoad
        capture_ = std::make_unique<VmCapture>(jvmti_, queue_);
        capture_->set_lazy_names(live_profile_ && live_profile_->lazy_names());
        capture_ready_.store(true, std::memory_order_release);
        Status captured = capture_->begin(jni, parameters);
        if (!captured.ok()) {
            SF_LOG_ERROR("the VM's code map cannot be captured, sampling is off: %s",
                         captured.error().describe().c_str());
            disable_events();
            disabled_ = true;
            if (early_from_ns_ != 0) {   // sampling since the load: it stops here, undecodable
                release_early_hold();
                stop_task_watcher();
                (void)sampler_->stop(kShutdownTimeoutMs);
            }
            return;
        }
        // From here on, before the start scan reads the loaded classes' methods, so that a class
        // another agent redefines meanwhile is looked at again (the code poll, once it runs).
        if (jvmtiError error = jvmti_->SetEventNotificationMode(JVMTI_ENABLE, JVMTI_EVENT_CLASS_FILE_LOAD_HOOK, nullptr);
            error != JVMTI_ERROR_NONE) {
            SF_LOG_WARN("redefined classes are announced by the code poll only (ClassFileLoadHook refused: %s)",
                        jvmti_error_text(jvmti_, error).c_str());
        }
        // Before the reader starts, so that the first native frames already have their modules.
        // (Not inside the log call: its arguments are evaluated only when debug logging is on.)
        modules_.set_code_cache(capture_->code_cache());
        const size_t announced = modules_.refresh(early_from_ns_ != 0 ? early_from_ns_ : monotonic_ns(), queue_);
        SF_LOG_DEBUG("%zu executable files announced", announced);
        if (live_profile_) {
            if (Status live = live_profile_->start(); !live.ok()) {
                SF_LOG_ERROR("no live profile: %s", live.error().describe().c_str());
            }
        }
        if (pusher_) {
            if (Status push = pusher_->start(); !push.ok()) SF_LOG_ERROR("push: %s", push.error().describe().c_str());
        }
        {
            // Sampling starts before the code map's scan, which costs this thread tens of ms (50 ms
            // on xalan, JDK 17) that were never sampled when the events opened after it. The scan's
            // events are stamped when it begins, before the samples taken meanwhile: this hold
            // keeps the reader from writing those samples before them.
            EventQueue::InFlight scan_in_flight(queue_);
            if (early_from_ns_ == 0) {
                // What the process ran before its events were open (the JVM's start up to VMInit, or
                // until the attach): the stream's first ProcessCpu, which coverage reports apart.
                if (options_.mode == SamplingMode::kThread) open_lag_.snapshot_existing();
                cpu_at_start_ = process_cpu_now(true);
                queue_.emit(cpu_at_start_);
                Status started = sampler_->start();
                if (!started.ok()) {
                    SF_LOG_ERROR("cannot start the reader thread, sampling is off: %s", started.error().describe().c_str());
                    disable_events();
                    disabled_ = true;
                    return;
                }
            }
            // The thread that created the VM runs VMInit; set before live_, which ThreadStart reads.
            if (!attach_) vm_start_tid_ = current_tid();
            live_.store(true, std::memory_order_release);
            if (options_.mode == SamplingMode::kCpu && attach_ && !backend_.signal()) add_cpu_events_for_existing_threads();
            if (early_from_ns_ != 0 && options_.mode == SamplingMode::kThread) {
                // From the per-CPU events of the start to one event per thread: the announcing
                // watcher gives way to one that opens events, and the per-CPU events close at the
                // reader's next cycle, after the threads' own events opened (a moment sampled
                // twice rather than not at all).
                stop_task_watcher();
                task_watcher_.reset();
                open_lag_.snapshot_existing();
            }
            register_existing_threads(jni);
            early_java_tid_.store(0, std::memory_order_relaxed);
            if (!task_watcher_) start_task_watcher();
            if (early_from_ns_ != 0 && options_.mode == SamplingMode::kThread) sampler_->end_cpus();
            capture_->scan(jni);
            // The samples since the load go only now, behind the scan's methods and code, not just
            // the VmInfo and the ModuleMaps: they are mostly interpreted frames of methods the scan
            // announces, and the decoder waits for late announcements with a bounded number of
            // samples (256), which a start's thousands of held samples overran: the demo at 100 us
            // failed 0.7-1.2 % of its samples as unknown_method on a slow machine. Released at
            // once, they exceed the live queue's byte bound (mode=cpu at 100 us: 5-6 k samples,
            // 75-100 MB, already held by the reader), which must not drop them.
            if (early_hold_ && live_profile_) live_profile_->keep_held_samples_until(monotonic_ns());
            release_early_hold();
        }
        SF_LOG_INFO("%s", capture_->describe().c_str());
        start_code_poller(jni);
        if (options_.mode == SamplingMode::kJvmti) start_jvmti_sampler(jni);
        SF_LOG_INFO("sampling every %llu ns in mode %s, on the %s backend%s", static_cast<unsigned long long>(options_.interval_ns),
                    mode_text(options_).c_str(), backend_.signal() ? "signal" : "perf",
                    options_.validate ? " with the validate oracle" : "");
    }

    void on_thread_start(JNIEnv* jni, jthread thread) {
        if (!live_.load(std::memory_order_acquire)) return;   // found by go_live's enumeration
        std::string name = thread_name(jni, thread);
        // The agent's own work is not the application's.
        if (name == kCodePollThreadName || name == JvmtiSampler::kThreadName) return;
        // Its start frames' unwritten pages would cut every later sample's fragment short.
        (void)touch_stack_pages_above_current_frame();
        register_thread(current_tid(), std::move(name), jni, true);
    }

    void on_thread_end(JNIEnv*, jthread) {
        if (!live_.load(std::memory_order_acquire)) return;
        const pid_t tid = current_tid();
        std::optional<std::string> registered = threads_.remove(tid);
        if (!registered) return;
        std::string name = std::move(*registered);
        const uint64_t cpu_ns = thread_cpu_ns();
        // The thread's own CPU time, for checking sample counts (CPU time x rate) in tests.
        SF_LOG_DEBUG("thread end %d '%s' cpu %.3f ms", tid, name.c_str(), static_cast<double>(cpu_ns) / 1e6);
        queue_.emit(ThreadInfo{monotonic_ns(), static_cast<uint32_t>(tid), true, std::move(name)});
        if (options_.mode == SamplingMode::kThread) open_lag_.on_end(tid, cpu_ns);
        // A thread's clock counts from zero at its start, in either mode: one that ends before a
        // whole period never had a sample. Exact, and what a thread-per-request service loses most.
        threads_ended_.fetch_add(1, std::memory_order_relaxed);
        if (!options_.interval_auto && cpu_ns != 0 && cpu_ns < options_.interval_ns) {
            short_threads_.fetch_add(1, std::memory_order_relaxed);
            short_threads_cpu_ns_.fetch_add(cpu_ns, std::memory_order_relaxed);
        }
        if (OracleSampler* timer_sampler = timer()) timer_sampler->remove_thread(tid);
        if (options_.mode == SamplingMode::kThread) sampler_->end_thread(tid);
        // stack=auto forgets the top when the end reaches the stream, after the thread's last
        // samples; otherwise a later thread of the same tid must not be cut at this one's top.
        if (!auto_stack_) stack_tops_.forget(static_cast<uint32_t>(tid), monotonic_ns());
    }

    VmCapture* capture() {
        return capture_ready_.load(std::memory_order_acquire) ? capture_.get() : nullptr;
    }

    // VMDeath or OnUnload, whichever comes first, or an attach `stop`; bounded. `final_file`
    // replaces file= for the profile written now.
    void shutdown(const std::string& final_file = {}) {
        if (shut_down_.exchange(true)) return;
        release_early_hold();   // a JVM that never reached VMInit
        stop_own_thread_spawner();
        // The live decoder's backlog decoded while sampling goes on (and the code events still
        // come): that CPU time is then in the profile, not after its last sample. At 100 us it was
        // 2-3 % of the process's CPU time after the stop (h2, xalan, JDK 17). Bounded: a decoder
        // that cannot keep up leaves the rest to stop().
        if (live_profile_) (void)live_profile_->catch_up(kCatchUpTimeoutMs);
        live_.store(false, std::memory_order_release);
        disable_events();
        stop_code_poller();
        stop_task_watcher();
        stop_jvmti_sampler();
        if (OracleSampler* timer_sampler = timer()) timer_sampler->stop();
        const ProcessCpu at_stop = process_cpu_now();
        const uint64_t own_at_stop = own_threads_cpu_now();
        queue_.emit(at_stop);   // coverage's denominator, through the stream like every fact
        const bool stopped = sampler_->stop(kShutdownTimeoutMs);
        queue_.close();
        // Once the reader has closed every ring (their counts are in its stats).
        const TimerSkips skips =
            stopped ? timer_skips(sampler_->stats(), threads_seen(), options_.interval_ns, cpu_at_start_, at_stop)
                    : TimerSkips{};
        if (stopped) log_summary(skips, at_stop);
        finish_live_profile(stopped, final_file);
        if (VmCapture* vm = capture(); vm != nullptr && vm->lazy_names()) SF_LOG_INFO("%s", vm->names_text().c_str());
        if (VmCapture* vm = capture(); vm != nullptr && !vm->redefinitions_text().empty()) {
            SF_LOG_INFO("%s", vm->redefinitions_text().c_str());
        }
        if (VmCapture* vm = capture(); vm != nullptr && !vm->unannounced_classes_text().empty()) {
            SF_LOG_INFO("%s", vm->unannounced_classes_text().c_str());
        }
        if (stopped) log_agent_cpu(own_at_stop, at_stop.user_ns + at_stop.system_ns, skips);
        // No sample sees this: the last events drained, the rest of the stream decoded, the
        // profile written. (The JVM's exit after VMDeath, freeing its heap, comes on top.)
        const ProcessCpu done = process_cpu_now();
        const uint64_t after_ns = done.user_ns + done.system_ns - at_stop.user_ns - at_stop.system_ns;
        SF_LOG_INFO("after the last sample: stopping and writing the profile took %.1f ms of CPU (%.2f%% of the "
                    "process's CPU time so far), which no sample sees",
                    static_cast<double>(after_ns) / 1e6,
                    100.0 * static_cast<double>(after_ns) / static_cast<double>(std::max<uint64_t>(done.user_ns + done.system_ns, 1)));
        if (options_.breadcrumbs) native_bind::log_summary();
    }

    bool is_shut_down() const { return shut_down_.load(); }
    bool sampling() const { return live_.load(std::memory_order_acquire); }
    const AgentOptions& options() const { return options_; }
    LiveProfile* live_profile() { return live_profile_.get(); }

    // Which backend samples: "perf", or "signal (why)".
    std::string backend_text() const { return backend_.text(); }

    // mode=cpu's events sample a thread only on the CPUs the JVM could run on at its start. A
    // thread that widened its affinity since (sched_setaffinity, or a cpuset that grew) runs
    // unsampled elsewhere: say so, rather than leave it to the coverage line.
    void warn_of_threads_beyond_cpus() const {
        if (!sampler_ || options_.mode != SamplingMode::kCpu) return;
        const std::vector<int>& cpus = sampler_->cpus();
        if (cpus.empty()) return;
        try {   // runs in VMDeath: a failed allocation costs the warning, not the JVM
            const Result<std::vector<int>> online = kernel::online_cpus();
            if (!online.ok()) return;
            const ThreadsBeyondCpus beyond = threads_beyond_cpus(cpus, *online);
            if (beyond.threads == 0) return;
            SF_LOG_WARN("%zu threads (e.g. %s) may now run on CPUs %s, where no per-CPU event samples them (they "
                        "were opened on CPUs %s, those the JVM could run on at its start): their time there is "
                        "missing from the profile; mode=thread samples a thread wherever it runs",
                        beyond.threads, beyond.example.c_str(), cpu_list_text(beyond.cpus).c_str(),
                        cpu_list_text(cpus).c_str());
        } catch (const std::exception&) {
        }
    }

    // The rings' pinned memory, for the stop summary: with one ring per thread it grows with the
    // threads (and stack=auto's larger rings), which a service with hundreds of threads must know.
    std::string ring_memory_text() const {
        const kernel::RingMemory memory = kernel::ring_memory();
        if (memory.peak_rings == 0) return "";
        char line[300];
        std::snprintf(line, sizeof line, "\n  ring memory (pinned by the kernel): peak %.1f MB in %llu rings, %.1f MB at the stop",
                      static_cast<double>(memory.peak_bytes) / (1024.0 * 1024.0),
                      static_cast<unsigned long long>(memory.peak_rings),
                      static_cast<double>(memory.bytes) / (1024.0 * 1024.0));
        std::string text = line;
        if (sampler_) {
            const SamplerStats stats = sampler_->stats();
            if (stats.small_rings != 0) {
                text += "; " + std::to_string(stats.small_rings) + " thread rings opened small, " +
                        std::to_string(stats.rings_grown) + " grew to the full size once their thread filled one";
            }
            if (stats.ring_limit_failures != 0) {
                text += "; " + std::to_string(stats.ring_limit_failures) +
                        " threads refused a ring at their start: no more ring memory could be locked "
                        "(kernel.perf_event_mlock_kb, ulimit -l; the first refusal's log line says what to change); " +
                        std::to_string(stats.late_opens) + " rings opened later for threads that waited and ran, " +
                        std::to_string(stats.rings_taken) + " taken from threads that had stopped running, " +
                        std::to_string(stats.waiting_at_stop) + " threads without a ring at the stop";
            }
        }
        return text;
    }

    // Every thread the process had while sampling, at most: those alive now and the Java threads
    // that ended (the VM's own rarely end). Bounds the partial periods per-CPU events leave.
    uint64_t threads_seen() const {
        uint64_t alive = 0;
        if (DIR* tasks = opendir("/proc/self/task")) {
            while (const dirent* entry = readdir(tasks)) alive += entry->d_name[0] != '.';
            closedir(tasks);
        }
        return alive + threads_ended_.load(std::memory_order_relaxed);
    }

    // The stop summary's line on threads too short-lived to be sampled, when they used at least
    // 0.1 % of the process's CPU time.
    std::string short_threads_text() const {
        const uint64_t short_ns = short_threads_cpu_ns_.load(std::memory_order_relaxed);
        const uint64_t process_ns = process_cpu_ns();
        if (short_ns == 0 || process_ns == 0 || short_ns * 1000 < process_ns) return "";
        char line[400];
        std::snprintf(line, sizeof line,
                      "\n  short-lived threads: %llu of the %llu Java threads that ended ran less than one period (%.3g ms) "
                      "in all, %.1f ms (%.1f%% of the process's CPU time), which no sample can see: a thread's clock "
                      "counts from zero at its start (a shorter interval, or a thread pool, sees more of it)",
                      static_cast<unsigned long long>(short_threads_.load(std::memory_order_relaxed)),
                      static_cast<unsigned long long>(threads_ended_.load(std::memory_order_relaxed)),
                      static_cast<double>(options_.interval_ns) / 1e6, static_cast<double>(short_ns) / 1e6,
                      100.0 * static_cast<double>(short_ns) / static_cast<double>(process_ns));
        return line;
    }

    // stack=auto's part of the stop summary.
    std::string stack_text() const {
        if (!auto_stack_) return "";
        return "\n  stack=auto: fragments grew " + std::to_string(auto_stack_->grown()) + " times, shrank " +
               std::to_string(auto_stack_->shrunk()) + " times (" + std::to_string(sampler_->stats().stack_reopens) +
               " reopens" + (live_profile_ ? "" : "; judged by where fragments end below the stack tops, no live decoder") +
               ")" + stack_agreement_text();
    }

    // Debug: how the decode-free signal of stack=auto agreed with the live decoder.
    std::string stack_agreement_text() const {
        const AutoStack::Agreement a = auto_stack_->agreement();
        const uint64_t judged = a.both_ran_off + a.both_reached + a.only_decoder_ran_off + a.only_check_ran_off;
        if (judged == 0 || !log_enabled(LogLevel::kDebug)) return "";
        return "\n  stack=auto check vs decoder: both ran off " + std::to_string(a.both_ran_off) + ", both reached " +
               std::to_string(a.both_reached) + ", only the decoder ran off " + std::to_string(a.only_decoder_ran_off) +
               ", only the check ran off " + std::to_string(a.only_check_ran_off) + "; full fragments end at most " +
               std::to_string(a.max_gap_reached) + " bytes below the top when complete, at least " +
               (a.min_gap_ran_off == UINT64_MAX ? std::string("-") : std::to_string(a.min_gap_ran_off)) +
               " when they ran off";
    }

    std::string status_text() const {
        const bool running = live_.load(std::memory_order_acquire) && !shut_down_.load();
        std::string text = std::string("running: ") + (running ? "yes" : "no") + "\n";
        if (live_profile_) {
            text += "samples: " + std::to_string(live_profile_->samples_offered()) + "\n";
            text += "samples decoded: " + std::to_string(live_profile_->samples_decoded()) + "\n";
            text += "file: " + (options_.file.empty() ? std::string("(none)") : options_.file) + "\n";
        }
        text += "record: " + (options_.records() ? options_.record_path : std::string("(none)")) + "\n";
        if (pusher_) text += pusher_->summary_text() + "\n";
        text += "options: " + describe(options_) + "\n";
        text += "backend: " + backend_text() + "\n";
        return text;
    }

private:
    // The perf events' settings: kernel-mode ticks too where this process may sample them (not
    // with events=switch, whose samples share the clock's ring and are told apart by their kernel
    // IP). Where it may not, the time its threads spend in the kernel goes unsampled, which the
    // log says now and the summary quantifies.
    kernel::SamplingConfig sampling_config() {
        kernel::SamplingConfig config = options_.sampling_config();
        if (options_.mode == SamplingMode::kJvmti || options_.backend == SamplingBackend::kSignal) return config;
        Status permitted = kernel::probe_kernel_sampling();
        if (!permitted.ok()) {
            kernel_unsampled_ = permitted.error().describe();
            SF_LOG_WARN("time in the kernel (syscalls, page faults) is not sampled: %s", kernel_unsampled_.c_str());
        } else if (options_.sample_switch) {
            kernel_unsampled_ = "events=switch: clock ticks in the kernel are not told from switches";
            SF_LOG_INFO("time in the kernel is not sampled with events=switch (its samples are told from the clock's "
                        "by their kernel address)");
        } else {
            config.kernel = true;
        }
        return config;
    }

    // threads=all: the JVM's non-Java threads, found now and as they appear. In mode=thread each
    // gets its perf event; in mode=cpu the inheriting events sample them already, so they are
    // only announced (ThreadInfo), for their samples' root frame.
    void start_task_watcher(bool announce_only = false) {
        if (!options_.all_threads || options_.mode == SamplingMode::kJvmti) return;
        Sampler* sampler =
            options_.mode == SamplingMode::kThread && !backend_.signal() && !announce_only ? sampler_.get() : nullptr;
        if (sampler != nullptr) {
            if (const std::string limit = ring_memory_limit(); !limit.empty()) {
                SF_LOG_INFO("threads=all: the JVM's own threads (GC, compiler, VM) are not sampled: %s (raise the limits "
                            "or grant CAP_IPC_LOCK; mode=cpu shares one ring per CPU)", limit.c_str());
                sampler = nullptr;
            }
        }
        task_watcher_ = std::make_unique<TaskWatcher>(queue_, sampler, [this](pid_t tid) {
            return threads_.contains(tid) || tid == early_java_tid_.load(std::memory_order_relaxed);
        });
        task_watcher_->set_open_lag(&open_lag_);
        task_watcher_->tick();
        SF_LOG_DEBUG("%zu native threads at start", task_watcher_->native_threads());
        // Announcing only (mode=cpu, or before VMInit): the reader, awake anyway, looks at the
        // thread count. Opening events (mode=thread) keeps the watcher's own tick: the reader
        // must not wait for a scan, and its cadence can be shorter than the watcher's interval.
        const bool ride = sampler == nullptr;
        if (ride) task_watcher_->ride_on_reader();
        if (Status started = task_watcher_->start(); !started.ok()) {
            SF_LOG_WARN("native threads that start from now on are not sampled: %s", started.error().describe().c_str());
        } else if (ride) {
            sampler_->set_cycle_hook(task_watcher_.get());
        }
    }

    // Stops the watcher's thread; the reader no longer looks for it once this returns.
    void stop_task_watcher() {
        if (!task_watcher_) return;
        sampler_->set_cycle_hook(nullptr);
        task_watcher_->stop();
    }

    // The live profile live_settings_from asks for, with interval=auto's, stack=auto's and push='s callbacks.
    void create_live_profile() {
        std::optional<LiveSettings> wanted = live_settings_from(options_, static_cast<uint32_t>(getpid()));
        const bool stack_auto = options_.stack_auto && options_.mode == SamplingMode::kThread;
        StackControllerSettings deep;
        deep.base_bytes = options_.stack_bytes;
        // Half the base for threads that stay shallow (groundtruth's samples keep 6.5 KiB of 16).
        deep.small_bytes = small_fragment_bytes(options_.stack_bytes);
        deep.active_samples = static_cast<uint32_t>(std::max<uint64_t>(2, 2'000'000 / std::max<uint64_t>(options_.interval_ns, 1)));
        if (!wanted) {
            if (!options_.focus.empty() || !options_.exclude.empty()) {
                SF_LOG_WARN("focus/exclude filter the live profile (file=); the recording keeps every sample "
                            "(filter it with stackfrag report/replay --focus/--exclude)");
            }
            if (stack_auto) {
                // No decoder: the reader judges each sample by where its fragment ends below the
                // thread's stack top as it reads it (AutoStack::on_perf_sample); the stream it
                // writes says when a thread ended.
                auto_stack_ = std::make_unique<AutoStack>(deep, *sampler_, stack_tops_);
                sampler_->set_sample_watch(
                    [this](const Sample& sample, SampleWatchCache* cache) { auto_stack_->on_perf_sample(sample, cache); });
                writer_.set_tap(auto_stack_.get());
            }
            return;
        }
        LiveSettings settings = std::move(*wanted);
        settings.stack_tops = &stack_tops_;
        if (options_.interval_auto) {
            // The decoder thread sees each thread's top frames: interval=auto needs live decoding.
            PeriodControllerSettings adaptive;
            adaptive.start_ns = options_.interval_ns;
            adaptive.budget = options_.budget_percent / 100.0;
            auto_interval_ = std::make_unique<AutoInterval>(adaptive, *sampler_);
            settings.on_trace = [this](const Event& event, const CallTrace& trace, uint64_t decode_ns) {
                auto_interval_->on_trace(event, trace, decode_ns);
            };
        }
        if (stack_auto) {
            // With a live profile the decoder says which samples ran off their fragment (stitched
            // ones did not need more): the better signal.
            auto_stack_ = std::make_unique<AutoStack>(deep, *sampler_, stack_tops_);
            settings.watch_trace = [this](const Event& event, const CallTrace& trace) { auto_stack_->on_trace(event, trace); };
            // The reader's decode-free check grows a thread at its first sample that ran off,
            // tens of milliseconds before the decoder's verdict on it (AutoStack::on_perf_sample).
            auto_stack_->set_head_start(true);
            sampler_->set_sample_watch(
                [this](const Sample& sample, SampleWatchCache* cache) { auto_stack_->on_perf_sample(sample, cache); });
            settings.on_thread_end = [this](uint32_t tid) { auto_stack_->on_thread_end(tid); };
            settings.wake_on_fragment_bytes = options_.stack_bytes;
            settings.may_run_off = [this](const Sample& sample) { return auto_stack_->may_run_off(sample); };
        }
        if (!options_.push_url.empty()) {
            pusher_ = std::make_unique<ProfilePusher>(push_settings_from(options_, system_property("sun.java.command")));
            SF_LOG_INFO("push: each %llu ms period's profile goes to %s as %s", static_cast<unsigned long long>(options_.loop_ns / 1'000'000),
                        pusher_->settings().url.endpoint().c_str(), pusher_->settings().name.c_str());
            settings.on_period = [this](const profile::Cct& cct, int64_t from, int64_t until) { pusher_->offer(cct, from, until); };
        }
        // Names only for the methods the profile refers to (~8 % of those a run announces),
        // asked for through the code-poll thread, unless something needs every name as the
        // stream goes: a recording (replayed later, filtered by name) or focus=/exclude=.
        settings.lazy_names = options_.record_path.empty() && settings.filter.empty();
        if (settings.lazy_names) {
            settings.want_names = [this](std::vector<uint64_t> ids) {
                {
                    std::lock_guard<std::mutex> lock(wanted_names_mutex_);
                    wanted_names_.insert(wanted_names_.end(), ids.begin(), ids.end());
                }
                code_poll_.wake();
            };
            settings.names_now = [this](const std::vector<uint64_t>& ids) {
                VmCapture* vm = capture();
                return vm != nullptr ? vm->names_of(nullptr, ids) : std::vector<NamedMethod>{};
            };
        }
        settings.unknown_method = [this] { ask_for_class_check(); };
        live_profile_ = std::make_unique<LiveProfile>(std::move(settings));
        writer_.set_tap(live_profile_.get());
    }

    std::string system_property(const char* name) const {
        char* value = nullptr;
        if (jvmti_->GetSystemProperty(name, &value) != JVMTI_ERROR_NONE || value == nullptr) return {};
        std::string text(value);
        jvmti_->Deallocate(reinterpret_cast<unsigned char*>(value));
        return text;
    }

    void finish_live_profile(bool reader_stopped, const std::string& final_file) {
        if (!live_profile_) return;
        try {   // runs in VMDeath or an attach: nothing may escape into the JVM
            if (reader_stopped) {
                live_profile_->stop(kShutdownTimeoutMs, final_file);
                SF_LOG_INFO("%s\n  mode: %s\n  backend: %s%s%s%s", live_profile_->summary_text().c_str(),
                            mode_text(options_).c_str(), backend_text().c_str(), ring_memory_text().c_str(),
                            short_threads_text().c_str(), stack_text().c_str());
            } else if (!final_file.empty() || !options_.file.empty()) {
                // The reader still runs (and feeds the queue): the profile so far is all that can be written.
                (void)live_profile_->dump(final_file, kShutdownTimeoutMs);
            }
            if (pusher_) {   // the last period's profile, if the server takes it within the bound
                pusher_->stop(kPushFlushTimeoutMs);
                SF_LOG_INFO("%s", pusher_->summary_text().c_str());
            }
        } catch (const std::exception& e) {
            SF_LOG_ERROR("live profile: %s", e.what());
        }
    }

    // The timer sampler, for validate's oracle and/or the signal backend (one per process: both
    // uses share it). `for_samples`: sized for the backend's samples, not only the oracle's.
    bool create_oracle(bool for_samples) {
        // As many threads take a tick at once as the JVM may have CPUs (its affinity, not the host's).
        const uint64_t cpus = options_.cpus_allowed != 0 ? options_.cpus_allowed
                                                         : static_cast<uint64_t>(std::max(1L, sysconf(_SC_NPROCESSORS_ONLN)));
        OracleSettings settings = timer_settings(options_, cpus, for_samples);
        settings.vm = vm_;
        if (options_.validate) {
            settings.asgct = reinterpret_cast<AsgctFunction>(dlsym(RTLD_DEFAULT, "AsyncGetCallTrace"));
            if (settings.asgct == nullptr) {
                SF_LOG_WARN("validate: AsyncGetCallTrace is not exported by this JVM; oracle samples carry no trace");
            }
        }
        Result<std::unique_ptr<OracleSampler>> oracle = OracleSampler::create(settings);
        if (!oracle.ok()) {
            SF_LOG_ERROR("%s is off: %s", for_samples ? "the signal backend" : "validate", oracle.error().describe().c_str());
            return false;
        }
        oracle_ = std::move(oracle).value();
        timer_.store(oracle_.get(), std::memory_order_release);
        return true;
    }

    // backend=signal, or auto once perf was denied: every Java thread gets a CPU-time timer whose
    // ticks become Sample events. `why` is for the stop summary.
    void use_signal_backend(std::string why) {
        if (timer() == nullptr && !create_oracle(true)) return;
        if (sampler_) sampler_->set_timer_sampler(timer());
        backend_.use_signal(std::move(why));
    }

    // backend=auto after a perf open failed: a persistent failure (permission, unsupported) moves
    // every Java thread to the signal backend, with one log line saying why; the threads
    // registered before it was known get their timers now, except `registering`, the thread whose
    // registration found the failure (its caller adds it, from the thread itself when it can, so
    // that its stack bounds are known).
    void fall_back_to_signals_if_denied(pid_t registering = 0) {
        const std::optional<Error> denied = sampler_->open_error();
        if (!backend_.should_fall_back(denied)) return;
        use_signal_backend("perf denied");
        if (!backend_.signal()) {
            SF_LOG_ERROR("sampling is off, the JVM runs on without it: perf events are denied (%s) and the signal "
                         "backend could not start", denied->describe().c_str());
            return;
        }
        SF_LOG_WARN("perf events are denied, sampling with the signal backend (CPU-time timers, backend=signal) "
                    "instead: %s", denied->describe().c_str());
        for (pid_t tid : threads_.not_on_perf(registering)) {
            Status added = timer()->add_thread(tid, kUseSample);
            if (!added.ok()) SF_LOG_DEBUG("signal backend: %s", added.error().describe().c_str());
        }
    }

    OracleSampler* timer() const { return timer_.load(std::memory_order_acquire); }

    bool setup_jvmti() {
        jvmtiCapabilities capabilities{};
        VmCapture::add_capabilities(capabilities);
        jvmtiError error = jvmti_->AddCapabilities(&capabilities);
        if (error != JVMTI_ERROR_NONE) {
            SF_LOG_ERROR("the JVM refused the capabilities stackfrag needs, sampling is off: %s",
                         jvmti_error_text(jvmti_, error).c_str());
            return false;
        }
        if (!VmCapture::add_retransform_notice(jvmti_)) {
            SF_LOG_DEBUG("no can_retransform_classes: classes other agents retransform are announced by the code poll only");
        }
        jvmtiEventCallbacks callbacks{};
        callbacks.VMInit = &Agent::cb_vm_init;
        callbacks.ClassFileLoadHook = &Agent::cb_class_file_load_hook;
        callbacks.VMDeath = &Agent::cb_vm_death;
        callbacks.ThreadStart = &Agent::cb_thread_start;
        callbacks.ThreadEnd = &Agent::cb_thread_end;
        callbacks.ClassLoad = &Agent::cb_class_load;
        callbacks.ClassPrepare = &Agent::cb_class_prepare;
        callbacks.CompiledMethodLoad = &Agent::cb_compiled_method_load;
        callbacks.CompiledMethodUnload = &Agent::cb_compiled_method_unload;
        callbacks.DynamicCodeGenerated = &Agent::cb_dynamic_code_generated;
        if (options_.breadcrumbs) callbacks.NativeMethodBind = &Agent::cb_native_method_bind;
        error = jvmti_->SetEventCallbacks(&callbacks, sizeof callbacks);
        if (error != JVMTI_ERROR_NONE) {
            SF_LOG_ERROR("SetEventCallbacks failed, sampling is off: %s", jvmti_error_text(jvmti_, error).c_str());
            return false;
        }
        for (jvmtiEvent event : kEvents) {
            if (attach_ && event == JVMTI_EVENT_VM_INIT) continue;
            error = jvmti_->SetEventNotificationMode(JVMTI_ENABLE, event, nullptr);
            if (error != JVMTI_ERROR_NONE) {
                SF_LOG_ERROR("cannot enable JVMTI event %d, sampling is off: %s", static_cast<int>(event),
                             jvmti_error_text(jvmti_, error).c_str());
                disable_events();
                return false;
            }
        }
        if (options_.breadcrumbs) (void)native_bind::enable(jvmti_);   // logs why when refused
        return true;
    }

    void disable_events() {
        (void)jvmti_->SetEventNotificationMode(JVMTI_DISABLE, JVMTI_EVENT_CLASS_FILE_LOAD_HOOK, nullptr);
        for (jvmtiEvent event : kEvents) {
            if (event == JVMTI_EVENT_VM_DEATH) continue;   // possibly the callback we are in
            (void)jvmti_->SetEventNotificationMode(JVMTI_DISABLE, event, nullptr);
        }
    }

    std::string thread_name(JNIEnv* jni, jthread thread) {
        jvmtiThreadInfo info{};
        if (thread == nullptr || jvmti_->GetThreadInfo(thread, &info) != JVMTI_ERROR_NONE) return {};
        std::string name = info.name != nullptr ? info.name : "";
        if (info.name != nullptr) jvmti_->Deallocate(reinterpret_cast<unsigned char*>(info.name));
        if (jni != nullptr) {
            if (info.thread_group != nullptr) jni->DeleteLocalRef(info.thread_group);
            if (info.context_class_loader != nullptr) jni->DeleteLocalRef(info.context_class_loader);
        }
        return name;
    }

    // `on_thread`: called by the thread itself (it knows its JNIEnv and stack).
    void register_thread(pid_t tid, std::string name, JNIEnv* jni, bool on_thread) {
        if (!threads_.add(tid, name)) return;
        const std::string registered_name = auto_stack_ ? name : std::string();
        // The stack's top, known to the thread itself: the reader cuts its fragments there (per-CPU
        // rings; its own ring has it from add_thread), and stack=auto judges them by it (the
        // others are judged by the live decoder only).
        if (on_thread) {
            if (const uint64_t top = kernel::current_thread_stack_top(); top != 0) {
                stack_tops_.remember(static_cast<uint32_t>(tid), top, monotonic_ns(), /*exact=*/true);
            }
        }
        SF_LOG_DEBUG("thread %d '%s'", tid, name.c_str());
        queue_.emit(ThreadInfo{monotonic_ns(), static_cast<uint32_t>(tid), false, std::move(name)});
        bool on_perf = false;
        uint32_t start_bytes = 0;
        if (options_.mode == SamplingMode::kThread && !backend_.signal()) {
            open_lag_.on_open(tid, ThreadKind::kJava);
            // stack=auto: a thread known to run deep opens at its larger size (no reopen).
            start_bytes = auto_stack_ ? auto_stack_->start_bytes(registered_name, tid == vm_start_tid_) : 0;
            on_perf = sampler_->add_thread(tid, 0, start_bytes, tid == vm_start_tid_).ok();
            if (on_perf) {
                threads_.set_on_perf(tid);
            } else {
                fall_back_to_signals_if_denied(tid);
            }
        }
        uint8_t uses = options_.validate ? kUseOracle : 0;
        if (!on_perf && backend_.signal()) uses |= kUseSample;
        if (OracleSampler* timer_sampler = timer(); timer_sampler != nullptr && uses != 0) {
            Status added = on_thread ? timer_sampler->add_current_thread(jni, uses) : timer_sampler->add_thread(tid, uses);
            if (!added.ok()) {
                SF_LOG_WARN("%s: %s", (uses & kUseSample) != 0 ? "signal backend" : "validate",
                            added.error().describe().c_str());
            }
        }
        // stack=auto: after the events' opening and the validator's thread were queued, so that a
        // larger fragment for a thread of a deep family reopens them (and the validator follows).
        if (auto_stack_ && on_perf) {
            auto_stack_->thread_started(static_cast<uint32_t>(tid), registered_name, tid == vm_start_tid_, start_bytes);
        }
    }

    void register_existing_threads(JNIEnv* jni) {
        const pid_t self = current_tid();
        jint count = 0;
        jthread* threads = nullptr;
        jvmtiError error = jvmti_->GetAllThreads(&count, &threads);
        if (error != JVMTI_ERROR_NONE) {
            SF_LOG_WARN("GetAllThreads failed, only threads started from now on are sampled: %s",
                        jvmti_error_text(jvmti_, error).c_str());
            return;
        }
        bool self_seen = false;
        for (jint i = 0; i < count; ++i) {
            Result<pid_t> tid = vm::os_tid_of(jni, threads[i]);
            std::string name = thread_name(jni, threads[i]);
            if (tid.ok() && name != kCodePollThreadName) {
                self_seen |= *tid == self;
                register_thread(*tid, std::move(name), *tid == self ? jni : nullptr, *tid == self);
            } else if (!tid.ok()) {
                SF_LOG_DEBUG("no OS thread id for thread '%s': %s", name.c_str(), tid.error().describe().c_str());
            }
            jni->DeleteLocalRef(threads[i]);
        }
        jvmti_->Deallocate(reinterpret_cast<unsigned char*>(threads));
        if (!self_seen) {
            // The thread running VMInit is the main thread; without VMStructs, it is still known.
            jthread current = nullptr;
            std::string name;
            if (jvmti_->GetCurrentThread(&current) == JVMTI_ERROR_NONE) {
                name = thread_name(jni, current);
                jni->DeleteLocalRef(current);
            }
            register_thread(self, std::move(name), jni, true);
        }
    }

    // The profile shows the agent's own threads (threads=all on perf events): by their thread clocks
    // where no event samples them (Sampler::account_by_clock).
    bool counts_own_threads_by_clock() const {
        return options_.all_threads && !backend_.signal() &&
               (options_.mode == SamplingMode::kThread || options_.mode == SamplingMode::kCpu);
    }

    void add_cpu_events_for_existing_threads() {
        // Inheritance covers only threads created after an event is opened: attach to every
        // thread that exists now, and their future children follow.
        DIR* tasks = opendir("/proc/self/task");
        if (tasks == nullptr) return;
        while (dirent* entry = readdir(tasks)) {
            const pid_t tid = static_cast<pid_t>(std::atoi(entry->d_name));
            if (tid <= 0 || is_own_spawned_thread(tid)) continue;   // counted by their clocks
            if (!sampler_->add_cpus(tid).ok()) break;
        }
        closedir(tasks);
        fall_back_to_signals_if_denied();
    }

    // VmCapture wants poll(jni) every few hundred milliseconds from a thread attached to the VM:
    // a JVMTI agent thread (a daemon), which the JVM does not wait for at exit.
    void start_code_poller(JNIEnv* jni) {
        jclass thread_class = jni->FindClass("java/lang/Thread");
        jmethodID constructor = thread_class ? jni->GetMethodID(thread_class, "<init>", "(Ljava/lang/String;)V") : nullptr;
        jstring name = jni->NewStringUTF(kCodePollThreadName);
        jobject thread = constructor && name ? jni->NewObject(thread_class, constructor, name) : nullptr;
        if (jni->ExceptionCheck()) jni->ExceptionClear();
        if (thread == nullptr) {
            SF_LOG_WARN("cannot create the code-poll thread; redefined classes may be missed");
            return;
        }
        const jvmtiError error = jvmti_->RunAgentThread(thread, &Agent::code_poll_main, this, JVMTI_THREAD_MIN_PRIORITY);
        if (error != JVMTI_ERROR_NONE) {
            SF_LOG_WARN("cannot start the code-poll thread: %s", jvmti_error_text(jvmti_, error).c_str());
        }
        jni->DeleteLocalRef(thread);
        jni->DeleteLocalRef(name);
        jni->DeleteLocalRef(thread_class);
    }

    static void JNICALL code_poll_main(jvmtiEnv*, JNIEnv* jni, void* self) {
        auto* agent = static_cast<Agent*>(self);
        if (agent->capture_->misses_class_prepares()) {
            agent->class_check_due_ = std::chrono::steady_clock::now() + kClassCheckFirst;
            agent->code_poll_.wake_in(kClassCheckFirst);
        }
        agent->code_poll_.run(
            [agent, jni] {
                const uint64_t findings_before = agent->capture_->poll_findings();
                size_t new_modules = 0;
                {
                    EventQueue::InFlight in_flight(agent->queue_);
                    agent->capture_->poll(jni);
                    new_modules = agent->modules_.refresh(monotonic_ns(), agent->queue_);   // libraries loaded since
                }
                return new_modules != 0 || agent->capture_->poll_findings() != findings_before;
            },
            [agent, jni] {
                agent->name_wanted_methods(jni);
                EventQueue::InFlight in_flight(agent->queue_);
                agent->check_classes_if_due(jni);
                if (agent->capture_->recheck_redefinitions(jni) != 0) agent->code_poll_.wake_in(kRedefinitionRecheck);
            });
    }

    // Any thread: a class check soon (kClassCheckFirst), where the VM misses ClassPrepares: the live
    // decoder met an unknown Method*, or a thread started. JDK 21's first unpark of a virtual
    // thread prepares the unparker's classes on the carrier's stack and starts the unparker thread,
    // whose ThreadStart does come (the VT test: 2-4 % of its samples failed before the check at 1 s).
    void ask_for_class_check() {
        VmCapture* vm = capture();
        if (vm == nullptr || !vm->misses_class_prepares()) return;
        classes_wanted_.store(true, std::memory_order_relaxed);
        code_poll_.wake();
    }

    // Code-poll thread (kClassCheckFirst). Asked-for checks come at most every class_check_spacing_,
    // which doubles like the schedule while they find nothing (a JVM starting thousands of threads
    // must not make the checks its cost).
    void check_classes_if_due(JNIEnv* jni) {
        using std::chrono::milliseconds;
        const auto now = std::chrono::steady_clock::now();
        if (!capture_->misses_class_prepares()) return;
        bool due = now >= class_check_due_;
        if (!due && classes_wanted_.load(std::memory_order_relaxed)) {
            const auto allowed = class_check_last_ + class_check_spacing_;
            if (now < allowed) {
                code_poll_.wake_in(std::chrono::duration_cast<milliseconds>(allowed - now) + milliseconds(1));
                return;
            }
            due = true;
        }
        if (!due) return;
        classes_wanted_.store(false, std::memory_order_relaxed);
        class_check_last_ = now;
        const bool found = capture_->announce_unprepared_classes(jni) != 0;
        class_check_interval_ = found ? kClassCheckFirst : std::min(2 * class_check_interval_, kClassCheckMax);
        class_check_spacing_ = found ? kClassCheckSpacing : std::min(2 * class_check_spacing_, kClassCheckMax);
        class_check_due_ = now + class_check_interval_;
        code_poll_.wake_in(class_check_interval_);
    }

    // The live profile's requests for names (lazy names), answered into the stream.
    void name_wanted_methods(JNIEnv* jni) {
        std::vector<uint64_t> ids;
        {
            std::lock_guard<std::mutex> lock(wanted_names_mutex_);
            ids.swap(wanted_names_);
        }
        if (ids.empty()) return;
        EventQueue::InFlight in_flight(queue_);
        capture_->name_methods(jni, ids);
    }

    void stop_code_poller() { code_poll_.stop(); }

    // mode=jvmti: GetAllStackTraces every interval from an agent thread; no perf event is opened.
    void start_jvmti_sampler(JNIEnv* jni) {
        jvmti_sampler_ = std::make_unique<JvmtiSampler>(jvmti_, queue_, *capture_, options_.interval_ns);
        Status started = jvmti_sampler_->start(jni);
        if (!started.ok()) SF_LOG_ERROR("jvmti mode: no sampler thread, nothing is sampled: %s", started.error().describe().c_str());
    }

    // Before the reader's final drain, so that the last traces reach the stream.
    void stop_jvmti_sampler() {
        if (!jvmti_sampler_) return;
        if (!jvmti_sampler_->stop(kShutdownTimeoutMs)) {
            SF_LOG_WARN("jvmti mode: the sampler thread did not end within %d ms", kShutdownTimeoutMs);
        }
        SF_LOG_INFO("%s", jvmti_sampler_->describe().c_str());
    }

    // The own threads' CPU time so far (the reader's and the decoder's read from their thread clocks
    // while they run; the code poll's and the watcher's as of their last round).
    uint64_t own_threads_cpu_now() const {
        return sampler_->reader_cpu_now() + (live_profile_ ? live_profile_->decoder_cpu_now() : 0) + code_poll_.cpu_ns() +
               (task_watcher_ ? task_watcher_->cpu_ns() : 0);
    }

    // What the agent's own threads cost, exactly: the part of the overhead that runs beside the
    // application (the kernel's work in sampled threads is in bench/sample-cost, not here).
    // `own_at_stop`, `process_at_stop`: both CPU times when sampling ended, so that the share while
    // sampling (what a long run pays) can be told from the stop's one-time work (the last drain, the
    // last names, the file), which weighs on a short run.
    void log_agent_cpu(uint64_t own_at_stop, uint64_t process_at_stop, const TimerSkips& skips) {
        const uint64_t reader = sampler_->stats().reader_cpu_ns;
        const uint64_t decoder = live_profile_ ? live_profile_->counts(0).decoder_cpu_ns : 0;
        const uint64_t poll = code_poll_.cpu_ns();
        const uint64_t tasks = task_watcher_ ? task_watcher_->cpu_ns() : 0;
        const double process_ms = static_cast<double>(process_cpu_ns()) / 1e6;
        const double agent_ms = static_cast<double>(reader + decoder + poll + tasks) / 1e6;
        SF_LOG_INFO("agent threads CPU: %.1f ms (reader %.1f, decoder %.1f, code poll %.1f, thread watcher %.1f) = "
                    "%.2f%% of the process's %.0f ms; page faults: reader %llu, decoder %llu",
                    agent_ms, static_cast<double>(reader) / 1e6, static_cast<double>(decoder) / 1e6,
                    static_cast<double>(poll) / 1e6, static_cast<double>(tasks) / 1e6,
                    process_ms > 0 ? 100.0 * agent_ms / process_ms : 0.0, process_ms,
                    static_cast<unsigned long long>(sampler_->stats().reader_page_faults),
                    static_cast<unsigned long long>(live_profile_ ? live_profile_->counts(0).decoder_page_faults : 0));
        const double own_sampling_ms = static_cast<double>(own_at_stop) / 1e6;
        const double process_sampling_ms = static_cast<double>(process_at_stop) / 1e6;
        SF_LOG_INFO("agent threads CPU while sampling: %.1f ms = %.2f%% of the process's %.0f ms until the last sample; "
                    "the stop (last drain and decode, names, the file) took them %.1f ms more",
                    own_sampling_ms, process_sampling_ms > 0 ? 100.0 * own_sampling_ms / process_sampling_ms : 0.0,
                    process_sampling_ms, std::max(0.0, agent_ms - own_sampling_ms));
        // Not in the line above: the JVM's own threads ran this, in the agent's callbacks.
        SF_LOG_INFO("agent code on the JVM's threads CPU: %s = %.2f%% of the process's CPU time",
                    callback_cpu_.describe().c_str(),
                    process_ms > 0 ? 100.0 * static_cast<double>(callback_cpu_.total_ns()) / 1e6 / process_ms : 0.0);
        {
            const SamplerStats sampled = sampler_->stats();
            SF_LOG_DEBUG("reader: %llu rescans of the maps for samples in unknown code, %llu libraries announced so",
                         static_cast<unsigned long long>(sampled.module_rescans),
                         static_cast<unsigned long long>(sampled.modules_found));
        }
        if (task_watcher_) {
            SF_LOG_DEBUG("thread watcher: %llu scans of /proc/self/task in %llu ticks (%llu looks at the thread count "
                         "by the reader)",
                         static_cast<unsigned long long>(task_watcher_->scans()),
                         static_cast<unsigned long long>(task_watcher_->ticks()),
                         static_cast<unsigned long long>(task_watcher_->reader_looks()));
        }
        const SamplerStats stats = sampler_->stats();
        if (stats.clock_counted_ns != 0) {
            // The kernel's count of each clock event against its ticks (per-CPU events: with every
            // thread they inherited).
            const uint64_t between = stats.clock_counted_ns > stats.clock_ticked_ns ? stats.clock_counted_ns - stats.clock_ticked_ns : 0;
            SF_LOG_INFO("clock events: the threads' CPU time they counted %.1f ms (%.1f%% of the process's), ticks "
                        "(samples and lost) %.1f ms; %.1f ms (%.2f%% of the process's CPU time) counted after a "
                        "thread's last tick (its last partial period at its end, a reopen or the stop) or in periods "
                        "the timer skipped (%.1f ms at least: mostly time the hypervisor gave to other guests, which "
                        "the clocks count and the process's CPU time does not)",
                        static_cast<double>(stats.clock_counted_ns) / 1e6,
                        process_ms > 0 ? 100.0 * static_cast<double>(stats.clock_counted_ns) / 1e6 / process_ms : 0.0,
                        static_cast<double>(stats.clock_ticked_ns) / 1e6, static_cast<double>(between) / 1e6,
                        process_ms > 0 ? 100.0 * static_cast<double>(between) / 1e6 / process_ms : 0.0,
                        static_cast<double>(skips.skipped_ns) / 1e6);
            // Measured only where the thread still ran when its event closed (the JVM's and the
            // agent's threads, the main thread, a stack=auto reopen): a Java thread's ring closes
            // after it ended. Per-thread events see a thread from the end of each context switch
            // on, so the scheduler's work at every wake-up is CPU time of the thread's that they
            // neither count nor sample (~12 us per wake-up on the 2-CPU VM of docs/benchmarks.md).
            SF_LOG_INFO("clock events: %.1f ms (%.2f%% of the process's CPU time) of the CPU time of %llu threads that "
                        "still ran when their event closed was not counted by it (the kernel's scheduling at each "
                        "wake-up, which a per-thread event does not see), so no sample sees it",
                        static_cast<double>(stats.clock_uncounted_ns) / 1e6,
                        process_ms > 0 ? 100.0 * static_cast<double>(stats.clock_uncounted_ns) / 1e6 / process_ms : 0.0,
                        static_cast<unsigned long long>(stats.clock_uncounted_threads));
        }
        if (const OpenLag::Totals lag = open_lag_.totals(); lag.total_ns() != 0) {
            std::string kinds;
            for (size_t k = 0; k < kThreadKinds; ++k) {
                if (lag.threads[k] == 0) continue;
                char part[96];
                std::snprintf(part, sizeof part, "%s%s %.1f ms (%llu threads)", kinds.empty() ? "" : ", ",
                              thread_kind_name(static_cast<ThreadKind>(k)), static_cast<double>(lag.ns[k]) / 1e6,
                              static_cast<unsigned long long>(lag.threads[k]));
                kinds += part;
            }
            SF_LOG_INFO("before their events opened (after the first ProcessCpu): the threads ran %.1f ms (%.2f%% of "
                        "the process's CPU time) that no sample sees: %s",
                        static_cast<double>(lag.total_ns()) / 1e6,
                        process_ms > 0 ? 100.0 * static_cast<double>(lag.total_ns()) / 1e6 / process_ms : 0.0, kinds.c_str());
        }
        if (stats.cycles != 0) {
            std::string realtime_changes;
            if (stats.realtime_given_up != 0) {
                realtime_changes = "; real time given up " + std::to_string(stats.realtime_given_up) +
                                   "x for a busy 100 ms, taken back " + std::to_string(stats.realtime_regained) + "x";
            }
            SF_LOG_INFO("reader (%s): %llu cycles every %.1f ms (%llu early: a ring's watermark or a wake-up; %llu "
                        "watermark wake-ups waited on; %llu later, after quiet cycles), %llu of %llu ring looks found news%s",
                        kernel::reader_priority_name(stats.reader_priority), static_cast<unsigned long long>(stats.cycles), static_cast<double>(stats.cadence_ns) / 1e6,
                        static_cast<unsigned long long>(stats.early_cycles),
                        static_cast<unsigned long long>(stats.quiet_wakes),
                        static_cast<unsigned long long>(stats.lengthened_cycles),
                        static_cast<unsigned long long>(stats.ring_drains),
                        static_cast<unsigned long long>(stats.ring_looks), realtime_changes.c_str());
        }
    }

    void log_summary(const TimerSkips& skips, const ProcessCpu& at_stop) {
        const StreamCounts& counts = writer_.counts();
        std::string oracle_text;
        if (options_.validate && timer() != nullptr) {
            const OracleStats stats = timer()->stats();
            oracle_text = ", oracle " + std::to_string(counts.of(EventKind::kOracle)) + " (AsyncGetCallTrace ok " +
                          std::to_string(counts.oracle_traces_ok) + ", buffer full " + std::to_string(stats.dropped) +
                          ", grown thread's copy cut to stack= " + std::to_string(stats.cut) + ")";
        }
        if (backend_.signal()) {
            oracle_text += "; signal backend: timer buffer full " + std::to_string(timer()->stats().dropped);
        }
        const SamplerStats stats = sampler_->stats();
        const uint64_t sampled = counts.of(EventKind::kSample);
        // What the kernel copied of each sample's stack, and what the reader kept of it: cut at the
        // thread's top, or where the decoder's walks of the thread stop reading.
        std::string stack_bytes_text;
        const uint64_t perf_sampled = sampled > stats.clock_samples ? sampled - stats.clock_samples : 0;
        if (perf_sampled != 0 && stats.stack_bytes_written != 0) {
            char kept[160];
            snprintf(kept, sizeof kept, ", stack per sample %.1f KiB from the kernel, %.1f KiB kept",
                     static_cast<double>(stats.stack_bytes_written) / 1024.0 / static_cast<double>(perf_sampled),
                     static_cast<double>(stats.stack_bytes_kept) / 1024.0 / static_cast<double>(perf_sampled));
            stack_bytes_text = kept;
        }
        if (stats.stack_holes_faulted != 0) {
            stack_bytes_text += ", " + std::to_string(stats.stack_holes_faulted) +
                                " untouched stack pages where copies stopped faulted in";
        }
        if (stats.start_fragments_trimmed != 0) {
            stack_bytes_text += ", " + std::to_string(stats.start_fragments_trimmed) +
                                " samples of a long JVM start (held until VMInit) kept with the top 4 KiB of their stack only";
        }
        if (stats.clock_threads != 0) {
            stack_bytes_text += ", " + std::to_string(stats.clock_samples) + " of the samples from " +
                                std::to_string(stats.clock_threads) + " own threads' clocks (not sampled)";
        }
        SF_LOG_INFO("summary: %llu samples, %llu lost%s; %llu rings opened, reader CPU %.1f ms%s, %llu events dropped; "
                    "events: %s",
                    static_cast<unsigned long long>(sampled),
                    static_cast<unsigned long long>(counts.lost_samples), oracle_text.c_str(),
                    static_cast<unsigned long long>(stats.threads_opened), static_cast<double>(stats.reader_cpu_ns) / 1e6,
                    stack_bytes_text.c_str(), static_cast<unsigned long long>(queue_.dropped()), counts.describe().c_str());
        if (stats.throttles != 0) {
            SF_LOG_WARN("the kernel throttled the sampling events %llu times (too many samples per tick for "
                        "kernel.perf_event_max_sample_rate, which the kernel lowers when its sampling interrupts "
                        "take longer than kernel.perf_cpu_time_max_percent allows): the samples of those stretches "
                        "are missing, and the profile covers that much less of the process's CPU time",
                        static_cast<unsigned long long>(stats.throttles));
        }
        if (skips.unexplained_ns != 0) {
            SF_LOG_WARN("the kernel's sampling timer skipped %.1f ms of periods (%.1f%% of the process's CPU time) "
                        "beyond what the hypervisor's steal explains (%.1f ms): its interrupt came more than a period "
                        "late and it took one sample for the periods it missed, so the profile covers that much less "
                        "of the process's CPU time (the coverage line); its shares are unbiased only if the delays "
                        "were; a longer interval= loses less",
                        static_cast<double>(skips.unexplained_ns) / 1e6,
                        100.0 * static_cast<double>(skips.unexplained_ns) /
                            static_cast<double>(std::max<uint64_t>(at_stop.user_ns + at_stop.system_ns, 1)),
                        static_cast<double>(skips.by_steal_ns) / 1e6);
        }
        if (stats.late_samples != 0) {
            SF_LOG_INFO("reader: %llu samples were read after newer events had been written (up to %.1f ms after their "
                        "tick: their CPU was held up between the tick and the ring write, e.g. by the hypervisor) and "
                        "went out of time order; the hold-back grew from %.0f to %.0f ms",
                        static_cast<unsigned long long>(stats.late_samples),
                        static_cast<double>(stats.late_max_delay_ns) / 1e6,
                        static_cast<double>(Sampler::kInitialHoldbackNs) / 1e6,
                        static_cast<double>(stats.holdback_ns) / 1e6);
        }
        if (!live_profile_) {
            SF_LOG_INFO("mode: %s", mode_text(options_).c_str());
            if (const std::string memory = ring_memory_text(); !memory.empty()) SF_LOG_INFO("%s", memory.substr(3).c_str());
            if (const std::string short_lived = short_threads_text(); !short_lived.empty()) {
                SF_LOG_INFO("%s", short_lived.substr(3).c_str());
            }
        }
        if (auto_stack_ && !live_profile_) SF_LOG_INFO("%s", stack_text().substr(3).c_str());
        warn_of_threads_beyond_cpus();
        if (!kernel_unsampled_.empty()) {
            rusage usage{};
            getrusage(RUSAGE_SELF, &usage);
            const double user_ms = static_cast<double>(usage.ru_utime.tv_sec) * 1e3 + static_cast<double>(usage.ru_utime.tv_usec) / 1e3;
            const double sys_ms = static_cast<double>(usage.ru_stime.tv_sec) * 1e3 + static_cast<double>(usage.ru_stime.tv_usec) / 1e3;
            SF_LOG_INFO("kernel time not sampled: system time was %.1f%% of the process's CPU time (user %.0f ms, "
                        "system %.0f ms) and is not in the profile (%s)",
                        user_ms + sys_ms > 0 ? 100.0 * sys_ms / (user_ms + sys_ms) : 0.0, user_ms, sys_ms,
                        kernel_unsampled_.c_str());
        }
        if (writer_.recording()) {
            SF_LOG_INFO("recording %s: %llu bytes%s", options_.record_path.c_str(),
                        static_cast<unsigned long long>(writer_.bytes_written()),
                        counts.write_errors ? " (incomplete: a write failed)" : "");
        }
    }

    // JVMTI callbacks: plain functions forwarding to the one agent.
    static void JNICALL cb_vm_init(jvmtiEnv*, JNIEnv* jni, jthread) {
        Agent* const agent = the_agent();
        CallbackCpu::Scope timed(agent->callback_cpu_, CallbackCpu::kVmInit);
        agent->go_live(jni);
    }
    static void JNICALL cb_vm_death(jvmtiEnv*, JNIEnv*) { the_agent()->shutdown(); }
    static void JNICALL cb_thread_start(jvmtiEnv*, JNIEnv* jni, jthread thread) {
        Agent* const agent = the_agent();
        CallbackCpu::Scope timed(agent->callback_cpu_, CallbackCpu::kThreadStart);
        agent->on_thread_start(jni, thread);
        agent->ask_for_class_check();
    }
    static void JNICALL cb_thread_end(jvmtiEnv*, JNIEnv* jni, jthread thread) {
        Agent* const agent = the_agent();
        CallbackCpu::Scope timed(agent->callback_cpu_, CallbackCpu::kThreadEnd);
        agent->on_thread_end(jni, thread);
    }
    static void JNICALL cb_native_method_bind(jvmtiEnv* jvmti, JNIEnv* jni, jthread thread, jmethodID method,
                                              void* address, void** new_address_ptr) {
        Agent* const agent = the_agent();
        CallbackCpu::Scope timed(agent->callback_cpu_, CallbackCpu::kNativeBind);
        native_bind::on_native_method_bind(jvmti, jni, thread, method, address, new_address_ptr);
        agent->announce_library_of(reinterpret_cast<uint64_t>(address));
    }
    // A native method bound into a library mapped since the last scan of /proc/self/maps
    // (System.load): the code poll would find it in 5-60 s, a sample whose top lies in it at once,
    // and a library whose code only calls Java back (a comparator, a thread it attached) maybe
    // never, so walks through its frames below Java code stopped short. Announced now; once per
    // library, since the scan makes its range known.
    void announce_library_of(uint64_t address) {
        if (!live_.load(std::memory_order_acquire) || modules_.covers(address)) return;
        EventQueue::InFlight in_flight(queue_);
        modules_.refresh(monotonic_ns(), queue_);
    }
    // Every class loaded passes here too, with no class being redefined: nothing to do then. Enabled
    // in go_live: RedefineClasses and RetransformClasses exist only in the live phase.
    static void JNICALL cb_class_file_load_hook(jvmtiEnv*, JNIEnv* jni, jclass class_being_redefined, jobject,
                                                const char*, jobject, jint, const unsigned char*, jint*,
                                                unsigned char**) {
        if (class_being_redefined == nullptr) return;
        Agent* const agent = the_agent();
        CallbackCpu::Scope timed(agent->callback_cpu_, CallbackCpu::kRedefinition);
        VmCapture* const capture = agent->capture();
        if (capture == nullptr) return;
        capture->on_class_redefining(jni, class_being_redefined);
        agent->code_poll_.wake_in(kRedefinitionRecheck);
    }
    // AsyncGetCallTrace answers only while ClassLoad events are enabled (it relies on the
    // jmethodIDs they cause); nothing to do with the event itself.
    static void JNICALL cb_class_load(jvmtiEnv*, JNIEnv*, jthread, jclass) {}
    // The code callbacks stamp their events on entry and emit them after JVMTI calls; they hold
    // an InFlight meanwhile (see EventQueue::InFlight).
    static void JNICALL cb_class_prepare(jvmtiEnv*, JNIEnv* jni, jthread thread, jclass klass) {
        Agent* const agent = the_agent();
        CallbackCpu::Scope timed(agent->callback_cpu_, CallbackCpu::kClassPrepare);
        EventQueue::InFlight in_flight(agent->queue_);
        if (VmCapture* capture = agent->capture()) capture->on_class_prepare(jni, thread, klass);
    }
    static void JNICALL cb_compiled_method_load(jvmtiEnv*, jmethodID method, jint code_size, const void* code_addr,
                                                jint map_length, const jvmtiAddrLocationMap* map,
                                                const void* compile_info) {
        Agent* const agent = the_agent();
        CallbackCpu::Scope timed(agent->callback_cpu_, CallbackCpu::kCompiledMethodLoad);
        EventQueue::InFlight in_flight(agent->queue_);
        if (VmCapture* capture = agent->capture()) {
            capture->on_compiled_method_load(method, code_size, code_addr, map_length, map, compile_info);
        }
    }
    static void JNICALL cb_compiled_method_unload(jvmtiEnv*, jmethodID method, const void* code_addr) {
        Agent* const agent = the_agent();
        CallbackCpu::Scope timed(agent->callback_cpu_, CallbackCpu::kCompiledMethodUnload);
        EventQueue::InFlight in_flight(agent->queue_);
        if (VmCapture* capture = agent->capture()) capture->on_compiled_method_unload(method, code_addr);
    }
    static void JNICALL cb_dynamic_code_generated(jvmtiEnv*, const char* name, const void* address, jint length) {
        Agent* const agent = the_agent();
        CallbackCpu::Scope timed(agent->callback_cpu_, CallbackCpu::kDynamicCode);
        EventQueue::InFlight in_flight(agent->queue_);
        if (VmCapture* capture = agent->capture()) capture->on_dynamic_code_generated(name, address, length);
    }

    static constexpr jvmtiEvent kEvents[] = {
        JVMTI_EVENT_VM_INIT,
        JVMTI_EVENT_VM_DEATH,
        JVMTI_EVENT_THREAD_START,
        JVMTI_EVENT_THREAD_END,
        JVMTI_EVENT_CLASS_LOAD,
        JVMTI_EVENT_CLASS_PREPARE,
        JVMTI_EVENT_COMPILED_METHOD_LOAD,
        JVMTI_EVENT_COMPILED_METHOD_UNLOAD,
        JVMTI_EVENT_DYNAMIC_CODE_GENERATED,
    };

    JavaVM* vm_;
    jvmtiEnv* jvmti_;
    const AgentOptions options_;
    bool attach_ = false;
    pid_t vm_start_tid_ = 0;   // the thread that ran VMInit (not when attached): stack=auto starts it large
    bool disabled_ = false;
    CallbackCpu callback_cpu_;   // the agent's code on the JVM's threads
    EventQueue queue_;
    StreamWriter writer_;
    std::unique_ptr<OracleSampler> oracle_;           // owns timer_; set once, before timer_
    std::atomic<OracleSampler*> timer_{nullptr};      // validate's oracle and/or the signal backend
    BackendSelection backend_;                        // perf or the signal backend, for new threads
    // go_live, then the code-poll thread and the reader (a sample in a library loaded since); before
    // sampler_, which uses it.
    ModuleTracker modules_;
    // Every registered thread's stack top; before sampler_ and auto_stack_, which use it.
    StackTops stack_tops_;
    std::unique_ptr<Sampler> sampler_;
    std::string kernel_unsampled_;                    // why kernel-mode ticks are not sampled ("" when they are)
    std::unique_ptr<TaskWatcher> task_watcher_;       // threads=all
    std::unique_ptr<AutoInterval> auto_interval_;   // interval=auto; fed by the live profile's thread
    std::unique_ptr<AutoStack> auto_stack_;         // stack=auto; fed by the live profile's thread
    std::unique_ptr<VmCapture> capture_;
    std::atomic<bool> classes_wanted_{false};   // ask_for_class_check
    std::chrono::milliseconds class_check_interval_{kClassCheckFirst};   // code-poll thread
    std::chrono::steady_clock::time_point class_check_due_{};
    std::chrono::steady_clock::time_point class_check_last_{};
    std::chrono::milliseconds class_check_spacing_{kClassCheckSpacing};
    PeriodicPoll code_poll_{std::chrono::milliseconds(kCodePollIntervalMs),
                            std::chrono::milliseconds(kCodePollMaxIntervalMs)};   // the code-poll thread's loop
    std::unique_ptr<JvmtiSampler> jvmti_sampler_;   // mode=jvmti only
    std::unique_ptr<LiveProfile> live_profile_;   // the writer's tap: fed by the reader thread
    std::mutex wanted_names_mutex_;
    std::vector<uint64_t> wanted_names_;   // lazy names: asked for by the decoder thread, named by the code poll
    std::unique_ptr<ProfilePusher> pusher_;       // push=: fed by the live profile's thread
    std::atomic<bool> capture_ready_{false};
    std::atomic<bool> live_{false};
    std::atomic<bool> shut_down_{false};
    // The process's and the machine's CPU times as sampling began (the at_start ProcessCpu event).
    ProcessCpu cpu_at_start_;
    std::atomic<uint64_t> threads_ended_{0};          // Java threads' ThreadEnd
    std::atomic<uint64_t> short_threads_{0};          // of those, threads that ran less than one period
    std::atomic<uint64_t> short_threads_cpu_ns_{0};   // and their CPU time

    ThreadRegistry threads_;   // live registered threads, and which of them perf samples
    OpenLag open_lag_;         // mode=thread: the threads' CPU time before their events opened
    // Sampling from OnLoad (start_sampling_early): when it began (0: at VMInit), the hold on the
    // reader until go_live has announced the VM, and the main thread until VMInit registers it.
    uint64_t early_from_ns_ = 0;
    std::unique_ptr<EventQueue::InFlight> early_hold_;
    std::atomic<pid_t> early_java_tid_{0};
};

// An attach command for the agent already loaded (or for none): answered in the reply file.
jint control(const AgentOptions& options) {
    const std::string& reply = options.reply_path;
    Agent* const agent = the_agent();
    const bool running = agent != nullptr && !agent->is_shut_down();
    switch (options.action) {
    case AgentAction::kStatus:
        return write_reply(reply, running ? agent->status_text() : "running: no\n", true), JNI_OK;
    case AgentAction::kDump: {
        if (!running) return write_reply(reply, "", false, "not running"), JNI_ERR;
        if (agent->live_profile() == nullptr) {
            return write_reply(reply, "", false, "no live profile: the agent records only (record= without file=); "
                                                 "decode the recording with stackfrag replay"), JNI_ERR;
        }
        Result<std::string> written = agent->live_profile()->dump(options.file, kShutdownTimeoutMs * 2);
        if (!written.ok()) return write_reply(reply, "", false, written.error().describe()), JNI_ERR;
        return write_reply(reply, "written " + *written + "\n", true), JNI_OK;
    }
    case AgentAction::kStop: {
        if (!running) return write_reply(reply, "", false, "not running"), JNI_ERR;
        // A profile asked of a session that only records: it still stops (the recording is complete
        // then), and the answer says where the profile is to come from instead of an `ok` beside no file.
        const bool file_unwritable = !options.file.empty() && agent->live_profile() == nullptr;
        agent->shutdown(options.file);
        if (file_unwritable) {
            const std::string& recording = agent->options().record_path;
            return write_reply(reply, "stopped\n", false,
                               "no profile written to " + options.file +
                                   ": this session had no live profile (started without file=/-f)" +
                                   (agent->options().records()
                                        ? "; make it from the recording: stackfrag report " + recording + " -o " + options.file
                                        : std::string())),
                   JNI_OK;
        }
        std::string text = "stopped\n";
        if (LiveProfile* live = agent->live_profile()) text += live->summary_text() + "\n";
        text += "mode: " + mode_text(agent->options()) + "\n";
        text += "backend: " + agent->backend_text() + "\n";
        if (const std::string memory = agent->ring_memory_text(); !memory.empty()) text += memory.substr(3) + "\n";
        if (const std::string short_lived = agent->short_threads_text(); !short_lived.empty()) text += short_lived.substr(3) + "\n";
        return write_reply(reply, text, true), JNI_OK;
    }
    case AgentAction::kNone:
    case AgentAction::kStart:
        break;
    }
    return write_reply(reply, "already running; options unchanged (stop first to change them)\n", true), JNI_OK;
}

// mode=auto's question before it takes mode=cpu: can this user lock a ring of `config` on every
// CPU the JVM may run on at once? The events are opened disabled and closed again (the reader
// opens its own). A CPU that went offline meanwhile is no answer; the first other failure is.
Status map_cpu_rings(const kernel::SamplingConfig& config) {
    Result<std::vector<int>> cpus = kernel::cpus_allowed();
    if (!cpus.ok()) return std::move(cpus).take_error();
    std::vector<kernel::PerfEvent> held;
    for (int cpu : cpus.value()) {
        Result<kernel::PerfEvent> event = kernel::PerfEvent::open_cpu(current_tid(), cpu, config);
        if (event.ok()) {
            held.push_back(std::move(event).value());
        } else if (event.error().sys_errno != ENODEV && event.error().sys_errno != ESRCH) {
            return std::move(event).take_error();
        }
    }
    return {};
}

}  // namespace

jint agent_load(JavaVM* vm, const char* options_text, bool attach) {
    pin_library();
    const std::string text = options_text != nullptr ? options_text : "";
    Result<AgentOptions> options = parse_options(text);
    if (!options.ok()) {
        std::fprintf(stderr, "stackfrag: %s\n", options.error().describe().c_str());
        if (attach) (void)write_reply(find_reply_path(text), "", false, options.error().describe());
        return JNI_ERR;
    }
    // mode=auto: per-CPU events at the start (if their rings can be locked), per-thread ones on attach.
    // This thread's affinity is the process's: the JVM's threads inherit it (kernel::cpus_allowed).
    if (Result<std::vector<int>> online = kernel::online_cpus(); online.ok()) {
        options->cpus_online = static_cast<uint32_t>(online->size());
    }
    if (Result<std::vector<int>> allowed = kernel::cpus_allowed(); allowed.ok()) {
        options->cpus_allowed = static_cast<uint32_t>(allowed->size());
    }
    resolve_mode(*options, attach, map_cpu_rings);
    const bool command = options->action == AgentAction::kStop || options->action == AgentAction::kDump ||
                         options->action == AgentAction::kStatus;
    if (command && !attach) {
        std::fprintf(stderr, "stackfrag: stop, dump and status are commands for a running agent (jcmd PID "
                             "JVMTI.agent_load or stackfrag attach), not start-up options\n");
        return JNI_ERR;
    }
    // A stopped agent stays in memory (its threads may still run its code); a start replaces it.
    if (Agent* loaded = the_agent(); command || (loaded != nullptr && !loaded->is_shut_down())) {
        try {
            return control(*options);
        } catch (const std::exception& e) {   // never into the JVM's attach thread
            SF_LOG_ERROR("attach: %s", e.what());
            return JNI_ERR;
        }
    }
    Status logging = configure_log(options->log_path, options->log_level);
    if (!logging.ok()) {
        std::fprintf(stderr, "stackfrag: bad value '%s' for log: %s\n", options->log_path.c_str(),
                     logging.error().describe().c_str());
        return JNI_ERR;
    }
    std::unique_ptr<RecordingWriter> recording;
    if (options->records()) {
        RecordingHeader header;
        header.pid = static_cast<uint32_t>(getpid());
        header.created_unix_ns = unix_time_ns();
        header.created_monotonic_ns = monotonic_ns();
        header.producer = kProducer;
        header.command_line = read_command_line();
        Result<std::unique_ptr<RecordingWriter>> created = RecordingWriter::create(options->record_path, header);
        if (!created.ok()) {
            // Asked-for output that cannot be written is a user error, like a bad option.
            std::fprintf(stderr, "stackfrag: bad value '%s' for record: %s\n", options->record_path.c_str(),
                         created.error().describe().c_str());
            if (attach) (void)write_reply(options->reply_path, "", false, "bad value '" + options->record_path +
                                                                          "' for record: " + created.error().describe());
            return JNI_ERR;
        }
        recording = std::move(created).value();
    }
    SF_LOG_INFO("%s %s", attach ? "attached:" : "loaded:", describe(*options).c_str());

    jvmtiEnv* jvmti = nullptr;
    if (vm->GetEnv(reinterpret_cast<void**>(&jvmti), JVMTI_VERSION_1_2) != JNI_OK || jvmti == nullptr) {
        SF_LOG_ERROR("JVMTI 1.2 is not available; the JVM runs on without stackfrag");
        return JNI_OK;
    }
    const std::string reply = options->reply_path;
    Agent* const agent = new Agent(vm, jvmti, std::move(options).value(), std::move(recording));
    g_agent.store(agent, std::memory_order_release);   // before setup() enables the callbacks
    agent->setup(attach);
    if (attach) {
        JNIEnv* jni = nullptr;
        if (vm->GetEnv(reinterpret_cast<void**>(&jni), JNI_VERSION_1_6) == JNI_OK) {
            agent->go_live(jni);
        } else {
            SF_LOG_ERROR("no JNIEnv in Agent_OnAttach; the JVM runs on without stackfrag");
        }
        if (!agent->sampling()) return write_reply(reply, "", false, "sampling could not start (see the agent's log)"), JNI_ERR;
        (void)write_reply(reply, "started: " + describe(agent->options()) + "\n", true);
    }
    return JNI_OK;
}

void agent_unload() {
    if (Agent* agent = the_agent()) agent->shutdown();
}

}  // namespace sf::agent
