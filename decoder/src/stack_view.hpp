// The translation view: reads of the sampled thread's stack addresses served from the copied
// fragment, bounds-checked so that no input can make the decoder read outside the copy.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace sf::detail {

class StackView {
public:
    StackView() = default;
    StackView(uint64_t base, const uint8_t* data, size_t size) : base_(base), data_(data), size_(size) {
        // A fragment that would wrap around the address space is cut short rather than trusted.
        if (base_ + size_ < base_) size_ = UINT64_MAX - base_;
    }

    uint64_t begin() const { return base_; }
    const uint8_t* data() const { return data_; }
    uint64_t end() const { return base_ + size_; }
    size_t size() const { return size_; }

    bool contains(uint64_t addr, uint64_t len = 8) const {
        if (addr < base_) return false;
        uint64_t off = addr - base_;
        return off <= size_ && size_ - off >= len;
    }
    bool read(uint64_t addr, uint64_t& value) const {
        if (!contains(addr, 8)) return false;
        std::memcpy(&value, data_ + (addr - base_), 8);
        return true;
    }
    bool read_bytes(uint64_t addr, void* out, uint64_t len) const {
        if (!contains(addr, len)) return false;
        std::memcpy(out, data_ + (addr - base_), len);
        return true;
    }

private:
    uint64_t base_ = 0;
    const uint8_t* data_ = nullptr;
    size_t size_ = 0;
};

}  // namespace sf::detail
