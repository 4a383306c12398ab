// The event pipeline without a JVM: many threads emit into the queue, the reorder buffer puts
// events in time order, the stream writer counts them and stores them in a readable recording.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "event_queue.hpp"
#include "reorder_buffer.hpp"
#include "stackfrag/events/recording.hpp"
#include "stream_writer.hpp"

using namespace sf;
using namespace sf::agent;

namespace {

std::string temp_path(const char* tag) {
    return "/tmp/sf-agent-" + std::string(tag) + "-" + std::to_string(getpid()) + ".sfr";
}

Sample sample_at(uint64_t time, uint32_t tid) {
    Sample sample;
    sample.time_ns = time;
    sample.tid = tid;
    sample.stack.assign(64, static_cast<uint8_t>(tid));
    return sample;
}

}  // namespace

TEST_CASE("the queue keeps every emitting thread's events in order and loses none") {
    EventQueue queue;
    constexpr int kThreads = 4;
    constexpr uint64_t kPerThread = 20000;
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
        threads.emplace_back([&queue, t] {
            for (uint64_t i = 1; i <= kPerThread; ++i) queue.emit(ThreadInfo{i, static_cast<uint32_t>(t), false, ""});
        });
    }
    std::vector<Event> drained;
    std::vector<uint64_t> last(kThreads, 0);
    bool ordered = true;
    auto consume = [&] {
        std::vector<Event> batch;
        queue.drain(batch);
        for (Event& event : batch) {
            const auto& info = std::get<ThreadInfo>(event);
            ordered &= info.time_ns == last[info.tid] + 1;
            last[info.tid] = info.time_ns;
            drained.push_back(std::move(event));
        }
    };
    while (drained.size() < kThreads * kPerThread) {
        consume();
        if (drained.size() < kThreads * kPerThread) std::this_thread::yield();
        if (std::all_of(last.begin(), last.end(), [](uint64_t v) { return v == kPerThread; })) break;
    }
    for (auto& thread : threads) thread.join();
    consume();
    CHECK(ordered);
    CHECK(drained.size() == kThreads * kPerThread);
    CHECK(queue.dropped() == 0);
    CHECK(queue.pending() == 0);
}

TEST_CASE("the queue drops and counts beyond its bound and after close") {
    EventQueue queue(3);
    for (int i = 0; i < 5; ++i) queue.emit(Lost{1, 1, 1});
    CHECK(queue.dropped() == 2);
    std::vector<Event> out;
    CHECK(queue.drain(out) == 3);
    queue.emit(Lost{1, 1, 1});
    CHECK(queue.drain(out) == 1);
    queue.close();
    queue.emit(Lost{1, 1, 1});
    CHECK(queue.drain(out) == 0);
    CHECK(queue.dropped() == 3);
}

TEST_CASE("the reorder buffer releases in time order up to the horizon, ties in arrival order") {
    ReorderBuffer buffer;
    buffer.add(sample_at(30, 1), 0);
    buffer.add(CodeUnload{20, 7, 0x1000}, 0);
    buffer.add(sample_at(10, 2), 0);
    buffer.add(ThreadInfo{0, 3, false, "no time"}, 25);   // ordered by its arrival time
    buffer.add(sample_at(20, 4), 0);
    std::vector<uint64_t> times;
    std::vector<EventKind> kinds;
    auto out = [&](Event& event) {
        times.push_back(time_of(event) != 0 ? time_of(event) : 25);
        kinds.push_back(kind_of(event));
    };
    buffer.release_until(25, out);
    CHECK(times == std::vector<uint64_t>{10, 20, 20, 25});
    CHECK(kinds[1] == EventKind::kCodeUnload);   // added before the sample of the same time
    CHECK(kinds[2] == EventKind::kSample);
    CHECK(buffer.size() == 1);
    buffer.add(sample_at(28, 5), 0);
    buffer.release_all(out);
    CHECK(times == std::vector<uint64_t>{10, 20, 20, 25, 28, 30});
    CHECK(buffer.size() == 0);
}

