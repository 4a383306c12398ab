#include <linux/perf_event.h>
#include <unistd.h>

#include <atomic>
#include <cstring>

#include "stackfrag/kernel/perf_events.hpp"

namespace sf::kernel {

namespace {

perf_event_mmap_page* meta_of(void* base) { return static_cast<perf_event_mmap_page*>(base); }

// Reads fields of a record front to back, refusing to run past its end.
class FieldCursor {
public:
    FieldCursor(const uint8_t* record, size_t size) : at_(record), end_(record + size) {}
    bool u64(uint64_t& out) {
        if (remaining() < 8) return false;
        std::memcpy(&out, at_, 8);
        at_ += 8;
        return true;
    }
    bool u32_pair(uint32_t& first, uint32_t& second) {
        if (remaining() < 8) return false;
        std::memcpy(&first, at_, 4);
        std::memcpy(&second, at_ + 4, 4);
        at_ += 8;
        return true;
    }
    const uint8_t* bytes(size_t count) {
        if (remaining() < count) return nullptr;
        const uint8_t* start = at_;
        at_ += count;
        return start;
    }
    size_t remaining() const { return static_cast<size_t>(end_ - at_); }

private:
    const uint8_t* at_;
    const uint8_t* end_;
};

}  // namespace

RingReader::RingReader(void* base, size_t data_size, uint32_t sample_stack_bytes)
    : base_(base), data_size_(data_size) {
    const perf_event_mmap_page* meta = meta_of(base);
    const size_t offset = meta->data_offset != 0 ? meta->data_offset
                                                 : static_cast<size_t>(sysconf(_SC_PAGESIZE));
    data_ = static_cast<const uint8_t*>(base) + offset;
    // Only records that wrap are copied; the largest is a sample (at most 64 KB by the header's
    // u16 size), reserved up front so that drain() never allocates on the common path.
    scratch_.reserve(sample_record_bytes(sample_stack_bytes));
}

size_t RingReader::pending_bytes() const {
    perf_event_mmap_page* meta = meta_of(base_);
    const uint64_t head = std::atomic_ref<__u64>(meta->data_head).load(std::memory_order_acquire);
    const uint64_t tail = std::atomic_ref<__u64>(meta->data_tail).load(std::memory_order_relaxed);
    return static_cast<size_t>(head - tail);
}

bool RingPositions::has_news() const {
    // Relaxed: a stale answer only moves the drain to the next cycle; drain() itself acquires.
    const uint64_t head = std::atomic_ref<__u64>(meta_->data_head).load(std::memory_order_relaxed);
    const uint64_t tail = std::atomic_ref<__u64>(meta_->data_tail).load(std::memory_order_relaxed);
    return head != tail;
}

void RingPositions::prefetch() const { __builtin_prefetch(&meta_->data_head); }

void RingPositions::prefetch_oldest_record() const {
    const uint64_t tail = std::atomic_ref<__u64>(meta_->data_tail).load(std::memory_order_relaxed);
    __builtin_prefetch(data_ + (tail & (data_size_ - 1)));
}

const uint8_t* RingReader::record_bytes(uint64_t offset, size_t size) {
    const size_t start = static_cast<size_t>(offset & (data_size_ - 1));
    if (start + size <= data_size_) return data_ + start;
    const size_t first_part = data_size_ - start;
    scratch_.resize(size);
    std::memcpy(scratch_.data(), data_ + start, first_part);
    std::memcpy(scratch_.data() + first_part, data_, size - first_part);
    return scratch_.data();
}

size_t RingReader::drain(RingHandler& handler) {
    perf_event_mmap_page* meta = meta_of(base_);
    std::atomic_ref<__u64> head_ref(meta->data_head);
    std::atomic_ref<__u64> tail_ref(meta->data_tail);
    // Acquire pairs with the kernel's publishing of data_head: record contents are visible.
    const uint64_t head = head_ref.load(std::memory_order_acquire);
    uint64_t tail = tail_ref.load(std::memory_order_relaxed);
    size_t consumed = 0;

    if (head - tail > data_size_) {
        // Cannot happen with a kernel-written ring in non-overwrite mode; if it does, nothing
        // between tail and head can be trusted.
        ++stats_.malformed;
        tail_ref.store(head, std::memory_order_release);
        return 0;
    }

    while (head - tail >= sizeof(perf_event_header)) {
        perf_event_header header;
        std::memcpy(&header, record_bytes(tail, sizeof header), sizeof header);
        if (header.size < sizeof header || header.size % 8 != 0 || header.size > data_size_) {
            // Without a trustworthy size there is no next record to resynchronise on.
            ++stats_.malformed;
            tail = head;
            break;
        }
        if (head - tail < header.size) break;   // incomplete: stays for a later drain
        // The kernel wrote the ring from another CPU, and the JVM's work since evicted it: every
        // line is a miss, and a page's first one a TLB miss too. Asked for ahead, the record's last
        // line (a sample's dyn_size, read before its fragment is copied) and the next record's
        // header arrive while this one's fields are parsed, instead of one after the other.
        __builtin_prefetch(data_ + ((tail + header.size - 8) & (data_size_ - 1)));
        if (head - tail > header.size) __builtin_prefetch(data_ + ((tail + header.size) & (data_size_ - 1)));

        const uint8_t* record = record_bytes(tail, header.size);
        switch (header.type) {
            case PERF_RECORD_SAMPLE: parse_sample(record, header.size, handler); break;
            case PERF_RECORD_LOST: parse_lost(record, header.size, handler); break;
            case PERF_RECORD_THROTTLE: parse_throttle(record, header.size, true, handler); break;
            case PERF_RECORD_UNTHROTTLE: parse_throttle(record, header.size, false, handler); break;
            default: ++stats_.other; break;
        }
        tail += header.size;
        stats_.bytes += header.size;
        ++consumed;
        // Release: our reads of the record happen before the kernel may overwrite it.
        tail_ref.store(tail, std::memory_order_release);
    }
    tail_ref.store(tail, std::memory_order_release);
    return consumed;
}

void RingReader::parse_sample(const uint8_t* record, size_t size, RingHandler& handler) {
    FieldCursor cursor(record + sizeof(perf_event_header), size - sizeof(perf_event_header));
    SampleView sample;
    uint64_t abi = 0;
    if (!cursor.u64(sample.ip) || !cursor.u32_pair(sample.pid, sample.tid) ||
        !cursor.u64(sample.time_ns) || !cursor.u64(abi)) {
        ++stats_.malformed;
        return;
    }
    if (abi != PERF_SAMPLE_REGS_ABI_NONE) {
        // In the order of the bits of sample_regs_user_mask(): AX BX BP SP IP R13 R15.
        Registers& r = sample.regs;
        if (!cursor.u64(r.ax) || !cursor.u64(r.bx) || !cursor.u64(r.bp) || !cursor.u64(r.sp) ||
            !cursor.u64(r.ip) || !cursor.u64(r.r13) || !cursor.u64(r.r15)) {
            ++stats_.malformed;
            return;
        }
        sample.has_regs = true;
    }
    uint64_t stack_size = 0;
    if (!cursor.u64(stack_size)) {
        ++stats_.malformed;
        return;
    }
    if (stack_size != 0) {
        // The kernel reserves stack_size bytes and says with dyn_size how many it could copy.
        uint64_t dyn_size = 0;
        const uint8_t* stack = stack_size <= cursor.remaining() ? cursor.bytes(stack_size) : nullptr;
        if (stack == nullptr || !cursor.u64(dyn_size) || dyn_size > stack_size) {
            ++stats_.malformed;
            return;
        }
        sample.stack = stack;
        sample.stack_size = dyn_size;
        sample.stack_reserved = stack_size;
    }
    ++stats_.samples;
    stats_.stack_bytes += sample.stack_size;
    handler.on_sample(sample);
}

void RingReader::parse_lost(const uint8_t* record, size_t size, RingHandler& handler) {
    FieldCursor cursor(record + sizeof(perf_event_header), size - sizeof(perf_event_header));
    uint64_t id = 0;
    LostView lost;
    if (!cursor.u64(id) || !cursor.u64(lost.count)) {
        ++stats_.malformed;
        return;
    }
    // sample_id (sample_id_all): pid/tid then time, when present.
    uint32_t pid = 0;
    if (cursor.u32_pair(pid, lost.tid)) cursor.u64(lost.time_ns);
    ++stats_.lost_records;
    stats_.lost_samples += lost.count;
    handler.on_lost(lost);
}

void RingReader::parse_throttle(const uint8_t* record, size_t size, bool throttled,
                                RingHandler& handler) {
    FieldCursor cursor(record + sizeof(perf_event_header), size - sizeof(perf_event_header));
    ThrottleView view;
    view.throttled = throttled;
    uint64_t id = 0;
    uint64_t stream_id = 0;
    if (!cursor.u64(view.time_ns) || !cursor.u64(id) || !cursor.u64(stream_id)) {
        ++stats_.malformed;
        return;
    }
    uint32_t pid = 0;
    cursor.u32_pair(pid, view.tid);
    if (throttled) ++stats_.throttle;
    else ++stats_.unthrottle;
    handler.on_throttle(view);
}

}  // namespace sf::kernel
