// Real perf events on a busy thread of this test binary: rate, IP, and the stack fragment.
#include <catch2/catch.hpp>

#include <pthread.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <optional>
#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include "stackfrag/base/clock.hpp"
#include "stackfrag/kernel/perf_events.hpp"

// The busy function lives alone in its own section, so the linker's __start_/__stop_ symbols
// bound exactly its code: a sampled IP is inside it or not, whatever the compiler's layout.
extern "C" const char __start_sf_busy_text[];
extern "C" const char __stop_sf_busy_text[];

namespace {

constexpr uint64_t kCanary = 0x5AFEC0DE12345678ULL;

struct BusyShared {
    // A builtin-accessed flag, not std::atomic: its load() is a call at -O0 (sanitizer builds),
    // which would put samples outside the busy function.
    bool stop = false;
    std::atomic<bool> spinning{false};
    std::atomic<pid_t> tid{0};
    std::atomic<uintptr_t> canary_address{0};
};

// Not inlined, so that spin_with_canary is no leaf function: a leaf keeps its locals in the
// red zone below SP, which perf's copy (from SP upwards) never includes.
__attribute__((noinline)) void announce(BusyShared* shared, volatile uint64_t* canary) {
    shared->canary_address.store(reinterpret_cast<uintptr_t>(canary), std::memory_order_relaxed);
    shared->spinning.store(true, std::memory_order_release);
}

// Not instrumented by TSan either: every access in the loop would otherwise be a call into libtsan,
// and the samples would land there rather than in this function.
__attribute__((noinline, no_sanitize("thread"), section("sf_busy_text"))) void spin_with_canary(BusyShared* shared) {
    volatile uint64_t canary = kCanary;
    announce(shared, &canary);
    uint64_t x = 1;
    while (!__atomic_load_n(&shared->stop, __ATOMIC_RELAXED)) {
        x = x * 6364136223846793005ULL + canary;   // keeps the canary live in its stack slot
    }
    canary = x;
}

class BusyThread {
public:
    BusyThread() : thread_([this] {
        shared_.tid.store(static_cast<pid_t>(syscall(SYS_gettid)));
        spin_with_canary(&shared_);
    }) {
        while (!shared_.spinning.load(std::memory_order_acquire)) std::this_thread::yield();
    }
    ~BusyThread() { stop(); }
    void stop() {
        __atomic_store_n(&shared_.stop, true, __ATOMIC_RELAXED);
        if (thread_.joinable()) thread_.join();
    }
    pid_t tid() const { return shared_.tid.load(); }
    uintptr_t canary_address() const { return shared_.canary_address.load(); }
    uint64_t cpu_time_ns() {
        clockid_t clock;
        if (pthread_getcpuclockid(thread_.native_handle(), &clock) != 0) return 0;
        return sf::clock_ns(clock);
    }

private:
    BusyShared shared_;
    std::thread thread_;
};

using sf::monotonic_ns;

// What the tests check about each sample of the busy thread, computed while the fragment is valid.
class BusyChecker : public sf::kernel::RingHandler {
public:
    BusyChecker(pid_t tid, uintptr_t canary_address) : tid_(tid), canary_address_(canary_address) {}
    void on_sample(const sf::kernel::SampleView& sample) override {
        ++all_samples;
        if (static_cast<pid_t>(sample.tid) != tid_) return;
        ++samples;
        min_time = std::min(min_time, sample.time_ns);
        max_time = std::max(max_time, sample.time_ns);
        fragment_bytes += sample.stack_size;
        if (sample.ip == sample.regs.ip) ++ip_matches_regs;
        const auto ip = reinterpret_cast<const char*>(sample.regs.ip);
        if (ip < __start_sf_busy_text || ip >= __stop_sf_busy_text) return;
        ++in_busy_function;
        const uint64_t offset = canary_address_ - sample.regs.sp;
        if (canary_address_ < sample.regs.sp || offset + 8 > sample.stack_size) return;
        uint64_t value = 0;
        std::memcpy(&value, sample.stack + offset, 8);
        if (value == kCanary) ++canary_found;
    }
    void on_lost(const sf::kernel::LostView& lost) override { lost_samples += lost.count; }

