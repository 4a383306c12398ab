// The HotSpot VMStructs names the agent's VM capture reads, and in which JDK structure layout each
// one is required. This is the one place that knows the names; offsets, sizes and static addresses
// are always resolved from the running VM's own tables (shared/docs/hotspot-frames.md §0.1, App. A).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace sf::hotspot {

// Which family of structure layouts the tables describe. The name is the JDK the family was
// verified on: 17 = CompiledMethod with absolute code addresses in the blob header; 25 = no
// CompiledMethod, header offsets instead of addresses, CodeBlob::_kind, C-heap immutable data.
enum class StructLayout : uint8_t { kJdk17 = 17, kJdk25 = 25 };

// Bit mask: in which layouts an entry must be present for the capture to work.
inline constexpr uint8_t kIn17 = 1;
inline constexpr uint8_t kIn25 = 2;
inline constexpr uint8_t kInBoth = kIn17 | kIn25;
inline constexpr uint8_t kOptional = 0;

inline constexpr uint8_t layout_bit(StructLayout layout) {
    return layout == StructLayout::kJdk17 ? kIn17 : kIn25;
}

struct FieldName {
    std::string_view type;
    std::string_view field;
    uint8_t required_in;
};

// Every struct entry (instance offset or static address) the capture uses. The enumerator order
// is the order of kFieldNames.
enum class Field : uint16_t {
    // CodeBlob header (both layouts, different offsets and widths).
    kCodeBlobSize,
    kCodeBlobFrameCompleteOffset,
    kCodeBlobFrameSize,
    kCodeBlobName,
    // 17: absolute code bounds in the header.
    kCodeBlobCodeBegin,
    kCodeBlobCodeEnd,
    // 25: code bounds as offsets from the blob, and an explicit kind.
    kCodeBlobCodeOffset,
    kCodeBlobDataOffset,
    kCodeBlobKind,
    // nmethod (17 keeps half of it in CompiledMethod).
    kCompiledMethodMethod,
    kCompiledMethodDeoptHandlerBegin,
    kNmethodMethod,
    kNmethodDeoptHandlerOffset,
    kNmethodEntryPoint,
    kNmethodVerifiedEntryPoint,
    kNmethodEntryOffset,
    kNmethodVerifiedEntryOffset,
    kNmethodImmutableData,
    kNmethodEntryBci,
    kNmethodOrigPcOffset,
    kNmethodCompLevel,
    // CodeCache heaps and their segment maps (§b.5).
    kCodeCacheHeaps,
    kCodeCacheLowBound,
    kCodeCacheHighBound,
    kCodeHeapMemory,
    kCodeHeapSegmap,
    kCodeHeapLog2SegmentSize,
    kVirtualSpaceLow,
    kVirtualSpaceHigh,
    kGrowableArrayLen,
    kGrowableArrayData,
    kHeapBlockLength,
    kHeapBlockUsed,
    // The template interpreter (§a.2).
    kAbstractInterpreterCode,
    kStubQueueStubBuffer,
    kStubQueueBufferLimit,
    kStubQueueQueueBegin,
    kStubQueueQueueEnd,
    kStubQueueNumberOfStubs,
    kInterpreterCodeletSize,
    kInterpreterCodeletDescription,
    // Entry frames (§d) and virtual-thread continuations.
    kStubRoutinesCallStubReturnAddress,
    kContinuationEntryReturnPc,
    // Methods (§a.1, §e).
    kMethodConstMethod,
    kConstMethodCodeSize,
    // Threads: Java thread -> OS tid.
    kJavaThreadOsThread,
    kThreadOsThread,
    kOsThreadThreadId,
    kCount
};

