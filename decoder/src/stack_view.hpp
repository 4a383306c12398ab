// The translation view: reads of the sampled thread's stack addresses served from the copied
// fragment, bounds-checked so that no input can make the decoder read outside the copy.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace sf::detail {

// What a part of a walk asked of a view, kept so that the same questions put to another snapshot's
// view can be shown to get the same answers (incremental decoding, walk_journal.hpp): every range
// found inside must lie inside the other view too, every range found outside must stay outside, and
// the bytes read must be equal.
struct ViewAccess {
    uint64_t read_lo = UINT64_MAX, read_hi = 0;   // hull of the bytes read (found inside, too)
    uint64_t need_lo = UINT64_MAX;                // lowest address found inside without a read
    uint64_t need_hi = 0;                         // highest end of a range found inside without a read
    uint64_t miss_below_end = 0;                  // highest address + 1 found below the view
    uint64_t miss_above = UINT64_MAX;             // lowest end of a range found running past the end
};

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
        const bool inside = inside_view(addr, len);
        if (access_) note(addr, len, inside);
        return inside;
    }
    // addr < end(), as a question the access record keeps (only the end matters, not the begin).
    bool before_end(uint64_t addr) const {
        const bool before = addr < end();
        if (access_) {
            if (before) access_->need_hi = std::max(access_->need_hi, addr + 1);
            else access_->miss_above = std::min(access_->miss_above, addr + 1);
        }
        return before;
    }
    // One word: the walk's most frequent question (~80 a sample), kept small enough to be inlined
    // where read_bytes' general copy is not.
    [[gnu::always_inline]] bool read(uint64_t addr, uint64_t& value) const {
        if (!inside_view(addr, 8)) {
            if (access_) note(addr, 8, false);
            return false;
        }
        if (access_) note_read(addr, 8);
        std::memcpy(&value, data_ + (addr - base_), 8);
        return true;
    }
    bool read_bytes(uint64_t addr, void* out, uint64_t len) const {
        if (!inside_view(addr, len)) {
            if (access_) note(addr, len, false);
            return false;
        }
        if (access_) note_read(addr, len);
        std::memcpy(out, data_ + (addr - base_), len);
        return true;
    }

    // The bytes of [addr, addr + len) inside the view, read as one: null where the range is not
    // (asked as contains() would have been).
    const uint8_t* read_span(uint64_t addr, uint64_t len) const {
        if (!inside_view(addr, len)) {
            if (access_) note(addr, len, false);
            return nullptr;
        }
        if (access_) note_read(addr, len);
        return data_ + (addr - base_);
    }

    // Records every question from now on into `access` (null: stop recording).
    void record_into(ViewAccess* access) const { access_ = access; }

private:
    bool inside_view(uint64_t addr, uint64_t len) const {
        return addr >= base_ && addr - base_ <= size_ && size_ - (addr - base_) >= len;
    }
    // The read hull stands for "found inside" as well: one update per read.
    void note_read(uint64_t addr, uint64_t len) const {
        access_->read_lo = std::min(access_->read_lo, addr);
        access_->read_hi = std::max(access_->read_hi, addr + len);
    }
    void note(uint64_t addr, uint64_t len, bool inside) const {
        if (inside) {
            access_->need_lo = std::min(access_->need_lo, addr);
            access_->need_hi = std::max(access_->need_hi, addr + len);
        } else if (addr < base_) {
            access_->miss_below_end = std::max(access_->miss_below_end, addr + 1);
        } else {
            const uint64_t end = addr + len < addr ? UINT64_MAX : addr + len;   // saturates
            access_->miss_above = std::min(access_->miss_above, end);
        }
    }

    uint64_t base_ = 0;
    const uint8_t* data_ = nullptr;
    size_t size_ = 0;
    mutable ViewAccess* access_ = nullptr;
};

}  // namespace sf::detail
