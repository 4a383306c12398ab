// The ProcessCpu event: the process's user and system CPU time now (getrusage), which the agent
// emits when it stops so that coverage (samples' CPU time / process CPU time) can be computed from
// the stream, live and in replay alike.
#pragma once

#include <sys/resource.h>

#include "stackfrag/base/clock.hpp"
#include "stackfrag/events/events.hpp"

namespace sf::agent {

// `at_start`: the one emitted before the sampling events open (see ProcessCpu).
inline ProcessCpu process_cpu_now(bool at_start = false) {
    rusage usage{};
    getrusage(RUSAGE_SELF, &usage);
    return ProcessCpu{monotonic_ns(), timeval_ns(usage.ru_utime), timeval_ns(usage.ru_stime), at_start};
}

}  // namespace sf::agent
