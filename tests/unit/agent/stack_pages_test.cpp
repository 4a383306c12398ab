// touch_stack_pages_above_current_frame: a thread whose callers reserved stack they never wrote
// (as HotSpot's Threads::create_vm does on JDK 25) has pages above its sp that are not present, and
// perf's copy of a sample's stack stops at the first of them. After the call, every page from the
// caller's frame to the stack's top is present (mincore), so a fragment copied from there is whole.
#include <catch2/catch.hpp>

#include <pthread.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "stack_pages.hpp"

namespace {

constexpr size_t kStackSize = 1 << 20;
constexpr uintptr_t kPage = 4096;

struct Outcome {
    bool got_top = false;
    size_t absent_before = 0;   // pages from the inner frame to the top, not present
    size_t absent_after = 0;
    size_t touched = 0;
};

size_t absent_pages(uintptr_t from, uintptr_t top) {
    const uintptr_t start = from & ~(kPage - 1);
    std::vector<unsigned char> present((top - start + kPage - 1) / kPage);
    if (mincore(reinterpret_cast<void*>(start), top - start, present.data()) != 0) return SIZE_MAX;
    size_t absent = 0;
    for (unsigned char p : present) absent += (p & 1) == 0 ? 1 : 0;
    return absent;
}

__attribute__((noinline)) void inner(Outcome& out) {
    const uintptr_t here = reinterpret_cast<uintptr_t>(__builtin_frame_address(0));
    pthread_attr_t attr;
    void* low = nullptr;
    size_t size = 0;
    if (pthread_getattr_np(pthread_self(), &attr) != 0) return;
    out.got_top = pthread_attr_getstack(&attr, &low, &size) == 0;
    pthread_attr_destroy(&attr);
    if (!out.got_top) return;
    const uintptr_t top = reinterpret_cast<uintptr_t>(low) + size;
    out.absent_before = absent_pages(here, top);
    out.touched = sf::agent::touch_stack_pages_above_current_frame();
    out.absent_after = absent_pages(here, top);
}

// A frame of 64 KB that is reserved, not written: its pages stay absent until something reads them.
__attribute__((noinline)) void reserve_unwritten(Outcome& out) {
    char reserved[64 * 1024];
    asm volatile("" : : "r"(reserved) : "memory");
    inner(out);
}

void* thread_main(void* arg) {
    reserve_unwritten(*static_cast<Outcome*>(arg));
    return nullptr;
}

}  // namespace

TEST_CASE("a thread's stack pages from its frame to its top are present after the touch", "[stack_pages]") {
    // A stack of fresh anonymous pages (no page is present until touched), as a new thread's is.
    void* stack = mmap(nullptr, kStackSize, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    REQUIRE(stack != MAP_FAILED);
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    REQUIRE(pthread_attr_setstack(&attr, stack, kStackSize) == 0);
    Outcome out;
    pthread_t thread;
    REQUIRE(pthread_create(&thread, &attr, &thread_main, &out) == 0);
    pthread_join(thread, nullptr);
    pthread_attr_destroy(&attr);
    munmap(stack, kStackSize);

    INFO("absent before " << out.absent_before << ", after " << out.absent_after << ", pages read " << out.touched);
    REQUIRE(out.got_top);
    // The 64 KB frame above left ~15 pages absent: the situation the touch is for.
    REQUIRE(out.absent_before >= 8);
    REQUIRE(out.absent_before != SIZE_MAX);
    CHECK(out.absent_after == 0);
    CHECK(out.touched >= 16);
}
