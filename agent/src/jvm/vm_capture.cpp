#include "vm_capture.hpp"

#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <set>
#include <string_view>
#include <tuple>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "vm_code_map.hpp"
#include "vmstructs.hpp"

namespace sf::agent {
namespace {

using hotspot::Field;
using hotspot::TypeSize;

uint64_t monotonic_now_ns() {
    timespec ts{};
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

// Sanity bounds: no real blob or header is anywhere near these.
constexpr uint64_t kMaxBlobBytes = 64ull << 20;
constexpr size_t kMaxHeaderBytes = 4096;
constexpr int32_t kMaxFrameWords = 1 << 20;
constexpr size_t kMaxCodeHeaps = 16;
constexpr size_t kMaxCodelets = 4096;

// A CodeBlob as read from the CodeCache.
struct BlobInfo {
    uint64_t blob = 0;
    uint64_t size = 0;
    uint64_t code_begin = 0;
    uint64_t code_end = 0;
    int32_t frame_size = 0;
    int32_t frame_complete = -1;
    std::string name;
    bool is_nmethod = false;
    bool is_native = false;
    // nmethods only
    uint64_t method_ptr = 0;
    uint64_t entry = 0;
    uint64_t verified_entry = 0;
    uint64_t deopt_handler = 0;
    int32_t entry_bci = -1;
    int32_t orig_pc_offset = -1;
    int32_t comp_level = 0;
};

// Integer field of a header already copied into `bytes` (relative to the blob start).
std::optional<int64_t> header_int(const std::vector<uint8_t>& bytes, const vm::ResolvedField& f) {
    if (!f.present || f.is_static || f.width == 0 || f.offset + f.width > bytes.size()) {
        return std::nullopt;
    }
    const uint8_t* p = bytes.data() + f.offset;
    switch (f.width) {
        case 1: return f.is_unsigned ? int64_t{p[0]} : int64_t{static_cast<int8_t>(p[0])};
        case 2: {
            uint16_t v;
            std::memcpy(&v, p, 2);
            return f.is_unsigned ? int64_t{v} : int64_t{static_cast<int16_t>(v)};
        }
        case 4: {
            uint32_t v;
            std::memcpy(&v, p, 4);
            return f.is_unsigned ? int64_t{v} : int64_t{static_cast<int32_t>(v)};
        }
        case 8: {
            uint64_t v;
            std::memcpy(&v, p, 8);
            return static_cast<int64_t>(v);
        }
        default: return std::nullopt;
    }
}

std::string jvmti_string(jvmtiEnv* jvmti, char* s) {
    if (s == nullptr) return {};
    std::string out(s);
    jvmti->Deallocate(reinterpret_cast<unsigned char*>(s));
    return out;
}

std::string internal_class_name(std::string signature) {
    if (signature.size() >= 2 && signature.front() == 'L' && signature.back() == ';') {
        return signature.substr(1, signature.size() - 2);
    }
    return signature;
}

struct ClassFacts {
    std::string class_name;
    std::string source_file;
};

}  // namespace

struct VmCapture::Impl {
    jvmtiEnv* jvmti;
    EventSink& sink;
    JavaVM* java_vm = nullptr;
    vm::VmLayoutOffsets layout;   // resolved once by start(), before `started`
    const vm::VmLayoutOffsets* L = &layout;
    std::atomic<bool> started{false};
    VmInfo info;   // written once by start() before `started`

    std::vector<uint64_t> heaps;   // CodeHeap*, fixed after start

    std::mutex name_mu;
    std::unordered_map<uint64_t, std::string> names;   // blob name address -> text

    mutable std::mutex mu;
    // Guarded by mu.
    std::unordered_map<uint64_t, uint64_t> announced;        // jmethodID -> Method* last announced
    std::unordered_map<uint64_t, uint64_t> id_of_method;     // Method* -> jmethodID
    struct LiveCode {
        uint64_t method_id = 0;
        bool with_scopes = false;
    };
    std::unordered_map<uint64_t, LiveCode> live_code;         // code_begin -> what was announced
    std::set<std::tuple<uint64_t, uint64_t, std::string>> stubs_sent;
    std::unordered_set<uint64_t> unannounced_seen_last_poll;  // nmethod code_begin

    struct Counters {
        std::atomic<uint64_t> methods{0};
        std::atomic<uint64_t> method_failures{0};
        std::atomic<uint64_t> code_loads{0};
        std::atomic<uint64_t> code_loads_from_walk{0};
        std::atomic<uint64_t> code_loads_blob_missing{0};
        std::atomic<uint64_t> code_unloads{0};
        std::atomic<uint64_t> stubs{0};
        std::atomic<uint64_t> bad_reads{0};
        std::atomic<uint64_t> walk_unresolved_method{0};
        std::atomic<uint64_t> redefined_methods{0};
        std::atomic<uint64_t> scopes{0};
        std::atomic<uint64_t> pcs_outside_code{0};
    } counters;
    std::atomic<uint64_t> start_scan_ns{0};

    Impl(jvmtiEnv* j, EventSink& s) : jvmti(j), sink(s) {}

    const vm::ResolvedField& f(Field field) const { return (*L)[field]; }

