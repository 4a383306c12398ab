// A page directory over a sorted table of addresses (a symbol table, an unwind table): where to
// start and stop a binary search for an address, so that a lookup touches a few entries of the
// table instead of a cold path through all of it. Answers exactly what a search of the whole table does.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace sf {

class PageIndex {
public:
    // `key(i)` for i in [0, n): the table's addresses, ascending (equal ones allowed). A table that
    // is not sorted gets no index (usable() false): a search of it has no answer to keep.
    template <typename Key>
    void build(size_t n, Key key) {
        first_.clear();
        base_ = 0;
        n_ = n;
        if (n == 0 || n >= UINT32_MAX) return;
        for (size_t i = 1; i < n; ++i) {
            if (key(i) < key(i - 1)) return;
        }
        base_ = key(0);
        const uint64_t span = key(n - 1) - base_;
        // A page per entry or so, at least 4 KB: the table's spread decides, never its outliers alone.
        bits_ = 12;
        while ((span >> bits_) > 2 * n + 1024) ++bits_;
        const size_t pages = static_cast<size_t>(span >> bits_) + 2;
        first_.assign(pages, 0);
        size_t i = 0;
        for (size_t p = 0; p < pages; ++p) {
            const uint64_t page_start = base_ + (static_cast<uint64_t>(p) << bits_);
            while (i < n && key(i) < page_start) ++i;
            first_[p] = static_cast<uint32_t>(i);
        }
    }
    bool usable() const { return !first_.empty(); }

    // The slice [lo, hi) of the table that holds the upper bound of `address` (the first entry
    // above it): every entry before lo is <= address, every entry from hi on is above it.
    // Without an index: the whole table.
    void slice(uint64_t address, size_t& lo, size_t& hi) const {
        if (!usable()) {
            lo = 0;
            hi = n_;
            return;
        }
        if (address < base_) {
            lo = hi = 0;
            return;
        }
        const uint64_t p = (address - base_) >> bits_;
        if (p + 1 >= first_.size()) {
            lo = first_.back();
            hi = n_;
            return;
        }
        lo = first_[p];
        hi = first_[p + 1];
    }

    // The index of the first entry above `address` (std::upper_bound over the whole table).
    template <typename Key>
    size_t upper_bound(uint64_t address, Key key) const {
        size_t lo = 0, hi = 0;
        slice(address, lo, hi);
        while (lo < hi) {
            const size_t mid = lo + (hi - lo) / 2;
            if (key(mid) <= address) lo = mid + 1;
            else hi = mid;
        }
        return lo;
    }

private:
    uint64_t base_ = 0;
    unsigned bits_ = 12;
    size_t n_ = 0;
    std::vector<uint32_t> first_;   // per page: the first entry at or above its start
};

}  // namespace sf
