// Real context-switch events on a thread of this test binary that blocks in a known function:
// what the kernel gives for a sample taken in the scheduler (user registers and stack at kernel
// entry, a kernel IP), and sharing the ring of the thread's clock event.
#include <catch2/catch.hpp>

#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include "stackfrag/kernel/perf_events.hpp"

// The blocking function lives alone in its own section, so that a return address into it on the
// copied stack is recognised whatever the compiler's layout.
extern "C" const char __start_sf_block_text[];
extern "C" const char __stop_sf_block_text[];

namespace {

struct Shared {
    std::atomic<bool> stop{false};
    std::atomic<bool> ready{false};
    std::atomic<bool> go{false};
    std::atomic<pid_t> tid{0};
    std::atomic<uint64_t> sleeps{0};
};

__attribute__((noinline)) void spin_for_us(uint64_t microseconds) {
    const auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(microseconds);
    volatile uint64_t x = 1;
    while (std::chrono::steady_clock::now() < until) x = x * 3 + 1;
}

// Sleeps 1 ms at a time, in between spinning `spin_us` (so that a clock event has something to
// sample too). The nanosleep is a real call from this section, so the copied user stack holds a
// return address into it whenever the thread blocks there.
__attribute__((noinline, section("sf_block_text"))) void sleep_in_known_place(Shared* shared, uint64_t spin_us) {
    while (!shared->stop.load(std::memory_order_relaxed)) {
        if (spin_us != 0) spin_for_us(spin_us);
        timespec pause{0, 1'000'000};
        nanosleep(&pause, nullptr);
        shared->sleeps.fetch_add(1, std::memory_order_relaxed);
    }
}

class Sleeper {
public:
    explicit Sleeper(uint64_t spin_us) : thread_([this, spin_us] {
        shared_.tid.store(static_cast<pid_t>(syscall(SYS_gettid)));
        shared_.ready.store(true, std::memory_order_release);
        while (!shared_.go.load(std::memory_order_acquire)) std::this_thread::yield();
        sleep_in_known_place(&shared_, spin_us);
    }) {
        while (!shared_.ready.load(std::memory_order_acquire)) std::this_thread::yield();
    }
    ~Sleeper() { stop(); }
    void go() { shared_.go.store(true, std::memory_order_release); }
    void stop() {
        shared_.stop.store(true);
        shared_.go.store(true);
        if (thread_.joinable()) thread_.join();
    }
    pid_t tid() const { return shared_.tid.load(); }
    uint64_t sleeps() const { return shared_.sleeps.load(); }

private:
    Shared shared_;
    std::thread thread_;
};

bool in_block_text(uint64_t address) {
    const auto p = reinterpret_cast<const char*>(address);
    return p >= __start_sf_block_text && p < __stop_sf_block_text;
}

class SwitchChecker : public sf::kernel::RingHandler {
public:
    void on_sample(const sf::kernel::SampleView& sample) override {
        ++samples;
        if (!sf::kernel::is_kernel_ip(sample.ip)) {
            ++user_ip;
            return;
        }
        ++kernel_ip;
        if (!sample.has_regs || sf::kernel::is_kernel_ip(sample.regs.ip) || sample.regs.sp == 0) return;
        ++user_regs;
        // The return address into the blocking function sits a few frames above the syscall.
        for (uint64_t offset = 0; offset + 8 <= sample.stack_size && offset < 4096; offset += 8) {
            uint64_t word = 0;
            std::memcpy(&word, sample.stack + offset, 8);
            if (in_block_text(word)) {
                ++caller_found;
                break;
            }
        }
    }
    void on_lost(const sf::kernel::LostView& lost) override { lost_samples += lost.count; }

    uint64_t samples = 0;
    uint64_t kernel_ip = 0;
    uint64_t user_ip = 0;
    uint64_t user_regs = 0;
    uint64_t caller_found = 0;
    uint64_t lost_samples = 0;
};

void run_for(sf::kernel::PerfEvent& ring_owner, std::vector<sf::kernel::PerfEvent*> to_enable,
             std::chrono::milliseconds duration, sf::kernel::RingHandler& handler) {
    for (auto* event : to_enable) REQUIRE(event->enable().ok());
    const auto until = std::chrono::steady_clock::now() + duration;
    while (std::chrono::steady_clock::now() < until) {
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
        ring_owner.ring().drain(handler);
    }
    for (auto* event : to_enable) REQUIRE(event->disable().ok());
    ring_owner.ring().drain(handler);
}

}  // namespace

