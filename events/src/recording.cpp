#include "stackfrag/events/recording.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>
#include <zlib.h>
#include <zstd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <optional>
#include <new>
#include <string>
#include <vector>

#include "event_codec.hpp"
#include "recording_format.hpp"

namespace sf {

namespace fmt_ = recording_format;
using fmt_::ByteBuffer;
using fmt_::load_le;
using fmt_::store_le;

namespace {

uint32_t crc_of(const uint8_t* data, size_t size, uint32_t crc = 0) {
    // zlib's crc32 takes a uInt length; chunks are bounded far below 4 GiB.
    return static_cast<uint32_t>(crc32(crc, data, static_cast<uInt>(size)));
}

Error out_of_memory() {
    return make_error(Errc::kResourceLimit, "out of memory");
}

size_t string_field_bytes(const std::string& text) {
    return 4 + text.size();
}

uint8_t* put_string(uint8_t* out, const std::string& text) {
    store_le(out, static_cast<uint32_t>(text.size()));
    if (!text.empty()) std::memcpy(out + 4, text.data(), text.size());
    return out + 4 + text.size();
}

// Writes all of `parts`, resuming after short writes and signals.
Status write_fully(int fd, iovec* parts, int count, const std::string& path) {
    while (count > 0) {
        const ssize_t written = ::writev(fd, parts, count);
        if (written < 0) {
            if (errno == EINTR) continue;
            return sys_error(Errc::kIo, errno, "write " + path);
        }
        size_t left = static_cast<size_t>(written);
        while (count > 0 && left >= parts->iov_len) {
            left -= parts->iov_len;
            ++parts;
            --count;
        }
        if (count > 0) {
            parts->iov_base = static_cast<uint8_t*>(parts->iov_base) + left;
            parts->iov_len -= left;
        }
    }
    return {};
}

class FileRecordingWriter final : public RecordingWriter {
public:
    FileRecordingWriter(int fd, std::string path, const RecordingWriterOptions& options)
        : fd_(fd), path_(std::move(path)), options_(options) {}

    ~FileRecordingWriter() override {
        if (fd_ >= 0) (void)close();
    }

    Status start(const RecordingHeader& header) {
        cctx_ = ZSTD_createCCtx();
        if (cctx_ == nullptr) return out_of_memory();
        const size_t level_set = ZSTD_CCtx_setParameter(cctx_, ZSTD_c_compressionLevel, options_.compression_level);
        if (ZSTD_isError(level_set)) {
            return make_error(Errc::kInvalidArgument,
                              "zstd compression level " + std::to_string(options_.compression_level) + ": " +
                                  ZSTD_getErrorName(level_set));
        }
        const size_t raw_reserve = std::min<size_t>(options_.chunk_bytes + (64u << 10), fmt_::kMaxChunkRawBytes);
        if (!raw_.reserve(raw_reserve) || !stored_.reserve(ZSTD_compressBound(raw_reserve))) return out_of_memory();

        const size_t body_bytes =
            4 + 8 + 8 + string_field_bytes(header.producer) + string_field_bytes(header.command_line);
        if (body_bytes > fmt_::kMaxHeaderBodyBytes) {
            return make_error(Errc::kInvalidArgument, "recording header of " + path_ + " is larger than 1 MiB",
                              "shorten the producer or command line");
        }
        ByteBuffer bytes;
        uint8_t* out = bytes.append(fmt_::kFilePrefixBytes + body_bytes + 4);
        if (out == nullptr) return out_of_memory();
        std::memcpy(out, fmt_::kFileMagic, sizeof(fmt_::kFileMagic));
        store_le(out + 8, fmt_::kVersion);
        store_le(out + 12, static_cast<uint32_t>(body_bytes));
        uint8_t* body = out + fmt_::kFilePrefixBytes;
        store_le(body, header.pid);
        store_le(body + 4, header.created_unix_ns);
        store_le(body + 12, header.created_monotonic_ns);
        body = put_string(body + 20, header.producer);
        body = put_string(body, header.command_line);
        store_le(body, crc_of(out, fmt_::kFilePrefixBytes + body_bytes));

        iovec part{out, bytes.size()};
        Status status = write_fully(fd_, &part, 1, path_);
        if (!status) return status;
        bytes_written_ = bytes.size();
        return {};
    }

