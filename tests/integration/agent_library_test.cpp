// The agent's shared library as built: its imports are bound when the JVM loads it (-z now), so no
// JVM thread running a callback and no SIGPROF handler of the agent's goes through glibc's lazy
// binding (_dl_runtime_resolve, ~10-50 us of symbol lookup at each first call, and a frame a
// sample there must be unwound through). Read from the file's dynamic section.
#include <catch2/catch.hpp>

#include <elf.h>

#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

namespace {

const std::string kAgent = STACKFRAG_BINARY_DIR "/lib/libstackfrag.so";

struct BindFlags {
    std::string error;
    bool bind_now = false;   // DT_BIND_NOW, DF_BIND_NOW or DF_1_NOW
    bool relro = false;      // a PT_GNU_RELRO segment: the bound table read-only afterwards
};

BindFlags bind_flags(const std::string& path) {
    BindFlags flags;
    std::ifstream in(path, std::ios::binary);
    const std::vector<char> file{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
    Elf64_Ehdr eh{};
    if (file.size() < sizeof eh) return {"cannot read " + path};
    std::memcpy(&eh, file.data(), sizeof eh);
    if (std::memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 || eh.e_ident[EI_CLASS] != ELFCLASS64) return {"not ELF64: " + path};
    for (size_t i = 0; i < eh.e_phnum; ++i) {
        Elf64_Phdr ph{};
        const size_t at = eh.e_phoff + i * eh.e_phentsize;
        if (at + sizeof ph > file.size()) return {"truncated program headers"};
        std::memcpy(&ph, file.data() + at, sizeof ph);
        if (ph.p_type == PT_GNU_RELRO) flags.relro = true;
        if (ph.p_type != PT_DYNAMIC) continue;
        for (size_t off = ph.p_offset; off + sizeof(Elf64_Dyn) <= ph.p_offset + ph.p_filesz && off + sizeof(Elf64_Dyn) <= file.size();
             off += sizeof(Elf64_Dyn)) {
            Elf64_Dyn dyn{};
            std::memcpy(&dyn, file.data() + off, sizeof dyn);
            if (dyn.d_tag == DT_NULL) break;
            if (dyn.d_tag == DT_BIND_NOW || (dyn.d_tag == DT_FLAGS && (dyn.d_un.d_val & DF_BIND_NOW)) ||
                (dyn.d_tag == DT_FLAGS_1 && (dyn.d_un.d_val & DF_1_NOW))) {
                flags.bind_now = true;
            }
        }
    }
    return flags;
}

}  // namespace

TEST_CASE("the agent's library binds its imports at load, not at each first call", "[library]") {
    const BindFlags flags = bind_flags(kAgent);
    INFO(flags.error);
    REQUIRE(flags.error.empty());
    CHECK(flags.bind_now);
    CHECK(flags.relro);
}
