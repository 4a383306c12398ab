// The reader with context-switch events (events=cpu,switch / events=switch): a thread that spins
// and sleeps by turns gives clock samples and one switch sample per sleep, marked as such in the
// stream; and a period request reaches the thread's clock event (interval=auto).
#include <catch2/catch.hpp>

#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>

#include "agent_test_threads.hpp"
#include "stackfrag/base/clock.hpp"
#include "sampler.hpp"
#include "test_recording.hpp"
#include "stackfrag/events/recording.hpp"

using namespace sf;
using namespace sf::agent;

namespace {

struct BySource {
    uint64_t clock = 0;
    uint64_t switches = 0;
    uint64_t other = 0;
    uint64_t switch_with_user_stack = 0;
    uint64_t lost = 0;   // samples the kernel could not write (any thread): the ring was full
};

BySource read_back(const std::string& path, pid_t tid) {
    BySource counts;
    Result<std::unique_ptr<RecordingReader>> reader = RecordingReader::open(path);
    REQUIRE(reader.ok());
    while (std::optional<Event> event = (*reader)->next()) {
        if (const auto* lost = std::get_if<Lost>(&*event)) counts.lost += lost->count;
        const auto* sample = std::get_if<Sample>(&*event);
        if (sample == nullptr || sample->tid != static_cast<uint32_t>(tid)) continue;
        if (sample->source == SampleSource::kPerf) ++counts.clock;
        else if (sample->source == SampleSource::kPerfSwitch) ++counts.switches;
        else ++counts.other;
        if (sample->source == SampleSource::kPerfSwitch && !sample->stack.empty() && (sample->regs.ip >> 63) == 0) {
            ++counts.switch_with_user_stack;
        }
    }
    return counts;
}

// Spins `spin_us`, sleeps 1 ms, again, until stopped; counts its sleeps.
class NappingThread {
public:
    NappingThread(Sampler& sampler, uint64_t spin_us)
        : thread_([this, &sampler, spin_us] {
              tid_.store(static_cast<pid_t>(syscall(SYS_gettid)));
              added_.store(sampler.add_thread(tid_.load()).ok());
              ready_.store(true);
              while (!stop_.load()) {
                  // steady_clock (vDSO), not the thread's CPU clock (a system call): the clock
                  // event excludes the kernel, so the spin must stay in user code.
                  const auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(spin_us);
                  volatile uint64_t x = 1;
                  while (std::chrono::steady_clock::now() < until) x = x * 3 + 1;
                  timespec pause{0, 1'000'000};
                  nanosleep(&pause, nullptr);
                  sleeps_.fetch_add(1);
              }
          }) {
        while (!ready_.load()) std::this_thread::yield();
    }
    ~NappingThread() { stop(); }
    void stop() {
        stop_.store(true);
        if (thread_.joinable()) thread_.join();
    }
    pid_t tid() const { return tid_.load(); }
    bool added() const { return added_.load(); }
    uint64_t sleeps() const { return sleeps_.load(); }

private:
    std::atomic<pid_t> tid_{0};
    std::atomic<bool> added_{false};
    std::atomic<bool> ready_{false};
    std::atomic<bool> stop_{false};
    std::atomic<uint64_t> sleeps_{0};
    std::thread thread_;
};

}  // namespace

TEST_CASE("events=cpu,switch: clock samples and one switch sample per sleep, marked by source") {
    const bool with_clock = GENERATE(true, false);
    // Small rings (set_lazy_rings): the napper's opens small and grows when the reader finds it
    // filled (whether it does depends on how soon the reader gets to it); its samples are the same.
    const bool lazy = GENERATE(false, true);
    INFO((with_clock ? "events=cpu,switch" : "events=switch") << (lazy ? ", small rings" : ""));
    const std::string path = "/tmp/sf-agent-switch-" + std::to_string(getpid()) + ".sfr";
    EventQueue queue;
    StreamWriter writer(test::new_recording(path));
    kernel::SamplingConfig config;
    config.period_ns = 200'000;
    Sampler sampler(config, queue, writer, nullptr);
    sampler.set_events(with_clock, true);
    sampler.set_lazy_rings(lazy);
    REQUIRE(sampler.start().ok());
    NappingThread napper(sampler, 600);
    REQUIRE(napper.added());
    std::this_thread::sleep_for(std::chrono::milliseconds(400));
    sampler.end_thread(napper.tid());
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    const uint64_t sleeps = napper.sleeps();
    napper.stop();
    REQUIRE(sampler.stop(3000));

    const SamplerStats stats = sampler.stats();
    CHECK(stats.small_rings == (lazy ? 1u : 0u));
    CHECK(stats.rings_grown <= (lazy ? 1u : 0u));
    const BySource counts = read_back(path, napper.tid());
    INFO("clock " << counts.clock << ", switch " << counts.switches << ", sleeps " << sleeps << ", lost " << counts.lost);
    REQUIRE(sleeps > 50);
    CHECK(counts.other == 0);
    CHECK(counts.switches >= sleeps / 2);
    CHECK(counts.switches <= sleeps * 2 + 20);
    CHECK(counts.switch_with_user_stack >= counts.switches * 95 / 100);
    if (with_clock) {
        CHECK(counts.clock >= sleeps);   // ~3 per 0.6 ms of spinning at 200 us
    } else {
        CHECK(counts.clock == 0);
    }
    std::remove(path.c_str());
}

TEST_CASE("a period request reaches the thread's clock event") {
    const std::string path = "/tmp/sf-agent-period-" + std::to_string(getpid()) + ".sfr";
    EventQueue queue;
    StreamWriter writer(test::new_recording(path));
    kernel::SamplingConfig config;
    config.period_ns = 10'000'000;
    Sampler sampler(config, queue, writer, nullptr);
    REQUIRE(sampler.start().ok());
    std::atomic<bool> added{false};
    test::SpinningThread spinner([&] { added = sampler.add_thread(static_cast<pid_t>(syscall(SYS_gettid))).ok(); });
    REQUIRE(added);
    sampler.request_period(spinner.tid(), 100'000);   // 100x the rate
    std::this_thread::sleep_for(std::chrono::milliseconds(30));   // a reader cycle or more
    const uint64_t cpu_before = spinner.cpu_so_far();
    spinner.wait_for_cpu_ms(cpu_before / 1'000'000 + 200);
    sampler.end_thread(spinner.tid());
    const uint64_t cpu = spinner.cpu_so_far();
    spinner.stop();
    REQUIRE(sampler.stop(3000));
    const BySource counts = read_back(path, spinner.tid());
    INFO("samples " << counts.clock << " (lost " << counts.lost << ") over " << cpu / 1'000'000 << " ms of CPU");
    // At 10 ms the whole run would give ~25 samples; at 100 us it gives thousands, of which a slow
    // reader (a loaded machine, TSan) may find some lost and the kernel throttle others: more than
    // a 1 ms period could give shows the request arrived.
    CHECK(counts.clock + counts.lost > cpu / 1'000'000);
    std::remove(path.c_str());
}
