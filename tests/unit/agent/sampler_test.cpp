// The reader thread on real perf events: a spinning thread of this binary is sampled at its CPU
// time x rate, its ring is drained and closed at end_thread, the stream comes out in time order,
// and stop() finishes in bounded time with every event written.
#include <catch2/catch.hpp>

#include <dirent.h>
#include <sched.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "agent_test_threads.hpp"
#include "stackfrag/base/clock.hpp"
#include "sampler.hpp"
#include "test_recording.hpp"
#include "stackfrag/events/recording.hpp"

using namespace sf;
using namespace sf::agent;

namespace {

struct Recorded {
    uint64_t samples = 0;
    uint64_t samples_of_tid = 0;
    uint64_t lost = 0;
    uint64_t thread_infos = 0;
    bool ordered = true;
    bool stacks_ok = true;
    bool damaged = false;
};

// A reader at 1 kHz writing nowhere (the writer counts what it is given).
struct SamplerAt1ms {
    EventQueue queue;
    StreamWriter writer{nullptr};
    kernel::SamplingConfig config = [] {
        kernel::SamplingConfig c;
        c.period_ns = 1'000'000;
        return c;
    }();
    Sampler sampler{config, queue, writer, nullptr};
};

Recorded read_back(const std::string& path, pid_t tid) {
    Recorded recorded;
    Result<std::unique_ptr<RecordingReader>> reader = RecordingReader::open(path);
    REQUIRE(reader.ok());
    uint64_t last = 0;
    while (std::optional<Event> event = (*reader)->next()) {
        if (time_of(*event) < last) recorded.ordered = false;
        last = std::max(last, time_of(*event));
        if (const auto* sample = std::get_if<Sample>(&*event)) {
            ++recorded.samples;
            if (sample->tid == static_cast<uint32_t>(tid)) ++recorded.samples_of_tid;
            recorded.stacks_ok &= !sample->stack.empty() && sample->stack_sp == sample->regs.sp &&
                                  sample->pid == static_cast<uint32_t>(getpid()) &&
                                  sample->source == SampleSource::kPerf && sample->regs.ip != 0;
        } else if (const auto* lost = std::get_if<Lost>(&*event)) {
            recorded.lost += lost->count;
        } else if (std::holds_alternative<ThreadInfo>(*event)) {
            ++recorded.thread_infos;
        }
    }
    recorded.damaged = (*reader)->damage().has_value();
    return recorded;
}

}  // namespace

