// The HotSpot VMStructs names the agent's VM capture reads, and for which JDK rows (jdk_facts.hpp)
// each one is required. This is the one place that knows the names; offsets, sizes and static addresses
// are always resolved from the running VM's own tables (shared/docs/hotspot-frames.md §0.1, App. A).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "stackfrag/hotspot/jdk_facts.hpp"

namespace sf::hotspot {

// Bit masks over the rows of jdk_facts.hpp (kIn17, kIn21, kIn25): in which an entry must be present
// for the capture to work.
inline constexpr uint8_t kInAbsoluteHeader = kIn17 | kIn21;   // blob headers with code addresses
inline constexpr uint8_t kInAll = kIn17 | kIn21 | kIn25;
inline constexpr uint8_t kOptional = 0;

struct FieldName {
    std::string_view type;
    std::string_view field;
    uint8_t required_in;
};

// Every struct entry (instance offset or static address) the capture uses. The enumerator order
// is the order of kFieldNames.
enum class Field : uint16_t {
    // CodeBlob header (every row, different offsets and widths).
    kCodeBlobSize,
    kCodeBlobFrameCompleteOffset,
    kCodeBlobFrameSize,
    kCodeBlobName,
    // 17, 21: absolute code bounds in the header.
    kCodeBlobCodeBegin,
    kCodeBlobCodeEnd,
    // 25: code bounds as offsets from the blob, and an explicit kind.
    kCodeBlobCodeOffset,
    kCodeBlobDataOffset,
    kCodeBlobKind,
    // nmethod (17 and 21 keep half of it in CompiledMethod).
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
    {"CodeBlob", "_size", kInAll},
    {"CodeBlob", "_frame_complete_offset", kInAll},
    {"CodeBlob", "_frame_size", kInAll},
    {"CodeBlob", "_name", kInAll},
    {"CodeBlob", "_code_begin", kInAbsoluteHeader},
    {"CodeBlob", "_code_end", kInAbsoluteHeader},
    {"CodeBlob", "_code_offset", kIn25},
    {"CodeBlob", "_data_offset", kIn25},
    {"CodeBlob", "_kind", kIn25},
    {"CompiledMethod", "_method", kInAbsoluteHeader},
    {"CompiledMethod", "_deopt_handler_begin", kInAbsoluteHeader},
    {"nmethod", "_method", kIn25},
    {"nmethod", "_deopt_handler_offset", kIn25},
    {"nmethod", "_entry_point", kInAbsoluteHeader},
    {"nmethod", "_verified_entry_point", kInAbsoluteHeader},
    {"nmethod", "_entry_offset", kIn25},
    {"nmethod", "_verified_entry_offset", kIn25},
    {"nmethod", "_immutable_data", kOptional},
    {"nmethod", "_entry_bci", kInAll},
    {"nmethod", "_orig_pc_offset", kInAll},
    {"nmethod", "_comp_level", kInAll},
    {"CodeCache", "_heaps", kInAll},
    {"CodeCache", "_low_bound", kInAll},
    {"CodeCache", "_high_bound", kInAll},
    {"CodeHeap", "_memory", kInAll},
    {"CodeHeap", "_segmap", kInAll},
    {"CodeHeap", "_log2_segment_size", kInAll},
    {"VirtualSpace", "_low", kInAll},
    {"VirtualSpace", "_high", kInAll},
    {"GrowableArrayBase", "_len", kInAll},
    {"GrowableArray<int>", "_data", kInAll},
    {"HeapBlock::Header", "_length", kInAll},
    {"HeapBlock::Header", "_used", kInAll},
    {"AbstractInterpreter", "_code", kInAll},
    {"StubQueue", "_stub_buffer", kInAll},
    {"StubQueue", "_buffer_limit", kInAll},
    {"StubQueue", "_queue_begin", kInAll},
    {"StubQueue", "_queue_end", kInAll},
    {"StubQueue", "_number_of_stubs", kInAll},
    {"InterpreterCodelet", "_size", kInAll},
    {"InterpreterCodelet", "_description", kInAll},
    {"StubRoutines", "_call_stub_return_address", kInAll},
    // JDK 21+ only; absent on 17, where there are no continuations to return through.
    {"ContinuationEntry", "_return_pc", kOptional},
    {"Method", "_constMethod", kInAll},
    {"ConstMethod", "_code_size", kInAll},
    // The OSThread pointer moved from JavaThread (17, 21) to Thread (25); JavaThread extends Thread,
    // so both are offsets into the same JavaThread object.
    {"JavaThread", "_osthread", kInAbsoluteHeader},
    {"Thread", "_osthread", kIn25},
    {"OSThread", "_thread_id", kInAll},
}};

// Type sizes the capture needs (VMTypes).
enum class TypeSize : uint8_t {
    kCodeBlob,
    kNmethod,
    kHeapBlock,
    kConstMethod,   // bytecodes start right after the ConstMethod header
    kMethod,        // how far a read into a live Method may go
    kCount
};

inline constexpr std::array<std::string_view, static_cast<size_t>(TypeSize::kCount)> kTypeNames = {{
    "CodeBlob",
    "nmethod",
    "HeapBlock",
    "ConstMethod",
    "Method",
}};

// Markers of the blob header layout in the tables (BlobHeader in jdk_facts.hpp): present only with
// offsets in the header / only with absolute code addresses.
inline constexpr FieldName kMarkerOffsets = {"nmethod", "_immutable_data", kIn25};
inline constexpr FieldName kMarkerOffsetsKind = {"CodeBlob", "_kind", kIn25};
inline constexpr FieldName kMarkerAbsolute = {"CompiledMethod", "_method", kInAbsoluteHeader};

// CodeBlobKind::Nmethod (rows with blob_has_kind); elsewhere the blob name tells nmethods apart (§b.4).
inline constexpr std::string_view kCodeBlobKindNmethodConstant = "CodeBlobKind::Nmethod";
inline constexpr std::string_view kNmethodBlobName = "nmethod";
inline constexpr std::string_view kNativeNmethodBlobName = "native nmethod";

// The BufferBlob holding the template interpreter, and the codelet descriptions that mark the
// frame-building method entries (§a.2, §a.4).
inline constexpr std::string_view kInterpreterBlobName = "Interpreter";
inline constexpr std::string_view kMethodEntryCodeletMarker = "method entry point";

}  // namespace sf::hotspot
