// Decoder fuzz entry: one snapshot per input, decoded against a code map captured from a real
// JDK 17 (tests/data/fuzz/codemap-jdk17.sfr). Random 64-bit pcs would almost never land in Java
// code, so the input may steer the pc (and rbp) into the map's known ranges; with every steering
// bit clear the input is taken literally, which is how real samples enter the corpus.
//
// Input layout (little-endian), kHeaderBytes then the fragment:
//   flags u8        see kSteer* / kUse* below
//   range u16       index into the known ranges (modulo their count) for kSteerIp
//   time_ns u64     the sample's time, unless kTimeAtEnd
//   regs 7 x u64    ip, sp, bp, ax, bx, r13, r15
//   stack_sp u64    where the fragment starts, used with kStackSpFromInput (else stack_sp = sp)
//   fragment        the rest
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "fuzz_entry.hpp"
#include "stackfrag/decoder/code_map.hpp"
#include "stackfrag/decoder/decoder.hpp"
#include "stackfrag/decoder/oracle_compare.hpp"
#include "stackfrag/events/recording.hpp"

namespace sf::fuzz {

namespace {

constexpr uint8_t kSteerIp = 1u << 0;           // ip = a known range's begin + (ip mod its length)
constexpr uint8_t kSteerBp = 1u << 1;           // bp = a word inside the fragment
constexpr uint8_t kTimeAtEnd = 1u << 2;         // time = after every code event (all code live)
constexpr uint8_t kUseLibunwind = 1u << 3;
constexpr uint8_t kSymbolize = 1u << 4;
constexpr uint8_t kStackSpFromInput = 1u << 5;

constexpr size_t kHeaderBytes = 1 + 2 + 8 + 7 * 8 + 8;

[[noreturn]] void broken_promise(const char* what) {
    std::fprintf(stderr, "fuzz_decoder: decoder broke a promise: %s\n", what);
    std::abort();
}

uint64_t load_u64(const uint8_t* at) {
    uint64_t value = 0;
    for (int i = 7; i >= 0; --i) value = value << 8 | at[i];
    return value;
}

struct Range {
    uint64_t begin;
    uint64_t end;   // exclusive, > begin
};

struct State {
    CodeMap map;
    std::vector<Range> ranges;
    uint64_t end_time = 0;
    // One decoder per option combination, built once: the native unwinder caches per module.
    std::unique_ptr<Decoder> decoders[4];
};

State* state = nullptr;

void note_range(std::vector<Range>& ranges, uint64_t begin, uint64_t end) {
    if (end > begin) ranges.push_back({begin, end});
}

}  // namespace

std::string fuzz_decoder_init(const std::string& codemap_path) {
    if (state != nullptr) return {};
    auto fresh = std::make_unique<State>();
    Result<std::unique_ptr<RecordingReader>> opened = RecordingReader::open(codemap_path);
    if (!opened) return opened.error().describe();
    while (std::optional<Event> event = (*opened)->next()) {
        fresh->end_time = std::max(fresh->end_time, time_of(*event) + 1);
        if (const auto* load = std::get_if<CodeLoad>(&*event)) {
            note_range(fresh->ranges, load->code_begin, load->code_end);
        } else if (const auto* stub = std::get_if<Stub>(&*event)) {
            note_range(fresh->ranges, stub->begin, stub->end);
        } else if (const auto* vm = std::get_if<VmInfo>(&*event)) {
            note_range(fresh->ranges, vm->interpreter_begin, vm->interpreter_end);
            note_range(fresh->ranges, vm->call_stub_return, vm->call_stub_return + 1);
            for (const CodeRange& codelet : vm->entry_codelets) note_range(fresh->ranges, codelet.begin, codelet.end);
        }
        fresh->map.apply(*event);
    }
    if ((*opened)->damage()) return (*opened)->damage()->error.describe();
    if (!fresh->map.has_vm()) return codemap_path + " holds no VmInfo event";
    if (fresh->ranges.empty()) return codemap_path + " holds no code ranges";
    for (int combo = 0; combo < 4; ++combo) {
        DecoderOptions options;
        options.use_libunwind = (combo & 1) != 0;
        options.symbolize_native = (combo & 2) != 0;
        fresh->decoders[combo] = std::make_unique<Decoder>(fresh->map, options);
    }
    state = fresh.release();   // lives for the process, as libFuzzer expects of its init
    return {};
}

int fuzz_decoder_one(const uint8_t* data, size_t size) {
    if (state == nullptr) broken_promise("fuzz_decoder_init was not called (not a decoder problem)");
    if (size < kHeaderBytes) return 0;
    const uint8_t flags = data[0];
    const uint16_t range_index = static_cast<uint16_t>(data[1] | data[2] << 8);
    const uint8_t* in = data + 3;

    Sample sample;
    sample.tid = 1;
    sample.time_ns = load_u64(in);
    in += 8;
    uint64_t* regs[] = {&sample.regs.ip, &sample.regs.sp, &sample.regs.bp, &sample.regs.ax,
                        &sample.regs.bx, &sample.regs.r13, &sample.regs.r15};
    for (uint64_t* reg : regs) {
        *reg = load_u64(in);
        in += 8;
    }
    sample.stack_sp = (flags & kStackSpFromInput) ? load_u64(in) : sample.regs.sp;
    in += 8;
    sample.stack.assign(in, data + size);

    if (flags & kSteerIp) {
        const Range& range = state->ranges[range_index % state->ranges.size()];
        sample.regs.ip = range.begin + sample.regs.ip % (range.end - range.begin);
    }
    if ((flags & kSteerBp) && !sample.stack.empty()) {
        sample.regs.bp = sample.stack_sp + ((sample.regs.bp % sample.stack.size()) & ~uint64_t{7});
    }
    if (flags & kTimeAtEnd) sample.time_ns = state->end_time;

    Decoder& decoder = *state->decoders[((flags & kUseLibunwind) ? 1 : 0) | ((flags & kSymbolize) ? 2 : 0)];
    CallTrace trace;
    decoder.decode(sample, trace);

    if (trace.frames.size() > decoder.options().max_frames) broken_promise("more frames than max_frames");
    if ((trace.status == TraceStatus::kFailed) != (trace.failure != FailReason::kNone)) {
        broken_promise("a failed trace without a reason, or a reason on a trace that did not fail");
    }
    if (trace.time_ns != sample.time_ns || trace.tid != sample.tid) broken_promise("trace not stamped with its sample");
    for (const Frame& frame : trace.frames) (void)frame_kind_name(frame.kind);
    (void)fail_reason_name(trace.failure);

    // The trace must agree with itself read as an oracle answer: exercises the comparison too.
    Oracle oracle;
    oracle.frames = java_frames_of(trace);
    oracle.agct_status = static_cast<int32_t>(oracle.frames.size());
    const Agreement agreement = compare_with_oracle(trace, oracle);
    if (!oracle.frames.empty() && trace.status != TraceStatus::kFailed && agreement != Agreement::kIdentical) {
        broken_promise("a trace disagrees with its own Java frames");
    }
    return 0;
}

}  // namespace sf::fuzz
