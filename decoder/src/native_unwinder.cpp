#include "native_unwinder.hpp"

#include <cxxabi.h>
#include <elf.h>
#include <fcntl.h>
#include <libunwind.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <map>
#include <vector>

// libunwind 1.6 has no public "find proc info in this table" call; this is the exported routine its
// own ptrace and coredump accessors use to search an .eh_frame_hdr binary-search table.
extern "C" int _Ux86_64_dwarf_search_unwind_table(unw_addr_space_t as, unw_word_t ip, unw_dyn_info_t* di,
                                                  unw_proc_info_t* pi, int need_unwind_info, void* arg);

namespace sf::detail {

// An ELF file mapped read-only, with what unwinding and symbolization need from it. Every read is
// bounds-checked: the file may be truncated, replaced or not an ELF at all.
struct NativeUnwinder::Module {
    std::string path;
    const uint8_t* image = nullptr;
    size_t size = 0;
    bool valid = false;
    struct Segment {
        uint64_t vaddr, offset, filesz;
    };
    std::vector<Segment> loads;
    uint64_t eh_frame_hdr_vaddr = 0;   // 0 when absent
    uint64_t eh_frame_hdr_size = 0;
    struct Symbol {
        uint64_t vaddr, size;
        uint32_t name;   // offset into the string table
    };
    std::vector<Symbol> symbols;       // functions, sorted by vaddr
    const char* strtab = nullptr;
    size_t strtab_size = 0;
    bool symbols_loaded = false;
    std::map<uint64_t, std::string> demangled;   // cache per symbol address

    ~Module() {
        if (image) munmap(const_cast<uint8_t*>(image), size);
    }

    template <typename T>
    bool read(uint64_t offset, T& out) const {
        if (offset > size || size - offset < sizeof(T)) return false;
        std::memcpy(&out, image + offset, sizeof(T));
        return true;
    }

    void open_file() {
        int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
        if (fd < 0) return;
        struct stat st{};
        if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0) {
            void* p = mmap(nullptr, static_cast<size_t>(st.st_size), PROT_READ, MAP_PRIVATE, fd, 0);
            if (p != MAP_FAILED) {
                image = static_cast<const uint8_t*>(p);
                size = static_cast<size_t>(st.st_size);
            }
        }
        ::close(fd);
        if (!image) return;
        Elf64_Ehdr eh;
        if (!read(0, eh) || std::memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 || eh.e_ident[EI_CLASS] != ELFCLASS64) {
            return;
        }
        for (unsigned i = 0; i < eh.e_phnum && i < 256; ++i) {
            Elf64_Phdr ph;
            if (!read(eh.e_phoff + uint64_t{i} * sizeof(Elf64_Phdr), ph)) return;
            if (ph.p_type == PT_LOAD) loads.push_back({ph.p_vaddr, ph.p_offset, ph.p_filesz});
            if (ph.p_type == PT_GNU_EH_FRAME) {
                eh_frame_hdr_vaddr = ph.p_vaddr;
                eh_frame_hdr_size = ph.p_memsz;
            }
        }
        valid = !loads.empty();
    }

    // The file bytes backing ELF virtual address `vaddr`.
    bool read_vaddr(uint64_t vaddr, void* out, size_t len) const {
        for (const auto& s : loads) {
            if (vaddr >= s.vaddr && vaddr - s.vaddr < s.filesz && s.filesz - (vaddr - s.vaddr) >= len) {
                const uint64_t off = s.offset + (vaddr - s.vaddr);
                if (off > size || size - off < len) return false;
                std::memcpy(out, image + off, len);
                return true;
            }
        }
        return false;
    }

    // Load bias for a mapping of this file at `begin` from `file_offset`: runtime = vaddr + bias.
    bool bias_for(uint64_t begin, uint64_t file_offset, uint64_t& bias) const {
        for (const auto& s : loads) {
            const uint64_t seg_page = s.offset & ~uint64_t{0xfff};
            if (file_offset >= seg_page && file_offset < s.offset + std::max<uint64_t>(s.filesz, 1)) {
                const uint64_t vaddr_at_begin = (s.vaddr - (s.offset - seg_page)) + (file_offset - seg_page);
                bias = begin - vaddr_at_begin;
                return true;
            }
        }
        return false;
    }

