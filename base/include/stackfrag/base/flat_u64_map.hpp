// A hash map from non-zero 64-bit keys (addresses, jmethodIDs) to small values, stored inline in one
// array with linear probing: an insert allocates nothing and a lookup is one probe sequence in one
// array, where a node-based map allocates and chases a pointer per entry. No erase: a caller that
// retires an entry stores a value that says so. (Boost 1.74, Debian 12's, has no flat hash map.)
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

namespace sf {

// Starts loading the cache line at `address`. GCC's -O3 drops a __builtin_prefetch whose result
// nothing reads (it did in CodeMap::apply_batch, while keeping others): the instruction itself
// cannot be dropped.
inline void prefetch_line(const void* address) {
    asm volatile("prefetcht0 %0" : : "m"(*static_cast<const char*>(address)));
}

template <class V>
class FlatU64Map {
public:
    FlatU64Map() { slots_.resize(kMinSlots); }

    // Room for `count` entries without growing.
    void reserve(size_t count) {
        size_t wanted = kMinSlots;
        while (wanted < count * 2) wanted *= 2;
        if (wanted > slots_.size()) rehash(wanted);
    }
    size_t size() const { return size_; }

    V* find(uint64_t key) {
        if (key == 0) return nullptr;
        Slot& slot = slots_[position(key)];
        return slot.key == key ? &slot.value : nullptr;
    }
    const V* find(uint64_t key) const {
        if (key == 0) return nullptr;
        const Slot& slot = slots_[position(key)];
        return slot.key == key ? &slot.value : nullptr;
    }
    // The value of `key`, inserted as `value` if absent; whether it was inserted. `key` must not be 0.
    std::pair<V*, bool> try_emplace(uint64_t key, const V& value) {
        size_t at = position(key);
        if (slots_[at].key == key) return {&slots_[at].value, false};
        if ((size_ + 1) * 2 > slots_.size()) {
            rehash(slots_.size() * 2);
            at = position(key);
        }
        slots_[at] = Slot{key, value};
        ++size_;
        return {&slots_[at].value, true};
    }
    // Starts loading the cache line where `key`'s probe begins: a caller that knows the next keys
    // (a batch of inserts) overlaps their cache misses instead of taking them one after another.
    void prefetch(uint64_t key) const { prefetch_line(&slots_[home(key)]); }
    // The value of `key`, inserted value-initialized if absent. `key` must not be 0.
    V& operator[](uint64_t key) { return *try_emplace(key, V{}).first; }

private:
    static constexpr size_t kMinSlots = 16;
    struct Slot {
        uint64_t key = 0;   // 0: free
        V value{};
    };
    // The slot holding `key`, or the free slot where it would go.
    size_t home(uint64_t key) const {
        uint64_t h = key * 0x9E3779B97F4A7C15ull;
        h ^= h >> 29;
        return h & (slots_.size() - 1);
    }
    size_t position(uint64_t key) const {
        const size_t mask = slots_.size() - 1;
        for (size_t i = home(key);; i = (i + 1) & mask) {
            if (slots_[i].key == key || slots_[i].key == 0) return i;
        }
    }
    void rehash(size_t slots) {
        std::vector<Slot> old(slots);
        old.swap(slots_);
        for (const Slot& slot : old) {
            if (slot.key != 0) slots_[position(slot.key)] = slot;
        }
    }

    std::vector<Slot> slots_;
    size_t size_ = 0;
};

}  // namespace sf