    Status write(const Event& event) override {
        if (Status usable = check_usable(); !usable) return usable;
        try {
            return append(event);
        } catch (const std::bad_alloc&) {
            return out_of_memory();
        }
    }

    Status flush() override {
        if (Status usable = check_usable(); !usable) return usable;
        return write_chunk();
    }

    Status close() override {
        if (fd_ < 0) return make_error(Errc::kInvalidArgument, "recording " + path_ + " is already closed");
        Status status = failure_ ? Status(*failure_) : write_chunk();
        if (::close(fd_) != 0 && status) status = sys_error(Errc::kIo, errno, "close " + path_);
        fd_ = -1;
        ZSTD_freeCCtx(cctx_);
        cctx_ = nullptr;
        return status;
    }

    uint64_t events_written() const override { return events_written_; }
    uint64_t bytes_written() const override { return bytes_written_; }

private:
    Status check_usable() const {
        if (fd_ < 0) return make_error(Errc::kInvalidArgument, "recording " + path_ + " is closed");
        if (failure_) return *failure_;
        return {};
    }

    Status fail(Error error) {
        failure_ = std::move(error);
        return *failure_;
    }

    Status append(const Event& event) {
        const size_t body_bytes = event_codec::body_size(event);
        const size_t frame_bytes = fmt_::kEventFrameBytes + body_bytes;
        if (frame_bytes > fmt_::kMaxChunkRawBytes) {
            // Refused without poisoning the file: nothing was written.
            return make_error(Errc::kInvalidArgument,
                              std::string(kind_name(kind_of(event))) + " event of " + std::to_string(body_bytes) +
                                  " bytes exceeds the 64 MiB chunk limit of " + path_);
        }
        if (raw_.size() + frame_bytes > fmt_::kMaxChunkRawBytes) {
            if (Status status = write_chunk(); !status) return status;
        }
        uint8_t* out = raw_.append(frame_bytes);
        if (out == nullptr) return out_of_memory();
        out[0] = static_cast<uint8_t>(kind_of(event));
        store_le(out + 1, static_cast<uint32_t>(body_bytes));
        event_codec::encode_body(event, out + fmt_::kEventFrameBytes);

        const uint64_t time = time_of(event);
        if (chunk_events_ == 0 || time < chunk_min_time_) chunk_min_time_ = time;
        if (chunk_events_ == 0 || time > chunk_max_time_) chunk_max_time_ = time;
        ++chunk_events_;
        ++events_written_;
        if (raw_.size() >= options_.chunk_bytes) return write_chunk();
        return {};
    }