inline constexpr std::array<FieldName, static_cast<size_t>(Field::kCount)> kFieldNames = {{
    {"CodeBlob", "_size", kInBoth},
    {"CodeBlob", "_frame_complete_offset", kInBoth},
    {"CodeBlob", "_frame_size", kInBoth},
    {"CodeBlob", "_name", kInBoth},
    {"CodeBlob", "_code_begin", kIn17},
    {"CodeBlob", "_code_end", kIn17},
    {"CodeBlob", "_code_offset", kIn25},
    {"CodeBlob", "_data_offset", kIn25},
    {"CodeBlob", "_kind", kIn25},
    {"CompiledMethod", "_method", kIn17},
    {"CompiledMethod", "_deopt_handler_begin", kIn17},
    {"nmethod", "_method", kIn25},
    {"nmethod", "_deopt_handler_offset", kIn25},
    {"nmethod", "_entry_point", kIn17},
    {"nmethod", "_verified_entry_point", kIn17},
    {"nmethod", "_entry_offset", kIn25},
    {"nmethod", "_verified_entry_offset", kIn25},
    {"nmethod", "_immutable_data", kOptional},
    {"nmethod", "_entry_bci", kInBoth},
    {"nmethod", "_orig_pc_offset", kInBoth},
    {"nmethod", "_comp_level", kInBoth},
    {"CodeCache", "_heaps", kInBoth},
    {"CodeCache", "_low_bound", kInBoth},
    {"CodeCache", "_high_bound", kInBoth},
    {"CodeHeap", "_memory", kInBoth},
    {"CodeHeap", "_segmap", kInBoth},
    {"CodeHeap", "_log2_segment_size", kInBoth},
    {"VirtualSpace", "_low", kInBoth},
    {"VirtualSpace", "_high", kInBoth},
    {"GrowableArrayBase", "_len", kInBoth},
    {"GrowableArray<int>", "_data", kInBoth},
    {"HeapBlock::Header", "_length", kInBoth},
    {"HeapBlock::Header", "_used", kInBoth},
    {"AbstractInterpreter", "_code", kInBoth},
    {"StubQueue", "_stub_buffer", kInBoth},
    {"StubQueue", "_buffer_limit", kInBoth},
    {"StubQueue", "_queue_begin", kInBoth},
    {"StubQueue", "_queue_end", kInBoth},
    {"StubQueue", "_number_of_stubs", kInBoth},
    {"InterpreterCodelet", "_size", kInBoth},
    {"InterpreterCodelet", "_description", kInBoth},
    {"StubRoutines", "_call_stub_return_address", kInBoth},
    // JDK 21+ only; absent on 17, where there are no continuations to return through.
    {"ContinuationEntry", "_return_pc", kOptional},
    {"Method", "_constMethod", kInBoth},
    {"ConstMethod", "_code_size", kInBoth},
    // The OSThread pointer moved from JavaThread (17) to Thread (21+); JavaThread extends Thread,
    // so both are offsets into the same JavaThread object.
    {"JavaThread", "_osthread", kIn17},
    {"Thread", "_osthread", kIn25},
    {"OSThread", "_thread_id", kInBoth},
}};

// Type sizes the capture needs (VMTypes).
enum class TypeSize : uint8_t {
    kCodeBlob,
    kNmethod,
    kHeapBlock,
    kConstMethod,   // bytecodes start right after the ConstMethod header
    kCount
};

inline constexpr std::array<std::string_view, static_cast<size_t>(TypeSize::kCount)> kTypeNames = {{
    "CodeBlob",
    "nmethod",
    "HeapBlock",
    "ConstMethod",
}};

// Layout markers: present only in the 25 family / only in the 17 family.
inline constexpr FieldName kMarker25 = {"nmethod", "_immutable_data", kIn25};
inline constexpr FieldName kMarker25Kind = {"CodeBlob", "_kind", kIn25};
inline constexpr FieldName kMarker17 = {"CompiledMethod", "_method", kIn17};

// CodeBlobKind::Nmethod (25 family); on 17 the blob name tells nmethods apart (§b.4).
inline constexpr std::string_view kCodeBlobKindNmethodConstant = "CodeBlobKind::Nmethod";
inline constexpr std::string_view kNmethodBlobName = "nmethod";
inline constexpr std::string_view kNativeNmethodBlobName = "native nmethod";

// The BufferBlob holding the template interpreter, and the codelet descriptions that mark the
// frame-building method entries (§a.2, §a.4).
inline constexpr std::string_view kInterpreterBlobName = "Interpreter";
inline constexpr std::string_view kMethodEntryCodeletMarker = "method entry point";

// The JDK whose table layout a VM of feature release `jdk_major` is expected to follow for its
// interpreter frames: relativized interpreter frames and the 25-family scope encoding start at 21.
inline constexpr StructLayout closest_layout(int jdk_major) {
    return jdk_major >= 21 ? StructLayout::kJdk25 : StructLayout::kJdk17;
}

}  // namespace sf::hotspot
