// threads=all's watcher of /proc/self/task on this test process: when a tick scans, and what the
// scans announce.
#include <catch2/catch.hpp>

#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "event_queue.hpp"
#include "stackfrag/base/clock.hpp"
#include "own_threads.hpp"
#include "task_watcher.hpp"

using namespace sf;
using namespace sf::agent;

TEST_CASE("a watcher tick scans only when the thread count changed, a sighting is pending, or time is up") {
    constexpr uint64_t second = 1'000'000'000;
    CHECK_FALSE(task_scan_due(40, 40, false, 100'000'000, second));
    CHECK(task_scan_due(41, 40, false, 100'000'000, second));   // a thread started
    CHECK(task_scan_due(39, 40, false, 100'000'000, second));   // one ended
    CHECK(task_scan_due(40, 40, true, 100'000'000, second));    // a new thread waits for its second sighting
    CHECK(task_scan_due(40, 40, false, second, second));        // one ended while another started
    CHECK(task_scan_due(0, 0, false, 0, second));               // the count cannot be had
}

namespace {

std::vector<ThreadInfo> thread_infos(EventQueue& queue) {
    std::vector<Event> events;
    queue.drain(events);
    std::vector<ThreadInfo> infos;
    for (Event& event : events) {
        if (auto* info = std::get_if<ThreadInfo>(&event)) infos.push_back(*info);
    }
    return infos;
}

bool announces(const std::vector<ThreadInfo>& infos, pid_t tid, bool ended) {
    for (const ThreadInfo& info : infos) {
        if (info.tid == static_cast<uint32_t>(tid) && info.ended == ended) return true;
    }
    return false;
}

}  // namespace

TEST_CASE("the watcher finds a thread that starts and ends between its ticks, and skips ticks without news") {
    EventQueue queue;
    // No full scan by time in this test: only the thread count and sightings make a tick scan.
    TaskWatcher watcher(queue, nullptr, [](pid_t) { return false; }, 3'600'000);
    CHECK(watcher.tick());   // the first tick always scans
    // This process's threads are not VM threads: each is announced at its second sighting.
    CHECK(watcher.tick());
    CHECK_FALSE(watcher.tick());
    CHECK_FALSE(watcher.tick());
    CHECK(watcher.scans() == 2);
    CHECK(watcher.ticks() == 4);
    (void)thread_infos(queue);

    std::atomic<pid_t> tid{0};
    std::atomic<bool> finish{false};
    std::thread worker([&] {
        pthread_setname_np(pthread_self(), "GC Thread#7");   // a VM thread's name: announced at first sight
        tid = static_cast<pid_t>(syscall(SYS_gettid));
        while (!finish) std::this_thread::yield();
    });
    while (tid == 0) std::this_thread::yield();
    CHECK(watcher.tick());
    std::vector<ThreadInfo> infos = thread_infos(queue);
    REQUIRE(announces(infos, tid, false));
    CHECK(infos.back().kind == ThreadKind::kGc);
    CHECK_FALSE(watcher.tick());
    finish = true;
    worker.join();
    // join() may return a moment before the kernel takes the thread out of /proc/self/task.
    const std::string entry = "/proc/self/task/" + std::to_string(tid.load());
    for (int i = 0; i < 10000 && access(entry.c_str(), F_OK) == 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    CHECK(watcher.tick());
    CHECK(announces(thread_infos(queue), tid, true));
    CHECK(watcher.native_threads() >= 1);   // this process's own threads
}

TEST_CASE("a thread still bearing the spawner's name is announced only once it has named itself") {
    // The agent's helper creates its threads; each bears the helper's name until its first
    // instruction renames it, and thread creation itself asks for a scan. Announced then, the live
    // decoder's CPU showed under "stackfrag-spawn" for the whole run.
    EventQueue queue;
    TaskWatcher watcher(queue, nullptr, [](pid_t) { return false; }, 3'600'000);
    watcher.tick();
    watcher.tick();
    (void)thread_infos(queue);
    std::atomic<pid_t> tid{0};
    std::atomic<bool> renamed{false}, finish{false};
    std::thread worker([&] {
        pthread_setname_np(pthread_self(), kSpawnerThreadName);
        tid = static_cast<pid_t>(syscall(SYS_gettid));
        while (!renamed) std::this_thread::yield();
        pthread_setname_np(pthread_self(), "stackfrag-live");
        finish = true;
        while (finish) std::this_thread::yield();
    });
    while (tid == 0) std::this_thread::yield();
    CHECK(watcher.tick());
    CHECK_FALSE(announces(thread_infos(queue), tid, false));
    renamed = true;
    while (!finish) std::this_thread::yield();
    CHECK(watcher.tick());
    std::vector<ThreadInfo> infos = thread_infos(queue);
    REQUIRE(announces(infos, tid, false));
    const auto it = std::find_if(infos.begin(), infos.end(), [&](const ThreadInfo& t) { return t.tid == uint32_t(tid.load()); });
    REQUIRE(it != infos.end());
    CHECK(it->name == "stackfrag-live");
    CHECK(it->kind == ThreadKind::kProfiler);
    finish = false;
    worker.join();
}

TEST_CASE("a watcher riding on the reader sleeps until the reader's look finds a new thread") {
    EventQueue queue;
    TaskWatcher watcher(queue, nullptr, [](pid_t) { return false; }, 3'600'000);   // no full scan by time
    CHECK(watcher.tick());
    CHECK(watcher.tick());   // this process's threads: announced at their second sighting
    (void)thread_infos(queue);
    watcher.ride_on_reader();
    REQUIRE(watcher.start(10).ok());
    const uint64_t ticks_before = watcher.ticks();

    std::atomic<pid_t> tid{0};
    std::atomic<bool> finish{false};
    std::thread worker([&] {
        pthread_setname_np(pthread_self(), "GC Thread#8");
        tid = static_cast<pid_t>(syscall(SYS_gettid));
        while (!finish) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    });
    while (tid == 0) std::this_thread::yield();
    // Without the reader's look the thread does not tick on its own (its fallback is an hour).
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    CHECK(watcher.ticks() == ticks_before);
    CHECK_FALSE(announces(thread_infos(queue), tid, false));

    // The reader's cycles: looks 10 ms apart at most count; the first one that sees the new count
    // wakes the watcher, which announces the thread.
    std::vector<ThreadInfo> infos;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (!announces(infos, tid, false) && std::chrono::steady_clock::now() < deadline) {
        watcher.on_reader_cycle(monotonic_ns());
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
        for (ThreadInfo& info : thread_infos(queue)) infos.push_back(info);
    }
    CHECK(announces(infos, tid, false));
    CHECK(watcher.reader_looks() >= 1);
    CHECK(watcher.ticks() > ticks_before);
    finish = true;
    worker.join();
    watcher.stop();
}