    // A read that failed or gave implausible values: skipped and counted. SF_VM_DEBUG=1 names the
    // place, for diagnosing a JDK whose structures do not match the tables.
    void note_bad_read(int line) {
        counters.bad_reads++;
        static const bool debug = std::getenv("SF_VM_DEBUG") != nullptr;
        if (debug) std::fprintf(stderr, "[stackfrag] vm_capture: bad read at vm_capture.cpp:%d\n", line);
    }

    // ---- VM facts ------------------------------------------------------------------------
    std::optional<uint64_t> static_pointer(Field field) const {
        return vm::read_pointer_field(0, f(field));
    }

    std::string system_property(const char* name) {
        char* value = nullptr;
        if (jvmti->GetSystemProperty(name, &value) != JVMTI_ERROR_NONE) return {};
        return jvmti_string(jvmti, value);
    }

    Status read_vm_info(const SamplingParameters& params) {
        info.time_ns = monotonic_now_ns();
        info.pid = static_cast<uint32_t>(getpid());
        info.vm_version = system_property("java.vm.version");
        // java.specification.version is set by the class library later; the VM's own is there at VMInit.
        std::string spec = system_property("java.vm.specification.version");
        if (spec.empty()) spec = info.vm_version;
        info.jdk_major = spec.rfind("1.", 0) == 0 ? std::atoi(spec.c_str() + 2) : std::atoi(spec.c_str());
        info.sample_stack_bytes = params.sample_stack_bytes;
        info.sample_period_ns = params.sample_period_ns;

        auto tables = vm::shared_tables();
        if (!tables) return tables.error();
        auto resolved = vm::resolve_layout(**tables, info.jdk_major);
        if (!resolved) return resolved.error();
        layout = *resolved;
        // The row's family is its release number, which is what VmLayout's values are.
        info.layout = L->layout_guessed ? VmLayout::kUnknown : static_cast<VmLayout>(L->facts->family);

        auto call_stub = static_pointer(Field::kStubRoutinesCallStubReturnAddress);
        auto low = static_pointer(Field::kCodeCacheLowBound);
        auto high = static_pointer(Field::kCodeCacheHighBound);
        if (!call_stub || !low || !high || *low == 0 || *high <= *low) {
            return make_error(Errc::kCorrupt, "CodeCache bounds or call stub address unreadable");
        }
        info.call_stub_return = *call_stub;
        info.code_cache_low = *low;
        info.code_cache_high = *high;
        if (info.call_stub_return < *low || info.call_stub_return >= *high) {
            return make_error(Errc::kCorrupt, "call stub return address outside the CodeCache");
        }
        if (f(Field::kContinuationEntryReturnPc).present) {
            info.continuation_return_pc = static_pointer(Field::kContinuationEntryReturnPc).value_or(0);
        }
        if (Status s = read_code_heaps(); !s) return s;
        return read_interpreter();
    }

    Status read_code_heaps() {
        auto array = static_pointer(Field::kCodeCacheHeaps);
        if (!array || *array == 0) return make_error(Errc::kCorrupt, "CodeCache::_heaps unreadable");
        auto len = vm::read_int_field(*array, f(Field::kGrowableArrayLen));
        auto data = vm::read_pointer_field(*array, f(Field::kGrowableArrayData));
        if (!len || !data || *len <= 0 || *len > static_cast<int64_t>(kMaxCodeHeaps)) {
            return make_error(Errc::kCorrupt, "CodeCache heap array unreadable");
        }
        for (int64_t i = 0; i < *len; ++i) {
            auto heap = vm::safe_read_value<uint64_t>(*data + 8 * static_cast<uint64_t>(i));
            if (!heap || *heap == 0) return make_error(Errc::kCorrupt, "CodeHeap pointer unreadable");
            heaps.push_back(*heap);
        }
        return {};
    }

    Status read_interpreter() {
        auto queue = static_pointer(Field::kAbstractInterpreterCode);
        if (!queue || *queue == 0) return make_error(Errc::kCorrupt, "AbstractInterpreter::_code unreadable");
        auto buffer = vm::read_pointer_field(*queue, f(Field::kStubQueueStubBuffer));
        auto limit = vm::read_int_field(*queue, f(Field::kStubQueueBufferLimit));
        auto begin = vm::read_int_field(*queue, f(Field::kStubQueueQueueBegin));
        auto end = vm::read_int_field(*queue, f(Field::kStubQueueQueueEnd));
        auto count = vm::read_int_field(*queue, f(Field::kStubQueueNumberOfStubs));
        if (!buffer || !limit || !begin || !end || !count || *limit <= 0 ||
            *buffer < info.code_cache_low || *buffer + static_cast<uint64_t>(*limit) > info.code_cache_high) {
            return make_error(Errc::kCorrupt, "interpreter StubQueue unreadable or outside the CodeCache");
        }
        info.interpreter_begin = *buffer;
        info.interpreter_end = *buffer + static_cast<uint64_t>(*limit);
        // The interpreter's queue is filled once at startup and never wraps.
        uint64_t codelet = *buffer + static_cast<uint64_t>(std::max<int64_t>(*begin, 0));
        uint64_t queue_end = *buffer + static_cast<uint64_t>(std::max<int64_t>(*end, 0));
        for (int64_t i = 0; i < *count && i < static_cast<int64_t>(kMaxCodelets) && codelet < queue_end; ++i) {
            auto size = vm::read_int_field(codelet, f(Field::kInterpreterCodeletSize));
            auto description = vm::read_pointer_field(codelet, f(Field::kInterpreterCodeletDescription));
            if (!size || *size <= 0 || codelet + static_cast<uint64_t>(*size) > info.interpreter_end) {
                note_bad_read(__LINE__);
                break;
            }
            std::string text = description && *description ? vm::safe_read_c_string(*description).value_or("") : "";
            if (is_method_entry_codelet(text)) {
                info.entry_codelets.push_back(CodeRange{codelet, codelet + static_cast<uint64_t>(*size), text});
            }
            codelet += static_cast<uint64_t>(*size);
        }
        if (info.entry_codelets.empty()) {
            return make_error(Errc::kCorrupt, "no interpreter method entry codelets found");
        }
        return {};
    }

