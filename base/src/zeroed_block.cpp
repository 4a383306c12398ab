#include "stackfrag/base/zeroed_block.hpp"

#include <sys/mman.h>

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

ZeroedBlock::ZeroedBlock(ZeroedBlock&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)),
      mapped_(std::exchange(other.mapped_, false)) {}

ZeroedBlock& ZeroedBlock::operator=(ZeroedBlock&& other) noexcept {
    if (this != &other) {
        release();
        data_ = std::exchange(other.data_, nullptr);
        size_ = std::exchange(other.size_, 0);
        mapped_ = std::exchange(other.mapped_, false);
    }
    return *this;
}

void ZeroedBlock::release() {
    if (data_ == nullptr) return;
    if (mapped_) {
        munmap(data_, size_);
    } else {
        std::free(data_);
    }
    data_ = nullptr;
    size_ = 0;
    mapped_ = false;
}

}  // namespace sf