    void load_symbols() {
        symbols_loaded = true;
        if (!valid) return;
        Elf64_Ehdr eh;
        if (!read(0, eh) || eh.e_shentsize != sizeof(Elf64_Shdr)) return;
        auto load_table = [&](uint32_t type) {
            for (unsigned i = 0; i < eh.e_shnum && i < 65536; ++i) {
                Elf64_Shdr sh;
                if (!read(eh.e_shoff + uint64_t{i} * sizeof(Elf64_Shdr), sh)) return false;
                if (sh.sh_type != type || sh.sh_entsize != sizeof(Elf64_Sym)) continue;
                Elf64_Shdr str;
                if (!read(eh.e_shoff + uint64_t{sh.sh_link} * sizeof(Elf64_Shdr), str)) return false;
                if (str.sh_offset > size || size - str.sh_offset < str.sh_size) return false;
                strtab = reinterpret_cast<const char*>(image + str.sh_offset);
                strtab_size = str.sh_size;
                const uint64_t n = sh.sh_size / sizeof(Elf64_Sym);
                for (uint64_t k = 0; k < n; ++k) {
                    Elf64_Sym sym;
                    if (!read(sh.sh_offset + k * sizeof(Elf64_Sym), sym)) break;
                    if (ELF64_ST_TYPE(sym.st_info) != STT_FUNC || sym.st_value == 0) continue;
                    if (sym.st_name >= strtab_size) continue;
                    symbols.push_back({sym.st_value, sym.st_size, sym.st_name});
                }
                return !symbols.empty();
            }
            return false;
        };
        if (!load_table(SHT_SYMTAB)) {
            symbols.clear();
            load_table(SHT_DYNSYM);
        }
        std::sort(symbols.begin(), symbols.end(), [](const Symbol& a, const Symbol& b) { return a.vaddr < b.vaddr; });
    }

    const std::string* symbol_at(uint64_t vaddr) {
        if (!symbols_loaded) load_symbols();
        auto it = std::upper_bound(symbols.begin(), symbols.end(), vaddr,
                                   [](uint64_t v, const Symbol& s) { return v < s.vaddr; });
        if (it == symbols.begin()) return nullptr;
        --it;
        if (it->size != 0 && vaddr - it->vaddr >= it->size) return nullptr;
        auto cached = demangled.find(it->vaddr);
        if (cached != demangled.end()) return &cached->second;
        const char* raw = strtab + it->name;
        const size_t max_len = strtab_size - it->name;
        std::string name(raw, strnlen(raw, max_len));
        int status = -1;
        char* pretty = abi::__cxa_demangle(name.c_str(), nullptr, nullptr, &status);
        if (status == 0 && pretty) name = pretty;
        std::free(pretty);
        return &demangled.emplace(it->vaddr, std::move(name)).first->second;
    }
};

namespace {
// DWARF pointer encodings (LSB .eh_frame_hdr).
constexpr uint8_t kEhPeUdata4 = 0x03;
constexpr uint8_t kEhPeSdata4 = 0x0b;
constexpr uint8_t kEhPePcrel = 0x10;
constexpr uint8_t kEhPeDatarel = 0x30;
}  // namespace

// The accessors are static members' friends in spirit: they reach the unwinder through `arg`.
struct UnwindAccess {
    NativeUnwinder* self;
    const StackView* view;
    uint64_t pc, sp, fp;
    NativeUnwinder::Module* (*module_for)(NativeUnwinder*, uint64_t, uint64_t&);
    bool (*read_module_data)(NativeUnwinder*, uint64_t, uint64_t&);
    // The module whose unwind table is being searched: its .eh_frame_hdr and .eh_frame usually lie
    // in a read-only segment that no (executable-only) ModuleMap covers.
    NativeUnwinder::Module* table_module = nullptr;
    uint64_t table_bias = 0;
};

