// bench_sample_cost [--working-set KB] [REPS]: what one perf sample costs the thread it samples. A thread does a fixed
// amount of work and measures its own CPU time, without a sampling event and with one at 1 kHz and
// 10 kHz for 16 KB and 64 KB fragments, in alternating repetitions; the extra CPU time per sample
// is the kernel's work in the sampled thread's context (taking registers, copying the user stack
// into the ring). Reader and decoder costs are separate: they run in other threads (bench_capture,
// bench_decode, the agent's stop summary).
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include <fmt/core.h>

#include "stackfrag/base/clock.hpp"
#include "stackfrag/kernel/perf_events.hpp"

namespace {

using sf::thread_cpu_ns;

// Work with a real stack under it: a recursion 64 frames deep whose frames hold some data, so the
// copied fragment is not all cold memory and the work touches its own stack as Java code does.
// With --working-set KB, the work also reads that much memory at random, one dependent read per
// step, as an application whose data lives in the caches: a sample's copy of the stack into the
// ring (up to 64 KB read and 64 KB written) evicts some of it, which the thread pays for after
// the sample, outside the kernel's own time.
std::vector<uint64_t> g_working_set;

__attribute__((noinline)) uint64_t work(int depth, uint64_t x) {
    volatile uint64_t frame[24];
    for (auto& f : frame) f = x++;
    if (depth > 0) return work(depth - 1, x) + frame[depth % 24];
    if (g_working_set.empty()) {
        for (int i = 0; i < 2000; ++i) x = x * 6364136223846793005ULL + 1;
        return x;
    }
    const uint64_t words = g_working_set.size();
    uint64_t at = x % words;
    for (int i = 0; i < 2000; ++i) {
        x = x * 6364136223846793005ULL + 1;
        at = (at + g_working_set[at] + (x >> 40)) % words;
    }
    return x + at;
}

template <typename F>
__attribute__((noinline)) void run_below(size_t bytes, F&& f) {
    volatile uint8_t* below = static_cast<uint8_t*>(__builtin_alloca(bytes));
    for (size_t i = 0; i < bytes; i += 4096) below[i] = 1;
    f();
    below[0] = below[bytes - 1];
}

struct Config {
    std::string name;
    uint64_t period_ns = 0;   // 0: no event
    uint32_t stack_bytes = 16384;
};

struct Result {
    uint64_t cpu_ns = 0;
    uint64_t samples = 0;
};

class CountingHandler : public sf::kernel::RingHandler {
public:
    void on_sample(const sf::kernel::SampleView&) override { ++samples; }
    void on_lost(const sf::kernel::LostView& lost) override { samples += lost.count; }
    uint64_t samples = 0;
};

// Runs the fixed work in a fresh thread with the config's event on it; the ring is drained by this
// thread afterwards (ring large enough that losses are counted, not lost, via LOST records).
Result run(const Config& config, uint64_t rounds) {
    std::atomic<pid_t> tid{0};
    std::atomic<bool> go{false};
    Result result;
    std::thread worker([&] {
        tid.store(static_cast<pid_t>(syscall(SYS_gettid)));
        while (!go.load()) std::this_thread::yield();
        // The work runs 96 KB below the thread's first frame, as in a deep Java stack, so that
        // every configuration's fragment is copied whole (the kernel stops at the stack's end).
        run_below(96 * 1024, [&] {
            const uint64_t before = thread_cpu_ns();
            uint64_t sink = 0;
            for (uint64_t r = 0; r < rounds; ++r) sink += work(64, r);
            result.cpu_ns = thread_cpu_ns() - before;
            if (sink == 42) fmt::print("");   // keep the work
        });
    });
    while (tid.load() == 0) std::this_thread::yield();
    std::vector<sf::kernel::PerfEvent> events;
    if (config.period_ns != 0) {
        sf::kernel::SamplingConfig sampling;
        sampling.period_ns = config.period_ns;
        sampling.stack_bytes = config.stack_bytes;
        sampling.ring_pages = 1024;
        auto opened = sf::kernel::PerfEvent::open_thread(tid.load(), sampling);
        if (!opened) {
            fmt::print(stderr, "bench_sample_cost: {}\n", opened.error().describe());
            std::exit(1);
        }
        events.push_back(std::move(opened).value());
        (void)events.back().enable();
    }
    CountingHandler handler;
    go.store(true);
    // Drain while it runs so the ring never fills.
    while (true) {
        for (auto& e : events) e.ring().drain(handler);
        if (result.cpu_ns != 0) break;
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    worker.join();
    for (auto& e : events) e.ring().drain(handler);
    result.samples = handler.samples;
    return result;
}

uint64_t median(std::vector<uint64_t> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
    size_t working_set_kb = 0;
    if (argc > 1 && std::string(argv[1]) == "--working-set") {
        char* end = nullptr;
        const long kb = argc > 2 ? std::strtol(argv[2], &end, 10) : 0;
        if (argc < 3 || end == argv[2] || *end != '\0' || kb < 1 || kb > (1L << 22)) {
            fmt::print(stderr, "bench_sample_cost: --working-set wants a size in KB from 1 to 4194304, got '{}'\n",
                       argc > 2 ? argv[2] : "");
            return 2;
        }
        working_set_kb = static_cast<size_t>(kb);
        argc -= 2;
        argv += 2;
    }
    if (working_set_kb != 0) {
        g_working_set.resize(working_set_kb * 1024 / sizeof(uint64_t));
        uint64_t x = 1;
        for (auto& w : g_working_set) w = (x = x * 6364136223846793005ULL + 1) >> 20;
    }
    const int reps = argc > 1 ? std::max(3, std::atoi(argv[1])) : 9;
    const std::vector<Config> configs = {
        {"none", 0, 16384},
        {"1 kHz, 4 KB", 1'000'000, 4096},
        {"1 kHz, 16 KB", 1'000'000, 16384},
        {"1 kHz, 64 KB", 1'000'000, 65528},
        {"10 kHz, 4 KB", 100'000, 4096},
        {"10 kHz, 8 KB", 100'000, 8192},
        {"10 kHz, 16 KB", 100'000, 16384},
        {"10 kHz, 64 KB", 100'000, 65528},
    };
    // Calibrate the work to ~0.5 s of CPU.
    uint64_t rounds = 1000;
    while (run(configs[0], rounds).cpu_ns < 500'000'000) rounds *= 2;
    std::vector<std::vector<uint64_t>> cpu(configs.size()), samples(configs.size());
    for (int r = 0; r < reps; ++r) {
        for (size_t c = 0; c < configs.size(); ++c) {
            const Result result = run(configs[c], rounds);
            cpu[c].push_back(result.cpu_ns);
            samples[c].push_back(result.samples);
        }
    }
    const double base = static_cast<double>(median(cpu[0]));
    double load = 0;
    if (FILE* f = std::fopen("/proc/loadavg", "r")) {
        if (std::fscanf(f, "%lf", &load) != 1) load = 0;
        std::fclose(f);
    }
    fmt::print("{} alternating repetitions of {:.2f} s of work per configuration{}; load average {:.2f} at the end.\n\n",
               reps, base / 1e9,
               working_set_kb ? fmt::format(", reading a {} KB working set", working_set_kb) : std::string(), load);
    fmt::print("| sampling | median CPU s | ratio | samples | extra µs per sample |\n|---|---:|---:|---:|---:|\n");
    for (size_t c = 0; c < configs.size(); ++c) {
        const double m = static_cast<double>(median(cpu[c]));
        const uint64_t n = median(samples[c]);
        const std::string per = n == 0 ? "" : fmt::format("{:.2f}", (m - base) / 1000.0 / static_cast<double>(n));
        fmt::print("| {} | {:.3f} | {:.4f} | {} | {} |\n", configs[c].name, m / 1e9, m / base, n, per);
    }
    return 0;
}
