// stack=auto without a decoder (record= only): a sample counts as having run off its fragment when
// the fragment ends further below the thread's stack top than the entry margin; AutoStack feeds that
// to the same StackController the live decoder feeds, and has the reader reopen the thread's events.
#include <catch2/catch.hpp>

#include <pthread.h>

#include <functional>

#include "auto_stack.hpp"
#include "stackfrag/base/clock.hpp"
#include "stackfrag/kernel/proc_maps.hpp"
#include "sampler.hpp"

using namespace sf;
using namespace sf::agent;

namespace {

// Far below any mapping of this process, so that /proc/self/maps knows none of these addresses.
constexpr uint64_t kTop = 0x100000100000;
constexpr uint32_t kMargin = 8192;

// Taken now: after the thread_started calls before it.
Sample sample_at(uint32_t tid, uint64_t below_top, size_t fragment, SampleSource source = SampleSource::kPerf) {
    Sample sample;
    sample.time_ns = monotonic_ns();
    sample.tid = tid;
    sample.source = source;
    sample.stack_sp = kTop - below_top;
    sample.regs.sp = sample.stack_sp;
    sample.stack.assign(fragment, 0);
    return sample;
}

// A decoded trace as the decoder's verdict on a sample: only its status counts here.
CallTrace trace_with(TraceStatus status) {
    CallTrace trace;
    trace.status = status;
    return trace;
}

// A sampler that never starts: request_stack only queues the request.
// The tests' entry margin; `quiet_samples` 0 keeps the default.
StackControllerSettings with_margin(uint32_t quiet_samples = 0) {
    StackControllerSettings settings;
    settings.entry_margin_bytes = kMargin;
    if (quiet_samples != 0) settings.quiet_samples = quiet_samples;
    return settings;
}

struct Fixture {
    EventQueue queue;
    StreamWriter writer{nullptr};
    Sampler sampler{kernel::SamplingConfig{}, queue, writer, nullptr};
    StackTops tops;
};

// Runs `body` with its stack's top on a new thread with a 1 MB stack, which glibc maps whole: an
// address 100 KB below the top is in the mapping. `body` must not assert (another thread).
void on_thread_with_1mb_stack(const std::function<void(uint64_t top)>& body) {
    pthread_attr_t attr;
    REQUIRE(pthread_attr_init(&attr) == 0);
    REQUIRE(pthread_attr_setstacksize(&attr, 1 << 20) == 0);
    pthread_t thread{};
    auto run = [](void* arg) -> void* {
        (*static_cast<const std::function<void(uint64_t)>*>(arg))(sf::kernel::current_thread_stack_top());
        return nullptr;
    };
    REQUIRE(pthread_create(&thread, &attr, run, const_cast<std::function<void(uint64_t)>*>(&body)) == 0);
    pthread_join(thread, nullptr);
    pthread_attr_destroy(&attr);
}

// A full-looking fragment of `fragment` bytes from `below_top` under `top`, of thread 9.
Sample sample_under(uint64_t top, uint64_t below_top, size_t fragment) {
    Sample sample;
    sample.tid = 9;
    sample.stack_sp = top - below_top;
    sample.stack.assign(fragment, 0);
    return sample;
}

}  // namespace

