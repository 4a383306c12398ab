// bench_decode REC [ROUNDS]: decode every sample of a recording ROUNDS times against the CodeMap as
// it stood when the sample was read, and print ns per decode (median, p90, p99) by top-frame kind.
// Separates the decoder's own cost from reading and decompressing the recording. Each sample's
// fragment is where the recording put it, among all the others (hundreds of MB: mostly not in any
// cache), with the next one prefetched as the agent does: the coldest a fragment can be.
//
// bench_decode --fragment-copied REC [ROUNDS]: the same full walks, each sample first copied (untimed)
// into one reused buffer, as the agent's reader copies it out of the ring before the decoder sees it:
// the walk's reads of its fragment then hit the cache. The agent's decoder sees a fragment between
// the two (copied a batch earlier, maybe on the other CPU), so the two modes bound what a walk
// costs there.
//
// bench_decode --incremental REC [ROUNDS]: decode the recording in stream order (events applied
// where they stand, as replay and the agent do) with a full and an incremental decoder over the same
// CodeMap, each sample by both in alternating order, and print ns per decode for each, the samples
// and steps the incremental one took over, and whether every trace was equal; then the incremental
// decoder's ns and walked (not taken over) frames per sample by the thread's kind (java, compiler, ...).
//
// bench_decode --by-class REC [ROUNDS]: the incremental decoder in stream order (as --incremental),
// its time split by the class of sample: a Java thread's sample with a Java (or stub) top frame, a
// Java thread's with a native top frame, a compiler thread's, a GC thread's, any other thread's, and
// a Java thread's failed or empty one (classes found by a first, unmeasured pass), and the
// profiler's own threads' samples, which the stream decoder (and so the live agent) does not walk:
// Decoder::decode_top_only, as there. Per class: samples,
// mean and median clock ns, and the class's share of the summed time (the mean sample is what the
// live decoder thread pays). Each class's decodes go through a function of its own
// (decode_class_java_top, ...), so that `valgrind --tool=callgrind bench_decode --by-class REC 1`
// gives each class's instructions as that function's inclusive cost. Each sample's successor is
// prefetched before it is decoded (Decoder::prefetch), as the live decoder does; with
// --alternate-prefetch (after ROUNDS) every second round leaves that out, and each round's Java-top
// median and mean are printed, to compare the two on one machine in one run.
//
// bench_decode --sp-analysis REC: the moved-sp pass (code_shape.cpp, once per CodeLoad the walk
// meets) over every CodeLoad of the recording: its CPU time per CodeLoad (median, p99, the largest
// and the code size there) and how many CodeLoads have moved-sp ranges.
//
// bench_decode --sp-dump REC: the moved-sp pass's ranges of every CodeLoad as text, one line per
// range, to compare two builds of the pass (they must print the same).
#include <fmt/core.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <ctime>
#include <map>
#include <string>
#include <vector>

#include "stackfrag/base/clock.hpp"
#include "stackfrag/decoder/code_map.hpp"
#include "stackfrag/decoder/decoder.hpp"
#include "stackfrag/events/recording.hpp"
#include "../common/recording_samples.hpp"
#include "code_shape.hpp"

