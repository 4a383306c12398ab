// The timer sampler as the signal backend, without a JVM: the handler's stack copy never reads
// past the thread's stack or into an unreadable page; kUseSample threads yield plain Sample
// events (no AsyncGetCallTrace), a thread with both uses yields an Oracle and a Sample of the
// same snapshot, and ticks dropped on a full buffer come back as Lost.
#include <catch2/catch.hpp>

#include <pthread.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <vector>

#include "agent_test_threads.hpp"
#include "oracle.hpp"

using namespace sf;
using namespace sf::agent;

namespace {

constexpr size_t kPage = 4096;

// Pages [0, readable) of a fresh mapping are filled with a pattern; page `readable` is PROT_NONE.
struct GuardedPages {
    explicit GuardedPages(size_t readable) : size((readable + 1) * kPage) {
        void* mapped = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        REQUIRE(mapped != MAP_FAILED);
        base = static_cast<uint8_t*>(mapped);
        for (size_t i = 0; i < readable * kPage; ++i) base[i] = static_cast<uint8_t>(i * 7 + 3);
        REQUIRE(mprotect(base + readable * kPage, kPage, PROT_NONE) == 0);
    }
    ~GuardedPages() { munmap(base, size); }
    uint64_t at(size_t offset) const { return reinterpret_cast<uint64_t>(base + offset); }

