// HotSpot's CodeCache, interpreter and method bytecodes as laid out in VM memory (hotspot-frames.md
// §a.2, §b.2-§b.5, §e), read through VMStructs fields: the blob holding a pc (segment maps), every
// blob (heap walks), the VM-wide code facts of VmInfo. No JVMTI: tests give it a fake memory image.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "stackfrag/base/result.hpp"
#include "stackfrag/events/events.hpp"
#include "vm_memory.hpp"
#include "vm_struct_tables.hpp"

namespace sf::agent {

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
    // nmethods only, when their details were asked for
    uint64_t method_ptr = 0;
    uint64_t entry = 0;
    uint64_t verified_entry = 0;
    uint64_t deopt_handler = 0;
    int32_t entry_bci = -1;
    int32_t orig_pc_offset = -1;
    int32_t comp_level = 0;
};

// Thread-safe after read_vm(): the lookups only read VM memory and a name cache under a lock.
class CodeCacheReader {
public:
    CodeCacheReader(const vm::VmMemory& memory, vm::VmLayoutOffsets layout);

    // The call stub's return address, the CodeCache bounds, ContinuationEntry::_return_pc, the
    // interpreter's range and method-entry codelets, into `info`; and the CodeHeaps. First, once.
    Status read_vm(VmInfo& info);

    // The blob containing pc, with its nmethod details.
    std::optional<BlobInfo> find_blob(uint64_t pc) const;
    // find_blob(code_begin) for a blob the JVM keeps alive while the caller runs, whose code is
    // [code_begin, + code_size) (CompiledMethodLoad's): the heap's committed memory below the code's
    // end, and its segment map's bytes, are read with read_mapped() (VouchedMemory), without a
    // system call each. Where the segment map's committed ends could not be read when its heap was
    // first met, every read is checked as in find_blob.
    std::optional<BlobInfo> find_live_blob(uint64_t code_begin, uint64_t code_size) const;
    // Every used block of every heap, in address order. An nmethod's own fields are read only where
    // `nmethod_details(code_begin)` asks for them. The headers are read a window of kWalkWindow
    // bytes at a time (one read per window, not one per block), into a buffer kept for the next
    // walk; walks run one at a time.
    static constexpr size_t kWalkWindow = 256 * 1024;
    void walk(const std::function<void(const BlobInfo&)>& visit,
              const std::function<bool(uint64_t code_begin)>& nmethod_details) const;

    // A method's bytecodes (Method* -> ConstMethod): begin and size, for bci = bcp - begin.
    struct Bytecodes {
        uint64_t begin = 0;
        uint32_t size = 0;
    };
    std::optional<Bytecodes> bytecodes(uint64_t method_ptr) const;
    // bytecodes() of many methods (a class's), with two batched reads of VM memory in all, each
    // read as few spans as the methods' neighbourhood allows (vm::read_each_coalesced). With
    // `code_sizes` (one per method, from JVMTI's GetMethodLocation; nullopt: unknown) only the
    // ConstMethod pointers are read, and the sizes are read for the methods without one.
    // `methods_alive`: the caller vouches that every Method is alive until the call returns (its
    // class's ClassPrepare): their ConstMethod pointers are plain loads, not a system call.
    std::vector<std::optional<Bytecodes>> bytecodes_of(
        const std::vector<uint64_t>& method_ptrs,
        const std::vector<std::optional<uint32_t>>* code_sizes = nullptr, bool methods_alive = false) const;

    const vm::VmLayoutOffsets& layout() const { return layout_; }
    size_t heap_count() const { return heaps_.size(); }
    // Reads that failed or gave implausible values, skipped. SF_VM_DEBUG=1 logs where each was.
    uint64_t bad_reads() const { return bad_reads_.load(); }
    // Reads of VM memory the last walk made, and how many walks there were.
    uint64_t last_walk_reads() const { return last_walk_reads_.load(); }
    uint64_t walks() const { return walks_.load(); }
    void note_bad_read(int line) const;

private:
    struct HeapRange {
        uint64_t low = 0, high = 0, segmap = 0;
        int shift = 0;
        // The segment map's first and last committed bytes were readable (checked reads): the
        // map's memory is where the VMStructs facts say, committed in one piece as its heap is.
        bool map_readable = false;
    };
    // find_blob's body, its reads of VM memory through `memory`.
    std::optional<BlobInfo> find_blob_in(const vm::VmMemory& memory, uint64_t pc, const HeapRange& range) const;
    const vm::ResolvedField& f(hotspot::Field field) const { return layout_[field]; }
    std::optional<uint64_t> static_pointer(hotspot::Field field) const;
    Status read_code_heaps();
    Status read_interpreter(VmInfo& info);
    std::optional<HeapRange> heap_range(uint64_t heap) const;
    // The range of the heap that holds `pc`, from the ranges remembered: a heap's start, segment
    // map and segment size never change and its committed end only grows, so VM memory is read
    // again only for a pc outside every range remembered (find_blob runs on the JVM's threads in
    // every code callback, and read four fields per heap before it found the pc's).
    std::optional<HeapRange> heap_of(uint64_t pc) const;
    void remember_range(size_t index, const HeapRange& range) const;
    // heap_of for live code [begin, end) (find_live_blob): from the ranges remembered alone, a
    // heap's committed end taken to reach at least `end`, so that a heap grown since costs no read.
    std::optional<HeapRange> live_heap_of(uint64_t begin, uint64_t end) const;
    std::string blob_name(uint64_t address) const;
    // The blob's headers come from `source`: the memory itself, or a walk's window onto it.
    std::optional<BlobInfo> read_blob(const vm::VmMemory& source, uint64_t blob,
                                      const std::function<bool(uint64_t)>& nmethod_details) const;
    bool read_nmethod_fields(const vm::VmMemory& source, BlobInfo& b) const;

    const vm::VmMemory& memory_;
    const vm::VmLayoutOffsets layout_;
    uint64_t code_cache_low_ = 0, code_cache_high_ = 0;   // set by read_vm
    std::vector<uint64_t> heaps_;                         // CodeHeap*, set by read_vm
    mutable std::mutex names_mutex_;
    mutable std::unordered_map<uint64_t, std::string> names_;   // blob name address -> text
    mutable std::atomic<uint64_t> bad_reads_{0};
    mutable std::mutex ranges_mutex_;
    mutable std::vector<HeapRange> ranges_;   // by heaps_'s index, under ranges_mutex_; high 0: unread
    mutable std::mutex walk_mutex_;
    mutable std::vector<uint8_t> walk_buffer_;   // under walk_mutex_
    mutable std::atomic<uint64_t> last_walk_reads_{0};
    mutable std::atomic<uint64_t> walks_{0};
};

}  // namespace sf::agent