    // ---- CodeCache ------------------------------------------------------------------------
    struct HeapRange {
        uint64_t low = 0, high = 0, segmap = 0;
        int shift = 0;
    };

    std::optional<HeapRange> heap_range(uint64_t heap) const {
        const auto& low_f = f(Field::kVirtualSpaceLow);
        const auto& high_f = f(Field::kVirtualSpaceHigh);
        uint64_t memory = heap + f(Field::kCodeHeapMemory).offset;
        uint64_t segmap = heap + f(Field::kCodeHeapSegmap).offset;
        auto low = vm::read_pointer_field(memory, low_f);
        auto high = vm::read_pointer_field(memory, high_f);
        auto map = vm::read_pointer_field(segmap, low_f);
        auto shift = vm::read_int_field(heap, f(Field::kCodeHeapLog2SegmentSize));
        if (!low || !high || !map || !shift || *shift < 4 || *shift > 16 || *high < *low ||
            *low < info.code_cache_low || *high > info.code_cache_high) {
            return std::nullopt;
        }
        return HeapRange{*low, *high, *map, static_cast<int>(*shift)};
    }

    // Blob names are mostly string literals in libjvm; remembering them by address saves a read per
    // blob in CodeCache walks. A reused C-heap name address could only mislabel a stub's name.
    std::string blob_name(uint64_t address) {
        {
            std::lock_guard lock(name_mu);
            if (auto it = names.find(address); it != names.end()) return it->second;
        }
        std::string name = vm::safe_read_c_string(address, 200).value_or("");
        std::lock_guard lock(name_mu);
        if (names.size() < 100000) names.emplace(address, name);
        return name;
    }

    // `nmethod_details(code_begin)` says whether an nmethod's own fields are wanted (saves a read).
    template <class WantDetails>
    std::optional<BlobInfo> read_blob(uint64_t blob, WantDetails&& nmethod_details) {
        if (blob < info.code_cache_low || blob >= info.code_cache_high) return std::nullopt;
        size_t blob_header = L->size_of(TypeSize::kCodeBlob);
        std::vector<uint8_t> bytes(blob_header);
        if (blob_header == 0 || blob_header > kMaxHeaderBytes || !vm::safe_read(blob, bytes.data(), bytes.size())) {
            note_bad_read(__LINE__);
            return std::nullopt;
        }
        BlobInfo b;
        b.blob = blob;
        auto size = header_int(bytes, f(Field::kCodeBlobSize));
        auto frame_size = header_int(bytes, f(Field::kCodeBlobFrameSize));
        auto frame_complete = header_int(bytes, f(Field::kCodeBlobFrameCompleteOffset));
        auto name = header_int(bytes, f(Field::kCodeBlobName));
        if (!size || *size <= 0 || static_cast<uint64_t>(*size) > kMaxBlobBytes || !frame_size ||
            !frame_complete || !name) {
            note_bad_read(__LINE__);
            return std::nullopt;
        }
        b.size = static_cast<uint64_t>(*size);
        b.frame_size = static_cast<int32_t>(*frame_size);
        b.frame_complete = static_cast<int32_t>(*frame_complete);
        if (L->absolute_header()) {
            auto begin = header_int(bytes, f(Field::kCodeBlobCodeBegin));
            auto end = header_int(bytes, f(Field::kCodeBlobCodeEnd));
            if (!begin || !end) return std::nullopt;
            b.code_begin = static_cast<uint64_t>(*begin);
            b.code_end = static_cast<uint64_t>(*end);
        } else {
            auto code_offset = header_int(bytes, f(Field::kCodeBlobCodeOffset));
            auto data_offset = header_int(bytes, f(Field::kCodeBlobDataOffset));
            if (!code_offset || !data_offset) return std::nullopt;
            b.code_begin = blob + static_cast<uint64_t>(*code_offset);
            b.code_end = blob + static_cast<uint64_t>(*data_offset);
        }
        if (b.code_begin < blob || b.code_end < b.code_begin || b.code_end > blob + b.size ||
            b.frame_size < -1 || b.frame_size > kMaxFrameWords) {
            note_bad_read(__LINE__);
            return std::nullopt;
        }
        b.name = blob_name(static_cast<uint64_t>(*name));
        if (L->facts->blob_has_kind) {
            auto kind = header_int(bytes, f(Field::kCodeBlobKind));
            b.is_nmethod = kind && *kind == L->code_blob_kind_nmethod;
        } else {
            b.is_nmethod = is_nmethod_blob_name(b.name);
        }
        b.is_native = is_native_nmethod_blob_name(b.name);
        if (b.is_nmethod && nmethod_details(b.code_begin) && !read_nmethod_fields(b)) {
            note_bad_read(__LINE__);
            return std::nullopt;
        }
        return b;
    }

