// Per-thread (or per-CPU) perf_event_open sampling of user registers and a user-stack fragment,
// and the reader of the mmap'd rings they fill; never blocks or signals the sampled thread.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "stackfrag/base/result.hpp"
#include "stackfrag/events/events.hpp"

namespace sf::kernel {

enum class ClockKind : uint8_t { kTask, kCpu };   // PERF_COUNT_SW_TASK_CLOCK / _CPU_CLOCK

struct SamplingConfig {
    ClockKind clock = ClockKind::kTask;
    uint64_t period_ns = 1'000'000;
    uint32_t stack_bytes = 16384;     // multiple of 8, at most 65528
    uint32_t ring_pages = 64;         // data pages; a power of two
    uint32_t wakeup_bytes = 0;        // watermark; 0 = half the ring
};

// "100us", "1ms", "10ms", "2s", "500ns", or a bare number of nanoseconds.
Result<uint64_t> parse_interval(std::string_view text);
Status validate(const SamplingConfig& config);

// Counts kept by a ring reader.
struct RingStats {
    uint64_t samples = 0;
    uint64_t lost_records = 0;        // PERF_RECORD_LOST records
    uint64_t lost_samples = 0;        // sum of their counts
    uint64_t throttle = 0;
    uint64_t unthrottle = 0;
    uint64_t other = 0;               // records of other types
    uint64_t malformed = 0;           // records whose size did not match their content
    uint64_t bytes = 0;
};

// A parsed PERF_RECORD_SAMPLE; `stack` points into the reader's scratch buffer and is valid only
// during the callback.
struct SampleView {
    uint64_t time_ns = 0;
    uint32_t pid = 0;
    uint32_t tid = 0;
    uint64_t ip = 0;
    Registers regs;
    const uint8_t* stack = nullptr;
    uint64_t stack_size = 0;          // dyn_size: the valid bytes
};

struct LostView {
    uint64_t time_ns = 0;             // 0 when the record carries no time
    uint32_t tid = 0;
    uint64_t count = 0;
};

class RingHandler {
public:
    virtual ~RingHandler() = default;
    virtual void on_sample(const SampleView& sample) = 0;
    virtual void on_lost(const LostView& lost) = 0;
};

// Reads a perf mmap ring: acquire-load data_head, copy records out (wrap-around anywhere),
// release-store data_tail. Works on any memory laid out as a perf ring (tests use synthetic ones).
class RingReader {
public:
    // `base` is the metadata page followed by `data_size` bytes (a power of two) of ring data.
    // `sample_stack_bytes` is the configured STACK_USER size, needed to parse samples.
    RingReader(void* base, size_t data_size, uint32_t sample_stack_bytes);
    // Delivers every complete record between data_tail and data_head; returns records consumed.
    size_t drain(RingHandler& handler);
    const RingStats& stats() const { return stats_; }

private:
    void* base_;
    size_t data_size_;
    uint32_t stack_bytes_;
    RingStats stats_;
    std::vector<uint8_t> scratch_;
};

// One opened perf event with its ring.
class PerfEvent {
public:
    // A sampling event for one thread (pid = tid, cpu = -1, inherit = 0).
    static Result<PerfEvent> open_thread(pid_t tid, const SamplingConfig& config);
    // One event for `cpu` counting every thread of process `pid` and its future children
    // (inherit = 1, which the kernel accepts only for per-CPU events when mmapped).
    static Result<PerfEvent> open_cpu(pid_t pid, int cpu, const SamplingConfig& config);

    PerfEvent(PerfEvent&& other) noexcept;
    PerfEvent& operator=(PerfEvent&& other) noexcept;
    PerfEvent(const PerfEvent&) = delete;
    PerfEvent& operator=(const PerfEvent&) = delete;
    ~PerfEvent();

    int fd() const { return fd_; }
    Status enable();
    Status disable();
    Status set_period(uint64_t period_ns);
    RingReader& ring() { return *ring_; }

private:
    PerfEvent() = default;
    int fd_ = -1;
    void* map_ = nullptr;
    size_t map_size_ = 0;
    RingReader* ring_ = nullptr;
};

// Waits for readable rings with epoll; the key identifies the ring to the caller.
class RingPoller {
public:
    static Result<RingPoller> create();
    RingPoller(RingPoller&& other) noexcept;
    RingPoller& operator=(RingPoller&& other) noexcept;
    ~RingPoller();

    Status add(int fd, uint64_t key);
    Status remove(int fd);
    // Waits up to timeout_ms; appends the keys of ready rings. Returns the count (0 on timeout).
    Result<size_t> wait(int timeout_ms, std::vector<uint64_t>& ready_keys);
    // Makes a concurrent wait() return now (eventfd), e.g. to drain on request or shut down.
    Status wake();

private:
    RingPoller() = default;
    int epoll_fd_ = -1;
    int wake_fd_ = -1;
};

}  // namespace sf::kernel
