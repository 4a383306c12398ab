// The CodeCache reader on a fake VM memory image laid out with the offsets of the JDK 17 and 25
// VMStructs dumps (shared/docs/vmstructs): the CodeHeaps' segment maps and blocks, CodeBlob and
// nmethod headers in both blob header layouts, the interpreter's StubQueue, a method's bytecodes.
#include <catch2/catch.hpp>

#include <array>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "code_cache_reader.hpp"
#include "vm_memory.hpp"
#include "vm_struct_tables.hpp"

using namespace sf;
using namespace sf::agent;
using sf::hotspot::Field;
using sf::hotspot::TypeSize;

namespace {

// Sparse memory of 4 KB pages: a read succeeds only when every byte is on a written page.
class FakeMemory final : public vm::VmMemory {
public:
    bool read(uint64_t address, void* out, size_t size) const override {
        ++reads;
        auto* dst = static_cast<uint8_t*>(out);
        for (size_t i = 0; i < size; ++i) {
            auto page = pages_.find((address + i) >> 12);
            if (page == pages_.end()) return false;
            dst[i] = page->second[(address + i) & 4095];
        }
        return true;
    }
    // In the agent a plain copy, which faults on an unmapped page: here such a read fails the test.
    bool read_mapped(uint64_t address, void* out, size_t size) const override {
        ++mapped_reads;
        for (size_t i = 0; i < size; ++i) {
            if (pages_.find((address + i) >> 12) == pages_.end()) {
                FAIL_CHECK("read_mapped of an unmapped byte at " << std::hex << address + i);
                return false;
            }
        }
        const uint64_t checked = reads;
        const bool ok = read(address, out, size);
        reads = checked;
        return ok;
    }
    void write(uint64_t address, const void* data, size_t size) {
        const auto* src = static_cast<const uint8_t*>(data);
        for (size_t i = 0; i < size; ++i) page((address + i) >> 12)[(address + i) & 4095] = src[i];
    }
    void fill(uint64_t address, uint8_t value, size_t size) {
        for (size_t i = 0; i < size; ++i) page((address + i) >> 12)[(address + i) & 4095] = value;
    }
    void put64(uint64_t address, uint64_t value) { write(address, &value, 8); }
    void unmap_page(uint64_t address) { pages_.erase(address >> 12); }
    mutable uint64_t reads = 0;   // read() calls: each would be a system call in the agent
    mutable uint64_t mapped_reads = 0;   // read_mapped() calls: plain copies in the agent

private:
    std::array<uint8_t, 4096>& page(uint64_t number) {
        auto [it, inserted] = pages_.try_emplace(number);
        if (inserted) it->second.fill(0);
        return it->second;
    }
    std::map<uint64_t, std::array<uint8_t, 4096>> pages_;
};

std::optional<vm::VmLayoutOffsets> dump_layout(const std::string& jdk) {
    std::ifstream in(std::string(STACKFRAG_SHARED_DIR) + "/docs/vmstructs/vmstructs-jdk" + jdk + ".txt");
    std::stringstream text;
    text << in.rdbuf();
    if (text.str().empty()) return std::nullopt;
    auto tables = vm::parse_vmstructs_dump(text.str());
    REQUIRE(tables.ok());
    auto layout = vm::resolve_layout(*tables, std::stoi(jdk));
    REQUIRE(layout.ok());
    return *layout;
}

constexpr uint64_t kStatics = 0x1000'0000;
constexpr uint64_t kLow = 0x7f00'0000'0000;
constexpr uint64_t kHigh = kLow + 0x10'0000;
constexpr int kShift = 7;   // 128-byte segments
constexpr uint64_t kMethod = 0x5000'0000;
constexpr uint64_t kConstMethod = 0x5000'1000;

// A VM image: two CodeHeaps (nmethods at [kLow, kLow+512K), the rest above), their blobs, the
// interpreter's StubQueue, one method.
struct Image {
    vm::VmLayoutOffsets L;
    FakeMemory mem;
    struct Heap {
        uint64_t object, low, high, segmap;
    };
    std::vector<Heap> heaps;
    uint64_t next_string = 0x4000'0000;

