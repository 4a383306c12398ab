// Recording files: the event stream stored verbatim in versioned, checksummed, zstd-compressed
// chunks (docs/recording-format.md); a damaged file yields every event before the damage.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "stackfrag/base/result.hpp"
#include "stackfrag/events/events.hpp"

namespace sf {

struct RecordingHeader {
    uint32_t version = 1;
    uint32_t pid = 0;
    uint64_t created_unix_ns = 0;     // wall clock, for people
    uint64_t created_monotonic_ns = 0;
    std::string producer;             // e.g. "stackfrag-agent 0.1"
    std::string command_line;         // the JVM's or the tool's, when known
    bool operator==(const RecordingHeader&) const = default;
};

struct RecordingWriterOptions {
    // A chunk is compressed and written once this many uncompressed bytes are buffered:
    // big enough for zstd to find the repetition between stacks, small enough that a crash
    // loses little. Tests use tiny values to get many chunks.
    size_t chunk_bytes = 1u << 20;
    // zstd level; 1 keeps up with ~20,000 16 KB samples/s on one core (docs/recording-format.md).
    int compression_level = 1;
};

// Appends events to a new file. Not thread-safe: one writer thread owns it.
class RecordingWriter {
public:
    // Creates `path` with mode 0600; refuses to follow a symlink or to replace an existing file.
    // The header's `version` is ignored: the writer always writes the format it implements.
    static Result<std::unique_ptr<RecordingWriter>> create(const std::string& path,
                                                           const RecordingHeader& header,
                                                           const RecordingWriterOptions& options = {});
    virtual ~RecordingWriter() = default;

    // Buffers the event; a full chunk is compressed and written. After a failed write the file
    // may end inside a chunk, so every later call fails with the same error.
    virtual Status write(const Event& event) = 0;
    // Writes the buffered events as a chunk (and fsyncs nothing: the OS decides).
    virtual Status flush() = 0;
    // Flushes and closes; later writes fail.
    virtual Status close() = 0;

    virtual uint64_t events_written() const = 0;
    virtual uint64_t bytes_written() const = 0;
};

// A damaged or truncated region of a recording: where it starts, why, and what was lost.
struct RecordingDamage {
    uint64_t offset = 0;   // the first byte of the damaged chunk
    Error error;
    // The offset of the next intact chunk, where reading went on; nullopt when reading stopped
    // here (a truncated or unreadable file, or no intact chunk after the damage).
    std::optional<uint64_t> resumed_at;
    uint64_t lost_bytes = 0;   // from `offset` to `resumed_at`, or to the end of the file
    // When the damaged chunk's own header was intact (its checksum matched): how many events it
    // held and their time range. A damaged header leaves these unknown (nullopt).
    std::optional<uint32_t> lost_events;
    uint64_t lost_min_time_ns = 0;
    uint64_t lost_max_time_ns = 0;
    // "1 chunk of 4,096 events (t 1234..5678 ns), 200,017 bytes at offset N: <error>; resumed at M".
    std::string describe() const;
};

// Yields events in file order, a chunk at a time: a chunk is verified and decoded whole before any
// of its events is delivered. A damaged chunk is skipped whole: the reader notes it (damages()),
// finds the next intact chunk (by the damaged chunk's length when its header is intact, else by
// scanning for the next chunk header whose checksum matches) and goes on. A truncated file ends
// at its last complete chunk. Damage in the file header makes open() fail instead. Events of
// kinds newer than this reader are skipped.
class RecordingReader {
public:
    static Result<std::unique_ptr<RecordingReader>> open(const std::string& path);
    virtual ~RecordingReader() = default;

    virtual const RecordingHeader& header() const = 0;
    // The next event, or nullopt at the end of the file or where reading cannot go on.
    virtual std::optional<Event> next() = 0;
    // The first damaged region, if any (the file is not intact).
    virtual const std::optional<RecordingDamage>& damage() const = 0;
    // Every damaged region met so far, in file order. When next() returns an event after a damaged
    // region, the region is already listed: a consumer can tell that events were lost before it.
    virtual const std::vector<RecordingDamage>& damages() const = 0;
    // Byte offset of the chunk that yielded the last event.
    virtual uint64_t offset() const = 0;
    // Events of kinds this reader does not know, skipped so far (written by a newer writer).
    virtual uint64_t skipped_events() const = 0;
};

}  // namespace sf
