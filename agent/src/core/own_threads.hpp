// The agent's own threads, created so that no perf event follows them: a thread inherits the
// inheriting (per-CPU) events of the thread that creates it, so a helper started before they open
// creates the reader, the decoder and the others; each is then counted by its thread clock instead.
#pragma once

#include <pthread.h>
#include <sys/types.h>

#include <functional>

#include "stackfrag/base/result.hpp"

namespace sf::agent {

// The helper's name, which each thread it creates bears until it names itself.
inline constexpr const char* kSpawnerThreadName = "stackfrag-spawn";

// Starts the helper thread (every asynchronous signal blocked, as each of the agent's threads
// wants). Call before any inheriting event opens; again after stop_own_thread_spawner only in
// tests. `on_created` runs on the helper for each thread it created, with its tid, before
// create_own_thread returns (Sampler::account_by_clock, when the profile counts them so).
Status start_own_thread_spawner(std::function<void(pid_t)> on_created);
// Ends the helper (what it created runs on). Idempotent.
void stop_own_thread_spawner();

// pthread_create(thread, nullptr, start, arg) with every asynchronous signal blocked in the new
// thread, named `name` from its first instruction on: through the helper while it runs (waiting at
// most a second for it, then directly), else directly. pthread_create's result.
int create_own_thread(pthread_t* thread, void* (*start)(void*), void* arg, const char* name);

// How many threads the helper created (for tests and the log).
unsigned own_threads_spawned();
// Whether `tid` is the helper or a thread it created: a per-thread event opened for every thread
// of the process (mode=cpu on attach) leaves these out, as inheritance does.
bool is_own_spawned_thread(pid_t tid);

}  // namespace sf::agent