    bool read_nmethod_fields(BlobInfo& b) {
        size_t header = L->size_of(TypeSize::kNmethod);
        if (header == 0 || header > kMaxHeaderBytes || header > b.size) return false;
        std::vector<uint8_t> bytes(header);
        if (!vm::safe_read(b.blob, bytes.data(), bytes.size())) return false;
        const bool absolute = L->absolute_header();
        auto method = header_int(bytes, f(absolute ? Field::kCompiledMethodMethod : Field::kNmethodMethod));
        auto entry_bci = header_int(bytes, f(Field::kNmethodEntryBci));
        auto orig_pc = header_int(bytes, f(Field::kNmethodOrigPcOffset));
        auto level = header_int(bytes, f(Field::kNmethodCompLevel));
        if (!method || !entry_bci || !orig_pc || !level) return false;
        b.method_ptr = static_cast<uint64_t>(*method);
        b.entry_bci = static_cast<int32_t>(*entry_bci);
        b.orig_pc_offset = static_cast<int32_t>(*orig_pc);
        b.comp_level = static_cast<int32_t>(*level);
        if (absolute) {
            auto entry = header_int(bytes, f(Field::kNmethodEntryPoint));
            auto verified = header_int(bytes, f(Field::kNmethodVerifiedEntryPoint));
            auto deopt = header_int(bytes, f(Field::kCompiledMethodDeoptHandlerBegin));
            if (!entry || !verified || !deopt) return false;
            b.entry = static_cast<uint64_t>(*entry);
            b.verified_entry = static_cast<uint64_t>(*verified);
            b.deopt_handler = static_cast<uint64_t>(*deopt);
        } else {
            auto entry = header_int(bytes, f(Field::kNmethodEntryOffset));
            auto verified = header_int(bytes, f(Field::kNmethodVerifiedEntryOffset));
            auto deopt = header_int(bytes, f(Field::kNmethodDeoptHandlerOffset));
            if (!entry || !verified || !deopt) return false;
            b.entry = b.code_begin + static_cast<uint64_t>(*entry);
            b.verified_entry = b.code_begin + static_cast<uint64_t>(*verified);
            b.deopt_handler = *deopt > 0 ? b.blob + static_cast<uint64_t>(*deopt) : 0;
        }
        uint64_t blob_end = b.blob + b.size;
        auto inside = [&](uint64_t a) { return a >= b.code_begin && a < blob_end; };
        if (!inside(b.entry) || !inside(b.verified_entry)) return false;
        if (b.deopt_handler != 0 && !inside(b.deopt_handler)) b.deopt_handler = 0;
        return true;
    }

    // The blob containing pc, via the segment map of the heap that holds it (§b.5).
    std::optional<BlobInfo> find_blob(uint64_t pc) {
        if (pc < info.code_cache_low || pc >= info.code_cache_high) return std::nullopt;
        size_t header = L->size_of(TypeSize::kHeapBlock);
        for (uint64_t heap : heaps) {
            auto range = heap_range(heap);
            if (!range || pc < range->low || pc >= range->high) continue;
            size_t segments = (range->high - range->low) >> range->shift;
            size_t index = (pc - range->low) >> range->shift;
            // Each hop moves back by the byte's value (< 0xFF), so large blobs need several.
            bool found = false;
            for (size_t hops = 0; hops <= segments; ++hops) {
                auto back = vm::safe_read_value<uint8_t>(range->segmap + index);
                if (!back) {
                    note_bad_read(__LINE__);
                    return std::nullopt;
                }
                if (*back == 0xFF || *back > index) return std::nullopt;
                if (*back == 0) {
                    found = true;
                    break;
                }
                index -= *back;
            }
            if (!found) return std::nullopt;
            uint64_t block = range->low + (static_cast<uint64_t>(index) << range->shift);
            auto used = vm::read_int_field(block, f(Field::kHeapBlockUsed));
            if (!used || *used == 0) return std::nullopt;
            auto blob = read_blob(block + header, [](uint64_t) { return true; });
            if (!blob || pc < blob->blob || pc >= blob->blob + blob->size) return std::nullopt;
            return blob;
        }
        return std::nullopt;
    }

