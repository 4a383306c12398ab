// Recording files: the event stream stored verbatim in versioned, checksummed, zstd-compressed
// chunks (docs/recording-format.md); a damaged file yields every event before the damage.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

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

// Where a read stopped early: the byte offset of the damaged chunk and why.
struct RecordingDamage {
    uint64_t offset = 0;
    Error error;
};

// Yields events in file order, a chunk at a time: a chunk is verified and decoded whole before any
// of its events is delivered. After a damaged or truncated chunk, next() returns nullopt and
// damage() says where and why; every event before that chunk has been delivered. Damage in the
// file header makes open() fail instead. Events of kinds newer than this reader are skipped.
class RecordingReader {
public:
    static Result<std::unique_ptr<RecordingReader>> open(const std::string& path);
    virtual ~RecordingReader() = default;

    virtual const RecordingHeader& header() const = 0;
    // The next event, or nullopt at the end of the file or at damage.
    virtual std::optional<Event> next() = 0;
    virtual const std::optional<RecordingDamage>& damage() const = 0;
    // Byte offset of the chunk that yielded the last event.
    virtual uint64_t offset() const = 0;
    // Events of kinds this reader does not know, skipped so far (written by a newer writer).
    virtual uint64_t skipped_events() const = 0;
};

}  // namespace sf
