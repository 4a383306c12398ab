// The mappings of a process as /proc/PID/maps lists them: the executable ones are what the agent and
// `stackfrag capture` announce as ModuleMap events; the one holding a thread's sp bounds its stack.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace sf::kernel {

struct ExecutableMapping {
    uint64_t begin = 0;
    uint64_t end = 0;      // exclusive
    uint64_t offset = 0;   // file offset of `begin`
    std::string path;      // "" for anonymous memory; "[vdso]" and the like for special mappings
    bool operator==(const ExecutableMapping&) const = default;
    // Backed by a file that can be opened for unwind tables and symbols (not anonymous, special or
    // deleted).
    bool is_file() const;
};

// The mappings with execute permission in `maps_text` (the format of /proc/PID/maps), by address.
std::vector<ExecutableMapping> parse_executable_maps(std::string_view maps_text);
// Reads /proc/PID/maps (pid 0: this process); empty when it cannot be read.
std::vector<ExecutableMapping> read_executable_maps(pid_t pid = 0);

// The end (exclusive) of the mapping in `maps_text` that holds `address`, 0 if none does. For a
// thread's stack pointer: the top of its stack (or higher, where the kernel merged the stack with a
// mapping of the same permissions right above it).
uint64_t mapping_end_at(std::string_view maps_text, uint64_t address);
// The same from /proc/PID/maps (pid 0: this process); 0 when it cannot be read.
uint64_t read_mapping_end_at(uint64_t address, pid_t pid = 0);
// The highest address of the calling thread's stack (pthread_getattr_np: for a thread of
// pthread_create the end of its stack block, for the process's first thread that of [stack]),
// 0 if unknown. No frame of the thread lies at or above it.
uint64_t current_thread_stack_top();

// Reads a word of this process's memory at `address` through the kernel (process_vm_readv, which
// reports an unmapped address instead of faulting), so that a page of a mapping no one has touched
// yet gets a page-table entry. A perf sample's copy of a user stack cannot take a fault and stops
// at such a page, even inside a thread's live stack. False when the address is not readable.
bool fault_in_readable(uint64_t address);

// The vDSO (the kernel's code for clock_gettime and the like, which no file holds). Whether
// `mapping` is this process's, where the auxiliary vector says the kernel put it: only then are
// its bytes known to be there and readable.
bool is_own_vdso(const ExecutableMapping& mapping);
// A copy of the bytes of `mapping`, which is_own_vdso accepted.
std::vector<uint8_t> copy_own_vdso(const ExecutableMapping& mapping);
// This process's vDSO, found in /proc/self/maps, copied: the same bytes as in any 64-bit process of
// this kernel. Empty when there is none.
std::vector<uint8_t> own_vdso_image();

}  // namespace sf::kernel
