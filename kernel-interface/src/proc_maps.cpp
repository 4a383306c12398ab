#include "stackfrag/kernel/proc_maps.hpp"

#include <pthread.h>
#include <sys/auxv.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <iterator>

namespace sf::kernel {

bool ExecutableMapping::is_file() const {
    return !path.empty() && path.front() == '/' && !path.ends_with(" (deleted)");
}

std::vector<ExecutableMapping> parse_executable_maps(std::string_view maps_text) {
    std::vector<ExecutableMapping> maps;
    while (!maps_text.empty()) {
        const size_t newline = maps_text.find('\n');
        const std::string line(maps_text.substr(0, newline));
        maps_text = newline == std::string_view::npos ? std::string_view() : maps_text.substr(newline + 1);
        // begin-end perms offset dev inode [path]
        char perms[5] = {};
        unsigned long long begin = 0, end = 0, offset = 0;
        int path_at = 0;
        if (std::sscanf(line.c_str(), "%llx-%llx %4s %llx %*s %*s %n", &begin, &end, perms, &offset, &path_at) < 4) {
            continue;
        }
        if (perms[2] != 'x' || end <= begin) continue;
        std::string path = path_at > 0 && static_cast<size_t>(path_at) <= line.size() ? line.substr(static_cast<size_t>(path_at)) : "";
        while (!path.empty() && path.back() == ' ') path.pop_back();
        maps.push_back({begin, end, offset, std::move(path)});
    }
    std::sort(maps.begin(), maps.end(),
              [](const ExecutableMapping& a, const ExecutableMapping& b) { return a.begin < b.begin; });
    return maps;
}

namespace {
std::string read_maps(pid_t pid) {
    std::ifstream in(pid == 0 ? std::string("/proc/self/maps") : "/proc/" + std::to_string(pid) + "/maps");
    if (!in) return {};
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}
}  // namespace

std::vector<ExecutableMapping> read_executable_maps(pid_t pid) { return parse_executable_maps(read_maps(pid)); }

uint64_t mapping_end_at(std::string_view maps_text, uint64_t address) {
    while (!maps_text.empty()) {
        const size_t newline = maps_text.find('\n');
        const std::string line(maps_text.substr(0, newline));
        maps_text = newline == std::string_view::npos ? std::string_view() : maps_text.substr(newline + 1);
        unsigned long long begin = 0, end = 0;
        if (std::sscanf(line.c_str(), "%llx-%llx", &begin, &end) < 2) continue;
        if (begin <= address && address < end) return end;
    }
    return 0;
}

uint64_t read_mapping_end_at(uint64_t address, pid_t pid) { return mapping_end_at(read_maps(pid), address); }

uint64_t current_thread_stack_top() {
    pthread_attr_t attr;
    if (pthread_getattr_np(pthread_self(), &attr) != 0) return 0;
    void* low = nullptr;
    size_t size = 0;
    const bool got = pthread_attr_getstack(&attr, &low, &size) == 0;
    pthread_attr_destroy(&attr);
    return got && low != nullptr ? reinterpret_cast<uint64_t>(low) + size : 0;
}

bool fault_in_readable(uint64_t address) {
    uint64_t word = 0;
    iovec local{&word, sizeof word};
    iovec remote{reinterpret_cast<void*>(address & ~uint64_t{7}), sizeof word};
    return process_vm_readv(getpid(), &local, 1, &remote, 1, 0) == static_cast<ssize_t>(sizeof word);
}

namespace {
constexpr uint64_t kMaxVdsoBytes = 1 << 20;   // 8 KB on x86_64 kernels; more would be no vDSO
}  // namespace

bool is_own_vdso(const ExecutableMapping& mapping) {
    const uint64_t ehdr = getauxval(AT_SYSINFO_EHDR);
    return ehdr != 0 && mapping.path == "[vdso]" && mapping.begin == ehdr && mapping.end > mapping.begin &&
           mapping.end - mapping.begin <= kMaxVdsoBytes;
}

std::vector<uint8_t> copy_own_vdso(const ExecutableMapping& mapping) {
    if (!is_own_vdso(mapping)) return {};
    const auto* bytes = reinterpret_cast<const uint8_t*>(mapping.begin);
    return std::vector<uint8_t>(bytes, bytes + (mapping.end - mapping.begin));
}

std::vector<uint8_t> own_vdso_image() {
    for (const ExecutableMapping& mapping : read_executable_maps(0)) {
        if (is_own_vdso(mapping)) return copy_own_vdso(mapping);
    }
    return {};
}

}  // namespace sf::kernel
