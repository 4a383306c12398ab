// The validate oracle without a JVM: a CPU-clock timer interrupts a spinning thread, the SIGPROF
// handler copies its registers and stack fragment into the preallocated buffer, and drain()
// turns them into Oracle events; without AsyncGetCallTrace the status is 0.
#include <catch2/catch.hpp>

#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <thread>

#include "agent_test_threads.hpp"
#include "stackfrag/base/clock.hpp"
#include "oracle.hpp"

using namespace sf;
using namespace sf::agent;

namespace {

struct StackBounds {
    uint64_t low = 0;
    uint64_t high = 0;
};

StackBounds current_stack() {
    StackBounds bounds;
    pthread_attr_t attr;
    if (pthread_getattr_np(pthread_self(), &attr) == 0) {
        void* low = nullptr;
        size_t size = 0;
        pthread_attr_getstack(&attr, &low, &size);
        bounds.low = reinterpret_cast<uint64_t>(low);
        bounds.high = bounds.low + size;
        pthread_attr_destroy(&attr);
    }
    return bounds;
}

int g_fake_asgct_calls = 0;
void fake_asgct(AsgctTrace* trace, jint depth, void* ucontext) {
    ++g_fake_asgct_calls;
    if (trace->env_id == nullptr || depth < 2 || ucontext == nullptr) {
        trace->num_frames = -8;
        return;
    }
    trace->frames[0] = AsgctFrame{7, reinterpret_cast<jmethodID>(0x1000)};
    trace->frames[1] = AsgctFrame{9, reinterpret_cast<jmethodID>(0x2000)};
    trace->num_frames = 2;
}

}  // namespace

TEST_CASE("timer samples carry the thread's registers and a fragment bounded by its stack") {
    OracleSettings settings;
    settings.interval_ns = 1'000'000;
    settings.stack_bytes = 16384;
    settings.asgct = &fake_asgct;
    Result<std::unique_ptr<OracleSampler>> created = OracleSampler::create(settings);
    REQUIRE(created.ok());
    OracleSampler& oracle = **created;
    CHECK_FALSE(OracleSampler::create(settings).ok());   // one per process

    StackBounds bounds;
    JNIEnv* fake_env = reinterpret_cast<JNIEnv*>(0x42);
    std::atomic<bool> added{false};
    test::SpinningThread spinner([&] {
        bounds = current_stack();
        added = oracle.add_current_thread(fake_env).ok();
    });
    REQUIRE(added);
    spinner.wait_for_cpu_ms(300);
    oracle.remove_thread(spinner.tid());
    const uint64_t cpu_ns = spinner.stop();

    std::vector<Event> events;
    oracle.drain(events);
    INFO("oracle samples " << events.size() << " for " << cpu_ns / 1e6 << " ms of CPU");
    // CPU-clock timers fire on scheduler ticks: at most CONFIG_HZ (100..1000) times a second.
    CHECK(events.size() >= cpu_ns / 20'000'000);
    CHECK(events.size() <= cpu_ns / 1'000'000 + 5);
    for (const Event& event : events) {
        const Oracle& sample = std::get<Oracle>(event);
        CHECK(sample.sample.source == SampleSource::kSignal);
        CHECK(sample.sample.tid == static_cast<uint32_t>(spinner.tid()));
        CHECK(sample.sample.stack_sp == sample.sample.regs.sp);
        CHECK(sample.sample.regs.sp >= bounds.low);
        CHECK(sample.sample.regs.sp < bounds.high);
        CHECK(sample.sample.stack.size() == std::min<uint64_t>(16384, bounds.high - sample.sample.regs.sp));
        CHECK(sample.agct_status == 2);
        CHECK(sample.frames == std::vector<MethodBci>{{0x1000, 7}, {0x2000, 9}});
    }
    CHECK(oracle.stats().threads == 1);
    CHECK(oracle.stats().taken == events.size());
    CHECK(oracle.stats().dropped == 0);
}