    Status write_chunk() {
        if (chunk_events_ == 0) return {};
        const size_t bound = ZSTD_compressBound(raw_.size());
        if (!stored_.reserve(bound)) return fail(out_of_memory());
        const size_t compressed = ZSTD_compress2(cctx_, stored_.data(), bound, raw_.data(), raw_.size());
        if (ZSTD_isError(compressed)) {
            return fail(make_error(Errc::kInternal,
                                   "zstd compression for " + path_ + " failed: " + ZSTD_getErrorName(compressed)));
        }
        // Incompressible data (e.g. random stack bytes) is stored as is rather than grown.
        const bool use_zstd = compressed < raw_.size();
        const uint8_t* payload = use_zstd ? stored_.data() : raw_.data();
        const size_t payload_bytes = use_zstd ? compressed : raw_.size();

        uint8_t header[fmt_::kChunkHeaderBytes] = {};
        std::memcpy(header, fmt_::kChunkMagic, sizeof(fmt_::kChunkMagic));
        header[fmt_::kChunkCodecAt] = static_cast<uint8_t>(use_zstd ? fmt_::Codec::kZstd : fmt_::Codec::kStored);
        store_le(header + fmt_::kChunkStoredSizeAt, static_cast<uint32_t>(payload_bytes));
        store_le(header + fmt_::kChunkRawSizeAt, static_cast<uint32_t>(raw_.size()));
        store_le(header + fmt_::kChunkEventCountAt, chunk_events_);
        store_le(header + fmt_::kChunkPayloadCrcAt, crc_of(payload, payload_bytes));
        store_le(header + fmt_::kChunkMinTimeAt, chunk_min_time_);
        store_le(header + fmt_::kChunkMaxTimeAt, chunk_max_time_);
        store_le(header + fmt_::kChunkHeaderCrcAt, crc_of(header, fmt_::kChunkHeaderCrcAt));

        iovec parts[2] = {{header, sizeof(header)}, {const_cast<uint8_t*>(payload), payload_bytes}};
        if (Status status = write_fully(fd_, parts, 2, path_); !status) return fail(status.error());
        bytes_written_ += sizeof(header) + payload_bytes;
        raw_.clear();
        chunk_events_ = 0;
        return {};
    }

    int fd_;
    std::string path_;
    RecordingWriterOptions options_;
    ZSTD_CCtx* cctx_ = nullptr;
    ByteBuffer raw_;
    ByteBuffer stored_;
    uint32_t chunk_events_ = 0;
    uint64_t chunk_min_time_ = 0;
    uint64_t chunk_max_time_ = 0;
    uint64_t events_written_ = 0;
    uint64_t bytes_written_ = 0;
    std::optional<Error> failure_;
};

// Reads exactly `size` bytes unless the file ends first; returns how many were read.
Result<size_t> read_up_to(int fd, uint8_t* out, size_t size, const std::string& path) {
    size_t done = 0;
    while (done < size) {
        const ssize_t got = ::read(fd, out + done, size - done);
        if (got < 0) {
            if (errno == EINTR) continue;
            return sys_error(Errc::kIo, errno, "read " + path);
        }
        if (got == 0) break;
        done += static_cast<size_t>(got);
    }
    return done;
}

std::string hex(uint32_t value) {
    static const char digits[] = "0123456789abcdef";
    std::string out = "0x";
    for (int shift = 28; shift >= 0; shift -= 4) out += digits[(value >> shift) & 0xf];
    return out;
}

class FileRecordingReader final : public RecordingReader {
public:
    FileRecordingReader(int fd, std::string path) : fd_(fd), path_(std::move(path)) {}
    ~FileRecordingReader() override {
        ::close(fd_);
        ZSTD_freeDCtx(dctx_);
    }

