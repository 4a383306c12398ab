/* A library the sampler test loads with dlopen after sampling started: a thread spins in it at
   once, and its samples must find it announced (Sampler::set_module_tracker). */
#include <stdint.h>
#include <time.h>

static uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Spins for `cpu_ms` of the calling thread's CPU time, mostly in this library's own code. */
__attribute__((visibility("default"), noinline)) uint64_t sf_late_spin(uint32_t cpu_ms) {
    const uint64_t end = now_ns() + (uint64_t)cpu_ms * 1000000u;
    volatile uint64_t x = 1;
    uint64_t rounds = 0;
    do {
        for (int i = 0; i < 100000; ++i) x = x * 6364136223846793005u + 1442695040888963407u;
        ++rounds;
    } while (now_ns() < end);
    return rounds + x;
}
