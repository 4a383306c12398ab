// A hash map from non-zero 64-bit keys (addresses, jmethodIDs) to small values, stored inline in one
// array with linear probing: an insert allocates nothing and a lookup is one probe sequence in one
// array, where a node-based map allocates and chases a pointer per entry. No erase: a caller that
// retires an entry stores a value that says so. (Boost 1.74, Debian 12's, has no flat hash map.)
// The slots are zeroed pages (ZeroedBlock): a map reserved for tens of thousands of entries costs
// only the pages its entries land in, and a lookup reads only pages that an entry was written to.
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <utility>

#include "stackfrag/base/zeroed_block.hpp"

namespace sf {

// Starts loading the cache line at `address`. GCC's -O3 drops a __builtin_prefetch whose result
// nothing reads (it did in CodeMap::apply_batch, while keeping others): the instruction itself
// cannot be dropped.
inline void prefetch_line(const void* address) {
    asm volatile("prefetcht0 %0" : : "m"(*static_cast<const char*>(address)));
}

// V: trivially copyable, and all zero bytes are its value-initialized value (a free slot's).
template <class V>
class FlatU64Map {
    static_assert(std::is_trivially_copyable_v<V>, "slots live in zeroed pages and move by copy");

public:
    FlatU64Map() { rehash(kMinSlots); }
    FlatU64Map(const FlatU64Map& other)
        : storage_(other.slot_count_ * sizeof(Slot)), slot_count_(other.slot_count_), size_(other.size_) {
        for (size_t i = 0; i < slot_count_; ++i) {
            if (other.key_at(i) != 0) writable_slot(i) = other.slots()[i];   // free slots stay untouched pages
        }
    }
    FlatU64Map(FlatU64Map&& other) noexcept { swap(other); }
    FlatU64Map& operator=(FlatU64Map other) noexcept {
        swap(other);
        return *this;
    }
    void swap(FlatU64Map& other) noexcept {
        std::swap(storage_, other.storage_);
        std::swap(slot_count_, other.slot_count_);
        std::swap(size_, other.size_);
    }

    // Room for `count` entries without growing.
    void reserve(size_t count) {
        size_t wanted = kMinSlots;
        while (wanted * kMaxLoadNum < count * kMaxLoadDen) wanted *= 2;
        if (wanted > slot_count_) rehash(wanted);
    }
    size_t size() const { return size_; }

    V* find(uint64_t key) {
        if (key == 0) return nullptr;
        const size_t at = position(key);
        return key_at(at) == key ? &slots()[at].value : nullptr;
    }
    const V* find(uint64_t key) const {
        if (key == 0) return nullptr;
        const size_t at = position(key);
        return key_at(at) == key ? &slots()[at].value : nullptr;
    }
    // The value of `key`, inserted as `value` if absent; whether it was inserted. `key` must not be 0.
    std::pair<V*, bool> try_emplace(uint64_t key, const V& value) {
        size_t at = position(key);
        if (key_at(at) == key) return {&slots()[at].value, false};
        if ((size_ + 1) * kMaxLoadDen > slot_count_ * kMaxLoadNum) {
            rehash(slot_count_ * 2);
            at = position(key);
        }
        Slot& slot = writable_slot(at);
        slot = Slot{key, value};
        ++size_;
        return {&slot.value, true};
    }
    // Starts loading the cache line where `key`'s probe begins: a caller that knows the next keys
    // (a batch of inserts) overlaps their cache misses instead of taking them one after another.
    void prefetch(uint64_t key) const { prefetch_line(&slots()[home(key)]); }
    // The value of `key`, inserted value-initialized if absent. `key` must not be 0.
    V& operator[](uint64_t key) { return *try_emplace(key, V{}).first; }

private:
    static constexpr size_t kMinSlots = 16;
    // At most 3/4 full. The keys hash evenly, so a full map has written every page of its slots,
    // each a page fault (1.5-14 us on this VM); linear probing at 3/4 still ends most probes within
    // the home slot's cache line.
    static constexpr size_t kMaxLoadNum = 3, kMaxLoadDen = 4;
    struct Slot {
        uint64_t key = 0;   // 0: free
        V value{};
    };
    // The slot holding `key`, or the free slot where it would go.
    size_t home(uint64_t key) const {
        uint64_t h = key * 0x9E3779B97F4A7C15ull;
        h ^= h >> 29;
        return h & (slot_count_ - 1);
    }
    size_t position(uint64_t key) const {
        const size_t mask = slot_count_ - 1;
        for (size_t i = home(key);; i = (i + 1) & mask) {
            const uint64_t at = key_at(i);
            if (at == key || at == 0) return i;
        }
    }
    void rehash(size_t count) {
        ZeroedBlock old_storage(count * sizeof(Slot));
        std::swap(old_storage, storage_);
        const auto* const old = static_cast<const Slot*>(old_storage.data());
        const size_t old_count = slot_count_;
        slot_count_ = count;
        for (size_t i = 0; i < old_count; ++i) {
            if (old_storage.prepared(i * sizeof(Slot)) && old[i].key != 0) writable_slot(position(old[i].key)) = old[i];
        }
    }
    Slot* slots() const { return static_cast<Slot*>(storage_.data()); }
    // Slot i's key, 0 (free) without reading it where its page was never written.
    uint64_t key_at(size_t i) const { return storage_.prepared(i * sizeof(Slot)) ? slots()[i].key : 0; }
    Slot& writable_slot(size_t i) {
        storage_.prepare(i * sizeof(Slot), sizeof(Slot));
        return slots()[i];
    }

    ZeroedBlock storage_;     // slot_count_ slots
    size_t slot_count_ = 0;
    size_t size_ = 0;
};

}  // namespace sf