    Status start() {
        dctx_ = ZSTD_createDCtx();
        if (dctx_ == nullptr) return out_of_memory();
        uint8_t prefix[fmt_::kFilePrefixBytes];
        Result<size_t> got = read_up_to(fd_, prefix, sizeof(prefix), path_);
        if (!got) return std::move(got).take_error();
        const size_t magic_bytes = std::min(*got, sizeof(fmt_::kFileMagic));
        if (*got == 0) return header_truncated(0, sizeof(prefix));
        if (std::memcmp(prefix, fmt_::kFileMagic, magic_bytes) != 0) {
            return make_error(Errc::kCorrupt, path_ + " is not a stackfrag recording (bad file magic)");
        }
        if (*got < sizeof(prefix)) return header_truncated(*got, sizeof(prefix));
        header_.version = load_le<uint32_t>(prefix + 8);
        if (header_.version != fmt_::kVersion) {
            return make_error(Errc::kUnsupported,
                              path_ + " has recording format version " + std::to_string(header_.version) +
                                  ", this reader knows only version " + std::to_string(fmt_::kVersion),
                              "use a stackfrag build that matches the recording");
        }
        const uint32_t body_bytes = load_le<uint32_t>(prefix + 12);
        if (body_bytes > fmt_::kMaxHeaderBodyBytes) {
            return make_error(Errc::kCorrupt, path_ + ": corrupt file header at offset 0 (header length " +
                                                  std::to_string(body_bytes) + " exceeds 1 MiB)");
        }
        std::vector<uint8_t> whole(sizeof(prefix) + body_bytes + 4);
        std::memcpy(whole.data(), prefix, sizeof(prefix));
        got = read_up_to(fd_, whole.data() + sizeof(prefix), body_bytes + 4, path_);
        if (!got) return std::move(got).take_error();
        if (*got < body_bytes + 4) return header_truncated(sizeof(prefix) + *got, whole.size());
        const uint32_t stored_crc = load_le<uint32_t>(whole.data() + sizeof(prefix) + body_bytes);
        const uint32_t computed_crc = crc_of(whole.data(), sizeof(prefix) + body_bytes);
        if (stored_crc != computed_crc) {
            return make_error(Errc::kCorrupt, path_ + ": corrupt file header at offset 0 (checksum mismatch: stored " +
                                                  hex(stored_crc) + ", computed " + hex(computed_crc) + ")");
        }
        const uint8_t* in = whole.data() + sizeof(prefix);
        const uint8_t* end = in + body_bytes;
        if (!parse_header_body(in, end)) {
            return make_error(Errc::kCorrupt, path_ + ": corrupt file header at offset 0 (fields overrun its length)");
        }
        next_chunk_offset_ = whole.size();
        return {};
    }

    const RecordingHeader& header() const override { return header_; }
    const std::optional<RecordingDamage>& damage() const override { return damage_; }
    const std::vector<RecordingDamage>& damages() const override { return damages_; }
    uint64_t offset() const override { return delivered_offset_; }
    uint64_t skipped_events() const override { return skipped_; }

    std::optional<Event> next() override {
        while (cursor_ == events_.size()) {
            if (finished_) return std::nullopt;
            try {
                load_chunk();
            } catch (const std::bad_alloc&) {
                mark_damage(Errc::kResourceLimit,
                            "out of memory decoding the chunk at offset " + std::to_string(next_chunk_offset_),
                            Resume::kStop);
            }
        }
        delivered_offset_ = events_offset_;
        return std::move(events_[cursor_++]);
    }

private:
    Status header_truncated(size_t have, size_t need) {
        return make_error(Errc::kTruncated, path_ + ": truncated at offset 0 (the file header has " +
                                                std::to_string(have) + " of " + std::to_string(need) + " bytes)");
    }

    bool parse_header_body(const uint8_t* in, const uint8_t* end) {
        auto take_string = [&](std::string& out) {
            if (end - in < 4) return false;
            const uint32_t length = load_le<uint32_t>(in);
            in += 4;
            if (static_cast<size_t>(end - in) < length) return false;
            out.assign(reinterpret_cast<const char*>(in), length);
            in += length;
            return true;
        };
        if (end - in < 20) return false;
        header_.pid = load_le<uint32_t>(in);
        header_.created_unix_ns = load_le<uint64_t>(in + 4);
        header_.created_monotonic_ns = load_le<uint64_t>(in + 12);
        in += 20;
        // Bytes after the known fields belong to a newer writer and are ignored.
        return take_string(header_.producer) && take_string(header_.command_line);
    }

    // Reads up to `size` bytes into `buffer`, resized to what was read. The buffer grows with the
    // bytes actually read: a damaged length near the 64 MiB bound in a small file costs what the
    // file holds, not the bound.
    Result<size_t> read_growing(std::vector<uint8_t>& buffer, size_t size) {
        constexpr size_t kFirstStep = size_t{1} << 20;
        size_t done = 0;
        while (done < size) {
            const size_t step = std::min(size - done, std::max(kFirstStep, done));
            buffer.resize(done + step);
            Result<size_t> got = read_up_to(fd_, buffer.data() + done, step, path_);
            if (!got) return got;
            done += *got;
            if (*got < step) break;
        }
        buffer.resize(done);
        return done;
    }

