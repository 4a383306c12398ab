// Zero-filled memory whose pages cost nothing until they are touched: large blocks come straight
// from mmap (the kernel's zero page until written), from 2 MB up on huge pages, small ones from calloc.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

namespace sf {

// Tables sized for the most they may hold (a flat hash map, a per-code-byte scratch) fault in only
// the pages they use, and a freed one goes back whole: a vector writes every byte at its
// allocation, and on the 2-CPU VM a fresh page costs ~12 us, ~9 us even when asked for in bulk.
//
// Users write a page before they read it (`prepare`), and treat an unprepared page as zeros
// without reading it. Read first, a page is mapped to the kernel's zero page, and the first write
// then replaces that mapping: a second fault, whose TLB shootdown interrupts every CPU the process
// runs on (in the decoder, 11 % of its time on xalan at 1 kHz, and the JVM's threads pay the IPIs).
class ZeroedBlock {
public:
    static constexpr size_t kPageBytes = 4096;

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

    // Whether the page around byte `offset` (pages counted from data()) was prepared: an
    // unprepared one holds only zeros and must not be read.
    bool prepared(size_t offset) const {
        const size_t page = offset / kPageBytes;
        return (prepared_[page / 64] >> (page % 64)) & 1;
    }
    // Makes the page around byte `offset` safe to read and write: its first access is a write.
    void prepare(size_t offset) {
        if (!prepared(offset)) prepare_page(offset / kPageBytes);
    }
    // prepare() for every page that bytes [offset, offset + bytes) touch (bytes > 0).
    void prepare(size_t offset, size_t bytes) {
        prepare(offset);
        prepare(offset + bytes - 1);
    }

private:
    void prepare_page(size_t page);
    void release();
    void* data_ = nullptr;
    size_t size_ = 0;
    bool mapped_ = false;
    std::unique_ptr<uint64_t[]> prepared_;   // a bit per page
};

}  // namespace sf
