// HotSpot's exported VMStructs tables (gHotSpotVMStructs & co., resolved with dlsym from the
// already loaded libjvm) and guarded reads of this process's memory at the addresses they lead to.
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
#include "vm_memory.hpp"
#include "vm_struct_tables.hpp"

namespace sf::agent::vm {

// Copies `size` bytes from `address` in this process without faulting on unmapped memory
// (process_vm_readv on ourselves; a pipe write where that is forbidden). False when unreadable.
bool safe_read(uint64_t address, void* out, size_t size);

// This process's memory as the VM capture's readers see it (safe_read underneath).
const VmMemory& process_memory();

// The live tables of this process's libjvm (dlsym of gHotSpotVMStructs & co.).
Result<VmStructTables> load_vm_struct_tables();

// This process's tables, loaded once on first use; thread-safe. Never destroyed.
Result<const VmStructTables*> shared_tables();

// The OS thread id (gettid value) of a live platform Java thread: java.lang.Thread.eetop ->
// JavaThread* -> _osthread -> OSThread::_thread_id. For threads that existed before the agent
// (attach, main thread). Errors for virtual threads, terminated threads or unreadable memory.
// Uses JNI field access only (no Java code runs).
Result<pid_t> os_tid_of(JNIEnv* jni, jthread thread);

}  // namespace sf::agent::vm