    uint64_t all_samples = 0;
    uint64_t samples = 0;
    uint64_t in_busy_function = 0;
    uint64_t canary_found = 0;
    uint64_t ip_matches_regs = 0;
    uint64_t fragment_bytes = 0;
    uint64_t lost_samples = 0;
    uint64_t min_time = UINT64_MAX;
    uint64_t max_time = 0;

private:
    pid_t tid_;
    uintptr_t canary_address_;
};

// Drains `events` through a poller for `duration`, then once more after disabling them.
void sample_for(std::vector<sf::kernel::PerfEvent>& events, std::chrono::milliseconds duration,
                sf::kernel::RingHandler& handler) {
    auto poller = sf::kernel::RingPoller::create();
    REQUIRE(poller.ok());
    for (size_t i = 0; i < events.size(); ++i) REQUIRE(poller->add(events[i].fd(), i).ok());
    for (auto& event : events) REQUIRE(event.enable().ok());
    const auto until = std::chrono::steady_clock::now() + duration;
    std::vector<uint64_t> ready;
    while (std::chrono::steady_clock::now() < until) {
        ready.clear();
        auto count = poller->wait(20, ready);
        REQUIRE(count.ok());
        for (uint64_t key : ready) events[key].ring().drain(handler);
    }
    for (auto& event : events) REQUIRE(event.disable().ok());
    for (auto& event : events) event.ring().drain(handler);
}

}  // namespace