TEST_CASE("a context-switch sample carries the user registers and stack at kernel entry and a kernel IP") {
    Sleeper sleeper(0);
    sf::kernel::SamplingConfig config;
    auto opened = sf::kernel::PerfEvent::open_thread_switches(sleeper.tid(), config, nullptr);
    if (!opened) FAIL(opened.error().describe());
    REQUIRE(opened->has_ring());
    sleeper.go();
    SwitchChecker checker;
    run_for(*opened, {&*opened}, std::chrono::milliseconds(300), checker);
    const uint64_t sleeps = sleeper.sleeps();
    sleeper.stop();

    INFO("samples " << checker.samples << ", sleeps " << sleeps << ", lost " << checker.lost_samples);
    // About one switch per sleep (period 1: every one is sampled).
    CHECK(checker.samples + checker.lost_samples >= sleeps / 2);
    CHECK(checker.samples > 50);
    // Taken in the scheduler: the IP is the kernel's, every one of them.
    CHECK(checker.kernel_ip == checker.samples);
    // ...but the registers and stack are the user ones, and the stack leads back to the caller.
    CHECK(checker.user_regs >= checker.samples * 95 / 100);
    CHECK(checker.caller_found >= checker.samples * 90 / 100);
}

TEST_CASE("excluding the kernel silences the context-switch event") {
    // Why make_switch_attr counts kernel events: the scheduler's samples are kernel-mode ones.
    Sleeper sleeper(0);
    sf::kernel::SamplingConfig config;
    perf_event_attr attr = sf::kernel::make_switch_attr(config);
    CHECK(attr.exclude_kernel == 0);
    CHECK(attr.sample_period == 1);
    CHECK(attr.sample_type == sf::kernel::make_attr(config, false).sample_type);
    attr.exclude_kernel = 1;
    auto opened = sf::kernel::PerfEvent::open_attr(attr, sleeper.tid(), -1, config.ring_pages);
    if (!opened) FAIL(opened.error().describe());
    sleeper.go();
    SwitchChecker checker;
    run_for(*opened, {&*opened}, std::chrono::milliseconds(100), checker);
    const uint64_t sleeps = sleeper.sleeps();
    sleeper.stop();
    CHECK(sleeps > 20);
    CHECK(checker.samples == 0);
}

TEST_CASE("switch samples share the clock event's ring and are told apart by their kernel IP") {
    Sleeper sleeper(300);   // 0.3 ms of CPU per 1 ms sleep
    sf::kernel::SamplingConfig config;
    config.period_ns = 100'000;
    auto clock = sf::kernel::PerfEvent::open_thread(sleeper.tid(), config);
    if (!clock) FAIL(clock.error().describe());
    auto switches = sf::kernel::PerfEvent::open_thread_switches(sleeper.tid(), config, &*clock);
    if (!switches) FAIL(switches.error().describe());
    CHECK_FALSE(switches->has_ring());
    sleeper.go();
    SwitchChecker checker;
    run_for(*clock, {&*clock, &*switches}, std::chrono::milliseconds(300), checker);
    const uint64_t sleeps = sleeper.sleeps();
    sleeper.stop();

    INFO("samples " << checker.samples << " (kernel ip " << checker.kernel_ip << ", user ip "
                    << checker.user_ip << "), sleeps " << sleeps << ", lost " << checker.lost_samples);
    CHECK(checker.kernel_ip >= sleeps / 2);   // one switch sample per sleep
    CHECK(checker.user_ip >= sleeps);         // ~3 clock samples per 0.3 ms of spinning
    CHECK(checker.caller_found >= checker.kernel_ip * 90 / 100);
    CHECK(clock->ring().stats().malformed == 0);
}
