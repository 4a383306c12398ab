// The agent's shared library as built: its imports are bound when the JVM loads it (-z now), so no
// JVM thread running a callback and no SIGPROF handler of the agent's goes through glibc's lazy
// binding (_dl_runtime_resolve, ~10-50 us of symbol lookup at each first call, and a frame a
// sample there must be unwound through). Read from the file's dynamic section.
#include <catch2/catch.hpp>

#include <elf.h>

#include <string>

#include "stackfrag/base/elf_file.hpp"

namespace {

const std::string kAgent = STACKFRAG_BINARY_DIR "/lib/libstackfrag.so";

struct BindFlags {
    std::string error;
    bool bind_now = false;   // DT_BIND_NOW, DF_BIND_NOW or DF_1_NOW
    bool relro = false;      // a PT_GNU_RELRO segment: the bound table read-only afterwards
};

BindFlags bind_flags(const std::string& path) {
    BindFlags flags;
    const sf::ElfFile elf(path);
    Elf64_Ehdr eh{};
    if (!elf.valid() || !elf.read(0, eh)) return {"not a readable ELF64 file: " + path};
    for (size_t i = 0; i < eh.e_phnum; ++i) {
        Elf64_Phdr ph{};
        if (!elf.read(eh.e_phoff + i * eh.e_phentsize, ph)) return {"truncated program headers"};
        if (ph.p_type == PT_GNU_RELRO) flags.relro = true;
        if (ph.p_type != PT_DYNAMIC) continue;
        Elf64_Dyn dyn{};
        for (uint64_t off = ph.p_offset; off + sizeof dyn <= ph.p_offset + ph.p_filesz && elf.read(off, dyn);
             off += sizeof dyn) {
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
