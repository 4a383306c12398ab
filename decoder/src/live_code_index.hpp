#pragma once
// Live compiled code by address in buckets of 16 KB: a lookup reads its bucket's slot, the bucket's
// few ranges and the code, where a walk down a tree of thousands of entries missed the cache per level.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace sf::detail {

// Ranges [begin, end) that do not overlap, each with a value (the map's CompiledCode). Covers the
// span the ranges were inserted at while it stays within kMaxBuckets buckets (HotSpot reserves
// 240 MB of code cache by default: 15,360); a range beyond that turns the index off for good, and
// find() then says it does not know (the caller searches its own map).
template <class T>
class LiveCodeIndex {
public:
    static constexpr unsigned kBucketBits = 14;
    static constexpr size_t kMaxBuckets = size_t{1} << 16;   // 1 GB of address space

    struct Answer {
        bool known = false;     // false: not indexed (off, or outside every range inserted)
        const T* value = nullptr;
    };

    void insert(uint64_t begin, uint64_t end, const T* value) {
        if (off_ || end <= begin) return;
        if (!cover(begin >> kBucketBits, (end - 1) >> kBucketBits)) return;
        for (uint64_t b = begin >> kBucketBits; b <= (end - 1) >> kBucketBits; ++b) {
            std::vector<Range>& bucket = buckets_[b - first_];
            auto at = bucket.begin();
            while (at != bucket.end() && at->begin < begin) ++at;
            bucket.insert(at, Range{begin, end, value});
        }
    }

    void erase(uint64_t begin, uint64_t end, const T* value) {
        if (off_ || end <= begin || buckets_.empty()) return;
        const uint64_t lo = std::max<uint64_t>(begin >> kBucketBits, first_);
        const uint64_t hi = std::min<uint64_t>((end - 1) >> kBucketBits, last());
        for (uint64_t b = lo; b <= hi; ++b) {
            std::vector<Range>& bucket = buckets_[b - first_];
            for (auto it = bucket.begin(); it != bucket.end(); ++it) {
                if (it->begin == begin && it->value == value) {
                    bucket.erase(it);
                    break;
                }
            }
        }
    }

    Answer find(uint64_t pc) const {
        const uint64_t b = pc >> kBucketBits;
        if (off_ || b < first_ || b - first_ >= buckets_.size()) return Answer{};
        for (const Range& r : buckets_[b - first_]) {
            if (pc < r.begin) break;
            if (pc < r.end) return Answer{true, r.value};
        }
        return Answer{true, nullptr};
    }

    // Indexes [begin, end) at once (the VM's code cache, when known), within kMaxBuckets.
    void reserve(uint64_t begin, uint64_t end) {
        if (off_ || end <= begin) return;
        uint64_t lo = begin >> kBucketBits, hi = (end - 1) >> kBucketBits;
        if (!buckets_.empty()) {
            lo = std::min(lo, first_);
            hi = std::max(hi, last());
        }
        if (hi - lo + 1 <= kMaxBuckets) relayout(lo, hi);
    }

    bool off() const { return off_; }

private:
    struct Range {
        uint64_t begin;
        uint64_t end;
        const T* value;
    };

    uint64_t last() const { return first_ + buckets_.size() - 1; }

    // Makes buckets [lo, hi] indexed, moving the existing ones; false (and off) past kMaxBuckets.
    // Grows by at least the span it has (code is installed address after address: one bucket at a
    // time would move every bucket again for each load).
    bool cover(uint64_t lo, uint64_t hi) {
        if (!buckets_.empty() && lo >= first_ && hi <= last()) return true;
        const uint64_t need_first = buckets_.empty() ? lo : std::min(lo, first_);
        const uint64_t need_last = buckets_.empty() ? hi : std::max(hi, last());
        if (need_last - need_first + 1 > kMaxBuckets) {
            off_ = true;
            buckets_.clear();
            buckets_.shrink_to_fit();
            return false;
        }
        uint64_t new_first = need_first, new_last = need_last;
        if (!buckets_.empty()) {
            const uint64_t slack = std::max<uint64_t>(buckets_.size(), 64);
            const uint64_t room = kMaxBuckets - (need_last - need_first + 1);
            if (lo < first_) new_first -= std::min({slack, room, need_first});
            else new_last += std::min(slack, room);
        }
        relayout(new_first, new_last);
        return true;
    }

    // Buckets [new_first, new_last], which contain the present ones, with theirs moved in.
    void relayout(uint64_t new_first, uint64_t new_last) {
        std::vector<std::vector<Range>> grown(new_last - new_first + 1);
        for (size_t i = 0; i < buckets_.size(); ++i) grown[first_ - new_first + i] = std::move(buckets_[i]);
        buckets_ = std::move(grown);
        first_ = new_first;
    }

    std::vector<std::vector<Range>> buckets_;   // ranges overlapping each bucket, by begin
    uint64_t first_ = 0;                        // the first bucket's number (address >> kBucketBits)
    bool off_ = false;
};

}  // namespace sf::detail