TEST_CASE("events drained in their own allocations keep them through the reorder buffer, in time order with the rest") {
    EventQueue queue;
    queue.emit(CodeUnload{20, 7, 0x1000});
    queue.emit(ThreadInfo{0, 3, false, "no time"});   // ordered by its arrival time (25)
    queue.emit(CodeUnload{40, 8, 0x2000});
    std::vector<std::unique_ptr<Event>> drained;
    REQUIRE(queue.drain_owned(drained) == 3);
    CHECK(queue.pending() == 0);
    std::vector<const Event*> allocations;
    for (const auto& event : drained) allocations.push_back(event.get());

    ReorderBuffer buffer;
    buffer.add(sample_at(20, 1), 0);   // the same time as the first unload, added before it
    for (auto& event : drained) buffer.add_owned(std::move(event), 25);
    buffer.add(sample_at(10, 2), 0);
    std::vector<uint64_t> times;
    std::vector<const Event*> passed_on;   // the owned events as they came out
    auto out = [&](Event& event) { times.push_back(time_of(event)); };
    auto out_owned = [&](std::unique_ptr<Event>&& event) {
        times.push_back(time_of(*event) != 0 ? time_of(*event) : 25);
        passed_on.push_back(event.get());
    };
    buffer.release_until(30, out, out_owned);
    CHECK(times == std::vector<uint64_t>{10, 20, 20, 25});
    CHECK(buffer.size() == 1);
    buffer.release_all(out, out_owned);
    CHECK(times == std::vector<uint64_t>{10, 20, 20, 25, 40});
    CHECK(passed_on == allocations);   // the same allocations, in emission order here

    // Without an owned-event handler they go to `out` like the others.
    buffer.add_owned(std::make_unique<Event>(CodeUnload{50, 9, 0x3000}), 0);
    buffer.release_all(out);
    CHECK(times.back() == 50);
}

TEST_CASE("the stream writer counts by kind and stores a recording the reader reads back") {
    const std::string path = temp_path("writer");
    std::remove(path.c_str());
    RecordingHeader header;
    header.pid = static_cast<uint32_t>(getpid());
    header.producer = "stackfrag-agent test";
    Result<std::unique_ptr<RecordingWriter>> recording = RecordingWriter::create(path, header);
    REQUIRE(recording.ok());
    StreamWriter writer(std::move(recording).value());
    CHECK(writer.recording());
    writer.write(VmInfo{});
    for (uint64_t i = 1; i <= 100; ++i) writer.write(sample_at(i, 9));
    writer.write(Lost{101, 9, 5});
    Oracle good;
    good.agct_status = 3;
    good.frames = {{1, 2}, {3, 4}, {5, 6}};
    writer.write(good);
    Oracle bad;
    bad.agct_status = -2;
    writer.write(bad);
    writer.finish();
    writer.write(sample_at(200, 9));   // after finish: counted only

    CHECK(writer.counts().of(EventKind::kSample) == 101);
    CHECK(writer.counts().of(EventKind::kLost) == 1);
    CHECK(writer.counts().lost_samples == 5);
    CHECK(writer.counts().of(EventKind::kOracle) == 2);
    CHECK(writer.counts().oracle_traces_ok == 1);
    CHECK(writer.counts().describe() == "sample=101 vm_info=1 oracle=2 lost=1");

    Result<std::unique_ptr<RecordingReader>> reader = RecordingReader::open(path);
    REQUIRE(reader.ok());
    size_t samples = 0, events = 0;
    while (std::optional<Event> event = (*reader)->next()) {
        ++events;
        if (std::holds_alternative<Sample>(*event)) ++samples;
        if (const auto* oracle = std::get_if<Oracle>(&*event); oracle && oracle->agct_status > 0) {
            CHECK(oracle->frames == good.frames);
        }
    }
    CHECK_FALSE((*reader)->damage().has_value());
    CHECK(samples == 100);
    CHECK(events == 104);
    std::remove(path.c_str());
}

TEST_CASE("without a recording the stream writer only counts") {
    StreamWriter writer(nullptr);
    CHECK_FALSE(writer.recording());
    writer.write(sample_at(1, 1));
    writer.finish();
    CHECK(writer.counts().of(EventKind::kSample) == 1);
    CHECK(writer.bytes_written() == 0);
}
