// StackCutLearner: where the reader cuts a thread's fragments once the live decoder has walked its
// stack to its first frame (or, for a Java thread, from its top once the process's gap is known),
// and when it gives the thread its whole stack back.
#include <catch2/catch.hpp>

#include "stack_cut.hpp"

using sf::agent::StackCutLearner;

namespace {
constexpr uint64_t kTop = 0x7f0000100000;   // a thread's top as its start registered it
constexpr uint64_t kSlack = StackCutLearner::kSlackBytes;
constexpr uint64_t kGap = 4223;             // glibc's descriptor and TLS, start_thread's frame

StackCutLearner::Walk native(uint64_t needed_end) { return {needed_end, true}; }
StackCutLearner::Walk java(uint64_t needed_end) { return {needed_end, false}; }
}  // namespace

TEST_CASE("stack cut: a walk to the first native frame, with slack, becomes the top when it saves enough",
          "[stack_cut]") {
    StackCutLearner learner;
    REQUIRE(learner.wants_top(7));
    // A GC thread whose mapping the kernel merged with the next: its top is far above.
    const uint64_t needed = kTop - 60000;
    const auto top = learner.on_complete(7, native(needed), kTop, 0);
    REQUIRE(top);
    CHECK(*top >= needed + kSlack);
    CHECK(*top < needed + kSlack + 64);
    CHECK(*top % 64 == 0);
    CHECK_FALSE(learner.wants_top(7));
    CHECK(learner.threads_cut() == 1);
    // Later walks of the thread read no higher: nothing changes.
    CHECK_FALSE(learner.on_complete(7, native(needed), 0, 0));
    CHECK_FALSE(learner.on_complete(7, native(needed - 512), 0, 0));
    // One that read a little higher (a fragment read before the cut applied) raises it.
    const auto raised = learner.on_complete(7, native(needed + 200), 0, 0);
    REQUIRE(raised);
    CHECK(*raised >= needed + 200 + kSlack);
    CHECK(learner.threads_cut() == 1);
    // Not for a gain under kMinGainBytes, but for a thread whose top is unknown.
    CHECK_FALSE(learner.on_complete(8, native(kTop - kSlack - 512), kTop, kTop));
    CHECK_FALSE(learner.on_complete(9, native(0), kTop, 0));   // no end known (a walk of one frame)
    CHECK(learner.on_complete(10, native(kTop - 100000), 0, 0));
    CHECK(learner.threads_cut() == 2);
}

TEST_CASE("stack cut: a Java thread's walk to its entry frame sets no cut of its own", "[stack_cut]") {
    // At its end the thread runs VM code above where its first entry frame was.
    StackCutLearner learner;
    CHECK_FALSE(learner.on_complete(7, java(kTop - 5240), kTop, kTop));
    CHECK_FALSE(learner.on_complete(7, java(kTop - 5240), 0, 0));
    CHECK(learner.threads_cut() == 0);
}

TEST_CASE("stack cut: Java threads are cut from their tops once two threads showed the same gap", "[stack_cut]") {
    StackCutLearner learner;
    const uint64_t top_a = kTop, top_b = kTop + 0x200000, top_c = kTop + 0x400000;
    // A Java thread before any gap is known: no cut.
    CHECK_FALSE(learner.on_complete(1, java(top_a - 5240), top_a, top_a));
    // A thread with a top of its own walked to its first frame (a Java thread starting or ending):
    // its own cut, and one distance seen.
    CHECK(learner.on_complete(2, native(top_b - kGap), top_b, top_b));
    CHECK_FALSE(learner.gap());
    // A top that was not the thread's own word (a mapping's end) shows no distance.
    CHECK(learner.on_complete(3, native(top_c - 90000), top_c, 0));
    CHECK_FALSE(learner.gap());
    CHECK(learner.on_complete(4, native(top_c + 0x200000 - kGap - 16), top_c + 0x200000, top_c + 0x200000));
    REQUIRE(learner.gap());
    CHECK(*learner.gap() == kGap);   // the smaller distance: a cut from it covers both threads
    // Now thread 1's next walk gets its cut from its top.
    const auto cut = learner.on_complete(1, java(top_a - 5240), 0, 0);
    REQUIRE(cut);
    CHECK(*cut >= top_a - *learner.gap() + kSlack);
    CHECK(*cut < top_a - *learner.gap() + kSlack + 64);
    // A Java thread whose walk reads above that (laid out otherwise): no cut.
    CHECK_FALSE(learner.on_complete(5, java(top_c - 100), top_c, top_c));
    // One without a top of its own: no cut.
    CHECK_FALSE(learner.on_complete(6, java(top_c - 5240), top_c, 0));
}

TEST_CASE("stack cut: walks that fail or run off at the cut give the thread its stack back, for good", "[stack_cut]") {
    StackCutLearner learner;
    const auto top = learner.on_complete(7, native(kTop - 8000), kTop, 0);
    REQUIRE(top);
    // A deep stack that ran off below the cut (the fragment's size, not the cut, ended it): no change.
    CHECK_FALSE(learner.on_ran_off(7, *top - 4096));
    const auto back = learner.on_ran_off(7, *top);
    REQUIRE(back);
    CHECK(*back == kTop);
    CHECK(learner.threads_given_back() == 1);
    CHECK_FALSE(learner.on_ran_off(7, *top));
    CHECK_FALSE(learner.on_complete(7, native(kTop - 8000), 0, 0));
    // A thread whose top was unknown gets 0 back: no cut at all.
    const auto cut = learner.on_complete(9, native(kTop - 8000), 0, 0);
    REQUIRE(cut);
    CHECK(learner.on_ran_off(9, *cut) == std::optional<uint64_t>(0));
}

TEST_CASE("stack cut: a thread's end forgets it, and says whether a cut of it was published", "[stack_cut]") {
    StackCutLearner learner;
    REQUIRE(learner.on_complete(7, native(kTop - 8000), kTop, 0));
    CHECK_FALSE(learner.on_complete(8, native(kTop - 100), kTop, 0));   // looked at, nothing published
    CHECK(learner.forget(7));
    CHECK_FALSE(learner.forget(8));
    CHECK_FALSE(learner.forget(9));
    // A new thread with the tid learns from scratch.
    CHECK(learner.wants_top(7));
    CHECK(learner.on_complete(7, native(kTop - 8000), kTop, 0));
}

TEST_CASE("stack cut: only failures that missing bytes cause give a thread its stack back", "[stack_cut]") {
    using sf::FailReason;
    for (FailReason reason : {FailReason::kSpOutOfFragment, FailReason::kNativeUnwindFailed, FailReason::kBadEntryFrame,
                              FailReason::kStubUnwindFailed, FailReason::kBadInterpreterFrame}) {
        INFO(sf::fail_reason_name(reason));
        CHECK(StackCutLearner::from_missing_bytes(reason));
    }
    // httpserver (JDK 25, 1 ms) gave 5 workers their stack back for these before 60ebd6e.
    for (FailReason reason : {FailReason::kBadReturnAddress, FailReason::kUnknownMethod, FailReason::kNoPcDesc,
                              FailReason::kBadBci, FailReason::kUnknownPc, FailReason::kEmptyStack,
                              FailReason::kLostEvents, FailReason::kTooDeep}) {
        INFO(sf::fail_reason_name(reason));
        CHECK_FALSE(StackCutLearner::from_missing_bytes(reason));
    }
}
