#include "stackfrag/base/elf_file.hpp"

#include "stackfrag/base/radix_sort.hpp"

#include <elf.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <utility>

namespace sf {

ElfFile::ElfFile(const std::string& path, std::string debug_root) : debug_root_(std::move(debug_root)) {
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return;
    struct stat st{};
    if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0) {
        void* p = mmap(nullptr, static_cast<size_t>(st.st_size), PROT_READ, MAP_PRIVATE, fd, 0);
        if (p != MAP_FAILED) {
            image_ = static_cast<const uint8_t*>(p);
            size_ = static_cast<size_t>(st.st_size);
        }
    }
    ::close(fd);
    if (image_) parse_headers();
}

ElfFile::ElfFile(std::vector<uint8_t> image) : owned_(std::move(image)) {
    if (owned_.empty()) return;
    image_ = owned_.data();
    size_ = owned_.size();
    parse_headers();
}

ElfFile::~ElfFile() {
    if (image_ && owned_.empty()) munmap(const_cast<uint8_t*>(image_), size_);
}

ElfFile::ElfFile(ElfFile&& other) noexcept { *this = std::move(other); }

ElfFile& ElfFile::operator=(ElfFile&& other) noexcept {
    if (this == &other) return *this;
    if (image_ && owned_.empty()) munmap(const_cast<uint8_t*>(image_), size_);
    image_ = std::exchange(other.image_, nullptr);
    size_ = std::exchange(other.size_, 0);
    owned_ = std::move(other.owned_);   // its buffer, and so image_, stays where it was
    other.owned_.clear();
    valid_ = std::exchange(other.valid_, false);
    loads_ = std::move(other.loads_);
    eh_frame_hdr_vaddr_ = other.eh_frame_hdr_vaddr_;
    eh_frame_hdr_size_ = other.eh_frame_hdr_size_;
    build_id_ = std::move(other.build_id_);
    symbols_ = std::move(other.symbols_);
    symbols_base_ = other.symbols_base_;
    symtab_ = std::exchange(other.symtab_, nullptr);
    symbol_pages_ = std::move(other.symbol_pages_);
    strtab_ = std::exchange(other.strtab_, nullptr);
    strtab_size_ = other.strtab_size_;
    symbols_loaded_ = other.symbols_loaded_;
    debug_root_ = std::move(other.debug_root_);
    debug_file_ = std::move(other.debug_file_);
    return *this;
}

void ElfFile::parse_headers() {
    Elf64_Ehdr eh;
    if (!read(0, eh) || std::memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 || eh.e_ident[EI_CLASS] != ELFCLASS64) return;
    for (unsigned i = 0; i < eh.e_phnum && i < 256; ++i) {
        Elf64_Phdr ph;
        if (!read(eh.e_phoff + uint64_t{i} * sizeof(Elf64_Phdr), ph)) return;
        if (ph.p_type == PT_LOAD) loads_.push_back({ph.p_vaddr, ph.p_offset, ph.p_filesz});
        if (ph.p_type == PT_GNU_EH_FRAME) {
            eh_frame_hdr_vaddr_ = ph.p_vaddr;
            eh_frame_hdr_size_ = ph.p_memsz;
        }
        if (ph.p_type == PT_NOTE && build_id_.empty()) read_build_id(ph.p_offset, ph.p_filesz);
    }
    valid_ = !loads_.empty();
}

void ElfFile::read_build_id(uint64_t offset, uint64_t size) {
    // Notes: namesz, descsz, type, then the name and the descriptor, each padded to 4 bytes.
    const uint64_t end = offset + std::min<uint64_t>(size, 1 << 16);
    while (offset + sizeof(Elf64_Nhdr) <= end) {
        Elf64_Nhdr note;
        if (!read(offset, note)) return;
        const uint64_t name_at = offset + sizeof(Elf64_Nhdr);
        const uint64_t desc_at = name_at + ((uint64_t{note.n_namesz} + 3) & ~uint64_t{3});
        const uint64_t next = desc_at + ((uint64_t{note.n_descsz} + 3) & ~uint64_t{3});
        if (next > end || next > size_ || note.n_descsz > 64) return;
        if (note.n_type == NT_GNU_BUILD_ID && note.n_namesz == 4 && std::memcmp(image_ + name_at, "GNU", 4) == 0) {
            static constexpr char kHex[] = "0123456789abcdef";
            for (uint64_t i = 0; i < note.n_descsz; ++i) {
                const uint8_t byte = image_[desc_at + i];
                build_id_ += kHex[byte >> 4];
                build_id_ += kHex[byte & 15];
            }
            return;
        }
        offset = next;
    }
}

