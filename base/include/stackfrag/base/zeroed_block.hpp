// Zero-filled memory whose pages cost nothing until they are touched: large blocks come straight
// from mmap (the kernel's zero page until written), small ones from calloc.
#pragma once

#include <cstddef>

namespace sf {

// Tables sized for the most they may hold (a flat hash map, a per-code-byte scratch) fault in only
// the pages they use, and a freed one goes back whole: a vector writes every byte at its
// allocation, and on the 2-CPU VM a fresh page costs ~12 us, ~9 us even when asked for in bulk.
class ZeroedBlock {
public:
    ZeroedBlock() = default;
    // `bytes` zero bytes; throws std::bad_alloc when there is no memory (as a vector would).
    explicit ZeroedBlock(size_t bytes);
    ~ZeroedBlock();
    ZeroedBlock(ZeroedBlock&& other) noexcept;
    ZeroedBlock& operator=(ZeroedBlock&& other) noexcept;
    ZeroedBlock(const ZeroedBlock&) = delete;
    ZeroedBlock& operator=(const ZeroedBlock&) = delete;

    void* data() const { return data_; }
    size_t size() const { return size_; }

private:
    void release();
    void* data_ = nullptr;
    size_t size_ = 0;
    bool mapped_ = false;
};

}  // namespace sf
