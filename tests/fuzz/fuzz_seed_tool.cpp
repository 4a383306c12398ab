// Makes the fuzzers' starting material from a real recording:
//   fuzz_seed_tool codemap REC OUT            the code events of REC (no samples) -> a new recording
//   fuzz_seed_tool decoder-seeds REC DIR N    up to N samples of REC as fuzz_decoder inputs
//   fuzz_seed_tool recording-seeds REC DIR    small recordings of every event kind, zstd and stored
#include <zstd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <map>
#include <string>
#include <vector>

#include "stackfrag/events/recording.hpp"

namespace {

using namespace sf;

int fail(const std::string& what) {
    std::fprintf(stderr, "fuzz_seed_tool: %s\n", what.c_str());
    return 1;
}

std::vector<Event> read_events(const std::string& path, std::string& error) {
    std::vector<Event> events;
    auto opened = RecordingReader::open(path);
    if (!opened) {
        error = opened.error().describe();
        return events;
    }
    while (auto event = (*opened)->next()) events.push_back(std::move(*event));
    if ((*opened)->damage()) error = (*opened)->damage()->error.describe();
    return events;
}

bool write_recording(const std::string& path, const std::vector<Event>& events, size_t chunk_bytes,
                     std::string& error) {
    RecordingHeader header;
    header.pid = 4242;
    header.producer = "fuzz_seed_tool";
    header.command_line = "seed";
    RecordingWriterOptions options;
    options.chunk_bytes = chunk_bytes;
    options.compression_level = 19;   // the code map seed is committed: keep it small
    auto writer = RecordingWriter::create(path, header, options);
    if (!writer) {
        error = writer.error().describe();
        return false;
    }
    for (const Event& event : events) {
        if (Status status = (*writer)->write(event); !status) {
            error = status.error().describe();
            return false;
        }
    }
    if (Status status = (*writer)->close(); !status) {
        error = status.error().describe();
        return false;
    }
    return true;
}

std::vector<uint8_t> read_bytes(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void write_bytes(const std::string& path, const std::vector<uint8_t>& bytes) {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

uint32_t u32_at(const std::vector<uint8_t>& b, size_t at) {
    uint32_t v;
    std::memcpy(&v, b.data() + at, 4);
    return v;
}

void put_u32(std::vector<uint8_t>& b, size_t at, uint32_t v) {
    std::memcpy(b.data() + at, &v, 4);
}

// Rewrites every zstd chunk as a stored one. Checksums are left stale: the fuzz entry recomputes
// them, and the stale copy still reaches the checksum paths. With `unknown_kind`, an event of a
// kind no reader knows goes at the front of the first chunk (the skip path).
std::vector<uint8_t> as_stored(const std::vector<uint8_t>& file, bool unknown_kind) {
    const size_t first = 16 + u32_at(file, 12) + 4;
    std::vector<uint8_t> out(file.begin(), file.begin() + static_cast<long>(first));
    bool first_chunk = true;
    for (size_t at = first; at + 44 <= file.size();) {
        std::vector<uint8_t> header(file.begin() + static_cast<long>(at), file.begin() + static_cast<long>(at + 44));
        const uint32_t stored = u32_at(header, 8);
        const uint32_t raw_length = u32_at(header, 12);
        std::vector<uint8_t> raw(raw_length);
        if (header[4] == 1) {
            ZSTD_decompress(raw.data(), raw.size(), file.data() + at + 44, stored);
        } else {
            std::memcpy(raw.data(), file.data() + at + 44, stored);
        }
        if (unknown_kind && first_chunk) {
            const uint8_t extra[] = {42, 3, 0, 0, 0, 'n', 'e', 'w'};
            raw.insert(raw.begin(), std::begin(extra), std::end(extra));
            put_u32(header, 16, u32_at(header, 16) + 1);
        }
        header[4] = 0;
        put_u32(header, 8, static_cast<uint32_t>(raw.size()));
        put_u32(header, 12, static_cast<uint32_t>(raw.size()));
        out.insert(out.end(), header.begin(), header.end());
        out.insert(out.end(), raw.begin(), raw.end());
        at += 44 + stored;
        first_chunk = false;
    }
    return out;
}

void append_u64(std::vector<uint8_t>& out, uint64_t v) {
    for (int i = 0; i < 8; ++i) out.push_back(static_cast<uint8_t>(v >> (8 * i)));
}

int codemap(const std::string& in, const std::string& out) {
    std::string error;
    std::vector<Event> events = read_events(in, error);
    if (!error.empty()) return fail(error);
    std::vector<Event> kept;
    for (Event& event : events) {
        switch (kind_of(event)) {
            case EventKind::kVmInfo:
            case EventKind::kCodeLoad:
            case EventKind::kCodeUnload:
            case EventKind::kStub:
            case EventKind::kMethod:
            case EventKind::kModule: kept.push_back(std::move(event)); break;
            default: break;
        }
    }
    if (!write_recording(out, kept, 1u << 20, error)) return fail(error);
    std::printf("%zu code events written to %s\n", kept.size(), out.c_str());
    return 0;
}

// Samples spread over the recording and over its threads, literally (no steering bits): the
// fuzzer starts from snapshots the decoder really meets.
int decoder_seeds(const std::string& in, const std::string& dir, size_t wanted) {
    std::string error;
    std::vector<Event> events = read_events(in, error);
    if (!error.empty()) return fail(error);
    std::vector<const Sample*> samples;
    for (const Event& event : events) {
        if (const auto* sample = std::get_if<Sample>(&event)) samples.push_back(sample);
        if (const auto* oracle = std::get_if<Oracle>(&event)) samples.push_back(&oracle->sample);
    }
    if (samples.empty()) return fail(in + " holds no samples");
    const size_t step = std::max<size_t>(1, samples.size() / wanted);
    size_t written = 0;
    for (size_t i = 0; i < samples.size() && written < wanted; i += step) {
        const Sample& s = *samples[i];
        std::vector<uint8_t> input;
        input.push_back(1u << 3 | 1u << 5);   // libunwind on, stack_sp taken from the input
        input.push_back(0);
        input.push_back(0);
        append_u64(input, s.time_ns);
        for (uint64_t reg : {s.regs.ip, s.regs.sp, s.regs.bp, s.regs.ax, s.regs.bx, s.regs.r13, s.regs.r15}) {
            append_u64(input, reg);
        }
        append_u64(input, s.stack_sp);
        input.insert(input.end(), s.stack.begin(), s.stack.end());
        char name[64];
        std::snprintf(name, sizeof(name), "/sample-%04zu", written++);
        write_bytes(dir + name, input);
    }
    std::printf("%zu decoder inputs written to %s\n", written, dir.c_str());
    return 0;
}

int recording_seeds(const std::string& in, const std::string& dir) {
    std::string error;
    std::vector<Event> events = read_events(in, error);
    if (!error.empty()) return fail(error);
    // A few real events of each kind, the smallest ones so the seeds stay small.
    std::map<EventKind, std::vector<Event>> by_kind;
    for (Event& event : events) {
        auto& bucket = by_kind[kind_of(event)];
        if (bucket.size() < 3) bucket.push_back(std::move(event));
    }
    std::vector<Event> picked;
    for (auto& [kind, bucket] : by_kind) {
        for (Event& event : bucket) {
            if (auto* sample = std::get_if<Sample>(&event)) sample->stack.resize(std::min<size_t>(sample->stack.size(), 512));
            if (auto* load = std::get_if<CodeLoad>(&event)) load->code.resize(std::min<size_t>(load->code.size(), 256));
            picked.push_back(std::move(event));
        }
    }
    // Kinds the agent did not record this time, so that every decoder path has a start.
    Oracle oracle;
    oracle.sample.time_ns = 7;
    oracle.sample.stack = {1, 2, 3, 4, 5, 6, 7, 8};
    oracle.agct_status = 2;
    oracle.frames = {{11, 3}, {12, -1}};
    picked.push_back(oracle);
    picked.push_back(CodeUnload{8, 11, 0x1000});
    picked.push_back(Lost{9, 5, 100});
    picked.push_back(ThreadInfo{10, 5, true, "worker"});
    picked.push_back(ModuleMap{11, 0x400000, 0x500000, 0x1000, "/usr/lib/libfake.so", "", {}});

    const std::string zstd_path = dir + "/seed-zstd.sfr";
    std::remove(zstd_path.c_str());
    if (!write_recording(zstd_path, picked, 2048, error)) return fail(error);
    const std::vector<uint8_t> zstd_file = read_bytes(zstd_path);
    write_bytes(dir + "/seed-stored.sfr", as_stored(zstd_file, false));
    write_bytes(dir + "/seed-stored-unknown-kind.sfr", as_stored(zstd_file, true));
    std::printf("3 recordings written to %s\n", dir.c_str());
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    const std::vector<std::string> args(argv + 1, argv + argc);
    if (args.size() == 3 && args[0] == "codemap") return codemap(args[1], args[2]);
    if (args.size() == 4 && args[0] == "decoder-seeds") return decoder_seeds(args[1], args[2], std::stoul(args[3]));
    if (args.size() == 3 && args[0] == "recording-seeds") return recording_seeds(args[1], args[2]);
    std::fprintf(stderr,
                 "usage: fuzz_seed_tool codemap REC OUT | decoder-seeds REC DIR N | recording-seeds REC DIR\n");
    return 2;
}
