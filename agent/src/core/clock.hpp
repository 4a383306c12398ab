// The event stream's time base (events.hpp): CLOCK_MONOTONIC in nanoseconds.
#pragma once

#include <time.h>

#include <cstdint>

namespace sf::agent {

// Async-signal-safe (clock_gettime is).
inline uint64_t monotonic_ns() {
    timespec ts{};
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000u + static_cast<uint64_t>(ts.tv_nsec);
}

}  // namespace sf::agent
