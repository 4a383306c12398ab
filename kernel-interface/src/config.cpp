#include <asm/perf_regs.h>
#include <unistd.h>

#include <charconv>
#include <cstring>
#include <ctime>
#include <string>

#include "stackfrag/kernel/perf_events.hpp"

namespace sf::kernel {

namespace {

Error invalid(std::string field, std::string message, std::string hint) {
    return make_error(Errc::kInvalidArgument, "sampling config: " + field + " " + message,
                      std::move(hint));
}

bool is_power_of_two(uint64_t value) { return value != 0 && (value & (value - 1)) == 0; }

}  // namespace

Result<uint64_t> parse_interval(std::string_view text) {
    const std::string shown(text);
    const auto bad = [&shown](std::string why) {
        return make_error(Errc::kInvalidArgument, "interval '" + shown + "': " + why,
                          "write a whole number with a unit, e.g. 100us, 1ms, 2s (ns, us, ms, s)");
    };
    if (text.empty()) return bad("empty");
    uint64_t number = 0;
    const char* begin = text.data();
    const char* end = begin + text.size();
    const auto [stop, ec] = std::from_chars(begin, end, number);
    if (ec == std::errc::result_out_of_range) return bad("too large");
    if (ec != std::errc() || stop == begin) return bad("does not start with a number");

    const std::string_view unit(stop, static_cast<size_t>(end - stop));
    uint64_t scale = 0;
    if (unit.empty() || unit == "ns") scale = 1;
    else if (unit == "us" || unit == "\xC2\xB5s") scale = 1'000;
    else if (unit == "ms") scale = 1'000'000;
    else if (unit == "s") scale = 1'000'000'000;
    else return bad("unknown unit '" + std::string(unit) + "'");
    if (number > UINT64_MAX / scale) return bad("too large");
    return number * scale;
}

uint64_t sample_regs_user_mask() {
    return (1ULL << PERF_REG_X86_AX) | (1ULL << PERF_REG_X86_BX) | (1ULL << PERF_REG_X86_BP) |
           (1ULL << PERF_REG_X86_SP) | (1ULL << PERF_REG_X86_IP) | (1ULL << PERF_REG_X86_R13) |
           (1ULL << PERF_REG_X86_R15);
}

// perf cuts the stack part so the record's 16-bit size holds it: the fields before the stack (96
// bytes here), the stack's size and dyn_size words, rounded up to 8. The decoder knows the result as
// kLargestPerfFragment (a recording's fact), so the two must agree.
static_assert((65535 - (8 + 8 + 8 + 8 + 8 + 7 * 8) - 2 * 8 - 8 + 7) / 8 * 8 == kLargestPerfFragment);

size_t sample_record_bytes(uint32_t stack_bytes) {
    constexpr size_t kRegs = 7;
    // header, ip, pid+tid, time, abi, regs, stack size, stack, dyn_size
    return 8 + 8 + 8 + 8 + 8 + kRegs * 8 + 8 + stack_bytes + 8;
}

Status validate(const SamplingConfig& config) {
    if (config.period_ns == 0) {
        return invalid("period_ns", "is 0", "give a sampling interval such as 1ms");
    }
    if (config.period_ns < kMinPeriodNs) {
        return invalid("period_ns", "is " + std::to_string(config.period_ns) + " ns, below 10us",
                       "the kernel's software clocks do not fire more often than every 10us");
    }
    if (config.period_ns > (1ULL << 62)) {
        return invalid("period_ns", "is too large", "give an interval below 100 years");
    }
    if (config.stack_bytes == 0 || config.stack_bytes % 8 != 0 ||
        config.stack_bytes > kMaxStackBytes) {
        return invalid("stack_bytes", "is " + std::to_string(config.stack_bytes),
                       "give a multiple of 8 between 8 and 65528, e.g. 16384");
    }
    if (!is_power_of_two(config.ring_pages)) {
        return invalid("ring_pages", "is " + std::to_string(config.ring_pages) +
                                         ", not a power of two",
                       "give a power of two such as 64, 128 or 256");
    }
    const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    const size_t ring_bytes = static_cast<size_t>(config.ring_pages) * page;
    const size_t record = sample_record_bytes(config.stack_bytes);
    if (ring_bytes < 2 * record) {
        return invalid("ring_pages",
                       "is " + std::to_string(config.ring_pages) + " (" +
                           std::to_string(ring_bytes) + " bytes), too small for two samples of " +
                           std::to_string(record) + " bytes",
                       "raise ring_pages or lower stack_bytes");
    }
    if (config.wakeup_bytes >= ring_bytes) {
        return invalid("wakeup_bytes", "is " + std::to_string(config.wakeup_bytes) +
                                           ", not below the ring's " + std::to_string(ring_bytes) +
                                           " bytes",
                       "give 0 (half the ring) or a smaller watermark");
    }
    return {};
}

perf_event_attr make_attr(const SamplingConfig& config, bool inherit) {
    perf_event_attr attr;
    std::memset(&attr, 0, sizeof attr);
    attr.size = sizeof attr;
    attr.type = PERF_TYPE_SOFTWARE;
    attr.config = config.clock == ClockKind::kTask ? PERF_COUNT_SW_TASK_CLOCK
                                                   : PERF_COUNT_SW_CPU_CLOCK;
    attr.sample_period = config.period_ns;
    attr.sample_type = PERF_SAMPLE_IP | PERF_SAMPLE_TID | PERF_SAMPLE_TIME |
                       PERF_SAMPLE_REGS_USER | PERF_SAMPLE_STACK_USER;
    attr.sample_regs_user = sample_regs_user_mask();
    attr.sample_stack_user = config.stack_bytes;
    attr.disabled = 1;
    // Kernel-mode ticks need perf_event_paranoid <= 1 (or CAP_PERFMON); the decoder walks their
    // user registers and stack and marks the time as the kernel's.
    attr.exclude_kernel = config.kernel ? 0 : 1;
    attr.exclude_hv = 1;
    attr.sample_id_all = 1;
    attr.inherit = inherit ? 1 : 0;
    // Threads only: a process the JVM forks (ProcessBuilder) is not ours to sample.
    attr.inherit_thread = inherit ? 1 : 0;
    attr.watermark = 1;
    const size_t ring_bytes = static_cast<size_t>(config.ring_pages) *
                              static_cast<size_t>(sysconf(_SC_PAGESIZE));
    attr.wakeup_watermark = config.wakeup_bytes != 0 ? config.wakeup_bytes
                                                     : static_cast<uint32_t>(ring_bytes / 2);
    // Samples and the JVM's events (agent, JVMTI callbacks) must share one clock.
    attr.use_clockid = 1;
    attr.clockid = CLOCK_MONOTONIC;
    return attr;
}

perf_event_attr make_switch_attr(const SamplingConfig& config) {
    perf_event_attr attr = make_attr(config, false);
    attr.config = PERF_COUNT_SW_CONTEXT_SWITCHES;
    attr.sample_period = 1;
    attr.exclude_kernel = 0;
    return attr;
}

}  // namespace sf::kernel