    // Every used block of every heap, in address order. Blob fields of nmethods are read only
    // where `nmethod_details(code_begin)` asks for them.
    template <class Visit, class WantDetails>
    void walk_code_cache(Visit&& visit, WantDetails&& nmethod_details) {
        size_t header = L->size_of(TypeSize::kHeapBlock);
        const auto& length_field = f(Field::kHeapBlockLength);
        const auto& used_field = f(Field::kHeapBlockUsed);
        std::vector<uint8_t> block_header(header);
        for (uint64_t heap : heaps) {
            auto range = heap_range(heap);
            if (!range) {
                note_bad_read(__LINE__);
                continue;
            }
            uint64_t block = range->low;
            while (block + header <= range->high) {
                if (!vm::safe_read(block, block_header.data(), header)) {
                    note_bad_read(__LINE__);
                    break;
                }
                auto length = header_int(block_header, length_field);
                auto used = header_int(block_header, used_field);
                if (!length || !used || *length < 0) {
                    note_bad_read(__LINE__);
                    break;
                }
                // Committed memory past the last block (the heap's unexported _next_segment) is
                // zero: a zero length is the end of the heap's blocks.
                if (*length == 0) break;
                if (*used != 0) {
                    if (auto blob = read_blob(block + header, nmethod_details)) visit(*blob);
                }
                block += static_cast<uint64_t>(*length) << range->shift;
            }
        }
    }

    // ---- Methods --------------------------------------------------------------------------
    JNIEnv* current_jni() const {
        JNIEnv* env = nullptr;
        if (java_vm == nullptr || java_vm->GetEnv(reinterpret_cast<void**>(&env), JNI_VERSION_1_6) != JNI_OK) {
            return nullptr;
        }
        return env;
    }

    std::optional<uint64_t> method_ptr_of(jmethodID id) const {
        // jmethodIDs are Method** on 17 and 25 (hotspot-frames.md §e), handed out by JVMTI and kept
        // in JNIMethodBlocks that HotSpot never frees, so a plain load is safe; a cleared id (class
        // unloaded) reads as 0 or a small sentinel.
        if (id == nullptr) return std::nullopt;
        uint64_t ptr = __atomic_load_n(reinterpret_cast<const uint64_t*>(id), __ATOMIC_RELAXED);
        if (ptr < 4096 || (ptr & 7) != 0) return std::nullopt;
        return ptr;
    }

    ClassFacts class_facts(jclass klass) {
        ClassFacts facts;
        char* signature = nullptr;
        if (jvmti->GetClassSignature(klass, &signature, nullptr) == JVMTI_ERROR_NONE) {
            facts.class_name = internal_class_name(jvmti_string(jvmti, signature));
        }
        char* source = nullptr;
        if (jvmti->GetSourceFileName(klass, &source) == JVMTI_ERROR_NONE) {
            facts.source_file = jvmti_string(jvmti, source);
        }
        return facts;
    }

    // Reads everything about one method; false if it vanished (unloaded) or is unreadable.
    bool build_method_info(jmethodID id, uint64_t method_ptr, const ClassFacts& facts, uint64_t time_ns,
                           MethodInfo& out) {
        out.time_ns = time_ns;
        out.method_id = reinterpret_cast<uint64_t>(id);
        out.method_ptr = method_ptr;
        out.class_name = facts.class_name;
        out.source_file = facts.source_file;
        char* name = nullptr;
        char* signature = nullptr;
        if (jvmti->GetMethodName(id, &name, &signature, nullptr) != JVMTI_ERROR_NONE) return false;
        out.name = jvmti_string(jvmti, name);
        out.signature = jvmti_string(jvmti, signature);
        jint modifiers = 0;
        if (jvmti->GetMethodModifiers(id, &modifiers) == JVMTI_ERROR_NONE) {
            out.access_flags = static_cast<uint32_t>(modifiers);
        }
        auto const_method = vm::read_pointer_field(method_ptr, f(Field::kMethodConstMethod));
        if (const_method && *const_method != 0) {
            auto code_size = vm::read_int_field(*const_method, f(Field::kConstMethodCodeSize));
            if (code_size && *code_size >= 0) {
                out.bytecode_begin = *const_method + L->size_of(TypeSize::kConstMethod);
                out.bytecode_size = static_cast<uint32_t>(*code_size);
            } else {
                note_bad_read(__LINE__);
            }
        } else {
            note_bad_read(__LINE__);
        }
        jint entry_count = 0;
        jvmtiLineNumberEntry* table = nullptr;
        if (jvmti->GetLineNumberTable(id, &entry_count, &table) == JVMTI_ERROR_NONE && table != nullptr) {
            out.lines.reserve(static_cast<size_t>(entry_count));
            for (jint i = 0; i < entry_count; ++i) {
                out.lines.push_back(LineEntry{static_cast<int32_t>(table[i].start_location), table[i].line_number});
            }
            jvmti->Deallocate(reinterpret_cast<unsigned char*>(table));
            std::stable_sort(out.lines.begin(), out.lines.end(),
                             [](const LineEntry& a, const LineEntry& b) { return a.start_bci < b.start_bci; });
        }
        return true;
    }

    // True when (id, ptr) still needs announcing; marks it as announced.
    bool claim_method(uint64_t id, uint64_t ptr) {
        std::lock_guard lock(mu);
        auto [it, inserted] = announced.try_emplace(id, ptr);
        if (!inserted) {
            if (it->second == ptr) return false;
            it->second = ptr;
        }
        id_of_method[ptr] = id;
        return true;
    }

    void unclaim_method(uint64_t id) {
        std::lock_guard lock(mu);
        announced.erase(id);
    }