TEST_CASE("a thread added from outside is copied up to the first unreadable page") {
    OracleSettings settings;
    settings.interval_ns = 1'000'000;
    settings.stack_bytes = 65528;   // more than is left above sp near a fresh thread's stack top
    settings.buffer_entries = 8;    // and a buffer too small to hold them all: drops are counted
    Result<std::unique_ptr<OracleSampler>> created = OracleSampler::create(settings);
    REQUIRE(created.ok());
    OracleSampler& oracle = **created;

    StackBounds bounds;
    test::SpinningThread spinner([&] { bounds = current_stack(); });
    REQUIRE(oracle.add_thread(spinner.tid()).ok());
    spinner.wait_for_cpu_ms(300);
    oracle.stop();
    spinner.stop();

    std::vector<Event> events;
    oracle.drain(events);
    REQUIRE(events.size() == 8);
    CHECK(oracle.stats().dropped > 0);
    for (const Event& event : events) {
        const Oracle& sample = std::get<Oracle>(event);
        CHECK(sample.agct_status == 0);   // no AsyncGetCallTrace given
        CHECK(sample.frames.empty());
        // Without known bounds the copy runs past the stack top into the thread's descriptor
        // (as perf's does) but never beyond readable memory.
        CHECK(sample.sample.stack.size() >= std::min<uint64_t>(65528, bounds.high - sample.sample.regs.sp));
        CHECK(sample.sample.stack.size() <= 65528);
    }
}

namespace {
// An AsyncGetCallTrace that does not return until told to: the tick stays inside its handler.
std::atomic<bool> g_hold_in_handler{false};
std::atomic<int> g_held_ticks{0};
void holding_asgct(AsgctTrace* trace, jint, void*) {
    g_held_ticks.fetch_add(1);
    while (g_hold_in_handler.load()) {
    }
    trace->num_frames = 0;
}
}  // namespace

TEST_CASE("a tick still inside its handler is reported in flight, no later than the time it will carry") {
    OracleSettings settings;
    settings.interval_ns = 1'000'000;
    settings.stack_bytes = 1024;
    settings.asgct = &holding_asgct;
    Result<std::unique_ptr<OracleSampler>> created = OracleSampler::create(settings);
    REQUIRE(created.ok());
    OracleSampler& oracle = **created;
    CHECK(oracle.in_flight_since() == 0);

    g_held_ticks = 0;
    g_hold_in_handler = true;
    JNIEnv* fake_env = reinterpret_cast<JNIEnv*>(0x42);
    std::atomic<bool> added{false};
    test::SpinningThread spinner([&] { added = oracle.add_current_thread(fake_env).ok(); });
    REQUIRE(added);
    for (int waited = 0; waited < 2000 && g_held_ticks.load() == 0; ++waited) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    REQUIRE(g_held_ticks.load() == 1);
    // The entry is not in the buffer yet, so the reader must hold back from this time on.
    std::vector<Event> events;
    const uint64_t since = oracle.in_flight_since();
    oracle.drain(events);
    CHECK(events.empty());
    CHECK(since != 0);

    g_hold_in_handler = false;
    oracle.remove_thread(spinner.tid());
    spinner.stop();
    oracle.drain(events);
    REQUIRE_FALSE(events.empty());
    CHECK(std::get<Oracle>(events.front()).sample.time_ns >= since);
    CHECK(oracle.in_flight_since() == 0);
}

namespace {
// A thread that spins about 10 KB below its stack's top: deeper than a small fragment, far less
// deep than the largest.
class DeepishSpinner {
public:
    explicit DeepishSpinner(OracleSampler& oracle)
        : thread_(10, [this, &oracle] {
              bounds_ = current_stack();
              added_.store(oracle.add_current_thread(reinterpret_cast<JNIEnv*>(0x42)).ok());
          }) {}
    pid_t tid() const { return thread_.tid(); }
    bool added() const { return added_.load(); }
    StackBounds bounds() const { return bounds_; }
    void wait_for_cpu_ms(uint64_t ms) { thread_.wait_for_cpu_ms(ms); }
    void stop() { thread_.stop(); }

private:
    std::atomic<bool> added_{false};
    StackBounds bounds_;
    test::DeepSpinningThread thread_;   // last: it runs the lambda above on start
};

std::vector<size_t> fragment_sizes(const std::vector<Event>& events) {
    std::vector<size_t> sizes;
    for (const Event& event : events) sizes.push_back(std::get<Oracle>(event).sample.stack.size());
    return sizes;
}
}  // namespace

