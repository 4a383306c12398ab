// Breadcrumb thunks called from C++: every argument class (integer registers, xmm registers, stack
// slots of both), return values in rax, rdx:rax, xmm0 and xmm0:xmm1, the variadic al, callee-saved
// registers, the record the callee sees above its frame, and the record cleared after the return.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdarg>
#include <cstdint>
#include <cstring>
#include <thread>
#include <vector>

#include "breadcrumb_thunks.hpp"
#include "stackfrag/decoder/breadcrumb.hpp"

namespace bc = sf::breadcrumb;
using namespace sf::agent::breadcrumbs;

namespace {

ThunkPool& pool() {
    static ThunkPool p;
    return p;
}

template <class F>
F* thunk_for(F* function, uint32_t stack_slots) {
    sf::Result<void*> made = pool().make(reinterpret_cast<void*>(function), stack_slots);
    REQUIRE(made.ok());
    return reinterpret_cast<F*>(*made);
}

// What the callee found: the record nearest above its own frame. Only the record's payload is
// kept: a bc::Record value starts with the magic words, and a copy of one left in a caller's frame
// (a temporary of `Seen{}`, say) would be found by the next scan as if a thunk had written it.
struct Seen {
    bool found = false;
    uint64_t address = 0;
    uint64_t java_sp = 0, java_pc = 0, java_fp = 0;
    uint64_t word_below_java_sp = 0;
};
Seen g_seen;

// Walks up from this frame like the decoder does from a native sp; 4 KB is far more than the
// frames between here and the thunk, and stays inside the stack. The scan reads the whole stack on
// purpose, including what ASan poisons between the callers' locals, so it is not instrumented.
__attribute__((noinline, no_sanitize_address)) void look_for_record() {
    auto* p = reinterpret_cast<const volatile uint64_t*>(__builtin_frame_address(0));
    g_seen.found = false;
    for (int i = 0; i < 512; ++i, ++p) {
        if (p[0] == bc::kMagic0 && p[1] == bc::kMagic1) {
            g_seen.found = true;
            g_seen.address = reinterpret_cast<uint64_t>(p);
            g_seen.java_sp = p[2];
            g_seen.java_pc = p[3];
            g_seen.java_fp = p[4];
            g_seen.word_below_java_sp = *reinterpret_cast<const volatile uint64_t*>(g_seen.java_sp - 8);
            return;
        }
    }
}

uint64_t read_word(uint64_t address) { return *reinterpret_cast<const volatile uint64_t*>(address); }

// 8 ints (6 in registers, 2 on the stack), 10 doubles (8 in xmm, 2 on the stack), 4 longs (stack),
// interleaved so that register and stack order differ from the parameter order.
using Mixed = double(int, double, int, double, int, double, int, double, int, double, int, double, int, double,
                     int, double, double, long, double, long, long, long);
double g_mixed_args[22];
__attribute__((noinline)) double mixed(int i0, double d0, int i1, double d1, int i2, double d2, int i3, double d3, int i4,
                                       double d4, int i5, double d5, int i6, double d6, int i7, double d7, double d8,
                                       long l0, double d9, long l1, long l2, long l3) {
    const double all[] = {double(i0), d0, double(i1), d1, double(i2), d2, double(i3), d3, double(i4), d4, double(i5),
                          d5, double(i6), d6, double(i7), d7, d8, double(l0), d9, double(l1), double(l2), double(l3)};
    std::memcpy(g_mixed_args, all, sizeof all);
    look_for_record();
    return d0 * 1.5 + double(l3);
}

using Longs = long(long, long, long, long, long, long, long, long, long, long, long, long);
__attribute__((noinline)) long longs(long a, long b, long c, long d, long e, long f, long g, long h, long i, long j,
                                     long k, long l) {
    look_for_record();
    return a + 2 * b + 3 * c + 4 * d + 5 * e + 6 * f + 7 * g + 8 * h + 9 * i + 10 * j + 11 * k + 12 * l;
}

using Floats = float(float, float, float, float, float, float, float, float, float, float, float);
__attribute__((noinline)) float floats(float a, float b, float c, float d, float e, float f, float g, float h, float i,
                                       float j, float k) {
    return a + 2 * b + 3 * c + 4 * d + 5 * e + 6 * f + 7 * g + 8 * h + 9 * i + 10 * j + 11 * k;
}

struct TwoLongs {
    long a, b;
};
using Pair = TwoLongs(long, long);
__attribute__((noinline)) TwoLongs pair(long a, long b) { return {a * 3, b * 5}; }

struct TwoDoubles {
    double a, b;
};
using DPair = TwoDoubles(double, double);
__attribute__((noinline)) TwoDoubles dpair(double a, double b) { return {a + 0.25, b - 0.25}; }

// al tells a variadic callee how many vector registers carry arguments; the thunk must keep it.
using Vsum = double(int, ...);
__attribute__((noinline)) double vsum(int n, ...) {
    va_list ap;
    va_start(ap, n);
    double total = 0;
    for (int k = 0; k < n; ++k) total += va_arg(ap, double) * (k + 1);
    va_end(ap);
    return total;
}

// Calls `entry` with rbx, rbp and r12-r15 set to known values; 1 if all of them survived.
extern "C" uint64_t sf_test_call_preserving(void* entry);
asm(R"(
    .text
    .globl sf_test_call_preserving
    .type sf_test_call_preserving, @function
sf_test_call_preserving:
    push %rbx
    push %r12
    push %r13
    push %r14
    push %r15
    push %rbp
    sub $8, %rsp
    movabs $0x1111111111111111, %rbx
    movabs $0x2222222222222222, %r12
    movabs $0x3333333333333333, %r13
    movabs $0x4444444444444444, %r14
    movabs $0x5555555555555555, %r15
    movabs $0x6666666666666666, %rbp
    call *%rdi
    xor %eax, %eax
    movabs $0x1111111111111111, %rcx
    cmp %rcx, %rbx
    jne 1f
    movabs $0x2222222222222222, %rcx
    cmp %rcx, %r12
    jne 1f
    movabs $0x3333333333333333, %rcx
    cmp %rcx, %r13
    jne 1f
    movabs $0x4444444444444444, %rcx
    cmp %rcx, %r14
    jne 1f
    movabs $0x5555555555555555, %rcx
    cmp %rcx, %r15
    jne 1f
    movabs $0x6666666666666666, %rcx
    cmp %rcx, %rbp
    jne 1f
    mov $1, %eax
1:
    add $8, %rsp
    pop %rbp
    pop %r15
    pop %r14
    pop %r13
    pop %r12
    pop %rbx
    ret
    .size sf_test_call_preserving, .-sf_test_call_preserving
)");

// Clobbers every callee-saved register the way an optimised callee may (saving and restoring them).
__attribute__((noinline)) void clobber_callee_saved() {
    asm volatile("xor %%ebx, %%ebx; xor %%r12d, %%r12d; xor %%r13d, %%r13d; xor %%r14d, %%r14d; xor %%r15d, %%r15d"
                 ::: "rbx", "r12", "r13", "r14", "r15");
}

}  // namespace

