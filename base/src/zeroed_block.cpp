#include "stackfrag/base/zeroed_block.hpp"

#include "stackfrag/base/huge_page_allocator.hpp"

#include <sys/mman.h>

#include <algorithm>
#include <cstdlib>
#include <new>
#include <utility>

namespace sf {
namespace {
// From here up a block is its own mapping: glibc would mmap it too at its default threshold, but
// its dynamic threshold rises after the first large free, and a block from the heap is memset whole.
constexpr size_t kMapFrom = 128 * 1024;
}  // namespace

ZeroedBlock::ZeroedBlock(size_t bytes) : size_(bytes) {
    if (bytes == 0) return;
    prepared_.reset(new uint64_t[(bytes + kPageBytes * 64 - 1) / (kPageBytes * 64)]());
    if (bytes >= huge_pages::kBytes) {
        // Big enough for huge pages: the tables this size are hash maps, whose entries land on
        // every page of them (a 2 MB page faults once, where its 512 small ones fault 512 times).
        data_ = huge_pages::map(bytes);
        mapped_ = true;
        return;
    }
    if (bytes >= kMapFrom) {
        void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (p == MAP_FAILED) throw std::bad_alloc();
        data_ = p;
        mapped_ = true;
        return;
    }
    data_ = std::calloc(bytes, 1);
    if (data_ == nullptr) throw std::bad_alloc();
}

ZeroedBlock::~ZeroedBlock() { release(); }

void ZeroedBlock::prepare_page(size_t page) {
    // A calloc'd block need not start on a page boundary, so its page may span two of the
    // kernel's: write the first and the last byte. Zeros over zeros: only the fault matters.
    auto* const bytes = static_cast<volatile unsigned char*>(data_);
    const size_t first = page * kPageBytes;
    const size_t last = std::min(size_, first + kPageBytes) - 1;
    bytes[first] = 0;
    bytes[last] = 0;
    prepared_[page / 64] |= uint64_t{1} << (page % 64);
}

ZeroedBlock::ZeroedBlock(ZeroedBlock&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)),
      mapped_(std::exchange(other.mapped_, false)), prepared_(std::move(other.prepared_)) {}

ZeroedBlock& ZeroedBlock::operator=(ZeroedBlock&& other) noexcept {
    if (this != &other) {
        release();
        data_ = std::exchange(other.data_, nullptr);
        size_ = std::exchange(other.size_, 0);
        mapped_ = std::exchange(other.mapped_, false);
        prepared_ = std::move(other.prepared_);
    }
    return *this;
}

void ZeroedBlock::release() {
    if (data_ == nullptr) return;
    if (mapped_ && size_ >= huge_pages::kBytes) {
        huge_pages::unmap(data_, size_);
    } else if (mapped_) {
        munmap(data_, size_);
    } else {
        std::free(data_);
    }
    data_ = nullptr;
    size_ = 0;
    mapped_ = false;
    prepared_.reset();
}

}  // namespace sf