    // Announces a method known only by its jmethodID (inline records, CompiledMethodLoad).
    void announce_method(JNIEnv* jni, jmethodID id, uint64_t time_ns) {
        auto ptr = method_ptr_of(id);
        if (!ptr) {
            counters.method_failures++;
            return;
        }
        if (!claim_method(reinterpret_cast<uint64_t>(id), *ptr)) return;
        ClassFacts facts;
        jclass klass = nullptr;
        if (jvmti->GetMethodDeclaringClass(id, &klass) == JVMTI_ERROR_NONE && klass != nullptr) {
            facts = class_facts(klass);
            if (jni != nullptr) jni->DeleteLocalRef(klass);
        }
        MethodInfo method;
        if (!build_method_info(id, *ptr, facts, time_ns, method)) {
            unclaim_method(reinterpret_cast<uint64_t>(id));
            counters.method_failures++;
            return;
        }
        counters.methods++;
        sink.emit(std::move(method));
    }

    void announce_class(jclass klass, uint64_t time_ns) {
        jint status = 0;
        if (jvmti->GetClassStatus(klass, &status) != JVMTI_ERROR_NONE ||
            (status & JVMTI_CLASS_STATUS_PREPARED) == 0 ||
            (status & (JVMTI_CLASS_STATUS_ARRAY | JVMTI_CLASS_STATUS_PRIMITIVE)) != 0) {
            return;
        }
        jint count = 0;
        jmethodID* methods = nullptr;
        if (jvmti->GetClassMethods(klass, &count, &methods) != JVMTI_ERROR_NONE || methods == nullptr) {
            return;
        }
        std::optional<ClassFacts> facts;
        for (jint i = 0; i < count; ++i) {
            auto ptr = method_ptr_of(methods[i]);
            if (!ptr) {
                counters.method_failures++;
                continue;
            }
            if (!claim_method(reinterpret_cast<uint64_t>(methods[i]), *ptr)) continue;
            if (!facts) facts = class_facts(klass);
            MethodInfo method;
            if (!build_method_info(methods[i], *ptr, *facts, time_ns, method)) {
                unclaim_method(reinterpret_cast<uint64_t>(methods[i]));
                counters.method_failures++;
                continue;
            }
            counters.methods++;
            sink.emit(std::move(method));
        }
        jvmti->Deallocate(reinterpret_cast<unsigned char*>(methods));
    }

    void announce_loaded_classes(JNIEnv* jni, uint64_t time_ns) {
        jint count = 0;
        jclass* classes = nullptr;
        if (jvmti->GetLoadedClasses(&count, &classes) != JVMTI_ERROR_NONE || classes == nullptr) return;
        for (jint i = 0; i < count; ++i) {
            announce_class(classes[i], time_ns);
            jni->DeleteLocalRef(classes[i]);
        }
        jvmti->Deallocate(reinterpret_cast<unsigned char*>(classes));
    }

    // ---- Code events ----------------------------------------------------------------------
    void fill_from_blob(CodeLoad& load, const BlobInfo& b) {
        load.code_begin = b.code_begin;
        load.code_end = b.code_end;
        load.entry = b.entry;
        load.verified_entry = b.verified_entry;
        load.frame_size_words = b.frame_size;
        load.frame_complete_offset = b.frame_complete;
        load.comp_level = b.comp_level;
        load.kind = classify_nmethod(b.is_native, b.frame_size, b.entry_bci);
        load.osr_bci = load.kind == CodeKind::kOsr ? b.entry_bci : -1;
        load.deopt_handler = b.deopt_handler;
        load.orig_pc_offset = b.orig_pc_offset;
    }

    // The instruction bytes, for the decoder's prologue/epilogue disassembly (docs/decoder-needs.md).
    void copy_code(CodeLoad& load) {
        uint64_t size = load.code_end - load.code_begin;
        if (size == 0 || size > kMaxBlobBytes) return;
        load.code.resize(size);
        if (!vm::safe_read(load.code_begin, load.code.data(), size)) {
            note_bad_read(__LINE__);
            load.code.clear();
        }
    }

    // True when this CodeLoad adds something the decoder does not have yet.
    bool claim_code(uint64_t code_begin, uint64_t method_id, bool with_scopes) {
        std::lock_guard lock(mu);
        auto [it, inserted] = live_code.try_emplace(code_begin, LiveCode{method_id, with_scopes});
        if (inserted) return true;
        LiveCode& current = it->second;
        if (current.method_id == method_id) {
            if (current.with_scopes || !with_scopes) return false;
            current.with_scopes = true;
            return true;
        }
        current = LiveCode{method_id, with_scopes};
        return true;
    }

