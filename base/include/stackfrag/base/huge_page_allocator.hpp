// An allocator for arrays that grow large and are used densely (the calling context tree's nodes and
// child table): from 2 MB up each array is its own mapping that the kernel may back with huge pages.
#pragma once

#include <cstddef>
#include <new>

namespace sf {

// A 4 KB page's first touch costs a fault: ~12 us on the 2-CPU VM, whose paravirtual MMU makes
// every page-table change expensive. The live tree of a 17,000-sample jython profile grew to ~11 MB
// and took ~6,000 such faults in the decoder thread, a fifth of its CPU time. A 2 MB huge page
// costs one fault of ~0.15 ms there (the zeroing), 40 times less per byte. Below the huge page
// size an array gains nothing from a mapping of its own and comes from operator new.
namespace huge_pages {
inline constexpr size_t kBytes = size_t{2} << 20;
// `bytes` (>= kBytes) rounded up to whole huge pages, from a mapping aligned to a huge page and
// advised for them (MADV_HUGEPAGE: the default "madvise" mode of transparent huge pages backs only
// such ranges; with "never" they are plain pages). Throws std::bad_alloc when there is no memory.
void* map(size_t bytes);
void unmap(void* p, size_t bytes);
// Whether the kernel marked the mapping at `p` for huge pages (its VmFlags list "hg"): for tests.
bool advised(const void* p);
}  // namespace huge_pages

template <class T>
struct HugePageAllocator {
    using value_type = T;

    HugePageAllocator() noexcept = default;
    template <class U>
    HugePageAllocator(const HugePageAllocator<U>&) noexcept {}

    T* allocate(size_t n) {
        if (n > max_size()) throw std::bad_array_new_length();
        const size_t bytes = n * sizeof(T);
        if (bytes < huge_pages::kBytes) return static_cast<T*>(::operator new(bytes, std::align_val_t{alignof(T)}));
        return static_cast<T*>(huge_pages::map(bytes));
    }
    void deallocate(T* p, size_t n) noexcept {
        const size_t bytes = n * sizeof(T);
        if (bytes < huge_pages::kBytes) {
            ::operator delete(p, std::align_val_t{alignof(T)});
        } else {
            huge_pages::unmap(p, bytes);
        }
    }
    static constexpr size_t max_size() noexcept { return size_t(-1) / 2 / sizeof(T); }

    template <class U>
    bool operator==(const HugePageAllocator<U>&) const noexcept {
        return true;
    }
};

}  // namespace sf
