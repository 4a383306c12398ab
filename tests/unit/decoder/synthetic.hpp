// Synthetic snapshots laid out as hotspot-frames.md describes: a fake stack at a fake address, fake
// code ranges announced through the same events the agent sends.
#pragma once

#include <cstdint>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "stackfrag/decoder/breadcrumb.hpp"
#include "stackfrag/decoder/code_map.hpp"
#include "stackfrag/decoder/decoder.hpp"
#include "stackfrag/hotspot/frame_layout.hpp"

namespace sf::test {

inline constexpr uint64_t kStackBase = 0x7ffd'0000'0000ull;
inline constexpr uint32_t kStackBytes = 16384;

// The synthetic VM's code lies at 0x3f..'....'...., where no mapping of a test process is: its
// libraries are placed anywhere in the terabyte below the stack (0x7e..-0x7f..), its executable and
// heap near 0x55..-0x56.., and tests that walk this process's own code beside a World announce
// those modules too. At 0x7f10.../0x7f20... libc once fell inside the code cache (about one run in
// 4,000), and its pcs read as VM code.
inline constexpr uint64_t kInterpBegin = 0x3f10'0000'0000ull;
inline constexpr uint64_t kInterpEnd = kInterpBegin + 0x20000;
inline constexpr uint64_t kEntryCodeletBegin = kInterpBegin + 0x1000;   // "method entry point"
inline constexpr uint64_t kEntryCodeletEnd = kInterpBegin + 0x1400;
inline constexpr uint64_t kInterpReturnPc = kInterpBegin + 0x5010;      // "invoke return entry points"
inline constexpr uint64_t kInterpBodyPc = kInterpBegin + 0x8020;        // some bytecode template
inline constexpr uint64_t kCodeCacheLow = 0x3f20'0000'0000ull;
inline constexpr uint64_t kCodeCacheHigh = kCodeCacheLow + 0x1000'0000;
inline constexpr uint64_t kCallStubReturn = kCodeCacheLow + 0x100;
inline constexpr uint64_t kNativePc = 0x3f30'0000'1234ull;              // "libfoo.so", not code

// Methods: Method* = kMethodPtr + i*0x100, jmethodID = kMethodId + i, bytecodes at kBytecodes + i*0x1000.
inline constexpr uint64_t kMethodPtr = 0x8'0000'0000ull;
inline constexpr uint64_t kMethodId = 0x7f40'0000'0000ull;
inline constexpr uint64_t kBytecodes = 0x8'1000'0000ull;
inline uint64_t method_ptr(int i) { return kMethodPtr + uint64_t(i) * 0x100; }
inline uint64_t method_id(int i) { return kMethodId + uint64_t(i) * 8; }
inline uint64_t bcp(int method, int bci) { return kBytecodes + uint64_t(method) * 0x1000 + uint64_t(bci); }

// This process's executable file mappings, as the agent announces a JVM's.
inline std::vector<ModuleMap> self_modules() {
    std::vector<ModuleMap> out;
    std::ifstream maps("/proc/self/maps");
    std::string line;
    while (std::getline(maps, line)) {
        std::istringstream in(line);
        std::string range, perms, offset, dev, inode, path;
        in >> range >> perms >> offset >> dev >> inode >> path;
        if (perms.size() < 3 || perms[2] != 'x' || path.empty() || path[0] != '/') continue;
        ModuleMap m;
        m.time_ns = 1;
        m.begin = std::stoull(range.substr(0, range.find('-')), nullptr, 16);
        m.end = std::stoull(range.substr(range.find('-') + 1), nullptr, 16);
        m.file_offset = std::stoull(offset, nullptr, 16);
        m.path = path;
        // Beside a World its pcs must not read as the synthetic VM's code (see kInterpBegin).
        INFO(path << " at 0x" << std::hex << m.begin);
        REQUIRE((m.end <= kInterpBegin || m.begin >= kCodeCacheHigh));
        out.push_back(m);
    }
    return out;
}

struct FakeStack {
    uint64_t base = kStackBase;
    std::vector<uint8_t> bytes = std::vector<uint8_t>(kStackBytes, 0);
    void put(uint64_t addr, uint64_t value) {
        REQUIRE(addr >= base);
        REQUIRE(addr + 8 <= base + bytes.size());
        std::memcpy(bytes.data() + (addr - base), &value, 8);
    }
    uint64_t at(int64_t offset) const { return base + uint64_t(offset); }
};

// A JDK row's frames: the VmInfo says the row's release, and frames are written in its encoding.
struct World {
    hotspot::Family jdk = hotspot::Family::kJdk17;
    CodeMap map;

    explicit World(hotspot::Family j = hotspot::Family::kJdk17, int methods = 16) : jdk(j) {
        VmInfo vm;
        vm.time_ns = 1;
        vm.jdk_major = static_cast<int>(j);
        vm.layout = static_cast<VmLayout>(j);
        vm.call_stub_return = kCallStubReturn;
        vm.interpreter_begin = kInterpBegin;
        vm.interpreter_end = kInterpEnd;
        vm.entry_codelets.push_back({kEntryCodeletBegin, kEntryCodeletEnd, "method entry point (kind = zerolocals)"});
        vm.code_cache_low = kCodeCacheLow;
        vm.code_cache_high = kCodeCacheHigh;
        vm.sample_stack_bytes = kStackBytes;
        map.apply(vm);
        announced.push_back(vm);
        for (int i = 0; i < methods; ++i) {
            MethodInfo m;
            m.time_ns = 1;
            m.method_id = method_id(i);
            m.method_ptr = method_ptr(i);
            m.bytecode_begin = bcp(i, 0);
            m.bytecode_size = 100;
            m.class_name = "T";
            m.name = std::string("m").append(std::to_string(i));
            m.signature = "()V";
            map.apply(m);
            announced.push_back(m);
        }
    }

