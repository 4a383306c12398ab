// Cost of a breadcrumb thunk per native call: the same trivial C function called directly and
// through a thunk, with 0, 4 and 11 stack-passed arguments (the shapes of typical JNI natives and
// of the wide ones in agent_breadcrumbs_test). Prints a markdown table of ns per call (median of
// rounds, thread CPU time) and the difference, which is what breadcrumbs=on adds to each JNI call.
// Usage: bench_breadcrumbs [CALLS_PER_ROUND] [ROUNDS]
#include <time.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "breadcrumb_thunks.hpp"
#include "stackfrag/base/clock.hpp"

namespace {

using F0 = long(void*, void*, long, long);
using F4 = long(void*, void*, long, long, long, long, long, long, long, long);
// 15 integer arguments (9 on the stack) and 10 doubles (2 on the stack).
using F11 = long(void*, void*, long, long, long, long, long, long, long, long, long, long, long, long, long, double,
                 double, double, double, double, double, double, double, double, double);

__attribute__((noinline)) long f0(void*, void*, long a, long b) {
    asm volatile("");
    return a + b;
}
__attribute__((noinline)) long f4(void*, void*, long a, long, long, long, long, long, long, long h) {
    asm volatile("");
    return a + h;
}
__attribute__((noinline)) long f11(void*, void*, long a, long, long, long, long, long, long, long, long, long, long,
                                   long, long m, double, double, double, double, double, double, double, double,
                                   double, double j) {
    asm volatile("");
    return a + m + static_cast<long>(j);
}

double thread_cpu_ns() { return static_cast<double>(sf::thread_cpu_ns()); }

// Thread CPU time, not wall time: on a shared machine the thread is descheduled for long stretches.
template <class Call>
double ns_per_call(Call call, long calls) {
    const double begin = thread_cpu_ns();
    long sink = 0;
    for (long i = 0; i < calls; ++i) sink += call(i);
    const double end = thread_cpu_ns();
    asm volatile("" ::"r"(sink));
    return (end - begin) / static_cast<double>(calls);
}

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
    const long calls = argc > 1 ? std::atol(argv[1]) : 20'000'000;
    const int rounds = argc > 2 ? std::atoi(argv[2]) : 9;
    sf::agent::breadcrumbs::ThunkPool pool;
    auto make = [&](void* f, uint32_t slots) {
        sf::Result<void*> t = pool.make(f, slots);
        if (!t.ok()) {
            std::fprintf(stderr, "thunk: %s\n", t.error().describe().c_str());
            std::exit(2);
        }
        return *t;
    };
    // Called through volatile pointers so the direct call is an indirect call too, as JNI calls are.
    F0* volatile d0 = &f0;
    F4* volatile d4 = &f4;
    F11* volatile d11 = &f11;
    F0* volatile t0 = reinterpret_cast<F0*>(make(reinterpret_cast<void*>(&f0), 0));
    F4* volatile t4 = reinterpret_cast<F4*>(make(reinterpret_cast<void*>(&f4), 4));
    F11* volatile t11 = reinterpret_cast<F11*>(make(reinterpret_cast<void*>(&f11), 11));

    // The thunks must compute what the functions do before their speed means anything.
    if (t0(nullptr, nullptr, 5, 1) != 6 || t4(nullptr, nullptr, 5, 1, 2, 3, 4, 5, 6, 7) != 12 ||
        t11(nullptr, nullptr, 5, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10) != 27) {
        std::fprintf(stderr, "a thunk returned a wrong result\n");
        return 1;
    }
    struct Row {
        const char* shape;
        std::vector<double> direct, thunk;
    } rows[3] = {{"0 stack args (e.g. `(J)J`)", {}, {}}, {"4 stack args (10 integer)", {}, {}},
                 {"11 stack args (15 integer + 10 double)", {}, {}}};
    for (int r = 0; r < rounds; ++r) {
        // Alternate direct and thunk within a round so frequency changes hit both alike.
        rows[0].direct.push_back(ns_per_call([&](long i) { return d0(nullptr, nullptr, i, 1); }, calls));
        rows[0].thunk.push_back(ns_per_call([&](long i) { return t0(nullptr, nullptr, i, 1); }, calls));
        rows[1].direct.push_back(ns_per_call([&](long i) { return d4(nullptr, nullptr, i, 1, 2, 3, 4, 5, 6, 7); }, calls));
        rows[1].thunk.push_back(ns_per_call([&](long i) { return t4(nullptr, nullptr, i, 1, 2, 3, 4, 5, 6, 7); }, calls));
        auto call11 = [](F11* f, long i) {
            return f(nullptr, nullptr, i, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0,
                     8.0, 9.0, 10.0);
        };
        rows[2].direct.push_back(ns_per_call([&](long i) { return call11(d11, i); }, calls));
        rows[2].thunk.push_back(ns_per_call([&](long i) { return call11(t11, i); }, calls));
    }
    std::printf("| call shape | direct ns/call | through thunk ns/call | added ns/call |\n|---|---:|---:|---:|\n");
    for (const Row& row : rows) {
        const double direct = median(row.direct), thunk = median(row.thunk);
        std::printf("| %s | %.2f | %.2f | %.2f |\n", row.shape, direct, thunk, thunk - direct);
    }
    std::printf("\n(%ld calls per round, median of %d rounds)\n", calls, rounds);
    return 0;
}