namespace {

int find_proc_info(unw_addr_space_t as, unw_word_t ip, unw_proc_info_t* pi, int need_unwind_info, void* arg) {
    auto* a = static_cast<UnwindAccess*>(arg);
    uint64_t bias = 0;
    NativeUnwinder::Module* m = a->module_for(a->self, ip, bias);
    if (!m || m->eh_frame_hdr_vaddr == 0) return -UNW_ENOINFO;
    a->table_module = m;
    a->table_bias = bias;
    // .eh_frame_hdr: version, eh_frame_ptr_enc, fde_count_enc, table_enc, eh_frame_ptr, fde_count, table.
    uint8_t hdr[4];
    if (!m->read_vaddr(m->eh_frame_hdr_vaddr, hdr, 4) || hdr[0] != 1) return -UNW_ENOINFO;
    // Only the encodings every toolchain emits: eh_frame_ptr pcrel|sdata4, count udata4,
    // table datarel|sdata4.
    if (hdr[1] != (kEhPePcrel | kEhPeSdata4) || hdr[2] != kEhPeUdata4 ||
        hdr[3] != (kEhPeDatarel | kEhPeSdata4)) {
        return -UNW_ENOINFO;
    }
    uint32_t fde_count = 0;
    if (!m->read_vaddr(m->eh_frame_hdr_vaddr + 8, &fde_count, 4) || fde_count == 0) return -UNW_ENOINFO;
    unw_dyn_info_t di;
    std::memset(&di, 0, sizeof(di));
    di.format = UNW_INFO_FORMAT_REMOTE_TABLE;
    di.start_ip = 0;
    di.end_ip = ~unw_word_t{0};
    di.gp = 0;
    di.u.rti.name_ptr = 0;
    di.u.rti.segbase = m->eh_frame_hdr_vaddr + bias;
    di.u.rti.table_len = (uint64_t{fde_count} * 8) / sizeof(unw_word_t);
    di.u.rti.table_data = m->eh_frame_hdr_vaddr + 12 + bias;
    return _Ux86_64_dwarf_search_unwind_table(as, ip, &di, pi, need_unwind_info, arg);
}

void put_unwind_info(unw_addr_space_t, unw_proc_info_t*, void*) {
    // Table-format unwind info is owned and freed by libunwind itself.
}

int get_dyn_info_list_addr(unw_addr_space_t, unw_word_t*, void*) { return -UNW_ENOINFO; }

int access_mem(unw_addr_space_t, unw_word_t addr, unw_word_t* val, int write, void* arg) {
    if (write) return -UNW_EINVAL;
    auto* a = static_cast<UnwindAccess*>(arg);
    uint64_t v = 0;
    if (a->view->read(addr, v)) {
        *val = v;
        return 0;
    }
    uint64_t bias = 0;
    NativeUnwinder::Module* m = a->module_for(a->self, addr, bias);
    if (m && m->read_vaddr(addr - bias, &v, sizeof(v))) {
        *val = v;
        return 0;
    }
    if (a->table_module && a->table_module->read_vaddr(addr - a->table_bias, &v, sizeof(v))) {
        *val = v;
        return 0;
    }
    // A row from libunwind's cache comes without a find_proc_info call, so without table_module;
    // yet a row with DWARF expressions (glibc's signal trampoline, __restore_rt) reads them from
    // .eh_frame when it is applied. Found by address instead, the step no longer depends on what
    // earlier steps left in the cache.
    if (a->read_module_data(a->self, addr, v)) {
        *val = v;
        return 0;
    }
    return -UNW_EINVAL;
}

int access_reg(unw_addr_space_t, unw_regnum_t reg, unw_word_t* val, int write, void* arg) {
    if (write) return -UNW_EINVAL;
    auto* a = static_cast<UnwindAccess*>(arg);
    switch (reg) {
        case UNW_X86_64_RIP: *val = a->pc; return 0;
        case UNW_X86_64_RSP: *val = a->sp; return 0;
        case UNW_X86_64_RBP: *val = a->fp; return 0;
        default: return -UNW_EBADREG;
    }
}

int access_fpreg(unw_addr_space_t, unw_regnum_t, unw_fpreg_t*, int, void*) { return -UNW_EBADREG; }
int resume(unw_addr_space_t, unw_cursor_t*, void*) { return -UNW_EINVAL; }
int get_proc_name(unw_addr_space_t, unw_word_t, char*, size_t, unw_word_t*, void*) { return -UNW_ENOINFO; }

unw_accessors_t accessors = {find_proc_info, put_unwind_info, get_dyn_info_list_addr, access_mem,
                             access_reg,     access_fpreg,    resume,                 get_proc_name};

}  // namespace

