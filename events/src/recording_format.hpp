// The byte layout of recording files, shared by the writer and the reader.
// docs/recording-format.md is the normative description; keep the two in step.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>

namespace sf::recording_format {

static_assert(std::endian::native == std::endian::little || std::endian::native == std::endian::big);

inline constexpr uint32_t kVersion = 1;

// PNG-style: a non-ASCII first byte and CR LF / ^Z / LF catch text-mode transfers and `cat` mistakes.
inline constexpr uint8_t kFileMagic[8] = {0x89, 'S', 'F', 'R', '\r', '\n', 0x1a, '\n'};
inline constexpr size_t kFilePrefixBytes = 16;           // magic, version, header body size
inline constexpr uint32_t kMaxHeaderBodyBytes = 1u << 20;

inline constexpr uint8_t kChunkMagic[4] = {'S', 'F', 'C', 'K'};
inline constexpr size_t kChunkHeaderBytes = 44;
enum class Codec : uint8_t { kStored = 0, kZstd = 1 };

// Bounds both sides: the writer never makes a bigger chunk, the reader never allocates more for
// one, whatever a damaged length field says.
inline constexpr uint32_t kMaxChunkRawBytes = 64u << 20;
inline constexpr size_t kEventFrameBytes = 5;   // kind u8 + body length u32

// Offsets inside the chunk header.
inline constexpr size_t kChunkCodecAt = 4;
inline constexpr size_t kChunkStoredSizeAt = 8;
inline constexpr size_t kChunkRawSizeAt = 12;
inline constexpr size_t kChunkEventCountAt = 16;
inline constexpr size_t kChunkPayloadCrcAt = 20;
inline constexpr size_t kChunkMinTimeAt = 24;
inline constexpr size_t kChunkMaxTimeAt = 32;
inline constexpr size_t kChunkHeaderCrcAt = 40;

template <class T>
inline T byte_swap_if_big_endian(T value) {
    if constexpr (std::endian::native == std::endian::big && sizeof(T) > 1) {
        if constexpr (sizeof(T) == 2) return static_cast<T>(__builtin_bswap16(static_cast<uint16_t>(value)));
        else if constexpr (sizeof(T) == 4) return static_cast<T>(__builtin_bswap32(static_cast<uint32_t>(value)));
        else return static_cast<T>(__builtin_bswap64(static_cast<uint64_t>(value)));
    }
    return value;
}

template <class T>
inline void store_le(uint8_t* out, T value) {
    value = byte_swap_if_big_endian(value);
    std::memcpy(out, &value, sizeof(T));
}

template <class T>
inline T load_le(const uint8_t* in) {
    T value;
    std::memcpy(&value, in, sizeof(T));
    return byte_swap_if_big_endian(value);
}

// A growable byte buffer that reports allocation failure instead of throwing, and never
// zero-fills: the writer runs inside the JVM and appends ~16 KB per sample.
class ByteBuffer {
public:
    ByteBuffer() = default;
    ByteBuffer(const ByteBuffer&) = delete;
    ByteBuffer& operator=(const ByteBuffer&) = delete;
    ~ByteBuffer() { std::free(data_); }

    bool reserve(size_t capacity) {
        if (capacity <= capacity_) return true;
        void* grown = std::realloc(data_, capacity);
        if (grown == nullptr) return false;
        data_ = static_cast<uint8_t*>(grown);
        capacity_ = capacity;
        return true;
    }
    // Room for `count` more bytes at the end, or nullptr when memory ran out.
    uint8_t* append(size_t count) {
        if (size_ + count > capacity_) {
            size_t wanted = capacity_ == 0 ? 4096 : capacity_;
            while (wanted < size_ + count) wanted *= 2;
            if (!reserve(wanted)) return nullptr;
        }
        uint8_t* out = data_ + size_;
        size_ += count;
        return out;
    }
    void resize_down(size_t size) {
        if (size < size_) size_ = size;
    }
    void clear() { size_ = 0; }
    uint8_t* data() { return data_; }
    const uint8_t* data() const { return data_; }
    size_t size() const { return size_; }
    size_t capacity() const { return capacity_; }

private:
    uint8_t* data_ = nullptr;
    size_t size_ = 0;
    size_t capacity_ = 0;
};

}  // namespace sf::recording_format
