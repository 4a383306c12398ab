// The single-threaded end of the event pipeline: counts every event by kind and stores it in the
// recording (when there is one). Owned by the reader thread, or by whoever shuts the agent down
// after the reader has stopped.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "stackfrag/events/events.hpp"
#include "stackfrag/events/recording.hpp"

namespace sf::agent {

struct StreamCounts {
    std::array<uint64_t, 16> by_kind{};   // indexed by EventKind
    uint64_t lost_samples = 0;            // the sum of Lost::count
    uint64_t oracle_traces_ok = 0;        // Oracle events whose AsyncGetCallTrace succeeded
    uint64_t write_errors = 0;            // events the recording refused (after its first error)

    uint64_t of(EventKind kind) const { return by_kind[static_cast<size_t>(kind)]; }
    // "sample=120 code_load=35 ..." for the kinds seen.
    std::string describe() const;
};

// Sees every event the writer sees, in the same order, on the writer's thread: the live profile
// decodes exactly the stream a recording stores. It gets the event after the recording has stored
// it, to keep: a sample's stack fragment changes hands instead of being copied once more.
class EventTap {
public:
    virtual ~EventTap() = default;
    virtual void observe(Event&& event) = 0;
    // The same for an event handed over in its own allocation, which the tap may keep as it is.
    virtual void observe_owned(std::unique_ptr<Event> event) { observe(std::move(*event)); }
    // The writer's caller has handed over everything it had for now (the end of a reader cycle).
    virtual void batch_end() {}
    // The writer's thread, before it fills a sample's fragment: a buffer a sample it observed
    // earlier no longer needs, with its capacity, into `out` (true), or nothing (false); one of
    // at least `min_capacity` bytes where there is one (take_spare).
    virtual bool spare_stack(std::vector<uint8_t>& out, size_t min_capacity) {
        (void)out;
        (void)min_capacity;
        return false;
    }
};

class StreamWriter {
public:
    // A null `recording` counts events and discards them.
    explicit StreamWriter(std::unique_ptr<RecordingWriter> recording);

    // Counts and stores `event`, then hands it to the tap: it is left moved-from.
    void write(Event&& event);
    // The same for an event in its own allocation (EventTap::observe_owned).
    void write_owned(std::unique_ptr<Event> event);
    // Passed on to the tap (see EventTap::batch_end).
    void batch_end() {
        if (tap_ != nullptr) tap_->batch_end();
    }
    // Asks the tap (EventTap::spare_stack).
    bool spare_stack(std::vector<uint8_t>& out, size_t min_capacity) {
        return tap_ != nullptr && tap_->spare_stack(out, min_capacity);
    }
    // Set before the reader thread starts; null for none.
    void set_tap(EventTap* tap) { tap_ = tap; }
    // Flushes and closes the recording; later writes are only counted.
    void finish();

    const StreamCounts& counts() const { return counts_; }
    bool recording() const { return recording_ != nullptr; }
    uint64_t bytes_written() const { return recording_ ? recording_->bytes_written() : 0; }

private:
    // Counts and stores `event` (write's part before the tap).
    void count_and_store(const Event& event);

    std::unique_ptr<RecordingWriter> recording_;
    bool failed_ = false;
    bool finished_ = false;
    StreamCounts counts_;
    EventTap* tap_ = nullptr;
};

}  // namespace sf::agent
