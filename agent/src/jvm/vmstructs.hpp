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
#include "vm_struct_tables.hpp"

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

// The live tables of this process's libjvm (dlsym of gHotSpotVMStructs & co.).
Result<VmStructTables> load_vm_struct_tables();

// Reads an integer field of `width` bytes at base + field offset, sign- or zero-extended.
std::optional<int64_t> read_int_field(uint64_t base, const ResolvedField& field);
// Reads a pointer-sized field at base + field offset.
std::optional<uint64_t> read_pointer_field(uint64_t base, const ResolvedField& field);

// This process's tables, loaded once on first use; thread-safe. Never destroyed.
Result<const VmStructTables*> shared_tables();

// The OS thread id (gettid value) of a live platform Java thread: java.lang.Thread.eetop ->
// JavaThread* -> _osthread -> OSThread::_thread_id. For threads that existed before the agent
// (attach, main thread). Errors for virtual threads, terminated threads or unreadable memory.
// Uses JNI field access only (no Java code runs).
Result<pid_t> os_tid_of(JNIEnv* jni, jthread thread);

}  // namespace sf::agent::vm
