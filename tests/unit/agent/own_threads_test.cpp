// own_threads: the agent's threads, created by a helper that no inheriting perf event follows.
#include <catch2/catch.hpp>

#include <linux/perf_event.h>
#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <mutex>
#include <thread>
#include <vector>

#include "own_threads.hpp"
#include "stackfrag/base/clock.hpp"

using namespace sf;
using namespace sf::agent;

namespace {

// A counting task-clock event on the calling thread that its later children inherit: their CPU
// time enters its count when they end.
int open_inheriting_task_clock() {
    perf_event_attr attr{};
    attr.size = sizeof attr;
    attr.type = PERF_TYPE_SOFTWARE;
    attr.config = PERF_COUNT_SW_TASK_CLOCK;
    attr.inherit = 1;
    attr.exclude_kernel = 1;
    attr.exclude_hv = 1;
    return static_cast<int>(syscall(SYS_perf_event_open, &attr, 0, -1, -1, 0));
}

uint64_t count_of(int fd) {
    uint64_t value = 0;
    return read(fd, &value, sizeof value) == static_cast<ssize_t>(sizeof value) ? value : 0;
}

struct Spin {
    uint64_t cpu_ns = 0;
    char name[16] = {};
    pid_t tid = 0;
};

void* spin_100ms(void* raw) {
    auto* spin = static_cast<Spin*>(raw);
    spin->tid = static_cast<pid_t>(syscall(SYS_gettid));
    pthread_getname_np(pthread_self(), spin->name, sizeof spin->name);
    const uint64_t begin = thread_cpu_ns();
    volatile uint64_t x = 1;
    while (thread_cpu_ns() - begin < 100'000'000) x = x * 6364136223846793005ULL + 1;
    spin->cpu_ns = thread_cpu_ns() - begin;
    return nullptr;
}

}  // namespace

TEST_CASE("a thread the spawner creates inherits no perf event opened after the spawner started; a direct one does") {
    std::mutex mutex;
    std::vector<pid_t> created;
    REQUIRE(start_own_thread_spawner([&](pid_t tid) {
                std::lock_guard<std::mutex> lock(mutex);
                created.push_back(tid);
            }).ok());
    const unsigned spawned_before = own_threads_spawned();

    // Opened on this thread after the spawner: only threads this thread creates inherit it.
    const int fd = open_inheriting_task_clock();
    INFO("perf_event_open: " << (fd < 0 ? std::strerror(errno) : "ok"));
    REQUIRE(fd >= 0);

    Spin own;
    pthread_t own_thread{};
    REQUIRE(create_own_thread(&own_thread, &spin_100ms, &own, "sf-own-test") == 0);
    pthread_join(own_thread, nullptr);
    const uint64_t after_own = count_of(fd);

    Spin direct;
    pthread_t direct_thread{};
    REQUIRE(pthread_create(&direct_thread, nullptr, &spin_100ms, &direct) == 0);
    pthread_join(direct_thread, nullptr);
    const uint64_t after_direct = count_of(fd);
    close(fd);
    stop_own_thread_spawner();

    INFO("inherited count after the own thread " << after_own / 1'000'000 << " ms, after the direct one "
                                                 << after_direct / 1'000'000 << " ms");
    CHECK(own.cpu_ns >= 100'000'000);
    // The own thread's 100 ms are not in the count; the direct thread's are.
    CHECK(after_own < 50'000'000);
    CHECK(after_direct - after_own >= 90'000'000);
    // Named from its start, announced with its tid, known as the spawner's.
    CHECK(std::strcmp(own.name, "sf-own-test") == 0);
    CHECK(own_threads_spawned() == spawned_before + 1);
    {
        std::lock_guard<std::mutex> lock(mutex);
        REQUIRE(created.size() == 1);
        CHECK(created[0] == own.tid);
    }
    CHECK(is_own_spawned_thread(own.tid));
    CHECK_FALSE(is_own_spawned_thread(direct.tid));
}

TEST_CASE("without the spawner, create_own_thread creates the thread directly, named") {
    stop_own_thread_spawner();
    // The helper may still be on its way out: either path must create the thread.
    Spin spin;
    pthread_t thread{};
    REQUIRE(create_own_thread(&thread, &spin_100ms, &spin, "sf-direct-test") == 0);
    pthread_join(thread, nullptr);
    CHECK(spin.cpu_ns >= 100'000'000);
    CHECK(std::strcmp(spin.name, "sf-direct-test") == 0);
}
