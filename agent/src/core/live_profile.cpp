#include "live_profile.hpp"

#include <signal.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <time.h>

#include <algorithm>
#include <chrono>
#include <iterator>
#include <new>
#include <thread>
#include <unordered_set>
#include <utility>

#include "log.hpp"
#include "own_threads.hpp"
#include "spare_buffers.hpp"
#include "stackfrag/base/clock.hpp"
#include "stackfrag/profile/export.hpp"

namespace sf::agent {

namespace {

// Consumed per poll before dump requests and rotation get a look: a burst cannot delay a dump
// by more than a few milliseconds of decoding.
constexpr size_t kBatch = 4096;
// The decoder thread works in batches: woken when the reader has handed over kWakeBytes of stack
// fragments (about 256 samples), else after kIdleWait. A sample decoded right after a sleep finds
// the code map, the tree and the decoder's tables evicted from the caches by the application;
// in a batch, all but the first find them warm (at 100 samples/s a decode cost ~40 µs one by
// one, against 2-3 µs warm). Dumps, stop and a filling queue wake it at once.
constexpr size_t kWakeBytes = 4u << 20;
constexpr auto kIdleWait = std::chrono::milliseconds(1000);
// How long the stop waits for the names of the methods its profile refers to.
constexpr int kFinalNamesWaitMs = 5000;
// How long a loop rotation or a dump waits for names asked for and not come yet: the file then
// covers up to this much more time (the next interval as much less).
constexpr uint64_t kNamesHoldNs = 2'000'000'000;

class SystemClock final : public LiveClock {
public:
    uint64_t monotonic_ns() const override { return sf::monotonic_ns(); }
    int64_t unix_seconds() const override { return static_cast<int64_t>(::time(nullptr)); }
};

size_t stack_bytes_of(const Event& event) {
    if (const auto* s = std::get_if<Sample>(&event)) return s->stack.size();
    return 0;
}

// The memory a queued sample's fragment holds: its buffer (fragment_buffer_bytes), larger than the fragment.
size_t buffer_bytes_of(const Event& event) {
    if (const auto* s = std::get_if<Sample>(&event)) return s->stack.capacity();
    return 0;
}

void raise_to(std::atomic<size_t>& peak, size_t value) {
    size_t seen = peak.load(std::memory_order_relaxed);
    while (value > seen && !peak.compare_exchange_weak(seen, value, std::memory_order_relaxed)) {
    }
}

double percent(uint64_t part, uint64_t whole) { return whole ? 100.0 * double(part) / double(whole) : 0.0; }

// The offset from the samples' CLOCK_MONOTONIC times to Unix time, for outputs with timestamps.
int64_t monotonic_to_unix_ns() { return static_cast<int64_t>(realtime_ns()) - static_cast<int64_t>(monotonic_ns()); }

bool is_switch_sample(const Event& event) {
    const auto* sample = std::get_if<Sample>(&event);
    return sample != nullptr && sample->source == SampleSource::kPerfSwitch;
}

// Frame name -> self samples of `cct`, added to `self`.
// Summed per frame first and then per name: one map update per distinct frame rather than per node
// (at 100 us the stop summary's walk of ~100k nodes through a string map took ~25 ms).
void add_self_samples(const profile::Cct& cct, std::map<std::string, uint64_t>& self) {
    std::vector<uint64_t> per_frame(cct.frame_count());
    // Every node, in storage order (a tree never drops one): no walk needed for a sum.
    for (profile::NodeId id = 0; id < cct.node_count(); ++id) {
        if (id != profile::kRootNode) per_frame[cct.node(id).frame] += cct.node(id).self_samples;
    }
    for (profile::FrameId f = 0; f < per_frame.size(); ++f) {
        if (per_frame[f] != 0) self[cct.frame(f).name] += per_frame[f];
    }
}

}  // namespace

std::string off_cpu_path(std::string_view path) {
    const size_t base = path.find_last_of('/') == std::string_view::npos ? 0 : path.find_last_of('/') + 1;
    // Before the whole format ending (".pb.gz"), else before the last dot.
    const size_t ending = profile::format_ending_size(path);
    size_t dot = ending != 0 ? path.size() - ending : path.rfind('.');
    if (dot == std::string_view::npos || dot <= base) dot = path.size();
    return std::string(path.substr(0, dot)) + ".offcpu" + std::string(path.substr(dot));
}

const LiveClock& system_live_clock() {
    // Never destroyed: the decoder thread may still read the clock while the process runs its
    // exit-time destructors, and a destroyed object with a virtual function would crash it.
    static const SystemClock* clock = new SystemClock;
    return *clock;
}

std::string expand_output_path(std::string_view pattern, uint32_t pid, int64_t unix_seconds) {
    std::string out;
    for (size_t i = 0; i < pattern.size(); ++i) {
        if (pattern[i] != '%' || i + 1 == pattern.size()) {
            out += pattern[i];
            continue;
        }
        const char what = pattern[++i];
        if (what == 'p') {
            out += std::to_string(pid);
        } else if (what == 't') {
            const time_t t = static_cast<time_t>(unix_seconds);
            tm local{};
            char text[32] = {};
            if (localtime_r(&t, &local) != nullptr) strftime(text, sizeof text, "%Y%m%d-%H%M%S", &local);
            out += text;
        } else if (what == '%') {
            out += '%';
        } else {
            out += '%';
            out += what;
        }
    }
    return out;
}

// Java names for the profile from the live decoder's CodeMap, as replay's are.
// With lazy names, each method looked up while it still has none is wanted, once.
class LiveProfile::Names final : public profile::MethodNames {
public:
    Names(const CodeMap& map, bool lazy) : map_(map), lazy_(lazy) {}
    const MethodInfo* find(uint64_t method_id) const override {
        const MethodInfo* info = map_.method_by_id(method_id);
        if (lazy_ && (info == nullptr || info->name.empty()) && method_id != 0 && asked_.insert(method_id).second) {
            wanted_.push_back(method_id);
        }
        return info;
    }
    std::vector<uint64_t> take_wanted() { return std::exchange(wanted_, {}); }
    bool any_wanted() const { return !wanted_.empty(); }

private:
    const CodeMap& map_;
    const bool lazy_;
    mutable std::unordered_set<uint64_t> asked_;
    mutable std::vector<uint64_t> wanted_;
};

struct LiveProfile::DumpRequest {
    std::string pattern;
    bool done = false;
    Result<std::string> result = make_error(Errc::kInternal, "not written");
};

LiveProfile::LiveProfile(LiveSettings settings, const LiveClock& clock)
    : settings_(std::move(settings)), clock_(clock), queue_(std::max<size_t>(settings_.queue_slots, 2)),
      spare_events_(kSpareEvents), filter_(settings_.filter) {
    StreamDecoderOptions stream_options = settings_.decoder;
    stream_options.time_decodes = static_cast<bool>(settings_.on_trace);   // interval=auto's decode times
    stream_ = std::make_unique<StreamDecoder>(stream_options, [this](const Event& event, const CallTrace& trace) {
        if (settings_.stack_tops != nullptr) learn_cut(event, trace);
        if (settings_.on_trace) settings_.on_trace(event, trace, stream_->last_decode_ns());
        if (settings_.watch_trace) settings_.watch_trace(event, trace);
        // Off-CPU samples count blockings, not CPU time: their own tree, each switch weighing one.
        // focus= / exclude= apply to it as to the on-CPU tree (its drops are not counted there).
        if (is_switch_sample(event)) {
            if (filter_.judge(trace, names_.get()) == profile::FilterVerdict::kKeep) (void)off_cpu_cct_->add(trace);
            return;
        }
        // Oracle samples are the validator's, not the application's profile (replay skips them too).
        if (!is_profile_sample(event)) return;
        if (trace.status != TraceStatus::kFailed) decoded_total_.fetch_add(1, std::memory_order_relaxed);
        if (trace.status == TraceStatus::kFailed && trace.failure == FailReason::kUnknownMethod) report_unknown_method();
        const profile::FilterVerdict verdict = filter_.judge(trace, names_.get());
        if (verdict != profile::FilterVerdict::kKeep) {
            (verdict == profile::FilterVerdict::kExcluded ? filtered_.excluded : filtered_.not_in_focus)++;
            if (trace.status == TraceStatus::kIncomplete) ++filtered_incomplete_;
            return;
        }
        (void)cct_->add(trace, stream_->period_ns());
    });
    names_ = std::make_unique<Names>(stream_->code_map(), settings_.lazy_names);
    new_cct();
    interval_start_ns_ = clock_.monotonic_ns();
    interval_start_unix_ = clock_.unix_seconds();
    next_rotation_ns_ = settings_.loop_ns ? interval_start_ns_ + settings_.loop_ns : 0;
}

LiveProfile::~LiveProfile() {
    stop(1000);
    if (!finished_) return;   // the thread may still use the queue: leave it alone
    Event* event = nullptr;
    while (queue_.pop(event)) delete event;
    while (spare_events_.pop(event)) delete event;
    for (Event* held : backlog_) delete held;
}

Event* LiveProfile::owned_event(Event&& event) {
    Event* spare = nullptr;
    if (!spare_events_.pop(spare)) return new Event(std::move(event));
    *spare = std::move(event);
    return spare;
}

bool LiveProfile::spare_stack(std::vector<uint8_t>& out, size_t min_capacity) {
    if (reader_stacks_.empty()) {
        // Everything the decoder thread gave back since the last time, in one swap.
        std::lock_guard<std::mutex> lock(returned_stacks_mutex_);
        reader_stacks_.swap(returned_stacks_);
    }
    if (!take_spare(reader_stacks_, min_capacity, out)) return false;
    held_bytes_.fetch_sub(out.capacity(), std::memory_order_relaxed);
    out.clear();
    return true;
}

void LiveProfile::recycle(Event* event) {
    // A sample's fragment buffer goes back to the reader on a path of its own, while the spares
    // there stay within their bound; the event, emptied, to the spare events.
    if (auto* sample = std::get_if<Sample>(event); sample != nullptr) {
        const size_t capacity = sample->stack.capacity();
        wakeup_buffer_bytes_ += capacity;
        // A queue that never runs dry (high rates) counts as wake-ups of the largest size.
        if (wakeup_buffer_bytes_ >= kMaxSpareBytes) end_wakeup();
        if (capacity != 0 && held_bytes_.load(std::memory_order_relaxed) + capacity <= spare_bound_bytes_) {
            held_bytes_.fetch_add(capacity, std::memory_order_relaxed);
            returning_.push_back(std::move(sample->stack));
            if (returning_.size() >= kHandBackStacks) hand_back_stacks();
        } else if (capacity != 0 && queued_buffer_bytes_.load(std::memory_order_relaxed) > kMaxSpareBytes) {
            // A backlog draining: more buffers come back than the spares take, and the allocator
            // would keep every page of them.
            release_buffer_pages(sample->stack);
            buffers_released_.fetch_add(1, std::memory_order_relaxed);
        }
    }
    *event = Event{};
    if (!spare_events_.push(event)) delete event;
}

void LiveProfile::hand_back_stacks() {
    if (returning_.empty()) return;
    {
        std::lock_guard<std::mutex> lock(returned_stacks_mutex_);
        returned_stacks_.insert(returned_stacks_.end(), std::make_move_iterator(returning_.begin()),
                                std::make_move_iterator(returning_.end()));
    }
    returning_.clear();
}

void LiveProfile::learn_cut(const Event& event, const CallTrace& trace) {
    const auto* sample = std::get_if<Sample>(&event);
    // Not the validator's own copies, nor a thread clock's samples (no fragment).
    if (sample == nullptr || sample->source == SampleSource::kSignal || sample->source == SampleSource::kThreadClock) return;
    const uint32_t tid = sample->tid;
    std::optional<uint64_t> top;
    if (trace.status == TraceStatus::kComplete) {
        StackCutLearner::Walk walk;
        walk.needed_end = stream_->decoder().needed_end(tid);
        if (walk.needed_end == 0 || trace.frames.empty()) return;
        // The outermost frame native: the walk went to the thread's first frame (start_thread). A
        // Java thread's walk ends at its first entry frame, above which the thread runs VM code at
        // its start and end (JavaThread::exit): cut there, IdlePool's 600 ending threads failed
        // 0.5 % of all samples. Its cut comes from its top (StackCutLearner).
        walk.to_first_native = trace.frames.back().kind == FrameKind::kNative;
        uint64_t known = 0, exact = 0;
        if (cut_learner_.wants_top(tid)) {
            known = settings_.stack_tops->lookup(tid).value_or(0);
            exact = settings_.stack_tops->exact_top(tid);
        }
        top = cut_learner_.on_complete(tid, walk, known, exact);
    } else if (trace.status != TraceStatus::kFailed || StackCutLearner::from_missing_bytes(trace.failure)) {
        // A walk that ran off, or failed for want of the bytes above, at the cut: the cut was wrong
        // for this thread. (Every fragment of a cut thread ends at the cut: failures that missing
        // bytes do not cause, a stale return address say, leave the cut alone.)
        top = cut_learner_.on_ran_off(tid, sample->stack_sp + sample->stack.size());
    }
    if (!top) return;
    settings_.stack_tops->remember(tid, *top, sample->time_ns);
    const auto name = thread_names_.find(tid);
    SF_LOG_DEBUG("stack cut: thread %u '%s' %s %#llx (sp %#llx, %s)", tid,
                 name == thread_names_.end() ? "" : name->second.c_str(),
                 trace.status == TraceStatus::kComplete ? "cut at" : "given its stack back, top", static_cast<unsigned long long>(*top),
                 static_cast<unsigned long long>(sample->stack_sp),
                 trace.status == TraceStatus::kComplete ? "complete" : trace.status == TraceStatus::kFailed ? fail_reason_name(trace.failure) : "ran off");
    threads_cut_.store(cut_learner_.threads_cut(), std::memory_order_relaxed);
    threads_given_back_.store(cut_learner_.threads_given_back(), std::memory_order_relaxed);
}

void LiveProfile::new_cct() {
    // A JFR file lists samples one by one, with time and thread: the trees keep them (24 bytes a
    // sample, until the file is written).
    profile::CctOptions options;
    options.keep_samples = settings_.file.ends_with(".jfr");
    options.per_thread = settings_.group != ThreadGrouping::kNone;
    options.per_pool = settings_.group == ThreadGrouping::kPool;
    cct_ = std::make_unique<profile::Cct>(names_.get(), options);
    off_cpu_cct_ = std::make_unique<profile::Cct>(names_.get(), options);
    for (const auto& [tid, name] : thread_names_) {
        cct_->set_thread_name(tid, name);
        off_cpu_cct_->set_thread_name(tid, name);
    }
}

bool LiveProfile::was_held(const Event& event) const {
    return is_profile_sample(event) && time_of(event) <= held_until_ns_.load(std::memory_order_acquire);
}

bool LiveProfile::push(Event* event) {
    const size_t bytes = stack_bytes_of(*event);
    const int64_t held = was_held(*event) ? static_cast<int64_t>(bytes) : 0;
    const size_t buffer = buffer_bytes_of(*event);
    const size_t queued = queued_bytes_.fetch_add(bytes, std::memory_order_relaxed) + bytes;
    const size_t buffers = queued_buffer_bytes_.fetch_add(buffer, std::memory_order_relaxed) + buffer;
    held_queued_bytes_.fetch_add(held, std::memory_order_relaxed);
    if (queue_.push(event)) {
        raise_to(peak_queued_bytes_, queued);
        raise_to(peak_queued_buffer_bytes_, buffers);
        return true;
    }
    held_queued_bytes_.fetch_sub(held, std::memory_order_relaxed);
    queued_buffer_bytes_.fetch_sub(buffer, std::memory_order_relaxed);
    queued_bytes_.fetch_sub(bytes, std::memory_order_relaxed);
    return false;
}

void LiveProfile::flush_backlog() {
    while (!backlog_.empty() && push(backlog_.front())) backlog_.pop_front();
}

void LiveProfile::wake_if_idle() {
    // Pairs with the fence in run(): either the decoder thread sees the pushed event when it
    // looks at its queue once more before sleeping, or this sees it idle and wakes it.
    std::atomic_thread_fence(std::memory_order_seq_cst);
    if (idle_.load(std::memory_order_relaxed) && idle_.exchange(false)) {
        std::lock_guard<std::mutex> lock(mutex_);
        wake_.notify_all();
    }
}

bool LiveProfile::catch_up(int timeout_ms) {
    if (!running()) return false;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    while (queued_bytes_.load(std::memory_order_relaxed) != 0) {
        if (std::chrono::steady_clock::now() >= deadline || !running()) return false;
        wake_if_idle();
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    return true;
}

void LiveProfile::batch_end() {
    // interval=auto steers the rate from the decoded traces (on_trace): it gets them every cycle.
    if (settings_.on_trace || full_fragment_seen_ || queued_bytes_.load(std::memory_order_relaxed) >= kWakeBytes ||
        !backlog_.empty()) {
        wake_if_idle();
    }
    full_fragment_seen_ = false;
}

std::chrono::nanoseconds LiveProfile::idle_wait() const {
    std::chrono::nanoseconds wait = kIdleWait;
    if (names_hold_until_ != 0) {
        // A write waits for names: its rotation is due already, the hold's end is what counts.
        const uint64_t now = clock_.monotonic_ns();
        const uint64_t until = names_hold_until_ > now ? names_hold_until_ - now : 0;
        return std::min(wait, std::chrono::nanoseconds(until) + std::chrono::milliseconds(1));
    }
    if (settings_.loop_ns != 0) {
        const uint64_t now = clock_.monotonic_ns();
        const uint64_t until = next_rotation_ns_ > now ? next_rotation_ns_ - now : 0;
        wait = std::min(wait, std::chrono::nanoseconds(until) + std::chrono::milliseconds(1));
    }
    return wait;
}

void LiveProfile::observe(Event&& event) { accept(event, nullptr); }

void LiveProfile::observe_owned(std::unique_ptr<Event> event) {
    Event& held = *event;
    accept(held, std::move(event));
}

void LiveProfile::accept(Event& event, std::unique_ptr<Event> boxed) {
    if (stopped_.load(std::memory_order_acquire)) return;
    // The reader wakes this thread once per cycle (batch_end), not per event, which made the two
    // threads take turns event by event; only a filling queue wakes it early.
    struct WakeWhenFilling {
        LiveProfile& live;
        ~WakeWhenFilling() {
            if (live.queued_bytes_.load(std::memory_order_relaxed) > live.settings_.queue_bytes / 4 ||
                live.queue_.write_available() < live.settings_.queue_slots / 2 || !live.backlog_.empty()) {
                live.wake_if_idle();
            }
        }
    } wake_when_filling{*this};
    if (std::holds_alternative<Oracle>(event)) return;
    if (is_switch_sample(event)) off_cpu_offered_.fetch_add(1, std::memory_order_relaxed);
    const bool is_sample = is_profile_sample(event);
    if (is_sample) samples_.fetch_add(1, std::memory_order_relaxed);
    if (std::holds_alternative<JvmtiTrace>(event)) jvmti_traces_.fetch_add(1, std::memory_order_relaxed);
    if (const auto* lost = std::get_if<Lost>(&event)) lost_total_.fetch_add(lost->count, std::memory_order_relaxed);
    try {
        coverage_.observe(event);
        flush_backlog();
        if (is_sample) {
            // A sample may be dropped (the profile is a statistic); it must not overtake the
            // metadata still waiting in the backlog.
            const size_t bytes = stack_bytes_of(event);
            if (bytes != 0 && bytes == settings_.wake_on_fragment_bytes && !full_fragment_seen_) {
                const auto* sample = std::get_if<Sample>(&event);
                full_fragment_seen_ = !settings_.may_run_off || (sample != nullptr && settings_.may_run_off(*sample));
            }
            // Held samples queued count apart: neither are they dropped nor do they crowd out the
            // samples behind them while the decoder works through them.
            const size_t queued = queued_bytes_.load(std::memory_order_relaxed);
            const size_t others =
                queued - std::min(queued, static_cast<size_t>(std::max<int64_t>(held_queued_bytes_.load(std::memory_order_relaxed), 0)));
            if (!backlog_.empty() || (!was_held(event) && others + bytes > settings_.queue_bytes)) {
                dropped_.fetch_add(1, std::memory_order_relaxed);
                return;
            }
            Event* owned = to_queue(event, boxed);
            if (!push(owned)) {
                delete owned;
                dropped_.fetch_add(1, std::memory_order_relaxed);
            }
            return;
        }
        // Code and method events are never dropped for a full queue: a missing CodeLoad would
        // misattribute every later sample in that code.
        const bool names_awaited = std::holds_alternative<NamedMethod>(event) && holding_names_.load(std::memory_order_relaxed);
        Event* owned = to_queue(event, boxed);
        if (backlog_.empty() && push(owned)) {
            if (names_awaited) wake_if_idle();   // a write waits for it
            return;
        }
        if (backlog_.size() >= settings_.backlog_limit) {
            delete owned;
            if (metadata_dropped_.fetch_add(1, std::memory_order_relaxed) == 0) {
                SF_LOG_WARN("live profile: the decoder is far behind; code events are being dropped and "
                            "its traces may be wrong from now on (the recording is unaffected)");
            }
            return;
        }
        backlog_.push_back(owned);
    } catch (const std::bad_alloc&) {
        if (is_sample) dropped_.fetch_add(1, std::memory_order_relaxed);
        else metadata_dropped_.fetch_add(1, std::memory_order_relaxed);
    }
}

Status LiveProfile::start() {
    if (started_.load()) return {};
    const int created = create_own_thread(&thread_, &LiveProfile::thread_main, this, "stackfrag-live");
    if (created != 0) return sys_error(Errc::kResourceLimit, created, "pthread_create(live decoder thread)");
    started_.store(true);
    return {};
}

uint64_t LiveProfile::decoder_cpu_now() const {
    const pid_t tid = decoder_tid_.load(std::memory_order_acquire);
    return tid != 0 ? thread_cpu_ns_of(tid) : decoder_cpu_ns_.load();
}

void* LiveProfile::thread_main(void* self) {
    auto* live = static_cast<LiveProfile*>(self);
    live->decoder_tid_.store(static_cast<pid_t>(syscall(SYS_gettid)), std::memory_order_release);
    try {
        live->run();
    } catch (...) {
        // An exception leaving a thread would end the JVM; the profile is lost instead.
        SF_LOG_ERROR("live profile: the decoder thread failed; no live profile is written");
        std::lock_guard<std::mutex> lock(live->mutex_);
        live->finished_ = true;
        live->done_.notify_all();
    }
    return nullptr;
}

void LiveProfile::run() {
    while (true) {
        const bool worked = poll_once();
        std::unique_lock<std::mutex> lock(mutex_);
        if (stop_requested_) break;
        if (worked || (!requests_.empty() && names_hold_until_ == 0)) continue;
        idle_.store(true, std::memory_order_relaxed);
        std::atomic_thread_fence(std::memory_order_seq_cst);   // see wake_if_idle()
        if (queue_.read_available() == 0) wake_.wait_for(lock, idle_wait());
        idle_.store(false, std::memory_order_relaxed);
    }
    finish();
}

void LiveProfile::consume(Event&& event) {
    if (broken_) return;
    try {
        if (const auto* thread = std::get_if<ThreadInfo>(&event); thread && thread->ended) {
            // A later thread of the tid must not inherit the cut (tops set before its end go).
            if (cut_learner_.forget(thread->tid) && settings_.stack_tops != nullptr) {
                settings_.stack_tops->forget(thread->tid, thread->time_ns);
            }
            if (settings_.on_thread_end) settings_.on_thread_end(thread->tid);
        }
        if (const auto* thread = std::get_if<ThreadInfo>(&event); thread && !thread->name.empty()) {
            thread_names_[thread->tid] = thread->name;
            cct_->set_thread_name(thread->tid, thread->name);
            off_cpu_cct_->set_thread_name(thread->tid, thread->name);
        }
        if (const auto* named = std::get_if<NamedMethod>(&event)) answered_names_.insert(named->method_id);
        stream_->consume(std::move(event));
    } catch (const std::bad_alloc&) {
        // The decoder's map and the tree are not to be trusted after a failed allocation midway.
        broken_ = true;
        SF_LOG_ERROR("live profile: out of memory while decoding; live decoding stops (the recording, if any, goes on)");
    }
}

bool LiveProfile::drain_batch() {
    bool any = false;
    Event* event = nullptr;
    // The queue is at its fullest, as the decoder thread sees it, as a batch begins.
    backlog_buffer_bytes_ = std::max(backlog_buffer_bytes_, queued_buffer_bytes_.load(std::memory_order_relaxed));
    for (size_t n = 0; n < kBatch && queue_.pop(event); ++n) {
        const size_t bytes = stack_bytes_of(*event);
        const size_t buffer = buffer_bytes_of(*event);
        const int64_t held = was_held(*event) ? static_cast<int64_t>(bytes) : 0;
        // The next sample's fragment is asked for while this event is decoded.
        if (n + 1 < kBatch && queue_.read_available() > 0 && !broken_) stream_->prefetch(*queue_.front());
        consume(std::move(*event));
        recycle(event);
        held_queued_bytes_.fetch_sub(held, std::memory_order_relaxed);
        queued_buffer_bytes_.fetch_sub(buffer, std::memory_order_relaxed);
        queued_bytes_.fetch_sub(bytes, std::memory_order_relaxed);
        any = true;
    }
    hand_back_stacks();
    trim_after_backlog();
    return any;
}

void LiveProfile::trim_after_backlog() {
    if (settings_.trim_after_backlog_bytes == 0 || finishing_ || backlog_buffer_bytes_ < settings_.trim_after_backlog_bytes ||
        queued_buffer_bytes_.load(std::memory_order_relaxed) > kMaxSpareBytes) {
        return;
    }
    backlog_buffer_bytes_ = 0;
    // A backlog that comes back (a decoder behind a high rate) would fault its pages in again
    // after each trim: ~12 us a page here, 0.1 s for 32 MB. Once a minute at most.
    const uint64_t now = clock_.monotonic_ns();
    if (heap_trims_.load(std::memory_order_relaxed) != 0 && now - last_trim_ns_ < kMinTrimSpacingNs) return;
    last_trim_ns_ = now;
    const HeapTrim t = settings_.trim_heap ? settings_.trim_heap() : trim_free_heap();
    heap_trims_.fetch_add(1, std::memory_order_relaxed);
    heap_trimmed_bytes_.fetch_add(t.given_back(), std::memory_order_relaxed);
    heap_trim_ns_.fetch_add(t.ns, std::memory_order_relaxed);
}

void LiveProfile::end_wakeup() {
    if (wakeup_buffer_bytes_ == 0) return;
    recent_wakeup_bytes_[recent_wakeup_at_++ % kSpareWakeups] = wakeup_buffer_bytes_;
    wakeup_buffer_bytes_ = 0;
    size_t most = 0;
    for (size_t bytes : recent_wakeup_bytes_) most = std::max(most, bytes);
    spare_bound_bytes_ = std::clamp(most + most / 4, kMinSpareBytes, kMaxSpareBytes);
}

bool LiveProfile::poll_once() {
    const bool any = drain_batch();
    if (!any) end_wakeup();   // the queue is empty: the wake-up's batch is over
    hand_over_wanted_names();
    serve_requests();
    if (settings_.loop_ns != 0 && clock_.monotonic_ns() >= next_rotation_ns_ && !hold_for_names()) rotate();
    return any;
}

Status LiveProfile::write_current(const std::string& pattern, int64_t unix_seconds, std::string* written) {
    const std::string path = expand_output_path(pattern, settings_.pid, unix_seconds);
    name_trees();
    write_off_cpu(path);
    if (written != nullptr) *written = path;
    // The rename that publishes the file would replace a symlink, never write through it; still, a
    // link where the profile should go was planted by someone, and replacing it hides that.
    struct stat existing{};
    if (lstat(path.c_str(), &existing) == 0 && S_ISLNK(existing.st_mode)) {
        ++write_errors_;
        SF_LOG_ERROR("cannot write the profile to %s: it is a symbolic link, which stackfrag does not replace "
                     "(remove it or choose another file=); its samples stay in memory for the next write or dump",
                     path.c_str());
        return make_error(Errc::kInvalidArgument, path + " is a symbolic link; not replaced");
    }
    try {
        fill_info();
        profile::HtmlOptions html;
        html.title = settings_.title;
        // 0600: a profile names the application's code; its owner decides whom to show it to.
        Status status = profile::write_profile(*cct_, path, html, 0600);
        if (status.ok()) {
            ++files_written_;
            SF_LOG_INFO("profile written to %s (%llu samples)", path.c_str(),
                        static_cast<unsigned long long>(cct_->total_samples()));
        } else {
            ++write_errors_;
            SF_LOG_ERROR("cannot write the profile: %s; its samples stay in memory for the next write or dump",
                         status.error().describe().c_str());
        }
        return status;
    } catch (const std::exception& e) {
        ++write_errors_;
        SF_LOG_ERROR("cannot write the profile to %s: %s", path.c_str(), e.what());
        return make_error(Errc::kResourceLimit, "writing " + path + " failed: " + e.what());
    }
}

void LiveProfile::fill_info() {
    profile::ProfileInfo& info = cct_->info();
    info.title = settings_.title;
    info.period_ns = stream_->period_ns();
    info.start_unix_ns = static_cast<uint64_t>(interval_start_unix_) * 1'000'000'000u;
    info.duration_ns = clock_.monotonic_ns() - interval_start_ns_;
    info.lost_samples = lost_since_start() - lost_at_interval_start_;
    info.monotonic_to_unix_ns = monotonic_to_unix_ns();
}

void LiveProfile::publish_period() {
    if (!settings_.on_period || broken_ || cct_->total_samples() == 0) return;
    name_trees();
    try {
        fill_info();
        settings_.on_period(*cct_, interval_start_unix_, std::max(clock_.unix_seconds(), interval_start_unix_ + 1));
    } catch (const std::exception& e) {
        SF_LOG_ERROR("live profile: the period's profile is not pushed: %s", e.what());
    }
}

void LiveProfile::write_off_cpu(const std::string& on_cpu_path) {
    if (!settings_.off_cpu && off_cpu_cct_->total_samples() == 0) return;
    const std::string path = off_cpu_path(on_cpu_path);
    try {
        profile::ProfileInfo& info = off_cpu_cct_->info();
        info.title = (settings_.title.empty() ? std::string("stackfrag") : settings_.title) + " (off-CPU)";
        info.period_ns = 0;   // a switch counts once, whatever time the thread then spent waiting
        info.off_cpu = true;
        info.monotonic_to_unix_ns = monotonic_to_unix_ns();
        info.start_unix_ns = static_cast<uint64_t>(interval_start_unix_) * 1'000'000'000u;
        info.duration_ns = clock_.monotonic_ns() - interval_start_ns_;
        profile::HtmlOptions html;
        html.title = info.title;
        Status status = profile::write_profile(*off_cpu_cct_, path, html);
        if (status.ok()) {
            ++files_written_;
            SF_LOG_INFO("off-CPU profile written to %s (%llu context switches)", path.c_str(),
                        static_cast<unsigned long long>(off_cpu_cct_->total_samples()));
        } else {
            ++write_errors_;
            SF_LOG_ERROR("cannot write the off-CPU profile: %s", status.error().describe().c_str());
        }
    } catch (const std::exception& e) {
        ++write_errors_;
        SF_LOG_ERROR("cannot write the off-CPU profile to %s: %s", path.c_str(), e.what());
    }
}

void LiveProfile::fold_off_cpu() {
    const profile::TraceCounts& counts = off_cpu_cct_->trace_counts();
    off_cpu_past_counts_.added += counts.added;
    off_cpu_past_counts_.failed += counts.failed;
    add_self_samples(*off_cpu_cct_, off_cpu_past_self_);
}

void LiveProfile::fold_interval() {
    name_trees();
    fold_off_cpu();
    const profile::TraceCounts& counts = cct_->trace_counts();
    past_counts_.added += counts.added;
    past_counts_.incomplete += counts.incomplete;
    past_counts_.failed += counts.failed;
    for (size_t i = 0; i < counts.failed_by_reason.size(); ++i) past_counts_.failed_by_reason[i] += counts.failed_by_reason[i];
    add_self_samples(*cct_, past_self_);
}

void LiveProfile::rotate() {
    const uint64_t now = clock_.monotonic_ns();
    bool written = true;
    if (!settings_.file.empty() && !broken_) written = write_current(settings_.file, interval_start_unix_, nullptr).ok();
    next_rotation_ns_ += settings_.loop_ns;
    // After a stall (a suspended process), the next file covers one interval from now, not a
    // burst of empty ones.
    if (next_rotation_ns_ <= now) next_rotation_ns_ = now + settings_.loop_ns;
    // A failed write (a full disk, a missing directory) discards nothing: the interval goes on and
    // the next write, or an attach dump, holds its samples too.
    if (!written) return;
    publish_period();
    try {
        fold_interval();
        new_cct();
    } catch (const std::bad_alloc&) {
        broken_ = true;
    }
    interval_start_ns_ = now;
    interval_start_unix_ = clock_.unix_seconds();
    lost_at_interval_start_ = lost_since_start();
}

void LiveProfile::serve_requests() {
    std::deque<std::shared_ptr<DumpRequest>> taken;
    {
        std::lock_guard<std::mutex> lock(mutex_);
        taken.swap(requests_);
    }
    if (taken.empty()) return;
    if (hold_for_names()) {
        std::lock_guard<std::mutex> lock(mutex_);
        requests_.insert(requests_.begin(), taken.begin(), taken.end());
        return;
    }
    // What was queued before the request belongs in the dump; bounded, as the reader may keep
    // the queue busy.
    for (size_t i = 0; i <= settings_.queue_slots / kBatch && drain_batch(); ++i) {
    }
    for (auto& request : taken) {
        std::string path;
        Status status = broken_ ? Status(make_error(Errc::kResourceLimit, "the live profile ran out of memory"))
                                : write_current(request->pattern, clock_.unix_seconds(), &path);
        std::lock_guard<std::mutex> lock(mutex_);
        request->result = status.ok() ? Result<std::string>(path) : Result<std::string>(status.error());
        request->done = true;
    }
    done_.notify_all();
}

Result<std::string> LiveProfile::dump(const std::string& path, int timeout_ms) {
    const std::string pattern = path.empty() ? settings_.file : path;
    if (pattern.empty()) return make_error(Errc::kInvalidArgument, "no file to dump to", "give file=PATH");
    if (Result<profile::ProfileFormat> format = profile::format_for_path(pattern); !format.ok()) return format.error();
    if (!running()) return make_error(Errc::kInvalidArgument, "the live profile is not running");
    auto request = std::make_shared<DumpRequest>();
    request->pattern = pattern;
    std::unique_lock<std::mutex> lock(mutex_);
    requests_.push_back(request);
    wake_.notify_all();
    if (!done_.wait_for(lock, std::chrono::milliseconds(timeout_ms), [&] { return request->done; })) {
        return make_error(Errc::kInternal, "the decoder thread did not write the profile within " +
                                               std::to_string(timeout_ms) + " ms (it will still do it)");
    }
    return request->result;
}

void LiveProfile::report_unknown_method() {
    constexpr uint64_t kAtMostEveryNs = 1'000'000'000;
    if (!settings_.unknown_method) return;
    const uint64_t now = clock_.monotonic_ns();
    if (unknown_method_reported_ns_ != 0 && now - unknown_method_reported_ns_ < kAtMostEveryNs) return;
    unknown_method_reported_ns_ = now;
    try {
        settings_.unknown_method();
    } catch (const std::exception& e) {
        SF_LOG_WARN("live profile: unknown method not reported: %s", e.what());
    }
}

void LiveProfile::hand_over_wanted_names() {
    if (!names_->any_wanted()) return;
    std::vector<uint64_t> wanted = names_->take_wanted();
    if (!settings_.want_names) return;
    try {
        settings_.want_names(std::move(wanted));
    } catch (const std::exception& e) {
        SF_LOG_WARN("live profile: methods' names not asked for: %s", e.what());
    }
}

bool LiveProfile::names_pending() const {
    const auto waiting = [this](const profile::Cct& cct) {
        for (uint64_t id : cct.unnamed_methods()) {
            if (!answered_names_.contains(id)) return true;
        }
        return false;
    };
    return waiting(*cct_) || waiting(*off_cpu_cct_);
}

bool LiveProfile::hold_for_names() {
    // Without someone who answers (want_names), waiting would only delay the file.
    if (!settings_.lazy_names || !settings_.want_names || broken_) return false;
    const uint64_t now = clock_.monotonic_ns();
    if (names_hold_until_ == 0) {
        if (!names_pending()) return false;
        names_hold_until_ = now + kNamesHoldNs;
        holding_names_.store(true, std::memory_order_relaxed);
        return true;
    }
    if (now < names_hold_until_ && names_pending()) return true;
    names_hold_until_ = 0;
    holding_names_.store(false, std::memory_order_relaxed);
    return false;
}

void LiveProfile::name_trees() {
    if (broken_) return;
    try {
        cct_->resolve_names();
        off_cpu_cct_->resolve_names();
    } catch (const std::bad_alloc&) {
        broken_ = true;
    }
}

void LiveProfile::name_before_stop() {
    if (!settings_.lazy_names || !settings_.names_now || broken_) return;
    std::vector<uint64_t> ids = cct_->unnamed_methods();
    const std::vector<uint64_t> off_cpu = off_cpu_cct_->unnamed_methods();
    ids.insert(ids.end(), off_cpu.begin(), off_cpu.end());
    // Those whose NamedMethod has come meanwhile need no second one.
    std::erase_if(ids, [this](uint64_t id) {
        const MethodInfo* info = stream_->code_map().method_by_id(id);
        return info != nullptr && !info->name.empty();
    });
    std::sort(ids.begin(), ids.end());
    ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
    (void)names_->take_wanted();   // answered now, or never
    if (ids.empty()) return;
    std::vector<NamedMethod> names;
    if (!started_.load()) {
        names = settings_.names_now(ids);   // stop() runs this on its own thread
    } else {
        std::unique_lock<std::mutex> lock(mutex_);
        final_names_wanted_ = std::move(ids);
        final_names_asked_ = true;
        done_.notify_all();
        if (!done_.wait_for(lock, std::chrono::milliseconds(kFinalNamesWaitMs), [&] { return final_names_ready_; })) {
            SF_LOG_WARN("live profile: the methods' names did not come within %d ms; their frames stay unnamed",
                        kFinalNamesWaitMs);
            return;
        }
        names = std::move(final_names_);
    }
    for (NamedMethod& named : names) consume(Event(std::move(named)));
}

void LiveProfile::finish() {
    // Everything the producer queued before stop() is decoded; nothing more arrives (and the
    // process ends: no trim after that backlog).
    finishing_ = true;
    while (poll_once()) {
    }
    try {
        if (!broken_) stream_->flush();
    } catch (const std::bad_alloc&) {
        broken_ = true;
    }
    const uint64_t naming_from = thread_cpu_ns();
    name_before_stop();
    name_trees();
    SF_LOG_DEBUG("live profile: naming the trees at the stop took %.1f ms of the decoder thread",
                 static_cast<double>(thread_cpu_ns() - naming_from) / 1e6);
    std::string file;
    {
        std::lock_guard<std::mutex> lock(mutex_);
        file = final_file_.empty() ? settings_.file : final_file_;
    }
    if (!file.empty() && !broken_) (void)write_current(file, interval_start_unix_, nullptr);
    publish_period();
    if (started_.load()) {   // on the decoder thread: its whole CPU time, the final write included
        decoder_cpu_ns_.store(thread_cpu_ns());
        decoder_page_faults_.store(thread_page_faults());
        decoder_tid_.store(0, std::memory_order_release);
    }
    std::lock_guard<std::mutex> lock(mutex_);
    finished_ = true;
    done_.notify_all();
}

void LiveProfile::stop(int timeout_ms, const std::string& final_file) {
    if (stopped_.exchange(true)) return;
    {
        std::lock_guard<std::mutex> lock(mutex_);
        final_file_ = final_file;
    }
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    // The producer has stopped: this thread takes over its end of the queue to pass on the backlog.
    if (!started_.load()) {
        while (!backlog_.empty()) {
            flush_backlog();
            while (poll_once()) {
            }
        }
        finish();
        return;
    }
    while (!backlog_.empty() && std::chrono::steady_clock::now() < deadline) {
        flush_backlog();
        if (!backlog_.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    std::unique_lock<std::mutex> lock(mutex_);
    stop_requested_ = true;
    wake_.notify_all();
    while (true) {
        const bool woken = done_.wait_until(lock, deadline, [&] {
            return finished_ || (final_names_asked_ && !final_names_taken_);
        });
        if (!woken) {
            SF_LOG_WARN("live profile: the decoder thread did not finish within %d ms; the profile is not written", timeout_ms);
            return;
        }
        if (finished_) break;
        // The decoder thread's last question: the names of methods its trees still lack, which
        // only a thread attached to the VM (this one) can ask the JVM.
        final_names_taken_ = true;
        std::vector<uint64_t> ids = std::move(final_names_wanted_);
        lock.unlock();
        std::vector<NamedMethod> names;
        try {
            names = settings_.names_now(ids);
        } catch (const std::exception& e) {
            SF_LOG_WARN("live profile: methods' names not read: %s", e.what());
        }
        lock.lock();
        final_names_ = std::move(names);
        final_names_ready_ = true;
        done_.notify_all();
    }
    lock.unlock();
    pthread_join(thread_, nullptr);
}

LiveCounts LiveProfile::counts(size_t top) const {
    LiveCounts out;
    out.samples = samples_.load();
    out.jvmti_traces = jvmti_traces_.load();
    out.decoder_cpu_ns = decoder_cpu_ns_.load();
    out.decoder_page_faults = decoder_page_faults_.load();
    out.threads_cut = threads_cut_.load(std::memory_order_relaxed);
    out.threads_given_back = threads_given_back_.load(std::memory_order_relaxed);
    out.dropped = dropped_.load();
    out.metadata_dropped = metadata_dropped_.load();
    out.peak_queued_bytes = peak_queued_bytes_.load(std::memory_order_relaxed);
    out.peak_queued_buffer_bytes = peak_queued_buffer_bytes_.load(std::memory_order_relaxed);
    out.buffers_released = buffers_released_.load(std::memory_order_relaxed);
    out.heap_trims = heap_trims_.load(std::memory_order_relaxed);
    out.heap_trimmed_bytes = heap_trimmed_bytes_.load(std::memory_order_relaxed);
    out.heap_trim_ns = heap_trim_ns_.load(std::memory_order_relaxed);
    out.lost = lost_total_.load();
    out.off_cpu_samples = off_cpu_offered_.load();
    out.samples -= std::min(out.samples, out.off_cpu_samples);
    if (started_.load()) {
        std::lock_guard<std::mutex> lock(mutex_);
        out.decoder_running = !finished_;
    }
    out.coverage = coverage_.coverage();
    if (out.decoder_running) return out;
    out.stack_bytes = stream_ && stream_->code_map().has_vm() ? stream_->code_map().vm().sample_stack_bytes : 0;
    if (stream_) out.retried = stream_->retry_stats();
    if (stream_) out.stitching = stream_->stitch_stats();
    if (stream_) out.top_only = stream_->top_only_traces();
    profile::TraceCounts all = past_counts_;
    const profile::TraceCounts& now = cct_->trace_counts();
    all.added += now.added;
    all.incomplete += now.incomplete;
    all.failed += now.failed;
    for (size_t i = 0; i < now.failed_by_reason.size(); ++i) all.failed_by_reason[i] += now.failed_by_reason[i];
    // Samples the filter dropped were decoded too; only the tree leaves them out.
    out.filtered = filtered_;
    out.decoded = all.added + filtered_.dropped();
    out.incomplete = all.incomplete + filtered_incomplete_;
    out.failed = all.failed;
    for (size_t i = 0; i < all.failed_by_reason.size(); ++i) {
        if (all.failed_by_reason[i] != 0) out.failed_by_reason[fail_reason_name(static_cast<FailReason>(i))] = all.failed_by_reason[i];
    }
    out.files_written = files_written_;
    out.write_errors = write_errors_;
    out.off_cpu_decoded = off_cpu_past_counts_.added + off_cpu_cct_->trace_counts().added;
    out.off_cpu_failed = off_cpu_past_counts_.failed + off_cpu_cct_->trace_counts().failed;
    if (top == 0) return out;   // no method lists asked for (the agent's CPU line): their walks skipped
    std::map<std::string, uint64_t> self = past_self_;
    add_self_samples(*cct_, self);
    out.top_self.assign(self.begin(), self.end());
    std::stable_sort(out.top_self.begin(), out.top_self.end(),
                     [](const auto& a, const auto& b) { return a.second > b.second; });
    if (out.top_self.size() > top) out.top_self.resize(top);
    std::map<std::string, uint64_t> off_self = off_cpu_past_self_;
    add_self_samples(*off_cpu_cct_, off_self);
    out.off_cpu_top_self.assign(off_self.begin(), off_self.end());
    std::stable_sort(out.off_cpu_top_self.begin(), out.off_cpu_top_self.end(),
                     [](const auto& a, const auto& b) { return a.second > b.second; });
    if (out.off_cpu_top_self.size() > top) out.off_cpu_top_self.resize(top);
    return out;
}

std::string LiveProfile::summary_text(size_t top) const {
    const LiveCounts c = counts(top);
    char line[512];
    std::string out;
    if (c.decoder_running) {
        snprintf(line, sizeof line,
                 "stop summary: %llu samples taken; the live decoder had not finished, no decode figures; "
                 "lost %llu (kernel), %llu (live queue full)",
                 static_cast<unsigned long long>(c.samples), static_cast<unsigned long long>(c.lost),
                 static_cast<unsigned long long>(c.dropped));
        return line;
    }
    snprintf(line, sizeof line,
             "stop summary: %llu samples taken%s; decoded %.1f%% (%llu), incomplete %.1f%% (%llu), failed %.1f%% (%llu); "
             "lost %llu (kernel), %llu (live queue full)",
             static_cast<unsigned long long>(c.samples),
             c.jvmti_traces != 0 ? " (jvmti mode: GetAllStackTraces at safepoints, not decoded)" : "",
             percent(c.decoded, c.samples),
             static_cast<unsigned long long>(c.decoded), percent(c.incomplete, c.samples),
             static_cast<unsigned long long>(c.incomplete), percent(c.failed, c.samples),
             static_cast<unsigned long long>(c.failed), static_cast<unsigned long long>(c.lost),
             static_cast<unsigned long long>(c.dropped));
    out += line;
    if (const std::string hint = incomplete_hint(c.incomplete, c.samples, c.stack_bytes); !hint.empty()) {
        out += "\n  " + hint;
    }
    if (!c.failed_by_reason.empty()) {
        out += "\n  failed by reason:";
        for (const auto& [reason, n] : c.failed_by_reason) out += " " + reason + "=" + std::to_string(n);
        // Deep recursion is the one reason whose traces are right as far as they go: say so, lest
        // a user take them for the decoder's breakdowns (async-profiler cuts such stacks silently).
        if (const auto deep = c.failed_by_reason.find(fail_reason_name(FailReason::kTooDeep)); deep != c.failed_by_reason.end()) {
            out += "\n  too_deep: " + std::to_string(deep->second) + " stacks had more than " +
                   std::to_string(settings_.decoder.decoder.max_frames) +
                   " frames (deep recursion); each keeps its innermost ones, under " +
                   profile::failed_frame_name(FailReason::kTooDeep);
        }
    }
    if (c.retried.retried != 0) {
        out += "\n  decoded again once later code announcements were in (failed or through unannounced code): " +
               std::to_string(c.retried.retried) + ", of which " + std::to_string(c.retried.resolved) + " resolved";
    }
    if (c.stitching.stitched != 0) {
        out += "\n  stitched (completed with the thread's earlier snapshot): " + std::to_string(c.stitching.stitched);
    }
    if (c.top_only != 0) {
        out += "\n  the profiler's own threads: " + std::to_string(c.top_only) + " samples, each its top frame alone";
    }
    if (c.metadata_dropped != 0) out += "\n  code events dropped by the live queue: " + std::to_string(c.metadata_dropped);
    if (c.peak_queued_buffer_bytes != 0) {
        snprintf(line, sizeof line, "\n  live queue: at most %.1f MB of fragments waited for the decoder, in %.1f MB of buffers",
                 static_cast<double>(c.peak_queued_bytes) / 1e6, static_cast<double>(c.peak_queued_buffer_bytes) / 1e6);
        out += line;
        if (c.buffers_released != 0) out += "; " + std::to_string(c.buffers_released) + " buffers of its backlogs given back to the system";
        if (c.heap_trims != 0) {
            snprintf(line, sizeof line, "; after %s the allocator gave %.1f MB of free memory back (malloc_trim, %.1f ms)",
                     c.heap_trims == 1 ? "it" : "them", static_cast<double>(c.heap_trimmed_bytes) / 1e6,
                     static_cast<double>(c.heap_trim_ns) / 1e6);
            out += line;
        }
    }
    if (c.threads_cut != 0) {
        out += "\n  fragments cut where the walks stop reading (above a thread's first frame): " +
               std::to_string(c.threads_cut) + " threads";
        if (c.threads_given_back != 0) {
            out += ", " + std::to_string(c.threads_given_back) + " of them given their whole stack again (walks ran off at the cut)";
        }
    }
    out += "\n  " + profile::coverage_text(c.coverage);
    if (!filter_.empty()) {
        out += "\n  " + profile::filter_sentence(filter_, c.decoded - c.filtered.dropped(), c.decoded, c.filtered);
    }
    if (!c.top_self.empty()) {
        out += "\n  top methods by self samples:";
        for (const auto& [name, n] : c.top_self) {
            // Of the samples in the tree: the decoded ones the filter kept, and the failed ones.
            snprintf(line, sizeof line, "\n  %6.2f%% %8llu  %s", percent(n, c.decoded - c.filtered.dropped() + c.failed),
                     static_cast<unsigned long long>(n),
                     name.c_str());
            out += line;
        }
    }
    if (c.off_cpu_samples != 0 || settings_.off_cpu) {
        snprintf(line, sizeof line, "\n  off-CPU: %llu context switches sampled; decoded %.1f%% (%llu), failed %.1f%% (%llu)",
                 static_cast<unsigned long long>(c.off_cpu_samples), percent(c.off_cpu_decoded, c.off_cpu_samples),
                 static_cast<unsigned long long>(c.off_cpu_decoded), percent(c.off_cpu_failed, c.off_cpu_samples),
                 static_cast<unsigned long long>(c.off_cpu_failed));
        out += line;
        if (!c.off_cpu_top_self.empty()) out += "\n  top frames where threads left the CPU:";
        for (const auto& [name, n] : c.off_cpu_top_self) {
            snprintf(line, sizeof line, "\n  %6.2f%% %8llu  %s", percent(n, c.off_cpu_decoded + c.off_cpu_failed),
                     static_cast<unsigned long long>(n), name.c_str());
            out += line;
        }
    }
    return out;
}

std::optional<LiveSettings> live_settings_from(const AgentOptions& options, uint32_t pid) {
    if (options.file.empty() && !options.record_path.empty() && !options.interval_auto && options.push_url.empty()) {
        return std::nullopt;
    }
    LiveSettings settings;
    settings.file = options.file;
    settings.loop_ns = options.loop_ns;
    settings.title = options.title;
    settings.group = options.group;
    settings.pid = pid;
    settings.off_cpu = options.sample_switch;
    settings.decoder.decoder.max_frames = options.max_frames;   // the VmInfo says the same to a replay
    // parse_options accepted both patterns already.
    if (auto filter = profile::TraceFilter::parse(options.focus, options.exclude); filter.ok()) {
        settings.filter = std::move(*filter);
    }
    return settings;
}

}  // namespace sf::agent