TEST_CASE("a registered thread is sampled at about its CPU time x rate, in time order") {
    const std::string path = "/tmp/sf-agent-sampler-" + std::to_string(getpid()) + ".sfr";
    EventQueue queue;
    StreamWriter writer(test::new_recording(path));
    kernel::SamplingConfig config;
    config.period_ns = 1'000'000;
    Sampler sampler(config, queue, writer, nullptr);
    const bool register_before_start = GENERATE(false, true);

    // Catch's assertions belong on this thread: the spinner only reports.
    std::atomic<bool> added{false};
    auto register_self = [&] { added = sampler.add_thread(static_cast<pid_t>(syscall(SYS_gettid))).ok(); };
    std::unique_ptr<test::SpinningThread> spinner;
    if (register_before_start) {
        // Opened before the reader runs (threads seen before VMInit): enabled when it starts.
        spinner = std::make_unique<test::SpinningThread>(register_self);
        REQUIRE(sampler.start().ok());
    } else {
        REQUIRE(sampler.start().ok());
        spinner = std::make_unique<test::SpinningThread>(register_self);
    }
    REQUIRE(added);
    const pid_t tid = spinner->tid();
    queue.emit(ThreadInfo{monotonic_ns(), static_cast<uint32_t>(tid), false, "spinner"});
    spinner->wait_for_cpu_ms(300);
    sampler.end_thread(tid);
    const uint64_t cpu_at_end = spinner->cpu_so_far();
    // The reader closes the event when it next runs: on a loaded machine that can be many
    // milliseconds of the spinner's CPU later, so the upper bound counts up to the close.
    for (int waited = 0; waited < 200 && sampler.stats().threads_closed == 0; ++waited) {
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    const uint64_t cpu_at_close = spinner->cpu_so_far();
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    spinner->stop();
    queue.emit(ThreadInfo{monotonic_ns(), static_cast<uint32_t>(tid), true, "spinner"});

    const auto before_stop = std::chrono::steady_clock::now();
    REQUIRE(sampler.stop(3000));
    CHECK(std::chrono::steady_clock::now() - before_stop < std::chrono::seconds(1));
    CHECK(sampler.stats().threads_opened == 1);
    CHECK(sampler.stats().threads_closed == 1);

    const Recorded recorded = read_back(path, tid);
    CHECK_FALSE(recorded.damaged);
    CHECK(recorded.ordered);
    CHECK(recorded.stacks_ok);
    CHECK(recorded.thread_infos == 2);
    CHECK(writer.counts().of(EventKind::kSample) == recorded.samples);
    // Sampling stopped at end_thread: no sample after the reader closed the event, though the
    // spinner ran on for 100 ms.
    const double expected = static_cast<double>(cpu_at_end) / 1e6;
    const double until_close = static_cast<double>(cpu_at_close) / 1e6;
    INFO("samples " << recorded.samples_of_tid << ", spinner CPU " << expected << " ms at end_thread, "
                    << until_close << " ms at the close, lost " << recorded.lost);
    CHECK(recorded.samples_of_tid + recorded.lost >= 0.8 * expected - 5);
    CHECK(recorded.samples_of_tid <= 1.1 * until_close + 10);
    std::remove(path.c_str());
}

namespace {

// The tids of this process's threads named `name`.
std::vector<pid_t> tasks_named(const std::string& name) {
    std::vector<pid_t> found;
    DIR* dir = opendir("/proc/self/task");
    if (dir == nullptr) return found;
    while (dirent* entry = readdir(dir)) {
        const pid_t tid = static_cast<pid_t>(std::atoi(entry->d_name));
        if (tid <= 0) continue;
        std::ifstream comm("/proc/self/task/" + std::to_string(tid) + "/comm");
        std::string text;
        std::getline(comm, text);
        if (text == name) found.push_back(tid);
    }
    closedir(dir);
    return found;
}

}  // namespace

TEST_CASE("the reader raises its priority: real-time where permitted, so that a loaded machine does not fill its rings") {
    EventQueue queue;
    StreamWriter writer(nullptr);
    kernel::SamplingConfig config;
    Sampler sampler(config, queue, writer, nullptr);
    REQUIRE(tasks_named("stackfrag-read").empty());
    REQUIRE(sampler.start().ok());
    for (int i = 0; i < 200 && sampler.stats().reader_priority == kernel::ReaderPriority::kUnchanged; ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    const std::vector<pid_t> readers = tasks_named("stackfrag-read");
    REQUIRE(readers.size() == 1);
    const int policy = sched_getscheduler(readers[0]);
    sched_param param{};
    REQUIRE(sched_getparam(readers[0], &param) == 0);
    // What the kernel lets this process have decides which: the test runs as root in CI.
    sched_param probe{};
    probe.sched_priority = 1;
    const bool realtime_permitted = sched_setscheduler(0, SCHED_FIFO, &probe) == 0;
    if (realtime_permitted) {
        probe.sched_priority = 0;
        REQUIRE(sched_setscheduler(0, SCHED_OTHER, &probe) == 0);   // this thread back to normal
        CHECK(sampler.stats().reader_priority == kernel::ReaderPriority::kRealtime);
        CHECK(policy == SCHED_FIFO);
        CHECK(param.sched_priority == 1);
    } else {
        CHECK(sampler.stats().reader_priority != kernel::ReaderPriority::kRealtime);
        CHECK(policy == SCHED_OTHER);
    }
    REQUIRE(sampler.stop(3000));
}

TEST_CASE("reader=normal leaves the reader with the scheduling every thread gets") {
    EventQueue queue;
    StreamWriter writer(nullptr);
    kernel::SamplingConfig config;
    Sampler sampler(config, queue, writer, nullptr);
    sampler.set_realtime_reader(false);
    REQUIRE(tasks_named("stackfrag-read").empty());
    REQUIRE(sampler.start().ok());
    std::vector<pid_t> readers;
    for (int i = 0; i < 200 && readers.empty(); ++i) {
        readers = tasks_named("stackfrag-read");
        if (readers.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    REQUIRE(readers.size() == 1);
    std::this_thread::sleep_for(std::chrono::milliseconds(50));   // past where a realtime reader asks
    CHECK(sched_getscheduler(readers[0]) == SCHED_OTHER);
    CHECK(sampler.stats().reader_priority == kernel::ReaderPriority::kUnchanged);
    REQUIRE(sampler.stop(3000));
}

TEST_CASE("a thread that exits without end_thread is closed on its hang-up") {
    EventQueue queue;
    StreamWriter writer(nullptr);
    kernel::SamplingConfig config;
    Sampler sampler(config, queue, writer, nullptr);
    REQUIRE(sampler.start().ok());
    std::atomic<bool> added{false};
    {
        test::SpinningThread spinner([&] { added = sampler.add_thread(static_cast<pid_t>(syscall(SYS_gettid))).ok(); });
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    REQUIRE(added);
    for (int i = 0; i < 100 && sampler.stats().threads_closed == 0; ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    CHECK(sampler.stats().threads_closed == 1);
    REQUIRE(sampler.stop(3000));
    CHECK(writer.counts().of(EventKind::kSample) > 0);
}

TEST_CASE("a thread gone before its event opened does not turn sampling off") {
    EventQueue queue;
    StreamWriter writer(nullptr);
    Sampler sampler(kernel::SamplingConfig{}, queue, writer, nullptr);
    REQUIRE(sampler.start().ok());
    Status gone = sampler.add_thread(0x3fffff00);
    REQUIRE_FALSE(gone.ok());
    CHECK_FALSE(sampler.open_error().has_value());
    std::atomic<bool> added{false};
    test::SpinningThread spinner([&] { added = sampler.add_thread(static_cast<pid_t>(syscall(SYS_gettid))).ok(); });
    spinner.stop();
    CHECK(added);
    CHECK(sampler.stop(3000));
}

TEST_CASE("stop without a started reader drains on the caller; per-CPU events work") {
    EventQueue queue;
    StreamWriter writer(nullptr);
    kernel::SamplingConfig config;
    Sampler sampler(config, queue, writer, nullptr);
    // Inherited per-CPU events follow threads created after they were opened.
    REQUIRE(sampler.add_cpus(static_cast<pid_t>(syscall(SYS_gettid))).ok());
    REQUIRE(sampler.start().ok());
    {
        test::SpinningThread spinner;
        spinner.wait_for_cpu_ms(200);
    }
    queue.emit(Lost{monotonic_ns(), 0, 0});
    REQUIRE(sampler.stop(3000));
    CHECK(writer.counts().of(EventKind::kSample) > 100);
    CHECK(writer.counts().of(EventKind::kLost) >= 1);

    EventQueue idle_queue;
    StreamWriter idle_writer(nullptr);
    Sampler never_started(config, idle_queue, idle_writer, nullptr);
    idle_queue.emit(VmInfo{});
    CHECK(never_started.stop(100));
    CHECK(idle_writer.counts().of(EventKind::kVmInfo) == 1);
}

TEST_CASE("per-CPU rings: quiet cycles lengthen the cadence, and a thread that turns busy loses nothing") {
    SamplerAt1ms s;
    const kernel::SamplingConfig& config = s.config;
    Sampler& sampler = s.sampler;
    StreamWriter& writer = s.writer;
    REQUIRE(sampler.add_cpus(static_cast<pid_t>(syscall(SYS_gettid))).ok());
    const uint64_t started_ns = monotonic_ns();
    REQUIRE(sampler.start().ok());
    // A second of nothing to read, then a thread that spins: it fills its CPU's ring from the
    // middle of a lengthened wait, whose watermark wakes the reader.
    std::this_thread::sleep_for(std::chrono::milliseconds(1000));
    uint64_t spun_ns = 0;
    {
        test::SpinningThread spinner;
        spinner.wait_for_cpu_ms(300);
        spun_ns = spinner.stop();
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    const uint64_t wall_ns = monotonic_ns() - started_ns;
    REQUIRE(sampler.stop(3000));

    const SamplerStats stats = sampler.stats();
    const uint64_t samples = writer.counts().of(EventKind::kSample);
    INFO("cycles " << stats.cycles << " (" << stats.lengthened_cycles << " lengthened, " << stats.early_cycles
                   << " early) every " << stats.cadence_ns << " ns; samples " << samples << " for " << spun_ns
                   << " ns spun; lost " << writer.counts().of(EventKind::kLost));
    // At the usual cadence the run would have taken wall / cadence cycles; the 1.2 s without
    // samples took a few lengthened ones (at most 8 cadences each) instead.
    REQUIRE(stats.cadence_ns > 0);
    CHECK(stats.lengthened_cycles >= 3);
    CHECK(static_cast<double>(stats.cycles) < 0.7 * static_cast<double>(wall_ns) / static_cast<double>(stats.cadence_ns));
    // The spinner's samples all arrived: about one per period of its CPU time, none lost.
    CHECK(writer.counts().of(EventKind::kLost) == 0);
    CHECK(static_cast<double>(samples) >= 0.8 * static_cast<double>(spun_ns) / static_cast<double>(config.period_ns));
}

TEST_CASE("end_cpus hands a thread over from the per-CPU events to its own: its samples go on, none twice") {
    const std::string path = "/tmp/sf-agent-endcpus-" + std::to_string(getpid()) + ".sfr";
    EventQueue queue;
    StreamWriter writer(test::new_recording(path));
    kernel::SamplingConfig config;
    config.period_ns = 1'000'000;
    Sampler sampler(config, queue, writer, nullptr);
    // As the agent does from its load until VMInit in mode=thread.
    REQUIRE(sampler.add_cpus(static_cast<pid_t>(syscall(SYS_gettid))).ok());
    REQUIRE(sampler.start().ok());
    test::SpinningThread spinner;
    spinner.wait_for_cpu_ms(100);
    const uint64_t opened_before = sampler.stats().threads_opened;
    REQUIRE(sampler.add_thread(spinner.tid()).ok());
    sampler.end_cpus();
    for (int waited = 0; waited < 200 && sampler.stats().threads_closed < opened_before; ++waited) {
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    CHECK(sampler.stats().threads_closed == opened_before);   // every per-CPU ring, not the thread's
    const uint64_t cpu_at_handover = spinner.cpu_so_far();
    spinner.wait_for_cpu_ms(cpu_at_handover / 1'000'000 + 100);
    const uint64_t cpu_at_end = spinner.cpu_so_far();
    sampler.end_thread(spinner.tid());
    for (int waited = 0; waited < 200 && sampler.stats().threads_closed == opened_before; ++waited) {
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    const uint64_t cpu_at_close = spinner.cpu_so_far();
    spinner.stop();
    REQUIRE(sampler.stop(3000));
    const Recorded recorded = read_back(path, spinner.tid());
    CHECK(recorded.ordered);
    // About the spinner's CPU time x rate from its first instant, through the handover: not the
    // double an overlap of both kinds of event would give, nor a gap's loss.
    INFO("samples " << recorded.samples_of_tid << ", spinner CPU " << cpu_at_end / 1e6 << " ms ("
                    << cpu_at_close / 1e6 << " at the close), lost " << recorded.lost);
    CHECK(recorded.samples_of_tid + recorded.lost >= 0.8 * static_cast<double>(cpu_at_end) / 1e6 - 5);
    CHECK(recorded.samples_of_tid <= 1.1 * static_cast<double>(cpu_at_close) / 1e6 + 10);
    std::remove(path.c_str());
}

TEST_CASE("an event stamped by a producer still in flight is not overtaken, however late it is emitted") {
    const std::string path = "/tmp/sf-agent-inflight-" + std::to_string(getpid()) + ".sfr";
    EventQueue queue;
    StreamWriter writer(test::new_recording(path));
    kernel::SamplingConfig config;
    Sampler sampler(config, queue, writer, nullptr);
    REQUIRE(sampler.start().ok());

    std::atomic<bool> stamped{false};
    std::thread slow_callback([&] {
        EventQueue::InFlight in_flight(queue);
        const uint64_t stamp = monotonic_ns();
        stamped = true;
        // Far longer than the reader's fixed hold-back (20 ms), as a preempted callback might take.
        std::this_thread::sleep_for(std::chrono::milliseconds(150));
        queue.emit(ThreadInfo{stamp, 1, false, "late"});
    });
    while (!stamped) std::this_thread::yield();
    CHECK(queue.oldest_in_flight() != 0);
    // Meanwhile other producers keep emitting, each with its own, later time.
    for (int i = 0; i < 30; ++i) {
        queue.emit(ThreadInfo{monotonic_ns(), 2, false, "prompt"});
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    slow_callback.join();
    CHECK(queue.oldest_in_flight() == 0);
    REQUIRE(sampler.stop(3000));

    const Recorded recorded = read_back(path, 0);
    CHECK_FALSE(recorded.damaged);
    CHECK(recorded.thread_infos == 31);
    CHECK(recorded.ordered);
    std::remove(path.c_str());
}

TEST_CASE("the JVM's start is held past a second while hold_for_start is on: a slow VMInit's events still come first") {
    // A loaded machine: VMInit's scan ended 2-3 s after the agent's load, and the samples released
    // after a second failed (no VmInfo or methods before them).
    const bool start_hold = GENERATE(true, false);
    const std::string path = "/tmp/sf-agent-starthold-" + std::to_string(getpid()) + ".sfr";
    EventQueue queue;
    StreamWriter writer(test::new_recording(path));
    kernel::SamplingConfig config;
    Sampler sampler(config, queue, writer, nullptr);
    sampler.hold_for_start(start_hold);
    REQUIRE(sampler.start().ok());
    std::atomic<bool> stamped{false};
    std::thread slow_start([&] {
        EventQueue::InFlight in_flight(queue);
        const uint64_t stamp = monotonic_ns();
        stamped = true;
        std::this_thread::sleep_for(std::chrono::milliseconds(1400));
        queue.emit(ThreadInfo{stamp, 1, false, "vm info"});
    });
    while (!stamped) std::this_thread::yield();
    for (int i = 0; i < 14; ++i) {
        queue.emit(ThreadInfo{monotonic_ns(), 2, false, "sample"});
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    slow_start.join();
    sampler.hold_for_start(false);
    REQUIRE(sampler.stop(3000));
    const Recorded recorded = read_back(path, 0);
    INFO("start hold " << start_hold);
    CHECK(recorded.thread_infos == 15);
    // Without it, the reader stops waiting for the producer after a second, as before.
    CHECK(recorded.ordered == start_hold);
    std::remove(path.c_str());
}

namespace {

// `count` threads registered with the sampler that sleep until finish() (a service's idle workers).
class IdleThreads {
public:
    IdleThreads(Sampler& sampler, int count) {
        for (int i = 0; i < count; ++i) {
            threads_.emplace_back([this, &sampler] {
                if (sampler.add_thread(static_cast<pid_t>(syscall(SYS_gettid))).ok()) ++registered_;
                std::unique_lock<std::mutex> lock(mutex_);
                done_.wait(lock, [this] { return finish_; });
            });
        }
    }
    ~IdleThreads() { finish(); }
    // Wakes and joins them; how many registered.
    int finish() {
        {
            std::lock_guard<std::mutex> lock(mutex_);
            finish_ = true;
        }
        done_.notify_all();
        for (std::thread& thread : threads_) {
            if (thread.joinable()) thread.join();
        }
        return registered_;
    }

private:
    std::mutex mutex_;
    std::condition_variable done_;
    bool finish_ = false;
    std::atomic<int> registered_{0};
    std::vector<std::thread> threads_;
};

}  // namespace

TEST_CASE("idle threads' rings cost the reader a look per cycle, never a drain or a wake-up") {
    SamplerAt1ms s;
    const kernel::SamplingConfig& config = s.config;
    Sampler& sampler = s.sampler;
    StreamWriter& writer = s.writer;
    REQUIRE(sampler.start().ok());

    // Sixteen registered threads that sleep throughout (a service's idle workers), one busy one.
    constexpr int kIdle = 16;
    IdleThreads idle(sampler, kIdle);
    test::SpinningThread spinner([&] { (void)sampler.add_thread(static_cast<pid_t>(syscall(SYS_gettid))); });
    spinner.wait_for_cpu_ms(300);
    spinner.stop();
    REQUIRE(idle.finish() == kIdle);
    REQUIRE(sampler.stop(3000));

    const SamplerStats stats = sampler.stats();
    INFO("cycles " << stats.cycles << " (early " << stats.early_cycles << ") every " << stats.cadence_ns
                   << " ns; ring looks " << stats.ring_looks << ", drains " << stats.ring_drains << "; samples "
                   << writer.counts().of(EventKind::kSample));
    CHECK(writer.counts().of(EventKind::kSample) > 100);
    // One cadence for all rings, which leaves the reader half the time the busy thread takes to
    // fill its ring, or (a real-time reader) 10 ms of it, whichever is less.
    const uint64_t ring_records = config.ring_pages * 4096u / kernel::sample_record_bytes(config.stack_bytes);
    const uint64_t fill_ns = ring_records * config.period_ns;
    CHECK(stats.cadence_ns + std::min<uint64_t>(fill_ns / 2, 10'000'000) <= fill_ns);
    CHECK(stats.cadence_ns >= 5'000'000);
    CHECK(stats.cycles >= 10);
    // Every ring is looked at in every cycle once registered, but only rings with samples are
    // drained: the busy thread's, and the idle ones' at most for their first moments.
    CHECK(stats.ring_looks >= static_cast<uint64_t>(kIdle) * (stats.cycles / 2));
    CHECK(stats.ring_drains <= stats.cycles + kIdle);
    // The busy ring never reaches its watermark at this cadence; what comes early is rare: a
    // reader held up on a loaded machine, and the idle threads' exits (each ring hangs up).
    CHECK(stats.early_cycles <= stats.cycles / 4 + kIdle);
}

TEST_CASE("a watermark wake-up waits for the cycle only from a clock ring at its period, less than half full") {
    constexpr size_t kRing = 512 * 1024;
    constexpr uint64_t kPeriod = 1'000'000;
    CHECK(sf::agent::ring_can_wait(true, false, 0, kPeriod, kRing / 2 - 8, kRing));         // the configured period
    CHECK(sf::agent::ring_can_wait(true, false, 2 * kPeriod, kPeriod, 0, kRing));           // interval=auto: slower
    CHECK_FALSE(sf::agent::ring_can_wait(true, false, 0, kPeriod, kRing / 2, kRing));       // half full: drain now
    CHECK_FALSE(sf::agent::ring_can_wait(true, false, kPeriod / 4, kPeriod, 0, kRing));     // interval=auto: faster
    CHECK_FALSE(sf::agent::ring_can_wait(true, true, 0, kPeriod, 0, kRing));                // switch samples: no bound
    CHECK_FALSE(sf::agent::ring_can_wait(false, true, 0, kPeriod, 0, kRing));               // switch event alone
}

TEST_CASE("a quiet stretch lengthens the cadence only as far as the rings have room: 2^s cadences at most half a ring") {
    constexpr uint64_t kRing = 4 << 20;
    constexpr uint64_t kCadence = 100'000'000;
    using sf::agent::quiet_room_shift;
    CHECK(quiet_room_shift(0, kRing, kCadence, kCadence, 3) == 3);                    // nothing came
    CHECK(quiet_room_shift(kRing / 16, kRing, kCadence, kCadence, 3) == 3);           // 8 cadences: half
    CHECK(quiet_room_shift(kRing / 16 + 1, kRing, kCadence, kCadence, 3) == 2);
    CHECK(quiet_room_shift(kRing / 8, kRing, kCadence, kCadence, 3) == 2);
    CHECK(quiet_room_shift(kRing / 6, kRing, kCadence, kCadence, 3) == 1);           // xalan at 100/s: 200 ms
    CHECK(quiet_room_shift(kRing / 4, kRing, kCadence, kCadence, 3) == 1);
    CHECK(quiet_room_shift(kRing / 4 + 1, kRing, kCadence, kCadence, 3) == 0);       // no longer wait
    CHECK(quiet_room_shift(kRing / 16, kRing, kCadence, kCadence, 1) == 1);           // the cap
    // Judged per cadence: what a lengthened wait gathered counts over its length, and what a cycle
    // soon after the last one found (a watermark's wake-up) over its shorter one.
    CHECK(quiet_room_shift(kRing / 2, kRing, 4 * kCadence, kCadence, 3) == 2);        // 4 cadences' eighth each
    CHECK(quiet_room_shift(kRing / 8, kRing, kCadence / 4, kCadence, 3) == 0);        // half a ring a cadence
    CHECK(quiet_room_shift(kRing / 16, kRing, kCadence / 4, kCadence, 3) == 1);       // a quarter
    CHECK(quiet_room_shift(kRing, kRing, 0, kCadence, 3) == 0);                       // no time passed: no answer
    // A ring of many GB over long waits: no overflow.
    CHECK(quiet_room_shift(uint64_t{1} << 36, uint64_t{1} << 40, 400'000'000, kCadence, 3) == 3);
}

TEST_CASE("a real-time reader waits until its rings hold the slack's worth less than full, an ordinary one half") {
    sf::kernel::SamplingConfig config;   // 1 ms, 16 KB fragments, 128 pages
    const uint64_t records = 128 * static_cast<uint64_t>(sysconf(_SC_PAGESIZE)) / sf::kernel::sample_record_bytes(16384);
    const uint64_t fill_ns = records * config.period_ns;   // a thread sampling without pause fills its ring
    constexpr uint64_t kLimit = 100'000'000;
    CHECK(sf::agent::reader_cadence_ns(config, kLimit, false) == fill_ns / 2);
    CHECK(sf::agent::reader_cadence_ns(config, kLimit, true) == fill_ns - 10'000'000);
    // 10 kHz: a ring fills in a few ms, the reader's cycle is no longer small beside it: half.
    config.period_ns = 100'000;
    CHECK(sf::agent::reader_cadence_ns(config, kLimit, true) == records * config.period_ns / 2);
    // 100/s: the limit (the callbacks' events wait no longer) either way.
    config.period_ns = 10'000'000;
    CHECK(sf::agent::reader_cadence_ns(config, kLimit, true) == kLimit);
    CHECK(sf::agent::reader_cadence_ns(config, kLimit, false) == kLimit);
}

TEST_CASE("a clock event closed while its thread still runs says how much of the thread's CPU time it did not count") {
    const std::string path = "/tmp/sf-agent-sampler-uncounted-" + std::to_string(getpid()) + ".sfr";
    EventQueue queue;
    StreamWriter writer(test::new_recording(path));
    kernel::SamplingConfig config;
    config.period_ns = 1'000'000;
    Sampler sampler(config, queue, writer, nullptr);
    REQUIRE(sampler.start().ok());
    // A thread that wakes up often (the reader, the JVM's service threads): at each wake-up the
    // kernel's scheduling work is the thread's CPU time, but its event sees the thread only from the
    // end of the context switch.
    std::atomic<bool> done{false};
    std::atomic<pid_t> tid{0};
    std::atomic<uint64_t> cpu_at_stop{0};
    std::thread sleeper([&] {
        tid.store(static_cast<pid_t>(syscall(SYS_gettid)));
        while (!done.load()) {
            const uint64_t start = thread_cpu_ns();
            volatile uint64_t sink = 0;
            while (thread_cpu_ns() - start < 50'000) sink = sink + 1;
            std::this_thread::sleep_for(std::chrono::microseconds(200));
        }
        cpu_at_stop.store(thread_cpu_ns());
    });
    while (tid.load() == 0) std::this_thread::yield();
    REQUIRE(sampler.add_thread(tid.load()).ok());
    std::this_thread::sleep_for(std::chrono::milliseconds(400));
    REQUIRE(sampler.stop(3000));   // closes the event while the thread still runs
    done.store(true);
    sleeper.join();
    const SamplerStats stats = sampler.stats();
    INFO("uncounted " << stats.clock_uncounted_ns / 1e6 << " ms, counted " << stats.clock_counted_ns / 1e6
                      << " ms, thread CPU " << cpu_at_stop.load() / 1e6 << " ms");
    CHECK(stats.clock_uncounted_threads == 1);
    CHECK(stats.clock_counted_ns > 0);
    CHECK(stats.clock_uncounted_ns > 0);
    CHECK(stats.clock_uncounted_ns + stats.clock_counted_ns <= cpu_at_stop.load());
    std::remove(path.c_str());
}

TEST_CASE("per-CPU clock events count the CPU time of the threads they inherited, ended or still running") {
    SamplerAt1ms s;
    // Opened before the start, as at the agent's load: enabled as the reader starts, not a cycle
    // later (the first 50-100 ms of the threads' time went unsampled and uncounted so).
    REQUIRE(s.sampler.add_cpus(static_cast<pid_t>(syscall(SYS_gettid))).ok());
    REQUIRE(s.sampler.start().ok());
    uint64_t ended_cpu = 0;
    {
        test::SpinningThread ended;
        ended.wait_for_cpu_ms(150);
        ended_cpu = ended.stop();   // its count goes to the event it was inherited from
    }
    test::SpinningThread running;
    running.wait_for_cpu_ms(150);
    const uint64_t running_before_stop = running.cpu_so_far();
    REQUIRE(s.sampler.stop(3000));   // reads the counts while `running` still runs
    const uint64_t running_after_stop = running.stop();
    const SamplerStats stats = s.sampler.stats();
    INFO("counted " << stats.clock_cpu_counted_ns / 1e6 << " ms, ticked " << stats.clock_cpu_ticked_ns / 1e6
                    << " ms, ended thread " << ended_cpu / 1e6 << " ms, running one " << running_before_stop / 1e6
                    << "-" << running_after_stop / 1e6 << " ms");
    CHECK(stats.clock_cpu_events == s.sampler.cpus().size());
    CHECK(stats.clock_cpu_counted_ns == stats.clock_counted_ns);   // no per-thread event was opened
    // Both threads' time from their first instant (they never sleep: no scheduler work at a
    // wake-up that the events would not see); the clocks also count time the hypervisor took,
    // which the threads' CPU clocks leave out.
    CHECK(stats.clock_cpu_counted_ns >= (ended_cpu + running_before_stop) * 97 / 100);
    // Every tick stands for a period the events counted; the ticks fall short of the count by at
    // most the last partial period of each thread on each CPU (and periods a late timer skipped).
    CHECK(stats.clock_cpu_ticked_ns <= stats.clock_cpu_counted_ns + s.config.period_ns);
    CHECK(stats.clock_cpu_ticked_ns > 0);
}

TEST_CASE("timer skips: exact for a thread's event, beyond a period per thread and CPU for per-CPU events, and "
          "what steal does not explain") {
    SamplerStats stats;
    stats.clock_skipped_ns = 3'000'000;   // per-thread events: already net of their last partial periods
    stats.clock_cpu_events = 2;
    stats.clock_cpu_counted_ns = 1'000'000'000;
    stats.clock_cpu_ticked_ns = 950'000'000;   // 50 ms short
    stats.clock_counted_ns = 1'100'000'000;
    // 2 events x 10 threads x 1 ms of partial periods: 20 ms of the 50 ms are explained so.
    CHECK(clock_time_skipped_ns(stats, 10, 1'000'000) == 3'000'000 + 30'000'000);
    CHECK(clock_time_skipped_ns(stats, 25, 1'000'000) == 3'000'000);   // 50 ms of partial periods
    stats.clock_cpu_ticked_ns = stats.clock_cpu_counted_ns + 1;   // more ticks than counted: nothing skipped
    CHECK(clock_time_skipped_ns(stats, 0, 1'000'000) == 3'000'000);
    stats.clock_cpu_ticked_ns = 950'000'000;

    ProcessCpu start, stop;
    stop.user_ns = 1'000'000'000;   // the process ran 1 s
    // No host figures: nothing is put down to steal; 33 ms are over 1 % of the process's time.
    TimerSkips skips = timer_skips(stats, 10, 1'000'000, start, stop);
    CHECK(skips.skipped_ns == 33'000'000);
    CHECK(skips.by_steal_ns == 0);
    CHECK(skips.unexplained_ns == 33'000'000);
    // The hypervisor took 2 % of the machine's busy time: 2 % of the 1.1 s counted, 22 ms, is steal;
    // the other 11 ms are still over 1 %.
    start.host_busy_ns = 10'000'000'000;
    stop.host_busy_ns = 20'000'000'000;
    stop.host_steal_ns = 200'000'000;
    skips = timer_skips(stats, 10, 1'000'000, start, stop);
    CHECK(skips.by_steal_ns == 22'000'000);
    CHECK(skips.unexplained_ns == 11'000'000);
    // 3 % steal explains it all.
    stop.host_steal_ns = 300'000'000;
    skips = timer_skips(stats, 10, 1'000'000, start, stop);
    CHECK(skips.by_steal_ns == 33'000'000);
    CHECK(skips.unexplained_ns == 0);
    // Under 1 % of the process's time unexplained: not reported.
    stop.host_steal_ns = 250'000'000;   // 27.5 ms steal, 5.5 ms left
    CHECK(timer_skips(stats, 10, 1'000'000, start, stop).unexplained_ns == 0);
}

TEST_CASE("lazy rings: idle threads keep a small ring, a busy thread's grows to the full size within a few samples") {
    EventQueue queue;
    StreamWriter writer(nullptr);
    kernel::SamplingConfig config;
    config.period_ns = 100'000;   // 10 kHz: the full ring (128 pages) holds ~30 samples of 16 KB
    Sampler sampler(config, queue, writer, nullptr);
    const bool lazy = GENERATE(true, false);
    sampler.set_lazy_rings(lazy);
    REQUIRE(sampler.start().ok());

    constexpr int kIdle = 16;
    IdleThreads idle(sampler, kIdle);
    test::SpinningThread spinner([&] { (void)sampler.add_thread(static_cast<pid_t>(syscall(SYS_gettid))); });
    spinner.wait_for_cpu_ms(300);
    // Every ring is open and the busy one has had time to grow: what the kernel pins now.
    const uint64_t pinned = kernel::ring_memory().bytes;
    spinner.stop();
    REQUIRE(idle.finish() == kIdle);
    REQUIRE(sampler.stop(3000));

    const SamplerStats stats = sampler.stats();
    const uint64_t samples = writer.counts().of(EventKind::kSample);
    const uint64_t lost = writer.counts().of(EventKind::kLost);
    const uint64_t full_ring = (config.ring_pages + 1) * 4096u;
    INFO("lazy " << lazy << ": small rings " << stats.small_rings << ", grown " << stats.rings_grown << "; pinned "
                 << pinned << " bytes; samples " << samples << ", lost records " << lost);
    CHECK(samples > 1000);
    if (lazy) {
        CHECK(stats.small_rings == kIdle + 1);
        CHECK(stats.rings_grown == 1);   // the spinner's, the idle threads' stay small
        // 16 small rings and a full one, where every thread pinned a full ring before.
        CHECK(pinned < (kIdle / 4 + 1) * full_ring);
        // The busy ring doubled a few times, each at its watermark: a few records lost at most
        // (2-9 on an idle and a loaded 2-CPU machine, of ~3,000 samples); a ring that stayed small
        // would hold 3 samples a drain and lose a record at nearly every one.
        CHECK(lost * 100 <= samples);
    } else {
        CHECK(stats.small_rings == 0);
        CHECK(stats.rings_grown == 0);
        CHECK(pinned >= (kIdle + 1) * full_ring);
    }
}