    void compiled_method_load(jmethodID method, jint code_size, const void* code_addr, const void* compile_info) {
        uint64_t now = monotonic_now_ns();
        auto code_begin = reinterpret_cast<uint64_t>(code_addr);
        CodeLoad load;
        load.time_ns = now;
        load.method_id = reinterpret_cast<uint64_t>(method);
        load.code_begin = code_begin;
        load.code_end = code_begin + static_cast<uint64_t>(std::max<jint>(code_size, 0));
        auto blob = find_blob(code_begin);
        if (blob && blob->is_nmethod && blob->code_begin == code_begin) {
            fill_from_blob(load, *blob);
        } else {
            counters.code_loads_blob_missing++;
        }
        std::vector<jmethodID> methods_seen;
        methods_seen.push_back(method);
        CompileInfoStats stats = append_inline_scopes(compile_info, load, methods_seen);
        counters.pcs_outside_code += stats.pcs_outside_code;
        bool with_scopes = !load.scopes.empty() || load.kind == CodeKind::kNativeWrapper ||
                           load.kind == CodeKind::kMethodHandleIntrinsic;
        if (!claim_code(code_begin, load.method_id, with_scopes)) return;

        // Methods first, so that the decoder can name every frame of the CodeLoad on arrival.
        std::sort(methods_seen.begin(), methods_seen.end());
        methods_seen.erase(std::unique(methods_seen.begin(), methods_seen.end()), methods_seen.end());
        JNIEnv* jni = current_jni();
        for (jmethodID id : methods_seen) announce_method(jni, id, now);

        copy_code(load);
        counters.scopes += load.scopes.size();
        counters.code_loads++;
        sink.emit(std::move(load));
    }

    void compiled_method_unload(jmethodID method, const void* code_addr) {
        auto code_begin = reinterpret_cast<uint64_t>(code_addr);
        auto id = reinterpret_cast<uint64_t>(method);
        {
            std::lock_guard lock(mu);
            auto it = live_code.find(code_begin);
            if (it != live_code.end() && it->second.method_id == id) live_code.erase(it);
        }
        counters.code_unloads++;
        sink.emit(CodeUnload{monotonic_now_ns(), id, code_begin});
    }

    void emit_stub(std::string name, uint64_t begin, uint64_t end, int32_t frame_size, uint64_t time_ns) {
        {
            std::lock_guard lock(mu);
            if (!stubs_sent.emplace(begin, end, name).second) return;
        }
        counters.stubs++;
        sink.emit(Stub{time_ns, std::move(name), begin, end, frame_size > 0 ? frame_size : -1});
    }

    void dynamic_code_generated(const char* name, const void* address, jint length) {
        auto begin = reinterpret_cast<uint64_t>(address);
        if (length <= 0 || begin == 0) return;
        int32_t frame_size = -1;
        if (auto blob = find_blob(begin); blob && blob->code_begin == begin && !blob->is_nmethod) {
            frame_size = blob->frame_size;
        }
        emit_stub(name != nullptr ? name : "", begin, begin + static_cast<uint64_t>(length), frame_size,
                  monotonic_now_ns());
    }

    // CodeLoads (without inline scopes) for nmethods the CodeCache holds but no CompiledMethodLoad
    // announced. `require_seen_before`: only those already unannounced at the previous call, so
    // that a CompiledMethodLoad still queued in the VM's deferred event queue wins.
    void announce_unreported_nmethods(JNIEnv* jni, bool require_seen_before) {
        std::vector<BlobInfo> unreported;
        auto unknown = [&](uint64_t code_begin) {
            std::lock_guard lock(mu);
            return live_code.count(code_begin) == 0;
        };
        uint64_t walk_time = monotonic_now_ns();
        walk_code_cache(
            [&](const BlobInfo& b) {
                if (b.is_nmethod) {
                    if (unknown(b.code_begin)) unreported.push_back(b);
                } else {
                    // Stubs generated later normally come with DynamicCodeGenerated; this keeps
                    // the decoder's map complete if one did not.
                    emit_stub(b.name, b.code_begin, b.code_end, b.frame_size, walk_time);
                }
            },
            unknown);
        std::unordered_set<uint64_t> seen_now;
        uint64_t now = monotonic_now_ns();
        for (const BlobInfo& b : unreported) {
            seen_now.insert(b.code_begin);
            if (require_seen_before) {
                std::lock_guard lock(mu);
                if (unannounced_seen_last_poll.count(b.code_begin) == 0) continue;
            }
            uint64_t method_id = 0;
            {
                std::lock_guard lock(mu);
                if (auto it = id_of_method.find(b.method_ptr); it != id_of_method.end()) method_id = it->second;
            }
            if (method_id == 0) {
                counters.walk_unresolved_method++;
                continue;
            }
            CodeLoad load;
            load.time_ns = now;
            load.method_id = method_id;
            fill_from_blob(load, b);
            if (!claim_code(b.code_begin, method_id, false)) continue;
            copy_code(load);
            announce_method(jni, reinterpret_cast<jmethodID>(method_id), now);
            counters.code_loads_from_walk++;
            counters.code_loads++;
            sink.emit(std::move(load));
        }
        std::lock_guard lock(mu);
        unannounced_seen_last_poll = std::move(seen_now);
    }