namespace {

using Clock = std::chrono::steady_clock;

uint64_t ns_between(Clock::time_point a, Clock::time_point b) {
    return uint64_t(std::chrono::duration_cast<std::chrono::nanoseconds>(b - a).count());
}

void report(const std::string& name, std::vector<uint64_t> v, const char* unit = "ns") {
    if (v.empty()) return;
    std::sort(v.begin(), v.end());
    auto pct = [&](double p) { return v[std::min(v.size() - 1, size_t(p * double(v.size())))]; };
    uint64_t sum = 0;
    for (uint64_t x : v) sum += x;
    fmt::print("{:<16} n={:<8} median {:>7} {}  p90 {:>7} {}  p99 {:>8} {}  mean {:>7} {}\n", name, v.size(), pct(0.5), unit,
               pct(0.9), unit, pct(0.99), unit, sum / v.size(), unit);
}

using sf::thread_cpu_ns;

// A stream step as the live decoder takes it: a sample (or an oracle's copy) is returned for
// decoding; any other event is applied to the map, and a thread's end frees its journal.
const sf::Sample* apply_or_sample(const sf::Event& e, sf::CodeMap& map, sf::Decoder& decoder) {
    if (const auto* s = std::get_if<sf::Sample>(&e)) return s;
    if (const auto* o = std::get_if<sf::Oracle>(&e)) return &o->sample;
    map.apply(e);
    if (const auto* t = std::get_if<sf::ThreadInfo>(&e); t && t->ended) decoder.forget_thread(t->tid);
    return nullptr;
}

// For each sample of `events` in stream order, the sample after it (null for the last): what the
// live decoder hands Decoder::prefetch before decoding it.
std::vector<const sf::Sample*> next_samples(const std::vector<sf::Event>& events) {
    std::vector<const sf::Sample*> in_order;
    for (const auto& e : events) {
        if (const auto* s = std::get_if<sf::Sample>(&e)) in_order.push_back(s);
        else if (const auto* o = std::get_if<sf::Oracle>(&e)) in_order.push_back(&o->sample);
    }
    if (!in_order.empty()) in_order.erase(in_order.begin());
    in_order.push_back(nullptr);
    return in_order;
}

// Thread CPU time of one pass over the stream: every event applied, every sample decoded with
// `mode` (0: none, 1: full walk, 2: incremental). CPU time, unlike the clock, leaves out the time
// other processes of a loaded machine take.
uint64_t pass_cpu_ns(const std::vector<sf::Event>& events, int mode) {
    sf::CodeMap map;
    sf::DecoderOptions options;
    options.incremental = mode == 2;
    sf::Decoder decoder(map, options);
    sf::CallTrace trace;
    const std::vector<const sf::Sample*> next = next_samples(events);
    const uint64_t begin = thread_cpu_ns();
    size_t i = 0;
    for (const auto& e : events) {
        const sf::Sample* s = apply_or_sample(e, map, decoder);
        if (s && mode != 0) {
            if (next[i]) decoder.prefetch(*next[i]);
            decoder.decode(*s, trace);
        }
        i += s != nullptr;
    }
    return thread_cpu_ns() - begin;
}

// Every event of the recording at `path`, in stream order; false (with the reason printed) if it
// cannot be opened.
bool load_events(const char* path, std::vector<sf::Event>& events) {
    auto reader = sf::RecordingReader::open(path);
    if (!reader) {
        fmt::print(stderr, "{}\n", reader.error().describe());
        return false;
    }
    while (auto e = (*reader)->next()) events.push_back(std::move(*e));
    return true;
}

int compare_incremental(const char* path, int rounds) {
    std::vector<sf::Event> events;
    if (!load_events(path, events)) return 2;
    std::vector<uint64_t> full_ns, incremental_ns;
    // By whether the incremental decoder took over steps of the sample: [took over][full, incremental].
    std::vector<uint64_t> split_ns[2][2];
    // The incremental decoder's ns by the sample's thread kind (ThreadInfo; unannounced threads: java),
    // and the frames it walked (not taken over) per sample of that kind.
    std::vector<uint64_t> kind_ns[sf::kThreadKinds], kind_walked[sf::kThreadKinds];
    std::map<uint32_t, sf::ThreadKind> kinds;
    uint64_t samples = 0, differing = 0;
    sf::DecodeStats last_stats;
    for (int r = 0; r < rounds; ++r) {
        sf::CodeMap map;
        sf::DecoderOptions full_options, incremental_options;
        full_options.incremental = false;
        incremental_options.incremental = true;
        sf::Decoder full(map, full_options), incremental(map, incremental_options);
        sf::CallTrace a, b;
        for (const auto& e : events) {
            const sf::Sample* s = std::get_if<sf::Sample>(&e);
            if (const auto* o = std::get_if<sf::Oracle>(&e)) s = &o->sample;
            if (!s) {
                map.apply(e);
                if (const auto* t = std::get_if<sf::ThreadInfo>(&e)) {
                    if (t->ended) incremental.forget_thread(t->tid);
                    else kinds[t->tid] = t->kind;
                }
                continue;
            }
            const auto kind_it = kinds.find(s->tid);
            const size_t kind = static_cast<size_t>(kind_it == kinds.end() ? sf::ThreadKind::kJava : kind_it->second);
            const uint64_t reused_before = incremental.stats().frames_reused;
            // Alternate which decoder goes first, so neither always finds the caches warmed by the other.
            const uint64_t took_over_before = incremental.stats().incremental_samples;
            uint64_t ns[2] = {};
            for (int k = 0; k < 2; ++k) {
                const bool incremental_turn = (k == 0) == (samples % 2 == 0);
                const auto t0 = Clock::now();
                if (incremental_turn) incremental.decode(*s, b);
                else full.decode(*s, a);
                const auto t1 = Clock::now();
                ns[incremental_turn] = ns_between(t0, t1);
                (incremental_turn ? incremental_ns : full_ns).push_back(ns[incremental_turn]);
            }
            const bool took_over = incremental.stats().incremental_samples != took_over_before;
            split_ns[took_over][0].push_back(ns[0]);
            split_ns[took_over][1].push_back(ns[1]);
            kind_ns[kind].push_back(ns[1]);
            kind_walked[kind].push_back(b.frames.size() - std::min<uint64_t>(b.frames.size(),
                                                                             incremental.stats().frames_reused - reused_before));
            ++samples;
            differing += !(a == b);
        }
        last_stats = incremental.stats();
    }
    fmt::print("{} samples x {} rounds, stream order\n", samples / uint64_t(rounds), rounds);
    report("full walk", full_ns);
    report("incremental", incremental_ns);
    // The least CPU time of `rounds` passes each, less that of a pass that only applies the events.
    uint64_t cpu[3] = {UINT64_MAX, UINT64_MAX, UINT64_MAX};
    for (int r = 0; r < rounds; ++r) {
        for (int mode = 0; mode < 3; ++mode) cpu[mode] = std::min(cpu[mode], pass_cpu_ns(events, mode));
    }
    const uint64_t per_round = samples / uint64_t(rounds);
    auto per_sample = [&](uint64_t pass) { return per_round ? (pass - std::min(pass, cpu[0])) / per_round : 0; };
    fmt::print("CPU ns per sample (least of {} passes, event application subtracted): full walk {}, incremental {}\n",
               rounds, per_sample(cpu[1]), per_sample(cpu[2]));
    report("full, taken over", split_ns[1][0]);
    report("incr, taken over", split_ns[1][1]);
    report("full, not", split_ns[0][0]);
    report("incr, not", split_ns[0][1]);
    for (size_t k = 0; k < sf::kThreadKinds; ++k) {
        const std::string name = sf::thread_kind_name(static_cast<sf::ThreadKind>(k));
        report("incr " + name, kind_ns[k]);
        report("  walked frames", kind_walked[k], "frames");
    }
    fmt::print("incremental: {} samples took over {} steps, {} frames (last round); {} traces differ\n",
               last_stats.incremental_samples, last_stats.steps_reused, last_stats.frames_reused, differing);
    return differing == 0 ? 0 : 1;
}

// One function per sample class, never inlined: callgrind's inclusive cost of each is its class's.
#define SF_CLASS_DECODE(name)                                                                         \
    [[gnu::noinline]] void name(sf::Decoder& decoder, const sf::Sample& s, sf::CallTrace& trace) { \
        decoder.decode(s, trace);                                                                  \
        asm volatile("" ::: "memory");                                                             \
    }
SF_CLASS_DECODE(decode_class_java_top)
SF_CLASS_DECODE(decode_class_java_native_top)
SF_CLASS_DECODE(decode_class_compiler)
SF_CLASS_DECODE(decode_class_gc)
SF_CLASS_DECODE(decode_class_other)
SF_CLASS_DECODE(decode_class_java_failed)
#undef SF_CLASS_DECODE
[[gnu::noinline]] void decode_class_profiler(sf::Decoder& decoder, const sf::Sample& s, sf::CallTrace& trace) {
    decoder.decode_top_only(s, trace);
    asm volatile("" ::: "memory");
}

int by_class(const char* path, int rounds, bool alternate) {
    std::vector<sf::Event> events;
    if (!load_events(path, events)) return 2;
    constexpr size_t kClasses = 7;
    const char* const names[kClasses] = {"java, Java top", "java, native top", "compiler", "gc",
                                         "other",          "java, failed",     "profiler (top only)"};
    void (*const decode[kClasses])(sf::Decoder&, const sf::Sample&, sf::CallTrace&) = {
        decode_class_java_top, decode_class_java_native_top, decode_class_compiler,  decode_class_gc,
        decode_class_other,    decode_class_java_failed,     decode_class_profiler};
    // The classes, by a full walk of every sample (the traces are the incremental decoder's too).
    std::vector<uint8_t> classes;
    {
        sf::CodeMap map;
        sf::DecoderOptions options;
        options.incremental = false;
        sf::Decoder decoder(map, options);
        sf::CallTrace trace;
        std::map<uint32_t, sf::ThreadKind> kinds;
        for (const auto& e : events) {
            const sf::Sample* s = std::get_if<sf::Sample>(&e);
            if (const auto* o = std::get_if<sf::Oracle>(&e)) s = &o->sample;
            if (!s) {
                map.apply(e);
                if (const auto* t = std::get_if<sf::ThreadInfo>(&e); t && !t->ended) kinds[t->tid] = t->kind;
                continue;
            }
            const auto it = kinds.find(s->tid);
            const sf::ThreadKind kind = it == kinds.end() ? sf::ThreadKind::kJava : it->second;
            uint8_t c = 4;
            if (kind == sf::ThreadKind::kProfiler) {
                classes.push_back(6);
                continue;
            }
            decoder.decode(*s, trace);
            if (kind == sf::ThreadKind::kJava) {
                c = trace.status == sf::TraceStatus::kFailed || trace.frames.empty() ? 5
                    : trace.frames[0].kind == sf::FrameKind::kNative                 ? 1
                                                                                      : 0;
            } else if (kind == sf::ThreadKind::kCompiler) {
                c = 2;
            } else if (kind == sf::ThreadKind::kGc) {
                c = 3;
            }
            classes.push_back(c);
        }
    }
    // Per class, the least summed ns over the rounds, and the median of its samples' ns in that round.
    const std::vector<const sf::Sample*> next = next_samples(events);
    uint64_t best_sum[kClasses], best_median[kClasses], count[kClasses] = {};
    std::fill(std::begin(best_sum), std::end(best_sum), UINT64_MAX);
    std::fill(std::begin(best_median), std::end(best_median), 0);
    for (int r = 0; r < rounds; ++r) {
        sf::CodeMap map;
        sf::DecoderOptions options;
        options.incremental = true;
        sf::Decoder decoder(map, options);
        sf::CallTrace trace;
        std::vector<uint64_t> ns[kClasses];
        size_t i = 0;
        for (const auto& e : events) {
            const sf::Sample* s = apply_or_sample(e, map, decoder);
            if (!s) continue;
            const sf::Sample* following = next[i];
            const uint8_t c = classes[i++];
            const auto t0 = Clock::now();
            if (following && (!alternate || r % 2 == 0)) decoder.prefetch(*following);
            decode[c](decoder, *s, trace);
            const auto t1 = Clock::now();
            ns[c].push_back(ns_between(t0, t1));
        }
        if (alternate && !ns[0].empty()) {
            std::vector<uint64_t> v = ns[0];
            std::sort(v.begin(), v.end());
            uint64_t sum = 0;
            for (uint64_t x : v) sum += x;
            fmt::print("round {}, {}: Java top median {} ns, mean {} ns\n", r, r % 2 == 0 ? "prefetch ahead" : "walk's own prefetch",
                       v[v.size() / 2], sum / v.size());
        }
        for (size_t c = 0; c < kClasses; ++c) {
            uint64_t sum = 0;
            for (uint64_t x : ns[c]) sum += x;
            count[c] = ns[c].size();
            if (sum < best_sum[c]) {
                best_sum[c] = sum;
                std::sort(ns[c].begin(), ns[c].end());
                best_median[c] = ns[c].empty() ? 0 : ns[c][ns[c].size() / 2];
            }
        }
    }
    uint64_t total = 0;
    for (size_t c = 0; c < kClasses; ++c) total += count[c] ? best_sum[c] : 0;
    fmt::print("{} samples x {} rounds, incremental, stream order; clock ns, least sum over the rounds per class\n",
               classes.size(), rounds);
    fmt::print("{:<18} {:>8} {:>8} {:>10} {:>10} {:>7}\n", "class", "samples", "share", "mean ns", "median ns", "time");
    for (size_t c = 0; c < kClasses; ++c) {
        if (count[c] == 0) continue;
        fmt::print("{:<18} {:>7.1f}% {:>7.1f}% {:>10} {:>10} {:>5} ms\n", names[c], 100.0 * double(count[c]) / double(classes.size()),
                   total ? 100.0 * double(best_sum[c]) / double(total) : 0.0, best_sum[c] / count[c], best_median[c],
                   best_sum[c] / 1000000);
    }
    fmt::print("{:<18} {:>8} {:>8} {:>10}\n", "all", classes.size(), "100%", classes.empty() ? 0 : total / classes.size());
    return 0;
}

int sp_analysis(const char* path) {
    auto reader = sf::RecordingReader::open(path);
    if (!reader) {
        fmt::print(stderr, "{}\n", reader.error().describe());
        return 2;
    }
    std::vector<uint64_t> ns;
    uint64_t with_ranges = 0, worst = 0, worst_size = 0, bytes = 0;
    while (auto e = (*reader)->next()) {
        const auto* load = std::get_if<sf::CodeLoad>(&*e);
        if (!load) continue;
        const uint64_t t0 = thread_cpu_ns();
        const sf::detail::SpRanges r = sf::detail::analyze_sp_ranges(*load);
        const uint64_t t = thread_cpu_ns() - t0;
        ns.push_back(t);
        bytes += load->code.size();
        if (!r.ranges.empty()) ++with_ranges;
        if (t > worst) {
            worst = t;
            worst_size = load->code.size();
        }
    }
    report("per CodeLoad", ns);
    fmt::print("{} CodeLoads ({} bytes of code), {} with moved-sp ranges; the slowest {} us for {} bytes\n", ns.size(),
               bytes, with_ranges, worst / 1000, worst_size);
    return 0;
}

int sp_dump(const char* path) {
    auto reader = sf::RecordingReader::open(path);
    if (!reader) {
        fmt::print(stderr, "{}\n", reader.error().describe());
        return 2;
    }
    while (auto e = (*reader)->next()) {
        const auto* load = std::get_if<sf::CodeLoad>(&*e);
        if (!load) continue;
        const sf::detail::SpRanges r = sf::detail::analyze_sp_ranges(*load);
        fmt::print("code {:#x} {} bytes, {} ranges\n", load->code_begin, load->code.size(), r.ranges.size());
        for (const sf::detail::SpRange& range : r.ranges) {
            fmt::print("  [{:#x}, {:#x}){}", range.begin, range.end, range.call_pending ? " call pending" : "");
            for (uint8_t i = 0; i < range.count; ++i) fmt::print(" {}", range.deltas[i]);
            fmt::print("\n");
        }
    }
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    if (argc >= 3 && std::strcmp(argv[1], "--sp-analysis") == 0) return sp_analysis(argv[2]);
    if (argc >= 3 && std::strcmp(argv[1], "--sp-dump") == 0) return sp_dump(argv[2]);
    if (argc >= 3 && std::strcmp(argv[1], "--by-class") == 0) {
        const bool alternate = argc > 4 && std::strcmp(argv[4], "--alternate-prefetch") == 0;
        return by_class(argv[2], argc > 3 ? std::max(1, std::atoi(argv[3])) : 1, alternate);
    }
    if (argc >= 3 && std::strcmp(argv[1], "--incremental") == 0) {
        return compare_incremental(argv[2], argc > 3 ? std::max(1, std::atoi(argv[3])) : 1);
    }
    const auto usage = [] {
        fmt::print(stderr, "usage: bench_decode [--fragment-copied] REC [ROUNDS] | bench_decode --incremental REC [ROUNDS] | "
                           "bench_decode --by-class REC [ROUNDS [--alternate-prefetch]] | bench_decode --sp-analysis REC | "
                           "bench_decode --sp-dump REC\n");
        return 2;
    };
    if (argc < 2) return usage();
    const bool fragment_copied = std::strcmp(argv[1], "--fragment-copied") == 0;
    if (fragment_copied) {
        ++argv;
        --argc;
    }
    if (argc < 2) return usage();
    const int rounds = argc > 2 ? std::max(1, std::atoi(argv[2])) : 20;
    sf::CodeMap map;
    std::vector<sf::Sample> samples;
    if (!sf::bench::load_recording_samples(argv[1], map, samples)) return 2;
    // A full walk of every sample: this mode measures the walk itself (incremental decoding would
    // take over most of every sample from the round before).
    sf::DecoderOptions options;
    options.incremental = false;
    sf::Decoder decoder(map, options);
    sf::CallTrace trace;
    sf::Sample copy;
    std::map<std::string, std::vector<uint64_t>> by_kind;
    std::vector<uint64_t> all;
    for (int r = 0; r < rounds; ++r) {
        for (size_t i = 0; i < samples.size(); ++i) {
            if (fragment_copied) copy = samples[i];   // the vector keeps its capacity: no allocation
            const sf::Sample& s = fragment_copied ? copy : samples[i];
            const auto t0 = Clock::now();
            if (!fragment_copied && i + 1 < samples.size()) decoder.prefetch(samples[i + 1]);
            decoder.decode(s, trace);
            const auto t1 = Clock::now();
            const uint64_t ns = ns_between(t0, t1);
            all.push_back(ns);
            std::string kind = trace.status == sf::TraceStatus::kFailed ? "failed"
                               : trace.frames.empty()                    ? "empty"
                                                                         : sf::frame_kind_name(trace.frames[0].kind);
            by_kind[kind].push_back(ns);
        }
    }
    fmt::print("{} samples x {} rounds\n", samples.size(), rounds);
    report("all", all);
    for (auto& [k, v] : by_kind) report("top " + k, v);
    return 0;
}