    explicit Image(vm::VmLayoutOffsets layout) : L(std::move(layout)) {
        // Statics at addresses of our own (the dump's are from another process).
        const Field statics[] = {Field::kCodeCacheHeaps, Field::kCodeCacheLowBound, Field::kCodeCacheHighBound,
                                 Field::kAbstractInterpreterCode, Field::kStubRoutinesCallStubReturnAddress,
                                 Field::kContinuationEntryReturnPc};
        for (size_t i = 0; i < std::size(statics); ++i) L.fields[static_cast<size_t>(statics[i])].address = kStatics + 8 * i;
        mem.put64(at(Field::kCodeCacheLowBound), kLow);
        mem.put64(at(Field::kCodeCacheHighBound), kHigh);
        mem.put64(at(Field::kStubRoutinesCallStubReturnAddress), kLow + 0x9'0100);
        heaps.push_back(add_heap(0x2000'0000, kLow, kLow + 0x8'0000, 0x3000'0000));
        heaps.push_back(add_heap(0x2000'1000, kLow + 0x8'0000, kHigh, 0x3010'0000));
        const uint64_t array = 0x2000'2000, data = 0x2000'3000;
        put(array, Field::kGrowableArrayLen, 2);
        mem.put64(array + L[Field::kGrowableArrayData].offset, data);
        mem.put64(data, heaps[0].object);
        mem.put64(data + 8, heaps[1].object);
        mem.put64(at(Field::kCodeCacheHeaps), array);
        // The method: Method* -> ConstMethod with 77 bytes of bytecodes.
        mem.put64(kMethod + L[Field::kMethodConstMethod].offset, kConstMethod);
        put(kConstMethod, Field::kConstMethodCodeSize, 77);
    }

    uint64_t at(Field f) const { return L[f].address; }
    void put(uint64_t base, Field f, int64_t value) {
        const vm::ResolvedField& field = L[f];
        REQUIRE(field.present);
        REQUIRE(field.width > 0);
        mem.write(base + field.offset, &value, field.width);   // little-endian: the low bytes
    }
    uint64_t string(const std::string& text) {
        const uint64_t address = next_string;
        mem.write(address, text.c_str(), text.size() + 1);
        next_string += (text.size() + 16) & ~uint64_t{7};
        return address;
    }
    Heap add_heap(uint64_t object, uint64_t low, uint64_t high, uint64_t segmap) {
        mem.put64(object + L[Field::kCodeHeapMemory].offset + L[Field::kVirtualSpaceLow].offset, low);
        mem.put64(object + L[Field::kCodeHeapMemory].offset + L[Field::kVirtualSpaceHigh].offset, high);
        mem.put64(object + L[Field::kCodeHeapSegmap].offset + L[Field::kVirtualSpaceLow].offset, segmap);
        put(object, Field::kCodeHeapLog2SegmentSize, kShift);
        mem.fill(segmap, 0xFF, (high - low) >> kShift);
        mem.fill(low, 0, high - low);   // committed: zero past the last block ends a walk
        return Heap{object, low, high, segmap};
    }

    // A used (or freed) block of `segments` segments at segment `first` of `heap`, with a blob whose
    // code is [blob + code_offset, + code_size). Returns the blob's address.
    uint64_t add_blob(int heap, size_t first, size_t segments, const std::string& name, bool nmethod,
                      uint64_t code_offset, uint64_t code_size, int frame_size, bool used = true) {
        const Heap& h = heaps[static_cast<size_t>(heap)];
        const uint64_t block = h.low + (first << kShift);
        const uint64_t blob = block + L.size_of(TypeSize::kHeapBlock);
        mem.fill(block, 0, segments << kShift);
        put(block, Field::kHeapBlockLength, static_cast<int64_t>(segments));
        put(block, Field::kHeapBlockUsed, used ? 1 : 0);
        for (size_t k = 0; k < segments; ++k) {
            const uint8_t hop = static_cast<uint8_t>(std::min<size_t>(k, 0xFE));
            mem.write(h.segmap + first + k, &hop, 1);
        }
        put(blob, Field::kCodeBlobSize, static_cast<int64_t>((segments << kShift) - L.size_of(TypeSize::kHeapBlock)));
        put(blob, Field::kCodeBlobFrameSize, frame_size);
        put(blob, Field::kCodeBlobFrameCompleteOffset, nmethod ? 12 : -1);
        mem.put64(blob + L[Field::kCodeBlobName].offset, string(name));
        const uint64_t code = blob + code_offset;
        if (L.absolute_header()) {
            mem.put64(blob + L[Field::kCodeBlobCodeBegin].offset, code);
            mem.put64(blob + L[Field::kCodeBlobCodeEnd].offset, code + code_size);
        } else {
            put(blob, Field::kCodeBlobCodeOffset, static_cast<int64_t>(code_offset));
            put(blob, Field::kCodeBlobDataOffset, static_cast<int64_t>(code_offset + code_size));
            put(blob, Field::kCodeBlobKind, nmethod ? L.code_blob_kind_nmethod : 2);
        }
        if (!nmethod) return blob;
        put(blob, Field::kNmethodEntryBci, -1);
        put(blob, Field::kNmethodOrigPcOffset, 16);
        put(blob, Field::kNmethodCompLevel, 4);
        if (L.absolute_header()) {
            mem.put64(blob + L[Field::kCompiledMethodMethod].offset, kMethod);
            mem.put64(blob + L[Field::kNmethodEntryPoint].offset, code);
            mem.put64(blob + L[Field::kNmethodVerifiedEntryPoint].offset, code + 0x20);
            mem.put64(blob + L[Field::kCompiledMethodDeoptHandlerBegin].offset, code + 0x100);
        } else {
            mem.put64(blob + L[Field::kNmethodMethod].offset, kMethod);
            put(blob, Field::kNmethodEntryOffset, 0);
            put(blob, Field::kNmethodVerifiedEntryOffset, 0x20);
            put(blob, Field::kNmethodDeoptHandlerOffset, static_cast<int64_t>(code_offset + 0x100));
        }
        return blob;
    }

    // The interpreter: a StubQueue of three codelets at `buffer`, two of them method entries.
    void add_interpreter(uint64_t buffer) {
        const uint64_t queue = 0x2000'4000;
        mem.put64(at(Field::kAbstractInterpreterCode), queue);
        mem.put64(queue + L[Field::kStubQueueStubBuffer].offset, buffer);
        put(queue, Field::kStubQueueBufferLimit, 0x800);
        put(queue, Field::kStubQueueQueueBegin, 0);
        put(queue, Field::kStubQueueQueueEnd, 0x300);
        put(queue, Field::kStubQueueNumberOfStubs, 3);
        const char* descriptions[] = {"method entry point (kind = zerolocals)", "return entry points",
                                      "native method entry point (kind = native)"};
        for (uint64_t i = 0; i < 3; ++i) {
            const uint64_t codelet = buffer + i * 0x100;
            put(codelet, Field::kInterpreterCodeletSize, 0x100);
            mem.put64(codelet + L[Field::kInterpreterCodeletDescription].offset, string(descriptions[i]));
        }
    }
};

}  // namespace

TEST_CASE("the CodeCache reader on a fake VM image, in both blob header layouts", "[vm_capture]") {
    const std::string jdk = GENERATE("17", "25");
    auto layout = dump_layout(jdk);
    if (!layout) {
        WARN("shared/docs/vmstructs/vmstructs-jdk" << jdk << ".txt not found; skipped");
        return;
    }
    INFO("JDK " << jdk << " offsets");
    Image image(*layout);
    // Heap 0: nmethod A (8 segments), a freed block, nmethod B spanning 300 segments (several hops
    // back through the segment map), then nothing. Heap 1: the interpreter's BufferBlob, a stub.
    const uint64_t a = image.add_blob(0, 0, 8, "nmethod", true, 0x180, 0x200, 6);
    image.add_blob(0, 8, 4, "nmethod", true, 0x180, 0x40, 4, /*used=*/false);
    const uint64_t b = image.add_blob(0, 12, 300, "native nmethod", true, 0x180, 0x8000, 10);
    const uint64_t interp = image.add_blob(1, 0, 64, "Interpreter", false, 0x80, 0x1000, 0);
    const uint64_t stub = image.add_blob(1, 64, 4, "StubRoutines (1)", false, 0x80, 0x100, 0);
    image.add_interpreter(interp + 0x80);

    CodeCacheReader reader(image.mem, image.L);
    VmInfo info;
    REQUIRE(reader.read_vm(info).ok());
    CHECK(info.code_cache_low == kLow);
    CHECK(info.code_cache_high == kHigh);
    CHECK(info.call_stub_return == kLow + 0x9'0100);
    CHECK(info.interpreter_begin == interp + 0x80);
    CHECK(info.interpreter_end == interp + 0x80 + 0x800);
    REQUIRE(info.entry_codelets.size() == 2);
    CHECK(info.entry_codelets[0].begin == interp + 0x80);
    CHECK(info.entry_codelets[1].description == "native method entry point (kind = native)");
    CHECK(reader.heap_count() == 2);

    SECTION("a pc in an nmethod's code finds the nmethod with its own fields") {
        auto found = reader.find_blob(a + 0x180 + 0x44);
        REQUIRE(found);
        CHECK(found->blob == a);
        CHECK(found->is_nmethod);
        CHECK_FALSE(found->is_native);
        CHECK(found->code_begin == a + 0x180);
        CHECK(found->code_end == a + 0x380);
        CHECK(found->frame_size == 6);
        CHECK(found->frame_complete == 12);
        CHECK(found->method_ptr == kMethod);
        CHECK(found->entry == a + 0x180);
        CHECK(found->verified_entry == a + 0x1a0);
        CHECK(found->deopt_handler == a + 0x280);
        CHECK(found->comp_level == 4);
        CHECK(found->entry_bci == -1);
        CHECK(found->orig_pc_offset == 16);
    }
    SECTION("a pc a few segments into an nmethod costs one read of the segment map and one of the headers") {
        REQUIRE(reader.find_blob(a + 0x180 + 0x44));   // reads the blob's name, kept from then on
        const uint64_t before = image.mem.reads;
        REQUIRE(reader.find_blob(a + 0x180 + 0x44));
        CHECK(image.mem.reads - before == 2);   // a read per hop would make it 3
    }
    SECTION("a blob alive during its callback is found with plain copies only, as find_blob finds it") {
        REQUIRE(reader.find_blob(a + 0x180));   // reads the heaps' ranges and the blob's name
        for (const uint64_t blob : {a, b}) {
            const auto checked = reader.find_blob(blob + 0x180);
            REQUIRE(checked);
            const uint64_t before = image.mem.reads;
            const auto live = reader.find_live_blob(blob + 0x180, checked->code_end - checked->code_begin);
            REQUIRE(live);
            CHECK(image.mem.reads == before);
            CHECK(live->blob == checked->blob);
            CHECK(live->code_begin == checked->code_begin);
            CHECK(live->code_end == checked->code_end);
            CHECK(live->frame_size == checked->frame_size);
            CHECK(live->method_ptr == checked->method_ptr);
            CHECK(live->verified_entry == checked->verified_entry);
            CHECK(live->name == checked->name);
        }
        CHECK(image.mem.mapped_reads >= 4);   // the map's bytes and the headers, per blob
        // Code said to reach past the CodeCache is no live code: nothing is read for it.
        const uint64_t before = image.mem.reads, mapped_before = image.mem.mapped_reads;
        CHECK_FALSE(reader.find_live_blob(a + 0x180, kHigh));
        CHECK(image.mem.reads == before);
        CHECK(image.mem.mapped_reads == mapped_before);
    }
    SECTION("live code above a heap's committed end as last read costs no read of the heap's bounds") {
        const uint64_t heap1_high = image.heaps[1].object + image.L[Field::kCodeHeapMemory].offset +
                                    image.L[Field::kVirtualSpaceHigh].offset;
        image.mem.put64(heap1_high, stub + (8u << kShift));
        REQUIRE(reader.find_blob(stub + 0x10));   // every heap's range is known from here
        image.mem.put64(heap1_high, kHigh);       // the heap commits more, a blob appears there
        const uint64_t later = image.add_blob(1, 80, 4, "StubRoutines (2)", false, 0x80, 0x100, 0);
        // The same name as the stub's, whose text the reader keeps: no read of a name below.
        uint64_t stub_name = 0;
        REQUIRE(image.mem.read(stub + image.L[Field::kCodeBlobName].offset, &stub_name, 8));
        image.mem.put64(later + image.L[Field::kCodeBlobName].offset, stub_name);
        REQUIRE(reader.find_blob(a + 0x180));
        const uint64_t before = image.mem.reads;
        const auto live = reader.find_live_blob(later + 0x80, 0x100);
        REQUIRE(live);
        CHECK(live->blob == later);
        CHECK(live->name == "StubRoutines (1)");
        CHECK(image.mem.reads == before);
        // Code in the lower heap is not taken for the upper one's, nor the other way round.
        const auto low = reader.find_live_blob(a + 0x180, 0x200);
        REQUIRE(low);
        CHECK(low->blob == a);
        CHECK(image.mem.reads == before);
    }
    SECTION("a heap whose segment map's committed end is unreadable is read with checked reads only") {
        // Heap 0 says it has committed up to kHigh: its map would be two pages, the second is not there.
        image.mem.put64(image.heaps[0].object + image.L[Field::kCodeHeapMemory].offset +
                            image.L[Field::kVirtualSpaceHigh].offset,
                        kHigh);
        CodeCacheReader fresh(image.mem, image.L);
        VmInfo again;
        REQUIRE(fresh.read_vm(again).ok());
        const auto live = fresh.find_live_blob(a + 0x180, 0x200);
        REQUIRE(live);
        CHECK(live->blob == a);
        CHECK(image.mem.mapped_reads == 0);
    }
    SECTION("a pc 290 segments into a blob is found through several segment-map hops") {
        auto found = reader.find_blob(b + (290u << kShift));
        REQUIRE(found);
        CHECK(found->blob == b);
        CHECK(found->is_native);
        CHECK(found->frame_size == 10);
    }
    SECTION("stubs are blobs but no nmethods") {
        auto found = reader.find_blob(stub + 0x90);
        REQUIRE(found);
        CHECK_FALSE(found->is_nmethod);
        CHECK(found->name == "StubRoutines (1)");
        CHECK(found->method_ptr == 0);
    }
    SECTION("free segments, freed blocks and pcs outside the CodeCache find nothing") {
        CHECK_FALSE(reader.find_blob(kLow + (400u << kShift)));   // never used: 0xFF in the map
        CHECK_FALSE(reader.find_blob(stub + (8u << kShift)));       // past the last block
        CHECK_FALSE(reader.find_blob(kLow + (9u << kShift)));     // the freed block
        CHECK_FALSE(reader.find_blob(kHigh + 0x10));
        CHECK(reader.bad_reads() == 0);
    }
    SECTION("a walk visits every used block in address order and reads nmethod fields on demand") {
        std::vector<BlobInfo> seen;
        reader.walk([&](const BlobInfo& blob) { seen.push_back(blob); },
                    [&](uint64_t code_begin) { return code_begin == b + 0x180; });
        REQUIRE(seen.size() == 4);
        CHECK(seen[0].blob == a);
        CHECK(seen[0].method_ptr == 0);   // not asked for
        CHECK(seen[1].blob == b);
        CHECK(seen[1].method_ptr == kMethod);
        CHECK(seen[2].blob == interp);
        CHECK(seen[2].name == "Interpreter");
        CHECK(seen[3].blob == stub);
        CHECK(reader.bad_reads() == 0);
        // The block and blob headers came from one window per heap (both heaps' blocks fit in one).
        CHECK(reader.last_walk_reads() == 2);
        CHECK(reader.walks() == 1);
    }
    SECTION("an unreadable page inside a blob's code costs the walk its windows there, not a blob") {
        image.mem.unmap_page(b + 0x4000);
        std::vector<uint64_t> seen;
        reader.walk([&](const BlobInfo& blob) { seen.push_back(blob.blob); }, [](uint64_t) { return true; });
        CHECK(seen == std::vector<uint64_t>{a, b, interp, stub});
        CHECK(reader.last_walk_reads() > 2);
        CHECK(reader.bad_reads() == 0);
    }
    SECTION("unreadable and implausible headers are skipped and counted") {
        image.put(a, Field::kCodeBlobSize, 0);
        CHECK_FALSE(reader.find_blob(a + 0x200));
        CHECK(reader.bad_reads() == 1);
        image.mem.unmap_page(image.heaps[0].segmap);
        CHECK_FALSE(reader.find_blob(b + 0x200));
        CHECK(reader.bad_reads() == 2);
    }
    SECTION("once the heaps' ranges are known a lookup reads VM memory twice, and a heap that grew is read again") {
        // Heap 1 committed up to just past the stub; a blob beyond it comes later.
        const uint64_t old_high = stub + (8u << kShift);
        image.mem.put64(image.heaps[1].object + image.L[Field::kCodeHeapMemory].offset +
                            image.L[Field::kVirtualSpaceHigh].offset,
                        old_high);
        REQUIRE(reader.find_blob(stub + 0x10));
        REQUIRE(reader.find_blob(a + 0x10));   // (blob names are read once)
        // A pc in its block's first segment: the segment map's byte, then the headers in one read.
        uint64_t before = image.mem.reads;
        auto found = reader.find_blob(a + 0x10);
        REQUIRE(found);
        CHECK(found->method_ptr == kMethod);
        CHECK(image.mem.reads - before == 2);
        before = image.mem.reads;
        REQUIRE(reader.find_blob(stub + 0x10));
        CHECK(image.mem.reads - before == 2);
        // The heap commits more and a blob appears there: its range is read afresh.
        image.mem.put64(image.heaps[1].object + image.L[Field::kCodeHeapMemory].offset +
                            image.L[Field::kVirtualSpaceHigh].offset,
                        kHigh);
        const uint64_t later = image.add_blob(1, 80, 4, "StubRoutines (2)", false, 0x80, 0x100, 0);
        REQUIRE(later > old_high);
        auto grown = reader.find_blob(later + 0x90);
        REQUIRE(grown);
        CHECK(grown->name == "StubRoutines (2)");
        CHECK(reader.bad_reads() == 0);
    }
    SECTION("a method's bytecodes follow its ConstMethod header") {
        auto code = reader.bytecodes(kMethod);
        REQUIRE(code);
        CHECK(code->begin == kConstMethod + image.L.size_of(TypeSize::kConstMethod));
        CHECK(code->size == 77);
        CHECK_FALSE(reader.bytecodes(kMethod + 0x10'0000));
    }
    SECTION("a class's methods' bytecodes read together match the one-by-one reads, an unreadable one missing") {
        const uint64_t second = kMethod + 0x100, second_const = kConstMethod + 0x800;
        image.mem.put64(second + image.L[Field::kMethodConstMethod].offset, second_const);
        image.put(second_const, Field::kConstMethodCodeSize, 5);
        const uint64_t unreadable = kMethod + 0x10'0000;
        const auto all = reader.bytecodes_of({kMethod, unreadable, second});
        REQUIRE(all.size() == 3);
        REQUIRE(all[0]);
        CHECK(all[0]->begin == reader.bytecodes(kMethod)->begin);
        CHECK(all[0]->size == 77);
        CHECK_FALSE(all[1]);
        REQUIRE(all[2]);
        CHECK(all[2]->begin == second_const + image.L.size_of(TypeSize::kConstMethod));
        CHECK(all[2]->size == 5);
        CHECK(reader.bytecodes_of({}).empty());
    }
    SECTION("Methods vouched alive give their ConstMethod pointers by plain loads, the same bytecodes") {
        const uint64_t second = kMethod + 0x100, second_const = kConstMethod + 0x800;
        image.mem.put64(second + image.L[Field::kMethodConstMethod].offset, second_const);
        const std::vector<std::optional<uint32_t>> sizes{77u, 5u};
        const auto checked = reader.bytecodes_of({kMethod, second}, &sizes);
        const uint64_t reads = image.mem.reads, mapped = image.mem.mapped_reads;
        const auto vouched = reader.bytecodes_of({kMethod, second}, &sizes, /*methods_alive=*/true);
        CHECK(image.mem.reads == reads);
        CHECK(image.mem.mapped_reads == mapped + 2);
        REQUIRE(vouched.size() == 2);
        for (size_t i = 0; i < 2; ++i) {
            REQUIRE(vouched[i]);
            REQUIRE(checked[i]);
            CHECK(vouched[i]->begin == checked[i]->begin);
            CHECK(vouched[i]->size == checked[i]->size);
        }
        CHECK(vouched[1]->begin == second_const + image.L.size_of(TypeSize::kConstMethod));
    }
}

TEST_CASE("the CodeCache reader refuses a VM whose code facts do not add up", "[vm_capture]") {
    auto layout = dump_layout("17");
    if (!layout) return;
    Image image(*layout);
    SECTION("no interpreter") {
        VmInfo info;
        CodeCacheReader reader(image.mem, image.L);
        CHECK_FALSE(reader.read_vm(info).ok());
    }
    SECTION("the call stub outside the CodeCache") {
        image.mem.put64(image.at(Field::kStubRoutinesCallStubReturnAddress), kHigh + 8);
        VmInfo info;
        CodeCacheReader reader(image.mem, image.L);
        auto status = reader.read_vm(info);
        REQUIRE_FALSE(status.ok());
        CHECK(status.error().message.find("call stub") != std::string::npos);
    }
}

TEST_CASE("a memory window serves neighbouring reads from one read of the memory below it", "[vm_capture]") {
    FakeMemory memory;
    std::vector<uint8_t> bytes(3 * 4096);
    for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<uint8_t>(i * 7);
    const uint64_t base = 0x10'0000;
    memory.write(base, bytes.data(), bytes.size());
    std::vector<uint8_t> buffer;
    vm::WindowedMemory window(memory, buffer, 4096);
    window.set_limit(base + bytes.size());
    auto read_matches = [&](uint64_t address, size_t size) {
        std::vector<uint8_t> out(size);
        if (!window.read(address, out.data(), size)) return false;
        return std::equal(out.begin(), out.end(), bytes.begin() + static_cast<std::ptrdiff_t>(address - base));
    };
    CHECK(read_matches(base + 16, 100));
    CHECK(read_matches(base + 200, 8));
    CHECK(read_matches(base + 16 + 4096 - 8, 8));   // the window's last bytes
    CHECK(window.underlying_reads() == 1);
    CHECK(memory.reads == 1);
    CHECK(read_matches(base + 16 + 4096 - 4, 8));   // straddles the window's end: a new window
    CHECK(window.underlying_reads() == 2);
    SECTION("a window never reaches past the limit; a request that does is read as it is") {
        CHECK(read_matches(base + 3 * 4096 - 16, 16));
        CHECK(memory.reads == 3);
        std::vector<uint8_t> out(32);
        CHECK_FALSE(window.read(base + 3 * 4096 - 16, out.data(), out.size()));
    }
    SECTION("a window over an unreadable page falls back to the bytes asked for") {
        memory.unmap_page(base + 2 * 4096);
        CHECK(read_matches(base + 4096 + 100, 8));   // the window [+4196, +8292) is not readable whole
        std::vector<uint8_t> out(8);
        CHECK_FALSE(window.read(base + 2 * 4096 + 8, out.data(), out.size()));
    }
}

TEST_CASE("vouched memory copies inside its spans and checks every other read", "[vm_capture]") {
    FakeMemory memory;
    std::vector<uint8_t> bytes(2 * 4096, 0x5a);
    const uint64_t base = 0x30'0000;
    memory.write(base, bytes.data(), bytes.size());
    const vm::VouchedMemory vouched(memory, {base + 16, base + 64}, {base + 4096, base + 4096 + 8});
    uint8_t out[64];
    CHECK(vouched.read(base + 16, out, 48));   // the first span, whole
    CHECK(vouched.read(base + 4096, out, 8));  // the second
    CHECK(memory.mapped_reads == 2);
    CHECK(memory.reads == 0);
    CHECK(vouched.read(base + 60, out, 8));    // past the first span's end
    CHECK(vouched.read(base + 8, out, 16));    // before its start
    CHECK(vouched.read(base + 200, out, 8));   // between the spans
    CHECK(memory.mapped_reads == 2);
    CHECK(memory.reads == 3);
    const vm::VouchedMemory none(memory, {}, {});   // empty spans vouch for nothing
    CHECK(none.read(base, out, 8));
    CHECK(memory.mapped_reads == 2);
}

TEST_CASE("neighbouring requests are read as one span, and a span with a hole request by request", "[vm_capture]") {
    FakeMemory memory;
    std::vector<uint8_t> bytes(3 * 4096);
    for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<uint8_t>(i * 13 + 1);
    const uint64_t base = 0x20'0000;
    memory.write(base, bytes.data(), bytes.size());
    memory.write(base + 0x10'0000, bytes.data(), 64);   // far away: a run of its own
    // Out of address order, overlapping, a zero-sized one, one far away, one unreadable.
    const uint64_t addresses[] = {base + 0x300, base + 0x10, base + 0x308, base + 0x900, base + 0x10'0000,
                                  base + 0x4000, base + 0x50};
    const size_t sizes[] = {8, 8, 8, 4, 8, 8, 0};
    constexpr size_t n = std::size(addresses);
    std::vector<std::array<uint8_t, 8>> out(n), expected(n);
    std::vector<vm::VmMemory::Request> requests(n);
    for (size_t i = 0; i < n; ++i) {
        out[i].fill(0xAA);
        expected[i].fill(0xAA);
        requests[i] = {addresses[i], out[i].data(), sizes[i], false};
    }
    memory.reads = 0;
    vm::read_each_coalesced(memory, requests.data(), n);
    // The four neighbours below base + 0x1000 in one read, the far one, the unreadable one: three.
    CHECK(memory.reads == 3);
    for (size_t i = 0; i < n; ++i) {
        const bool readable = addresses[i] != base + 0x4000;
        CHECK(requests[i].ok == readable);
        if (readable) CHECK(memory.read(addresses[i], expected[i].data(), sizes[i]));
        CHECK(out[i] == expected[i]);
    }

    SECTION("a hole between neighbours: each read alone") {
        memory.unmap_page(base + 0x1000);
        std::array<uint64_t, 2> values{};
        vm::VmMemory::Request pair[] = {{base + 0xff8, &values[0], 8, false}, {base + 0x2000, &values[1], 8, false}};
        vm::read_each_coalesced(memory, pair, 2, 8192, 16384);
        CHECK(pair[0].ok);
        CHECK(pair[1].ok);
        uint64_t direct = 0;
        REQUIRE(memory.read(base + 0x2000, &direct, 8));
        CHECK(values[1] == direct);
    }
}
