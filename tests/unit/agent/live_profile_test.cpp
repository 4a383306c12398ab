// The live profile without a JVM: a synthetic ordered stream (VmInfo, MethodInfo, samples of an
// interpreted call chain) through the lock-free queue and the shared StreamDecoder into the CCT;
// dropping under a full queue; rotation under a fake clock; dumps from another thread.
#include <catch2/catch.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <mutex>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "../decoder/synthetic.hpp"
#include "live_profile.hpp"
#include "stackfrag/decoder/stream_decoder.hpp"
#include "stackfrag/profile/export.hpp"
#include "test_env.hpp"

using namespace sf;
using namespace sf::test;
using sf::agent::LiveProfile;
using sf::agent::LiveSettings;

namespace {

constexpr uint64_t kPeriod = 1'000'000;

class FakeClock final : public agent::LiveClock {
public:
    uint64_t mono = 1'000'000'000;
    int64_t unix = 1'700'000'000;   // 2023-11-14 22:13:20 UTC
    uint64_t monotonic_ns() const override { return mono; }
    int64_t unix_seconds() const override { return unix; }
};

// The events World applies to its map, as a stream: VmInfo then every method.
std::vector<Event> metadata(const World& w) {
    std::vector<Event> out;
    VmInfo vm = w.map.vm();
    vm.sample_period_ns = kPeriod;
    out.emplace_back(vm);
    for (int i = 0; i < 16; ++i) out.emplace_back(*w.map.method_by_id(method_id(i)));
    return out;
}

// A complete interpreted chain T.m2@3 -> T.m1@11 (T.<outer>@3 -> T.m1@11).
Sample chain_sample(const World& w, uint64_t time, int outer = 2) {
    FakeStack s;
    const uint64_t fp_a = s.at(0x100), fp_b = s.at(0x300), fp_stub = s.at(0x500);
    w.interp_frame(s, fp_a, 1, bcp(1, 14), fp_a + 32, kInterpReturnPc, fp_b);
    w.interp_frame(s, fp_b, outer, bcp(outer, 3), fp_b + 16, kCallStubReturn, fp_stub, fp_a + 32);
    w.entry_frame(s, fp_stub);
    Sample smp = sample_of(s, kInterpBodyPc, s.at(0), fp_a, time);
    smp.regs.r13 = bcp(1, 11);
    return smp;
}

LiveSettings settings_for_tests() {
    LiveSettings settings;
    settings.decoder.decoder = test_options();
    settings.pid = 42;
    return settings;
}

// A queue whose sample byte budget holds `fragments` of the tests' samples.
LiveSettings settings_with_budget(size_t fragments) {
    LiveSettings settings = settings_for_tests();
    settings.queue_bytes = fragments * kStackBytes;
    return settings;
}

std::string collapsed(const profile::Cct& cct) {
    std::ostringstream out;
    REQUIRE(profile::write_collapsed(cct, out).ok());
    return out.str();
}

std::string read_all(const std::string& path) {
    std::ifstream in(path);
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
}

std::string temp_dir() { return sf::test::temp_dir("live"); }

void drain(LiveProfile& live) {
    while (live.poll_once()) {
    }
}

}  // namespace

