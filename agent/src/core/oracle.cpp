#include "oracle.hpp"

#include <pthread.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "stackfrag/base/clock.hpp"
#include "log.hpp"

namespace sf::agent {

struct OracleSampler::ThreadSlot {
    pid_t tid = 0;
    timer_t timer{};
    bool has_timer = false;
    uint64_t stack_top = 0;               // 0: unknown
    uint64_t stack_bottom = 0;
    std::atomic<JNIEnv*> jni{nullptr};
    std::atomic<bool> active{false};
    std::atomic<uint8_t> uses{0};          // TimerUse bits
    std::atomic<uint32_t> stack_bytes{0};  // set_stack_bytes; 0: the buffer's stack_bytes
    // While the handler is between taking its time stamp and handing the entry over: no earlier
    // than that stamp (0 when idle). The reader must not release events past it (in_flight_since).
    std::atomic<uint64_t> busy_since{0};
};

namespace {

struct EntryHeader {
    uint64_t time_ns;
    uint32_t tid;
    uint32_t stack_size;
    Registers regs;
    int32_t agct_status;
    uint8_t uses;                          // the thread's TimerUse bits at this tick
};

constexpr size_t kPageSize = 4096;
constexpr size_t kMaxPagesPerCopy = 17;   // 65528 bytes from an unaligned sp span 17 pages

size_t round_up(size_t value, size_t to) { return (value + to - 1) / to * to; }

}  // namespace

// Two pools of preallocated entries: `entries` holding stack_bytes of stack, `large` holding
// large_stack_bytes (stack=auto's grown threads). Entry indices below `entries` are the first pool's.
struct OracleSampler::Buffer {
    struct Pool {
        Pool(uint32_t entries, uint32_t stack_bytes, uint32_t max_frames)
            : stack_bytes(stack_bytes),
              stack_offset(round_up(sizeof(EntryHeader), 16)),
              frames_offset(round_up(stack_offset + stack_bytes, 16)),
              stride(round_up(frames_offset + max_frames * sizeof(AsgctFrame), 64)),
              storage(entries == 0 ? nullptr : new (std::nothrow) uint8_t[stride * entries]),
              free_entries(entries + 1) {}
        uint8_t* entry(uint32_t index) { return storage.get() + static_cast<size_t>(index) * stride; }

        const uint32_t stack_bytes;
        const size_t stack_offset;
        const size_t frames_offset;
        const size_t stride;
        std::unique_ptr<uint8_t[]> storage;
        // Fixed-size lock-free queue of entry indices: no allocation, so usable in the handler.
        boost::lockfree::queue<uint32_t, boost::lockfree::fixed_sized<true>> free_entries;
    };

    Buffer(uint32_t entries, uint32_t stack_bytes, uint32_t max_frames, uint32_t large_entries,
           uint32_t large_stack_bytes)
        : entry_count(entries),
          large_count(large_stack_bytes > stack_bytes ? large_entries : 0),
          stack_bytes(stack_bytes),
          max_frames(max_frames),
          small(entries, stack_bytes, max_frames),
          large(large_count, large_count != 0 ? large_stack_bytes : 0, max_frames),
          filled_entries(entries + large_count + 1) {
        if (!allocated()) return;
        for (uint32_t i = 0; i < entries; ++i) (void)small.free_entries.bounded_push(i);
        for (uint32_t i = 0; i < large_count; ++i) (void)large.free_entries.bounded_push(entry_count + i);
    }

    bool allocated() const { return small.storage != nullptr && (large_count == 0 || large.storage != nullptr); }
    Pool& pool_of(uint32_t index) { return index < entry_count ? small : large; }
    uint8_t* entry(uint32_t index) {
        return index < entry_count ? small.entry(index) : large.entry(index - entry_count);
    }
    EntryHeader* header(uint32_t index) { return reinterpret_cast<EntryHeader*>(entry(index)); }
    uint8_t* stack(uint32_t index) { return entry(index) + pool_of(index).stack_offset; }
    uint32_t stack_capacity(uint32_t index) { return pool_of(index).stack_bytes; }
    AsgctFrame* frames(uint32_t index) { return reinterpret_cast<AsgctFrame*>(entry(index) + pool_of(index).frames_offset); }
    void release(uint32_t index) { (void)pool_of(index).free_entries.bounded_push(index); }