    // Where reading goes on after a damaged chunk.
    enum class Resume {
        kStop,         // the file ends here or cannot be read
        kAfterChunk,   // the header's checksum matched: its length says where the next chunk starts
        kScan,         // the header itself is damaged: the next intact chunk header is searched for
    };

    uint64_t file_size() const {
        struct stat info {};
        return ::fstat(fd_, &info) == 0 ? static_cast<uint64_t>(info.st_size) : 0;
    }

    // The offset of the first chunk header at or after `from` whose magic and checksum are intact
    // (and whose lengths are within bounds), or nullopt when the file has none.
    std::optional<uint64_t> find_chunk(uint64_t from) {
        const uint64_t size = file_size();
        constexpr size_t kBlock = size_t{1} << 20;
        std::vector<uint8_t> block(kBlock + fmt_::kChunkHeaderBytes);
        for (uint64_t at = from; at + fmt_::kChunkHeaderBytes <= size;) {
            const size_t want = static_cast<size_t>(std::min<uint64_t>(block.size(), size - at));
            const ssize_t got = ::pread(fd_, block.data(), want, static_cast<off_t>(at));
            if (got < static_cast<ssize_t>(fmt_::kChunkHeaderBytes)) {
                if (got < 0 && errno == EINTR) continue;
                return std::nullopt;
            }
            const size_t have = static_cast<size_t>(got);
            // Candidates whose whole header is in this block; the next block starts at the first
            // position not checked here.
            const size_t last = have - fmt_::kChunkHeaderBytes;
            for (size_t i = 0; i <= last; ++i) {
                const void* hit = std::memchr(block.data() + i, fmt_::kChunkMagic[0], last + 1 - i);
                if (hit == nullptr) break;
                i = static_cast<size_t>(static_cast<const uint8_t*>(hit) - block.data());
                const uint8_t* header = block.data() + i;
                if (std::memcmp(header, fmt_::kChunkMagic, sizeof(fmt_::kChunkMagic)) != 0) continue;
                if (load_le<uint32_t>(header + fmt_::kChunkHeaderCrcAt) != crc_of(header, fmt_::kChunkHeaderCrcAt)) continue;
                if (load_le<uint32_t>(header + fmt_::kChunkRawSizeAt) > fmt_::kMaxChunkRawBytes) continue;
                return at + i;
            }
            at += last + 1;
        }
        return std::nullopt;
    }

    void mark_damage(Errc code, std::string message, Resume resume) {
        const uint64_t at = next_chunk_offset_;
        RecordingDamage damage;
        damage.offset = at;
        damage.error = make_error(code, std::move(message));
        if (chunk_header_intact_) {
            damage.lost_events = chunk_event_count_;
            damage.lost_min_time_ns = chunk_min_time_;
            damage.lost_max_time_ns = chunk_max_time_;
        }
        events_.clear();
        cursor_ = 0;
        std::optional<uint64_t> next;
        if (resume != Resume::kStop) {
            next = find_chunk(resume == Resume::kAfterChunk ? at + fmt_::kChunkHeaderBytes + chunk_stored_bytes_ : at + 1);
        }
        if (next && ::lseek(fd_, static_cast<off_t>(*next), SEEK_SET) == static_cast<off_t>(*next)) {
            damage.resumed_at = *next;
            damage.lost_bytes = *next - at;
            next_chunk_offset_ = *next;
        } else {
            const uint64_t size = file_size();
            damage.lost_bytes = size > at ? size - at : 0;
            finished_ = true;
        }
        if (!damage_) damage_ = damage;
        damages_.push_back(std::move(damage));
    }

