// HotSpot's exported VMStructs tables (gHotSpotVMStructs & co., resolved with dlsym from the
// already loaded libjvm) and guarded reads of VM memory at the addresses they lead to.
#pragma once

#include <jvmti.h>
#include <sys/types.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "stackfrag/base/result.hpp"
#include "stackfrag/hotspot/vm_layout.hpp"

namespace sf::agent::vm {

// Copies `size` bytes from `address` in this process without faulting on unmapped memory
// (process_vm_readv on ourselves; a pipe write where that is forbidden). False when unreadable.
bool safe_read(uint64_t address, void* out, size_t size);

template <class T>
std::optional<T> safe_read_value(uint64_t address) {
    T value{};
    if (!safe_read(address, &value, sizeof(T))) {
        return std::nullopt;
    }
    return value;
}

// A NUL-terminated string of at most max_length bytes; nullopt when unreadable or unterminated.
std::optional<std::string> safe_read_c_string(uint64_t address, size_t max_length = 256);

// One resolved struct entry: an instance offset, or the absolute address of a static.
struct ResolvedField {
    bool present = false;
    bool is_static = false;
    uint64_t offset = 0;    // instance field
    uint64_t address = 0;   // static field
    uint32_t width = 0;     // bytes, from the VMTypes size of its type string; 0 when unknown
    bool is_unsigned = false;
};

// The raw tables as read from libjvm.
class VmStructTables {
public:
    static Result<VmStructTables> load();

    const ResolvedField* field(std::string_view type, std::string_view name) const;
    std::optional<uint64_t> type_size(std::string_view type) const;
    std::optional<int64_t> int_constant(std::string_view name) const;
    size_t struct_count() const { return fields_.size(); }

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

// Everything vm_layout.hpp names, resolved for the running VM's layout.
struct VmLayoutOffsets {
    hotspot::StructLayout layout = hotspot::StructLayout::kJdk17;
    bool layout_guessed = false;   // tables matched neither family cleanly; closest one used
    std::array<ResolvedField, static_cast<size_t>(hotspot::Field::kCount)> fields{};
    std::array<uint64_t, static_cast<size_t>(hotspot::TypeSize::kCount)> type_sizes{};
    int64_t code_blob_kind_nmethod = 1;   // 25 family

    const ResolvedField& operator[](hotspot::Field f) const { return fields[static_cast<size_t>(f)]; }
    uint64_t size_of(hotspot::TypeSize t) const { return type_sizes[static_cast<size_t>(t)]; }
};

// Picks the layout family (markers in the tables, then jdk_major) and resolves every entry;
// the Error lists every required entry the tables lack.
Result<VmLayoutOffsets> resolve_layout(const VmStructTables& tables, int jdk_major);

// Reads an integer field of `width` bytes at base + field offset, sign- or zero-extended.
std::optional<int64_t> read_int_field(uint64_t base, const ResolvedField& field);
// Reads a pointer-sized field at base + field offset.
std::optional<uint64_t> read_pointer_field(uint64_t base, const ResolvedField& field);

// The process-wide resolution (tables + layout), done once on first use; thread-safe. jdk_major
// comes from java.specification.version when the caller knows it, else 0 (markers decide).
Result<const VmLayoutOffsets*> shared_layout(int jdk_major = 0);

// The OS thread id (gettid value) of a live platform Java thread: java.lang.Thread.eetop ->
// JavaThread* -> _osthread -> OSThread::_thread_id. For threads that existed before the agent
// (attach, main thread). Errors for virtual threads, terminated threads or unreadable memory.
// Uses JNI field access only (no Java code runs).
Result<pid_t> os_tid_of(JNIEnv* jni, jthread thread);

}  // namespace sf::agent::vm
