#include <catch2/catch.hpp>

#include <fstream>
#include <optional>
#include <sstream>
#include <string>

#include "vm_struct_tables.hpp"

using sf::agent::vm::parse_vmstructs_dump;
using sf::agent::vm::resolve_layout;
using sf::hotspot::Field;
using sf::hotspot::Family;
using sf::hotspot::TypeSize;

namespace {

// The live VMStructs dumps of the two target builds (shared/docs/vmstructs).
std::string read_dump(const char* jdk) {
    std::ifstream in(std::string(STACKFRAG_SHARED_DIR) + "/docs/vmstructs/vmstructs-jdk" + jdk + ".txt");
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
}

// The dump's tables, or nullopt (with a warning) when shared/ is not beside the project.
std::optional<sf::agent::vm::VmStructTables> dump_tables(const char* jdk) {
    std::string text = read_dump(jdk);
    if (text.empty()) {
        WARN("shared/docs/vmstructs/vmstructs-jdk" << jdk << ".txt not found; skipped");
        return std::nullopt;
    }
    auto tables = parse_vmstructs_dump(text);
    REQUIRE(tables.ok());
    return std::move(tables).value();
}

}  // namespace

TEST_CASE("the JDK 17 dump resolves every entry the VM capture needs, as layout 17") {
    std::string text = read_dump("17");
    if (text.empty()) {
        WARN("shared/docs/vmstructs/vmstructs-jdk17.txt not found; skipped");
        return;
    }
    auto tables = parse_vmstructs_dump(text);
    REQUIRE(tables.ok());
    CHECK(tables->field_count() == 788);
    auto layout = resolve_layout(*tables, 17);
    REQUIRE(layout.ok());
    const auto& l = *layout;
    CHECK(l.facts->family == Family::kJdk17);
    CHECK_FALSE(l.layout_guessed);
    // Expected values from hotspot-frames.md Appendix A.
    CHECK(l[Field::kCodeBlobFrameSize].offset == 28);
    CHECK(l[Field::kCodeBlobFrameSize].width == 4);
    CHECK(l[Field::kCodeBlobFrameCompleteOffset].offset == 20);
    CHECK(l[Field::kCodeBlobFrameCompleteOffset].width == 4);
    CHECK(l[Field::kCodeBlobCodeBegin].offset == 32);
    CHECK(l[Field::kCodeBlobCodeBegin].width == 8);
    CHECK(l[Field::kCompiledMethodMethod].offset == 112);
    CHECK(l[Field::kNmethodCompLevel].offset == 308);
    CHECK(l[Field::kNmethodCompLevel].width == 4);
    CHECK(l[Field::kHeapBlockLength].width == 8);
    CHECK(l[Field::kHeapBlockUsed].offset == 8);
    CHECK(l[Field::kConstMethodCodeSize].offset == 32);
    CHECK(l[Field::kConstMethodCodeSize].width == 2);
    CHECK(l[Field::kConstMethodCodeSize].is_unsigned);
    CHECK(l[Field::kJavaThreadOsThread].offset == 560);
    CHECK(l[Field::kOsThreadThreadId].offset == 208);
    CHECK(l[Field::kOsThreadThreadId].width == 4);
    CHECK(l[Field::kCodeCacheHeaps].is_static);
    CHECK(l[Field::kStubRoutinesCallStubReturnAddress].is_static);
    CHECK_FALSE(l[Field::kContinuationEntryReturnPc].present);
    CHECK(l.size_of(TypeSize::kConstMethod) == 48);
    CHECK(l.size_of(TypeSize::kHeapBlock) == 16);
    CHECK(l.size_of(TypeSize::kCodeBlob) == 104);
    CHECK(l.size_of(TypeSize::kNmethod) == 352);
}

