// An ELF64 file mapped read-only, with what unwinding and symbolizing need from it: the PT_LOAD
// segments, the .eh_frame_hdr, and the function symbols (.symtab, else its detached debug file's,
// else .dynsym). Every read is bounds-checked: the file may be truncated, replaced or not an ELF
// file at all.
#pragma once

#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "stackfrag/base/page_index.hpp"

namespace sf {

class ElfFile {
public:
    // Where Debian's -dbg packages (libc6-dbg) put detached debug files, by build id.
    static constexpr const char* kDebugRoot = "/usr/lib/debug";

    ElfFile() = default;
    // Maps `path`; valid() says whether it is an ELF64 file with loadable segments. A file without a
    // .symtab (stripped: glibc's libc.so.6) takes its function symbols from the detached debug file
    // `debug_root`/.build-id/xx/yyyy.debug of the same build id, when there is one: the names of its
    // static functions (msort_with_tmp under qsort), which .dynsym leaves out. "" looks for none.
    explicit ElfFile(const std::string& path, std::string debug_root = kDebugRoot);
    // An image held in memory (the vDSO, which no file holds), copied in; no debug file is looked for.
    explicit ElfFile(std::vector<uint8_t> image);
    ~ElfFile();
    ElfFile(ElfFile&& other) noexcept;
    ElfFile& operator=(ElfFile&& other) noexcept;
    ElfFile(const ElfFile&) = delete;
    ElfFile& operator=(const ElfFile&) = delete;

    bool valid() const { return valid_; }

    struct Segment {
        uint64_t vaddr, offset, filesz;
    };
    const std::vector<Segment>& loads() const { return loads_; }
    uint64_t eh_frame_hdr_vaddr() const { return eh_frame_hdr_vaddr_; }   // 0 when absent
    uint64_t eh_frame_hdr_size() const { return eh_frame_hdr_size_; }
    // The GNU build-id note in hex ("" when the file has none): what tells two builds of a library
    // apart when their paths are the same.
    const std::string& build_id() const { return build_id_; }

    template <typename T>
    bool read(uint64_t offset, T& out) const {
        if (offset > size_ || size_ - offset < sizeof(T)) return false;
        std::memcpy(&out, image_ + offset, sizeof(T));
        return true;
    }
    // The file bytes backing ELF virtual address `vaddr`.
    bool read_vaddr(uint64_t vaddr, void* out, size_t len) const;
    // The file bytes backing `vaddr` in place, and how many follow it in the same segment
    // (nullptr when none): for parsers that read many small fields, such as .eh_frame's.
    const uint8_t* bytes_at_vaddr(uint64_t vaddr, uint64_t& available) const;
    // Load bias for a mapping of this file at `begin` from `file_offset`: runtime = vaddr + bias.
    bool bias_for(uint64_t begin, uint64_t file_offset, uint64_t& bias) const;
    // The virtual address of a file offset inside a loaded segment.
    std::optional<uint64_t> vaddr_at_offset(uint64_t file_offset) const;

    struct Function {
        uint64_t vaddr = 0, size = 0;
        std::string_view name;   // as the symbol table has it (mangled); valid while the file is
        // function_at gives this same answer for every address in [vaddr, until): the end of the
        // symbol or the next symbol's start, whichever comes first.
        uint64_t until = 0;
    };
    // The function symbol covering `vaddr` (one of size 0 covers up to the next); the table is
    // read on the first call. Of aliases, the name with the fewest leading underscores ("clone3",
    // not "__GI___clone3"), of those not an old version's ("name@VERSION"), else the last listed.
    std::optional<Function> function_at(uint64_t vaddr);
    // Whether the symbols came from a detached debug file (known after the first function_at).
    bool symbols_from_debug_file() const { return debug_file_ != nullptr; }

private:
    void parse_headers();
    void read_build_id(uint64_t offset, uint64_t size);
    void load_symbols();
    // The function symbols of `source`'s table of `type` (this file or its debug file).
    bool load_table(const ElfFile& source, uint32_t type);
    std::unique_ptr<ElfFile> open_debug_file() const;

    const uint8_t* image_ = nullptr;   // mmap'd, or owned_'s bytes
    size_t size_ = 0;
    std::vector<uint8_t> owned_;
    bool valid_ = false;
    std::vector<Segment> loads_;
    uint64_t eh_frame_hdr_vaddr_ = 0;
    uint64_t eh_frame_hdr_size_ = 0;
    std::string build_id_;
    // 8 bytes: libjvm's ~58 k functions fill 113 fresh pages here and as many in the sort's scratch
    // (16 bytes: 227 each, at 1.5-14 us a page on the VM). The size and the name are read from the
    // mapped entry when an address is asked for.
    struct Symbol {
        uint32_t offset;   // vaddr - symbols_base_
        uint32_t index;    // the entry's index in the symbol table
    };
    std::vector<Symbol> symbols_;   // functions, sorted by vaddr
    uint64_t symbols_base_ = 0;     // the lowest function address
    const uint8_t* symtab_ = nullptr;   // the table the symbols are from (in the mapped image)
    PageIndex symbol_pages_;        // where in symbols_ to search for an address
    const char* strtab_ = nullptr;
    size_t strtab_size_ = 0;
    bool symbols_loaded_ = false;
    std::string debug_root_;
    std::unique_ptr<ElfFile> debug_file_;   // owns the image symtab_ and strtab_ point into, when used
};

}  // namespace sf
