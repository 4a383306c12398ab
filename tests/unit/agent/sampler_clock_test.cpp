// Sampler::account_by_clock: a thread without a perf event (the profiler's own) enters the stream
// as one SampleSource::kThreadClock sample per period of the CPU time its thread clock shows.
#include <catch2/catch.hpp>

#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>

#include <chrono>
#include <cstdio>
#include <string>
#include <thread>

#include "agent_test_threads.hpp"
#include "sampler.hpp"
#include "stackfrag/events/recording.hpp"
#include "recording_sampler.hpp"

using namespace sf;
using namespace sf::agent;

TEST_CASE("a thread accounted by its clock gets a sample per period of CPU it ran, spread over the run, in time order") {
    test::RecordingSampler clocked("clock");
    const std::string& path = clocked.path;
    const uint64_t period_ns = 1'000'000;
    Sampler& sampler = *clocked.sampler;

    // Clock samples go with perf clock events: one thread is sampled by its event.
    std::atomic<bool> added{false};
    test::SpinningThread sampled([&] { added.store(sampler.add_thread(static_cast<pid_t>(syscall(SYS_gettid))).ok()); });
    REQUIRE(added.load());
    test::SpinningThread spinner;
    const pid_t tid = spinner.tid();
    sampler.account_by_clock(tid);
    // Counted from the reader's next cycle: what ran before is not the samples'.
    std::this_thread::sleep_for(std::chrono::milliseconds(150));
    const uint64_t cpu_from = spinner.cpu_so_far();
    spinner.wait_for_cpu_ms(cpu_from / 1'000'000 + 300);
    const uint64_t cpu_at_wake = spinner.cpu_so_far();
    sampler.wake();   // a cycle after this read counts all of it
    std::this_thread::sleep_for(std::chrono::milliseconds(150));
    const uint64_t cpu_to = spinner.cpu_so_far();
    spinner.stop();
    sampled.stop();
    // Ended: the reader forgets it at its next look (no sample after the thread's end).
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    REQUIRE(sampler.stop(3000));
    CHECK(sampler.stats().clock_threads == 1);

    Result<std::unique_ptr<RecordingReader>> reader = RecordingReader::open(path);
    REQUIRE(reader.ok());
    uint64_t samples = 0, last_time = 0, out_of_order = 0, with_stack = 0, ip = 0, other_ips = 0;
    while (std::optional<Event> event = (*reader)->next()) {
        const auto* sample = std::get_if<Sample>(&*event);
        if (sample == nullptr || sample->tid != static_cast<uint32_t>(tid)) continue;
        CHECK(sample->source == SampleSource::kThreadClock);
        ++samples;
        if (sample->time_ns < last_time) ++out_of_order;
        last_time = sample->time_ns;
        if (!sample->stack.empty() || sample->stack_sp != 0) ++with_stack;
        if (ip == 0) ip = sample->regs.ip;
        if (sample->regs.ip != ip) ++other_ips;
    }
    std::remove(path.c_str());
    CHECK(sampler.stats().clock_samples == samples);
    CHECK(out_of_order == 0);
    CHECK(with_stack == 0);
    CHECK(ip != 0);
    CHECK(other_ips == 0);
    // Every period from the registration to the last look, none of what ran before the
    // registration: at least the CPU between the first read and the wake, at most all it ran.
    const uint64_t floor = (cpu_at_wake - cpu_from) / period_ns;
    INFO("samples " << samples << ", CPU from the first read to the wake " << (cpu_at_wake - cpu_from) / 1'000'000
                    << " ms, in all " << cpu_to / 1'000'000 << " ms");
    CHECK(samples + 1 >= floor);
    CHECK(samples <= cpu_to / period_ns);
}

TEST_CASE("no clock samples while no perf clock event is open (perf denied, events=switch alone)") {
    test::RecordingSampler clocked("noclock");
    const std::string& path = clocked.path;
    Sampler& sampler = *clocked.sampler;
    test::SpinningThread spinner;
    sampler.account_by_clock(spinner.tid());
    spinner.wait_for_cpu_ms(200);
    sampler.wake();
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    spinner.stop();
    REQUIRE(sampler.stop(3000));
    CHECK(sampler.stats().clock_threads == 1);
    CHECK(sampler.stats().clock_samples == 0);
    Result<std::unique_ptr<RecordingReader>> reader = RecordingReader::open(path);
    REQUIRE(reader.ok());
    uint64_t samples = 0;
    while (std::optional<Event> event = (*reader)->next()) samples += std::holds_alternative<Sample>(*event) ? 1 : 0;
    std::remove(path.c_str());
    CHECK(samples == 0);
}