TEST_CASE("a thread given a larger fragment is copied that far, never past its stack top, and cut when no large entry is free") {
    OracleSettings settings;
    settings.interval_ns = 1'000'000;
    settings.stack_bytes = 1024;
    settings.buffer_entries = 256;
    settings.large_stack_bytes = 65416;
    settings.large_entries = 4;
    Result<std::unique_ptr<OracleSampler>> created = OracleSampler::create(settings);
    REQUIRE(created.ok());
    OracleSampler& oracle = **created;

    DeepishSpinner spinner(oracle);
    REQUIRE(spinner.added());
    std::vector<Event> events;
    spinner.wait_for_cpu_ms(30);
    oracle.drain(events);
    REQUIRE_FALSE(events.empty());
    const uint64_t sp = std::get<Oracle>(events.front()).sample.regs.sp;
    const uint64_t above_sp = spinner.bounds().high - sp;
    INFO("the spinner's sp lies " << above_sp << " bytes below its stack top");
    REQUIRE(above_sp > 8192);
    REQUIRE(above_sp < 65416);
    for (size_t size : fragment_sizes(events)) CHECK(size == 1024);
    CHECK(oracle.stats().cut == 0);

    // Grown: four ticks take the large entries, the rest (not drained) are cut. (A tick that read
    // the size just before it changed may come first; a tick during the drain may take a large
    // entry the drain has just given back, which the same drain then collects: a CI run under load
    // counted five.)
    auto count = [](const std::vector<size_t>& sizes, size_t size) {
        return static_cast<uint64_t>(std::count(sizes.begin(), sizes.end(), size));
    };
    oracle.set_stack_bytes(spinner.tid(), 3000);
    events.clear();
    spinner.wait_for_cpu_ms(100);
    const uint64_t cut_before_drain = oracle.stats().cut;
    const uint64_t drain_began = sf::monotonic_ns();
    oracle.drain(events);
    std::vector<size_t> sizes = fragment_sizes(events);
    uint64_t large_before_drain = 0;
    for (const Event& event : events) {
        const Sample& sample = std::get<Oracle>(event).sample;
        large_before_drain += sample.stack.size() == 3000 && sample.time_ns < drain_began;
    }
    CHECK(large_before_drain == 4);
    CHECK(count(sizes, 3000) >= 4);
    CHECK(count(sizes, 3000) + count(sizes, 1024) == sizes.size());
    // Every 1024-byte copy but that first tick's was cut; the ticks cut before the drain began are
    // in it, but for one still being copied (ticks go on during and after the drain).
    const uint64_t cut = oracle.stats().cut;
    CHECK(cut_before_drain > 0);
    CHECK(count(sizes, 1024) <= cut + 1);
    CHECK(cut_before_drain <= count(sizes, 1024) + 1);

    // Grown beyond what is left: the copy ends at the thread's stack top.
    oracle.set_stack_bytes(spinner.tid(), 65528);
    events.clear();
    spinner.wait_for_cpu_ms(60);
    oracle.drain(events);
    sizes = fragment_sizes(events);
    CHECK(count(sizes, above_sp) >= 3);
    CHECK(count(sizes, 3000) <= 1);
    CHECK(count(sizes, above_sp) + count(sizes, 3000) + count(sizes, 1024) == sizes.size());
    for (const Event& event : events) CHECK(std::get<Oracle>(event).sample.regs.sp == sp);

    // Back at the start size: small entries only, nothing cut.
    oracle.set_stack_bytes(spinner.tid(), 1024);
    spinner.wait_for_cpu_ms(10);
    oracle.drain(events);
    const uint64_t cut_before = oracle.stats().cut;
    events.clear();
    spinner.wait_for_cpu_ms(20);
    oracle.drain(events);
    REQUIRE_FALSE(events.empty());
    for (size_t size : fragment_sizes(events)) CHECK(size == 1024);
    CHECK(oracle.stats().cut == cut_before);
    oracle.set_stack_bytes(4242, 65528);   // an unknown thread: nothing happens
    oracle.remove_thread(spinner.tid());
    spinner.stop();
}
