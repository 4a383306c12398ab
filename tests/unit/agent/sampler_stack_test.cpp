// stack=auto's reader side: request_stack reopens a thread's perf event with another fragment size
// while it runs; the samples already taken are read, the stream stays in time order.
#include <catch2/catch.hpp>

#include <pthread.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "agent_test_threads.hpp"
#include "stackfrag/base/clock.hpp"
#include "oracle.hpp"
#include "sampler.hpp"
#include "recording_sampler.hpp"
#include "test_recording.hpp"
#include "stackfrag/events/recording.hpp"
#include "stackfrag/kernel/proc_maps.hpp"

using namespace sf;
using namespace sf::agent;
using sf::test::RecordingSampler;

namespace {

// A thread that spins 96 KB deep in its stack, so that every fragment up to 65528 bytes is full.
class DeepSpinner {
public:
    explicit DeepSpinner(Sampler& sampler, uint32_t fixed_stack_bytes = 0, uint32_t start_stack_bytes = 0)
        : thread_(96, [this, &sampler, fixed_stack_bytes, start_stack_bytes] {
              added_.store(
                  sampler.add_thread(static_cast<pid_t>(syscall(SYS_gettid)), fixed_stack_bytes, start_stack_bytes).ok());
          }) {}
    pid_t tid() const { return thread_.tid(); }
    bool added() const { return added_.load(); }
    void stop() { thread_.stop(); }
    void wait_for_cpu_ms(uint64_t ms) { thread_.wait_for_cpu_ms(ms); }
    uint64_t cpu_ns() { return thread_.cpu_ns(); }

private:
    std::atomic<bool> added_{false};
    test::DeepSpinningThread thread_;   // last: it runs the lambda above on start
};

// Ends the spinner's sampling and the sampler: the spinner's CPU time before the end and when its
// event had closed.
std::pair<uint64_t, uint64_t> end_and_stop(Sampler& sampler, DeepSpinner& spinner) {
    const uint64_t cpu_ns = spinner.cpu_ns();
    sampler.end_thread(spinner.tid());
    for (int waited = 0; waited < 200 && sampler.stats().threads_closed == 0; ++waited) {
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    const uint64_t cpu_at_close = spinner.cpu_ns();
    spinner.stop();
    REQUIRE(sampler.stop(3000));
    return {cpu_ns, cpu_at_close};
}

void wait_for_reopens(const Sampler& sampler, uint64_t n) {
    for (int waited = 0; waited < 500 && sampler.stats().stack_reopens < n; ++waited) {
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
}

}  // namespace

TEST_CASE("request_stack reopens a running thread's event with another fragment size, in order, losing nothing") {
    RecordingSampler recorded("stack");
    const std::string& path = recorded.path;
    Sampler& sampler = *recorded.sampler;
    DeepSpinner spinner(sampler);
    REQUIRE(spinner.added());
    const pid_t tid = spinner.tid();

    spinner.wait_for_cpu_ms(100);
    sampler.request_stack(tid, 65528);
    wait_for_reopens(sampler, 1);
    REQUIRE(sampler.stats().stack_reopens == 1);
    spinner.wait_for_cpu_ms(100);
    sampler.request_stack(tid, 16384);
    wait_for_reopens(sampler, 2);
    REQUIRE(sampler.stats().stack_reopens == 2);
    sampler.request_stack(tid, 16384);   // no change: nothing reopened
    spinner.wait_for_cpu_ms(100);
    const auto [cpu_ns, cpu_at_close] = end_and_stop(sampler, spinner);
    CHECK(sampler.stats().stack_reopens == 2);

    // The fragment sizes in stream order: 16384..., 65416..., 16384...
    Result<std::unique_ptr<RecordingReader>> reader = RecordingReader::open(path);
    REQUIRE(reader.ok());
    std::vector<size_t> phases;   // the distinct sizes, one entry per run of equal sizes
    uint64_t samples = 0, lost = 0, last_time = 0;
    bool ordered = true;
    while (std::optional<Event> event = (*reader)->next()) {
        if (time_of(*event) < last_time) ordered = false;
        last_time = std::max(last_time, time_of(*event));
        if (const auto* sample = std::get_if<Sample>(&*event); sample && sample->tid == static_cast<uint32_t>(tid)) {
            ++samples;
            if (phases.empty() || phases.back() != sample->stack.size()) phases.push_back(sample->stack.size());
        } else if (const auto* l = std::get_if<Lost>(&*event)) {
            lost += l->count;
        }
    }
    CHECK(ordered);
    CHECK(lost == 0);
    // A record's size is 16 bits: asked for 65528 bytes, perf copies 65416 with our registers.
    CHECK(phases == std::vector<size_t>{16384, 65416, 16384});
    // Every period of CPU time gave a sample (the reopened event restarts its period: at most one
    // partial period per reopen goes unsampled).
    const double expected = static_cast<double>(cpu_ns) / 1e6;
    INFO("samples " << samples << ", CPU " << expected << " ms, " << static_cast<double>(cpu_at_close) / 1e6
                    << " ms at the close");
    CHECK(samples >= 0.8 * expected - 5);
    CHECK(samples <= 1.1 * static_cast<double>(cpu_at_close) / 1e6 + 10);
    std::remove(path.c_str());
}

TEST_CASE("a thread added with a larger start size is sampled with it from its first sample, without a reopen") {
    // stack=auto's deep families and the VM's starting thread: opened large, not opened small and
    // reopened at once; request_stack changes it later like any other thread's.
    RecordingSampler recorded("start");
    const std::string& path = recorded.path;
    Sampler& sampler = *recorded.sampler;
    DeepSpinner spinner(sampler, 0, 65528);
    REQUIRE(spinner.added());
    const pid_t tid = spinner.tid();
    spinner.wait_for_cpu_ms(100);
    sampler.request_stack(tid, 65528);   // the size it has: nothing reopened
    spinner.wait_for_cpu_ms(50);
    CHECK(sampler.stats().stack_reopens == 0);
    sampler.request_stack(tid, 16384);
    wait_for_reopens(sampler, 1);
    REQUIRE(sampler.stats().stack_reopens == 1);
    spinner.wait_for_cpu_ms(100);
    end_and_stop(sampler, spinner);

    Result<std::unique_ptr<RecordingReader>> reader = RecordingReader::open(path);
    REQUIRE(reader.ok());
    std::vector<size_t> phases;
    uint64_t lost = 0;
    while (std::optional<Event> event = (*reader)->next()) {
        if (const auto* sample = std::get_if<Sample>(&*event); sample && sample->tid == static_cast<uint32_t>(tid)) {
            if (phases.empty() || phases.back() != sample->stack.size()) phases.push_back(sample->stack.size());
        } else if (const auto* l = std::get_if<Lost>(&*event)) {
            lost += l->count;
        }
    }
    CHECK(lost == 0);
    CHECK(phases == std::vector<size_t>{65416, 16384});
    std::remove(path.c_str());
}

TEST_CASE("a thread added with a fixed fragment size is sampled with that size, which request_stack leaves alone") {
    // 8 bytes, every period, for good.
    RecordingSampler recorded("fixed");
    const std::string& path = recorded.path;
    Sampler& sampler = *recorded.sampler;
    DeepSpinner spinner(sampler, 8);
    REQUIRE(spinner.added());
    const pid_t tid = spinner.tid();
    spinner.wait_for_cpu_ms(50);
    sampler.request_stack(tid, 65528);
    spinner.wait_for_cpu_ms(150);
    const auto [cpu_ns, cpu_at_close] = end_and_stop(sampler, spinner);
    CHECK(sampler.stats().stack_reopens == 0);

    Result<std::unique_ptr<RecordingReader>> reader = RecordingReader::open(path);
    REQUIRE(reader.ok());
    uint64_t samples = 0, lost = 0, other_sizes = 0;
    while (std::optional<Event> event = (*reader)->next()) {
        if (const auto* sample = std::get_if<Sample>(&*event); sample && sample->tid == static_cast<uint32_t>(tid)) {
            ++samples;
            if (sample->stack.size() != 8) ++other_sizes;
            CHECK(sample->regs.ip != 0);
        } else if (const auto* l = std::get_if<Lost>(&*event)) {
            lost += l->count;
        }
    }
    CHECK(other_sizes == 0);
    CHECK(lost == 0);
    const double expected = static_cast<double>(cpu_ns) / 1e6;
    INFO("samples " << samples << ", CPU " << expected << " ms");
    CHECK(samples >= 0.8 * expected - 5);
    CHECK(samples <= 1.1 * static_cast<double>(cpu_at_close) / 1e6 + 10);
    std::remove(path.c_str());
}

// A sampler at 100 us with the ring the agent configures there (512 pages, ~127 samples of 16 KB:
// 12.7 ms), never started: add_thread maps each ring on the calling thread, and the rings' mapped
// memory tells its size.
struct HighRateSampler {
    explicit HighRateSampler(const std::string& name)
        : path("/tmp/sf-agent-sampler-" + name + "-" + std::to_string(getpid()) + ".sfr"),
          writer(test::new_recording(path)), sampler(config(), queue, writer, nullptr) {}
    ~HighRateSampler() { std::remove(path.c_str()); }
    static kernel::SamplingConfig config() {
        kernel::SamplingConfig c;
        c.period_ns = 100'000;
        c.ring_pages = 512;
        return c;
    }
    // The data pages of the ring that add_thread(self, ...) maps.
    uint64_t ring_pages_of_open(uint32_t fixed_stack_bytes, uint32_t start_stack_bytes, bool started_vm) {
        const kernel::RingMemory before = kernel::ring_memory();
        REQUIRE(sampler.add_thread(static_cast<pid_t>(syscall(SYS_gettid)), fixed_stack_bytes, start_stack_bytes, started_vm)
                    .ok());
        const kernel::RingMemory after = kernel::ring_memory();
        REQUIRE(after.rings == before.rings + 1);
        return (after.bytes - before.bytes) / page - 1;   // less the header page
    }
    const uint64_t page = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
    std::string path;
    EventQueue queue;
    StreamWriter writer;
    Sampler sampler;
};

TEST_CASE("a fixed-fragment ring holds at least 100 ms of its thread's samples, which the reader's own ring fills during "
          "a long cycle") {
    // A ring scaled down from the configured one to 8-byte fragments was 4 pages (~136 samples,
    // 13.6 ms), and the reader lost its own samples in a 13 ms cycle at the JVM's start.
    HighRateSampler high("fixedring");
    const uint64_t pages = high.ring_pages_of_open(8, 0, false);
    INFO("ring of " << pages << " pages");
    CHECK(pages * high.page >= 1000 * kernel::sample_record_bytes(8));
    // Still small beside the configured ring (2 MB): 100 ms of 120-byte records.
    CHECK(pages * high.page <= 256 * 1024);
    REQUIRE(high.sampler.stop(3000));
}

TEST_CASE("the thread that created the VM starts large with a ring holding the configured ring's time; other threads "
          "that start large stop at 1024 pages") {
    // A 1024-page ring of 64 KB fragments holds 63 samples, 6.3 ms at 100 us, less than the reader's
    // longest cycles at the JVM's start, during which the main thread lost samples.
    HighRateSampler high("vmring");
    const uint64_t vm_pages = high.ring_pages_of_open(0, 65528, true);
    const uint64_t other_pages = high.ring_pages_of_open(0, 65528, false);
    CHECK(vm_pages == 2048);
    CHECK(other_pages == 1024);
    // The VM's thread's ring holds as many samples as the configured one, give or take one.
    CHECK(vm_pages * high.page / kernel::sample_record_bytes(65528) + 1 >=
          512 * high.page / kernel::sample_record_bytes(16384));
    REQUIRE(high.sampler.stop(3000));
}

TEST_CASE("with the validate oracle, a thread's oracle copies follow the fragment size request_stack gives its perf event") {
    OracleSettings settings;
    settings.interval_ns = 1'000'000;
    settings.stack_bytes = 16384;
    settings.large_stack_bytes = 65416;
    settings.large_entries = 64;
    Result<std::unique_ptr<OracleSampler>> created = OracleSampler::create(settings);
    REQUIRE(created.ok());
    OracleSampler& oracle = **created;   // outlives the sampler
    std::string path;
    pid_t tid = 0;
    {
        RecordingSampler recorded("oracle", &oracle);
        path = recorded.path;
        Sampler& sampler = *recorded.sampler;
        DeepSpinner spinner(sampler);
        REQUIRE(spinner.added());
        tid = spinner.tid();
        // From outside: no known bounds, copied up to the first unreadable page (96 KB are there).
        REQUIRE(oracle.add_thread(tid).ok());
        spinner.wait_for_cpu_ms(100);
        sampler.request_stack(tid, 65528);
        wait_for_reopens(sampler, 1);
        spinner.wait_for_cpu_ms(100);
        sampler.request_stack(tid, 16384);
        wait_for_reopens(sampler, 2);
        REQUIRE(sampler.stats().stack_reopens == 2);
        spinner.wait_for_cpu_ms(100);
        oracle.remove_thread(tid);
        end_and_stop(sampler, spinner);
    }
    CHECK(oracle.stats().cut == 0);

    // Perf's and the oracle's fragment sizes in stream order, one entry per run of equal sizes.
    Result<std::unique_ptr<RecordingReader>> reader = RecordingReader::open(path);
    REQUIRE(reader.ok());
    std::vector<size_t> perf_phases, oracle_phases;
    auto note = [](std::vector<size_t>& phases, size_t size) {
        if (phases.empty() || phases.back() != size) phases.push_back(size);
    };
    while (std::optional<Event> event = (*reader)->next()) {
        if (const auto* sample = std::get_if<Sample>(&*event); sample && sample->tid == static_cast<uint32_t>(tid)) {
            note(perf_phases, sample->stack.size());
        } else if (const auto* o = std::get_if<Oracle>(&*event); o && o->sample.tid == static_cast<uint32_t>(tid)) {
            note(oracle_phases, o->sample.stack.size());
        }
    }
    CHECK(perf_phases == std::vector<size_t>{16384, 65416, 16384});
    // As much as perf copies, switched when the perf event was reopened.
    CHECK(oracle_phases == std::vector<size_t>{16384, 65416, 16384});
    std::remove(path.c_str());
}

namespace {

// A thread whose stack is the lower half of one readable mapping, so that the kernel's copy runs
// on past the stack's top into the upper half (as it runs into a neighbouring thread's stack where
// the kernel merged the two mappings); it registers itself (and so its stack top) or is
// registered by the test's thread; or, with `tops`, it only puts its top there (per-CPU events
// sample it).
class StackInMapping {
public:
    static constexpr size_t kStack = 512 * 1024;
    StackInMapping(Sampler& sampler, bool registers_itself, StackTops* tops = nullptr)
        : sampler_(sampler), itself_(registers_itself), tops_(tops) {
        block_ = mmap(nullptr, 2 * kStack, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        REQUIRE(block_ != MAP_FAILED);
        // Touched: the kernel copies from interrupt context and stops at a page not present.
        std::memset(block_, 0x5a, 2 * kStack);
        pthread_attr_t attr;
        pthread_attr_init(&attr);
        pthread_attr_setstack(&attr, block_, kStack);
        REQUIRE(pthread_create(&thread_, &attr, &StackInMapping::main, this) == 0);
        pthread_attr_destroy(&attr);
        while (tid_.load() == 0) std::this_thread::yield();
        if (!itself_ && tops_ == nullptr) added_.store(sampler_.add_thread(tid_.load()).ok());
    }
    ~StackInMapping() {
        stop();
        munmap(block_, 2 * kStack);
    }
    void stop() {
        if (stopped_) return;
        stop_.store(true);
        pthread_join(thread_, nullptr);
        stopped_ = true;
    }
    pid_t tid() const { return tid_.load(); }
    bool added() const { return added_.load(); }
    uint64_t top() const { return top_.load(); }
    uint64_t cpu_ns() {
        clockid_t clock{};
        return pthread_getcpuclockid(thread_, &clock) == 0 ? clock_ns(clock) : 0;
    }
    void wait_for_cpu_ms(uint64_t ms) {
        const uint64_t until = cpu_ns() + ms * 1'000'000u;
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
        while (cpu_ns() < until && std::chrono::steady_clock::now() < deadline) {
            std::this_thread::sleep_for(std::chrono::milliseconds(5));
        }
    }

private:
    static void* main(void* self) {
        auto* me = static_cast<StackInMapping*>(self);
        me->top_.store(kernel::current_thread_stack_top());
        const pid_t tid = static_cast<pid_t>(syscall(SYS_gettid));
        if (me->tops_ != nullptr) {
            if (me->itself_) me->tops_->remember(static_cast<uint32_t>(tid), me->top_.load(), monotonic_ns());
            me->added_.store(true);
        } else if (me->itself_) {
            me->added_.store(me->sampler_.add_thread(tid).ok());
        }
        me->tid_.store(tid);
        volatile uint64_t x = 1;
        while (!me->stop_.load(std::memory_order_relaxed)) x = x * 6364136223846793005ULL + 1;
        return nullptr;
    }
    Sampler& sampler_;
    const bool itself_;
    StackTops* const tops_;
    void* block_ = nullptr;
    pthread_t thread_{};
    bool stopped_ = false;
    std::atomic<pid_t> tid_{0};
    std::atomic<bool> added_{false};
    std::atomic<bool> stop_{false};
    std::atomic<uint64_t> top_{0};
};

// The fragments of `tid`'s samples in the recording at `path`: (sp, size) each.
std::vector<std::pair<uint64_t, size_t>> fragments_of(const std::string& path, pid_t tid) {
    Result<std::unique_ptr<RecordingReader>> reader = RecordingReader::open(path);
    REQUIRE(reader.ok());
    std::vector<std::pair<uint64_t, size_t>> fragments;
    while (std::optional<Event> event = (*reader)->next()) {
        if (const auto* sample = std::get_if<Sample>(&*event); sample && sample->tid == static_cast<uint32_t>(tid)) {
            fragments.emplace_back(sample->stack_sp, sample->stack.size());
        }
    }
    return fragments;
}

// A thread that knew its top (`own`'s fragments) stores only its stack, of which it uses a few KB;
// one whose top is not known (`others`) the kernel's whole 16 KB copy, past the top.
void check_cut_at_top(uint64_t top, const std::vector<std::pair<uint64_t, size_t>>& own,
                      const std::vector<std::pair<uint64_t, size_t>>& others) {
    REQUIRE(top != 0);
    REQUIRE(own.size() >= 10);
    REQUIRE(others.size() >= 10);
    for (const auto& [sp, size] : own) {
        INFO("sp " << sp << ", top " << top << ", fragment " << size);
        CHECK(sp < top);
        CHECK(sp + size == top);
        CHECK(size < 16384);
    }
    for (const auto& [sp, size] : others) CHECK(size == 16384);
}

}  // namespace

TEST_CASE("a thread that registers itself has its fragments end at its stack's top, a recording stores them so") {
    uint64_t top = 0;
    std::vector<std::pair<uint64_t, size_t>> own, others;
    for (const bool itself : {true, false}) {
        RecordingSampler recorded(itself ? "top-own" : "top-other");
        StackInMapping thread(*recorded.sampler, itself);
        REQUIRE(thread.added());
        thread.wait_for_cpu_ms(60);
        recorded.sampler->end_thread(thread.tid());
        thread.stop();
        REQUIRE(recorded.sampler->stop(3000));
        (itself ? own : others) = fragments_of(recorded.path, thread.tid());
        if (itself) top = thread.top();
        std::remove(recorded.path.c_str());
    }
    // Registered by another thread (the JVM's own threads, found by the thread watcher) its top is
    // not known: the kernel's whole copy, past the top.
    check_cut_at_top(top, own, others);
}

TEST_CASE("per-CPU events cut a thread's fragments at the stack top it registered, and leave the others whole") {
    // mode=cpu: one ring per CPU holds every thread's samples; the reader finds each sampled
    // thread's top among those registered (Java threads at their start).
    uint64_t top = 0;
    std::vector<std::pair<uint64_t, size_t>> own, others;
    for (const bool itself : {true, false}) {
        const std::string path = "/tmp/sf-agent-sampler-cpu-top-" + std::to_string(itself) + "-" + std::to_string(getpid()) + ".sfr";
        EventQueue queue;
        StreamWriter writer(test::new_recording(path));
        StackTops tops;
        kernel::SamplingConfig config;
        config.period_ns = 1'000'000;
        Sampler sampler(config, queue, writer, nullptr);
        sampler.set_stack_tops(&tops);
        REQUIRE(sampler.add_cpus(static_cast<pid_t>(syscall(SYS_gettid))).ok());
        REQUIRE(sampler.start().ok());
        StackInMapping thread(sampler, itself, &tops);
        REQUIRE(thread.added());
        thread.wait_for_cpu_ms(60);
        thread.stop();
        REQUIRE(sampler.stop(3000));
        (itself ? own : others) = fragments_of(path, thread.tid());
        if (itself) top = thread.top();
        std::remove(path.c_str());
    }
    check_cut_at_top(top, own, others);
}
