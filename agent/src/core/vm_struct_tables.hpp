// HotSpot's VMStructs tables as plain data, and their resolution against the names the VM capture
// needs (stackfrag/hotspot/vm_layout.hpp). Filled from the live tables by agent/src/jvm/vmstructs.cpp,
// or from a text dump (shared/docs/vmstructs) by tests; nothing here touches VM memory.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>

#include "stackfrag/base/result.hpp"
#include "stackfrag/hotspot/vm_layout.hpp"

namespace sf::agent::vm {

// One struct entry: an instance offset, or the absolute address of a static.
struct ResolvedField {
    bool present = false;
    bool is_static = false;
    uint64_t offset = 0;    // instance field
    uint64_t address = 0;   // static field
    uint32_t width = 0;     // bytes, from the VMTypes size of its type string; 0 when unknown
    bool is_unsigned = false;
};

class VmStructTables {
public:
    // Types first: a field's width comes from the type of its type string known when it is added.
    void add_type(std::string_view name, uint64_t size, bool is_integer, bool is_unsigned);
    void add_field(std::string_view type, std::string_view field, std::string_view type_string,
                   bool is_static, uint64_t offset, uint64_t address);
    void add_int_constant(std::string_view name, int64_t value);

    const ResolvedField* field(std::string_view type, std::string_view name) const;
    std::optional<uint64_t> type_size(std::string_view type) const;
    std::optional<int64_t> int_constant(std::string_view name) const;
    size_t field_count() const { return fields_.size(); }
    size_t type_count() const { return types_.size(); }

private:
    struct TypeEntry {
        uint64_t size = 0;
        bool is_integer = false;
        bool is_unsigned = false;
    };
    std::unordered_map<std::string, ResolvedField> fields_;   // key "Type::field"
    std::unordered_map<std::string, TypeEntry> types_;
    std::unordered_map<std::string, int64_t> int_constants_;
};

// Parses the dump format of shared/docs/vmstructs/vmstructs-jdk*.txt (STRUCT / TYPE / INT lines).
Result<VmStructTables> parse_vmstructs_dump(std::string_view text);

// Everything vm_layout.hpp names, resolved for the running VM's row of jdk_facts.hpp.
struct VmLayoutOffsets {
    const hotspot::JdkFacts* facts = &hotspot::kJdkFacts.front();
    // The row is not the one of the VM's release (a release without a row of its own, or tables that
    // contradict its row), or the tables matched no blob header layout cleanly.
    bool layout_guessed = false;
    std::array<ResolvedField, static_cast<size_t>(hotspot::Field::kCount)> fields{};
    std::array<uint64_t, static_cast<size_t>(hotspot::TypeSize::kCount)> type_sizes{};
    int64_t code_blob_kind_nmethod = 1;   // rows with blob_has_kind

    const ResolvedField& operator[](hotspot::Field f) const { return fields[static_cast<size_t>(f)]; }
    uint64_t size_of(hotspot::TypeSize t) const { return type_sizes[static_cast<size_t>(t)]; }
    bool absolute_header() const { return facts->blob_header == hotspot::BlobHeader::kAbsoluteAddresses; }
};

// Picks the row (hotspot::jdk_facts of jdk_major; the blob header markers in the tables overrule a
// row that contradicts them, and decide alone when jdk_major is 0) and resolves every entry; the
// Error lists every required entry the tables lack.
Result<VmLayoutOffsets> resolve_layout(const VmStructTables& tables, int jdk_major);

}  // namespace sf::agent::vm
