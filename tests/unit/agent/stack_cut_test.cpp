// StackCutLearner: where the reader cuts a thread's fragments once the live decoder has walked its
// stack to the outermost frame, and when it gives the thread its whole stack back.
#include <catch2/catch.hpp>

#include "stack_cut.hpp"

using sf::agent::StackCutLearner;

namespace {
constexpr uint64_t kTop = 0x7f0000100000;   // the thread's top as its start registered it
constexpr uint64_t kSlack = StackCutLearner::kSlackBytes;
}

TEST_CASE("stack cut: a complete walk's end, with slack, becomes the top when it saves enough", "[stack_cut]") {
    StackCutLearner learner;
    REQUIRE(learner.wants_top(7));
    // The first entry frame ~5 KB below the pthread top (descriptor, TLS, the native frames above it).
    const uint64_t needed = kTop - 5240;
    const auto top = learner.on_complete(7, needed, kTop);
    REQUIRE(top);
    CHECK(*top >= needed + kSlack);
    CHECK(*top < needed + kSlack + 64);
    CHECK(*top % 64 == 0);
    CHECK_FALSE(learner.wants_top(7));
    CHECK(learner.threads_cut() == 1);
    // Later walks of the thread read no higher: nothing changes.
    CHECK_FALSE(learner.on_complete(7, needed, std::nullopt));
    CHECK_FALSE(learner.on_complete(7, needed - 512, std::nullopt));
    // One that read a little higher (a fragment read before the cut applied) raises it.
    const auto raised = learner.on_complete(7, needed + 200, std::nullopt);
    REQUIRE(raised);
    CHECK(*raised >= needed + 200 + kSlack);
    CHECK(learner.threads_cut() == 1);
}

TEST_CASE("stack cut: not for a gain under kMinGainBytes, but for a thread whose top is unknown", "[stack_cut]") {
    StackCutLearner learner;
    CHECK_FALSE(learner.on_complete(1, kTop - kSlack - 512, kTop));
    CHECK_FALSE(learner.on_complete(1, 0, kTop));   // no end known (a walk of one frame)
    const auto unknown = learner.on_complete(2, kTop - 100000, 0);
    REQUIRE(unknown);
    CHECK(*unknown < kTop - 100000 + kSlack + 64);
    CHECK(learner.threads_cut() == 1);
}

TEST_CASE("stack cut: walks that run off at the cut give the thread its stack back, for good", "[stack_cut]") {
    StackCutLearner learner;
    const auto top = learner.on_complete(7, kTop - 8000, kTop);
    REQUIRE(top);
    // A deep stack that ran off below the cut (the fragment's size, not the cut, ended it): no change.
    CHECK_FALSE(learner.on_ran_off(7, *top - 4096));
    // A walk that ran off at the cut (a native thread calling into Java from a shallower native frame).
    const auto back = learner.on_ran_off(7, *top);
    REQUIRE(back);
    CHECK(*back == kTop);
    CHECK(learner.threads_given_back() == 1);
    CHECK_FALSE(learner.on_ran_off(7, *top));
    CHECK_FALSE(learner.on_complete(7, kTop - 8000, std::nullopt));
    // A thread whose top was unknown gets 0 back: no cut at all.
    const auto cut = learner.on_complete(9, kTop - 8000, 0);
    REQUIRE(cut);
    CHECK(learner.on_ran_off(9, *cut) == std::optional<uint64_t>(0));
}

TEST_CASE("stack cut: a thread's end forgets it, and says whether a cut of it was published", "[stack_cut]") {
    StackCutLearner learner;
    REQUIRE(learner.on_complete(7, kTop - 8000, kTop));
    CHECK_FALSE(learner.on_complete(8, kTop - 100, kTop));   // looked at, nothing published
    CHECK(learner.forget(7));
    CHECK_FALSE(learner.forget(8));
    CHECK_FALSE(learner.forget(9));
    // A new thread with the tid learns from scratch.
    CHECK(learner.wants_top(7));
    CHECK(learner.on_complete(7, kTop - 8000, kTop));
}