TEST_CASE("a busy thread is sampled at the requested rate of its CPU time, inside its function, "
          "with the canary at its address minus SP") {
    const uint64_t period_ns = GENERATE(1'000'000ULL, 100'000ULL);
    INFO("period " << period_ns << " ns");
    BusyThread busy;
    sf::kernel::SamplingConfig config;
    config.period_ns = period_ns;
    auto opened = sf::kernel::PerfEvent::open_thread(busy.tid(), config);
    if (!opened) FAIL(opened.error().describe());
    std::vector<sf::kernel::PerfEvent> events;
    events.push_back(std::move(opened).value());

    BusyChecker checker(busy.tid(), busy.canary_address());
    const uint64_t cpu_before = busy.cpu_time_ns();
    const uint64_t wall_before = monotonic_ns();
    sample_for(events, std::chrono::milliseconds(400), checker);
    const uint64_t cpu_after = busy.cpu_time_ns();
    const uint64_t wall_after = monotonic_ns();
    busy.stop();

    const double expected = static_cast<double>(cpu_after - cpu_before) / static_cast<double>(period_ns);
    INFO("samples " << checker.samples << ", expected ~" << expected << ", lost " << checker.lost_samples);
    REQUIRE(expected > 50);
    CHECK(static_cast<double>(checker.samples) >= 0.5 * expected);
    CHECK(static_cast<double>(checker.samples) <= 1.5 * expected);
    CHECK(checker.all_samples == checker.samples);   // a per-thread event samples only its thread
    CHECK(checker.ip_matches_regs == checker.samples);
    // Time stamps are CLOCK_MONOTONIC, the clock the JVM events use.
    CHECK(checker.min_time >= wall_before);
    CHECK(checker.max_time <= wall_after);
    // Nearly every sample interrupts the spin loop; each of those holds the canary where it lives.
    CHECK(checker.in_busy_function >= checker.samples * 95 / 100);
    CHECK(checker.canary_found == checker.in_busy_function);
    // A thread's stack is deep enough that perf copies the full 16 KB requested.
    CHECK(checker.fragment_bytes > 0);
    const auto& stats = events[0].ring().stats();
    CHECK(stats.samples == checker.all_samples);
    CHECK(stats.malformed == 0);
}

TEST_CASE("per-CPU mode samples a thread created after the events were opened") {
    auto cpus = sf::kernel::online_cpus();
    REQUIRE(cpus.ok());
    REQUIRE(!cpus->empty());
    CHECK(cpus->size() == static_cast<size_t>(sysconf(_SC_NPROCESSORS_ONLN)));
    sf::kernel::SamplingConfig config;
    config.period_ns = 1'000'000;
    std::vector<sf::kernel::PerfEvent> events;
    for (int cpu : *cpus) {
        auto opened = sf::kernel::PerfEvent::open_cpu(getpid(), cpu, config);
        if (!opened) FAIL(opened.error().describe());
        CHECK(opened->cpu() == cpu);
        events.push_back(std::move(opened).value());
    }
    // Enabled before the thread exists: it inherits enabled copies of the events.
    auto poller = sf::kernel::RingPoller::create();
    REQUIRE(poller.ok());
    for (size_t i = 0; i < events.size(); ++i) REQUIRE(poller->add(events[i].fd(), i).ok());
    for (auto& event : events) REQUIRE(event.enable().ok());
    BusyThread busy;
    BusyChecker checker(busy.tid(), busy.canary_address());
    const uint64_t cpu_before = busy.cpu_time_ns();
    const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(300);
    std::vector<uint64_t> ready;
    while (std::chrono::steady_clock::now() < until) {
        ready.clear();
        REQUIRE(poller->wait(20, ready).ok());
        for (uint64_t key : ready) events[key].ring().drain(checker);
    }
    const uint64_t cpu_after = busy.cpu_time_ns();
    busy.stop();
    for (auto& event : events) event.ring().drain(checker);

    const double expected = static_cast<double>(cpu_after - cpu_before) / 1e6;
    INFO("busy-thread samples " << checker.samples << ", expected ~" << expected);
    CHECK(static_cast<double>(checker.samples) >= 0.5 * expected);
    CHECK(checker.in_busy_function >= checker.samples * 90 / 100);
    CHECK(checker.canary_found == checker.in_busy_function);
}

TEST_CASE("the poller reports a ring once its thread exits, then forgets it, and wakes on request") {
    auto poller = sf::kernel::RingPoller::create();
    REQUIRE(poller.ok());

    std::vector<sf::kernel::RingReady> ready;
    REQUIRE(poller->wake().ok());
    const uint64_t before = monotonic_ns();
    auto woke = poller->wait(5000, ready);
    REQUIRE(woke.ok());
    CHECK(*woke == 0);
    CHECK(monotonic_ns() - before < 1'000'000'000ULL);

    sf::kernel::SamplingConfig config;
    config.period_ns = 100'000;
    config.ring_pages = 16;
    config.wakeup_bytes = 4096;
    std::optional<sf::kernel::PerfEvent> event;
    {
        BusyThread busy;
        auto opened = sf::kernel::PerfEvent::open_thread(busy.tid(), config);
        if (!opened) FAIL(opened.error().describe());
        event.emplace(std::move(opened).value());
        REQUIRE(poller->add(event->fd(), 42).ok());
        REQUIRE(event->enable().ok());
        ready.clear();
        auto count = poller->wait(2000, ready);
        REQUIRE(count.ok());
        REQUIRE(*count == 1);
        CHECK(ready[0].key == 42);
        CHECK_FALSE(ready[0].hung_up);
    }   // the busy thread exits here

    bool hung_up = false;
    for (int attempt = 0; attempt < 50 && !hung_up; ++attempt) {
        ready.clear();
        REQUIRE(poller->wait(100, ready).ok());
        for (const auto& r : ready) hung_up = hung_up || (r.key == 42 && r.hung_up);
    }
    CHECK(hung_up);
    ready.clear();
    auto after = poller->wait(50, ready);
    REQUIRE(after.ok());
    CHECK(*after == 0);   // dropped after being reported hung up once
    CHECK(poller->remove(event->fd()).ok());
}

TEST_CASE("a ring added without data reports stays quiet at its watermark and is reported when its thread exits") {
    auto poller = sf::kernel::RingPoller::create();
    REQUIRE(poller.ok());
    sf::kernel::SamplingConfig config;
    config.period_ns = 100'000;
    config.ring_pages = 16;
    config.wakeup_bytes = 4096;   // every sample crosses it
    std::vector<sf::kernel::RingReady> ready;
    std::optional<sf::kernel::PerfEvent> event;
    {
        BusyThread busy;
        auto opened = sf::kernel::PerfEvent::open_thread(busy.tid(), config);
        if (!opened) FAIL(opened.error().describe());
        event.emplace(std::move(opened).value());
        REQUIRE(poller->add(event->fd(), 7, false).ok());
        REQUIRE(event->enable().ok());
        auto count = poller->wait(300, ready);
        REQUIRE(count.ok());
        CHECK(*count == 0);
        CHECK(event->ring().pending_bytes() > 0);   // it took samples all the same
        // Turned on, the watermark reports it again (once drained: a full ring takes no samples).
        struct Discard : sf::kernel::RingHandler {
            void on_sample(const sf::kernel::SampleView&) override {}
            void on_lost(const sf::kernel::LostView&) override {}
        } discard;
        event->ring().drain(discard);
        REQUIRE(poller->set_on_data(event->fd(), true).ok());
        count = poller->wait(2000, ready);
        REQUIRE(count.ok());
        CHECK(*count == 1);
        REQUIRE(poller->set_on_data(event->fd(), false).ok());
        ready.clear();
    }   // the busy thread exits here
    bool hung_up = false;
    for (int attempt = 0; attempt < 50 && !hung_up; ++attempt) {
        ready.clear();
        REQUIRE(poller->wait(100, ready).ok());
        for (const auto& r : ready) hung_up = hung_up || (r.key == 7 && r.hung_up);
    }
    CHECK(hung_up);
    CHECK(poller->remove(event->fd()).ok());
}

TEST_CASE("ring memory counts every mapped ring, its peak and its release") {
    using sf::kernel::ring_memory;
    const sf::kernel::RingMemory before = ring_memory();
    sf::kernel::SamplingConfig small;
    small.ring_pages = 16;
    sf::kernel::SamplingConfig large;
    large.ring_pages = 64;
    const uint64_t page = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
    const pid_t self = static_cast<pid_t>(syscall(SYS_gettid));
    {
        auto first = sf::kernel::PerfEvent::open_thread(self, small);
        REQUIRE(first.ok());
        auto second = sf::kernel::PerfEvent::open_thread(self, large);
        REQUIRE(second.ok());
        const sf::kernel::RingMemory both = ring_memory();
        CHECK(both.bytes == before.bytes + (16 + 1 + 64 + 1) * page);
        CHECK(both.rings == before.rings + 2);
        CHECK(both.peak_bytes >= both.bytes);
        CHECK(both.peak_rings >= before.rings + 2);
    }
    const sf::kernel::RingMemory after = ring_memory();
    CHECK(after.bytes == before.bytes);
    CHECK(after.rings == before.rings);
    CHECK(after.peak_bytes >= before.bytes + (16 + 1 + 64 + 1) * page);
}

TEST_CASE("a ring added without data reports does not wake the waiting thread at its watermark") {
    // perf wakes its wait queue at every watermark's worth written, whatever the fd was registered
    // for; a waiter in the same epoll set was woken each time to find nothing and sleep again
    // (a context switch each, invisible in wait()'s result). Counted here as the waiting thread's
    // voluntary context switches during one wait.
    auto poller = sf::kernel::RingPoller::create();
    REQUIRE(poller.ok());
    sf::kernel::SamplingConfig config;
    config.period_ns = 100'000;
    config.ring_pages = 64;
    config.stack_bytes = 64;
    config.wakeup_bytes = 256;   // every sample crosses it
    std::vector<sf::kernel::RingReady> ready;
    BusyThread busy;
    auto opened = sf::kernel::PerfEvent::open_thread(busy.tid(), config);
    if (!opened) FAIL(opened.error().describe());
    sf::kernel::PerfEvent event = std::move(opened).value();
    REQUIRE(poller->add(event.fd(), 9, false).ok());
    REQUIRE(event.enable().ok());
    rusage before{};
    REQUIRE(getrusage(RUSAGE_THREAD, &before) == 0);
    auto count = poller->wait(300, ready);
    rusage after{};
    REQUIRE(getrusage(RUSAGE_THREAD, &after) == 0);
    REQUIRE(count.ok());
    CHECK(*count == 0);
    const size_t written = event.ring().pending_bytes();
    const uint64_t samples = written / sf::kernel::sample_record_bytes(config.stack_bytes);
    const long sleeps = after.ru_nvcsw - before.ru_nvcsw;
    INFO("samples written during the wait: " << samples << ", the waiter's sleeps: " << sleeps);
    // The busy thread is sampled every 100 us of its CPU time: hundreds of watermark crossings
    // even on a loaded machine (fewer than 20 would make this test say nothing).
    REQUIRE(samples >= 20);
    CHECK(sleeps <= 3);
    CHECK(poller->remove(event.fd()).ok());
}
