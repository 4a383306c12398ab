// A stable sort of a table by a 64-bit address key in a few linear passes (least significant digit
// first, 11 bits a pass, only over the bits where the keys differ): for symbol tables read once per
// library, where a comparison sort of libjvm's ~58 k functions cost ~25 M instructions per process.
#pragma once

#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

namespace sf {

// Sorts `items` ascending by `key(item)`; items with equal keys keep their order (as std::stable_sort).
template <typename T, typename Key>
void radix_sort_by_key(std::vector<T>& items, Key key) {
    const size_t n = items.size();
    if (n < 2) return;
    uint64_t lowest = key(items[0]);
    uint64_t highest = lowest;
    bool sorted = true;
    for (size_t i = 1; i < n; ++i) {
        const uint64_t k = key(items[i]);
        sorted = sorted && k >= key(items[i - 1]);
        if (k < lowest) lowest = k;
        if (k > highest) highest = k;
    }
    if (sorted) return;
    constexpr unsigned kDigitBits = 11;
    constexpr size_t kBuckets = size_t{1} << kDigitBits;
    const unsigned span_bits = static_cast<unsigned>(std::bit_width(highest - lowest));
    std::vector<T> other(n);
    std::vector<T>* from = &items;
    std::vector<T>* to = &other;
    for (unsigned shift = 0; shift < span_bits; shift += kDigitBits) {
        std::array<size_t, kBuckets> start{};
        for (const T& item : *from) ++start[((key(item) - lowest) >> shift) & (kBuckets - 1)];
        size_t at = 0;
        for (size_t& bucket : start) at += std::exchange(bucket, at);
        for (T& item : *from) (*to)[start[((key(item) - lowest) >> shift) & (kBuckets - 1)]++] = std::move(item);
        std::swap(from, to);
    }
    if (from != &items) items = std::move(*from);
}

}  // namespace sf
