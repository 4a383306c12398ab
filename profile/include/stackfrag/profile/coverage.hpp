// Coverage: how much of the process's CPU time the samples account for. The samples' CPU time
// (each on-CPU sample weighs the period then in force) over the process's user + system time at
// stop (the ProcessCpu event), with the shares of Java, GC, compiler, VM and other threads and of
// the ticks that came in kernel mode. Computed
// from the event stream alone, so the live profile and replay of its recording give the same numbers.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>

#include "stackfrag/events/events.hpp"

namespace sf::profile {

struct Coverage {
    static constexpr size_t kKinds = kThreadKinds;
    uint64_t samples = 0;      // on-CPU samples (clock or signal; JVMTI traces in mode=jvmti)
    uint64_t sampled_ns = 0;   // their CPU time: each weighs the sampling period then in force
    std::array<uint64_t, kKinds> samples_by_kind{};
    std::array<uint64_t, kKinds> sampled_ns_by_kind{};
    uint64_t kernel_samples = 0;   // ticks in kernel mode (SampleSource::kPerfKernel): time in syscalls
    // Samples the kernel took but could not store (Lost events: a ring was full), and their CPU time
    // at the period then in force: counted CPU time that no stack explains and the profile leaves out.
    uint64_t lost_samples = 0;
    uint64_t lost_ns = 0;
    std::optional<ProcessCpu> process;   // the last ProcessCpu event at stop; none in older recordings
    // The ProcessCpu emitted before the sampling events opened (at_start); none in older recordings.
    std::optional<ProcessCpu> at_start;

    uint64_t process_ns() const { return process ? process->user_ns + process->system_ns : 0; }
    // sampled_ns / process_ns; nullopt without a ProcessCpu event or with no process time.
    std::optional<double> ratio() const;
    // The process's CPU time before sampling began (0 when not known), and its share of process_ns().
    uint64_t before_start_ns() const { return at_start ? at_start->user_ns + at_start->system_ns : 0; }
    // sampled_ns / (process_ns - before_start_ns): what the samples explain of the time they could see.
    std::optional<double> ratio_while_sampling() const;
    // The share of the machine's busy CPU time the hypervisor gave to other guests (steal) between
    // the start and stop figures; nullopt when either lacks the host's times. The clock events count
    // stolen time as the running thread's and the process's CPU time does not, so on a machine with
    // steal the samples can explain more than 100 % of the process's CPU time.
    std::optional<double> host_steal_share() const;
    // The kind's share of the sampled CPU time (0 when nothing was sampled).
    double share(ThreadKind kind) const;
};

// The share of the machine's busy CPU time the hypervisor gave to other guests (steal) between two
// ProcessCpu figures; nullopt when either lacks the host's times.
std::optional<double> host_steal_share(const ProcessCpu& start, const ProcessCpu& stop);

// Feed every event of the stream in order. A sample weighs the sample_period_ns of the last VmInfo
// before it (as the profile weighs it); threads by the kind their ThreadInfo gave (Java threads
// from JVMTI, the VM's own from their names); a sample of a thread no ThreadInfo named is "other". Cheap enough for the
// agent's reader thread: one hash lookup per sample.
class CoverageTally {
public:
    void observe(const Event& event);
    const Coverage& coverage() const { return coverage_; }

private:
    Coverage coverage_;
    uint64_t period_ns_ = 0;
    std::unordered_map<uint32_t, ThreadKind> kinds_;
};

// "coverage 93.2% of the process's CPU time: samples 1234.5 ms of 1324.6 ms (user 1200.1 ms,
// sys 124.5 ms); before sampling began 61.0 ms (4.6%), samples 97.7% of the rest; lost in full
// rings 12 samples (12.0 ms, 0.9%); the hypervisor took 4.1% of the machine's busy CPU time
// (steal), ...; threads: java 90.1%, gc 5.2%, compiler 4.0%, vm 0.2%, other 0.5%; in the kernel 9.4%"
// — or, without a
// ProcessCpu event, the samples' time and why there is no ratio.
std::string coverage_text(const Coverage& coverage);

}  // namespace sf::profile
