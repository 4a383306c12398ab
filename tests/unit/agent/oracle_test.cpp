// The validate oracle without a JVM: a CPU-clock timer interrupts a spinning thread, the SIGPROF
// handler copies its registers and stack fragment into the preallocated buffer, and drain()
// turns them into Oracle events; without AsyncGetCallTrace the status is 0.
#include <catch2/catch.hpp>

#include <pthread.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "agent_test_threads.hpp"
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
