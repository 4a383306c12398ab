// The ring reader against synthetic rings laid out and filled the way the kernel does it.
#include <catch2/catch.hpp>

#include <linux/perf_event.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "stackfrag/kernel/perf_events.hpp"

namespace {

using sf::kernel::LostView;
using sf::kernel::RingHandler;
using sf::kernel::RingReader;
using sf::kernel::SampleView;
using sf::kernel::ThrottleView;

size_t page_size() { return static_cast<size_t>(sysconf(_SC_PAGESIZE)); }

// A metadata page followed by `data_pages` of ring, written as the kernel would: records at
// data_head (wrapping at the end), published by advancing data_head.
class SyntheticRing {
public:
    SyntheticRing(size_t data_pages, uint64_t start_offset)
        : data_size_(data_pages * page_size()),
          memory_(static_cast<uint8_t*>(std::aligned_alloc(page_size(), page_size() + data_size_))) {
        std::memset(memory_, 0xEE, page_size() + data_size_);
        std::memset(memory_, 0, sizeof(perf_event_mmap_page));
        meta()->data_offset = page_size();
        meta()->data_size = data_size_;
        meta()->data_head = start_offset;
        meta()->data_tail = start_offset;
        written_ = start_offset;
    }
    ~SyntheticRing() { std::free(memory_); }
    SyntheticRing(const SyntheticRing&) = delete;
    SyntheticRing& operator=(const SyntheticRing&) = delete;

    void* base() { return memory_; }
    size_t data_size() const { return data_size_; }
    perf_event_mmap_page* meta() { return reinterpret_cast<perf_event_mmap_page*>(memory_); }
    uint64_t tail() { return meta()->data_tail; }

    // Copies `bytes` into the ring after what was written before, without publishing.
    void write(const std::vector<uint8_t>& bytes) {
        uint8_t* data = memory_ + page_size();
        for (uint8_t byte : bytes) data[written_++ & (data_size_ - 1)] = byte;
    }
    // Makes everything written so far (or only `bytes` more than published) visible.
    void publish() { std::atomic_ref<__u64>(meta()->data_head).store(written_, std::memory_order_release); }
    void publish_up_to(uint64_t head) { std::atomic_ref<__u64>(meta()->data_head).store(head, std::memory_order_release); }
    uint64_t written() const { return written_; }

private:
    size_t data_size_;
    uint8_t* memory_;
    uint64_t written_ = 0;
};

class RecordBuilder {
public:
    explicit RecordBuilder(uint32_t type) : type_(type) { bytes_.resize(sizeof(perf_event_header)); }
    RecordBuilder& u64(uint64_t value) { return raw(&value, 8); }
    RecordBuilder& u32_pair(uint32_t a, uint32_t b) { raw(&a, 4); return raw(&b, 4); }
    RecordBuilder& raw(const void* data, size_t size) {
        // Byte by byte: GCC 12 misreads bulk vector appends here (-Warray-bounds false positives).
        const auto* p = static_cast<const uint8_t*>(data);
        for (size_t i = 0; i < size; ++i) bytes_.push_back(p[i]);
        return *this;
    }
    std::vector<uint8_t> build() {
        perf_event_header header{type_, 0, static_cast<uint16_t>(bytes_.size())};
        std::memcpy(bytes_.data(), &header, sizeof header);
        return bytes_;
    }

private:
    uint32_t type_;
    std::vector<uint8_t> bytes_;
};

struct FakeSample {
    uint64_t ip = 0x401000;
    uint32_t pid = 100;
    uint32_t tid = 101;
    uint64_t time = 123456789;
    sf::Registers regs{0x401000, 0x7ffc0000, 0x7ffc0100, 0xA1, 0xB1, 0x13, 0x15};
    std::vector<uint8_t> stack;   // the reserved bytes
    uint64_t dyn_size = 0;
};

// Layout for IP|TID|TIME|REGS_USER|STACK_USER with regs AX BX BP SP IP R13 R15.
std::vector<uint8_t> sample_record(const FakeSample& s) {
    RecordBuilder b(PERF_RECORD_SAMPLE);
    b.u64(s.ip).u32_pair(s.pid, s.tid).u64(s.time).u64(PERF_SAMPLE_REGS_ABI_64);
    b.u64(s.regs.ax).u64(s.regs.bx).u64(s.regs.bp).u64(s.regs.sp).u64(s.regs.ip).u64(s.regs.r13).u64(s.regs.r15);
    b.u64(s.stack.size());
    if (!s.stack.empty()) b.raw(s.stack.data(), s.stack.size()).u64(s.dyn_size);
    return b.build();
}

std::vector<uint8_t> lost_record(uint64_t count, uint32_t tid, uint64_t time) {
    return RecordBuilder(PERF_RECORD_LOST).u64(7).u64(count).u32_pair(1, tid).u64(time).build();
}

std::vector<uint8_t> throttle_record(bool throttle, uint64_t time, uint32_t tid) {
    return RecordBuilder(throttle ? PERF_RECORD_THROTTLE : PERF_RECORD_UNTHROTTLE)
        .u64(time).u64(7).u64(7).u32_pair(1, tid).u64(time).build();
}

std::vector<uint8_t> patterned_stack(size_t size, uint8_t seed) {
    std::vector<uint8_t> stack(size);
    for (size_t i = 0; i < size; ++i) stack[i] = static_cast<uint8_t>(seed + i * 7 + (i >> 8));
    return stack;
}

struct CopiedSample {
    SampleView view;
    std::vector<uint8_t> stack;
};

class Collector : public RingHandler {
public:
    void on_sample(const SampleView& sample) override {
        samples.push_back({sample, std::vector<uint8_t>(sample.stack, sample.stack + sample.stack_size)});
    }
    void on_lost(const LostView& lost) override { losts.push_back(lost); }
    void on_throttle(const ThrottleView& throttle) override { throttles.push_back(throttle); }
    std::vector<CopiedSample> samples;
    std::vector<LostView> losts;
    std::vector<ThrottleView> throttles;
};

void check_same(const CopiedSample& got, const FakeSample& want) {
    CHECK(got.view.ip == want.ip);
    CHECK(got.view.pid == want.pid);
    CHECK(got.view.tid == want.tid);
    CHECK(got.view.time_ns == want.time);
    CHECK(got.view.has_regs);
    CHECK(got.view.regs == want.regs);
    CHECK(got.view.stack_size == want.dyn_size);
    CHECK(got.view.stack_reserved == want.stack.size());
    CHECK(got.stack == std::vector<uint8_t>(want.stack.begin(), want.stack.begin() + static_cast<long>(want.dyn_size)));
}

}  // namespace

