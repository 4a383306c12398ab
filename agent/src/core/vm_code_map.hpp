// JVM-independent pieces of the VM capture: turning JVMTI CompiledMethodLoad inline records into
// CodeLoad scopes, classifying nmethods, reading HotSpot segment maps, filtering interpreter
// codelets. Kept apart from agent/src/jvm so that unit tests can exercise them without a JVM.
#pragma once

#include <jvmti.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "stackfrag/events/events.hpp"

namespace sf::agent {

// Whether an InterpreterCodelet description marks a method entry, where the top frame may still
// be under construction (hotspot-frames.md §a.4).
bool is_method_entry_codelet(std::string_view description);

// Blob names of the two nmethod flavours on JDK 17, which has no CodeBlob::_kind.
bool is_nmethod_blob_name(std::string_view name);
bool is_native_nmethod_blob_name(std::string_view name);

// What a "native nmethod" or a Java nmethod is for the decoder (§b.4): native nmethods with a frame
// are JNI wrappers, frameless ones are method-handle intrinsics; entry_bci != -1 means OSR.
CodeKind classify_nmethod(bool is_native, int32_t frame_size_words, int32_t entry_bci);

// The segment index of the block holding segment `index` in a CodeHeap segment map (§b.5):
// 0xFF marks a free or unused segment; other values are hops back towards the block start.
// nullopt when the map says "free" or the hops leave the map.
std::optional<size_t> segmap_block_start(const uint8_t* segmap, size_t segment_count, size_t index);

struct CompileInfoStats {
    uint32_t inline_records = 0;
    uint32_t pcs = 0;
    uint32_t pcs_outside_code = 0;   // PCStackInfo.pc not in [code_begin, code_end]
    uint32_t empty_pcs = 0;          // numstackframes <= 0
};

// Appends the JVMTI_CMLR_INLINE_INFO records of a CompiledMethodLoad compile_info chain to
// load.scopes / load.frames (pc_offset from load.code_begin, sorted, innermost frame first) and
// every jmethodID met there and not yet in `methods_seen` to it, once (past 192 distinct methods,
// each as met; the caller sorts duplicates out). load.code_begin and load.code_end must be set.
// A chain longer than max_records is cut (defends against garbage).
CompileInfoStats append_inline_scopes(const void* compile_info, CodeLoad& load,
                                      std::vector<jmethodID>& methods_seen,
                                      size_t max_records = 64);

}  // namespace sf::agent