    size_t size;
    uint8_t* base = nullptr;
};

int g_asgct_calls = 0;
void counting_asgct(AsgctTrace* trace, jint, void*) {
    ++g_asgct_calls;
    trace->frames[0] = AsgctFrame{3, reinterpret_cast<jmethodID>(0x3000)};
    trace->num_frames = 1;
}

// A thread with a small stack (64 KB) that registers itself and spins until told to stop.
struct SmallStackThread {
    SmallStackThread(OracleSampler& sampler, uint8_t uses) : sampler(sampler), uses(uses) {
        pthread_attr_t attr;
        pthread_attr_init(&attr);
        pthread_attr_setstacksize(&attr, 64 * 1024);
        REQUIRE(pthread_create(&thread, &attr, &SmallStackThread::main, this) == 0);
        pthread_attr_destroy(&attr);
        while (!running.load()) sched_yield();
    }
    static void* main(void* self_pointer) {
        auto* self = static_cast<SmallStackThread*>(self_pointer);
        self->tid.store(static_cast<pid_t>(syscall(SYS_gettid)));
        pthread_attr_t attr;
        pthread_getattr_np(pthread_self(), &attr);
        void* low = nullptr;
        size_t size = 0;
        pthread_attr_getstack(&attr, &low, &size);
        pthread_attr_destroy(&attr);
        self->stack_top.store(reinterpret_cast<uint64_t>(low) + size);
        self->stack_size.store(size);
        self->added.store(self->sampler.add_current_thread(nullptr, self->uses).ok());
        const uint64_t begin = test::thread_cpu_ns();
        self->running.store(true);
        volatile uint64_t x = 1;
        while (!self->stop.load(std::memory_order_relaxed) && test::thread_cpu_ns() - begin < 5'000'000'000u) {
            x = x * 6364136223846793005ULL + 1;
        }
        self->cpu_ns.store(test::thread_cpu_ns() - begin);
        return nullptr;
    }
    // Spins until it has used `ms` of CPU (at most 20 s of waiting), then stops and joins.
    uint64_t run_for_cpu_ms(uint64_t ms) {
        clockid_t clock{};
        pthread_getcpuclockid(thread, &clock);
        for (int waited = 0; waited < 2000; ++waited) {
            if (clock_ns(clock) >= ms * 1'000'000u) break;
            usleep(10'000);
        }
        sampler.remove_thread(tid.load());
        stop.store(true);
        pthread_join(thread, nullptr);
        return cpu_ns.load();
    }

    OracleSampler& sampler;
    const uint8_t uses;
    pthread_t thread{};
    std::atomic<pid_t> tid{0};
    std::atomic<uint64_t> stack_top{0};
    std::atomic<uint64_t> stack_size{0};   // what the thread got: TSan enlarges small stacks to fit its TLS
    std::atomic<bool> added{false};
    std::atomic<bool> running{false};
    std::atomic<bool> stop{false};
    std::atomic<uint64_t> cpu_ns{0};
};

}  // namespace

TEST_CASE("the stack copy stops at the known stack top") {
    std::vector<uint8_t> stack(8 * kPage);
    for (size_t i = 0; i < stack.size(); ++i) stack[i] = static_cast<uint8_t>(i);
    const StackRange range{reinterpret_cast<uint64_t>(stack.data()), reinterpret_cast<uint64_t>(stack.data() + stack.size())};
    std::vector<uint8_t> out(65528, 0xee);

    // 100 bytes below the top: those 100, however many were asked for.
    CHECK(copy_stack_fragment(range.top - 100, range, out.data(), out.size()) == 100);
    CHECK(std::memcmp(out.data(), stack.data() + stack.size() - 100, 100) == 0);
    CHECK(out[100] == 0xee);
    // Deeper in the stack: exactly what was asked for.
    CHECK(copy_stack_fragment(range.bottom + 64, range, out.data(), 1000) == 1000);
    CHECK(std::memcmp(out.data(), stack.data() + 64, 1000) == 0);
}

TEST_CASE("without known bounds the copy stops at the first unreadable page and never faults") {
    GuardedPages pages(2);
    std::vector<uint8_t> out(65528);
    // Across a page boundary up to the PROT_NONE page.
    CHECK(copy_stack_fragment(pages.at(100), StackRange{}, out.data(), out.size()) == 2 * kPage - 100);
    CHECK(std::memcmp(out.data(), pages.base + 100, 2 * kPage - 100) == 0);
    // 8 bytes below the unreadable page.
    CHECK(copy_stack_fragment(pages.at(2 * kPage - 8), StackRange{}, out.data(), out.size()) == 8);
    // sp on the unreadable page itself, or in no mapping at all, or null: nothing.
    CHECK(copy_stack_fragment(pages.at(2 * kPage), StackRange{}, out.data(), out.size()) == 0);
    CHECK(copy_stack_fragment(0, StackRange{}, out.data(), out.size()) == 0);
    CHECK(copy_stack_fragment(UINT64_MAX - 16, StackRange{}, out.data(), out.size()) == 0);
    // sp outside the known range (an alternate stack): the guarded copy, not the range's memcpy.
    const StackRange elsewhere{pages.at(0) + 64 * kPage, pages.at(0) + 80 * kPage};
    CHECK(copy_stack_fragment(pages.at(kPage), elsewhere, out.data(), out.size()) == kPage);
}

TEST_CASE("signal-backend threads give Sample events bounded by a small stack, without AsyncGetCallTrace") {
    OracleSettings settings;
    settings.interval_ns = 1'000'000;
    settings.stack_bytes = 65528;   // more than the 64 KB thread has above sp
    settings.asgct = &counting_asgct;
    Result<std::unique_ptr<OracleSampler>> created = OracleSampler::create(settings);
    REQUIRE(created.ok());
    OracleSampler& sampler = **created;
    g_asgct_calls = 0;

    SmallStackThread thread(sampler, kUseSample);
    REQUIRE(thread.added);
    const uint64_t cpu_ns = thread.run_for_cpu_ms(300);
    std::vector<Event> events;
    sampler.drain(events);

    INFO(events.size() << " samples for " << cpu_ns / 1e6 << " ms of CPU");
    CHECK(events.size() >= cpu_ns / 20'000'000);
    CHECK(g_asgct_calls == 0);
    for (const Event& event : events) {
        REQUIRE(std::holds_alternative<Sample>(event));
        const Sample& sample = std::get<Sample>(event);
        CHECK(sample.source == SampleSource::kSignal);
        CHECK(sample.tid == static_cast<uint32_t>(thread.tid.load()));
        CHECK(sample.stack_sp == sample.regs.sp);
        REQUIRE(sample.regs.sp < thread.stack_top.load());
        const uint64_t above_sp = thread.stack_top.load() - sample.regs.sp;
        CHECK(sample.stack.size() == std::min<uint64_t>(above_sp, settings.stack_bytes));
        if (thread.stack_size.load() <= 64 * 1024) CHECK(sample.stack.size() < 64 * 1024);
    }
    CHECK(sampler.stats().dropped == 0);
}

TEST_CASE("a thread with both uses gives an Oracle and a Sample of the same snapshot; drops come back as Lost") {
    OracleSettings settings;
    settings.interval_ns = 1'000'000;
    settings.stack_bytes = 4096;
    settings.buffer_entries = 8;   // fills up long before the drain: drops
    settings.asgct = &counting_asgct;
    Result<std::unique_ptr<OracleSampler>> created = OracleSampler::create(settings);
    REQUIRE(created.ok());
    OracleSampler& sampler = **created;
    g_asgct_calls = 0;

    JNIEnv* fake_env = reinterpret_cast<JNIEnv*>(0x42);
    std::atomic<bool> added{false};
    // Validate's timer first, then the signal backend's use joins it (one timer, one snapshot).
    test::SpinningThread spinner([&] {
        added = sampler.add_current_thread(fake_env, kUseOracle).ok() &&
                sampler.add_thread(static_cast<pid_t>(syscall(SYS_gettid)), kUseSample).ok();
    });
    REQUIRE(added);
    spinner.wait_for_cpu_ms(300);
    sampler.remove_thread(spinner.tid());
    spinner.stop();

    std::vector<Event> events;
    sampler.drain(events);
    CHECK(sampler.stats().threads == 1);
    REQUIRE(sampler.stats().dropped > 0);
    // 8 ticks, each an Oracle then a Sample, then one Lost for the dropped ticks.
    REQUIRE(events.size() == 17);
    for (size_t i = 0; i < 16; i += 2) {
        REQUIRE(std::holds_alternative<Oracle>(events[i]));
        REQUIRE(std::holds_alternative<Sample>(events[i + 1]));
        const Oracle& oracle = std::get<Oracle>(events[i]);
        CHECK(oracle.sample == std::get<Sample>(events[i + 1]));
        CHECK(oracle.agct_status == 1);
        CHECK(oracle.frames == std::vector<MethodBci>{{0x3000, 3}});
    }
    CHECK(g_asgct_calls == 8);
    REQUIRE(std::holds_alternative<Lost>(events[16]));
    CHECK(std::get<Lost>(events[16]).count == sampler.stats().dropped);
    CHECK(std::get<Lost>(events[16]).tid == 0);

    // Nothing new: no further Lost.
    events.clear();
    sampler.drain(events);
    CHECK(events.empty());
}