    void load_chunk() {
        events_.clear();
        cursor_ = 0;
        const uint64_t at = next_chunk_offset_;
        const std::string where = " at offset " + std::to_string(at);
        chunk_header_intact_ = false;

        uint8_t header[fmt_::kChunkHeaderBytes];
        Result<size_t> got = read_up_to(fd_, header, sizeof(header), path_);
        if (!got) return mark_damage(Errc::kIo, got.error().describe() + where, Resume::kStop);
        if (*got == 0) {
            finished_ = true;   // the file ends exactly at a chunk boundary
            return;
        }
        if (*got < sizeof(header)) {
            return mark_damage(Errc::kTruncated, "truncated" + where + " (chunk header has " + std::to_string(*got) +
                                                     " of " + std::to_string(sizeof(header)) + " bytes)",
                               Resume::kStop);
        }
        if (std::memcmp(header, fmt_::kChunkMagic, sizeof(fmt_::kChunkMagic)) != 0) {
            return mark_damage(Errc::kCorrupt, "bad chunk magic" + where, Resume::kScan);
        }
        const uint32_t stored_header_crc = load_le<uint32_t>(header + fmt_::kChunkHeaderCrcAt);
        const uint32_t computed_header_crc = crc_of(header, fmt_::kChunkHeaderCrcAt);
        if (stored_header_crc != computed_header_crc) {
            return mark_damage(Errc::kCorrupt, "bad chunk header checksum" + where + " (stored " +
                                                   hex(stored_header_crc) + ", computed " +
                                                   hex(computed_header_crc) + ")",
                               Resume::kScan);
        }
        const auto codec = static_cast<fmt_::Codec>(header[fmt_::kChunkCodecAt]);
        const uint32_t stored_bytes = load_le<uint32_t>(header + fmt_::kChunkStoredSizeAt);
        const uint32_t raw_bytes = load_le<uint32_t>(header + fmt_::kChunkRawSizeAt);
        const uint32_t event_count = load_le<uint32_t>(header + fmt_::kChunkEventCountAt);
        chunk_header_intact_ = true;
        chunk_stored_bytes_ = stored_bytes;
        chunk_event_count_ = event_count;
        chunk_min_time_ = load_le<uint64_t>(header + fmt_::kChunkMinTimeAt);
        chunk_max_time_ = load_le<uint64_t>(header + fmt_::kChunkMaxTimeAt);
        if (codec != fmt_::Codec::kStored && codec != fmt_::Codec::kZstd) {
            return mark_damage(Errc::kUnsupported,
                               "unknown chunk codec " + std::to_string(static_cast<int>(codec)) + where,
                               Resume::kAfterChunk);
        }
        if (raw_bytes > fmt_::kMaxChunkRawBytes || stored_bytes > ZSTD_compressBound(fmt_::kMaxChunkRawBytes) ||
            (codec == fmt_::Codec::kStored && stored_bytes != raw_bytes)) {
            return mark_damage(Errc::kCorrupt, "bad chunk length" + where + " (stored " + std::to_string(stored_bytes) +
                                                   " bytes, raw " + std::to_string(raw_bytes) + " bytes)",
                               Resume::kScan);
        }

        got = read_growing(stored_, stored_bytes);
        if (!got) return mark_damage(Errc::kIo, got.error().describe() + where, Resume::kStop);
        if (*got < stored_bytes) {
            return mark_damage(Errc::kTruncated, "truncated" + where + " (chunk payload has " + std::to_string(*got) +
                                                     " of " + std::to_string(stored_bytes) + " bytes)",
                               Resume::kStop);
        }
        const uint32_t stored_payload_crc = load_le<uint32_t>(header + fmt_::kChunkPayloadCrcAt);
        const uint32_t computed_payload_crc = crc_of(stored_.data(), stored_bytes);
        if (stored_payload_crc != computed_payload_crc) {
            return mark_damage(Errc::kCorrupt, "bad chunk payload checksum" + where + " (stored " +
                                                   hex(stored_payload_crc) + ", computed " +
                                                   hex(computed_payload_crc) + ")",
                               Resume::kAfterChunk);
        }

        const uint8_t* raw = stored_.data();
        if (codec == fmt_::Codec::kZstd) {
            // The frame states its content size (the writer always records it): a mismatch is
            // damage found before allocating raw_length bytes for it.
            const unsigned long long content = ZSTD_getFrameContentSize(stored_.data(), stored_bytes);
            if (content != ZSTD_CONTENTSIZE_UNKNOWN && content != ZSTD_CONTENTSIZE_ERROR && content != raw_bytes) {
                return mark_damage(Errc::kCorrupt, "bad chunk length" + where + " (zstd frame holds " +
                                                       std::to_string(content) + " bytes, header says " +
                                                       std::to_string(raw_bytes) + ")",
                                   Resume::kAfterChunk);
            }
            raw_.resize(raw_bytes);
            const size_t produced = ZSTD_decompressDCtx(dctx_, raw_.data(), raw_.size(), stored_.data(), stored_bytes);
            if (ZSTD_isError(produced)) {
                return mark_damage(Errc::kCorrupt,
                                   "zstd decompression failed" + where + ": " + ZSTD_getErrorName(produced),
                                   Resume::kAfterChunk);
            }
            if (produced != raw_bytes) {
                return mark_damage(Errc::kCorrupt, "bad chunk length" + where + " (decompressed to " +
                                                       std::to_string(produced) + " bytes, header says " +
                                                       std::to_string(raw_bytes) + ")",
                                   Resume::kAfterChunk);
            }
            raw = raw_.data();
        }
        if (!decode_events(raw, raw_bytes, event_count, where)) return;
        next_chunk_offset_ = at + sizeof(header) + stored_bytes;
        events_offset_ = at;
    }

