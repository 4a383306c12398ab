#include "vm_struct_tables.hpp"

#include <charconv>
#include <string>
#include <vector>

namespace sf::agent::vm {

void VmStructTables::add_type(std::string_view name, uint64_t size, bool is_integer, bool is_unsigned) {
    types_.insert_or_assign(std::string(name), TypeEntry{size, is_integer, is_unsigned});
}

void VmStructTables::add_field(std::string_view type, std::string_view field, std::string_view type_string,
                               bool is_static, uint64_t offset, uint64_t address) {
    ResolvedField f;
    f.present = true;
    f.is_static = is_static;
    f.offset = offset;
    f.address = address;
    if (auto it = types_.find(std::string(type_string)); it != types_.end()) {
        f.width = static_cast<uint32_t>(it->second.size);
        f.is_unsigned = it->second.is_unsigned;
    } else if (!type_string.empty() && type_string.back() == '*') {
        // Pointer types are mostly not listed as types of their own.
        f.width = sizeof(void*);
        f.is_unsigned = true;
    }
    std::string key;
    key.reserve(type.size() + 2 + field.size());
    key.append(type).append("::").append(field);
    fields_.insert_or_assign(std::move(key), f);
}

void VmStructTables::add_int_constant(std::string_view name, int64_t value) {
    int_constants_.insert_or_assign(std::string(name), value);
}

const ResolvedField* VmStructTables::field(std::string_view type, std::string_view name) const {
    std::string key;
    key.reserve(type.size() + 2 + name.size());
    key.append(type).append("::").append(name);
    auto it = fields_.find(key);
    return it == fields_.end() ? nullptr : &it->second;
}

std::optional<uint64_t> VmStructTables::type_size(std::string_view type) const {
    auto it = types_.find(std::string(type));
    if (it == types_.end()) return std::nullopt;
    return it->second.size;
}

std::optional<int64_t> VmStructTables::int_constant(std::string_view name) const {
    auto it = int_constants_.find(std::string(name));
    if (it == int_constants_.end()) return std::nullopt;
    return it->second;
}

namespace {

std::string_view trim(std::string_view s) {
    while (!s.empty() && (s.front() == ' ' || s.front() == '\t' || s.front() == '\r')) s.remove_prefix(1);
    while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
    return s;
}

// The value of "key=value" inside `line` (up to the next space), or empty.
std::string_view attribute(std::string_view line, std::string_view key) {
    std::string needle;
    needle.reserve(key.size() + 2);
    needle.append(" ").append(key).append("=");
    size_t at = line.find(needle);
    if (at == std::string_view::npos) return {};
    std::string_view rest = line.substr(at + needle.size());
    return rest.substr(0, rest.find(' '));
}

template <class T>
bool parse_number(std::string_view text, T& out, int base = 10) {
    if (base == 16 && text.substr(0, 2) == "0x") text.remove_prefix(2);
    auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), out, base);
    return ec == std::errc() && ptr == text.data() + text.size();
}

}  // namespace

Result<VmStructTables> parse_vmstructs_dump(std::string_view text) {
    std::vector<std::string_view> lines;
    for (size_t pos = 0; pos < text.size();) {
        size_t end = text.find('\n', pos);
        if (end == std::string_view::npos) end = text.size();
        lines.push_back(text.substr(pos, end - pos));
        pos = end + 1;
    }
    VmStructTables tables;
    // Types first, so that fields get their widths.
    for (std::string_view line : lines) {
        if (line.substr(0, 5) != "TYPE ") continue;
        size_t super = line.find(" super=");
        if (super == std::string_view::npos) return make_error(Errc::kCorrupt, "bad TYPE line: " + std::string(line));
        uint64_t size = 0;
        if (!parse_number(attribute(line, "size"), size)) {
            return make_error(Errc::kCorrupt, "bad TYPE size: " + std::string(line));
        }
        tables.add_type(trim(line.substr(5, super - 5)), size, attribute(line, "int") == "1",
                        attribute(line, "unsigned") == "1");
    }
    for (std::string_view line : lines) {
        if (line.substr(0, 7) == "STRUCT ") {
            std::string_view rest = line.substr(7);
            size_t name_end = rest.find(' ');
            size_t static_at = rest.find(" static=");
            if (name_end == std::string_view::npos || static_at == std::string_view::npos || static_at < name_end) {
                return make_error(Errc::kCorrupt, "bad STRUCT line: " + std::string(line));
            }
            std::string_view qualified = rest.substr(0, name_end);
            size_t split = qualified.rfind("::");
            if (split == std::string_view::npos) return make_error(Errc::kCorrupt, "bad STRUCT name: " + std::string(line));
            std::string_view type_string = trim(rest.substr(name_end, static_at - name_end));
            bool is_static = attribute(line, "static") == "1";
            uint64_t offset = 0, address = 0;
            if (is_static) {
                (void)parse_number(attribute(line, "address"), address, 16);
            } else if (!parse_number(attribute(line, "offset"), offset)) {
                return make_error(Errc::kCorrupt, "bad STRUCT offset: " + std::string(line));
            }
            tables.add_field(qualified.substr(0, split), qualified.substr(split + 2), type_string, is_static, offset,
                             address);
        } else if (line.substr(0, 4) == "INT ") {
            std::string_view rest = line.substr(4);
            size_t space = rest.find(' ');
            int64_t value = 0;
            if (space == std::string_view::npos || !parse_number(trim(rest.substr(space + 1)), value)) {
                return make_error(Errc::kCorrupt, "bad INT line: " + std::string(line));
            }
            tables.add_int_constant(rest.substr(0, space), value);
        }
    }
    if (tables.field_count() == 0 || tables.type_count() == 0) {
        return make_error(Errc::kCorrupt, "no STRUCT or TYPE lines in the VMStructs dump");
    }
    return tables;
}

