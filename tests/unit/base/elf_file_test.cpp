// ElfFile's build id is the GNU note binutils shows: what tells two builds of a library with the
// same path apart (a recording replayed after the library changed).
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "stackfrag/base/elf_file.hpp"
#include "minor_faults.hpp"
#include "test_env.hpp"

namespace {

std::string readelf_build_id(const std::string& path) {
    std::string out;
    if (FILE* p = popen(("readelf -n " + path + " 2>/dev/null").c_str(), "r")) {
        char buf[512];
        while (fgets(buf, sizeof buf, p)) out += buf;
        pclose(p);
    }
    const size_t at = out.find("Build ID: ");
    if (at == std::string::npos) return {};
    const size_t from = at + 10;
    return out.substr(from, out.find_first_of("\r\n", from) - from);
}

}  // namespace

TEST_CASE("the build id of an ELF file is its GNU note, and another build has another") {
    const std::string self = std::filesystem::read_symlink("/proc/self/exe").string();
    const std::string expected = readelf_build_id(self);
    // Debian's toolchain gives every binary a build id (ld --build-id), this test binary too.
    REQUIRE_FALSE(expected.empty());
    const sf::ElfFile elf(self);
    REQUIRE(elf.valid());
    CHECK(elf.build_id() == expected);
    sf::ElfFile moved;
    moved = sf::ElfFile(self);   // as a cache of modules keeps them
    CHECK(moved.build_id() == expected);

    // The same file with one byte of its build id changed.
    std::ifstream in(self, std::ios::binary);
    std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::string raw;
    for (size_t i = 0; i + 1 < expected.size(); i += 2) raw += static_cast<char>(std::stoi(expected.substr(i, 2), nullptr, 16));
    const auto found = std::search(bytes.begin(), bytes.end(), raw.begin(), raw.end());
    REQUIRE(found != bytes.end());
    *found = static_cast<char>(*found ^ 0x5a);
    const std::string dir = sf::test::temp_dir("elf");
    const std::string copy = dir + "/other-build";
    std::ofstream(copy, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    const sf::ElfFile other(copy);
    REQUIRE(other.valid());
    CHECK(other.build_id().size() == expected.size());
    CHECK(other.build_id() != expected);

    const sf::ElfFile none("/nonexistent");
    CHECK(none.build_id().empty());
    std::filesystem::remove_all(dir);
}

namespace {

// readelf's .symtab functions (defined, non-zero address): address -> names in table order.
std::map<uint64_t, std::vector<std::string>> readelf_functions(const std::string& path) {
    std::map<uint64_t, std::vector<std::string>> functions;
    FILE* p = popen(("readelf -sW " + path + " 2>/dev/null").c_str(), "r");
    if (p == nullptr) return functions;
    bool in_symtab = false;
    char buf[4096];
    while (fgets(buf, sizeof buf, p)) {
        std::string line(buf);
        if (line.rfind("Symbol table", 0) == 0) in_symtab = line.find("'.symtab'") != std::string::npos;
        if (!in_symtab) continue;
        std::istringstream fields(line);
        std::string num, value, size, type, bind, vis, ndx, name;
        if (!(fields >> num >> value >> size >> type >> bind >> vis >> ndx >> name) || type != "FUNC") continue;
        const uint64_t address = std::stoull(value, nullptr, 16);
        if (address != 0) functions[address].push_back(name);
    }
    pclose(p);
    return functions;
}

// The name function_at gives of aliases listed in table order: the fewest leading underscores, of
// those one without an old version ("name@VERSION"), of those the last listed.
std::string known_alias(const std::vector<std::string>& names) {
    const auto rank = [](const std::string& n) {
        const bool compat = n.find('@') != std::string::npos && n.find("@@") == std::string::npos;
        return std::pair(std::min(n.find_first_not_of('_'), n.size()), compat);
    };
    std::string best = names.back();
    for (auto it = names.rbegin(); it != names.rend(); ++it) {
        if (rank(*it) < rank(best)) best = *it;
    }
    return best;
}

}  // namespace

// Three names of one function, as glibc's debug file has them (__clone3, clone3, __GI___clone3).
extern "C" {
__attribute__((noinline, used)) int sf_test_aliased(int x) { return x * 3 + 1; }
int __sf_test_aliased(int) noexcept __attribute__((alias("sf_test_aliased")));
int __GI___sf_test_aliased(int) noexcept __attribute__((alias("sf_test_aliased")));
}

TEST_CASE("function_at names aliases by the name with the fewest leading underscores") {
    const std::string self = std::filesystem::read_symlink("/proc/self/exe").string();
    const auto functions = readelf_functions(self);
    const auto it = std::find_if(functions.begin(), functions.end(), [](const auto& f) {
        return std::find(f.second.begin(), f.second.end(), "sf_test_aliased") != f.second.end();
    });
    REQUIRE(it != functions.end());
    REQUIRE(it->second.size() == 3);
    sf::ElfFile elf(self);
    const auto found = elf.function_at(it->first + 1);
    REQUIRE(found.has_value());
    CHECK(found->name == "sf_test_aliased");
    CHECK(sf_test_aliased(1) == 4);
}

TEST_CASE("function_at names glibc's aliases as their users know them, where its debug file is installed") {
    // libc6-dbg (scripts/setup.sh) holds libc's and libm's .symtab, aliases included.
    size_t runs = 0, ranked = 0;
    for (const char* lib : {"/lib/x86_64-linux-gnu/libc.so.6", "/lib/x86_64-linux-gnu/libm.so.6"}) {
        const std::string id = readelf_build_id(lib);
        REQUIRE(id.size() > 4);
        const std::string debug = "/usr/lib/debug/.build-id/" + id.substr(0, 2) + "/" + id.substr(2) + ".debug";
        REQUIRE(std::filesystem::exists(debug));
        sf::ElfFile elf(lib, "/usr/lib/debug");
        for (const auto& [address, names] : readelf_functions(debug)) {
            if (names.size() < 2) continue;
            ++runs;
            const auto found = elf.function_at(address);
            REQUIRE(found.has_value());
            INFO(names.size() << " names at " << std::hex << address);
            CHECK(std::string(found->name) == known_alias(names));
            ranked += known_alias(names) != names.back();
            if (std::find(names.begin(), names.end(), "clone3") != names.end()) CHECK(found->name == "clone3");
        }
        CHECK(elf.symbols_from_debug_file());
    }
    CHECK(runs > 100);
    CHECK(ranked > 50);   // the rule decided, not the table's order
}

TEST_CASE("function_at names every function of libjvm's symbol table at its start, aliases by the known name") {
    const std::string path = sf::test::kJdk17 + "/lib/server/libjvm.so";
    REQUIRE(std::filesystem::exists(path));   // scripts/setup.sh installs JDK 17
    const auto functions = readelf_functions(path);
    REQUIRE(functions.size() > 10000);
    sf::ElfFile elf(path);
    REQUIRE(elf.valid());
    size_t aliased = 0;
    for (const auto& [address, names] : functions) {
        const auto found = elf.function_at(address);
        INFO("address " << std::hex << address);
        REQUIRE(found.has_value());
        REQUIRE(found->vaddr == address);
        REQUIRE(std::string(found->name) == known_alias(names));
        aliased += names.size() > 1;
    }
    REQUIRE(aliased > 0);   // the rule for aliases was exercised
}

TEST_CASE("libjvm's symbol table costs about a page per 512 functions, and answers with sizes") {
    const std::string path = sf::test::kJdk17 + "/lib/server/libjvm.so";
    REQUIRE(std::filesystem::exists(path));
    const auto functions = readelf_functions(path);
    REQUIRE(functions.size() > 30000);
    sf::ElfFile elf(path);
    REQUIRE(elf.valid());
    const long before = sf::test::minor_faults();
    const auto first = elf.function_at(functions.begin()->first);   // reads the table
    const long faults = sf::test::minor_faults() - before;
    REQUIRE(first.has_value());
    // The sorted table and the sort's scratch, 8 bytes a function each: ~190 fresh pages for JDK
    // 17's libjvm (48 k functions), plus the mapped .symtab read once (the kernel maps a file's
    // pages 16 at a fault): 218 faults. At 16 bytes a function it took ~410.
    size_t symbols = 0;   // aliases included: each is an entry
    for (const auto& entry : functions) symbols += entry.second.size();
    INFO(symbols << " function symbols, " << faults << " page faults");
    CHECK(faults < static_cast<long>(symbols * 2 * 8 / 4096) + 80);

    // A function's size bounds it: the address after its last byte is not in it unless another
    // function starts there.
    size_t sized = 0;
    for (auto it = functions.begin(); it != functions.end() && sized < 2000; ++it) {
        const auto found = elf.function_at(it->first);
        REQUIRE(found.has_value());
        if (found->size == 0) continue;
        ++sized;
        CHECK(found->until <= found->vaddr + found->size);
        const auto next = std::next(it);
        const uint64_t end = found->vaddr + found->size;
        if (next != functions.end() && next->first > end) CHECK_FALSE(elf.function_at(end).has_value());
        else if (next != functions.end()) CHECK(elf.function_at(end)->vaddr == next->first);
    }
    CHECK(sized > 1000);
}

TEST_CASE("a stripped file takes its function symbols from the detached debug file of its build id") {
    // As Debian ships glibc: libc.so.6 keeps .dynsym only, libc6-dbg puts the .symtab under
    // /usr/lib/debug/.build-id/. Here: this test binary, split the same way with objcopy.
    const std::string self = std::filesystem::read_symlink("/proc/self/exe").string();
    const std::string id = readelf_build_id(self);
    REQUIRE(id.size() > 4);
    const std::filesystem::path dir = std::filesystem::temp_directory_path() / ("sf-debugfile-" + std::to_string(getpid()));
    const std::filesystem::path root = dir / "debug", stripped = dir / "stripped";
    std::filesystem::create_directories(root / ".build-id" / id.substr(0, 2));
    const std::string debug = (root / ".build-id" / id.substr(0, 2) / (id.substr(2) + ".debug")).string();
    REQUIRE(std::system(("objcopy --only-keep-debug " + self + " " + debug).c_str()) == 0);
    REQUIRE(std::system(("objcopy --strip-all " + self + " " + stripped.string()).c_str()) == 0);

    sf::ElfFile full(self), with_debug(stripped.string(), root.string()), without(stripped.string(), "");
    REQUIRE(with_debug.build_id() == id);
    // Every address of the code the full file names gets the same name from the debug file; the
    // stripped file alone names few (its .dynsym's).
    size_t named = 0, named_without = 0, differing = 0;
    for (const auto& segment : full.loads()) {
        for (uint64_t vaddr = segment.vaddr; vaddr < segment.vaddr + segment.filesz; vaddr += 61) {
            const auto f = full.function_at(vaddr);
            if (!f) continue;
            ++named;
            const auto d = with_debug.function_at(vaddr);
            differing += !d || d->name != f->name || d->vaddr != f->vaddr;
            const auto w = without.function_at(vaddr);
            named_without += w && w->name == f->name;
        }
    }
    INFO("named " << named << ", differing " << differing << ", named without the debug file " << named_without);
    REQUIRE(named > 1000);
    CHECK(differing == 0);
    CHECK(named_without < named / 10);
    CHECK(with_debug.symbols_from_debug_file());
    CHECK_FALSE(without.symbols_from_debug_file());
    CHECK_FALSE(full.symbols_from_debug_file());

    // A debug file of another build under this build id's name is not used.
    REQUIRE(std::system(("objcopy --only-keep-debug /bin/true " + debug).c_str()) == 0);
    sf::ElfFile other(stripped.string(), root.string());
    (void)other.function_at(full.loads().front().vaddr);
    CHECK_FALSE(other.symbols_from_debug_file());
    std::filesystem::remove_all(dir);
}