    static size_t count_known_frames(const uint8_t* raw, size_t size, uint32_t event_count) {
        size_t known = 0;
        size_t pos = 0;
        for (uint32_t index = 0; index < event_count && size - pos >= fmt_::kEventFrameBytes; ++index) {
            const uint32_t body_bytes = load_le<uint32_t>(raw + pos + 1);
            if (event_codec::is_known_kind(raw[pos])) ++known;
            pos += fmt_::kEventFrameBytes;
            if (size - pos < body_bytes) break;
            pos += body_bytes;
        }
        return known;
    }

    // All events of a chunk are decoded before any is delivered: a chunk is whole or damaged.
    bool decode_events(const uint8_t* raw, size_t size, uint32_t event_count, const std::string& where) {
        if (event_count > size / fmt_::kEventFrameBytes) {
            mark_damage(Errc::kCorrupt, "bad event count" + where + " (" + std::to_string(event_count) +
                                            " events cannot fit in " + std::to_string(size) + " bytes)",
                        Resume::kAfterChunk);
            return false;
        }
        // Neither event_count nor the chunk size says how many slots are needed: frames of unknown
        // kinds take 5 bytes and no slot, a known event 22 bytes or more and a 200-byte slot. A walk
        // over the frame headers counts the known ones (framing errors are reported below).
        events_.reserve(count_known_frames(raw, size, event_count));
        size_t pos = 0;
        uint64_t skipped = 0;
        for (uint32_t index = 0; index < event_count; ++index) {
            // Built on failure only: formatting it for every event dominated reading small events.
            auto which = [&, event_start = pos] {
                return "bad event" + where + " (event " + std::to_string(index) + " at chunk byte " +
                       std::to_string(event_start);
            };
            if (size - pos < fmt_::kEventFrameBytes) {
                mark_damage(Errc::kCorrupt, which() + ": chunk ends inside the event header)", Resume::kAfterChunk);
                return false;
            }
            const uint8_t kind = raw[pos];
            const uint32_t body_bytes = load_le<uint32_t>(raw + pos + 1);
            pos += fmt_::kEventFrameBytes;
            if (size - pos < body_bytes) {
                mark_damage(Errc::kCorrupt, which() + ": body of " + std::to_string(body_bytes) +
                                                " bytes overruns the chunk)",
                            Resume::kAfterChunk);
                return false;
            }
            if (event_codec::is_known_kind(kind)) {
                Event event;
                const auto known = static_cast<EventKind>(kind);
                if (const char* failure = event_codec::decode_body(known, raw + pos, body_bytes, event)) {
                    mark_damage(Errc::kCorrupt, which() + ", " + kind_name(known) + "): " + failure,
                                Resume::kAfterChunk);
                    return false;
                }
                events_.push_back(std::move(event));
            } else {
                ++skipped;   // written by a newer format revision: the frame says how far to skip
            }
            pos += body_bytes;
        }
        if (pos != size) {
            mark_damage(Errc::kCorrupt, "bad event count" + where + " (" + std::to_string(size - pos) +
                                            " bytes left after " + std::to_string(event_count) + " events)",
                        Resume::kAfterChunk);
            return false;
        }
        skipped_ += skipped;
        return true;
    }