TEST_CASE("jni_arg_shape counts integer and SSE arguments of a JNI implementation") {
    auto shape = [](const char* sig) {
        sf::Result<ArgShape> s = jni_arg_shape(sig);
        REQUIRE(s.ok());
        return *s;
    };
    CHECK(shape("()V").integer_args == 2);
    CHECK(shape("()V").stack_slots() == 0);
    const ArgShape mixed_shape = shape("(IJZBCS[I[[Ljava/lang/String;Ljava/lang/Object;FD[D)D");
    CHECK(mixed_shape.integer_args == 2 + 10);   // arrays of double are references
    CHECK(mixed_shape.sse_args == 2);
    CHECK(mixed_shape.stack_slots() == 6);
    CHECK(shape("(DDDDDDDDDD)V").stack_slots() == 2);
    CHECK(shape("(IIII)V").stack_slots() == 0);
    CHECK(shape("(IIIII)V").stack_slots() == 1);
    for (const char* bad : {"", "V", "(", "(I", "(Q)V", "(Ljava/lang/String)V", "([)V", "(L;)V"}) {
        INFO(bad);
        CHECK_FALSE(jni_arg_shape(bad).ok());
    }
}

TEST_CASE("encoded thunks are sized by their stack arguments") {
    const size_t base = encode_thunk(0x1234, 0).size();
    CHECK(encode_thunk(0x1234, 5).size() == base + 5 * 15);   // a load and a store per slot
    const std::vector<uint8_t> code = encode_thunk(0x1122334455667788ull, 0);
    CHECK(code.front() == 0x55);   // push rbp
    CHECK(code.back() == 0xC3);    // ret
    uint64_t target = 0x1122334455667788ull;
    CHECK(std::search(code.begin(), code.end(), reinterpret_cast<uint8_t*>(&target),
                      reinterpret_cast<uint8_t*>(&target) + 8) != code.end());
}

TEST_CASE("a thunk passes register and stack arguments of both classes exactly") {
    // 12 integer arguments (2 ints + 4 longs on the stack) and 10 doubles (2 on the stack).
    Mixed* t = thunk_for(&mixed, 8);
    const double r = t(1, 0.5, 2, 1.25, 3, 2.5, 4, 3.75, 5, 4.5, 6, 5.25, 7, 6.5, 8, 7.75, 8.125, 900000000001L, 9.0625,
                       -2L, 3L, 1L << 40);
    const double expected[] = {1, 0.5, 2, 1.25, 3, 2.5, 4, 3.75, 5, 4.5, 6, 5.25, 7, 6.5, 8, 7.75, 8.125,
                               900000000001.0, 9.0625, -2, 3, double(1L << 40)};
    for (int k = 0; k < 22; ++k) {
        INFO("argument " << k);
        CHECK(g_mixed_args[k] == expected[k]);
    }
    CHECK(r == 0.5 * 1.5 + double(1L << 40));

    Longs* tl = thunk_for(&longs, 6);
    CHECK(tl(1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12) == longs(1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12));
    CHECK(tl(-1, 1L << 33, 3, -4, 5, 6, 7, -8, 9, 10, 1L << 50, 12) ==
          longs(-1, 1L << 33, 3, -4, 5, 6, 7, -8, 9, 10, 1L << 50, 12));

    Floats* tf = thunk_for(&floats, 3);
    CHECK(tf(1, 2, 3, 4, 5, 6, 7, 8, 9.5f, 10.25f, 11.125f) == floats(1, 2, 3, 4, 5, 6, 7, 8, 9.5f, 10.25f, 11.125f));
}

