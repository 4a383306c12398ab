// Coverage from the event stream: samples' CPU time (count x period) against the process's CPU time
// of the ProcessCpu event, split by thread kind.
#include <catch2/catch.hpp>

#include "stackfrag/profile/coverage.hpp"

using namespace sf;
using namespace sf::profile;

namespace {

Sample on_cpu(uint32_t tid, SampleSource source = SampleSource::kPerf) {
    Sample s;
    s.tid = tid;
    s.source = source;
    return s;
}

}  // namespace

TEST_CASE("coverage: samples x period over user + sys, shares by thread kind", "[coverage]") {
    CoverageTally tally;
    VmInfo vm;
    vm.sample_period_ns = 1'000'000;
    tally.observe(vm);
    tally.observe(ThreadInfo{0, 10, false, "main"});
    tally.observe(ThreadInfo{0, 11, false, "GC Thread#0", ThreadKind::kGc});
    tally.observe(ThreadInfo{0, 12, false, "C2 CompilerThread0", ThreadKind::kCompiler});
    tally.observe(ThreadInfo{0, 13, false, "VM Thread", ThreadKind::kVm});
    for (int i = 0; i < 6; ++i) tally.observe(on_cpu(10));
    tally.observe(on_cpu(11));
    tally.observe(on_cpu(11, SampleSource::kSignal));
    tally.observe(on_cpu(12));
    tally.observe(on_cpu(13, SampleSource::kPerfKernel));   // a tick in a syscall
    tally.observe(on_cpu(99));                               // no ThreadInfo: other
    tally.observe(on_cpu(10, SampleSource::kPerfSwitch));   // a blocking, not CPU time
    Oracle oracle;
    oracle.sample = on_cpu(10);
    tally.observe(oracle);                                   // the validator's sample
    vm.sample_period_ns = 2'000'000;                         // interval=auto changed the period
    tally.observe(vm);
    tally.observe(on_cpu(10));

    Coverage c = tally.coverage();
    CHECK(c.samples == 12);
    CHECK(c.kernel_samples == 1);
    CHECK(c.sampled_ns == 13'000'000);
    CHECK(c.samples_by_kind[size_t(ThreadKind::kJava)] == 7);
    CHECK(c.sampled_ns_by_kind[size_t(ThreadKind::kJava)] == 8'000'000);
    CHECK(c.samples_by_kind[size_t(ThreadKind::kGc)] == 2);
    CHECK(c.samples_by_kind[size_t(ThreadKind::kCompiler)] == 1);
    CHECK(c.samples_by_kind[size_t(ThreadKind::kOther)] == 1);
    CHECK(c.samples_by_kind[size_t(ThreadKind::kVm)] == 1);
    CHECK(c.share(ThreadKind::kGc) == Approx(2.0 / 13));
    CHECK(!c.ratio());
    CHECK(coverage_text(c).starts_with("coverage unknown"));

    tally.observe(ProcessCpu{5, 13'000'000, 3'000'000});
    c = tally.coverage();
    REQUIRE(c.ratio());
    CHECK(*c.ratio() == Approx(13.0 / 16));
    const std::string text = coverage_text(c);
    INFO(text);
    CHECK(text.starts_with("coverage 81.2% of the process's CPU time: samples 13.0 ms of 16.0 ms (user 13.0 ms, sys 3.0 ms)"));
    CHECK(text.find("java 61.5%, gc 15.4%, compiler 7.7%, vm 7.7%, other 7.7%, profiler 0.0%; in the kernel 8.3%") != std::string::npos);
}