    int fd_;
    std::string path_;
    ZSTD_DCtx* dctx_ = nullptr;
    RecordingHeader header_;
    std::vector<uint8_t> stored_;
    std::vector<uint8_t> raw_;
    std::vector<Event> events_;
    size_t cursor_ = 0;
    bool finished_ = false;
    uint64_t next_chunk_offset_ = 0;
    uint64_t events_offset_ = 0;
    uint64_t delivered_offset_ = 0;
    uint64_t skipped_ = 0;
    std::optional<RecordingDamage> damage_;
    std::vector<RecordingDamage> damages_;
    // The chunk being loaded, once its header checksum matched: what its damage would lose.
    bool chunk_header_intact_ = false;
    uint32_t chunk_stored_bytes_ = 0;
    uint32_t chunk_event_count_ = 0;
    uint64_t chunk_min_time_ = 0;
    uint64_t chunk_max_time_ = 0;
};

}  // namespace

std::string RecordingDamage::describe() const {
    std::string out = error.describe() + "; lost ";
    if (lost_events) {
        out += std::to_string(*lost_events) + " events (time " + std::to_string(lost_min_time_ns) + ".." +
               std::to_string(lost_max_time_ns) + " ns)";
    } else {
        out += "the events of the damaged bytes (their chunk header is damaged too)";
    }
    out += ", " + std::to_string(lost_bytes) + " bytes; ";
    out += resumed_at ? "read on from offset " + std::to_string(*resumed_at) : std::string("reading stopped there");
    return out;
}

Result<std::unique_ptr<RecordingWriter>> RecordingWriter::create(const std::string& path,
                                                                  const RecordingHeader& header,
                                                                  const RecordingWriterOptions& options) {
    try {
        if (options.chunk_bytes == 0 || options.chunk_bytes > fmt_::kMaxChunkRawBytes) {
            return make_error(Errc::kInvalidArgument, "recording chunk size must be between 1 byte and 64 MiB");
        }
        // O_EXCL with O_CREAT already refuses a symlink in the last component; O_NOFOLLOW says so
        // explicitly. Raw stack bytes may hold secrets, hence 0600 whatever the umask allows.
        const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (fd < 0) {
            const int err = errno;
            return sys_error(err == EACCES ? Errc::kPermission : Errc::kIo, err, "create recording " + path,
                             err == EEXIST ? "choose a new file name: recordings never replace a file" : "");
        }
        auto writer = std::make_unique<FileRecordingWriter>(fd, path, options);
        if (::fchmod(fd, 0600) != 0) return sys_error(Errc::kIo, errno, "chmod 0600 " + path);
        if (Status status = writer->start(header); !status) return std::move(status).take_error();
        return std::unique_ptr<RecordingWriter>(std::move(writer));
    } catch (const std::bad_alloc&) {
        return out_of_memory();
    }
}

Result<std::unique_ptr<RecordingReader>> RecordingReader::open(const std::string& path) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        const int err = errno;
        return sys_error(err == EACCES ? Errc::kPermission : Errc::kIo, err, "open recording " + path);
    }
    auto reader = std::make_unique<FileRecordingReader>(fd, path);
    if (Status status = reader->start(); !status) return std::move(status).take_error();
    return std::unique_ptr<RecordingReader>(std::move(reader));
}

}  // namespace sf
