#include "code_cache_reader.hpp"

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstdlib>

#include "vm_code_map.hpp"

namespace sf::agent {
namespace {

using hotspot::Field;
using hotspot::TypeSize;

// Sanity bounds: no real blob or header is anywhere near these.
constexpr uint64_t kMaxBlobBytes = 64ull << 20;
constexpr size_t kMaxHeaderBytes = 4096;
// Bytes of the segment map read at once by find_blob: one hop back reaches at most 0xFE segments.
constexpr size_t kSegmapWindow = 256;
constexpr int32_t kMaxFrameWords = 1 << 20;
constexpr size_t kMaxCodeHeaps = 16;
constexpr size_t kMaxCodelets = 4096;

}  // namespace

CodeCacheReader::CodeCacheReader(const vm::VmMemory& memory, vm::VmLayoutOffsets layout)
    : memory_(memory), layout_(std::move(layout)) {}

void CodeCacheReader::note_bad_read(int line) const {
    bad_reads_++;
    static const bool debug = std::getenv("SF_VM_DEBUG") != nullptr;
    if (debug) std::fprintf(stderr, "[stackfrag] vm_capture: bad read at code_cache_reader.cpp:%d\n", line);
}

std::optional<uint64_t> CodeCacheReader::static_pointer(Field field) const {
    return memory_.pointer_field(0, f(field));
}

Status CodeCacheReader::read_vm(VmInfo& info) {
    auto call_stub = static_pointer(Field::kStubRoutinesCallStubReturnAddress);
    auto low = static_pointer(Field::kCodeCacheLowBound);
    auto high = static_pointer(Field::kCodeCacheHighBound);
    if (!call_stub || !low || !high || *low == 0 || *high <= *low) {
        return make_error(Errc::kCorrupt, "CodeCache bounds or call stub address unreadable");
    }
    info.call_stub_return = *call_stub;
    info.code_cache_low = code_cache_low_ = *low;
    info.code_cache_high = code_cache_high_ = *high;
    if (info.call_stub_return < *low || info.call_stub_return >= *high) {
        return make_error(Errc::kCorrupt, "call stub return address outside the CodeCache");
    }
    if (f(Field::kContinuationEntryReturnPc).present) {
        info.continuation_return_pc = static_pointer(Field::kContinuationEntryReturnPc).value_or(0);
    }
    if (Status s = read_code_heaps(); !s) return s;
    return read_interpreter(info);
}

Status CodeCacheReader::read_code_heaps() {
    auto array = static_pointer(Field::kCodeCacheHeaps);
    if (!array || *array == 0) return make_error(Errc::kCorrupt, "CodeCache::_heaps unreadable");
    auto len = memory_.int_field(*array, f(Field::kGrowableArrayLen));
    auto data = memory_.pointer_field(*array, f(Field::kGrowableArrayData));
    if (!len || !data || *len <= 0 || *len > static_cast<int64_t>(kMaxCodeHeaps)) {
        return make_error(Errc::kCorrupt, "CodeCache heap array unreadable");
    }
    for (int64_t i = 0; i < *len; ++i) {
        auto heap = memory_.value<uint64_t>(*data + 8 * static_cast<uint64_t>(i));
        if (!heap || *heap == 0) return make_error(Errc::kCorrupt, "CodeHeap pointer unreadable");
        heaps_.push_back(*heap);
    }
    return {};
}

Status CodeCacheReader::read_interpreter(VmInfo& info) {
    auto queue = static_pointer(Field::kAbstractInterpreterCode);
    if (!queue || *queue == 0) return make_error(Errc::kCorrupt, "AbstractInterpreter::_code unreadable");
    auto buffer = memory_.pointer_field(*queue, f(Field::kStubQueueStubBuffer));
    auto limit = memory_.int_field(*queue, f(Field::kStubQueueBufferLimit));
    auto begin = memory_.int_field(*queue, f(Field::kStubQueueQueueBegin));
    auto end = memory_.int_field(*queue, f(Field::kStubQueueQueueEnd));
    auto count = memory_.int_field(*queue, f(Field::kStubQueueNumberOfStubs));
    if (!buffer || !limit || !begin || !end || !count || *limit <= 0 || *buffer < code_cache_low_ ||
        *buffer + static_cast<uint64_t>(*limit) > code_cache_high_) {
        return make_error(Errc::kCorrupt, "interpreter StubQueue unreadable or outside the CodeCache");
    }
    info.interpreter_begin = *buffer;
    info.interpreter_end = *buffer + static_cast<uint64_t>(*limit);
    // The interpreter's queue is filled once at startup and never wraps.
    uint64_t codelet = *buffer + static_cast<uint64_t>(std::max<int64_t>(*begin, 0));
    uint64_t queue_end = *buffer + static_cast<uint64_t>(std::max<int64_t>(*end, 0));
    for (int64_t i = 0; i < *count && i < static_cast<int64_t>(kMaxCodelets) && codelet < queue_end; ++i) {
        auto size = memory_.int_field(codelet, f(Field::kInterpreterCodeletSize));
        auto description = memory_.pointer_field(codelet, f(Field::kInterpreterCodeletDescription));
        if (!size || *size <= 0 || codelet + static_cast<uint64_t>(*size) > info.interpreter_end) {
            note_bad_read(__LINE__);
            break;
        }
        std::string text = description && *description ? memory_.c_string(*description).value_or("") : "";
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

std::optional<CodeCacheReader::HeapRange> CodeCacheReader::heap_range(uint64_t heap) const {
    const auto& low_f = f(Field::kVirtualSpaceLow);
    const auto& high_f = f(Field::kVirtualSpaceHigh);
    uint64_t memory = heap + f(Field::kCodeHeapMemory).offset;
    uint64_t segmap = heap + f(Field::kCodeHeapSegmap).offset;
    auto low = memory_.pointer_field(memory, low_f);
    auto high = memory_.pointer_field(memory, high_f);
    auto map = memory_.pointer_field(segmap, low_f);
    auto shift = memory_.int_field(heap, f(Field::kCodeHeapLog2SegmentSize));
    if (!low || !high || !map || !shift || *shift < 4 || *shift > 16 || *high < *low || *low < code_cache_low_ ||
        *high > code_cache_high_) {
        return std::nullopt;
    }
    HeapRange range{*low, *high, *map, static_cast<int>(*shift)};
    const uint64_t segments = (*high - *low) >> *shift;
    uint8_t first = 0, last = 0;
    range.map_readable = segments != 0 && *map + segments > *map && memory_.read(*map, &first, 1) &&
                         memory_.read(*map + segments - 1, &last, 1);
    return range;
}

// Blob names are mostly string literals in libjvm; remembering them by address saves a read per
// blob in CodeCache walks. A reused C-heap name address could only mislabel a stub's name.
std::string CodeCacheReader::blob_name(uint64_t address) const {
    {
        std::lock_guard lock(names_mutex_);
        if (auto it = names_.find(address); it != names_.end()) return it->second;
    }
    std::string name = memory_.c_string(address, 200).value_or("");
    std::lock_guard lock(names_mutex_);
    if (names_.size() < 100000) names_.emplace(address, name);
    return name;
}

std::optional<BlobInfo> CodeCacheReader::read_blob(const vm::VmMemory& source, uint64_t blob,
                                                   const std::function<bool(uint64_t)>& nmethod_details) const {
    if (blob < code_cache_low_ || blob >= code_cache_high_) return std::nullopt;
    const size_t size_of_header = layout_.size_of(TypeSize::kCodeBlob);
    uint8_t header[kMaxHeaderBytes];
    if (size_of_header == 0 || size_of_header > kMaxHeaderBytes || !source.read(blob, header, size_of_header)) {
        note_bad_read(__LINE__);
        return std::nullopt;
    }
    auto field = [&](Field which) { return vm::header_int(header, size_of_header, f(which)); };
    BlobInfo b;
    b.blob = blob;
    auto size = field(Field::kCodeBlobSize);
    auto frame_size = field(Field::kCodeBlobFrameSize);
    auto frame_complete = field(Field::kCodeBlobFrameCompleteOffset);
    auto name = field(Field::kCodeBlobName);
    if (!size || *size <= 0 || static_cast<uint64_t>(*size) > kMaxBlobBytes || !frame_size || !frame_complete ||
        !name) {
        note_bad_read(__LINE__);
        return std::nullopt;
    }
    b.size = static_cast<uint64_t>(*size);
    b.frame_size = static_cast<int32_t>(*frame_size);
    b.frame_complete = static_cast<int32_t>(*frame_complete);
    if (layout_.absolute_header()) {
        auto begin = field(Field::kCodeBlobCodeBegin);
        auto end = field(Field::kCodeBlobCodeEnd);
        if (!begin || !end) return std::nullopt;
        b.code_begin = static_cast<uint64_t>(*begin);
        b.code_end = static_cast<uint64_t>(*end);
    } else {
        auto code_offset = field(Field::kCodeBlobCodeOffset);
        auto data_offset = field(Field::kCodeBlobDataOffset);
        if (!code_offset || !data_offset) return std::nullopt;
        b.code_begin = blob + static_cast<uint64_t>(*code_offset);
        b.code_end = blob + static_cast<uint64_t>(*data_offset);
    }
    if (b.code_begin < blob || b.code_end < b.code_begin || b.code_end > blob + b.size || b.frame_size < -1 ||
        b.frame_size > kMaxFrameWords) {
        note_bad_read(__LINE__);
        return std::nullopt;
    }
    b.name = blob_name(static_cast<uint64_t>(*name));
    if (layout_.facts->blob_has_kind) {
        auto kind = field(Field::kCodeBlobKind);
        b.is_nmethod = kind && *kind == layout_.code_blob_kind_nmethod;
    } else {
        b.is_nmethod = is_nmethod_blob_name(b.name);
    }
    b.is_native = is_native_nmethod_blob_name(b.name);
    if (b.is_nmethod && nmethod_details(b.code_begin) && !read_nmethod_fields(source, b)) {
        note_bad_read(__LINE__);
        return std::nullopt;
    }
    return b;
}

bool CodeCacheReader::read_nmethod_fields(const vm::VmMemory& source, BlobInfo& b) const {
    const size_t size_of_header = layout_.size_of(TypeSize::kNmethod);
    if (size_of_header == 0 || size_of_header > kMaxHeaderBytes || size_of_header > b.size) return false;
    uint8_t header[kMaxHeaderBytes];
    if (!source.read(b.blob, header, size_of_header)) return false;
    auto field = [&](Field which) { return vm::header_int(header, size_of_header, f(which)); };
    const bool absolute = layout_.absolute_header();
    auto method = field(absolute ? Field::kCompiledMethodMethod : Field::kNmethodMethod);
    auto entry_bci = field(Field::kNmethodEntryBci);
    auto orig_pc = field(Field::kNmethodOrigPcOffset);
    auto level = field(Field::kNmethodCompLevel);
    if (!method || !entry_bci || !orig_pc || !level) return false;
    b.method_ptr = static_cast<uint64_t>(*method);
    b.entry_bci = static_cast<int32_t>(*entry_bci);
    b.orig_pc_offset = static_cast<int32_t>(*orig_pc);
    b.comp_level = static_cast<int32_t>(*level);
    if (absolute) {
        auto entry = field(Field::kNmethodEntryPoint);
        auto verified = field(Field::kNmethodVerifiedEntryPoint);
        auto deopt = field(Field::kCompiledMethodDeoptHandlerBegin);
        if (!entry || !verified || !deopt) return false;
        b.entry = static_cast<uint64_t>(*entry);
        b.verified_entry = static_cast<uint64_t>(*verified);
        b.deopt_handler = static_cast<uint64_t>(*deopt);
    } else {
        auto entry = field(Field::kNmethodEntryOffset);
        auto verified = field(Field::kNmethodVerifiedEntryOffset);
        auto deopt = field(Field::kNmethodDeoptHandlerOffset);
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

void CodeCacheReader::remember_range(size_t index, const HeapRange& range) const {
    std::lock_guard lock(ranges_mutex_);
    if (ranges_.size() != heaps_.size()) ranges_.assign(heaps_.size(), HeapRange{});
    if (range.high > ranges_[index].high) ranges_[index] = range;
}

std::optional<CodeCacheReader::HeapRange> CodeCacheReader::heap_of(uint64_t pc) const {
    {
        std::lock_guard lock(ranges_mutex_);
        for (const HeapRange& known : ranges_) {
            if (known.high != 0 && pc >= known.low && pc < known.high) return known;
        }
    }
    for (size_t index = 0; index < heaps_.size(); ++index) {
        auto range = heap_range(heaps_[index]);
        if (!range) continue;
        remember_range(index, *range);
        if (pc >= range->low && pc < range->high) return range;
    }
    return std::nullopt;
}

std::optional<CodeCacheReader::HeapRange> CodeCacheReader::live_heap_of(uint64_t begin, uint64_t end) const {
    {
        std::lock_guard lock(ranges_mutex_);
        // Heaps never overlap, and live code lies in its heap's committed part [low, high): the heap
        // with the highest start at or below the code holds it, once every heap's start is known.
        const HeapRange* holder = nullptr;
        bool every_heap_known = ranges_.size() == heaps_.size() && !ranges_.empty();
        for (const HeapRange& known : ranges_) {
            if (known.high == 0) every_heap_known = false;
            if (known.high != 0 && known.low <= begin && (holder == nullptr || known.low > holder->low)) holder = &known;
        }
        if (every_heap_known && holder != nullptr) {
            HeapRange range = *holder;
            range.high = std::max(range.high, end);   // committed since: the live code is there
            return range;
        }
    }
    return heap_of(begin);
}

std::optional<BlobInfo> CodeCacheReader::find_blob(uint64_t pc) const {
    if (pc < code_cache_low_ || pc >= code_cache_high_) return std::nullopt;
    const std::optional<HeapRange> range = heap_of(pc);
    if (!range) return std::nullopt;
    return find_blob_in(memory_, pc, *range);
}

std::optional<BlobInfo> CodeCacheReader::find_live_blob(uint64_t code_begin, uint64_t code_size) const {
    if (code_begin < code_cache_low_ || code_begin >= code_cache_high_ || code_size > code_cache_high_ - code_begin) {
        return std::nullopt;
    }
    const std::optional<HeapRange> range = live_heap_of(code_begin, code_begin + code_size);
    if (!range) return std::nullopt;
    if (!range->map_readable || code_size > range->high - code_begin) return find_blob_in(memory_, code_begin, *range);
    // A heap's memory is committed from its start up, and the blob is alive: everything from the
    // heap's start to the code's end is mapped, and so is the segment map up to the code's
    // segment. The span starts at most kLiveReach below the code (a blob's headers and
    // relocations come first), reads further down are checked.
    constexpr uint64_t kLiveReach = 1 << 20;
    const uint64_t from = code_begin - range->low > kLiveReach ? code_begin - kLiveReach : range->low;
    const vm::VouchedMemory vouched(
        memory_, {from, code_begin + code_size},
        {range->segmap + ((from - range->low) >> range->shift), range->segmap + ((code_begin - range->low) >> range->shift) + 1});
    return find_blob_in(vouched, code_begin, *range);
}

std::optional<BlobInfo> CodeCacheReader::find_blob_in(const vm::VmMemory& memory, uint64_t pc,
                                                      const HeapRange& range) const {
    static const std::function<bool(uint64_t)> always = [](uint64_t) { return true; };
    const size_t header = layout_.size_of(TypeSize::kHeapBlock);
    const size_t blob_header = std::max(layout_.size_of(TypeSize::kCodeBlob), layout_.size_of(TypeSize::kNmethod));
    size_t segments = (range.high - range.low) >> range.shift;
    size_t index = (pc - range.low) >> range.shift;
    // Each hop moves back by the byte's value (< 0xFF), so large blobs need several. The hops read
    // from one copy of the map's bytes up to `index` (a pc in a blob's first 0xFF segments, as
    // every CompiledMethodLoad's code_begin, needs no other), a new copy when a hop leaves it.
    bool found = false;
    uint8_t map_bytes[kSegmapWindow];
    size_t map_low = 1, map_high = 0;   // map_bytes holds the map's bytes [map_low, map_high]
    for (size_t hops = 0; hops <= segments; ++hops) {
        if (index < map_low || index > map_high) {
            map_high = index;
            map_low = index >= kSegmapWindow - 1 ? index - (kSegmapWindow - 1) : 0;
            if (!memory.read(range.segmap + map_low, map_bytes, map_high - map_low + 1)) {
                map_low = map_high = index;   // the byte alone, as before the window
                if (!memory.read(range.segmap + index, map_bytes, 1)) {
                    note_bad_read(__LINE__);
                    return std::nullopt;
                }
            }
        }
        const uint8_t back = map_bytes[index - map_low];
        if (back == 0xFF || back > index) return std::nullopt;
        if (back == 0) {
            found = true;
            break;
        }
        index -= back;
    }
    if (!found) return std::nullopt;
    uint64_t block = range.low + (static_cast<uint64_t>(index) << range.shift);
    // The block's header, the blob's and the nmethod's in one read of VM memory (three before).
    std::vector<uint8_t> buffer;
    vm::WindowedMemory window(memory, buffer, header + blob_header);
    window.set_limit(range.high);
    uint8_t block_header[kMaxHeaderBytes];
    if (header == 0 || header > kMaxHeaderBytes || !window.read(block, block_header, header)) {
        note_bad_read(__LINE__);
        return std::nullopt;
    }
    auto used = vm::header_int(block_header, header, f(Field::kHeapBlockUsed));
    if (!used || *used == 0) return std::nullopt;
    auto blob = read_blob(window, block + header, always);
    if (!blob || pc < blob->blob || pc >= blob->blob + blob->size) return std::nullopt;
    return blob;
}

void CodeCacheReader::walk(const std::function<void(const BlobInfo&)>& visit,
                           const std::function<bool(uint64_t)>& nmethod_details) const {
    const size_t header = layout_.size_of(TypeSize::kHeapBlock);
    if (header == 0 || header > kMaxHeaderBytes) return;
    const auto& length_field = f(Field::kHeapBlockLength);
    const auto& used_field = f(Field::kHeapBlockUsed);
    uint8_t block_header[kMaxHeaderBytes];
    std::lock_guard lock(walk_mutex_);
    vm::WindowedMemory window(memory_, walk_buffer_, kWalkWindow);
    for (size_t heap = 0; heap < heaps_.size(); ++heap) {
        // A walk reads the heap's range afresh (its new blobs may lie past the end remembered).
        auto range = heap_range(heaps_[heap]);
        if (!range) {
            note_bad_read(__LINE__);
            continue;
        }
        remember_range(heap, *range);
        window.set_limit(range->high);
        uint64_t block = range->low;
        while (block + header <= range->high) {
            if (!window.read(block, block_header, header)) {
                note_bad_read(__LINE__);
                break;
            }
            auto length = vm::header_int(block_header, header, length_field);
            auto used = vm::header_int(block_header, header, used_field);
            if (!length || !used || *length < 0) {
                note_bad_read(__LINE__);
                break;
            }
            // Committed memory past the last block (the heap's unexported _next_segment) is
            // zero: a zero length is the end of the heap's blocks.
            if (*length == 0) break;
            if (*used != 0) {
                if (auto blob = read_blob(window, block + header, nmethod_details)) visit(*blob);
            }
            block += static_cast<uint64_t>(*length) << range->shift;
        }
    }
    last_walk_reads_.store(window.underlying_reads());
    walks_++;
}

std::optional<CodeCacheReader::Bytecodes> CodeCacheReader::bytecodes(uint64_t method_ptr) const {
    auto const_method = memory_.pointer_field(method_ptr, f(Field::kMethodConstMethod));
    if (!const_method || *const_method == 0) return std::nullopt;
    auto code_size = memory_.int_field(*const_method, f(Field::kConstMethodCodeSize));
    if (!code_size || *code_size < 0) return std::nullopt;
    return Bytecodes{*const_method + layout_.size_of(TypeSize::kConstMethod), static_cast<uint32_t>(*code_size)};
}

std::vector<std::optional<CodeCacheReader::Bytecodes>> CodeCacheReader::bytecodes_of(
    const std::vector<uint64_t>& method_ptrs, const std::vector<std::optional<uint32_t>>* code_sizes,
    bool methods_alive) const {
    const size_t n = method_ptrs.size();
    std::vector<std::optional<Bytecodes>> out(n);
    const vm::ResolvedField& const_method_field = f(Field::kMethodConstMethod);
    const vm::ResolvedField& size_field = f(Field::kConstMethodCodeSize);
    if (!const_method_field.present || const_method_field.is_static || !size_field.present || size_field.is_static ||
        size_field.width == 0 || size_field.width > 8) {
        return out;
    }
    std::vector<uint64_t> const_methods(n, 0);
    std::vector<vm::VmMemory::Request> requests(n);
    for (size_t i = 0; i < n; ++i) {
        requests[i] = {method_ptrs[i] + const_method_field.offset, &const_methods[i], sizeof(uint64_t), false};
    }
    // Within a live Method the field is mapped: on jython's 4,200 classes the system call was
    // ~45 % of the JVM's time in ClassPrepare. Only where the tables say the field lies inside it.
    if (methods_alive && const_method_field.offset + sizeof(uint64_t) <= layout_.size_of(TypeSize::kMethod)) {
        for (vm::VmMemory::Request& request : requests) {
            request.ok = request.address >= 4096 && memory_.read_mapped(request.address, request.out, request.size);
        }
    } else {
        vm::read_each_coalesced(memory_, requests.data(), n);
    }
    std::vector<std::array<uint8_t, 8>> sizes(n);
    std::vector<size_t> asked;   // index of each size request's method
    std::vector<vm::VmMemory::Request> size_requests;
    for (size_t i = 0; i < n; ++i) {
        if (!requests[i].ok || const_methods[i] == 0) continue;
        // Known without a read (a system call for the class's methods, ~half of what this costs).
        if (code_sizes != nullptr && i < code_sizes->size() && (*code_sizes)[i]) {
            out[i] = Bytecodes{const_methods[i] + layout_.size_of(TypeSize::kConstMethod), *(*code_sizes)[i]};
            continue;
        }
        sizes[i].fill(0);
        size_requests.push_back({const_methods[i] + size_field.offset, sizes[i].data(), size_field.width, false});
        asked.push_back(i);
    }
    if (!size_requests.empty()) vm::read_each_coalesced(memory_, size_requests.data(), size_requests.size());
    vm::ResolvedField size_at_zero = size_field;   // the field's bytes alone were read
    size_at_zero.offset = 0;
    for (size_t k = 0; k < asked.size(); ++k) {
        if (!size_requests[k].ok) continue;
        const size_t i = asked[k];
        const std::optional<int64_t> code_size = vm::header_int(sizes[i].data(), sizes[i].size(), size_at_zero);
        if (!code_size || *code_size < 0) continue;
        out[i] = Bytecodes{const_methods[i] + layout_.size_of(TypeSize::kConstMethod), static_cast<uint32_t>(*code_size)};
    }
    return out;
}

}  // namespace sf::agent
