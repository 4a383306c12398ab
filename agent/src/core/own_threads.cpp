#include "own_threads.hpp"

#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <vector>

namespace sf::agent {
namespace {

// One thread to create; lives on the caller's stack until `done`.
struct Creation {
    pthread_t* thread = nullptr;
    void* (*start)(void*) = nullptr;
    void* arg = nullptr;
    char name[16] = {};
    int result = 0;
    bool taken = false;   // the helper has it: the caller waits for `done`, whatever the bound
    bool done = false;
    pid_t tid = 0;        // set by the new thread itself
};

// What the new thread runs first: its name and tid, then the caller's function.
struct Launch {
    void* (*start)(void*) = nullptr;
    void* arg = nullptr;
    char name[16] = {};
    Creation* creation = nullptr;   // null once the creator stopped waiting for the tid
};

struct Spawner {
    std::mutex mutex;
    std::condition_variable wake;     // the helper: a creation or a stop
    std::condition_variable settled;  // creators: done; the helper: a new thread's tid
    Creation* pending = nullptr;
    bool running = false;
    bool stop = false;
    pthread_t helper{};
    std::function<void(pid_t)> on_created;
    std::atomic<unsigned> spawned{0};
    std::vector<pid_t> tids;   // the helper's and its threads' (a thread that ended stays: tids are rarely reused so soon)
};

Spawner& spawner() {
    static Spawner* s = new Spawner;   // never destroyed: threads may outlive static destructors
    return *s;
}

void block_async_signals(sigset_t* previous) {
    sigset_t blocked;
    sigfillset(&blocked);
    // Faults stay deliverable: a bug still produces the JVM's crash report.
    for (int fault : {SIGSEGV, SIGBUS, SIGFPE, SIGILL}) sigdelset(&blocked, fault);
    pthread_sigmask(SIG_SETMASK, &blocked, previous);
}

void* launch_main(void* raw) {
    Launch* launch = static_cast<Launch*>(raw);
    if (launch->name[0] != '\0') pthread_setname_np(pthread_self(), launch->name);
    void* (*start)(void*) = launch->start;
    void* arg = launch->arg;
    {
        Spawner& s = spawner();
        std::lock_guard<std::mutex> lock(s.mutex);
        if (launch->creation != nullptr) launch->creation->tid = static_cast<pid_t>(syscall(SYS_gettid));
    }
    spawner().settled.notify_all();
    delete launch;
    return start(arg);
}

// pthread_create of `c` on the calling thread; with `wait_for_tid`, waits (bounded) for the new
// thread's tid. Called with the lock not held.
int create_now(Creation& c, bool wait_for_tid) {
    auto* launch = new Launch{c.start, c.arg, {}, wait_for_tid ? &c : nullptr};
    std::memcpy(launch->name, c.name, sizeof launch->name);
    sigset_t previous;
    block_async_signals(&previous);
    const int result = pthread_create(c.thread, nullptr, &launch_main, launch);
    pthread_sigmask(SIG_SETMASK, &previous, nullptr);
    if (result != 0) {
        delete launch;
        return result;
    }
    if (wait_for_tid) {
        Spawner& s = spawner();
        std::unique_lock<std::mutex> lock(s.mutex);
        s.settled.wait_for(lock, std::chrono::seconds(1), [&] { return c.tid != 0; });
        // Not there yet (a stopped process?): the thread must not write into `c` later.
        if (c.tid == 0) launch->creation = nullptr;
    }
    return result;
}

void* helper_main(void*) {
    pthread_setname_np(pthread_self(), kSpawnerThreadName);
    Spawner& s = spawner();
    std::unique_lock<std::mutex> lock(s.mutex);
    s.tids.push_back(static_cast<pid_t>(syscall(SYS_gettid)));
    while (true) {
        s.wake.wait(lock, [&] { return s.stop || s.pending != nullptr; });
        if (s.pending == nullptr) break;   // stop, nothing left to create
        Creation& c = *s.pending;
        s.pending = nullptr;
        c.taken = true;
        lock.unlock();
        c.result = create_now(c, true);
        if (c.result == 0 && c.tid != 0 && s.on_created) s.on_created(c.tid);
        if (c.result == 0) s.spawned.fetch_add(1, std::memory_order_relaxed);
        lock.lock();
        if (c.result == 0 && c.tid != 0) s.tids.push_back(c.tid);
        c.done = true;
        s.settled.notify_all();
    }
    s.running = false;
    return nullptr;
}

}  // namespace

Status start_own_thread_spawner(std::function<void(pid_t)> on_created) {
    Spawner& s = spawner();
    std::lock_guard<std::mutex> lock(s.mutex);
    s.on_created = std::move(on_created);
    s.stop = false;
    if (s.running) return {};   // (a helper told to stop but not gone yet serves on: an attach's restart)
    sigset_t previous;
    block_async_signals(&previous);
    const int result = pthread_create(&s.helper, nullptr, &helper_main, nullptr);
    pthread_sigmask(SIG_SETMASK, &previous, nullptr);
    if (result != 0) return sys_error(Errc::kResourceLimit, result, "pthread_create(thread spawner)");
    pthread_detach(s.helper);
    s.running = true;
    return {};
}

void stop_own_thread_spawner() {
    Spawner& s = spawner();
    std::lock_guard<std::mutex> lock(s.mutex);
    if (!s.running) return;
    s.stop = true;
    s.wake.notify_all();
}

int create_own_thread(pthread_t* thread, void* (*start)(void*), void* arg, const char* name) {
    Creation c;
    c.thread = thread;
    c.start = start;
    c.arg = arg;
    if (name != nullptr) std::strncpy(c.name, name, sizeof c.name - 1);
    Spawner& s = spawner();
    {
        std::unique_lock<std::mutex> lock(s.mutex);
        if (s.running && !s.stop) {
            // One creation at a time: wait for the slot, then for the helper.
            const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(1);
            s.settled.wait_until(lock, deadline, [&] { return s.pending == nullptr; });
            if (s.pending == nullptr) {
                s.pending = &c;
                s.wake.notify_all();
                s.settled.wait_until(lock, deadline, [&] { return c.taken; });
                if (c.taken) {
                    // pthread_create on the helper: not long, whatever the bound said.
                    s.settled.wait(lock, [&] { return c.done; });
                    return c.result;
                }
                s.pending = nullptr;   // the helper is stuck: made here instead
            }
        }
    }
    return create_now(c, false);
}

unsigned own_threads_spawned() { return spawner().spawned.load(std::memory_order_relaxed); }

bool is_own_spawned_thread(pid_t tid) {
    Spawner& s = spawner();
    std::lock_guard<std::mutex> lock(s.mutex);
    for (pid_t t : s.tids) {
        if (t == tid) return true;
    }
    return false;
}

}  // namespace sf::agent
