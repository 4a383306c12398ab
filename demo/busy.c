/* stackfrag-busy: a native program for trying the sampler without a JVM. Two threads spin in
 * distinct named functions (so a profile can tell them apart) until killed, or for N seconds.
 * Usage: stackfrag-busy [SECONDS] */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static atomic_int stop_requested;

/* Each spin function calls a leaf, so samples show a two-frame stack with a frame pointer. */
__attribute__((noinline)) static uint64_t mix(uint64_t x) { return x * 6364136223846793005ULL + 1442695040888963407ULL; }

__attribute__((noinline)) static void spin_alpha(void) {
    volatile uint64_t state = 1;
    while (!stop_requested) state = mix(state);
}

__attribute__((noinline)) static void spin_beta(void) {
    volatile uint64_t state = 2;
    while (!stop_requested) state = mix(mix(state));
}

static void* run_alpha(void* unused) {
    (void)unused;
    pthread_setname_np(pthread_self(), "busy-alpha");
    spin_alpha();
    return NULL;
}

static void* run_beta(void* unused) {
    (void)unused;
    pthread_setname_np(pthread_self(), "busy-beta");
    spin_beta();
    return NULL;
}

int main(int argc, char** argv) {
    const long seconds = argc > 1 ? strtol(argv[1], NULL, 10) : 0;
    pthread_t alpha, beta;
    if (pthread_create(&alpha, NULL, run_alpha, NULL) != 0 || pthread_create(&beta, NULL, run_beta, NULL) != 0) {
        perror("stackfrag-busy: pthread_create");
        return 1;
    }
    if (seconds > 0) {
        sleep((unsigned)seconds);
        stop_requested = 1;
        pthread_join(alpha, NULL);
        pthread_join(beta, NULL);
        return 0;
    }
    for (;;) pause();   /* until a signal ends the process */
}