TEST_CASE("the JDK 25 dump resolves every entry the VM capture needs, as layout 25") {
    std::string text = read_dump("25");
    if (text.empty()) {
        WARN("shared/docs/vmstructs/vmstructs-jdk25.txt not found; skipped");
        return;
    }
    auto tables = parse_vmstructs_dump(text);
    REQUIRE(tables.ok());
    CHECK(tables->field_count() == 585);
    // The markers decide even without the release number.
    auto layout = resolve_layout(*tables, 0);
    REQUIRE(layout.ok());
    const auto& l = *layout;
    CHECK(l.facts->family == Family::kJdk25);
    CHECK_FALSE(l.layout_guessed);
    CHECK(l[Field::kCodeBlobFrameSize].offset == 44);
    CHECK(l[Field::kCodeBlobFrameCompleteOffset].offset == 54);
    CHECK(l[Field::kCodeBlobFrameCompleteOffset].width == 2);
    CHECK_FALSE(l[Field::kCodeBlobFrameCompleteOffset].is_unsigned);
    CHECK(l[Field::kCodeBlobKind].offset == 56);
    CHECK(l[Field::kCodeBlobKind].width == 1);
    CHECK(l[Field::kCodeBlobCodeOffset].offset == 36);
    CHECK(l[Field::kNmethodMethod].offset == 80);
    CHECK(l[Field::kNmethodEntryOffset].width == 2);
    CHECK(l[Field::kNmethodCompLevel].offset == 216);
    CHECK(l[Field::kNmethodCompLevel].width == 1);
    CHECK(l[Field::kHeapBlockLength].width == 4);
    CHECK(l[Field::kHeapBlockUsed].offset == 4);
    CHECK(l[Field::kConstMethodCodeSize].offset == 34);
    CHECK(l[Field::kThreadOsThread].offset == 1016);
    CHECK(l[Field::kOsThreadThreadId].offset == 12);
    CHECK(l[Field::kContinuationEntryReturnPc].present);
    CHECK(l.size_of(TypeSize::kConstMethod) == 56);
    CHECK(l.size_of(TypeSize::kHeapBlock) == 8);
    CHECK(l.size_of(TypeSize::kNmethod) == 224);
    CHECK(l.code_blob_kind_nmethod == 1);
}

TEST_CASE("an untested release is resolved with the closest layout and flagged") {
    auto tables = dump_tables("25");
    if (!tables) return;
    auto layout = resolve_layout(*tables, 24);
    REQUIRE(layout.ok());
    CHECK(layout->facts->family == Family::kJdk25);
    CHECK(layout->layout_guessed);
}

TEST_CASE("the blob header markers overrule a release whose row contradicts them") {
    // JDK 17's tables (CompiledMethod, absolute code addresses) claimed by a VM saying it is 25: the
    // tables are what the capture reads, so the absolute-header row nearest 25 (21) is used, flagged.
    auto tables = dump_tables("17");
    if (!tables) return;
    auto layout = resolve_layout(*tables, 25);
    REQUIRE(layout.ok());
    CHECK(layout->facts->family == Family::kJdk21);
    CHECK(layout->absolute_header());
    CHECK(layout->layout_guessed);
    // Without a release the markers decide alone, unflagged (as for a capture that has no version).
    auto unversioned = resolve_layout(*tables, 0);
    REQUIRE(unversioned.ok());
    CHECK(unversioned->facts->family == Family::kJdk17);
    CHECK_FALSE(unversioned->layout_guessed);
}

TEST_CASE("JDK 21 is its own row: the 17-style tables it has resolve, unflagged") {
    // jdk21u's vmStructs.cpp exports the same blob and thread entries as 17 (CompiledMethod,
    // CodeBlob::_code_begin, nmethod::_entry_point, JavaThread::_osthread); 17's dump stands in for them.
    auto tables = dump_tables("17");
    if (!tables) return;
    auto layout = resolve_layout(*tables, 21);
    REQUIRE(layout.ok());
    CHECK(layout->facts->family == Family::kJdk21);
    CHECK(layout->facts->locals_fp_relative);
    CHECK_FALSE(layout->layout_guessed);
    CHECK(layout->fields[static_cast<size_t>(Field::kJavaThreadOsThread)].present);
}

TEST_CASE("tables lacking needed entries give one error naming all of them") {
    auto tables = parse_vmstructs_dump(
        "TYPE int super=(null) oop=0 int=1 unsigned=0 size=4\n"
        "TYPE CodeBlob super=(null) oop=0 int=0 unsigned=0 size=64\n"
        "STRUCT CodeBlob::_size int static=0 offset=24\n"
        "STRUCT CodeBlob::_kind CodeBlobKind static=0 offset=56\n"
        "STRUCT nmethod::_immutable_data address static=0 offset=96\n");
    REQUIRE(tables.ok());
    auto layout = resolve_layout(*tables, 25);
    REQUIRE_FALSE(layout.ok());
    const std::string message = layout.error().message;
    CHECK(message.find("CodeBlob::_frame_size") != std::string::npos);
    CHECK(message.find("StubRoutines::_call_stub_return_address") != std::string::npos);
    CHECK(message.find("sizeof nmethod") != std::string::npos);
    // Present and sized: not reported.
    CHECK(message.find("CodeBlob::_size,") == std::string::npos);
}

TEST_CASE("a malformed dump is rejected") {
    CHECK_FALSE(parse_vmstructs_dump("").ok());
    CHECK_FALSE(parse_vmstructs_dump("STRUCT nonsense\n").ok());
}
