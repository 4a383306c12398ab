// The live decoder thread's work per sample, without the JVM: a recording's events go through the
// agent's LiveProfile (observe() as the reader thread does, then poll_once() on this thread, as
// the decoder thread does when woken) in batches of BATCH samples; the thread CPU time of the
// polls over the samples is what the agent's "decoder" figure pays per sample, less the cold
// caches and the CPU shared with the JVM. FLUSH_MB > 0 writes that many MB of other memory before
// each batch, as the application's threads do between two wake-ups of the decoder thread, so that
// the batch starts with cold caches: the difference to FLUSH_MB=0 is the cost of a wake-up.
// WHEN `first` writes it before the batch's events are observed instead of after: the batch's
// fragments (just copied, as the reader copies them) are then warm and only the decoder's own
// state (code map, journals, tree, tables) is cold.
// Prints the least CPU ns per sample of ROUNDS passes (each a fresh LiveProfile), over the whole
// stream and over its second half (past the start's first meetings with new code).
// Usage: bench_live REC [BATCH=256] [FLUSH_MB=0] [ROUNDS=3] [WHEN=last|first]
#include <fmt/core.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <string_view>
#include <vector>

#include "live_profile.hpp"
#include "stackfrag/base/clock.hpp"
#include "stackfrag/events/recording.hpp"

namespace {

struct Pass {
    uint64_t cpu_ns = 0, samples = 0, polls = 0;
    uint64_t late_cpu_ns = 0, late_samples = 0;   // batches in the stream's second half
};

void write_over(std::vector<uint8_t>& flush) {
    for (size_t i = 0; i < flush.size(); i += 64) flush[i] = static_cast<uint8_t>(flush[i] + 1);
}

Pass one_pass(const std::vector<sf::Event>& events, uint64_t total_samples, size_t batch, std::vector<uint8_t>& flush,
              bool flush_first) {
    sf::agent::LiveSettings settings;   // no file: decoded and added to the tree, as with file=
    settings.queue_slots = events.size() + 2;
    settings.queue_bytes = SIZE_MAX;
    sf::agent::LiveProfile live(settings);
    Pass pass;
    size_t in_batch = 0;
    auto poll = [&] {
        if (!flush_first) write_over(flush);
        const uint64_t begin = sf::thread_cpu_ns();
        while (live.poll_once()) {
        }
        const uint64_t cpu = sf::thread_cpu_ns() - begin;
        pass.cpu_ns += cpu;
        if (pass.samples >= total_samples / 2) {
            pass.late_cpu_ns += cpu;
            pass.late_samples += in_batch;
        }
        pass.samples += in_batch;
        ++pass.polls;
        in_batch = 0;
    };
    for (const sf::Event& event : events) {
        const bool sample = std::holds_alternative<sf::Sample>(event);
        if (flush_first && in_batch == 0 && sample) write_over(flush);
        live.observe(event);
        if (sample && ++in_batch == batch) poll();
    }
    if (in_batch != 0) poll();
    live.stop(60'000);
    return pass;
}

}  // namespace

int main(int argc, char** argv) {
    if (argc < 2) {
        fmt::print(stderr, "usage: bench_live REC [BATCH=256] [FLUSH_MB=0] [ROUNDS=3] [WHEN=last|first]\n");
        return 2;
    }
    const size_t batch = std::max<size_t>(1, argc > 2 ? std::strtoul(argv[2], nullptr, 10) : 256);
    const size_t flush_mb = argc > 3 ? std::strtoul(argv[3], nullptr, 10) : 0;
    const int rounds = std::max(1, argc > 4 ? std::atoi(argv[4]) : 3);
    const bool flush_first = argc > 5 && std::string_view(argv[5]) == "first";
    auto reader = sf::RecordingReader::open(argv[1]);
    if (!reader) {
        fmt::print(stderr, "{}\n", reader.error().describe());
        return 2;
    }
    std::vector<sf::Event> events;
    uint64_t samples = 0;
    while (auto e = (*reader)->next()) {
        samples += std::holds_alternative<sf::Sample>(*e);
        events.push_back(std::move(*e));
    }
    std::vector<uint8_t> flush(flush_mb << 20, 1);
    double best = 1e300, best_late = 1e300;
    uint64_t polls = 0;
    for (int r = 0; r < rounds; ++r) {
        const Pass pass = one_pass(events, samples, batch, flush, flush_first);
        polls = pass.polls;
        best = std::min(best, static_cast<double>(pass.cpu_ns) / static_cast<double>(std::max<uint64_t>(pass.samples, 1)));
        best_late = std::min(best_late, static_cast<double>(pass.late_cpu_ns) /
                                            static_cast<double>(std::max<uint64_t>(pass.late_samples, 1)));
    }
    fmt::print("{} samples in {} batches of {} (flush {} MB before each{}), least of {} rounds: CPU ns per sample {:.0f}, "
               "second half {:.0f}\n",
               samples, polls, batch, flush_mb, flush_first ? ", before its events" : "", rounds, best, best_late);
    return 0;
}