TEST_CASE("output paths expand %p, %t and %%") {
    setenv("TZ", "UTC", 1);
    tzset();
    CHECK(agent::expand_output_path("/tmp/prof-%p-%t.html", 1234, 1'700'000'000) == "/tmp/prof-1234-20231114-221320.html");
    CHECK(agent::expand_output_path("a%%p%q%", 7, 0) == "a%p%q%");
    CHECK(agent::expand_output_path("plain.json", 7, 0) == "plain.json");
}

TEST_CASE("the live profile turns an ordered stream into the CCT replay builds from it") {
    World w;
    std::vector<Event> stream;
    // A sample before the VM is known fails as it would in replay.
    stream.emplace_back(chain_sample(w, 500));
    for (Event& e : metadata(w)) stream.push_back(std::move(e));
    for (uint64_t t = 1000; t < 1003; ++t) stream.emplace_back(chain_sample(w, t));
    ThreadInfo thread{1001, 7, false, "main"};
    stream.emplace_back(thread);
    stream.emplace_back(Lost{1002, 7, 5});

    FakeClock clock;
    LiveProfile live(settings_for_tests(), clock);
    for (const Event& e : stream) live.observe(e);
    drain(live);
    // The reader hands the callbacks' events over in their own allocations: the same profile.
    LiveProfile owned_live(settings_for_tests(), clock);
    for (const Event& e : stream) owned_live.observe_owned(std::make_unique<Event>(e));
    drain(owned_live);

    // What replay does with the same events: the shared StreamDecoder, weight = period.
    StreamDecoderOptions options;
    options.decoder = test_options();
    profile::MethodTable names;
    std::unique_ptr<StreamDecoder> replay;
    profile::Cct expected(&names);
    replay = std::make_unique<StreamDecoder>(options, [&](const Event& e, const CallTrace& t) {
        if (std::holds_alternative<Sample>(e)) (void)expected.add(t, replay->period_ns());
    });
    for (Event e : stream) {
        if (const auto* m = std::get_if<MethodInfo>(&e)) names.add(*m);
        replay->consume(std::move(e));
    }

    const profile::Cct& cct = live.cct();
    // The failed sample stays in the profile, under the marker naming its reason.
    CHECK(collapsed(cct) == "T.m2_[0];T.m1_[0] 3\n[failed: no_code_map] 1\n");
    CHECK(collapsed(cct) == collapsed(expected));
    CHECK(collapsed(owned_live.cct()) == collapsed(expected));
    CHECK(owned_live.counts().lost == 5);
    CHECK(cct.total_samples() == 4);
    CHECK(cct.total_weight() == 3 * kPeriod);   // the failed one came before the period was known
    const agent::LiveCounts counts = live.counts();
    CHECK(counts.samples == 4);
    CHECK(counts.decoded == 3);
    CHECK(counts.failed == 1);
    CHECK(counts.failed_by_reason == std::map<std::string, uint64_t>{{"no_code_map", 1}});
    CHECK(counts.lost == 5);
    REQUIRE(counts.top_self.size() == 2);
    CHECK(counts.top_self[0] == std::pair<std::string, uint64_t>("T.m1", 3));
    CHECK(counts.top_self[1] == std::pair<std::string, uint64_t>("[failed: no_code_map]", 1));
    const std::string summary = live.summary_text();
    CHECK(summary.find("4 samples taken; decoded 75.0% (3)") != std::string::npos);
    CHECK(summary.find("no_code_map=1") != std::string::npos);
    CHECK(summary.find("T.m1") != std::string::npos);
}

TEST_CASE("group=pool: the live profile keeps each thread pool's samples under its own root") {
    World w;
    std::vector<Event> stream = metadata(w);
    for (uint32_t tid : {21u, 22u, 23u}) {
        const std::string name = tid == 23 ? "Poller" : "exec-" + std::to_string(tid - 20);
        stream.emplace_back(ThreadInfo{900 + tid, tid, false, name});
    }
    for (uint64_t t = 1000; t < 1006; ++t) {
        Event e = chain_sample(w, t);
        std::get<Sample>(e).tid = t < 1004 ? static_cast<uint32_t>(21 + t % 2) : 23;
        stream.push_back(std::move(e));
    }
    FakeClock clock;
    agent::LiveSettings settings = settings_for_tests();
    settings.group = agent::ThreadGrouping::kPool;
    LiveProfile live(settings, clock);
    for (const Event& e : stream) live.observe(e);
    drain(live);
    CHECK(collapsed(live.cct()) == "[Poller];T.m2_[0];T.m1_[0] 2\n[exec-*];T.m2_[0];T.m1_[0] 4\n");
    settings.group = agent::ThreadGrouping::kThread;
    LiveProfile per_thread(settings, clock);
    for (const Event& e : stream) per_thread.observe(e);
    drain(per_thread);
    CHECK(collapsed(per_thread.cct()) ==
          "[Poller tid=23];T.m2_[0];T.m1_[0] 2\n[exec-1 tid=21];T.m2_[0];T.m1_[0] 2\n[exec-2 tid=22];T.m2_[0];T.m1_[0] 2\n");
}

TEST_CASE("a full queue drops samples, never code or method events") {
    World w;
    LiveSettings settings = settings_for_tests();
    settings.queue_slots = 4;
    FakeClock clock;
    LiveProfile live(settings, clock);
    // Nobody consumes: 4 events fit, the other 13 metadata events wait in the backlog.
    for (const Event& e : metadata(w)) live.observe(e);
    for (uint64_t t = 1000; t < 1010; ++t) live.observe(chain_sample(w, t));
    CHECK(live.counts().dropped == 10);
    // The consumer catches up; the backlog goes first, then new samples get through in order.
    for (int i = 0; i < 100 && live.cct().trace_counts().added == 0; ++i) {
        live.poll_once();
        live.observe(chain_sample(w, 2000 + i));
    }
    drain(live);
    const agent::LiveCounts counts = live.counts();
    CHECK(counts.metadata_dropped == 0);
    CHECK(counts.failed == 0);   // no sample overtook a method it needs
    CHECK(counts.decoded >= 1);
}

TEST_CASE("the sample byte budget bounds what waits in the queue") {
    World w;
    LiveProfile live(settings_with_budget(3), FakeClock{});
    for (const Event& e : metadata(w)) live.observe(e);
    for (uint64_t t = 1000; t < 1010; ++t) live.observe(chain_sample(w, t));
    CHECK(live.counts().dropped == 7);
    drain(live);
    CHECK(live.counts().decoded == 3);
}

TEST_CASE("samples the reader held while the VM was announced pass the byte budget, and do not crowd out later ones") {
    World w;
    LiveProfile live(settings_with_budget(3), FakeClock{});
    for (const Event& e : metadata(w)) live.observe(e);
    // Sampling from the agent's load: 10 samples up to t=1009 released at once after the scan.
    live.keep_held_samples_until(1009);
    for (uint64_t t = 1000; t < 1010; ++t) live.observe(chain_sample(w, t));
    CHECK(live.counts().dropped == 0);
    // The samples behind them get the whole budget, as if the held ones were not queued.
    for (uint64_t t = 2000; t < 2005; ++t) live.observe(chain_sample(w, t));
    CHECK(live.counts().dropped == 2);
    drain(live);
    CHECK(live.counts().decoded == 13);
    // Once they are decoded the budget is as before for everything.
    for (uint64_t t = 3000; t < 3005; ++t) live.observe(chain_sample(w, t));
    CHECK(live.counts().dropped == 4);
    drain(live);
    CHECK(live.counts().decoded == 16);
}

TEST_CASE("events the decoder is done with are filled again by later samples, up to a bound") {
    World w;
    FakeClock clock;
    LiveProfile live(settings_for_tests(), clock);
    for (const Event& e : metadata(w)) live.observe(e);
    for (uint64_t t = 1000; t < 1003; ++t) live.observe(chain_sample(w, t));
    CHECK(live.spare_events() == 0);
    drain(live);
    CHECK(live.spare_events() == 20);   // the 17 metadata events and 3 samples
    // A method event decoded before now carries a sample: what it held must not leak into it.
    for (uint64_t t = 2000; t < 2005; ++t) live.observe(chain_sample(w, t, t % 2 == 0 ? 2 : 3));
    CHECK(live.spare_events() == 15);
    drain(live);
    CHECK(live.spare_events() == 20);
    CHECK(collapsed(live.cct()) == "T.m2_[0];T.m1_[0] 6\nT.m3_[0];T.m1_[0] 2\n");
    for (uint64_t t = 3000; t < 3000 + 2 * LiveProfile::kSpareEvents; ++t) live.observe(chain_sample(w, t));
    drain(live);
    CHECK(live.spare_events() == LiveProfile::kSpareEvents);
    CHECK(live.counts().decoded == 8 + 2 * LiveProfile::kSpareEvents);
}

TEST_CASE("the reader gets decoded samples' fragment buffers back to fill, as many bytes as the decoder's recent batches") {
    World w;
    FakeClock clock;
    LiveProfile live(settings_for_tests(), clock);
    for (const Event& e : metadata(w)) live.observe(e);
    // Buffers as the reader makes them (16 KB at least).
    constexpr size_t kBuffer = 16384;
    size_t fragment = 0;
    uint64_t t = 1000;
    const auto batch = [&](size_t samples) {
        for (size_t i = 0; i < samples; ++i) {
            Sample s = chain_sample(w, t++);
            fragment = s.stack.size();
            s.stack.reserve(kBuffer);
            live.observe(std::move(s));
        }
        drain(live);   // ends with a poll that finds nothing: the wake-up is over
    };
    const auto take_spares = [&] {
        size_t buffers = 0, bytes = 0;
        for (std::vector<uint8_t> stack; live.spare_stack(stack, 0); stack = {}) {
            ++buffers;
            bytes += stack.capacity();
            CHECK(stack.empty());
            CHECK(stack.capacity() >= fragment);
        }
        return std::pair{buffers, bytes};
    };
    const size_t floor_buffers = LiveProfile::kMinSpareBytes / kBuffer;   // 512
    // A first batch larger than the floor: the rest of it is freed, as before any batch was seen.
    const size_t large = 700;   // 11.2 MB of buffers: small fragments, one decoder wake-up
    batch(large);
    CHECK(take_spares().first == floor_buffers);
    // The bound now holds such a batch: the next one comes back whole.
    CHECK(live.spare_bound_bytes() >= large * kBuffer);
    CHECK(live.spare_bound_bytes() <= LiveProfile::kMaxSpareBytes);
    batch(large);
    const auto [buffers, bytes] = take_spares();
    CHECK(buffers == large);
    CHECK(bytes <= live.spare_bound_bytes());
    // Once the large batches are kSpareWakeups wake-ups back, the bound is the floor again: a
    // burst (the start's backlog) is not kept for good.
    for (size_t i = 0; i < LiveProfile::kSpareWakeups; ++i) batch(10);
    CHECK(live.spare_bound_bytes() == LiveProfile::kMinSpareBytes);
    (void)take_spares();
    batch(large);
    CHECK(take_spares().first == floor_buffers);
    // A sample filled into such a buffer decodes as any other (the spares emptied are reused too).
    std::vector<uint8_t> none;
    CHECK_FALSE(live.spare_stack(none, 0));
    for (uint64_t at = 5000; at < 5003; ++at) live.observe(chain_sample(w, at));
    drain(live);
    const size_t samples = 3 * large + LiveProfile::kSpareWakeups * 10 + 3;
    CHECK(live.counts().decoded == samples);
    CHECK(collapsed(live.cct()) == "T.m2_[0];T.m1_[0] " + std::to_string(samples) + "\n");
}

TEST_CASE("a backlog's buffers that the spares have no room for give their pages back; the summary says so") {
    World w;
    FakeClock clock;
    LiveProfile live(settings_for_tests(), clock);
    for (const Event& e : metadata(w)) live.observe(e);
    // 2,000 samples in 16 KB buffers wait at once (32.8 MB): more than the spares' bound can take.
    constexpr size_t kBuffer = 16384, kSamples = 2000;
    size_t fragment = 0;
    for (uint64_t t = 1000; t < 1000 + kSamples; ++t) {
        Sample s = chain_sample(w, t);
        fragment = s.stack.size();
        s.stack.reserve(kBuffer);
        live.observe(std::move(s));
    }
    drain(live);
    const sf::agent::LiveCounts c = live.counts();
    CHECK(c.decoded == kSamples);
    CHECK(c.peak_queued_bytes == kSamples * fragment);
    CHECK(c.peak_queued_buffer_bytes == kSamples * kBuffer);
    // Kept as spares: the floor's 512; released: those drained while more than the spares' ceiling
    // still waited behind them; the rest freed as before.
    const size_t spares = LiveProfile::kMinSpareBytes / kBuffer;
    const size_t waiting_over_ceiling = kSamples - LiveProfile::kMaxSpareBytes / kBuffer;
    CHECK(c.buffers_released <= waiting_over_ceiling - spares);
    CHECK(c.buffers_released + 2 >= waiting_over_ceiling - spares);   // a batch's edge either way
    CHECK_THAT(live.summary_text(0), Catch::Matchers::Contains("live queue: at most") &&
                                         Catch::Matchers::Contains(std::to_string(c.buffers_released) + " buffers of its backlogs given back"));
    // A batch that fits the spares releases nothing.
    for (uint64_t t = 5000; t < 5100; ++t) live.observe(chain_sample(w, t));
    drain(live);
    CHECK(live.counts().buffers_released == c.buffers_released);
    CHECK(collapsed(live.cct()) == "T.m2_[0];T.m1_[0] " + std::to_string(kSamples + 100) + "\n");
}

TEST_CASE("once a large backlog has drained, the allocator is asked to give its free pages back, at most once a minute") {
    World w;
    FakeClock clock;
    sf::agent::LiveSettings settings = settings_for_tests();
    settings.trim_after_backlog_bytes = 24u << 20;
    size_t trims = 0;
    settings.trim_heap = [&] {
        ++trims;
        sf::HeapTrim t;
        t.resident_before = 100'000'000;
        t.resident_after = 60'000'000;
        t.ns = 2'000'000;
        return t;
    };
    LiveProfile live(settings, clock);
    for (const Event& e : metadata(w)) live.observe(e);
    constexpr size_t kBuffer = 16384;
    uint64_t at = 1000;
    const auto backlog = [&](size_t samples) {
        for (size_t i = 0; i < samples; ++i) {
            Sample s = chain_sample(w, at++);
            s.stack.reserve(kBuffer);
            live.observe(std::move(s));
        }
        drain(live);
    };
    // 1,000 buffers of 16 KB (16.4 MB) waiting at once: below the threshold, no trim.
    backlog(1000);
    CHECK(trims == 0);
    // 2,000 (32.8 MB): one trim, once the queue has drained, not one per batch.
    backlog(2000);
    CHECK(trims == 1);
    sf::agent::LiveCounts c = live.counts();
    CHECK(c.heap_trims == 1);
    CHECK(c.heap_trimmed_bytes == 40'000'000);
    CHECK_THAT(live.summary_text(0), Catch::Matchers::Contains("after it the allocator gave 40.0 MB of free memory back (malloc_trim, 2.0 ms)"));
    // Small batches after it trim no more; another large backlog within the minute neither (its
    // pages would be faulted in again at the next), one a minute later does.
    for (int i = 0; i < 5; ++i) backlog(100);
    CHECK(trims == 1);
    clock.mono += 59'000'000'000;
    backlog(2000);
    CHECK(trims == 1);
    clock.mono += 2'000'000'000;
    backlog(2000);
    CHECK(trims == 2);
    CHECK(live.counts().decoded == 1000 + 2000 + 500 + 2000 + 2000);
    // Off (0): never.
    settings.trim_after_backlog_bytes = 0;
    LiveProfile off(settings, clock);
    for (const Event& e : metadata(w)) off.observe(e);
    for (size_t i = 0; i < 3000; ++i) {
        Sample s = chain_sample(w, 20000 + i);
        s.stack.reserve(kBuffer);
        off.observe(std::move(s));
    }
    drain(off);
    CHECK(trims == 2);
    CHECK(off.counts().heap_trims == 0);
}

TEST_CASE("loop rotation writes one file per interval, named by its start time") {
    setenv("TZ", "UTC", 1);
    tzset();
    World w;
    const std::string dir = temp_dir();
    LiveSettings settings = settings_for_tests();
    settings.file = dir + "/prof-%p-%t.collapsed";
    settings.loop_ns = 10'000'000'000;
    FakeClock clock;
    auto live = std::make_unique<LiveProfile>(settings, clock);
    for (const Event& e : metadata(w)) live->observe(e);
    for (uint64_t t = 1000; t < 1002; ++t) live->observe(chain_sample(w, t));
    drain(*live);
    CHECK(std::filesystem::is_empty(dir));   // not yet due

    clock.mono += 10'000'000'000;
    clock.unix += 10;
    live->observe(chain_sample(w, 2000));   // arrives in the new interval's first poll
    drain(*live);
    const std::string first = dir + "/prof-42-20231114-221320.collapsed";
    REQUIRE(std::filesystem::exists(first));
    // The sample drained in the same poll as the rotation belongs to the closing interval.
    CHECK(read_all(first) == "T.m2_[0];T.m1_[0] 3\n");

    live->observe(chain_sample(w, 3000));
    drain(*live);
    clock.mono += 25'000'000'000;   // a stall: one file, and the next deadline from now
    clock.unix += 25;
    live->poll_once();
    const std::string second = dir + "/prof-42-20231114-221330.collapsed";
    REQUIRE(std::filesystem::exists(second));
    CHECK(read_all(second) == "T.m2_[0];T.m1_[0] 1\n");

    live->observe(chain_sample(w, 4000));
    live->stop(1000);   // the last, partial interval is written at stop
    const std::string last = dir + "/prof-42-20231114-221355.collapsed";
    REQUIRE(std::filesystem::exists(last));
    CHECK(read_all(last) == "T.m2_[0];T.m1_[0] 1\n");
    CHECK(live->counts().decoded == 5);   // the whole run, over every interval
    CHECK(live->counts().files_written == 3);
    std::filesystem::remove_all(dir);
}

TEST_CASE("push: each closed period's tree goes to on_period with its unix span, the last one at stop") {
    World w;
    LiveSettings settings = settings_for_tests();
    settings.loop_ns = 10'000'000'000;
    struct Period {
        std::string stacks;
        int64_t from, until;
    };
    std::vector<Period> periods;
    settings.on_period = [&](const profile::Cct& cct, int64_t from, int64_t until) {
        CHECK(cct.info().period_ns == kPeriod);   // filled as for a file: pprof has CPU time
        periods.push_back({collapsed(cct), from, until});
    };
    SECTION("no file") {
        FakeClock clock;
        auto live = std::make_unique<LiveProfile>(settings, clock);
        for (const Event& e : metadata(w)) live->observe(e);
        for (uint64_t t = 1000; t < 1002; ++t) live->observe(chain_sample(w, t));
        drain(*live);
        CHECK(periods.empty());   // not yet due
        clock.mono += 10'000'000'000;
        clock.unix += 10;
        live->poll_once();
        REQUIRE(periods.size() == 1);
        CHECK(periods[0].stacks == "T.m2_[0];T.m1_[0] 2\n");
        CHECK(periods[0].from == 1'700'000'000);
        CHECK(periods[0].until == 1'700'000'010);
        clock.mono += 10'000'000'000;   // a period without samples is not sent
        clock.unix += 10;
        live->poll_once();
        CHECK(periods.size() == 1);
        live->observe(chain_sample(w, 3000));
        live->stop(1000);   // the last, partial period; it spans at least a second
        REQUIRE(periods.size() == 2);
        CHECK(periods[1].stacks == "T.m2_[0];T.m1_[0] 1\n");
        CHECK(periods[1].from == 1'700'000'020);
        CHECK(periods[1].until == 1'700'000'021);
    }
    SECTION("a failed file write keeps the period open: the next profile sent covers both") {
        settings.file = "/nonexistent-dir/prof.collapsed";
        FakeClock clock;
        auto live = std::make_unique<LiveProfile>(settings, clock);
        for (const Event& e : metadata(w)) live->observe(e);
        live->observe(chain_sample(w, 1000));
        drain(*live);
        clock.mono += 10'000'000'000;
        clock.unix += 10;
        live->poll_once();
        CHECK(periods.empty());
        live->observe(chain_sample(w, 2000));
        clock.unix += 5;
        live->stop(1000);
        REQUIRE(periods.size() == 1);
        CHECK(periods[0].stacks == "T.m2_[0];T.m1_[0] 2\n");
        CHECK(periods[0].from == 1'700'000'000);
        CHECK(periods[0].until == 1'700'000'015);
    }
}

TEST_CASE("catch_up wakes the idle decoder and returns once it has taken every queued sample") {
    World w;
    LiveProfile live(settings_for_tests());
    CHECK_FALSE(live.catch_up(100));   // no decoder thread yet
    REQUIRE(live.start().ok());
    for (const Event& e : metadata(w)) live.observe(e);
    // Far below the bytes that wake the decoder: left alone it would sleep its idle wait (1 s).
    for (uint64_t t = 1000; t < 1010; ++t) live.observe(chain_sample(w, t));
    live.batch_end();
    const auto began = std::chrono::steady_clock::now();
    REQUIRE(live.catch_up(500));
    CHECK(std::chrono::steady_clock::now() - began < std::chrono::milliseconds(500));
    // Taken off the queue means handed to the decoder; it finishes the one in hand at once.
    for (int i = 0; i < 500 && live.samples_decoded() < 10; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    CHECK(live.samples_decoded() == 10);
    live.stop(5000);
    CHECK_FALSE(live.catch_up(100));   // stopped
}

TEST_CASE("dump from another thread writes the current profile; stop writes the final one") {
    World w;
    const std::string dir = temp_dir();
    LiveSettings settings = settings_for_tests();
    settings.file = dir + "/final.json";
    LiveProfile live(settings);
    REQUIRE(live.start().ok());
    for (const Event& e : metadata(w)) live.observe(e);
    for (uint64_t t = 1000; t < 1004; ++t) live.observe(chain_sample(w, t));
    // Dumps are served after the queue drained, so what was observed before is in the file.
    Result<std::string> dumped = live.dump(dir + "/now-%p.collapsed", 5000);
    REQUIRE(dumped.ok());
    CHECK(*dumped == dir + "/now-42.collapsed");
    CHECK(read_all(*dumped) == "T.m2_[0];T.m1_[0] 4\n");
    CHECK_FALSE(live.dump(dir + "/bad.txt", 1000).ok());

    live.observe(chain_sample(w, 5000));
    // While the decoder thread works (as after a stop that timed out) its tree is not read: only
    // the counts kept in atomics, and the summary says why the rest is missing.
    const agent::LiveCounts during = live.counts();
    CHECK(during.decoder_running);
    CHECK(during.samples == 5);
    CHECK(during.decoded == 0);
    CHECK(during.top_self.empty());
    CHECK(live.summary_text().find("5 samples taken; the live decoder had not finished") != std::string::npos);
    live.stop(5000);
    CHECK_FALSE(live.running());
    const agent::LiveCounts after = live.counts();
    CHECK_FALSE(after.decoder_running);
    CHECK(after.decoded == 5);
    Result<profile::Cct> final_profile = profile::read_profile(dir + "/final.json");
    REQUIRE(final_profile.ok());
    CHECK(final_profile->total_samples() == 5);
    CHECK(final_profile->info().period_ns == kPeriod);
    CHECK_FALSE(live.dump({}, 100).ok());   // not running any more
    std::filesystem::remove_all(dir);
}

TEST_CASE("a failed write keeps the interval's samples for the next write; lost samples are in the file") {
    World w;
    const std::string dir = temp_dir();
    LiveSettings settings = settings_for_tests();
    // The directory does not exist yet: every write fails until it does (a full or missing disk).
    settings.file = dir + "/later/prof.json";
    settings.loop_ns = 10'000'000'000;
    FakeClock clock;
    LiveProfile live(settings, clock);
    for (const Event& e : metadata(w)) live.observe(e);
    for (uint64_t t = 1000; t < 1003; ++t) live.observe(chain_sample(w, t));
    live.observe(Lost{1003, 7, 4});
    drain(live);

    clock.mono += 10'000'000'000;
    live.poll_once();   // due: the write fails
    CHECK(live.counts().write_errors == 1);
    CHECK(live.counts().files_written == 0);
    CHECK(live.cct().total_samples() == 3);   // not discarded

    live.observe(chain_sample(w, 2000));
    drain(live);

    std::filesystem::create_directory(dir + "/later");
    clock.mono += 10'000'000'000;
    live.poll_once();   // due again: this write holds both intervals
    CHECK(live.counts().files_written == 1);
    Result<profile::Cct> written = profile::read_profile(dir + "/later/prof.json");
    REQUIRE(written.ok());
    CHECK(written->total_samples() == 4);
    CHECK(written->info().lost_samples == 4);
    struct stat st{};
    REQUIRE(stat((dir + "/later/prof.json").c_str(), &st) == 0);
    CHECK((st.st_mode & 0777) == 0600);

    // The next interval starts empty, its lost count too.
    live.observe(chain_sample(w, 3000));
    live.stop(1000);
    Result<profile::Cct> last = profile::read_profile(dir + "/later/prof.json");
    REQUIRE(last.ok());
    CHECK(last->total_samples() == 1);
    CHECK(last->info().lost_samples == 0);
    CHECK(live.counts().decoded == 5);
    std::filesystem::remove_all(dir);
}

TEST_CASE("an attach dump after failed writes gets every sample not yet written") {
    World w;
    const std::string dir = temp_dir();
    LiveSettings settings = settings_for_tests();
    settings.file = dir + "/missing/prof.collapsed";
    settings.loop_ns = 100'000'000;   // real clock: rotations fail while samples arrive
    LiveProfile live(settings);
    REQUIRE(live.start().ok());
    for (const Event& e : metadata(w)) live.observe(e);
    for (uint64_t t = 1000; t < 1006; ++t) {
        live.observe(chain_sample(w, t));
        std::this_thread::sleep_for(std::chrono::milliseconds(60));
    }
    Result<std::string> dumped = live.dump(dir + "/now.collapsed", 5000);
    REQUIRE(dumped.ok());
    CHECK(read_all(*dumped) == "T.m2_[0];T.m1_[0] 6\n");
    live.stop(5000);
    CHECK(live.counts().write_errors >= 2);   // the rotations and the final write
    CHECK(live.counts().files_written == 1);  // the dump
    std::filesystem::remove_all(dir);
}

TEST_CASE("mode=jvmti traces go into the live profile as they are, and the summary says jvmti mode") {
    World w;
    std::vector<Event> stream = metadata(w);
    // T.m2@3 calls T.m1, which was at bci 11: no stack bytes, only the methods JVMTI named.
    for (uint64_t t = 1000; t < 1004; ++t) {
        stream.emplace_back(JvmtiTrace{t, 7, false, {MethodBci{method_id(1), 11}, MethodBci{method_id(2), 3}}});
    }
    stream.emplace_back(JvmtiTrace{1004, 7, true, {MethodBci{method_id(1), 11}}});

    FakeClock clock;
    LiveProfile live(settings_for_tests(), clock);
    for (const Event& e : stream) live.observe(e);
    drain(live);

    // Java frames of unknown kind: no suffix; the deeper-than-asked trace hangs under [truncated].
    CHECK(collapsed(live.cct()) == "T.m2;T.m1 4\n[truncated];T.m1 1\n");
    CHECK(live.cct().total_weight() == 5 * kPeriod);
    const agent::LiveCounts counts = live.counts();
    CHECK(counts.samples == 5);
    CHECK(counts.jvmti_traces == 5);
    CHECK(counts.decoded == 5);
    CHECK(counts.incomplete == 1);
    CHECK(live.summary_text().find("5 samples taken (jvmti mode") != std::string::npos);
}

TEST_CASE("focus and exclude filter the live profile; the summary counts what they dropped") {
    World w;
    const std::string dir = temp_dir();
    auto run = [&](const std::string& focus, const std::string& exclude) {
        LiveSettings settings = settings_for_tests();
        Result<profile::TraceFilter> filter = profile::TraceFilter::parse(focus, exclude);
        REQUIRE(filter.ok());
        settings.filter = std::move(*filter);
        settings.file = dir + "/prof.collapsed";
        FakeClock clock;
        auto live = std::make_unique<LiveProfile>(settings, clock);
        for (const Event& e : metadata(w)) live->observe(e);
        for (uint64_t t = 1000; t < 1003; ++t) live->observe(chain_sample(w, t));      // T.m2 -> T.m1
        for (uint64_t t = 1003; t < 1005; ++t) live->observe(chain_sample(w, t, 3));   // T.m3 -> T.m1
        live->stop(1000);
        return live;
    };

    auto focused = run("T.m3", "");
    CHECK(read_all(dir + "/prof.collapsed") == "T.m3_[0];T.m1_[0] 2\n");
    agent::LiveCounts counts = focused->counts();
    CHECK(counts.decoded == 5);   // the dropped samples were decoded too
    CHECK(counts.filtered.not_in_focus == 3);
    CHECK(counts.filtered.excluded == 0);
    CHECK(focused->summary_text().find("focus=T.m3: kept 2 of 5 decoded samples; dropped 3 (3 not in focus, 0 excluded)") !=
          std::string::npos);

    auto excluded = run("", "T/m3");   // the class "T/m3" does not exist: nothing is dropped
    CHECK(excluded->counts().filtered.dropped() == 0);
    CHECK(read_all(dir + "/prof.collapsed") == "T.m2_[0];T.m1_[0] 3\nT.m3_[0];T.m1_[0] 2\n");

    auto rest = run("", "T.m3");   // the complement of the focus run
    CHECK(read_all(dir + "/prof.collapsed") == "T.m2_[0];T.m1_[0] 3\n");
    CHECK(rest->counts().filtered.excluded == 2);
    CHECK(rest->summary_text().find("exclude=T.m3: kept 3 of 5 decoded samples") != std::string::npos);

    auto whole_class = run("T", "");   // every method of class T: everything
    CHECK(whole_class->counts().filtered.dropped() == 0);
    CHECK(whole_class->cct().total_samples() == 5);
    std::filesystem::remove_all(dir);
}

TEST_CASE("metadata events written into spare events do not free the fragment buffers they held") {
    World w;
    FakeClock clock;
    const std::vector<Event> meta = metadata(w);
    auto buffers_after = [&](int metadata_rounds) {
        LiveProfile live(settings_for_tests(), clock);
        for (const Event& e : meta) live.observe(e);
        for (uint64_t t = 1000; t < 1010; ++t) live.observe(chain_sample(w, t));
        drain(live);
        // At low sample rates most events are code loads and methods: each takes a spare event,
        // which may be one that holds a decoded sample's buffer.
        for (int round = 0; round < metadata_rounds; ++round) {
            for (const Event& e : meta) live.observe(e);
        }
        size_t buffers = 0;
        for (std::vector<uint8_t> stack; live.spare_stack(stack, 0); stack = {}) {
            CHECK(stack.capacity() != 0);
            ++buffers;
        }
        return buffers;
    };
    const size_t returned = buffers_after(0);
    CHECK(returned > 0);
    CHECK(buffers_after(3) == returned);
}

TEST_CASE("decoded samples' fragment buffers come back even when more metadata than the spare queue holds came first") {
    // At 100/s most events are code loads and methods: the spare events fill up with them, and a
    // buffer that travelled in a spare event was freed with it when the spare queue was full.
    World w;
    FakeClock clock;
    LiveProfile live(settings_for_tests(), clock);
    const std::vector<Event> meta = metadata(w);
    for (size_t offered = 0; offered < 2 * LiveProfile::kSpareEvents; offered += meta.size()) {
        for (const Event& e : meta) live.observe(e);
    }
    const int samples = 10;
    for (uint64_t t = 1000; t < 1000 + samples; ++t) live.observe(chain_sample(w, t));
    drain(live);
    CHECK(live.spare_events() == LiveProfile::kSpareEvents);
    int buffers = 0;
    for (std::vector<uint8_t> stack; live.spare_stack(stack, 0); stack = {}) ++buffers;
    // All but the one the decoder keeps as the thread's last snapshot (for stitching), whose
    // place the first sample took with an empty buffer.
    CHECK(buffers == samples - 1);
}

namespace {

// metadata(w) with the methods in one MethodBatch, without names (lazy names).
std::vector<Event> nameless_metadata(const World& w) {
    std::vector<Event> out;
    VmInfo vm = w.map.vm();
    vm.sample_period_ns = kPeriod;
    out.emplace_back(vm);
    MethodBatch batch{vm.time_ns, {}};
    for (int i = 0; i < 16; ++i) {
        const MethodInfo& m = *w.map.method_by_id(method_id(i));
        batch.methods.push_back(MethodEntry{m.method_id, m.method_ptr, m.bytecode_begin, m.bytecode_size, m.access_flags});
    }
    out.emplace_back(std::move(batch));
    return out;
}

NamedMethod names_from(const World& w, uint64_t id, uint64_t time) {
    const MethodInfo& m = *w.map.method_by_id(id);
    return NamedMethod{time, id, true, m.class_name, m.name, m.signature, m.source_file, m.lines};
}

// The methods a lazy-names profile asked for (want_names may run on the decoder thread).
struct NameRequests {
    std::mutex mutex;
    std::vector<uint64_t> ids;
};

LiveSettings lazy_settings(const std::string& file, NameRequests& requests) {
    LiveSettings settings = settings_for_tests();
    settings.lazy_names = true;
    settings.file = file;
    settings.want_names = [&requests](std::vector<uint64_t> ids) {
        std::lock_guard<std::mutex> lock(requests.mutex);
        requests.ids.insert(requests.ids.end(), ids.begin(), ids.end());
    };
    return settings;
}

// What the JVM would answer at the stop.
std::vector<NamedMethod> names_from(const World& w, const std::vector<uint64_t>& ids) {
    std::vector<NamedMethod> out;
    for (uint64_t id : ids) out.push_back(names_from(w, id, 9000));
    return out;
}

}  // namespace

TEST_CASE("lazy names: the profile asks for the methods it refers to and names them before it is written") {
    World w;
    const std::string dir = temp_dir();
    NameRequests requests;
    LiveSettings settings = lazy_settings(dir + "/lazy.collapsed", requests);
    std::vector<uint64_t>& wanted = requests.ids;
    std::vector<std::vector<uint64_t>> asked_at_stop;
    settings.names_now = [&](const std::vector<uint64_t>& ids) {
        asked_at_stop.push_back(ids);
        return names_from(w, ids);
    };
    FakeClock clock;
    LiveProfile live(settings, clock);
    for (const Event& e : nameless_metadata(w)) live.observe(e);
    for (uint64_t t = 1000; t < 1003; ++t) live.observe(chain_sample(w, t));
    drain(live);
    // Each method once, however many samples refer to it.
    std::sort(wanted.begin(), wanted.end());
    CHECK(wanted == std::vector<uint64_t>{std::min(method_id(1), method_id(2)), std::max(method_id(1), method_id(2))});
    CHECK(collapsed(live.cct()).find("[unknown_method 0x") != std::string::npos);

    // One name comes through the stream; the other is asked for at the stop, on the stopping thread.
    live.observe(names_from(w, method_id(2), 4000));
    live.observe(chain_sample(w, 5000));
    drain(live);
    wanted.clear();
    live.stop(5000);
    CHECK(wanted.empty());
    REQUIRE(asked_at_stop.size() == 1);
    CHECK(asked_at_stop[0] == std::vector<uint64_t>{method_id(1)});
    CHECK(read_all(dir + "/lazy.collapsed") == "T.m2_[0];T.m1_[0] 4\n");
    CHECK(live.counts(5).top_self.at(0) == std::pair<std::string, uint64_t>("T.m1", 4));
    std::filesystem::remove_all(dir);
}

TEST_CASE("lazy names with the decoder on its own thread: the stopping thread answers its last question") {
    World w;
    const std::string dir = temp_dir();
    NameRequests requests;
    LiveSettings settings = lazy_settings(dir + "/lazy.collapsed", requests);
    std::thread::id answered_on;
    settings.names_now = [&](const std::vector<uint64_t>& ids) {
        answered_on = std::this_thread::get_id();
        return names_from(w, ids);
    };
    LiveProfile live(settings);
    REQUIRE(live.start().ok());
    for (const Event& e : nameless_metadata(w)) live.observe(e);
    for (uint64_t t = 1000; t < 1004; ++t) live.observe(chain_sample(w, t));
    live.stop(5000);
    CHECK(answered_on == std::this_thread::get_id());
    CHECK(read_all(dir + "/lazy.collapsed") == "T.m2_[0];T.m1_[0] 4\n");
    std::filesystem::remove_all(dir);
}

TEST_CASE("lazy names: a loop rotation waits for names asked for, at most two seconds") {
    World w;
    const std::string dir = temp_dir();
    NameRequests requests;
    LiveSettings settings = lazy_settings(dir + "/prof-%t.collapsed", requests);
    settings.loop_ns = 10'000'000'000;
    const std::vector<uint64_t>& wanted = requests.ids;
    FakeClock clock;
    LiveProfile live(settings, clock);
    for (const Event& e : nameless_metadata(w)) live.observe(e);
    for (uint64_t t = 1000; t < 1003; ++t) live.observe(chain_sample(w, t));
    drain(live);
    REQUIRE(wanted.size() == 2);

    clock.mono += 10'000'000'000;
    live.poll_once();
    CHECK(std::filesystem::is_empty(dir));   // due, but its methods' names are on the way
    clock.mono += 500'000'000;
    live.observe(names_from(w, wanted[0], 2000));
    drain(live);
    CHECK(std::filesystem::is_empty(dir));   // one of two
    live.observe(names_from(w, wanted[1], 2001));
    drain(live);
    REQUIRE(live.counts().files_written == 1);
    CHECK(read_all(dir + "/prof-20231114-221320.collapsed") == "T.m2_[0];T.m1_[0] 3\n");

    // Names that never come hold the next file two seconds, no longer.
    World other;
    LiveSettings unanswered = settings;
    unanswered.file = dir + "/other-%t.collapsed";
    FakeClock clock2;
    LiveProfile silent(unanswered, clock2);
    for (const Event& e : nameless_metadata(other)) silent.observe(e);
    silent.observe(chain_sample(other, 1000));
    drain(silent);
    clock2.mono += 10'000'000'000;
    silent.poll_once();
    clock2.mono += 1'900'000'000;
    silent.poll_once();
    CHECK(silent.counts().files_written == 0);
    clock2.mono += 200'000'000;
    silent.poll_once();
    REQUIRE(silent.counts().files_written == 1);
    CHECK(read_all(dir + "/other-20231114-221320.collapsed").find("[unknown_method 0x") != std::string::npos);
    std::filesystem::remove_all(dir);
}

TEST_CASE("a walk that fails on a Method* no event announced is reported, at most once a second") {
    // The agent then looks for classes the JVM prepared without a ClassPrepare (JDK 21) at once,
    // instead of at its next code poll.
    World w;
    LiveSettings settings = settings_for_tests();
    settings.decoder.retry_ns = 0;   // the verdict at once, not after later announcements
    int reports = 0;
    settings.unknown_method = [&reports] { ++reports; };
    FakeClock clock;
    LiveProfile live(settings, clock);
    for (const Event& e : metadata(w)) {
        const auto* m = std::get_if<MethodInfo>(&e);
        if (m == nullptr || m->method_id != method_id(1)) live.observe(e);   // T.m1 never announced
    }
    for (uint64_t t = 1000; t < 1005; ++t) live.observe(chain_sample(w, t));
    drain(live);
    CHECK(live.counts(5).failed == 5);
    CHECK(reports == 1);
    clock.mono += 2'000'000'000;
    live.observe(chain_sample(w, 2000));
    drain(live);
    CHECK(reports == 2);
    // Announced at last: its walks decode, nothing more is reported.
    clock.mono += 2'000'000'000;
    live.observe(*w.map.method_by_id(method_id(1)));
    live.observe(chain_sample(w, 3000));
    drain(live);
    CHECK(live.counts(5).failed == 6);
    CHECK(reports == 2);
}
