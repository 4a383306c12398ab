// mode=thread's account of the threads' CPU time before their events opened, and the thread CPU
// clock it reads, without a JVM.
#include <catch2/catch.hpp>

#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "open_lag.hpp"
#include "stackfrag/base/clock.hpp"

using namespace sf;
using namespace sf::agent;

namespace {
pid_t gettid_now() { return static_cast<pid_t>(syscall(SYS_gettid)); }
void burn_ms(uint64_t ms) {
    const uint64_t start = thread_cpu_ns();
    volatile uint64_t sink = 0;
    while (thread_cpu_ns() - start < ms * 1'000'000) sink = sink + 1;
}
}  // namespace

TEST_CASE("a thread's CPU clock is readable by tid from another thread, and reads 0 once it ended") {
    std::atomic<pid_t> tid{0};
    std::atomic<bool> done{false};
    std::thread worker([&] {
        burn_ms(20);
        tid.store(gettid_now());
        while (!done.load()) std::this_thread::yield();
    });
    while (tid.load() == 0) std::this_thread::yield();
    CHECK(thread_cpu_ns_of(tid.load()) >= 20'000'000);
    CHECK(thread_cpu_ns_of(gettid_now()) > 0);
    done.store(true);
    worker.join();
    // The kernel lets the task go a moment after the join returns.
    uint64_t after_end = thread_cpu_ns_of(tid.load());
    for (int waited = 0; waited < 200 && after_end != 0; ++waited) {
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
        after_end = thread_cpu_ns_of(tid.load());
    }
    CHECK(after_end == 0);
}

TEST_CASE("the lag before an open counts from the snapshot, from 0 for a new thread, and from the end for a reopen") {
    OpenLag lag;
    // A thread that existed at the snapshot: only its CPU time since counts (before it, "before").
    lag.snapshot_existing();
    const pid_t self = gettid_now();
    burn_ms(5);
    lag.on_open(self, ThreadKind::kJava);
    OpenLag::Totals totals = lag.totals();
    CHECK(totals.ns[static_cast<size_t>(ThreadKind::kJava)] >= 5'000'000);
    CHECK(totals.ns[static_cast<size_t>(ThreadKind::kJava)] < thread_cpu_ns());
    CHECK(totals.threads[static_cast<size_t>(ThreadKind::kJava)] == 1);

    // A thread born after the snapshot: all of its CPU time before the open.
    lag.add(999'999, ThreadKind::kCompiler, 7'000'000);
    // The same thread ends at 100 ms and gets an event again at 103 ms: 3 ms more.
    lag.on_end(999'999, 100'000'000);
    lag.add(999'999, ThreadKind::kCompiler, 103'000'000);
    // Its tid reused by a new thread, which has used less CPU time: counted from 0.
    lag.on_end(999'999, 200'000'000);
    lag.add(999'999, ThreadKind::kCompiler, 2'000'000);
    totals = lag.totals();
    CHECK(totals.ns[static_cast<size_t>(ThreadKind::kCompiler)] == 7'000'000 + 3'000'000 + 2'000'000);
    CHECK(totals.threads[static_cast<size_t>(ThreadKind::kCompiler)] == 3);
    CHECK(totals.total_ns() == totals.ns[static_cast<size_t>(ThreadKind::kJava)] + 12'000'000);
}