bool ElfFile::read_vaddr(uint64_t vaddr, void* out, size_t len) const {
    for (const auto& s : loads_) {
        if (vaddr >= s.vaddr && vaddr - s.vaddr < s.filesz && s.filesz - (vaddr - s.vaddr) >= len) {
            const uint64_t off = s.offset + (vaddr - s.vaddr);
            if (off > size_ || size_ - off < len) return false;
            std::memcpy(out, image_ + off, len);
            return true;
        }
    }
    return false;
}

const uint8_t* ElfFile::bytes_at_vaddr(uint64_t vaddr, uint64_t& available) const {
    for (const auto& s : loads_) {
        if (vaddr >= s.vaddr && vaddr - s.vaddr < s.filesz) {
            const uint64_t off = s.offset + (vaddr - s.vaddr);
            if (off >= size_) return nullptr;
            available = std::min<uint64_t>(s.filesz - (vaddr - s.vaddr), size_ - off);
            return image_ + off;
        }
    }
    return nullptr;
}

bool ElfFile::bias_for(uint64_t begin, uint64_t file_offset, uint64_t& bias) const {
    for (const auto& s : loads_) {
        const uint64_t seg_page = s.offset & ~uint64_t{0xfff};
        if (file_offset >= seg_page && file_offset < s.offset + std::max<uint64_t>(s.filesz, 1)) {
            const uint64_t vaddr_at_begin = (s.vaddr - (s.offset - seg_page)) + (file_offset - seg_page);
            bias = begin - vaddr_at_begin;
            return true;
        }
    }
    return false;
}

std::optional<uint64_t> ElfFile::vaddr_at_offset(uint64_t file_offset) const {
    for (const auto& s : loads_) {
        if (file_offset >= s.offset && file_offset - s.offset < s.filesz) return file_offset - s.offset + s.vaddr;
    }
    return std::nullopt;
}

bool ElfFile::load_table(const ElfFile& source, uint32_t type) {
    Elf64_Ehdr eh;
    if (!source.read(0, eh) || eh.e_shentsize != sizeof(Elf64_Shdr)) return false;
    for (unsigned i = 0; i < eh.e_shnum && i < 65536; ++i) {
        Elf64_Shdr sh;
        if (!source.read(eh.e_shoff + uint64_t{i} * sizeof(Elf64_Shdr), sh)) return false;
        if (sh.sh_type != type || sh.sh_entsize != sizeof(Elf64_Sym)) continue;
        Elf64_Shdr str;
        if (!source.read(eh.e_shoff + uint64_t{sh.sh_link} * sizeof(Elf64_Shdr), str)) return false;
        if (str.sh_type == SHT_NOBITS || str.sh_offset > source.size_ || source.size_ - str.sh_offset < str.sh_size) {
            return false;
        }
        strtab_ = reinterpret_cast<const char*>(source.image_ + str.sh_offset);
        strtab_size_ = str.sh_size;
        // The entries that lie within the file, read in place (libjvm's .symtab has ~58 k: a
        // bounds-checked copy and a growing vector per entry cost more than sorting them).
        uint64_t n = sh.sh_size / sizeof(Elf64_Sym);
        if (sh.sh_offset > source.size_) n = 0;
        else n = std::min<uint64_t>(n, (source.size_ - sh.sh_offset) / sizeof(Elf64_Sym));
        const uint8_t* const first = source.image_ + sh.sh_offset;
        auto is_function = [&](const Elf64_Sym& sym) {
            return ELF64_ST_TYPE(sym.st_info) == STT_FUNC && sym.st_value != 0 && sym.st_name < strtab_size_;
        };
        size_t functions = 0;
        uint64_t lowest = ~uint64_t{0};
        for (uint64_t k = 0; k < n; ++k) {
            Elf64_Sym sym;
            std::memcpy(&sym, first + k * sizeof(Elf64_Sym), sizeof sym);
            if (is_function(sym)) {
                ++functions;
                lowest = std::min<uint64_t>(lowest, sym.st_value);
            }
        }
        if (functions == 0 || n > UINT32_MAX) return false;
        symbols_.reserve(functions);   // growing by doubling copied more than this count costs
        symbols_base_ = lowest;
        symtab_ = first;
        for (uint64_t k = 0; k < n; ++k) {
            Elf64_Sym sym;
            std::memcpy(&sym, first + k * sizeof(Elf64_Sym), sizeof sym);
            // A function more than 4 GB above the lowest one (no real library spans that) is left out.
            if (is_function(sym) && sym.st_value - lowest <= UINT32_MAX) {
                symbols_.push_back({static_cast<uint32_t>(sym.st_value - lowest), static_cast<uint32_t>(k)});
            }
        }
        return !symbols_.empty();
    }
    return false;
}

