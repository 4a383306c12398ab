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
