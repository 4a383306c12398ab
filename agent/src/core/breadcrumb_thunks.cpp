#include "breadcrumb_thunks.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

// The record layout is the decoder's; a relative include keeps one definition without making the
// agent core depend on the decoder library (the header is self-contained).
#include "stackfrag/decoder/breadcrumb.hpp"

namespace sf::agent::breadcrumbs {

namespace bc = sf::breadcrumb;
static_assert(bc::kWords == 5 && bc::kJavaSpOffset == 16 && bc::kJavaPcOffset == 24 && bc::kJavaFpOffset == 32,
              "encode_thunk writes the record word by word: update it with the layout");

namespace {

// Record words relative to rbp (record at rbp-40, lowest address first).
constexpr int8_t kMagic0Slot = kRecordFromFp + 0;
constexpr int8_t kMagic1Slot = kRecordFromFp + 8;
constexpr int8_t kJavaSpSlot = kRecordFromFp + bc::kJavaSpOffset;
constexpr int8_t kJavaPcSlot = kRecordFromFp + bc::kJavaPcOffset;
constexpr int8_t kJavaFpSlot = kRecordFromFp + bc::kJavaFpOffset;
static_assert(kJavaFpSlot == -8, "the record ends just below the saved rbp");

constexpr size_t kChunkBytes = 64 * 1024;
constexpr size_t kThunkAlign = 16;   // entry points on a fetch-friendly boundary

class Emitter {
public:
    void byte(uint8_t b) { out.push_back(b); }
    void bytes(std::initializer_list<uint8_t> list) { out.insert(out.end(), list.begin(), list.end()); }
    void imm32(uint32_t v) {
        for (int i = 0; i < 4; ++i) byte(static_cast<uint8_t>(v >> (8 * i)));
    }
    void imm64(uint64_t v) {
        for (int i = 0; i < 8; ++i) byte(static_cast<uint8_t>(v >> (8 * i)));
    }
    // movabs r11, imm64
    void mov_r11_imm64(uint64_t v) {
        bytes({0x49, 0xBB});
        imm64(v);
    }
    // mov [rbp+disp8], r11
    void store_r11_fp(int8_t disp) { bytes({0x4C, 0x89, 0x5D, static_cast<uint8_t>(disp)}); }
    // mov r11, [rbp+disp8]
    void load_r11_fp(int8_t disp) { bytes({0x4C, 0x8B, 0x5D, static_cast<uint8_t>(disp)}); }
    // mov r11, [rbp+disp32]
    void load_r11_fp32(int32_t disp) {
        bytes({0x4C, 0x8B, 0x9D});
        imm32(static_cast<uint32_t>(disp));
    }
    // mov [rsp+disp32], r11
    void store_r11_sp32(int32_t disp) {
        bytes({0x4C, 0x89, 0x9C, 0x24});
        imm32(static_cast<uint32_t>(disp));
    }