TEST_CASE("ring reader parses samples: fields, register order, fragment") {
    SyntheticRing ring(4, 0);
    FakeSample first;
    first.stack = patterned_stack(1024, 1);
    first.dyn_size = 1024;
    FakeSample second = first;
    second.tid = 202;
    second.time = 987654321;
    second.regs.sp = 0x7ffd1230;
    second.stack = patterned_stack(1024, 9);
    second.dyn_size = 200;   // a shallow stack: only part of the reserved bytes is valid
    ring.write(sample_record(first));
    ring.write(sample_record(second));
    ring.publish();

    RingReader reader(ring.base(), ring.data_size(), 1024);
    Collector collector;
    CHECK(reader.drain(collector) == 2);
    REQUIRE(collector.samples.size() == 2);
    check_same(collector.samples[0], first);
    check_same(collector.samples[1], second);
    CHECK(ring.tail() == ring.written());
    CHECK(reader.stats().samples == 2);
    CHECK(reader.stats().stack_bytes == 1024 + 200);
    CHECK(reader.stats().bytes == ring.written());
    CHECK(reader.stats().malformed == 0);
    CHECK(reader.pending_bytes() == 0);
    CHECK(reader.drain(collector) == 0);
}

TEST_CASE("ring reader reassembles records that wrap anywhere, in the header or the payload") {
    const size_t data_pages = 2;
    const size_t data_size = data_pages * page_size();
    FakeSample sample;
    sample.stack = patterned_stack(512, 3);
    sample.dyn_size = 504;
    const size_t record_size = sample_record(sample).size();
    // Every 8-byte-aligned start from "the whole record fits" to "only the header's last bytes
    // wrap", plus starts that put the wrap inside the fragment; the free-running counters start
    // past one full lap to show that only their low bits address the ring.
    for (uint64_t start = data_size - record_size - 8; start <= data_size; start += 8) {
        SyntheticRing ring(data_pages, start + data_size);
        sample.time = start;
        ring.write(sample_record(sample));
        ring.write(lost_record(3, 77, start + 1));
        ring.publish();
        RingReader reader(ring.base(), ring.data_size(), 512);
        Collector collector;
        INFO("record starts " << (data_size - start) << " bytes before the end of the ring");
        CHECK(reader.drain(collector) == 2);
        REQUIRE(collector.samples.size() == 1);
        check_same(collector.samples[0], sample);
        REQUIRE(collector.losts.size() == 1);
        CHECK(collector.losts[0].count == 3);
        CHECK(ring.tail() == ring.written());
    }
    // A header split 4/4 across the end (records are 8-aligned, so only a synthetic ring with an
    // unaligned start shows it; the reader must not assume alignment of the split).
    SyntheticRing ring(data_pages, data_size - 4);
    ring.write(sample_record(sample));
    ring.publish();
    RingReader reader(ring.base(), ring.data_size(), 512);
    Collector collector;
    CHECK(reader.drain(collector) == 1);
    REQUIRE(collector.samples.size() == 1);
    check_same(collector.samples[0], sample);
}

