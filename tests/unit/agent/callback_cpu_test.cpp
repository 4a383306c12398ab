// The per-callback CPU account of the agent's code on the JVM's threads, without a JVM.
#include <catch2/catch.hpp>

#include "callback_cpu.hpp"
#include "stackfrag/base/clock.hpp"

using namespace sf::agent;

namespace {
void burn_cpu_ms(uint64_t ms) {
    const uint64_t until = sf::thread_cpu_ns() + ms * 1'000'000;
    volatile uint64_t sink = 0;
    while (sf::thread_cpu_ns() < until) sink = sink + 1;
}
}  // namespace

TEST_CASE("a callback run inside another on the same thread is charged to its own kind only") {
    CallbackCpu cpu;
    {
        CallbackCpu::Scope outer(cpu, CallbackCpu::kVmInit);
        burn_cpu_ms(2);
        {
            CallbackCpu::Scope inner(cpu, CallbackCpu::kDynamicCode);
            burn_cpu_ms(30);
        }
        burn_cpu_ms(2);
    }
    CHECK(cpu.calls(CallbackCpu::kVmInit) == 1);
    CHECK(cpu.calls(CallbackCpu::kDynamicCode) == 1);
    CHECK(cpu.ns(CallbackCpu::kDynamicCode) >= 30'000'000);
    // The outer scope's own time is ~4 ms; counting the nested one twice would make it >= 34 ms.
    CHECK(cpu.ns(CallbackCpu::kVmInit) >= 4'000'000);
    CHECK(cpu.ns(CallbackCpu::kVmInit) < 20'000'000);
    CHECK(cpu.total_ns() < cpu.ns(CallbackCpu::kDynamicCode) + 20'000'000);
    // A later scope on this thread is not nested in the ended ones.
    { CallbackCpu::Scope again(cpu, CallbackCpu::kThreadEnd); }
    CHECK(cpu.ns(CallbackCpu::kVmInit) < 20'000'000);
}

TEST_CASE("after its first calls a kind is timed one call in eight, the others counted at the timed ones' mean") {
    CallbackCpu cpu;
    constexpr uint64_t kCalls = 64 + 8 * 40;
    const uint64_t before = sf::thread_cpu_ns();
    for (uint64_t i = 0; i < kCalls; ++i) {
        CallbackCpu::Scope timed(cpu, CallbackCpu::kCompiledMethodLoad);
        const uint64_t until = sf::thread_cpu_ns() + 200'000;   // 0.2 ms each
        volatile uint64_t sink = 0;
        while (sf::thread_cpu_ns() < until) sink = sink + 1;
    }
    const uint64_t spent = sf::thread_cpu_ns() - before;
    CHECK(cpu.calls(CallbackCpu::kCompiledMethodLoad) == kCalls);
    CHECK(cpu.timed_calls(CallbackCpu::kCompiledMethodLoad) == CallbackCpu::kAllTimedCalls + 40);
    // Every call cost the same: the estimate is the whole loop's time, to the clock reads around it.
    const double estimate = static_cast<double>(cpu.ns(CallbackCpu::kCompiledMethodLoad));
    CHECK(estimate > 0.8 * static_cast<double>(spent));
    CHECK(estimate < 1.1 * static_cast<double>(spent));
    CHECK(cpu.total_ns() == cpu.ns(CallbackCpu::kCompiledMethodLoad));
}

TEST_CASE("a kind with few calls is timed at every call") {
    CallbackCpu cpu;
    for (int i = 0; i < 10; ++i) CallbackCpu::Scope timed(cpu, CallbackCpu::kThreadStart);
    CHECK(cpu.calls(CallbackCpu::kThreadStart) == 10);
    CHECK(cpu.timed_calls(CallbackCpu::kThreadStart) == 10);
}
