// The agent's thread registry and backend selection, without a JVM.
#include <catch2/catch.hpp>

#include <algorithm>
#include <thread>
#include <vector>

#include "stack_controller.hpp"
#include "thread_registry.hpp"

using namespace sf;
using namespace sf::agent;

TEST_CASE("a thread registers once, and its removal gives back its name and forgets its perf mark") {
    ThreadRegistry threads;
    CHECK(threads.add(10, "main"));
    CHECK_FALSE(threads.add(10, "main again"));   // go_live's enumeration and ThreadStart both saw it
    CHECK(threads.add(11, "worker"));
    threads.set_on_perf(10);
    CHECK(threads.not_on_perf() == std::vector<pid_t>{11});
    CHECK(threads.remove(10) == std::optional<std::string>("main"));
    CHECK_FALSE(threads.remove(10).has_value());
    // Re-registered under a reused tid: not on perf until it is marked again.
    CHECK(threads.add(10, "new thread"));
    auto rest = threads.not_on_perf();
    std::sort(rest.begin(), rest.end());
    CHECK(rest == std::vector<pid_t>{10, 11});
    CHECK(threads.not_on_perf(11) == std::vector<pid_t>{10});
    CHECK(threads.size() == 2);
}

TEST_CASE("threads registered and removed from many threads at once are all accounted for") {
    ThreadRegistry threads;
    std::vector<std::thread> workers;
    for (int w = 0; w < 4; ++w) {
        workers.emplace_back([&threads, w] {
            for (pid_t i = 0; i < 1000; ++i) {
                const pid_t tid = w * 1000 + i + 1;
                threads.add(tid, "t");
                if (i % 2 == 0) threads.set_on_perf(tid);
                if (i % 4 == 0) threads.remove(tid);
            }
        });
    }
    for (auto& t : workers) t.join();
    CHECK(threads.size() == 4 * 750);
    CHECK(threads.not_on_perf().size() == 4 * 500);
}

TEST_CASE("backend selection: perf unless asked otherwise, and auto falls back to signals once") {
    SECTION("backend=signal starts with the timers, except in mode=jvmti") {
        CHECK(BackendSelection(SamplingBackend::kSignal, SamplingMode::kThread).signal_from_start());
        CHECK(BackendSelection(SamplingBackend::kSignal, SamplingMode::kCpu).signal_from_start());
        CHECK_FALSE(BackendSelection(SamplingBackend::kSignal, SamplingMode::kJvmti).signal_from_start());
        CHECK_FALSE(BackendSelection(SamplingBackend::kAuto, SamplingMode::kThread).signal_from_start());
    }
    const Error denied = make_error(Errc::kPermission, "perf_event_open: EACCES");
    SECTION("backend=auto: the first denial falls back, later ones do not; no denial never does") {
        BackendSelection backend(SamplingBackend::kAuto, SamplingMode::kThread);
        CHECK(backend.text() == "perf");
        CHECK_FALSE(backend.should_fall_back(std::nullopt));
        CHECK(backend.should_fall_back(denied));
        CHECK_FALSE(backend.should_fall_back(denied));
        CHECK_FALSE(backend.signal());   // until the caller has the timers running
        backend.use_signal("perf denied");
        CHECK(backend.signal());
        CHECK(backend.text() == "signal (perf denied)");
    }
    SECTION("backend=perf and mode=jvmti never fall back") {
        CHECK_FALSE(BackendSelection(SamplingBackend::kPerf, SamplingMode::kThread).should_fall_back(denied));
        CHECK_FALSE(BackendSelection(SamplingBackend::kAuto, SamplingMode::kJvmti).should_fall_back(denied));
    }
}

TEST_CASE("the timer sampler's buffer holds about 20 ms of ticks on every CPU, 512 to 4096") {
    AgentOptions options;
    options.interval_ns = 1'000'000;   // 21 ticks per CPU in 20 ms
    CHECK(timer_settings(options, 1, true).buffer_entries == 512);
    CHECK(timer_settings(options, 32, true).buffer_entries == 32 * 21);
    CHECK(timer_settings(options, 512, true).buffer_entries == 4096);
    CHECK(timer_settings(options, 0, true).buffer_entries == 512);
    options.interval_ns = 100'000;     // 201 per CPU
    CHECK(timer_settings(options, 4, true).buffer_entries == 804);
    // Only the oracle (validate without the signal backend): the default buffer.
    CHECK(timer_settings(options, 64, false).buffer_entries == OracleSettings{}.buffer_entries);
    CHECK(timer_settings(options, 4, true).interval_ns == 100'000);
    CHECK(timer_settings(options, 4, true).stack_bytes == options.stack_bytes);
}

TEST_CASE("without validate the timer keeps no room for AsyncGetCallTrace's frames") {
    AgentOptions options;
    options.validate = false;
    CHECK(timer_settings(options, 4, true).max_frames == 0);
    options.validate = true;
    CHECK(timer_settings(options, 4, true).max_frames == OracleSettings{}.max_frames);
}

TEST_CASE("validate with stack=auto keeps entries as large as perf's largest fragment for grown threads") {
    AgentOptions options;
    options.validate = true;
    options.interval_ns = 1'000'000;   // 21 ticks per CPU in 20 ms
    CHECK(timer_settings(options, 2, false).large_stack_bytes == StackControllerSettings{}.largest_fragment);
    CHECK(timer_settings(options, 2, false).large_entries == 64);
    CHECK(timer_settings(options, 2, false).stack_bytes == options.stack_bytes);
    options.interval_ns = 100'000;     // 201 per CPU
    CHECK(timer_settings(options, 2, false).large_entries == 402);
    CHECK(timer_settings(options, 64, false).large_entries == 512);
    // Nothing grows: no fragment size to follow.
    for (auto change : {+[](AgentOptions& o) { o.stack_auto = false; }, +[](AgentOptions& o) { o.validate = false; },
                        +[](AgentOptions& o) { o.mode = SamplingMode::kCpu; }}) {
        AgentOptions other = options;
        change(other);
        CHECK(timer_settings(other, 2, false).large_entries == 0);
        CHECK(timer_settings(other, 2, false).large_stack_bytes == 0);
    }
    // The signal backend's timer (no perf event to follow).
    CHECK(timer_settings(options, 2, true).large_entries == 0);
}
