// ElfFile's build id is the GNU note binutils shows: what tells two builds of a library with the
// same path apart (a recording replayed after the library changed).
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "stackfrag/base/elf_file.hpp"
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