TEST_CASE("a fragment ending further below the stack top than the entry margin cannot reach the outermost frame",
          "[agent][stack]") {
    // 16384 bytes from sp: ends 100 bytes below the top, within the margin.
    CHECK(!fragment_short_of_outermost(kTop - 16484, 16384, kTop, kMargin));
    // Ends exactly the margin below the top: may still reach the entry frame.
    CHECK(!fragment_short_of_outermost(kTop - 16384 - kMargin, 16384, kTop, kMargin));
    CHECK(fragment_short_of_outermost(kTop - 16384 - kMargin - 8, 16384, kTop, kMargin));
    CHECK(fragment_short_of_outermost(kTop - 200'000, 65416, kTop, kMargin));
    // A fragment reaching past the top, an unknown top, an sp above the top: nothing known.
    CHECK(!fragment_short_of_outermost(kTop - 1000, 16384, kTop, kMargin));
    CHECK(!fragment_short_of_outermost(kTop - 200'000, 16384, 0, kMargin));
    CHECK(!fragment_short_of_outermost(kTop + 64, 16384, kTop, kMargin));
    // A fragment the kernel could not copy (kernel-mode tick) is short of everything; the controller
    // ignores it as not full (below).
    CHECK(fragment_short_of_outermost(kTop - 200'000, 0, kTop, kMargin));
}

TEST_CASE("stack=auto with only a recording grows a deep thread's fragment from its samples' position in the stack",
          "[agent][stack]") {
    Fixture f;
    const StackControllerSettings settings = with_margin(10);
    AutoStack autostack(settings, f.sampler, f.tops);
    f.tops.remember(7, kTop, 100);

    // Shallow samples (the fragment reaches within the margin of the top) change nothing.
    for (int i = 0; i < 50; ++i) autostack.on_perf_sample(sample_at(7, 20'000, 16384));
    CHECK(autostack.grown() == 0);
    // Deep samples of a thread whose top is unknown (and no mapping holds its sp), signal samples
    // and uncopied stacks neither.
    for (int i = 0; i < 5; ++i) {
        autostack.on_perf_sample(sample_at(8, 100'000, 16384));
        autostack.on_perf_sample(sample_at(7, 100'000, 16384, SampleSource::kSignal));
        autostack.on_perf_sample(sample_at(7, 100'000, 0, SampleSource::kPerfKernel));
    }
    CHECK(autostack.grown() == 0);

    // One deep sample with a full fragment: the largest fragment at once.
    autostack.on_perf_sample(sample_at(7, 30'000, 16384));
    CHECK(autostack.grown() == 1);
    // Samples from before the reopen (16384-byte fragments) are not counted again.
    for (int i = 0; i < 5; ++i) autostack.on_perf_sample(sample_at(7, 30'000, 16384));
    CHECK(autostack.grown() == 1);
    // 65416 bytes from 30000 below the top reach it: quiet samples, then the shrink trial (the same
    // policy as with a decoder).
    for (int i = 0; i < 10; ++i) autostack.on_perf_sample(sample_at(7, 30'000, 65416));
    CHECK(autostack.shrunk() == 1);
    // The trial's 32760 bytes reach too; a deeper phase grows it back to the size that held.
    for (int i = 0; i < 5; ++i) autostack.on_perf_sample(sample_at(7, 30'000, 32760));
    CHECK(autostack.shrunk() == 1);
    autostack.on_perf_sample(sample_at(7, 60'000, 32760));
    CHECK(autostack.grown() == 2);

    // The thread ends: its top and its state are forgotten; the tid's next thread starts unknown.
    ThreadInfo end;
    end.time_ns = 200;
    end.tid = 7;
    end.ended = true;
    autostack.observe(end);
    autostack.on_perf_sample(sample_at(7, 100'000, 16384));
    CHECK(autostack.grown() == 2);
    f.tops.remember(7, kTop, 300);
    autostack.on_perf_sample(sample_at(7, 100'000, 16384));
    CHECK(autostack.grown() == 3);
    // A thread that reuses the tid and registers before the old one's end reaches the stream keeps
    // its top.
    f.tops.remember(7, kTop, 500);
    end.time_ns = 400;
    autostack.observe(end);
    autostack.on_perf_sample(sample_at(7, 100'000, 16384));
    CHECK(autostack.grown() == 4);
}

TEST_CASE("stack=auto with only a recording finds an unregistered thread's stack top in /proc/self/maps",
          "[agent][stack]") {
    Fixture f;
    AutoStack autostack(StackControllerSettings{}, f.sampler, f.tops);
    uint64_t top = 0, grown_after_shallow = 0, grown = 0;
    on_thread_with_1mb_stack([&](uint64_t thread_top) {
        top = thread_top;
        if (top == 0) return;
        autostack.on_perf_sample(sample_under(top, 8'000, 6'000));   // not full: a shallow stack's copy; not looked up
        grown_after_shallow = autostack.grown();
        autostack.on_perf_sample(sample_under(top, 100'000, 16384));
        grown = autostack.grown();
    });
    REQUIRE(top != 0);
    CHECK(grown_after_shallow == 0);
    CHECK(grown == 1);
}

TEST_CASE("a full fragment may run off only when it ends short of its thread's stack top, looked up once if unknown",
          "[agent][stack]") {
    Fixture f;
    const StackControllerSettings settings = with_margin();
    AutoStack autostack(settings, f.sampler, f.tops);
    // A registered thread: judged by where its fragment ends below the top.
    f.tops.remember(5, kTop, 0);
    CHECK_FALSE(autostack.may_run_off(sample_at(5, 16384 + 100, 16384)));   // the entry frame is in reach
    CHECK(autostack.may_run_off(sample_at(5, 100'000, 16384)));
    // No mapping holds the address and no top was registered: it may (as before this check).
    CHECK(autostack.may_run_off(sample_at(6, 100'000, 16384)));
    // An unregistered thread of this process: its top comes from /proc/self/maps.
    uint64_t top = 0;
    bool near_top = true, far_below = false;
    on_thread_with_1mb_stack([&](uint64_t thread_top) {
        top = thread_top;
        if (top == 0) return;
        far_below = autostack.may_run_off(sample_under(top, 100'000, 16384));
        near_top = autostack.may_run_off(sample_under(top, 16384 + 100, 16384));
    });
    REQUIRE(top != 0);
    CHECK(far_below);
    CHECK_FALSE(near_top);
}

TEST_CASE("stack=auto with a live decoder: the reader's check grows a thread at its first sample that ran off, "
          "the decoder's verdicts steer from there", "[agent][stack]") {
    Fixture f;
    const StackControllerSettings settings = with_margin(10);
    AutoStack autostack(settings, f.sampler, f.tops);
    autostack.set_head_start(true);
    f.tops.remember(7, kTop, 100);
    const CallTrace complete = trace_with(TraceStatus::kComplete);
    const CallTrace incomplete = trace_with(TraceStatus::kIncomplete);

    // Shallow samples and fragments that are not full change nothing; neither do the check's
    // "reached" verdicts count as the decoder's quiet samples.
    for (int i = 0; i < 50; ++i) autostack.on_perf_sample(sample_at(7, 20'000, 16384));
    autostack.on_perf_sample(sample_at(7, 100'000, 8000));
    CHECK(autostack.grown() == 0);
    // The first deep sample with a full fragment grows the thread as the reader reads it, before
    // any decoded trace.
    autostack.on_perf_sample(sample_at(7, 100'000, 16384));
    CHECK(autostack.grown() == 1);
    // The decoder's verdict on that sample (a 16384-byte fragment, before the change) and the
    // reader's on later ones change nothing more.
    autostack.on_trace(Event{sample_at(7, 100'000, 16384)}, incomplete);
    for (int i = 0; i < 5; ++i) autostack.on_perf_sample(sample_at(7, 100'000, 65416));
    CHECK(autostack.grown() == 1);
    // The decoder's complete traces shrink it by trial; the reader does not grow it back while the
    // decoder steers it (a stitched or complete trace needs no more).
    for (int i = 0; i < 10; ++i) autostack.on_trace(Event{sample_at(7, 100'000, 65416)}, complete);
    CHECK(autostack.shrunk() == 1);
    for (int i = 0; i < 5; ++i) autostack.on_perf_sample(sample_at(7, 100'000, 32760));
    CHECK(autostack.grown() == 1);
    autostack.on_trace(Event{sample_at(7, 100'000, 32760)}, incomplete);
    CHECK(autostack.grown() == 2);
}

TEST_CASE("stack=auto grows a deep thread's family with it, and starts the family's new threads grown",
          "[agent][stack]") {
    Fixture f;
    const StackControllerSettings settings = with_margin();
    AutoStack autostack(settings, f.sampler, f.tops);
    for (uint32_t tid : {7u, 8u, 9u, 10u}) f.tops.remember(tid, kTop, 100);
    autostack.thread_started(7, "pool-1-thread-1");
    autostack.thread_started(8, "pool-1-thread-2");
    autostack.thread_started(9, "pool-1-thread-3");
    autostack.thread_started(10, "main");
    CHECK(autostack.grown() == 0);
    // Shallow samples of the family change nothing.
    for (uint32_t tid : {7u, 8u, 9u}) autostack.on_perf_sample(sample_at(tid, 20'000, 16384));
    CHECK(autostack.grown() == 0);
    // One deep sample of thread 8: it and its two siblings grow, thread 10 does not.
    autostack.on_perf_sample(sample_at(8, 100'000, 16384));
    CHECK(autostack.grown() == 3);
    // The siblings' samples from before their reopen change nothing; thread 10 grows on its own.
    autostack.on_perf_sample(sample_at(7, 100'000, 16384));
    CHECK(autostack.grown() == 3);
    autostack.on_perf_sample(sample_at(10, 100'000, 16384));
    CHECK(autostack.grown() == 4);
    // A new thread of the pool starts grown.
    autostack.thread_started(11, "pool-1-thread-4");
    CHECK(autostack.grown() == 5);
    // The thread that started the VM starts grown whatever its name; other threads named so do not.
    autostack.thread_started(12, "main");
    CHECK(autostack.grown() == 5);
    autostack.thread_started(13, "main", true);
    CHECK(autostack.grown() == 6);
    // Grown already: its later deep samples change nothing.
    f.tops.remember(13, kTop, 100);
    autostack.on_perf_sample(sample_at(13, 100'000, 65416));
    CHECK(autostack.grown() == 6);
    // A thread judged before its own events opened (per-CPU samples from the agent's load until
    // VMInit) starts afresh: the VM's starter still gets its larger fragment.
    f.tops.remember(14, kTop, 100);
    autostack.on_perf_sample(sample_at(14, 100'000, 16384));
    CHECK(autostack.grown() == 7);
    autostack.thread_started(14, "main", true);
    CHECK(autostack.grown() == 8);
}

TEST_CASE("stack=auto: the decoder's verdicts on a thread's samples from before its own events opened change nothing",
          "[agent][stack]") {
    // Sampling from the agent's load, the reader holds the per-CPU events' samples until the start
    // scan is done; the decoder judges them after VMInit opened the threads' own events. The VM's
    // starter, complete in its shallow create_vm samples, must not shrink from its larger start.
    Fixture f;
    const StackControllerSettings settings = with_margin(10);
    AutoStack autostack(settings, f.sampler, f.tops);
    f.tops.remember(5, kTop, 100);
    const CallTrace complete = trace_with(TraceStatus::kComplete);
    Sample early = sample_at(5, 20'000, settings.largest_fragment);
    autostack.thread_started(5, "main", true);
    CHECK(autostack.grown() == 1);
    for (int i = 0; i < 50; ++i) autostack.on_trace(Event{early}, complete);
    CHECK(autostack.shrunk() == 0);
    // Its own samples steer it as before.
    for (int i = 0; i < 50; ++i) autostack.on_trace(Event{sample_at(5, 20'000, settings.largest_fragment)}, complete);
    CHECK(autostack.shrunk() >= 1);
}

TEST_CASE("a ring's cached stack top and fragment size follow the thread's changes", "[agent][stack]") {
    // The reader keeps them per ring (SampleWatchCache) instead of asking under two mutexes per sample.
    Fixture f;
    const StackControllerSettings settings = with_margin();
    AutoStack autostack(settings, f.sampler, f.tops);
    autostack.set_head_start(true);
    SampleWatchCache cache;

    // No top known (and no mapping holds the sp): a deep full fragment says nothing.
    autostack.on_perf_sample(sample_at(7, 100'000, 16384), &cache);
    CHECK(autostack.grown() == 0);
    // The top registered since: the cache reads it again, and the deep sample grows the thread.
    f.tops.remember(7, kTop, 100);
    autostack.on_perf_sample(sample_at(7, 100'000, 16384), &cache);
    CHECK(autostack.grown() == 1);
    // Grown (the head start leaves it to the decoder from here): no more from the reader.
    for (int i = 0; i < 5; ++i) autostack.on_perf_sample(sample_at(7, 100'000, 65416), &cache);
    CHECK(autostack.grown() == 1);
    // The thread ended: top and size forgotten, so a deep sample says nothing again...
    autostack.on_thread_end(7);
    autostack.on_perf_sample(sample_at(7, 100'000, 16384), &cache);
    CHECK(autostack.grown() == 1);
    // ... and its tid's next thread starts at the base: its full 16 KB fragment counts (a cache
    // still holding the grown size would not call it full).
    f.tops.remember(7, kTop, 300);
    autostack.on_perf_sample(sample_at(7, 100'000, 16384), &cache);
    CHECK(autostack.grown() == 2);
    // Another thread's state changing leaves this ring's answers alone.
    f.tops.remember(8, kTop, 400);
    autostack.on_perf_sample(sample_at(8, 100'000, 16384));
    CHECK(autostack.grown() == 3);
    autostack.on_perf_sample(sample_at(7, 100'000, 65416), &cache);
    CHECK(autostack.grown() == 3);
}

TEST_CASE("stack=auto tells the size a starting thread's events open with: larger for a deep family and the VM's starter",
          "[agent][stack]") {
    Fixture f;
    const StackControllerSettings settings = with_margin();
    AutoStack autostack(settings, f.sampler, f.tops);
    CHECK(autostack.start_bytes("main", true) == settings.max_bytes);
    CHECK(autostack.start_bytes("worker-1", false) == settings.base_bytes);
    f.tops.remember(7, kTop, 100);
    autostack.thread_started(7, "worker-1");
    autostack.on_perf_sample(sample_at(7, 100'000, 16384));   // runs off: its family turns deep
    CHECK(autostack.grown() == 1);
    CHECK(autostack.start_bytes("worker-2", false) == settings.max_bytes);
    CHECK(autostack.start_bytes("other-2", false) == settings.base_bytes);
    CHECK(autostack.start_bytes("Thread-2", false) == settings.base_bytes);
    // Opened at that size, the thread is tracked there as before (and counted as grown).
    autostack.thread_started(8, "worker-2", false, settings.max_bytes);
    CHECK(autostack.grown() == 2);
}

TEST_CASE("stack=auto counts how the decoder's verdicts and the decode-free check agree, with tops learnt meanwhile",
          "[agent][stack]") {
    Fixture f;
    AutoStack autostack(with_margin(), f.sampler, f.tops);
    const CallTrace complete = trace_with(TraceStatus::kComplete);
    const CallTrace incomplete = trace_with(TraceStatus::kIncomplete);
    CallTrace failed;
    failed.status = TraceStatus::kFailed;

    // No top known yet for thread 7: nothing to agree on (the decoder's verdict grows it to 65528).
    autostack.on_trace(Event{sample_at(7, 100'000, 16384)}, incomplete);
    CHECK(autostack.agreement().both_ran_off == 0);
    // Its top becomes known between two samples: the next one is judged against it.
    f.tops.remember(7, kTop, 100);
    autostack.on_trace(Event{sample_at(7, 100'000, 16384)}, incomplete);   // ends 83.6 KB below: both ran off
    autostack.on_trace(Event{sample_at(7, 20'000, 16384)}, complete);      // ends 3.6 KB below: both reached
    autostack.on_trace(Event{sample_at(7, 30'000, 16384)}, complete);      // the check alone ran off
    autostack.on_trace(Event{sample_at(7, 20'000, 16384)}, incomplete);    // the decoder alone
    autostack.on_trace(Event{sample_at(7, 30'000, 16384)}, failed);        // a failed walk says nothing
    // Full fragments (the thread's size, 65528 bytes, before the sample) give the gaps.
    autostack.on_trace(Event{sample_at(7, 70'000, 65528)}, complete);      // reached, 4472 bytes short of the top
    autostack.on_trace(Event{sample_at(7, 80'000, 65528)}, incomplete);    // ran off, 14472 bytes short
    AutoStack::Agreement a = autostack.agreement();
    CHECK(a.both_ran_off == 2);
    CHECK(a.both_reached == 2);
    CHECK(a.only_check_ran_off == 1);
    CHECK(a.only_decoder_ran_off == 1);
    CHECK(a.max_gap_reached == 70'000 - 65528);
    CHECK(a.min_gap_ran_off == 80'000 - 65528);
    // Forgotten, the top no longer applies.
    f.tops.forget(7, 200);
    autostack.on_trace(Event{sample_at(7, 100'000, 16384)}, incomplete);
    CHECK(autostack.agreement().both_ran_off == 2);
}