TEST_CASE("ring reader reports lost and throttle records and counts every kind") {
    SyntheticRing ring(1, 0);
    ring.write(lost_record(5, 300, 1000));
    ring.write(throttle_record(true, 2000, 301));
    ring.write(throttle_record(false, 3000, 301));
    ring.write(lost_record(2, 302, 4000));
    ring.write(RecordBuilder(PERF_RECORD_COMM).u32_pair(1, 2).raw("java\0\0\0\0", 8).build());
    ring.publish();

    RingReader reader(ring.base(), ring.data_size(), 8);
    Collector collector;
    CHECK(reader.drain(collector) == 5);
    REQUIRE(collector.losts.size() == 2);
    CHECK(collector.losts[0].count == 5);
    CHECK(collector.losts[0].tid == 300);
    CHECK(collector.losts[0].time_ns == 1000);
    CHECK(collector.losts[1].count == 2);
    REQUIRE(collector.throttles.size() == 2);
    CHECK(collector.throttles[0].throttled);
    CHECK(collector.throttles[0].time_ns == 2000);
    CHECK(collector.throttles[0].tid == 301);
    CHECK_FALSE(collector.throttles[1].throttled);
    const sf::kernel::RingStats& stats = reader.stats();
    CHECK(stats.lost_records == 2);
    CHECK(stats.lost_samples == 7);
    CHECK(stats.throttle == 1);
    CHECK(stats.unthrottle == 1);
    CHECK(stats.other == 1);
    CHECK(stats.samples == 0);
    CHECK(stats.bytes == ring.written());
}

TEST_CASE("ring reader leaves a partial record at the head until it is complete") {
    SyntheticRing ring(2, 0);
    FakeSample sample;
    sample.stack = patterned_stack(256, 5);
    sample.dyn_size = 256;
    const std::vector<uint8_t> lost = lost_record(1, 9, 10);
    ring.write(lost);
    ring.write(sample_record(sample));
    RingReader reader(ring.base(), ring.data_size(), 256);
    Collector collector;

    ring.publish_up_to(lost.size() + 4);   // half a header
    CHECK(reader.drain(collector) == 1);
    CHECK(ring.tail() == lost.size());
    ring.publish_up_to(ring.written() - 8);   // all but the dyn_size
    CHECK(reader.drain(collector) == 0);
    CHECK(ring.tail() == lost.size());
    CHECK(collector.samples.empty());
    CHECK(reader.pending_bytes() == ring.written() - 8 - lost.size());

    ring.publish();
    CHECK(reader.drain(collector) == 1);
    REQUIRE(collector.samples.size() == 1);
    check_same(collector.samples[0], sample);
    CHECK(ring.tail() == ring.written());
}

TEST_CASE("ring reader handles samples without registers or stack and malformed records") {
    SyntheticRing ring(1, 0);
    // A sample the kernel took without user registers: abi NONE, stack size 0, no dyn_size.
    ring.write(RecordBuilder(PERF_RECORD_SAMPLE).u64(0xffff).u32_pair(1, 2).u64(50)
                   .u64(PERF_SAMPLE_REGS_ABI_NONE).u64(0).build());
    // A sample whose stack size claims more than the record holds.
    ring.write(RecordBuilder(PERF_RECORD_SAMPLE).u64(0x1).u32_pair(1, 2).u64(60)
                   .u64(PERF_SAMPLE_REGS_ABI_64).u64(0).u64(0).u64(0).u64(0).u64(0).u64(0).u64(0)
                   .u64(4096).u64(0).build());
    ring.publish();
    RingReader reader(ring.base(), ring.data_size(), 8);
    Collector collector;
    CHECK(reader.drain(collector) == 2);
    REQUIRE(collector.samples.size() == 1);
    CHECK_FALSE(collector.samples[0].view.has_regs);
    CHECK(collector.samples[0].view.stack_size == 0);
    CHECK(collector.samples[0].view.time_ns == 50);
    CHECK(reader.stats().samples == 1);
    CHECK(reader.stats().malformed == 1);

    // A zero-size header gives no way to find the next record: everything published is dropped.
    ring.write(std::vector<uint8_t>(16, 0));
    ring.write(lost_record(1, 1, 1));
    ring.publish();
    CHECK(reader.drain(collector) == 0);
    CHECK(reader.stats().malformed == 2);
    CHECK(ring.tail() == ring.written());
    CHECK(collector.losts.empty());
}

TEST_CASE("ring positions tell news from an empty or drained ring without reading records") {
    SyntheticRing ring(4, 4096 - 16);
    RingReader reader(ring.base(), ring.data_size(), 1024);
    const sf::kernel::RingPositions positions = reader.positions();
    CHECK_FALSE(positions.has_news());
    ring.write(RecordBuilder(PERF_RECORD_LOST).u64(7).u64(3).build());
    CHECK_FALSE(positions.has_news());   // written, not yet published
    ring.publish();
    CHECK(positions.has_news());
    Collector collector;
    CHECK(reader.drain(collector) == 1);
    CHECK_FALSE(positions.has_news());
}
