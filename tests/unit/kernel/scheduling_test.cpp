// The reader's real-time priority is given up when the reader stops sleeping: busy for more than
// half of a window of at least 100 ms; and taken back once it sleeps most of a window again.
#include <catch2/catch.hpp>

#include "stackfrag/kernel/perf_events.hpp"

using sf::kernel::reader_quiet_enough_for_real_time;
using sf::kernel::reader_too_busy_for_real_time;

TEST_CASE("a real-time reader busy for more than half of 100 ms or more gives its priority up") {
    CHECK_FALSE(reader_too_busy_for_real_time(0, 100'000'000));
    CHECK_FALSE(reader_too_busy_for_real_time(50'000'000, 100'000'000));   // exactly half: still sleeps enough
    CHECK(reader_too_busy_for_real_time(50'000'001, 100'000'000));
    CHECK(reader_too_busy_for_real_time(190'000'000, 200'000'000));
    // A short window says nothing yet: one long drain after a stall is not a reader that never sleeps.
    CHECK_FALSE(reader_too_busy_for_real_time(99'000'000, 99'000'000));
    // The usual reader: a few percent.
    CHECK_FALSE(reader_too_busy_for_real_time(5'000'000, 100'000'000));
}

TEST_CASE("a reader that gave real time up takes it back once busy for less than a quarter of 100 ms or more") {
    CHECK(reader_quiet_enough_for_real_time(0, 100'000'000));
    CHECK(reader_quiet_enough_for_real_time(24'999'999, 100'000'000));
    CHECK_FALSE(reader_quiet_enough_for_real_time(25'000'000, 100'000'000));
    // Between a quarter and a half: neither verdict, so the priority does not flap around one share.
    CHECK_FALSE(reader_quiet_enough_for_real_time(40'000'000, 100'000'000));
    CHECK_FALSE(reader_too_busy_for_real_time(40'000'000, 100'000'000));
    CHECK_FALSE(reader_quiet_enough_for_real_time(0, 99'000'000));   // a short window says nothing yet
}
