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

namespace {
// The methods of one compiled method's records, each once: it inlines tens of methods, and its pcs
// list them hundreds of times. On the callback's stack; past kMaxDistinct methods, further ones are
// listed as met.
class DistinctMethods {
public:
    // Whether `method` is new (and now remembered), or the set is full.
    bool add(jmethodID method) {
        if (count_ == kMaxDistinct) return true;
        size_t at = static_cast<size_t>((reinterpret_cast<uint64_t>(method) * 0x9E3779B97F4A7C15ull) >> 56);
        for (;; at = (at + 1) % kSlots) {
            if (slots_[at] == method) return false;
            if (slots_[at] == nullptr) {
                slots_[at] = method;
                ++count_;
                return true;
            }
        }
    }

private:
    static constexpr size_t kSlots = 256;             // the hash's 8 bits
    static constexpr size_t kMaxDistinct = 192;       // short probes, and always a free slot
    jmethodID slots_[kSlots] = {};
    size_t count_ = 0;
};
}  // namespace

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
    DistinctMethods distinct;
    for (jmethodID method : methods_seen) distinct.add(method);
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
                // Listed once per frame, a large C2 method's methods were thousands, and sorting
                // them out took 15 % of the JVM's time in this callback.
                if (distinct.add(info.methods[f])) methods_seen.push_back(info.methods[f]);
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