    // Writes a complete interpreted frame with its fixed slots in this JDK's encoding: each slot
    // that the row says is fp-relative holds a word offset from fp, the others an address.
    void interp_frame(FakeStack& s, uint64_t fp, int method, uint64_t bcp_value, uint64_t sender_sp,
                      uint64_t ret, uint64_t caller_fp, uint64_t last_sp = 0) const {
        namespace in = hotspot::interp;
        const hotspot::JdkFacts& row = *hotspot::facts_of_family(static_cast<int>(jdk));
        auto slot = [&](int w) { return fp + uint64_t(int64_t(w) * 8); };
        auto encode = [&](bool relative, uint64_t address) {
            return relative ? uint64_t(int64_t(address - fp) / 8) : address;
        };
        s.put(slot(in::kReturnAddress), ret);
        s.put(slot(in::kSavedFp), caller_fp);
        s.put(slot(in::kSenderSp), sender_sp);
        s.put(slot(in::kLastSp), last_sp == 0 ? 0 : encode(row.last_sp_fp_relative, last_sp));
        s.put(slot(in::kMethod), method_ptr(method));
        s.put(slot(in::kMirror), 0x1234'5678);
        s.put(slot(in::kMdp), 0);
        s.put(slot(in::kCache), 0x9'0000'0000);
        s.put(slot(in::kLocals), encode(row.locals_fp_relative, fp + 16));
        s.put(slot(in::kBcp), bcp_value);
        s.put(slot(in::kInitialSp), encode(row.initial_sp_fp_relative, fp - 72));
    }

    // The call stub's frame at `fp` with its JavaCallWrapper's anchor (last_sp 0 = first entry frame).
    void entry_frame(FakeStack& s, uint64_t fp, uint64_t last_sp = 0, uint64_t last_pc = 0,
                     uint64_t last_fp = 0) const {
        const uint64_t wrapper = fp + 128;
        s.put(fp - 48, wrapper);
        s.put(wrapper + 32, last_sp);
        s.put(wrapper + 40, last_pc);
        s.put(wrapper + 48, last_fp);
    }

    CodeLoad& add_code(CodeLoad load) {
        load.time_ns = load.time_ns ? load.time_ns : 1;
        map.apply(load);
        announced.push_back(load);
        loads.push_back(load);
        return loads.back();
    }
    std::vector<CodeLoad> loads;
    std::vector<Event> announced;   // what `map` was told, in order: to tell a StreamDecoder the same
};

// A compiled method of `size` bytes at `begin` with frame size `fs`.
inline CodeLoad nmethod(uint64_t begin, int method, int fs, CodeKind kind = CodeKind::kNmethod) {
    CodeLoad c;
    c.method_id = method_id(method);
    c.code_begin = begin;
    c.code_end = begin + 0x400;
    c.entry = begin;
    c.verified_entry = begin;
    c.frame_size_words = fs;
    c.frame_complete_offset = 12;
    c.comp_level = 4;
    c.kind = kind;
    return c;
}

// Adds a PcDesc at `pc_offset` whose inline chain is `chain` (innermost first).
inline void add_scope(CodeLoad& c, uint32_t pc_offset, std::vector<MethodBci> chain) {
    PcScope s;
    s.pc_offset = pc_offset;
    s.first = uint32_t(c.frames.size());
    s.count = uint32_t(chain.size());
    for (auto& f : chain) c.frames.push_back(f);
    c.scopes.push_back(s);
}

inline Sample sample_of(const FakeStack& s, uint64_t ip, uint64_t sp, uint64_t bp, uint64_t time = 1000) {
    Sample out;
    out.time_ns = time;
    out.tid = 7;
    out.regs.ip = ip;
    out.regs.sp = sp;
    out.regs.bp = bp;
    out.stack_sp = s.base;
    out.stack = s.bytes;
    return out;
}

// `call target` (e8 rel32) written into `c`'s bytes at offset `at`.
inline void put_call(CodeLoad& c, uint32_t at, uint64_t target) {
    const int32_t rel = static_cast<int32_t>(static_cast<int64_t>(target) - static_cast<int64_t>(c.code_begin + at + 5));
    c.code[at] = 0xe8;
    std::memcpy(c.code.data() + at + 1, &rel, 4);
}

// The Java frames of a trace as ASGCT lists them (method, bci), top first.
inline std::vector<MethodBci> java_frames(const CallTrace& t) {
    std::vector<MethodBci> out;
    for (const auto& f : t.frames) {
        if (f.kind == FrameKind::kInterpreted || f.kind == FrameKind::kCompiled || f.kind == FrameKind::kInlined ||
            f.kind == FrameKind::kNativeWrapper) {
            out.push_back({f.method_id, f.bci});
        }
    }
    return out;
}

inline MethodBci mb(int method, int bci) { return {method_id(method), bci}; }

// Each test that calls it runs once per JDK row.
inline hotspot::Family jdk_param() {
    return GENERATE(hotspot::Family::kJdk17, hotspot::Family::kJdk21, hotspot::Family::kJdk25);
}

inline DecoderOptions test_options() {
    DecoderOptions o;
    o.use_libunwind = false;
    o.symbolize_native = false;
    return o;
}

}  // namespace sf::test