std::unique_ptr<ElfFile> ElfFile::open_debug_file() const {
    if (debug_root_.empty() || build_id_.size() < 4) return nullptr;
    const std::string path =
        debug_root_ + "/.build-id/" + build_id_.substr(0, 2) + "/" + build_id_.substr(2) + ".debug";
    auto debug = std::make_unique<ElfFile>(path, "");
    // Another build's file under the same name would name every function wrongly.
    if (debug->image_ == nullptr || (!debug->build_id_.empty() && debug->build_id_ != build_id_)) return nullptr;
    return debug;
}

void ElfFile::load_symbols() {
    symbols_loaded_ = true;
    if (!valid_) return;
    if (!load_table(*this, SHT_SYMTAB)) {
        symbols_.clear();
        debug_file_ = open_debug_file();
        if (!debug_file_ || !load_table(*debug_file_, SHT_SYMTAB)) {
            symbols_.clear();
            debug_file_.reset();
            load_table(*this, SHT_DYNSYM);
        }
    }
    // Stable: aliases (one address, several names) keep their table order.
    radix_sort_by_key(symbols_, [](const Symbol& s) { return uint64_t{s.offset}; });
    // Of aliases function_at answers the last: put there the name the function is known by, the one
    // with the fewest leading underscores (glibc's debug file lists __clone3, clone3 and
    // __GI___clone3 at one address, and read as __libc_read, __read, read, ...), of those one that
    // is no old version's compatibility name (libm's __fmod_finite@GLIBC_2.15 beside
    // __ieee754_fmod), else the last listed (C++'s constructor variants, all "_Z...").
    const auto rank = [&](const Symbol& s) {
        Elf64_Sym sym;
        std::memcpy(&sym, symtab_ + uint64_t{s.index} * sizeof(Elf64_Sym), sizeof sym);
        const std::string_view name(strtab_ + sym.st_name, strnlen(strtab_ + sym.st_name, strtab_size_ - sym.st_name));
        const size_t underscores = std::min(name.find_first_not_of('_'), name.size());
        const bool compat = name.find('@') != std::string_view::npos && name.find("@@") == std::string_view::npos;
        return std::pair(underscores, compat);
    };
    for (size_t run = 0; run < symbols_.size();) {
        size_t end = run + 1;
        while (end < symbols_.size() && symbols_[end].offset == symbols_[run].offset) ++end;
        if (end - run > 1) {
            size_t best = end - 1;
            auto best_rank = rank(symbols_[best]);
            for (size_t k = end - 1; k-- > run;) {
                const auto r = rank(symbols_[k]);
                if (r < best_rank) {
                    best = k;
                    best_rank = r;
                }
            }
            std::swap(symbols_[best], symbols_[end - 1]);
        }
        run = end;
    }
    symbol_pages_.build(symbols_.size(), [&](size_t i) { return symbols_base_ + symbols_[i].offset; });
}

std::optional<ElfFile::Function> ElfFile::function_at(uint64_t vaddr) {
    if (!symbols_loaded_) load_symbols();
    const auto address = [&](const Symbol& s) { return symbols_base_ + s.offset; };
    auto it = symbols_.begin() +
              static_cast<std::ptrdiff_t>(symbol_pages_.upper_bound(vaddr, [&](size_t i) { return address(symbols_[i]); }));
    if (it == symbols_.begin()) return std::nullopt;
    const uint64_t next = it == symbols_.end() ? ~uint64_t{0} : address(*it);
    --it;
    Elf64_Sym sym;
    std::memcpy(&sym, symtab_ + uint64_t{it->index} * sizeof(Elf64_Sym), sizeof sym);
    const uint64_t start = address(*it);
    const uint64_t size = std::min<uint64_t>(sym.st_size, UINT32_MAX);   // none is 4 GB
    if (size != 0 && vaddr - start >= size) return std::nullopt;
    const char* raw = strtab_ + sym.st_name;
    const uint64_t until = size != 0 && size < next - start ? start + size : next;
    return Function{start, size, std::string_view(raw, strnlen(raw, strtab_size_ - sym.st_name)), until};
}

}  // namespace sf
