// Fragment buffers handed back for reuse: which one a sample of a given size gets.
// Header-only so that the reader (Sampler) and the decoder's return path (LiveProfile) pick alike.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

namespace sf::agent {

// How many of the most recently returned buffers a pick looks at for one that is large enough.
inline constexpr size_t kSpareFitScan = 16;

// Moves a spare from `pool` into `out`: one of the last kSpareFitScan whose capacity holds
// `min_capacity` if there is one, else the last. A buffer that is too small is reallocated by its
// taker, and its pages, faulted in once, go back to the allocator while a fresh allocation is
// faulted in again (~4 pages at 8-13 us each on the 2-CPU VM): on xalan at 1 ms, 350-400 of a
// run's ~1,000 new buffers were replacements of a smaller spare taken from the back when a larger
// one lay a few places before it. False (and `out` untouched) if the pool is empty.
inline bool take_spare(std::vector<std::vector<uint8_t>>& pool, size_t min_capacity, std::vector<uint8_t>& out) {
    if (pool.empty()) return false;
    const size_t scan = std::min(pool.size(), kSpareFitScan);
    for (size_t i = 0; i < scan; ++i) {
        std::vector<uint8_t>& candidate = pool[pool.size() - 1 - i];
        if (candidate.capacity() >= min_capacity) {
            std::swap(candidate, pool.back());
            break;
        }
    }
    out.swap(pool.back());
    pool.pop_back();
    return true;
}

}  // namespace sf::agent
