// The code poll's loop, schedule and stop, without a JVM.
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <thread>

#include "periodic_poll.hpp"

using namespace sf::agent;
using std::chrono::milliseconds;

TEST_CASE("the poll backs off while it finds nothing and comes back on a finding") {
    const milliseconds base(5000), max(60000);
    milliseconds interval = base;
    const milliseconds expected[] = {milliseconds(10000), milliseconds(20000), milliseconds(40000),
                                     milliseconds(60000), milliseconds(60000)};
    for (milliseconds next : expected) {
        interval = PeriodicPoll::next_interval(interval, false, base, max);
        CHECK(interval == next);
    }
    CHECK(PeriodicPoll::next_interval(interval, true, base, max) == base);
}

TEST_CASE("run polls until stop, and stop ends a long wait at once") {
    PeriodicPoll poll(milliseconds(2), milliseconds(4));
    std::atomic<int> calls{0};
    std::thread thread([&] { poll.run([&] { return ++calls % 3 == 0; }); });
    while (calls.load() < 5) std::this_thread::sleep_for(milliseconds(1));
    const auto stop_at = std::chrono::steady_clock::now();
    poll.stop();
    thread.join();
    CHECK(std::chrono::steady_clock::now() - stop_at < std::chrono::seconds(1));
    CHECK(poll.polls() == static_cast<uint64_t>(calls.load()));
    CHECK(poll.cpu_ns() > 0);

    // A stop before run: run returns without polling, even with an hour's interval.
    PeriodicPoll idle(milliseconds(3'600'000), milliseconds(3'600'000));
    idle.stop();
    bool polled = false;
    idle.run([&] { return polled = true; });
    CHECK_FALSE(polled);
}

TEST_CASE("stop interrupts the wait of a slow schedule") {
    PeriodicPoll poll(milliseconds(3'600'000), milliseconds(3'600'000));
    std::thread thread([&] { poll.run([] { return false; }); });
    std::this_thread::sleep_for(milliseconds(20));
    const auto stop_at = std::chrono::steady_clock::now();
    poll.stop();
    thread.join();
    CHECK(std::chrono::steady_clock::now() - stop_at < std::chrono::seconds(1));
    CHECK(poll.polls() == 0);
}

TEST_CASE("wake runs on_wake at once, without running the poll before its time") {
    PeriodicPoll poll(milliseconds(3'600'000), milliseconds(3'600'000));
    std::atomic<int> wakes{0}, polls{0};
    std::thread thread([&] { poll.run([&] { return ++polls, false; }, [&] { ++wakes; }); });
    for (int round = 1; round <= 3; ++round) {
        const auto woken_at = std::chrono::steady_clock::now();
        poll.wake();
        while (wakes.load() < round) std::this_thread::sleep_for(milliseconds(1));
        CHECK(std::chrono::steady_clock::now() - woken_at < std::chrono::seconds(1));
    }
    poll.stop();
    thread.join();
    CHECK(polls.load() == 0);
    CHECK(poll.polls() == 0);

    // A wake before run starts is not lost.
    PeriodicPoll early(milliseconds(3'600'000), milliseconds(3'600'000));
    early.wake();
    std::atomic<bool> woken{false};
    std::thread late([&] { early.run([] { return false; }, [&] { woken = true; }); });
    while (!woken.load()) std::this_thread::sleep_for(milliseconds(1));
    early.stop();
    late.join();
    CHECK(woken.load());
}

TEST_CASE("wake_in runs on_wake after its delay, and an earlier wake goes first") {
    using Clock = std::chrono::steady_clock;
    PeriodicPoll poll(milliseconds(3'600'000), milliseconds(3'600'000));
    std::atomic<int> wakes{0};
    std::atomic<int64_t> first_wake_ns{0};
    const auto start = Clock::now();
    std::thread thread([&] {
        poll.run([] { return false; }, [&] {
            if (++wakes == 1) first_wake_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - start).count();
        });
    });
    // A redefinition's recheck: asked for 150 ms on; nothing runs before.
    poll.wake_in(milliseconds(150));
    std::this_thread::sleep_for(milliseconds(60));
    CHECK(wakes.load() == 0);
    while (wakes.load() < 1) std::this_thread::sleep_for(milliseconds(1));
    CHECK(first_wake_ns.load() >= 150'000'000);
    // A later time does not postpone an earlier one already asked for: the 40 ms wake comes, once.
    poll.wake_in(milliseconds(40));
    poll.wake_in(milliseconds(3'600'000));
    const auto asked = Clock::now();
    while (wakes.load() < 2) std::this_thread::sleep_for(milliseconds(1));
    CHECK(Clock::now() - asked >= milliseconds(40));
    CHECK(Clock::now() - asked < std::chrono::seconds(30));
    std::this_thread::sleep_for(milliseconds(100));
    CHECK(wakes.load() == 2);
    poll.stop();
    thread.join();
    CHECK(poll.polls() == 0);
}