    const uint32_t entry_count;
    const uint32_t large_count;
    const uint32_t stack_bytes;
    const uint32_t max_frames;
    Pool small;
    Pool large;
    boost::lockfree::queue<uint32_t, boost::lockfree::fixed_sized<true>> filled_entries;
    std::atomic<uint64_t> taken{0};
    std::atomic<uint64_t> dropped{0};
    std::atomic<uint64_t> cut{0};
    std::atomic<uint64_t> samples_dropped{0};   // of ticks with kUseSample: reported as Lost
};

namespace {

// The handler's view of the sampler, set once before the first timer starts and never cleared
// (a late signal must still find valid memory).
std::atomic<OracleSampler::Buffer*> g_buffer{nullptr};
std::atomic<AsgctFunction> g_asgct{nullptr};
std::atomic<JavaVM*> g_vm{nullptr};
std::atomic<bool> g_handler_installed{false};

// Copies [sp, sp + size) page by page with process_vm_readv, stopping at the first page that
// cannot be read; the thread's own memory, so no permission is needed. Async-signal-safe.
size_t copy_until_unreadable(uint64_t sp, uint8_t* out, size_t size) {
    iovec local{out, size};
    iovec remote[kMaxPagesPerCopy];
    size_t pieces = 0;
    uint64_t address = sp;
    const uint64_t end = sp + size;
    if (end < sp) return 0;   // wraps around: no user address
    while (address < end && pieces < kMaxPagesPerCopy) {
        const uint64_t page_end = (address / kPageSize + 1) * kPageSize;
        const uint64_t piece_end = page_end < end ? page_end : end;
        remote[pieces++] = iovec{reinterpret_cast<void*>(address), static_cast<size_t>(piece_end - address)};
        address = piece_end;
    }
    const ssize_t copied = syscall(SYS_process_vm_readv, getpid(), &local, 1UL, remote, pieces, 0UL);
    return copied > 0 ? static_cast<size_t>(copied) : 0;
}

void on_sigprof(int, siginfo_t* info, void* context) {
    const int saved_errno = errno;
    auto* slot = info != nullptr && info->si_code == SI_TIMER
                     ? static_cast<OracleSampler::ThreadSlot*>(info->si_value.sival_ptr)
                     : nullptr;
    OracleSampler::Buffer* buffer = g_buffer.load(std::memory_order_acquire);
    if (slot == nullptr || buffer == nullptr || !slot->active.load(std::memory_order_acquire)) {
        errno = saved_errno;
        return;
    }
    const uint8_t uses = slot->uses.load(std::memory_order_relaxed);
    if (uses == 0) {
        errno = saved_errno;
        return;
    }
    // A thread stack=auto grew takes a large entry; without one free it is cut to stack_bytes.
    const uint32_t wanted = slot->stack_bytes.load(std::memory_order_relaxed);
    uint32_t index = 0;
    const bool grown = wanted > buffer->stack_bytes;
    const bool large = grown && buffer->large_count != 0 && buffer->large.free_entries.pop(index);
    if (!large && !buffer->small.free_entries.pop(index)) {
        buffer->dropped.fetch_add(1, std::memory_order_relaxed);
        if ((uses & kUseSample) != 0) buffer->samples_dropped.fetch_add(1, std::memory_order_relaxed);
        errno = saved_errno;
        return;
    }
    if (grown && !large) buffer->cut.fetch_add(1, std::memory_order_relaxed);
    // A thread preempted inside the handler (a loaded machine, ASGCT) may hand its entry over
    // later than the reader's hold-back: announce the stamp first (see in_flight_since).
    slot->busy_since.store(monotonic_ns(), std::memory_order_seq_cst);
    const uint64_t time = monotonic_ns();
    const auto* uc = static_cast<const ucontext_t*>(context);
    const greg_t* gregs = uc->uc_mcontext.gregs;

    EntryHeader* header = buffer->header(index);
    header->time_ns = time;
    header->tid = static_cast<uint32_t>(slot->tid);
    header->regs.ip = static_cast<uint64_t>(gregs[REG_RIP]);
    header->regs.sp = static_cast<uint64_t>(gregs[REG_RSP]);
    header->regs.bp = static_cast<uint64_t>(gregs[REG_RBP]);
    header->regs.ax = static_cast<uint64_t>(gregs[REG_RAX]);
    header->regs.bx = static_cast<uint64_t>(gregs[REG_RBX]);
    header->regs.r13 = static_cast<uint64_t>(gregs[REG_R13]);
    header->regs.r15 = static_cast<uint64_t>(gregs[REG_R15]);

    header->uses = uses;
    const uint32_t bytes = std::min(std::max(wanted, buffer->stack_bytes), buffer->stack_capacity(index));
    const size_t copied = copy_stack_fragment(header->regs.sp, StackRange{slot->stack_bottom, slot->stack_top},
                                              buffer->stack(index), bytes);
    header->stack_size = static_cast<uint32_t>(copied);

    header->agct_status = 0;
    AsgctFunction asgct = g_asgct.load(std::memory_order_relaxed);
    if (asgct != nullptr && (uses & kUseOracle) != 0 && buffer->max_frames > 0) {
        JNIEnv* jni = slot->jni.load(std::memory_order_relaxed);
        if (jni == nullptr) {
            // A thread that existed before the agent: HotSpot's GetEnv only reads the current
            // thread's JavaThread, which is safe at any instruction.
            JavaVM* vm = g_vm.load(std::memory_order_relaxed);
            void* env = nullptr;
            if (vm != nullptr && vm->GetEnv(&env, JNI_VERSION_1_6) == JNI_OK) {
                jni = static_cast<JNIEnv*>(env);
                slot->jni.store(jni, std::memory_order_relaxed);
            }
        }
        AsgctTrace trace{jni, 0, buffer->frames(index)};
        asgct(&trace, static_cast<jint>(buffer->max_frames), context);
        header->agct_status = trace.num_frames;
    }
    (void)buffer->filled_entries.bounded_push(index);
    slot->busy_since.store(0, std::memory_order_seq_cst);
    buffer->taken.fetch_add(1, std::memory_order_relaxed);
    errno = saved_errno;
}

// What glibc's pthread_getcpuclockid computes: the CPU-time clock of any thread, by tid.
clockid_t thread_cpu_clock(pid_t tid) {
    constexpr clockid_t kPerThread = 4;
    constexpr clockid_t kSchedClock = 2;
    return static_cast<clockid_t>((~static_cast<unsigned>(tid)) << 3) | kPerThread | kSchedClock;
}

pid_t current_tid() { return static_cast<pid_t>(syscall(SYS_gettid)); }

}  // namespace

namespace {

// The sample is the raw stack. In an ASan build that copy also passes over the redzones ASan
// poisons around the locals of instrumented frames (the agent's own, below the signal handler):
// no access to those objects, so the copy is exempt there, as a byte loop (a memcpy call would be
// checked by ASan's interceptor). Elsewhere it is a plain memcpy.
#if defined(__SANITIZE_ADDRESS__)
__attribute__((no_sanitize_address, optimize("no-tree-loop-distribute-patterns")))
void copy_raw_stack(uint8_t* out, const uint8_t* in, size_t n) {
    for (size_t i = 0; i < n; ++i) out[i] = in[i];
}
#else
void copy_raw_stack(uint8_t* out, const uint8_t* in, size_t n) { std::memcpy(out, in, n); }
#endif

}  // namespace

size_t copy_stack_fragment(uint64_t sp, StackRange known, uint8_t* out, size_t size) {
    if (known.top != 0 && sp >= known.bottom && sp < known.top) {
        // [sp, top) is the live part of the thread's own stack, mapped and readable.
        const uint64_t available = known.top - sp;
        const size_t copied = available < size ? static_cast<size_t>(available) : size;
        copy_raw_stack(out, reinterpret_cast<const uint8_t*>(sp), copied);
        return copied;
    }
    // Unknown bounds, or sp outside them (an alternate stack): nothing is known to be readable.
    return copy_until_unreadable(sp, out, size);
}

OracleSampler::OracleSampler(const OracleSettings& settings) : settings_(settings) {}

OracleSampler::~OracleSampler() {
    // The agent never destroys its oracle (a late signal could still be on its way); tests do,
    // after their threads are gone.
    stop();
    g_buffer.store(nullptr, std::memory_order_release);
    g_handler_installed.store(false);
    for (ThreadSlot* slot : retired_) delete slot;
}

Result<std::unique_ptr<OracleSampler>> OracleSampler::create(const OracleSettings& settings) {
    if (g_handler_installed.load()) {
        return make_error(Errc::kInternal, "the validate oracle is already running in this process");
    }
    std::unique_ptr<OracleSampler> sampler(new OracleSampler(settings));
    sampler->buffer_ = std::make_unique<Buffer>(settings.buffer_entries, settings.stack_bytes, settings.max_frames,
                                                settings.large_entries, settings.large_stack_bytes);
    if (!sampler->buffer_->allocated()) {
        return make_error(Errc::kResourceLimit, "cannot allocate the validate buffer");
    }
    g_buffer.store(sampler->buffer_.get(), std::memory_order_release);
    g_asgct.store(settings.asgct);
    g_vm.store(settings.vm);

    struct sigaction action {};
    action.sa_sigaction = on_sigprof;
    action.sa_flags = SA_SIGINFO | SA_RESTART;
    sigemptyset(&action.sa_mask);
    struct sigaction previous {};
    if (sigaction(SIGPROF, &action, &previous) != 0) {
        return sys_error(Errc::kInternal, errno, "sigaction(SIGPROF)");
    }
    const bool previous_is_ours = (previous.sa_flags & SA_SIGINFO) != 0 && previous.sa_sigaction == on_sigprof;
    const bool previous_is_default = (previous.sa_flags & SA_SIGINFO) == 0 &&
                                     (previous.sa_handler == SIG_DFL || previous.sa_handler == SIG_IGN);
    if (!previous_is_ours && !previous_is_default) {
        SF_LOG_WARN("validate replaced an existing SIGPROF handler (another profiler?)");
    }
    g_handler_installed.store(true);
    return sampler;
}

Status OracleSampler::start_timer(ThreadSlot& slot, bool on_current_thread) {
    sigevent event{};
    event.sigev_notify = SIGEV_THREAD_ID;
    event.sigev_signo = SIGPROF;
    event.sigev_value.sival_ptr = &slot;
    event._sigev_un._tid = slot.tid;   // sigev_notify_thread_id, which glibc 2.36 does not define
    const clockid_t clock = on_current_thread ? CLOCK_THREAD_CPUTIME_ID : thread_cpu_clock(slot.tid);
    if (timer_create(clock, &event, &slot.timer) != 0) {
        return sys_error(Errc::kInternal, errno, "timer_create(thread " + std::to_string(slot.tid) + ")");
    }
    slot.has_timer = true;
    slot.active.store(true, std::memory_order_release);
    itimerspec period{};
    period.it_interval.tv_sec = static_cast<time_t>(settings_.interval_ns / 1'000'000'000u);
    period.it_interval.tv_nsec = static_cast<long>(settings_.interval_ns % 1'000'000'000u);
    period.it_value = period.it_interval;
    if (timer_settime(slot.timer, 0, &period, nullptr) != 0) {
        const int err = errno;
        slot.active.store(false);
        timer_delete(slot.timer);
        slot.has_timer = false;
        return sys_error(Errc::kInternal, err, "timer_settime(thread " + std::to_string(slot.tid) + ")");
    }
    return {};
}

Status OracleSampler::add_current_thread(JNIEnv* jni, uint8_t uses) {
    auto* slot = new ThreadSlot;
    slot->tid = current_tid();
    slot->jni.store(jni);
    slot->uses.store(uses);
    pthread_attr_t attr;
    if (pthread_getattr_np(pthread_self(), &attr) == 0) {
        void* low = nullptr;
        size_t size = 0;
        if (pthread_attr_getstack(&attr, &low, &size) == 0) {
            slot->stack_bottom = reinterpret_cast<uint64_t>(low);
            slot->stack_top = slot->stack_bottom + size;
        }
        pthread_attr_destroy(&attr);
    }
    return add_slot(slot, true);
}

Status OracleSampler::add_thread(pid_t tid, uint8_t uses) {
    auto* slot = new ThreadSlot;
    slot->tid = tid;
    slot->uses.store(uses);
    return add_slot(slot, tid == current_tid());
}

Status OracleSampler::add_slot(ThreadSlot* slot, bool on_current_thread) {
    std::lock_guard<std::mutex> lock(threads_mutex_);
    auto existing = threads_.find(slot->tid);
    if (existing != threads_.end()) {
        // Already ticking (validate, then the signal backend after perf was denied): one timer,
        // one snapshot per tick, now serving both uses.
        existing->second->uses.fetch_or(slot->uses.load());
        delete slot;   // never armed, so no signal can refer to it
        return {};
    }
    Status started = start_timer(*slot, on_current_thread);
    if (!started.ok()) {
        delete slot;
        return started;
    }
    threads_[slot->tid] = slot;
    ++threads_added_;
    return {};
}

void OracleSampler::set_stack_bytes(pid_t tid, uint32_t bytes) {
    std::lock_guard<std::mutex> lock(threads_mutex_);
    auto found = threads_.find(tid);
    if (found != threads_.end()) found->second->stack_bytes.store(bytes, std::memory_order_relaxed);
}

void OracleSampler::remove_thread(pid_t tid) {
    std::lock_guard<std::mutex> lock(threads_mutex_);
    auto found = threads_.find(tid);
    if (found == threads_.end()) return;
    ThreadSlot* slot = found->second;
    slot->active.store(false, std::memory_order_release);
    if (slot->has_timer) timer_delete(slot->timer);
    slot->has_timer = false;
    threads_.erase(found);
    retired_.push_back(slot);   // a few dozen bytes per ended thread, see retired_
}

void OracleSampler::stop() {
    std::lock_guard<std::mutex> lock(threads_mutex_);
    for (auto& [tid, slot] : threads_) {
        slot->active.store(false, std::memory_order_release);
        if (slot->has_timer) timer_delete(slot->timer);
        slot->has_timer = false;
        retired_.push_back(slot);
    }
    threads_.clear();
}

size_t OracleSampler::drain(std::vector<Event>& out) {
    Buffer& buffer = *buffer_;
    const uint32_t pid = static_cast<uint32_t>(getpid());
    size_t count = 0;
    uint32_t index = 0;
    while (buffer.filled_entries.pop(index)) {
        const EntryHeader* header = buffer.header(index);
        Sample sample;
        sample.time_ns = header->time_ns;
        sample.pid = pid;
        sample.tid = header->tid;
        sample.source = SampleSource::kSignal;
        sample.regs = header->regs;
        sample.stack_sp = header->regs.sp;
        sample.stack.assign(buffer.stack(index), buffer.stack(index) + header->stack_size);
        if ((header->uses & kUseOracle) != 0) {
            Oracle oracle;
            oracle.sample = (header->uses & kUseSample) != 0 ? sample : std::move(sample);
            oracle.agct_status = header->agct_status;
            if (header->agct_status > 0) {
                const AsgctFrame* frames = buffer.frames(index);
                const int32_t count_frames = std::min<int32_t>(header->agct_status, static_cast<int32_t>(buffer.max_frames));
                oracle.frames.reserve(static_cast<size_t>(count_frames));
                for (int32_t i = 0; i < count_frames; ++i) {
                    oracle.frames.push_back(MethodBci{reinterpret_cast<uint64_t>(frames[i].method_id), frames[i].lineno});
                }
            }
            out.push_back(std::move(oracle));
            ++count;
        }
        if ((header->uses & kUseSample) != 0) {
            out.push_back(std::move(sample));
            ++count;
        }
        buffer.release(index);
    }
    const uint64_t samples_dropped = buffer.samples_dropped.load(std::memory_order_relaxed);
    if (samples_dropped != samples_dropped_reported_) {
        out.push_back(Lost{monotonic_ns(), 0, samples_dropped - samples_dropped_reported_});
        samples_dropped_reported_ = samples_dropped;
        ++count;
    }
    return count;
}

uint64_t OracleSampler::in_flight_since() const {
    uint64_t oldest = 0;
    std::lock_guard<std::mutex> lock(threads_mutex_);
    for (const auto& [tid, slot] : threads_) {
        const uint64_t since = slot->busy_since.load(std::memory_order_seq_cst);
        if (since != 0 && (oldest == 0 || since < oldest)) oldest = since;
    }
    return oldest;
}

OracleStats OracleSampler::stats() const {
    OracleStats stats;
    stats.taken = buffer_->taken.load(std::memory_order_relaxed);
    stats.dropped = buffer_->dropped.load(std::memory_order_relaxed);
    stats.cut = buffer_->cut.load(std::memory_order_relaxed);
    std::lock_guard<std::mutex> lock(threads_mutex_);
    stats.threads = threads_added_;
    return stats;
}

}  // namespace sf::agent