    void recheck_redefined_methods(JNIEnv* jni) {
        std::vector<std::pair<uint64_t, uint64_t>> known;
        {
            std::lock_guard lock(mu);
            known.assign(announced.begin(), announced.end());
        }
        uint64_t now = monotonic_now_ns();
        for (auto [id, ptr] : known) {
            auto current = method_ptr_of(reinterpret_cast<jmethodID>(id));
            if (!current || *current == ptr) continue;
            counters.redefined_methods++;
            announce_method(jni, reinterpret_cast<jmethodID>(id), now);
        }
    }
};

void VmCapture::add_capabilities(jvmtiCapabilities& caps) {
    caps.can_generate_compiled_method_load_events = 1;
    caps.can_get_source_file_name = 1;
    caps.can_get_line_numbers = 1;
}

VmCapture::VmCapture(jvmtiEnv* jvmti, EventSink& sink) : impl_(std::make_unique<Impl>(jvmti, sink)) {}

VmCapture::~VmCapture() = default;

Status VmCapture::start(JNIEnv* jni, const SamplingParameters& params) {
    Impl& m = *impl_;
    if (m.started.load()) return {};
    if (jni == nullptr) return make_error(Errc::kInvalidArgument, "VmCapture::start needs a JNIEnv");
    jni->GetJavaVM(&m.java_vm);
    if (Status s = m.read_vm_info(params); !s) return s;
    uint64_t scan_begin = monotonic_now_ns();
    m.sink.emit(VmInfo(m.info));
    m.started.store(true, std::memory_order_release);

    // Non-nmethod blobs first: stubs, adapters, the interpreter, runtime stubs.
    m.walk_code_cache(
        [&](const BlobInfo& b) {
            if (!b.is_nmethod) m.emit_stub(b.name, b.code_begin, b.code_end, b.frame_size, scan_begin);
        },
        [](uint64_t) { return false; });
    m.announce_loaded_classes(jni, scan_begin);
    m.jvmti->GenerateEvents(JVMTI_EVENT_DYNAMIC_CODE_GENERATED);
    m.jvmti->GenerateEvents(JVMTI_EVENT_COMPILED_METHOD_LOAD);
    m.announce_unreported_nmethods(jni, false);
    m.start_scan_ns = monotonic_now_ns() - scan_begin;
    return {};
}

void VmCapture::on_class_prepare(JNIEnv*, jthread, jclass klass) {
    if (!impl_->started.load(std::memory_order_acquire)) return;
    impl_->announce_class(klass, monotonic_now_ns());
}

void VmCapture::on_compiled_method_load(jmethodID method, jint code_size, const void* code_addr, jint,
                                        const jvmtiAddrLocationMap*, const void* compile_info) {
    if (!impl_->started.load(std::memory_order_acquire)) return;
    impl_->compiled_method_load(method, code_size, code_addr, compile_info);
}

void VmCapture::on_compiled_method_unload(jmethodID method, const void* code_addr) {
    if (!impl_->started.load(std::memory_order_acquire)) return;
    impl_->compiled_method_unload(method, code_addr);
}

void VmCapture::on_dynamic_code_generated(const char* name, const void* address, jint length) {
    if (!impl_->started.load(std::memory_order_acquire)) return;
    impl_->dynamic_code_generated(name, address, length);
}

void VmCapture::poll(JNIEnv* jni) {
    if (!impl_->started.load(std::memory_order_acquire)) return;
    impl_->recheck_redefined_methods(jni);
    impl_->announce_unreported_nmethods(jni, true);
}

uint64_t VmCapture::poll_findings() const {
    return impl_->counters.redefined_methods.load() + impl_->counters.code_loads_from_walk.load();
}

void VmCapture::announce_method(JNIEnv* jni, jmethodID method, uint64_t time_ns) {
    if (!impl_->started.load(std::memory_order_acquire)) return;
    impl_->announce_method(jni, method, time_ns);
}

std::string VmCapture::describe() const {
    const Impl& m = *impl_;
    if (!m.started.load(std::memory_order_acquire)) return "VM capture not started";
    char buffer[768];
    const auto& c = m.counters;
    std::snprintf(buffer, sizeof buffer,
                  "JDK %d (%s), layout %d%s, interpreter [0x%lx,0x%lx) %lu B with %zu entry codelets, "
                  "code cache [0x%lx,0x%lx) in %zu heaps; start scan %.1f ms; methods %lu (%lu failed, "
                  "%lu redefined), code loads %lu (%lu from the CodeCache walk, %lu without blob, %lu "
                  "unresolvable), unloads %lu, stubs %lu, bad reads %lu",
                  m.info.jdk_major, m.info.vm_version.c_str(), static_cast<int>(m.L->facts->family),
                  m.L->layout_guessed ? " (guessed)" : "",
                  static_cast<unsigned long>(m.info.interpreter_begin),
                  static_cast<unsigned long>(m.info.interpreter_end),
                  static_cast<unsigned long>(m.info.interpreter_end - m.info.interpreter_begin),
                  m.info.entry_codelets.size(), static_cast<unsigned long>(m.info.code_cache_low),
                  static_cast<unsigned long>(m.info.code_cache_high), m.heaps.size(),
                  static_cast<double>(m.start_scan_ns.load()) / 1e6,
                  static_cast<unsigned long>(c.methods.load()), static_cast<unsigned long>(c.method_failures.load()),
                  static_cast<unsigned long>(c.redefined_methods.load()),
                  static_cast<unsigned long>(c.code_loads.load()),
                  static_cast<unsigned long>(c.code_loads_from_walk.load()),
                  static_cast<unsigned long>(c.code_loads_blob_missing.load()),
                  static_cast<unsigned long>(c.walk_unresolved_method.load()),
                  static_cast<unsigned long>(c.code_unloads.load()), static_cast<unsigned long>(c.stubs.load()),
                  static_cast<unsigned long>(c.bad_reads.load()));
    return buffer;
}

}  // namespace sf::agent