namespace {

// The row nearest to `release` among those with blob header `header` (rows are sorted by release).
const hotspot::JdkFacts* nearest_row_with(hotspot::BlobHeader header, int release) {
    const hotspot::JdkFacts* chosen = nullptr;
    for (const hotspot::JdkFacts& row : hotspot::kJdkFacts) {
        if (row.blob_header != header) continue;
        if (chosen == nullptr || row.first_release <= release) chosen = &row;
    }
    return chosen;
}

}  // namespace

Result<VmLayoutOffsets> resolve_layout(const VmStructTables& tables, int jdk_major) {
    using hotspot::BlobHeader;
    auto has = [&](const hotspot::FieldName& f) { return tables.field(f.type, f.field) != nullptr; };
    const bool looks_offsets = has(hotspot::kMarkerOffsets) && has(hotspot::kMarkerOffsetsKind);
    const bool looks_absolute = has(hotspot::kMarkerAbsolute);

    VmLayoutOffsets out;
    const hotspot::JdkChoice choice = hotspot::jdk_facts(jdk_major);
    out.facts = choice.facts;
    // Every release the rows do not name exactly is a guess, even where the tables agree.
    out.layout_guessed = jdk_major != 0 && !choice.exact;
    if (looks_offsets != looks_absolute) {
        const BlobHeader header = looks_offsets ? BlobHeader::kOffsets : BlobHeader::kAbsoluteAddresses;
        if (out.facts->blob_header != header) {
            out.facts = nearest_row_with(header, jdk_major);
            out.layout_guessed = jdk_major != 0;
        }
    } else {
        out.layout_guessed = true;
    }

    std::string missing;
    auto note_missing = [&](std::string_view what) {
        if (!missing.empty()) missing += ", ";
        missing += what;
    };
    const uint8_t bit = out.facts->field_bit;
    for (size_t i = 0; i < hotspot::kFieldNames.size(); ++i) {
        const hotspot::FieldName& name = hotspot::kFieldNames[i];
        const ResolvedField* f = tables.field(name.type, name.field);
        if (f != nullptr) {
            out.fields[i] = *f;
        }
        bool required = (name.required_in & bit) != 0;
        if (!required) continue;
        if (f == nullptr) {
            note_missing(std::string(name.type) + "::" + std::string(name.field));
        } else if (!f->is_static && f->width == 0) {
            note_missing(std::string(name.type) + "::" + std::string(name.field) + " (type size)");
        }
    }
    for (size_t i = 0; i < hotspot::kTypeNames.size(); ++i) {
        auto size = tables.type_size(hotspot::kTypeNames[i]);
        if (!size || *size == 0) {
            note_missing(std::string("sizeof ") + std::string(hotspot::kTypeNames[i]));
        } else {
            out.type_sizes[i] = *size;
        }
    }
    if (out.facts->blob_has_kind) {
        auto kind = tables.int_constant(hotspot::kCodeBlobKindNmethodConstant);
        if (!kind) {
            note_missing(hotspot::kCodeBlobKindNmethodConstant);
        } else {
            out.code_blob_kind_nmethod = *kind;
        }
    }
    if (!missing.empty()) {
        return make_error(Errc::kUnsupported,
                          "this JVM's VMStructs lack entries the VM capture needs (JDK " +
                              std::to_string(static_cast<int>(out.facts->family)) + " row): " + missing,
                          "stackfrag supports HotSpot JDK 17, 21 and 25");
    }
    return out;
}

}  // namespace sf::agent::vm
