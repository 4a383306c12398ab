// What the agent integration tests check in a recording: read it once with RecordingReader and
// keep counts per thread, the oracle's outcomes and the names of the methods with compiled code.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "stackfrag/events/recording.hpp"

namespace sf::test {

struct ThreadSummary {
    std::string name;
    uint64_t samples = 0;
    uint64_t clock_samples = 0;   // SampleSource::kThreadClock: the profiler's own, by their clocks
    uint64_t oracles = 0;
    uint64_t oracles_ok = 0;
    uint64_t lost = 0;
    uint64_t without_stack = 0;   // perf samples whose fragment the kernel could not copy
    bool started = false;
    bool ended = false;
};

struct RecordingSummary {
    bool opened = false;
    std::string open_error;
    std::optional<RecordingDamage> damage;
    uint64_t events = 0;
    std::map<EventKind, uint64_t> by_kind;
    std::map<uint32_t, ThreadSummary> threads;   // by tid
    uint64_t samples = 0;
    uint64_t lost = 0;
    uint64_t samples_with_stack = 0;
    // Kernel-mode ticks whose user stack the kernel could not copy from interrupt context
    // (the page was not resident): they keep their registers and decode as empty_stack.
    uint64_t kernel_samples_without_stack = 0;
    // User-mode ticks without a fragment: the page at sp was not resident either (seen once in
    // 88,527 samples at 10 kHz since sampling begins at the agent's load, where a thread can be
    // sampled at its first instructions, before its stack page was touched).
    uint64_t user_samples_without_stack = 0;
    // The profiler's own threads' CPU time, a sample per period from their thread clocks: no
    // registers but the ip, no fragment.
    uint64_t clock_samples = 0;
    uint64_t oracles = 0;
    uint64_t oracles_ok = 0;                      // agct_status > 0
    std::map<int32_t, uint64_t> oracle_status;    // agct_status <= 0 -> count
    uint64_t vm_infos = 0;
    bool vm_info_first = false;                   // VmInfo precedes every sample and oracle
    bool time_ordered = true;                     // samples/oracles non-decreasing in time
    std::string first_disorder;                   // the first sample older than its predecessor
    uint64_t disorders = 0;                       // samples older than their predecessor
    uint64_t modules_before_first_sample = 0;     // ModuleMap events ahead of every sample
    std::set<std::string> compiled_classes;       // classes of CodeLoad methods (via MethodInfo)
    std::unordered_map<uint64_t, std::string> method_class;   // method_id -> class name

    uint64_t samples_of_threads_named(const std::string& prefix) const {
        uint64_t total = 0;
        for (const auto& [tid, thread] : threads) {
            if (thread.name.rfind(prefix, 0) == 0) total += thread.samples;
        }
        return total;
    }
    bool has_compiled_class_with_prefix(const std::string& prefix) const {
        auto it = compiled_classes.lower_bound(prefix);
        return it != compiled_classes.end() && it->rfind(prefix, 0) == 0;
    }
};

inline RecordingSummary summarize_recording(const std::string& path) {
    RecordingSummary summary;
    Result<std::unique_ptr<RecordingReader>> opened = RecordingReader::open(path);
    if (!opened.ok()) {
        summary.open_error = opened.error().describe();
        return summary;
    }
    summary.opened = true;
    RecordingReader& reader = **opened;
    std::vector<uint64_t> code_methods;
    uint64_t last_time = 0;
    uint32_t last_tid = 0;
    bool sample_seen = false;
    // Says where the order broke, so a failure under load can be explained from the test's output.
    auto check_order = [&](const Sample& sample, const char* kind) {
        if (sample.time_ns < last_time) ++summary.disorders;
        if (sample.time_ns < last_time && summary.time_ordered) {
            summary.time_ordered = false;
            summary.first_disorder = std::string(kind) + " of tid " + std::to_string(sample.tid) + " at " +
                                     std::to_string(sample.time_ns) + " ns after one of tid " +
                                     std::to_string(last_tid) + " at " + std::to_string(last_time) + " ns (" +
                                     std::to_string((last_time - sample.time_ns) / 1000) + " us older, event " +
                                     std::to_string(summary.events) + ")";
        }
        last_time = sample.time_ns;
        last_tid = sample.tid;
    };
    while (std::optional<Event> event = reader.next()) {
        ++summary.events;
        ++summary.by_kind[kind_of(*event)];
        if (const auto* sample = std::get_if<Sample>(&*event)) {
            sample_seen = true;
            ++summary.samples;
            if (sample->source == SampleSource::kThreadClock) {
                ++summary.clock_samples;
                ++summary.threads[sample->tid].clock_samples;
            } else if (!sample->stack.empty()) {
                ++summary.samples_with_stack;
            } else {
                ++(sample->source == SampleSource::kPerfKernel ? summary.kernel_samples_without_stack
                                                                : summary.user_samples_without_stack);
                ++summary.threads[sample->tid].without_stack;
            }
            ++summary.threads[sample->tid].samples;
            check_order(*sample, "sample");
        } else if (const auto* oracle = std::get_if<Oracle>(&*event)) {
            sample_seen = true;
            ++summary.oracles;
            ++summary.threads[oracle->sample.tid].oracles;
            if (oracle->agct_status > 0) {
                ++summary.oracles_ok;
                ++summary.threads[oracle->sample.tid].oracles_ok;
            }
            else ++summary.oracle_status[oracle->agct_status];
            check_order(oracle->sample, "oracle");
        } else if (const auto* thread = std::get_if<ThreadInfo>(&*event)) {
            ThreadSummary& entry = summary.threads[thread->tid];
            if (!thread->name.empty()) entry.name = thread->name;
            (thread->ended ? entry.ended : entry.started) = true;
        } else if (const auto* lost = std::get_if<Lost>(&*event)) {
            summary.lost += lost->count;
            if (lost->tid != 0) summary.threads[lost->tid].lost += lost->count;
        } else if (std::holds_alternative<VmInfo>(*event)) {
            if (summary.vm_infos++ == 0) summary.vm_info_first = !sample_seen;
        } else if (std::holds_alternative<ModuleMap>(*event)) {
            if (!sample_seen) ++summary.modules_before_first_sample;
        } else if (const auto* method = std::get_if<MethodInfo>(&*event)) {
            summary.method_class[method->method_id] = method->class_name;
        } else if (const auto* code = std::get_if<CodeLoad>(&*event)) {
            code_methods.push_back(code->method_id);
        }
    }
    summary.damage = reader.damage();
    for (uint64_t method : code_methods) {
        auto found = summary.method_class.find(method);
        if (found != summary.method_class.end()) summary.compiled_classes.insert(found->second);
    }
    return summary;
}

}  // namespace sf::test
