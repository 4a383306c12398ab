// The ProcessCpu event: the process's user and system CPU time now (getrusage), which the agent
// emits when it stops so that coverage (samples' CPU time / process CPU time) can be computed from
// the stream, live and in replay alike; with the machine's busy and stolen CPU time (/proc/stat).
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

#include "stackfrag/events/events.hpp"

namespace sf::agent {

struct HostCpu {
    uint64_t busy_ns = 0;    // every CPU's time that was not idle or waiting for I/O, steal included
    uint64_t steal_ns = 0;   // the time the hypervisor ran other guests while a CPU had work
};

// The aggregate "cpu" line of /proc/stat's text, in ticks of `ticks_per_second` (USER_HZ);
// nullopt when the line is missing or has fewer than the eight fields from user to steal.
std::optional<HostCpu> parse_proc_stat(std::string_view text, long ticks_per_second);

// `at_start`: the one emitted before the sampling events open (see ProcessCpu). The host's figures
// stay 0 where /proc/stat cannot be read.
ProcessCpu process_cpu_now(bool at_start = false);

}  // namespace sf::agent
