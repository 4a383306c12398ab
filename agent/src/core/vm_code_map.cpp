#include "vm_code_map.hpp"

#include <jvmticmlr.h>

#include <algorithm>

#include "stackfrag/hotspot/vm_layout.hpp"

namespace sf::agent {

bool is_method_entry_codelet(std::string_view description) {
    return description.find(hotspot::kMethodEntryCodeletMarker) != std::string_view::npos;
}

bool is_nmethod_blob_name(std::string_view name) {
    return name == hotspot::kNmethodBlobName || name == hotspot::kNativeNmethodBlobName;
}

bool is_native_nmethod_blob_name(std::string_view name) {
    return name == hotspot::kNativeNmethodBlobName;
}

CodeKind classify_nmethod(bool is_native, int32_t frame_size_words, int32_t entry_bci) {
    if (is_native) {
        return frame_size_words > 0 ? CodeKind::kNativeWrapper : CodeKind::kMethodHandleIntrinsic;
    }
    return entry_bci >= 0 ? CodeKind::kOsr : CodeKind::kNmethod;
}

std::optional<size_t> segmap_block_start(const uint8_t* segmap, size_t segment_count, size_t index) {
    constexpr uint8_t kFree = 0xFF;
    if (segmap == nullptr || index >= segment_count || segmap[index] == kFree) {
        return std::nullopt;
    }
    // Each hop moves back at least one segment, so segment_count hops bound any valid map.
    for (size_t hops = 0; hops <= segment_count; ++hops) {
        uint8_t back = segmap[index];
        if (back == 0) {
            return index;
        }
        if (back == kFree || back > index) {
            return std::nullopt;
        }
        index -= back;
    }
    return std::nullopt;
}

CompileInfoStats append_inline_scopes(const void* compile_info, CodeLoad& load,
                                      std::vector<jmethodID>& methods_seen, size_t max_records) {
    CompileInfoStats stats;
    size_t first_new_scope = load.scopes.size();
    auto header = static_cast<const jvmtiCompiledMethodLoadRecordHeader*>(compile_info);
    // Room for every pc and frame at once: a C2 method's records list hundreds of pcs, and growing
    // the vectors a doubling at a time copied them over and over inside the JVM's callback.
    size_t pcs = 0, frames = 0;
    auto* h = header;
    for (size_t n = 0; h != nullptr && n < max_records; ++n, h = h->next) {
        if (h->kind != JVMTI_CMLR_INLINE_INFO) continue;
        auto record = reinterpret_cast<const jvmtiCompiledMethodLoadInlineRecord*>(h);
        if (record->pcinfo == nullptr || record->numpcs <= 0) continue;
        pcs += static_cast<size_t>(record->numpcs);
        for (jint i = 0; i < record->numpcs; ++i) frames += static_cast<size_t>(std::max<jint>(record->pcinfo[i].numstackframes, 0));
    }
    load.scopes.reserve(load.scopes.size() + pcs);
    load.frames.reserve(load.frames.size() + frames);
    for (size_t n = 0; header != nullptr && n < max_records; ++n, header = header->next) {
        if (header->kind != JVMTI_CMLR_INLINE_INFO) {
            continue;
        }
        ++stats.inline_records;
        auto record = reinterpret_cast<const jvmtiCompiledMethodLoadInlineRecord*>(header);
        if (record->pcinfo == nullptr || record->numpcs <= 0) {
            continue;
        }
        for (jint i = 0; i < record->numpcs; ++i) {
            const PCStackInfo& info = record->pcinfo[i];
            ++stats.pcs;
            auto pc = reinterpret_cast<uint64_t>(info.pc);
            if (pc < load.code_begin || pc > load.code_end) {
                ++stats.pcs_outside_code;
                continue;
            }
            if (info.numstackframes <= 0 || info.methods == nullptr || info.bcis == nullptr) {
                ++stats.empty_pcs;
                continue;
            }
            PcScope scope;
            scope.pc_offset = static_cast<uint32_t>(pc - load.code_begin);
            scope.first = static_cast<uint32_t>(load.frames.size());
            scope.count = static_cast<uint32_t>(info.numstackframes);
            for (jint f = 0; f < info.numstackframes; ++f) {
                load.frames.push_back(
                    MethodBci{reinterpret_cast<uint64_t>(info.methods[f]), info.bcis[f]});
                // Neighbouring pcs mostly repeat their callers: the same method in a row is listed once.
                if (methods_seen.empty() || methods_seen.back() != info.methods[f]) methods_seen.push_back(info.methods[f]);
            }
            load.scopes.push_back(scope);
        }
    }
    // HotSpot lists the pcs in address order; sorted only where not.
    const auto by_offset = [](const PcScope& a, const PcScope& b) { return a.pc_offset < b.pc_offset; };
    const auto first = load.scopes.begin() + static_cast<std::ptrdiff_t>(first_new_scope);
    if (!std::is_sorted(first, load.scopes.end(), by_offset)) std::stable_sort(first, load.scopes.end(), by_offset);
    return stats;
}

}  // namespace sf::agent
