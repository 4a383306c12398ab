// The host's busy and stolen CPU time from /proc/stat's aggregate line, which coverage compares
// with the process's CPU time (the clock events count stolen time, getrusage does not).
#include <catch2/catch.hpp>

#include "../../../agent/src/core/process_cpu.hpp"

using namespace sf::agent;

TEST_CASE("the host's busy and stolen time from /proc/stat's first line, in ns") {
    // user nice system idle iowait irq softirq steal guest guest_nice, at 100 ticks a second.
    const auto host = parse_proc_stat("cpu  1289894 2258 90177 630654 2309 0 1551 25531 0 0\n"
                                      "cpu0 644000 1000 45000 315000 1100 0 700 12700 0 0\n",
                                      100);
    REQUIRE(host);
    CHECK(host->busy_ns == (1289894ull + 2258 + 90177 + 0 + 1551 + 25531) * 10'000'000);
    CHECK(host->steal_ns == 25531ull * 10'000'000);
}

TEST_CASE("a /proc/stat without the aggregate line or its steal field gives no host times") {
    CHECK(!parse_proc_stat("cpu0 1 2 3 4 5 6 7 8 0 0\n", 100));
    CHECK(!parse_proc_stat("cpu  1 2 3 4 5 6 7\n", 100));        // a kernel before steal (2.6.11)
    CHECK(!parse_proc_stat("cpu  1 2 3 4 5 6 7\n8 9\n", 100));   // the field is not on the next line
    CHECK(!parse_proc_stat("", 100));
    CHECK(!parse_proc_stat("cpu  1 2 3 4 5 6 7 8\n", 0));
}

TEST_CASE("the agent's ProcessCpu carries this machine's host times, which only grow") {
    const sf::ProcessCpu first = process_cpu_now(true);
    const sf::ProcessCpu second = process_cpu_now();
    CHECK(first.at_start);
    CHECK(first.host_busy_ns > 0);
    CHECK(second.host_busy_ns >= first.host_busy_ns);
    CHECK(second.host_steal_ns >= first.host_steal_ns);
    CHECK(second.host_steal_ns <= second.host_busy_ns);
}
