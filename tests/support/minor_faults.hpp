// The calling thread's minor page faults so far: tests that a table or block faults in only the
// pages it uses compare two readings.
#pragma once

#include <sys/resource.h>

namespace sf::test {

inline long minor_faults() {
    rusage usage{};
    getrusage(RUSAGE_THREAD, &usage);
    return usage.ru_minflt;
}

}  // namespace sf::test