NativeUnwinder::NativeUnwinder(const CodeMap& map, bool use_dwarf, bool symbolize)
    : map_(map), use_dwarf_(use_dwarf), symbolize_(symbolize) {}

NativeUnwinder::~NativeUnwinder() {
    if (address_space_) unw_destroy_addr_space(static_cast<unw_addr_space_t>(address_space_));
}

void NativeUnwinder::refresh() {
    if (generation_ == map_.modules_generation()) return;
    generation_ = map_.modules_generation();
    if (address_space_) unw_flush_cache(static_cast<unw_addr_space_t>(address_space_), 0, 0);
}

NativeUnwinder::Module* NativeUnwinder::module_for(uint64_t pc, uint64_t& load_bias) {
    refresh();
    const ModuleMap* mapping = map_.module_at(pc);
    if (!mapping || mapping->path.empty() || mapping->path[0] != '/') return nullptr;
    auto it = modules_.find(mapping->path);
    if (it == modules_.end()) {
        auto m = std::make_unique<Module>();
        m->path = mapping->path;
        m->open_file();
        it = modules_.emplace(mapping->path, std::move(m)).first;
    }
    Module* m = it->second.get();
    if (!m->valid || !m->bias_for(mapping->begin, mapping->file_offset, load_bias)) return nullptr;
    return m;
}

NativeUnwinder::Outcome NativeUnwinder::step_dwarf(const StackView& view, uint64_t pc, uint64_t sp, uint64_t fp, bool top,
                                NativeStep& out) {
    if (!use_dwarf_) return Outcome::kFailed;
    if (!address_space_) {
        unw_addr_space_t as = unw_create_addr_space(&accessors, 0);
        if (!as) {
            use_dwarf_ = false;
            return Outcome::kFailed;
        }
        // Cached rows make native-top samples about three times as fast to decode (bench_decode on
        // the 10 kHz demo: median 30 us uncached, 10-14 us cached).
        unw_set_caching_policy(as, UNW_CACHE_GLOBAL);
        address_space_ = as;
    }
    // A return address may be the first byte after a call to a noreturn function: look up the
    // unwind row of the call instruction itself.
    UnwindAccess access{this, &view, top ? pc : pc - 1, sp, fp,
                        [](NativeUnwinder* self, uint64_t addr, uint64_t& bias) { return self->module_for(addr, bias); },
                        [](NativeUnwinder* self, uint64_t addr, uint64_t& out) { return self->read_module_data(addr, out); }};
    unw_cursor_t cursor;
    if (unw_init_remote(&cursor, static_cast<unw_addr_space_t>(address_space_), &access) != 0) return Outcome::kFailed;
    const int stepped = unw_step(&cursor);
    if (stepped == 0) return Outcome::kEnd;
    if (stepped < 0) return Outcome::kFailed;
    unw_word_t npc = 0, nsp = 0, nfp = 0;
    if (unw_get_reg(&cursor, UNW_REG_IP, &npc) != 0 || unw_get_reg(&cursor, UNW_REG_SP, &nsp) != 0) return Outcome::kFailed;
    if (unw_get_reg(&cursor, UNW_X86_64_RBP, &nfp) != 0) nfp = fp;
    out = {npc, nsp, nfp};
    return Outcome::kStepped;
}

bool NativeUnwinder::read_module_data(uint64_t address, uint64_t& out) {
    // A file's read-only segments (.eh_frame, .rodata) lie next to its executable one: below it
    // or above it, with no other file's mapping in between.
    const std::vector<ModuleMap>& modules = map_.modules();
    auto above = std::upper_bound(modules.begin(), modules.end(), address,
                                  [](uint64_t a, const ModuleMap& m) { return a < m.begin; });
    for (auto it : {above == modules.begin() ? modules.end() : std::prev(above), above}) {
        if (it == modules.end()) continue;
        uint64_t bias = 0;
        Module* m = module_for(it->begin, bias);
        if (m && m->read_vaddr(address - bias, &out, sizeof(out))) return true;
    }
    return false;
}

const std::string& NativeUnwinder::symbol(uint64_t pc) {
    if (!symbolize_) return empty_;
    uint64_t bias = 0;
    Module* m = module_for(pc, bias);
    if (!m) return empty_;
    const std::string* s = m->symbol_at(pc - bias);
    return s ? *s : empty_;
}

}  // namespace sf::detail
