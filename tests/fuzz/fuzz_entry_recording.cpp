// Recording reader fuzz entry. Every chunk carries two CRC-32s, so random mutations almost never
// get past the checksum tests; each input is therefore read twice: as given (the checksum and
// framing paths) and with every checksum it has room for recomputed (the decompression and event
// decoding paths behind them).
#include <sys/mman.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "fuzz_entry.hpp"
#include "stackfrag/events/recording.hpp"

namespace sf::fuzz {

namespace {

[[noreturn]] void broken_promise(const char* what) {
    std::fprintf(stderr, "fuzz_recording: reader broke a promise: %s\n", what);
    std::abort();
}

// zlib's CRC-32 (reflected 0xEDB88320), done here so that the entry needs nothing but the reader.
uint32_t crc32_of(const uint8_t* data, size_t size) {
    static const std::array<uint32_t, 256> table = [] {
        std::array<uint32_t, 256> t{};
        for (uint32_t i = 0; i < 256; ++i) {
            uint32_t c = i;
            for (int bit = 0; bit < 8; ++bit) c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
            t[i] = c;
        }
        return t;
    }();
    uint32_t crc = 0xFFFFFFFFu;
    for (size_t i = 0; i < size; ++i) crc = table[(crc ^ data[i]) & 0xFF] ^ (crc >> 8);
    return crc ^ 0xFFFFFFFFu;
}

uint32_t load_u32(const uint8_t* at) {
    return static_cast<uint32_t>(at[0]) | static_cast<uint32_t>(at[1]) << 8 | static_cast<uint32_t>(at[2]) << 16 |
           static_cast<uint32_t>(at[3]) << 24;
}

void store_u32(uint8_t* at, uint32_t value) {
    for (int i = 0; i < 4; ++i) at[i] = static_cast<uint8_t>(value >> (8 * i));
}

// Offsets from docs/recording-format.md, restated rather than taken from the reader's private
// header so that a layout change there shows up here as lost coverage, not as silent agreement.
constexpr size_t kFilePrefix = 16;
constexpr size_t kChunkHeader = 44;
constexpr size_t kChunkStoredLengthAt = 8;
constexpr size_t kChunkPayloadCrcAt = 20;
constexpr size_t kChunkHeaderCrcAt = 40;

// Recomputes the file header checksum and, chunk by chunk, the payload and header checksums, as
// far as the lengths in the bytes allow. A chunk whose payload runs past the end gets only its
// header checksum, so that truncation, not a checksum, is what the reader meets there.
void fix_checksums(std::vector<uint8_t>& bytes) {
    if (bytes.size() < kFilePrefix) return;
    const uint64_t body = load_u32(bytes.data() + 12);
    if (kFilePrefix + body + 4 > bytes.size()) return;
    store_u32(bytes.data() + kFilePrefix + body, crc32_of(bytes.data(), kFilePrefix + body));
    size_t at = kFilePrefix + body + 4;
    while (bytes.size() - at >= kChunkHeader) {
        uint8_t* header = bytes.data() + at;
        const uint64_t stored = load_u32(header + kChunkStoredLengthAt);
        const bool whole = stored <= bytes.size() - at - kChunkHeader;
        if (whole) store_u32(header + kChunkPayloadCrcAt, crc32_of(header + kChunkHeader, stored));
        store_u32(header + kChunkHeaderCrcAt, crc32_of(header, kChunkHeaderCrcAt));
        if (!whole) return;
        at += kChunkHeader + stored;
    }
}

// One memfd for the whole run: the reader wants a path, and /proc/self/fd/N gives one without
// touching a disk or leaving files behind when the fuzzer is killed.
class MemoryFile {
public:
    MemoryFile() : fd_(::memfd_create("fuzz-recording", MFD_CLOEXEC)) {
        if (fd_ < 0) broken_promise("memfd_create failed (not a reader problem)");
        path_ = "/proc/self/fd/" + std::to_string(fd_);
    }
    const std::string& hold(const uint8_t* data, size_t size) {
        if (::ftruncate(fd_, 0) != 0) broken_promise("ftruncate of the memfd failed");
        size_t done = 0;
        while (done < size) {
            const ssize_t wrote = ::pwrite(fd_, data + done, size - done, static_cast<off_t>(done));
            if (wrote <= 0) broken_promise("pwrite to the memfd failed");
            done += static_cast<size_t>(wrote);
        }
        return path_;
    }

private:
    int fd_;
    std::string path_;
};

void read_all(const uint8_t* data, size_t size) {
    static MemoryFile file;
    Result<std::unique_ptr<RecordingReader>> opened = RecordingReader::open(file.hold(data, size));
    if (!opened) {
        if (opened.error().message.empty()) broken_promise("open failed without a message");
        return;
    }
    RecordingReader& reader = **opened;
    uint64_t events = 0;
    uint64_t last_offset = 0;
    while (std::optional<Event> event = reader.next()) {
        ++events;
        (void)time_of(*event);
        if (reader.offset() < last_offset) broken_promise("offset() went backwards");
        last_offset = reader.offset();
        if (reader.offset() >= size) broken_promise("an event came from a chunk beyond the end of the file");
    }
    // The end, damaged or not, is final.
    if (reader.next().has_value()) broken_promise("next() yielded an event after the end");
    // Damaged regions come in file order, each skipped to a later intact chunk or ending the read.
    uint64_t previous_end = 0;
    const std::vector<RecordingDamage>& damages = reader.damages();
    if (reader.damage().has_value() != !damages.empty()) broken_promise("damage() and damages() disagree");
    for (size_t i = 0; i < damages.size(); ++i) {
        const RecordingDamage& damage = damages[i];
        if (damage.offset > size) broken_promise("damage offset beyond the end of the file");
        if (damage.offset < previous_end) broken_promise("damaged regions overlap or go backwards");
        if (damage.error.message.empty()) broken_promise("damage without a message");
        if (damage.resumed_at) {
            if (*damage.resumed_at <= damage.offset || *damage.resumed_at >= size) broken_promise("resumed outside the file");
            if (damage.lost_bytes != *damage.resumed_at - damage.offset) broken_promise("lost bytes disagree with the offsets");
            previous_end = *damage.resumed_at;
        } else {
            if (i + 1 != damages.size()) broken_promise("a damage that stopped the read is not the last");
            if (events > 0 && damage.offset <= last_offset) broken_promise("final damage at or before a delivered chunk");
        }
    }
}

}  // namespace

int fuzz_recording_one(const uint8_t* data, size_t size) {
    read_all(data, size);
    std::vector<uint8_t> fixed(data, data + size);
    fix_checksums(fixed);
    if (size > 0 && std::memcmp(fixed.data(), data, size) != 0) read_all(fixed.data(), fixed.size());
    return 0;
}

}  // namespace sf::fuzz
