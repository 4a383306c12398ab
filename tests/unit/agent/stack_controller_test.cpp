// stack=auto's controller: a thread's fragment grows when its samples run off it and shrinks back,
// as a trial, once they have not for a while.
#include <catch2/catch.hpp>

#include "stack_controller.hpp"

using namespace sf;
using namespace sf::agent;

namespace {

StackControllerSettings small_settings() {
    StackControllerSettings s;
    s.quiet_samples = 10;
    s.max_quiet_samples = 40;
    return s;
}

// Feeds `n` samples of one status and fragment size; returns the last change, if any.
std::optional<StackChange> feed(StackController& c, int n, TraceStatus status, size_t bytes, int* changes = nullptr) {
    std::optional<StackChange> last;
    for (int i = 0; i < n; ++i) {
        if (auto change = c.on_sample(7, status, bytes)) {
            last = change;
            if (changes) ++*changes;
        }
    }
    return last;
}

}  // namespace

TEST_CASE("an incomplete sample grows the thread's fragment to the largest at once", "[agent][stack]") {
    StackController c(small_settings());
    CHECK(!feed(c, 100, TraceStatus::kComplete, 16384));
    CHECK(!feed(c, 5, TraceStatus::kStitched, 16384));
    auto grown = c.on_sample(7, TraceStatus::kIncomplete, 16384);
    REQUIRE(grown);
    CHECK(grown->old_bytes == 16384);
    CHECK(grown->new_bytes == 65528);
    CHECK(c.bytes_of(7) == 65528);
    CHECK(c.bytes_of(8) == 16384);
    // Samples taken before the reopen (smaller fragments) change nothing, nor do they count as quiet.
    CHECK(!feed(c, 20, TraceStatus::kIncomplete, 16384));
    CHECK(c.bytes_of(7) == 65528);
}

TEST_CASE("a larger fragment shrinks step by step after quiet samples, and a failed trial backs off",
          "[agent][stack]") {
    StackController c(small_settings());
    REQUIRE(c.on_sample(7, TraceStatus::kIncomplete, 16384));
    // Failed samples say nothing about depth.
    CHECK(!feed(c, 50, TraceStatus::kFailed, 65528));
    auto shrunk = feed(c, 10, TraceStatus::kComplete, 65528);
    REQUIRE(shrunk);
    CHECK(shrunk->new_bytes == 32760);
    SECTION("a trial that holds goes on down to the base") {
        shrunk = feed(c, 10, TraceStatus::kStitched, 32760);
        REQUIRE(shrunk);
        CHECK(shrunk->new_bytes == 16384);
        CHECK(!feed(c, 100, TraceStatus::kComplete, 16384));
        CHECK(c.bytes_of(7) == 16384);
        // Long quiet at the base: a new episode starts at the largest size again.
        auto grown = c.on_sample(7, TraceStatus::kIncomplete, 16384);
        REQUIRE(grown);
        CHECK(grown->new_bytes == 65528);
    }
    SECTION("a trial that fails goes back to the size that held, and the next trial waits twice as long") {
        feed(c, 3, TraceStatus::kComplete, 32760);
        auto back = c.on_sample(7, TraceStatus::kIncomplete, 32760);
        REQUIRE(back);
        CHECK(back->new_bytes == 65528);
        int changes = 0;
        feed(c, 19, TraceStatus::kComplete, 65528, &changes);
        CHECK(changes == 0);
        CHECK(feed(c, 1, TraceStatus::kComplete, 65528));
        // Waits are bounded.
        for (int i = 0; i < 5; ++i) {
            REQUIRE(c.on_sample(7, TraceStatus::kIncomplete, 32760));
            changes = 0;
            feed(c, 40, TraceStatus::kComplete, 65528, &changes);
            CHECK(changes == 1);
        }
    }
}

TEST_CASE("a thread deeper than the largest fragment keeps it", "[agent][stack]") {
    StackController c(small_settings());
    REQUIRE(c.on_sample(7, TraceStatus::kIncomplete, 16384));
    for (int i = 0; i < 10; ++i) {
        CHECK(!feed(c, 9, TraceStatus::kComplete, 65528));
        CHECK(!c.on_sample(7, TraceStatus::kIncomplete, 65416));
    }
    CHECK(c.bytes_of(7) == 65528);
}
