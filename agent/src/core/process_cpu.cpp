#include "process_cpu.hpp"

#include <fcntl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <array>
#include <charconv>

#include "stackfrag/base/clock.hpp"

namespace sf::agent {

std::optional<HostCpu> parse_proc_stat(std::string_view text, long ticks_per_second) {
    if (ticks_per_second <= 0 || !text.starts_with("cpu ")) return std::nullopt;
    text = text.substr(0, text.find('\n'));
    // user nice system idle iowait irq softirq steal (guest time is already inside user and nice)
    std::array<uint64_t, 8> ticks{};
    size_t at = 3;
    for (uint64_t& field : ticks) {
        while (at < text.size() && text[at] == ' ') ++at;
        const auto [end, error] = std::from_chars(text.data() + at, text.data() + text.size(), field);
        if (error != std::errc{}) return std::nullopt;
        at = static_cast<size_t>(end - text.data());
    }
    const uint64_t ns_per_tick = 1'000'000'000ull / static_cast<uint64_t>(ticks_per_second);
    const uint64_t busy = ticks[0] + ticks[1] + ticks[2] + ticks[5] + ticks[6] + ticks[7];
    return HostCpu{busy * ns_per_tick, ticks[7] * ns_per_tick};
}

namespace {

std::optional<HostCpu> host_cpu_now() {
    const int fd = ::open("/proc/stat", O_RDONLY | O_CLOEXEC);
    if (fd < 0) return std::nullopt;
    // The aggregate line comes first; 512 bytes hold it with room to spare.
    std::array<char, 512> buffer{};
    const ssize_t got = ::read(fd, buffer.data(), buffer.size());
    ::close(fd);
    if (got <= 0) return std::nullopt;
    return parse_proc_stat(std::string_view(buffer.data(), static_cast<size_t>(got)), ::sysconf(_SC_CLK_TCK));
}

}  // namespace

ProcessCpu process_cpu_now(bool at_start) {
    rusage usage{};
    getrusage(RUSAGE_SELF, &usage);
    ProcessCpu cpu{monotonic_ns(), timeval_ns(usage.ru_utime), timeval_ns(usage.ru_stime), at_start};
    if (const std::optional<HostCpu> host = host_cpu_now()) {
        cpu.host_busy_ns = host->busy_ns;
        cpu.host_steal_ns = host->steal_ns;
    }
    return cpu;
}

}  // namespace sf::agent
