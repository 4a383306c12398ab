// Breadcrumb thunks: small generated x86-64 functions that sit between a JNI caller (a native
// wrapper or the interpreter's native entry) and the real native function. Each one leaves a
// breadcrumb record (decoder/include/stackfrag/decoder/breadcrumb.hpp) on the stack, calls the
// real function with every argument where the System V ABI expects it, and clears the record's
// first magic word before returning, so the decoder can get from unwindable native code back to
// the Java frame that called it. Pure machine-code generation and memory management: nothing here
// needs a JVM, so it is unit-tested by calling C functions through thunks.
//
// Frame of a thunk, E = rsp at entry (E+0 holds the caller's return address):
//   E-8       saved rbp                      <- rbp
//   E-16      java_fp   (the caller's rbp)
//   E-24      java_pc   (the return address)
//   E-32      java_sp   (E+8: the caller's sp once the call returns)
//   E-40      magic1
//   E-48      magic0                         <- record, rbp-40
//   ...       padding to 16 bytes
//   rsp+8i    copy of the caller's stack argument i (E+8+8i), i < stack_slots
// Only r11 (a scratch register no argument uses) and rbp (restored) are touched, so rdi..r9,
// xmm0..7, al and every callee-saved register reach the callee unchanged, and rax/rdx/xmm0/xmm1
// come back unchanged.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string_view>
#include <vector>

#include "stackfrag/base/result.hpp"
#include "stackfrag/decoder/breadcrumb.hpp"   // the record layout the decoder reads

namespace sf::agent::breadcrumbs {

// Bytes from the thunk's rbp to the record's first word, and from the entry rsp.
inline constexpr int kRecordFromFp = sf::breadcrumb::kThunkRecordFromFp;
inline constexpr int kRecordFromEntrySp = -48;

// How many arguments of each System V class a call passes, and thus how many 8-byte stack slots.
struct ArgShape {
    uint32_t integer_args = 0;   // pointers, jint..jlong, references
    uint32_t sse_args = 0;       // jfloat, jdouble
    uint32_t stack_slots() const {
        return (integer_args > 6 ? integer_args - 6 : 0) + (sse_args > 8 ? sse_args - 8 : 0);
    }
};

// The C arguments of a JNI implementation of a method with this descriptor, "(IJD[Ljava/lang/Object;)V":
// JNIEnv* and the jobject/jclass come first. Errors for anything that is not a method descriptor.
Result<ArgShape> jni_arg_shape(std::string_view method_signature);

// The thunk's machine code for calling `target` with `stack_slots` stack-passed arguments. Position
// independent (the target is an absolute immediate), so it may be copied anywhere.
std::vector<uint8_t> encode_thunk(uint64_t target, uint32_t stack_slots);

// Largest stack_slots accepted (JNI methods have at most 255 parameters).
inline constexpr uint32_t kMaxStackSlots = 512;

// Executable memory for thunks, never unmapped: a thunk may still be running (or be returned to)
// at any time, including after the agent shut down. W^X: no page is ever writable and executable
// at once. Each chunk is a memfd mapped twice, read-write for the generator and read-execute for
// callers, so thunks can be appended to a page other threads are executing. Without memfd, every
// thunk gets pages of its own that are written, then made read-execute. Thread-safe.
class ThunkPool {
public:
    ThunkPool() = default;
    ThunkPool(const ThunkPool&) = delete;
    ThunkPool& operator=(const ThunkPool&) = delete;

    // The entry of a new thunk calling `target`; errors leave nothing half-made reachable.
    Result<void*> make(void* target, uint32_t stack_slots);
    // A thunk made by this pool (to not wrap a thunk in another thunk).
    bool contains(const void* address) const;
    size_t thunks() const;
    size_t bytes_mapped() const;

private:
    struct Chunk {
        uint8_t* write = nullptr;   // equals exec when the chunk is single-mapped (sealed at once)
        uint8_t* exec = nullptr;
        size_t size = 0;
        size_t used = 0;
    };
    Result<Chunk*> chunk_with_room(size_t bytes);

    mutable std::mutex mutex_;
    std::vector<Chunk> chunks_;
    bool dual_mapping_failed_ = false;
    size_t thunks_ = 0;
    size_t bytes_mapped_ = 0;
};

}  // namespace sf::agent::breadcrumbs
