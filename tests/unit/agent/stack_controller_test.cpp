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

// Feeds thread 7 samples of one status and fragment size until the first change, at most 100.
std::optional<StackChange> until_change(StackController& c, TraceStatus status, size_t bytes) {
    for (int i = 0; i < 100; ++i) {
        if (auto change = c.on_sample(7, status, bytes)) return change;
    }
    return std::nullopt;
}

// Whether thread `tid`, grown to the largest size, starts its shrink trial (to 32760 bytes) within
// a quiet period of complete samples.
bool quiet_thread_shrinks(StackController& c, uint32_t tid) {
    std::optional<StackChange> trial;
    for (int i = 0; i < 10 && !trial; ++i) trial = c.on_sample(tid, TraceStatus::kComplete, 65528);
    return trial && trial->new_bytes == 32760;
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
        // The next trial needs quiet samples that would have fit (see the test of evidence below):
        // these kept 20,000 bytes.
        int changes = 0;
        feed(c, 19, TraceStatus::kComplete, 20000, &changes);
        CHECK(changes == 0);
        CHECK(feed(c, 1, TraceStatus::kComplete, 20000));
        // Waits are bounded.
        for (int i = 0; i < 5; ++i) {
            REQUIRE(c.on_sample(7, TraceStatus::kIncomplete, 32760));
            changes = 0;
            feed(c, 40, TraceStatus::kComplete, 20000, &changes);
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

TEST_CASE("a thread's family is its name without the trailing digits", "[agent][stack]") {
    CHECK(thread_family("http-worker-12") == "http-worker-");
    CHECK(thread_family("pool-1-thread-3") == "pool-1-thread-");
    CHECK(thread_family("C2 CompilerThread0") == "C2 CompilerThread");
    // No trailing digits, only digits, the JDK's name for unnamed threads: no family.
    CHECK(thread_family("main").empty());
    CHECK(thread_family("HTTP-Dispatcher").empty());
    CHECK(thread_family("12").empty());
    CHECK(thread_family("").empty());
    CHECK(thread_family("Thread-7").empty());
}

TEST_CASE("a thread that runs off its fragment grows its family's threads with it", "[agent][stack]") {
    StackController c(small_settings());
    for (uint32_t tid : {10u, 11u, 12u}) CHECK(!c.on_thread_started(tid, "worker-"));
    CHECK(!c.on_thread_started(20, "other-"));
    CHECK(!c.on_thread_started(21, ""));
    // Before any of them ran off, nothing else changes.
    CHECK(!c.on_sample(11, TraceStatus::kComplete, 16384));
    CHECK(c.take_family_changes().empty());

    auto grown = c.on_sample(10, TraceStatus::kIncomplete, 16384);
    REQUIRE(grown);
    CHECK(grown->new_bytes == 65528);
    std::vector<StackChange> family = c.take_family_changes();
    REQUIRE(family.size() == 2);
    for (const StackChange& change : family) {
        CHECK((change.tid == 11 || change.tid == 12));
        CHECK(change.old_bytes == 16384);
        CHECK(change.new_bytes == 65528);
    }
    CHECK(family[0].tid != family[1].tid);
    CHECK(c.bytes_of(11) == 65528);
    CHECK(c.bytes_of(12) == 65528);
    CHECK(c.bytes_of(20) == 16384);
    CHECK(c.take_family_changes().empty());   // taken once
    // A sibling's own run-off while grown, or from a sample taken before its reopen, changes nothing more.
    CHECK(!c.on_sample(11, TraceStatus::kIncomplete, 16384));
    CHECK(c.take_family_changes().empty());

    // A thread of the deep family that starts now starts at the largest size; others do not.
    auto started = c.on_thread_started(13, "worker-");
    REQUIRE(started);
    CHECK(started->new_bytes == 65528);
    CHECK(c.bytes_of(13) == 65528);
    CHECK(!c.on_thread_started(22, "other-"));

    // The siblings shrink by the usual trials when they stay quiet.
    CHECK(quiet_thread_shrinks(c, 12));
}

TEST_CASE("a family that settled back at the base starts its next threads there", "[agent][stack]") {
    StackController c(small_settings());
    CHECK(!c.on_thread_started(10, "worker-"));
    REQUIRE(c.on_sample(10, TraceStatus::kIncomplete, 16384));
    CHECK(c.on_thread_started(11, "worker-"));
    // Thread 10 shrinks to the base through two trials that hold, then stays there long enough
    // for its episode to end.
    int changes = 0;
    for (int i = 0; i < 200; ++i) {
        const uint32_t bytes = c.bytes_of(10);
        if (c.on_sample(10, TraceStatus::kComplete, bytes)) ++changes;
    }
    CHECK(changes == 2);
    CHECK(c.bytes_of(10) == 16384);
    CHECK(!c.tracks(10));
    CHECK(!c.on_thread_started(12, "worker-"));
    CHECK(c.bytes_of(12) == 16384);
    // A new run-off grows the family's threads at the base again (12; 11 is still grown).
    REQUIRE(c.on_sample(10, TraceStatus::kIncomplete, 16384));
    std::vector<StackChange> family = c.take_family_changes();
    REQUIRE(family.size() == 1);
    CHECK(family[0].tid == 12);
    // An ended thread leaves its family.
    c.forget(12);
    CHECK(!c.on_thread_started(12, "other-"));
}

TEST_CASE("a thread can start at the largest size and shrinks by the usual trials", "[agent][stack]") {
    StackController c(small_settings());
    auto started = c.start_large(5, "why");
    REQUIRE(started);
    CHECK(started->old_bytes == 16384);
    CHECK(started->new_bytes == 65528);
    CHECK(c.bytes_of(5) == 65528);
    // Once only: a tracked thread is left as it is.
    CHECK(!c.start_large(5, "why"));
    CHECK(quiet_thread_shrinks(c, 5));
    // Not when the start size is already the largest.
    StackControllerSettings large = small_settings();
    large.base_bytes = large.max_bytes;
    StackController fixed(large);
    CHECK(!fixed.start_large(5, "why"));
}

TEST_CASE("in a family of more than 256 threads only those that run grow with it; the others once they do",
          "[agent][stack]") {
    StackControllerSettings settings = small_settings();
    settings.active_samples = 3;
    StackController c(settings);
    // A server's pool: 300 threads, of which three run, the rest idle; 1003 has had one sample
    // (its start), not enough to count as running.
    constexpr uint32_t kPool = 300;
    for (uint32_t tid = 1000; tid < 1000 + kPool; ++tid) CHECK(!c.on_thread_started(tid, "worker-"));
    for (uint32_t tid : {1001u, 1002u}) {
        for (int i = 0; i < 3; ++i) CHECK(!c.on_sample(tid, TraceStatus::kComplete, 16384));
    }
    CHECK(!c.on_sample(1003, TraceStatus::kComplete, 16384));
    REQUIRE(c.on_sample(1000, TraceStatus::kIncomplete, 16384));
    std::vector<StackChange> family = c.take_family_changes();
    REQUIRE(family.size() == 2);
    CHECK(((family[0].tid == 1001 && family[1].tid == 1002) || (family[0].tid == 1002 && family[1].tid == 1001)));
    CHECK(c.bytes_of(1003) == 16384);
    CHECK(c.bytes_of(1100) == 16384);
    // An idle one grows once it runs, shallow or not, and only then.
    CHECK(!c.on_sample(1100, TraceStatus::kComplete, 16384));
    CHECK(!c.on_sample(1100, TraceStatus::kComplete, 16384));
    auto woke = c.on_sample(1100, TraceStatus::kComplete, 16384);
    REQUIRE(woke);
    CHECK(woke->new_bytes == 65528);
    CHECK(c.take_family_changes().empty());
    CHECK(!c.on_sample(1100, TraceStatus::kComplete, 65528));
    CHECK(c.bytes_of(1003) == 16384);
    // A new thread of the large deep family starts at the base, and grows once it runs.
    CHECK(c.start_bytes("worker-", false) == 16384);
    CHECK(!c.on_thread_started(2000, "worker-"));
    CHECK(c.bytes_of(2000) == 16384);
    CHECK(!c.on_sample(2000, TraceStatus::kComplete, 16384));
    CHECK(!c.on_sample(2000, TraceStatus::kComplete, 16384));
    REQUIRE(c.on_sample(2000, TraceStatus::kComplete, 16384));
    CHECK(c.bytes_of(2000) == 65528);
    // When the pool shrinks back to 256 threads or fewer, its new ones start grown again.
    for (uint32_t tid = 1004; tid < 1000 + kPool; ++tid) {
        if (tid != 1100) c.forget(tid);
    }
    c.forget(2000);
    // Left: 1000 to 1003 and 1100.
    CHECK(c.start_bytes("worker-", false) == 65528);
    auto started = c.on_thread_started(2001, "worker-");
    REQUIRE(started);
    CHECK(started->new_bytes == 65528);
}

TEST_CASE("a thread whose samples keep little of the fragment tries the small size, and a failed trial backs off",
          "[agent][stack]") {
    StackControllerSettings s = small_settings();
    s.small_bytes = 8192;   // shallow_slack_bytes 512: samples of at most 7680 bytes count
    StackController c(s);
    // Off by default: the same samples change nothing.
    StackController off(small_settings());
    CHECK(!feed(off, 100, TraceStatus::kComplete, 4000));

    // Quiet samples that would have fit, but one that would not (7681 bytes) starts the count again.
    CHECK(!feed(c, 9, TraceStatus::kComplete, 7680));
    CHECK(!c.on_sample(7, TraceStatus::kComplete, 7681));
    CHECK(!feed(c, 9, TraceStatus::kStitched, 6000));
    CHECK(!c.on_sample(7, TraceStatus::kFailed, 16384));   // says nothing, either way
    auto small = c.on_sample(7, TraceStatus::kComplete, 6000);
    REQUIRE(small);
    CHECK(small->old_bytes == 16384);
    CHECK(small->new_bytes == 8192);
    CHECK(c.bytes_of(7) == 8192);
    CHECK(c.tracks(7));
    // It stays small while its samples do not run off.
    CHECK(!feed(c, 50, TraceStatus::kComplete, 8192));
    CHECK(c.bytes_of(7) == 8192);

    // One that runs off: back to the base, not to the largest size, and its family does not grow.
    CHECK(!c.on_thread_started(8, "worker-"));
    CHECK(!c.on_thread_started(9, "worker-"));
    for (int i = 0; i < 10; ++i) (void)c.on_sample(8, TraceStatus::kComplete, 5000);
    REQUIRE(c.bytes_of(8) == 8192);
    auto back = c.on_sample(8, TraceStatus::kIncomplete, 8192);
    REQUIRE(back);
    CHECK(back->old_bytes == 8192);
    CHECK(back->new_bytes == 16384);
    CHECK(c.bytes_of(8) == 16384);
    CHECK(!c.tracks(8));
    CHECK(c.take_family_changes().empty());
    CHECK(c.bytes_of(9) == 16384);
    // It failed within twice the quiet samples: the next trial waits twice as long (20).
    std::optional<StackChange> again;
    int samples = 0;
    while (!again && samples < 100) {
        again = c.on_sample(8, TraceStatus::kComplete, 5000);
        ++samples;
    }
    REQUIRE(again);
    CHECK(again->new_bytes == 8192);
    CHECK(samples == 20);
    // At the base, a run-off still grows the thread (and its family) to the largest size.
    REQUIRE(c.on_sample(9, TraceStatus::kIncomplete, 16384));
    CHECK(c.bytes_of(9) == 65528);
    CHECK(c.bytes_of(8) == 8192);   // tracked already (small): not grown with the family
}

TEST_CASE("a grown thread whose quiet samples kept little comes down as far as they would have fit, in one trial",
          "[agent][stack]") {
    StackControllerSettings s = small_settings();
    StackController c(s);
    REQUIRE(c.on_sample(7, TraceStatus::kIncomplete, 16384));
    REQUIRE(c.bytes_of(7) == 65528);
    // Quiet samples that kept at most 15,000 bytes (cut at the thread's top): 16 KB would have
    // held each with the slack, so the trial goes from 64 KB straight to the base.
    auto trial = feed(c, 10, TraceStatus::kComplete, 15000);
    REQUIRE(trial);
    CHECK(trial->old_bytes == 65528);
    CHECK(trial->new_bytes == 16384);
    // A failed trial of two steps goes back one step from where it started, as the halving would.
    auto back = c.on_sample(7, TraceStatus::kIncomplete, 16384);
    REQUIRE(back);
    CHECK(back->new_bytes == 32760);
    // Samples that kept more than half of a size (20,000 bytes) keep it from going below; a
    // one-step trial that fails returns to the size it left.
    REQUIRE(c.on_sample(7, TraceStatus::kIncomplete, 32760));
    REQUIRE(c.bytes_of(7) == 65528);
    trial = until_change(c, TraceStatus::kComplete, 20000);
    REQUIRE(trial);
    CHECK(trial->new_bytes == 32760);
    back = c.on_sample(7, TraceStatus::kIncomplete, 32760);
    REQUIRE(back);
    CHECK(back->new_bytes == 65528);

    // With a small size, a thread that kept little goes there from the largest size at once.
    s.small_bytes = 8192;
    StackController small(s);
    REQUIRE(small.on_sample(7, TraceStatus::kIncomplete, 16384));
    trial = feed(small, 10, TraceStatus::kComplete, 5000);
    REQUIRE(trial);
    CHECK(trial->old_bytes == 65528);
    CHECK(trial->new_bytes == 8192);
    // Running off the small size from there: back to the base, which the next run-off grows.
    back = small.on_sample(7, TraceStatus::kIncomplete, 8192);
    REQUIRE(back);
    CHECK(back->new_bytes == 16384);
    back = small.on_sample(7, TraceStatus::kIncomplete, 16384);
    REQUIRE(back);
    CHECK(back->new_bytes == 65528);
}

TEST_CASE("once samples ran off a size above the base, the thread tries it again only when its quiet samples would "
          "have fit",
          "[agent][stack]") {
    // A recursion of random depth (30 KB at its deepest) in a pool thread: stitching cannot
    // complete a stack that changes from call to call, so each trial below 30 KB cut the deepest
    // samples until the thread grew back.
    StackController c(small_settings());
    REQUIRE(c.on_sample(7, TraceStatus::kIncomplete, 16384));
    REQUIRE(c.bytes_of(7) == 65528);
    auto trial = feed(c, 10, TraceStatus::kComplete, 30000);
    REQUIRE(trial);
    CHECK(trial->new_bytes == 32760);
    // The first trial of a size its samples do not fit is still made: a stack that stays deep is
    // stitched there.
    trial = feed(c, 10, TraceStatus::kComplete, 30000);
    REQUIRE(trial);
    CHECK(trial->new_bytes == 16384);
    auto back = c.on_sample(7, TraceStatus::kIncomplete, 16384);
    REQUIRE(back);
    CHECK(back->new_bytes == 32760);
    CHECK(!until_change(c, TraceStatus::kComplete, 30000));
    CHECK(c.bytes_of(7) == 32760);
    // Stitched samples kept the whole fragment: no evidence that less would do.
    CHECK(!until_change(c, TraceStatus::kStitched, 32760));
    // A quiet window whose samples all would have fit 16 KB: the trial goes ahead.
    trial = until_change(c, TraceStatus::kComplete, 12000);
    REQUIRE(trial);
    CHECK(trial->new_bytes == 16384);

    SECTION("a size the thread held and later ran off needs the same evidence") {
        REQUIRE(c.on_sample(7, TraceStatus::kIncomplete, 16384));
        REQUIRE(c.bytes_of(7) == 32760);
        back = c.on_sample(7, TraceStatus::kIncomplete, 32760);   // deeper than 32 KB now
        REQUIRE(back);
        CHECK(back->new_bytes == 65528);
        CHECK(!until_change(c, TraceStatus::kComplete, 40000));
        trial = until_change(c, TraceStatus::kComplete, 30000);
        REQUIRE(trial);
        CHECK(trial->new_bytes == 32760);
    }
}