TEST_CASE("a thunk returns rdx:rax and xmm0:xmm1 pairs unchanged") {
    Pair* tp = thunk_for(&pair, 0);
    const TwoLongs p = tp(7, -9);
    CHECK(p.a == 21);
    CHECK(p.b == -45);
    DPair* td = thunk_for(&dpair, 0);
    const TwoDoubles d = td(1.0, 2.0);
    CHECK(d.a == 1.25);
    CHECK(d.b == 1.75);
}

TEST_CASE("a thunk keeps al for variadic callees") {
    // 10 doubles: 8 in xmm registers (al = 8), 2 on the stack.
    Vsum* tv = thunk_for(&vsum, 2);
    const double direct = vsum(10, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0);
    CHECK(tv(10, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0) == direct);
    CHECK(tv(3, 0.5, 0.25, 0.125) == vsum(3, 0.5, 0.25, 0.125));
}

TEST_CASE("a thunk preserves the callee-saved registers") {
    void* t = reinterpret_cast<void*>(thunk_for(&clobber_callee_saved, 0));
    CHECK(sf_test_call_preserving(t) == 1);
    CHECK(sf_test_call_preserving(reinterpret_cast<void*>(&clobber_callee_saved)) == 1);
}

__attribute__((noinline)) long call_longs_through(Longs* t, uint64_t& caller_fp) {
    caller_fp = reinterpret_cast<uint64_t>(__builtin_frame_address(0));
    const long r = t(1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12);
    asm volatile("" ::: "memory");
    return r + 1;
}

TEST_CASE("the callee finds the record above its frame, and it is cleared after the return") {
    Longs* t = thunk_for(&longs, 6);
    uint64_t caller_fp = 0;
    g_seen = Seen{};
    CHECK(call_longs_through(t, caller_fp) == longs(1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12) + 1);
    REQUIRE(g_seen.found);
    const Seen& r = g_seen;
    // java_sp is the caller's sp after the call: the return address sits just below it.
    CHECK(g_seen.word_below_java_sp == r.java_pc);
    CHECK(r.java_sp > g_seen.address);
    CHECK(r.java_sp == g_seen.address - kRecordFromEntrySp + 8);
    CHECK(r.java_sp <= caller_fp);
    CHECK(r.java_fp == caller_fp);   // the caller's rbp at the call
    const auto caller = reinterpret_cast<uint64_t>(&call_longs_through);
    CHECK(r.java_pc > caller);
    CHECK(r.java_pc < caller + 512);
    CHECK(read_word(g_seen.address) != bc::kMagic0);   // invalidated on return
}

TEST_CASE("without a thunk the callee finds no record") {
    g_seen = Seen{};
    CHECK(longs(1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12) == 650);
    CHECK_FALSE(g_seen.found);
}

TEST_CASE("thunks made concurrently all work, and the pool knows its own code") {
    std::vector<void*> made(64);
    std::vector<std::thread> threads;
    for (int k = 0; k < 4; ++k) {
        threads.emplace_back([&, k] {
            for (int i = k; i < 64; i += 4) {
                sf::Result<void*> t = pool().make(reinterpret_cast<void*>(&longs), static_cast<uint32_t>(6 + i % 3));
                made[static_cast<size_t>(i)] = t.ok() ? *t : nullptr;
            }
        });
    }
    for (std::thread& th : threads) th.join();
    for (void* t : made) {
        REQUIRE(t != nullptr);
        CHECK(pool().contains(t));
        CHECK(reinterpret_cast<Longs*>(t)(1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1) == 78);
    }
    CHECK_FALSE(pool().contains(reinterpret_cast<void*>(&longs)));
    CHECK(pool().thunks() >= 64);
    CHECK_FALSE(pool().make(nullptr, 0).ok());
    CHECK_FALSE(pool().make(reinterpret_cast<void*>(&longs), kMaxStackSlots + 1).ok());
}

TEST_CASE("a thunk with the most stack slots still calls through") {
    // Copying more slots than the callee takes is harmless: the caller's frame lies above.
    Longs* t = thunk_for(&longs, kMaxStackSlots / 8);
    CHECK(t(1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12) == 650);
}