    std::vector<uint8_t> out;
};

}  // namespace

Result<ArgShape> jni_arg_shape(std::string_view sig) {
    auto bad = [&](const char* why) {
        return make_error(Errc::kInvalidArgument, "method signature '" + std::string(sig) + "': " + why);
    };
    if (sig.empty() || sig[0] != '(') return bad("does not start with '('");
    ArgShape shape;
    shape.integer_args = 2;   // JNIEnv*, then the receiver or the class
    size_t i = 1;
    while (true) {
        if (i >= sig.size()) return bad("no ')'");
        const char c = sig[i];
        if (c == ')') break;
        size_t dims = 0;
        while (i < sig.size() && sig[i] == '[') {
            ++dims;
            ++i;
        }
        if (i >= sig.size()) return bad("array of nothing");
        switch (sig[i]) {
            case 'F':
            case 'D':
                if (dims == 0) ++shape.sse_args;
                else ++shape.integer_args;
                ++i;
                break;
            case 'Z': case 'B': case 'C': case 'S': case 'I': case 'J':
                ++shape.integer_args;
                ++i;
                break;
            case 'L': {
                const size_t end = sig.find(';', i);
                if (end == std::string_view::npos || end == i + 1) return bad("unterminated class name");
                ++shape.integer_args;
                i = end + 1;
                break;
            }
            default: return bad("unknown type character");
        }
    }
    return shape;
}

std::vector<uint8_t> encode_thunk(uint64_t target, uint32_t stack_slots) {
    // Frame below rbp: the 40-byte record plus the copied arguments, a multiple of 16 so that rsp
    // keeps the alignment the caller gave (rbp = entry rsp - 8 is 16-aligned for an ABI caller).
    const uint32_t frame = (40 + 8 * stack_slots + 15) & ~15u;
    Emitter e;
    e.byte(0x55);                      // push rbp
    e.bytes({0x48, 0x89, 0xE5});       // mov rbp, rsp
    e.bytes({0x48, 0x81, 0xEC});       // sub rsp, frame
    e.imm32(frame);
    // Payload first and magic0 last: a sample taken between these stores (on this same thread, so
    // in program order) sees either no record or a complete one.
    e.bytes({0x4C, 0x8D, 0x5D, 0x10});   // lea r11, [rbp+16]: the caller's sp after the call
    e.store_r11_fp(kJavaSpSlot);
    e.load_r11_fp(8);                    // the return address
    e.store_r11_fp(kJavaPcSlot);
    e.load_r11_fp(0);                    // the caller's rbp
    e.store_r11_fp(kJavaFpSlot);
    e.mov_r11_imm64(bc::kMagic1);
    e.store_r11_fp(kMagic1Slot);
    e.mov_r11_imm64(bc::kMagic0);
    e.store_r11_fp(kMagic0Slot);
    // The callee finds stack argument i at its entry rsp + 8 + 8i, as it would without the thunk.
    for (uint32_t i = 0; i < stack_slots; ++i) {
        e.load_r11_fp32(static_cast<int32_t>(16 + 8 * i));
        e.store_r11_sp32(static_cast<int32_t>(8 * i));
    }
    e.mov_r11_imm64(target);
    e.bytes({0x41, 0xFF, 0xD3});       // call r11
    // A record left behind would name a Java frame that no longer calls native code.
    e.bytes({0x48, 0xC7, 0x45, static_cast<uint8_t>(kMagic0Slot)});   // mov qword [rbp-40], 0
    e.imm32(0);
    e.byte(0xC9);                      // leave
    e.byte(0xC3);                      // ret
    return std::move(e.out);
}

Result<ThunkPool::Chunk*> ThunkPool::chunk_with_room(size_t bytes) {
    if (!chunks_.empty()) {
        Chunk& last = chunks_.back();
        if (last.write != last.exec && last.size - last.used >= bytes) return &last;
    }
    const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    if (!dual_mapping_failed_) {
        const size_t size = std::max(kChunkBytes, (bytes + page - 1) / page * page);
        const int fd = memfd_create("stackfrag-breadcrumbs", MFD_CLOEXEC);
        if (fd >= 0 && ftruncate(fd, static_cast<off_t>(size)) == 0) {
            void* w = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
            void* x = w == MAP_FAILED ? MAP_FAILED : mmap(nullptr, size, PROT_READ | PROT_EXEC, MAP_SHARED, fd, 0);
            close(fd);
            if (x != MAP_FAILED) {
                chunks_.push_back(Chunk{static_cast<uint8_t*>(w), static_cast<uint8_t*>(x), size, 0});
                bytes_mapped_ += 2 * size;
                return &chunks_.back();
            }
            if (w != MAP_FAILED) munmap(w, size);
        } else if (fd >= 0) {
            close(fd);
        }
        // noexec /dev/shm policies or seccomp: fall back for good rather than retry every bind.
        dual_mapping_failed_ = true;
    }
    const size_t size = (bytes + page - 1) / page * page;
    void* m = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) {
        return sys_error(Errc::kResourceLimit, errno, "mmap of " + std::to_string(size) + " bytes for a breadcrumb thunk");
    }
    chunks_.push_back(Chunk{static_cast<uint8_t*>(m), static_cast<uint8_t*>(m), size, 0});
    bytes_mapped_ += size;
    return &chunks_.back();
}

Result<void*> ThunkPool::make(void* target, uint32_t stack_slots) {
    if (target == nullptr) return make_error(Errc::kInvalidArgument, "breadcrumb thunk for a null function");
    if (stack_slots > kMaxStackSlots) {
        return make_error(Errc::kInvalidArgument, "breadcrumb thunk with " + std::to_string(stack_slots) +
                                                      " stack arguments (at most " + std::to_string(kMaxStackSlots) + ")");
    }
    const std::vector<uint8_t> code = encode_thunk(reinterpret_cast<uint64_t>(target), stack_slots);
    const size_t bytes = (code.size() + kThunkAlign - 1) / kThunkAlign * kThunkAlign;
    std::lock_guard<std::mutex> lock(mutex_);
    Result<Chunk*> got = chunk_with_room(bytes);
    if (!got.ok()) return std::move(got).take_error();
    Chunk& chunk = **got;
    std::memcpy(chunk.write + chunk.used, code.data(), code.size());
    // int3 padding: a stray jump into the gap traps instead of sliding into the next thunk.
    std::memset(chunk.write + chunk.used + code.size(), 0xCC, bytes - code.size());
    uint8_t* entry = chunk.exec + chunk.used;
    chunk.used += bytes;
    if (chunk.write == chunk.exec) {
        if (mprotect(chunk.write, chunk.size, PROT_READ | PROT_EXEC) != 0) {
            const int err = errno;
            // Leave the page unusable rather than writable-and-referenced.
            chunk.used = chunk.size;
            return sys_error(Errc::kInternal, err, "mprotect of a breadcrumb thunk to read-execute");
        }
        chunk.used = chunk.size;   // sealed: never written again
    }
    ++thunks_;
    return static_cast<void*>(entry);
}

bool ThunkPool::contains(const void* address) const {
    const auto* p = static_cast<const uint8_t*>(address);
    std::lock_guard<std::mutex> lock(mutex_);
    for (const Chunk& c : chunks_) {
        if (p >= c.exec && p < c.exec + c.used) return true;
    }
    return false;
}

size_t ThunkPool::thunks() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return thunks_;
}

size_t ThunkPool::bytes_mapped() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return bytes_mapped_;
}

}  // namespace sf::agent::breadcrumbs