TEST_CASE("coverage: the CPU time before sampling began is reported apart, and what the samples explain of the rest",
          "[coverage]") {
    CoverageTally tally;
    VmInfo vm;
    vm.sample_period_ns = 1'000'000;
    tally.observe(vm);
    tally.observe(ProcessCpu{1, 50'000'000, 10'000'000, true});   // the JVM's start: 60 ms before the events opened
    for (int i = 0; i < 900; ++i) tally.observe(on_cpu(10));
    Coverage c = tally.coverage();
    CHECK(!c.ratio());                       // the start figure is no denominator: the stop's is missing
    CHECK(!c.ratio_while_sampling());
    CHECK(coverage_text(c).starts_with("coverage unknown"));

    tally.observe(Lost{3, 10, 15});   // a full ring: 15 ticks counted, not stored
    tally.observe(ProcessCpu{2, 880'000'000, 120'000'000});
    c = tally.coverage();
    CHECK(c.samples == 900);
    CHECK(c.lost_samples == 15);
    CHECK(c.lost_ns == 15'000'000);
    REQUIRE(c.ratio());
    CHECK(*c.ratio() == Approx(0.9));
    CHECK(c.before_start_ns() == 60'000'000);
    REQUIRE(c.ratio_while_sampling());
    CHECK(*c.ratio_while_sampling() == Approx(900.0 / 940));
    const std::string text = coverage_text(c);
    INFO(text);
    CHECK(text.starts_with("coverage 90.0% of the process's CPU time: samples 900.0 ms of 1000.0 ms (user 880.0 ms, "
                           "sys 120.0 ms); before sampling began 60.0 ms (6.0%), samples 95.7% of the rest; lost in full rings "
                           "15 samples (15.0 ms, 1.5%); threads:"));
}

TEST_CASE("coverage: a stream without the start figure says nothing of it", "[coverage]") {
    CoverageTally tally;
    VmInfo vm;
    vm.sample_period_ns = 1'000'000;
    tally.observe(vm);
    tally.observe(on_cpu(10));
    tally.observe(ProcessCpu{2, 1'000'000, 0});
    const Coverage c = tally.coverage();
    CHECK(c.before_start_ns() == 0);
    CHECK(!c.ratio_while_sampling());
    CHECK(coverage_text(c).find("before sampling") == std::string::npos);
    CHECK(coverage_text(c).find("lost") == std::string::npos);
}

TEST_CASE("coverage: the hypervisor's steal while sampling explains samples above the process's CPU time",
          "[coverage]") {
    CoverageTally tally;
    VmInfo vm;
    vm.sample_period_ns = 1'000'000;
    tally.observe(vm);
    ProcessCpu start{1, 10'000'000, 0, true};
    start.host_busy_ns = 50'000'000'000;
    start.host_steal_ns = 1'000'000'000;
    tally.observe(start);
    for (int i = 0; i < 1040; ++i) tally.observe(on_cpu(10));
    ProcessCpu stop{2, 1'000'000'000, 10'000'000};
    stop.host_busy_ns = 52'000'000'000;   // 2 s of busy CPUs while sampling, 80 ms of them stolen
    stop.host_steal_ns = 1'080'000'000;
    tally.observe(stop);
    Coverage c = tally.coverage();
    REQUIRE(c.host_steal_share());
    CHECK(*c.host_steal_share() == Approx(0.04));
    std::string text = coverage_text(c);
    INFO(text);
    CHECK(text.starts_with("coverage 103.0% of the process's CPU time"));
    CHECK(text.find("; the hypervisor took 4.0% of the machine's busy CPU time while sampling (steal), which the "
                    "clock events count as the running thread's") != std::string::npos);

    // No steal, or a start figure without the host's times (an older agent): nothing to say.
    stop.host_steal_ns = start.host_steal_ns;
    tally.observe(stop);
    REQUIRE(tally.coverage().host_steal_share());
    CHECK(*tally.coverage().host_steal_share() == 0.0);
    CHECK(coverage_text(tally.coverage()).find("hypervisor") == std::string::npos);
    start.host_busy_ns = start.host_steal_ns = 0;
    tally.observe(start);
    CHECK(!tally.coverage().host_steal_share());
}
