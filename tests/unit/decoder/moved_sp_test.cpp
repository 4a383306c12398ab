// Compiled code that moves rsp below its frame's sp after the frame is complete, and return
// addresses that must be call sites (docs/decoding.md, "Moved sp" and "Verified return addresses").
// The instruction bytes are the shapes HotSpot emits (JDK 17 and 25), cut down: the string
// intrinsics' pushes, C1's arguments around a Runtime1 call, a native wrapper after `leave`, a call
// stub. Each snapshot also holds a stale return address where the unmoved frame would keep it.
#include <catch2/catch.hpp>

#include "stackfrag/decoder/stream_decoder.hpp"
#include "synthetic.hpp"

using namespace sf;
using namespace sf::test;

namespace {

void put_bytes(CodeLoad& c, uint32_t at, std::initializer_list<uint8_t> bytes) {
    REQUIRE(at + bytes.size() <= c.code.size());
    std::copy(bytes.begin(), bytes.end(), c.code.begin() + at);
}

Stub stub_at(uint64_t begin, const char* name, int32_t frame_size_words) {
    Stub stub;
    stub.time_ns = 1;
    stub.name = name;
    stub.begin = begin;
    stub.end = begin + 0x100;
    stub.frame_size_words = frame_size_words;
    return stub;
}

// C (method 4, 4 words, code bytes below) called from D (method 5, 6 words) at D+0x30, where D's
// bytes hold `call C`; D was called by the call stub. C's frame sp is sp_c; a sample inside C's
// moved region has rsp below it.
struct MovedWorld {
    World w;
    FakeStack s;
    uint64_t c_begin = kCodeCacheLow + 0x10000;
    uint64_t d_begin = kCodeCacheLow + 0x20000;
    uint64_t sp_c, sp_d, fp_stub;
    CodeLoad c;
    // D calls C directly unless told the call goes through another address.
    explicit MovedWorld(hotspot::Family jdk, uint64_t d_calls = 0) : w(jdk) {
        c = nmethod(c_begin, 4, 4);
        c.code.assign(0x400, 0x90);
        CodeLoad dd = nmethod(d_begin, 5, 6);
        dd.code.assign(0x400, 0x90);
        put_call(dd, 0x30 - 5, d_calls != 0 ? d_calls : c_begin);
        add_scope(dd, 0x30, {{method_id(5), 21}});
        w.add_code(dd);
        sp_c = s.at(0x200);
        sp_d = sp_c + 4 * 8;
        fp_stub = s.at(0x800);
        s.put(sp_c + 3 * 8, d_begin + 0x30);
        s.put(sp_c + 2 * 8, 0x1111);
        s.put(sp_d + 5 * 8, kCallStubReturn);
        s.put(sp_d + 4 * 8, fp_stub);
        w.entry_frame(s, fp_stub);
    }
    void announce() { w.add_code(c); }
    // A stale return address (into the interpreter, which no check rejects) where a walk that
    // ignored the move would read C's.
    void stale_at(uint64_t slot) { s.put(slot, kInterpReturnPc); }
};

// E, a method whose call into C ends at a PcDesc: a return address into it is a verified call site,
// the stale word a scan or a wrong delta meets. Returns that return address.
uint64_t add_stale_caller(MovedWorld& mw, int frame_size_words) {
    CodeLoad e = nmethod(kCodeCacheLow + 0x30000, 6, frame_size_words);
    e.code.assign(0x400, 0x90);
    put_call(e, 0x40 - 5, mw.c_begin);
    add_scope(e, 0x40, {{method_id(6), 3}});
    mw.w.add_code(e);
    return e.code_begin + 0x40;
}

}  // namespace

TEST_CASE("string_indexof: rsp saved, a short string copied below, four registers pushed", "[decoder][moved_sp]") {
    MovedWorld mw(jdk_param());
    // 0x20 mov rcx,rsp; cmp eax,16; jae 0x32 | sub rsp,16; push rax; pop rax; mov rsi,rsp; nop
    // 0x32 push rax; push rsi; push rdi; push rcx | 0x36 nop; jne 0x36 | 0x39 pop rsp | 0x3a ...
    put_bytes(mw.c, 0x20, {0x48, 0x8b, 0xcc, 0x83, 0xf8, 0x10, 0x73, 0x0a, 0x48, 0x83, 0xec, 0x10, 0x50, 0x58,
                           0x48, 0x8b, 0xf4, 0x90, 0x50, 0x56, 0x57, 0x51, 0x90, 0x75, 0xfd, 0x5c});
    add_scope(mw.c, 0x20, {{method_id(6), 25}, {method_id(4), 156}});   // the call the intrinsic replaced
    add_scope(mw.c, 0x3a, {{method_id(4), 156}});                       // the caller's code after it
    mw.announce();
    Decoder d(mw.w.map, test_options());
    const std::vector<MethodBci> expected{mb(6, 25), mb(4, 156), mb(5, 21)};

    SECTION("without the copy: 32 bytes pushed, [sp] is the saved rsp") {
        const uint64_t rsp = mw.sp_c - 32;
        mw.s.put(rsp, mw.sp_c);
        mw.stale_at(rsp + 3 * 8);
        CallTrace t = d.decode(sample_of(mw.s, mw.c_begin + 0x36, rsp, 0x2222));
        INFO(fail_reason_name(t.failure));
        REQUIRE(t.status == TraceStatus::kComplete);
        CHECK(java_frames(t) == expected);
        CHECK(t.frames[1].sp_moved);
        CHECK(d.stats().sp_moved_frames == 1);
    }
    SECTION("with the copy: 48 bytes, the same pc") {
        const uint64_t rsp = mw.sp_c - 48;
        mw.s.put(rsp, mw.sp_c);
        mw.stale_at(rsp + 3 * 8);
        mw.stale_at(rsp + 16 + 3 * 8);
        CallTrace t = d.decode(sample_of(mw.s, mw.c_begin + 0x36, rsp, 0x2222));
        INFO(fail_reason_name(t.failure));
        REQUIRE(t.status == TraceStatus::kComplete);
        CHECK(java_frames(t) == expected);
    }
    SECTION("inside the copy: 16 bytes reserved, one pushed") {
        const uint64_t rsp = mw.sp_c - 24;
        mw.stale_at(rsp + 3 * 8);
        CallTrace t = d.decode(sample_of(mw.s, mw.c_begin + 0x2d, rsp, 0x2222));
        INFO(fail_reason_name(t.failure));
        REQUIRE(t.status == TraceStatus::kComplete);
        CHECK(java_frames(t) == expected);
    }
    SECTION("at the first push, with or without the copy: the slot of no copy holds a stale verified return") {
        // httpserver, JDK 25: delta 0's slot returned into Striped64.casBase at a call site with a
        // PcDesc, delta 16's into the true caller; the first verified one was taken.
        const uint64_t e_return = add_stale_caller(mw, 6);
        const uint64_t rsp = mw.sp_c - 16;
        mw.s.put(rsp + 3 * 8, e_return);
        CallTrace t = d.decode(sample_of(mw.s, mw.c_begin + 0x32, rsp, 0x2222));
        INFO(fail_reason_name(t.failure));
        REQUIRE(t.status == TraceStatus::kComplete);
        CHECK(java_frames(t) == expected);
    }
    SECTION("after pop rsp the frame is whole again, in the caller's scope") {
        CallTrace t = d.decode(sample_of(mw.s, mw.c_begin + 0x3a, mw.sp_c, 0x2222));
        REQUIRE(t.status == TraceStatus::kComplete);
        CHECK(java_frames(t).size() == 2);
        CHECK_FALSE(t.frames[0].sp_moved);
    }
    SECTION("a trace buffer reused after a moved frame keeps no stale sp_moved") {
        // replay, the live profile and stitching decode into one CallTrace after another.
        DecoderOptions o = test_options();
        o.incremental = GENERATE(false, true);
        Decoder reused(mw.w.map, o);
        const uint64_t rsp = mw.sp_c - 32;
        mw.s.put(rsp, mw.sp_c);
        CallTrace t;
        reused.decode(sample_of(mw.s, mw.c_begin + 0x36, rsp, 0x2222), t);
        REQUIRE(t.frames.size() >= 2);
        REQUIRE(t.frames[1].sp_moved);
        // The same stack seen after `pop rsp`: frame 1 is now the caller, whose sp did not move.
        const Sample whole = sample_of(mw.s, mw.c_begin + 0x3a, mw.sp_c, 0x2222);
        reused.decode(whole, t);
        REQUIRE(t.status == TraceStatus::kComplete);
        for (const Frame& f : t.frames) CHECK_FALSE(f.sp_moved);
        CHECK(t == Decoder(mw.w.map, o).decode(whole));
    }
}

TEST_CASE("string_compare and char_array_compress: push rcx, and an out-of-line add rsp", "[decoder][moved_sp]") {
    MovedWorld mw(jdk_param());
    // 0x20 push rcx; test eax,eax; je 0x2a | 0x25 pop rcx; jmp 0x2e | 0x28 nop nop | 0x2a add rsp,8 | 0x2e ...
    put_bytes(mw.c, 0x20, {0x51, 0x85, 0xc0, 0x74, 0x05, 0x59, 0xeb, 0x06, 0x90, 0x90, 0x48, 0x83, 0xc4, 0x08});
    add_scope(mw.c, 0x20, {{method_id(6), 3}, {method_id(4), 40}});
    add_scope(mw.c, 0x40, {{method_id(4), 41}});
    mw.announce();
    Decoder d(mw.w.map, test_options());
    for (uint32_t pc : {0x21u, 0x25u, 0x2au}) {
        const uint64_t rsp = mw.sp_c - 8;
        mw.stale_at(rsp + 3 * 8);
        CallTrace t = d.decode(sample_of(mw.s, mw.c_begin + pc, rsp, 0x2222));
        INFO("pc offset " << pc << " " << fail_reason_name(t.failure));
        REQUIRE(t.status == TraceStatus::kComplete);
        CHECK(java_frames(t) == std::vector<MethodBci>{mb(6, 3), mb(4, 40), mb(5, 21)});
    }
    for (uint32_t pc : {0x26u, 0x2eu}) {   // popped, or added back: delta 0
        CallTrace t = d.decode(sample_of(mw.s, mw.c_begin + pc, mw.sp_c, 0x2222));
        INFO("pc offset " << pc << " " << fail_reason_name(t.failure));
        REQUIRE(t.status == TraceStatus::kComplete);
        CHECK(java_frames(t).back() == mb(5, 21));
    }
}

TEST_CASE("C1 calls a Runtime1 stub with two arguments pushed", "[decoder][moved_sp]") {
    MovedWorld mw(jdk_param());
    mw.c.comp_level = 3;
    // 0x20 je 0x100 | ... | 0x100 push rax; push rcx; call stub; 0x107 pop rcx; pop rax; jmp 0x26
    put_bytes(mw.c, 0x20, {0x0f, 0x84, 0xda, 0x00, 0x00, 0x00});
    const uint64_t stub_begin = kCodeCacheLow + 0x40000;
    put_bytes(mw.c, 0x100, {0x50, 0x51});
    put_call(mw.c, 0x102, stub_begin);
    put_bytes(mw.c, 0x107, {0x59, 0x58, 0xe9, 0x18, 0xff, 0xff, 0xff});
    add_scope(mw.c, 0x107, {{method_id(4), 12}});
    mw.announce();
    mw.w.map.apply(stub_at(stub_begin, "counter_overflow Runtime1 stub", -1));
    // The stub's frame: its return address into C at rsp_c - 8 (below C's two pushes).
    const uint64_t rsp_c = mw.sp_c - 16;
    const uint64_t stub_sp = rsp_c - 8 - 32;
    mw.s.put(rsp_c - 8, mw.c_begin + 0x107);
    mw.stale_at(rsp_c + 3 * 8);
    Decoder d(mw.w.map, test_options());
    CallTrace t = d.decode(sample_of(mw.s, stub_begin + 0x10, stub_sp, 0x2222));
    INFO(fail_reason_name(t.failure));
    REQUIRE(t.status == TraceStatus::kComplete);
    CHECK(t.frames[0].kind == FrameKind::kStub);
    CHECK(java_frames(t) == std::vector<MethodBci>{mb(4, 12), mb(5, 21)});
    CHECK(d.stats().sp_moved_frames == 1);
}

TEST_CASE("native wrapper after leave: the return address is at [sp]", "[decoder][moved_sp]") {
    MovedWorld mw(jdk_param());
    mw.c.kind = CodeKind::kNativeWrapper;
    // 0x20 leave | 0x21 cmp qword [r15+8],0 | 0x26 jne +1 | 0x28 ret
    put_bytes(mw.c, 0x20, {0xc9, 0x49, 0x83, 0x7f, 0x08, 0x00, 0x75, 0x01, 0xc3});
    mw.announce();
    Decoder d(mw.w.map, test_options());
    const uint64_t rsp = mw.sp_c + 3 * 8;   // at C's return address
    for (uint32_t pc : {0x21u, 0x26u}) {
        CallTrace t = d.decode(sample_of(mw.s, mw.c_begin + pc, rsp, mw.fp_stub));
        INFO("pc offset " << pc << " " << fail_reason_name(t.failure));
        REQUIRE(t.status == TraceStatus::kComplete);
        CHECK(java_frames(t) == std::vector<MethodBci>{mb(4, -1), mb(5, 21)});
        CHECK(t.frames[0].kind == FrameKind::kNativeWrapper);
    }
}

TEST_CASE("a call stub of the caller's code: mov rbx, Method*; jmp", "[decoder][moved_sp]") {
    MovedWorld mw(jdk_param());
    mw.c.comp_level = 1;
    // 0x40 call 0x300 (a static call to an interpreted method) | 0x300 mov rbx, imm64; jmp c2i
    put_call(mw.c, 0x40, mw.c_begin + 0x300);
    add_scope(mw.c, 0x45, {{method_id(4), 30}});
    put_bytes(mw.c, 0x300, {0x48, 0xbb, 1, 2, 3, 4, 5, 6, 7, 8, 0xe9, 0, 0, 0, 0});
    mw.announce();
    Decoder d(mw.w.map, test_options());
    const uint64_t rsp = mw.sp_c - 8;
    mw.s.put(rsp, mw.c_begin + 0x45);
    mw.stale_at(rsp + 3 * 8);
    for (uint32_t pc : {0x300u, 0x30au}) {
        CallTrace t = d.decode(sample_of(mw.s, mw.c_begin + pc, rsp, 0x2222));
        INFO("pc offset " << pc << " " << fail_reason_name(t.failure));
        REQUIRE(t.status == TraceStatus::kComplete);
        CHECK(java_frames(t) == std::vector<MethodBci>{mb(4, 30), mb(5, 21)});
    }
}

TEST_CASE("a call stub no captured call reaches: the VM pointed the call at it after the announcement",
          "[decoder][moved_sp]") {
    // C2 code calls a method not compiled yet: the captured call at 0x40 still targets the resolve
    // stub; the VM later points it at the code's own call stub at 0x300, in the stubs section after
    // the body's last instruction (a ret), which no flow of the body reaches.
    MovedWorld mw(jdk_param());
    const Stub resolve = stub_at(kCodeCacheLow + 0x40000, "resolve_opt_virtual_call", -1);
    mw.w.map.apply(resolve);
    put_call(mw.c, 0x40, resolve.begin);
    add_scope(mw.c, 0x45, {{method_id(4), 30}});
    put_bytes(mw.c, 0x2f0, {0xc3});
    std::fill(mw.c.code.begin() + 0x2f1, mw.c.code.begin() + 0x300, uint8_t{0xf4});
    put_bytes(mw.c, 0x300, {0x48, 0xbb, 1, 2, 3, 4, 5, 6, 7, 8, 0xe9, 0, 0, 0, 0});
    mw.announce();
    Decoder d(mw.w.map, test_options());
    const uint64_t rsp = mw.sp_c - 8;
    mw.stale_at(rsp + 3 * 8);
    SECTION("the return address at [sp] is the call site") {
        mw.s.put(rsp, mw.c_begin + 0x45);
        for (uint32_t pc : {0x300u, 0x30au}) {
            CallTrace t = d.decode(sample_of(mw.s, mw.c_begin + pc, rsp, 0x2222));
            INFO("pc offset " << pc << " " << fail_reason_name(t.failure));
            REQUIRE(t.status == TraceStatus::kComplete);
            CHECK(java_frames(t) == std::vector<MethodBci>{mb(4, 30), mb(5, 21)});
        }
    }
    SECTION("a word at [sp] that is no call site of this code is not taken for one") {
        mw.s.put(rsp, mw.c_begin + 0x60);   // in the code, but no call ends there and no PcDesc
        CallTrace t = d.decode(sample_of(mw.s, mw.c_begin + 0x300, rsp, 0x2222));
        CHECK(java_frames(t) != std::vector<MethodBci>{mb(4, 30), mb(5, 21)});
        CHECK(t.status != TraceStatus::kComplete);
    }
}

TEST_CASE("the stub's shape inside the body's own flow is no call stub", "[decoder][moved_sp]") {
    // `mov rbx, imm64; jmp` that the body runs through (a constant, then a jump back): a sample there
    // is in the frame, whose return address is where the frame keeps it.
    MovedWorld mw(jdk_param());
    const Stub resolve = stub_at(kCodeCacheLow + 0x40000, "resolve_opt_virtual_call", -1);
    mw.w.map.apply(resolve);
    put_call(mw.c, 0x40, resolve.begin);
    add_scope(mw.c, 0x45, {{method_id(4), 30}});
    add_scope(mw.c, 0x110, {{method_id(4), 12}});
    put_bytes(mw.c, 0x100, {0x48, 0xbb, 1, 2, 3, 4, 5, 6, 7, 8, 0xe9, 0, 0, 0, 0});
    mw.announce();
    Decoder d(mw.w.map, test_options());
    mw.s.put(mw.sp_c, mw.c_begin + 0x45);   // a call site's return address left at [sp]
    CallTrace t = d.decode(sample_of(mw.s, mw.c_begin + 0x100, mw.sp_c, 0x2222));
    INFO(fail_reason_name(t.failure));
    REQUIRE(t.status == TraceStatus::kComplete);
    CHECK(java_frames(t) == std::vector<MethodBci>{mb(4, 12), mb(5, 21)});
}

TEST_CASE("return addresses: a call must end there and call something a Java method is called through",
          "[decoder][return_address]") {
    MovedWorld mw(jdk_param());
    add_scope(mw.c, 0x50, {{method_id(4), 1}});
    mw.announce();
    Decoder d(mw.w.map, test_options());
    SECTION("the real caller passes") {
        CallTrace t = d.decode(sample_of(mw.s, mw.c_begin + 0x40, mw.sp_c, 0x2222));
        INFO(fail_reason_name(t.failure));
        REQUIRE(t.status == TraceStatus::kComplete);
    }
    SECTION("no call before it") {
        CodeLoad e = nmethod(kCodeCacheLow + 0x30000, 7, 4);
        e.code.assign(0x400, 0x90);
        add_scope(e, 0x30, {{method_id(7), 1}});
        mw.w.add_code(e);
        mw.s.put(mw.sp_c + 3 * 8, e.code_begin + 0x30);
        CallTrace t = d.decode(sample_of(mw.s, mw.c_begin + 0x40, mw.sp_c, 0x2222));
        CHECK(t.failure == FailReason::kBadReturnAddress);
        CHECK(d.stats().returns_rejected_no_call == 1);
    }
    SECTION("a native wrapper's call into native code") {
        CodeLoad e = nmethod(kCodeCacheLow + 0x30000, 7, 4, CodeKind::kNativeWrapper);
        e.code.assign(0x400, 0x90);
        put_call(e, 0x30 - 5, kCodeCacheLow - 0x1000);   // native code below the code cache
        mw.w.add_code(e);
        mw.s.put(mw.sp_c + 3 * 8, e.code_begin + 0x30);
        CallTrace t = d.decode(sample_of(mw.s, mw.c_begin + 0x40, mw.sp_c, 0x2222));
        CHECK(t.failure == FailReason::kBadReturnAddress);
        CHECK(d.stats().returns_rejected_bad_target == 1);
    }
    SECTION("inside a stub that calls into the VM") {
        const Stub stub = stub_at(kCodeCacheLow + 0x40000, "counter_overflow Runtime1 stub", 2);
        mw.w.map.apply(stub);
        mw.s.put(mw.sp_c + 3 * 8, stub.begin + 0x20);
        CallTrace t = d.decode(sample_of(mw.s, mw.c_begin + 0x40, mw.sp_c, 0x2222));
        CHECK(t.failure == FailReason::kBadReturnAddress);
        CHECK(d.stats().returns_rejected_vm_stub == 1);
    }
}

TEST_CASE("a call site's verdict on its target is judged again once a stub is announced there",
          "[decoder][return_address]") {
    // D calls C through an address in the code cache where nothing is announced yet (as a call
    // still aimed at code not yet seen): accepted. Once a stub that calls into the VM is announced
    // at that address, the same return address, in the same code, is rejected: the decoder's
    // memo of what the call's target said must not outlive the map's change.
    const uint64_t target = kCodeCacheLow + 0x40000;
    MovedWorld mw(jdk_param(), target);
    add_scope(mw.c, 0x50, {{method_id(4), 1}});
    mw.announce();
    World& w = mw.w;
    Decoder d(w.map, test_options());
    const Sample sample = sample_of(mw.s, mw.c_begin + 0x40, mw.sp_c, 0x2222);
    for (int i = 0; i < 2; ++i) {   // the second time from the memo
        CallTrace t = d.decode(sample);
        INFO(fail_reason_name(t.failure));
        REQUIRE(t.status == TraceStatus::kComplete);
    }
    w.map.apply(stub_at(target, "counter_overflow Runtime1 stub", 2));
    CallTrace t = d.decode(sample);
    CHECK(t.failure == FailReason::kBadReturnAddress);
    CHECK(d.stats().returns_rejected_bad_target == 1);
}

TEST_CASE("a call site's verdict on its target holds only for the times the target's code was there",
          "[decoder][return_address]") {
    // The call's target is a stub that calls into the VM, over which an nmethod was loaded at 100
    // and unloaded at 2000 (a reused code-cache range). A sample at 1000 finds the nmethod there and
    // accepts the return address; one at 3000, with no event in between, finds the stub: the memo
    // of the first verdict must not serve a time outside the span its lookup held for.
    const uint64_t target = kCodeCacheLow + 0x40000;
    MovedWorld mw(jdk_param(), target);
    World& w = mw.w;
    w.map.apply(stub_at(target, "counter_overflow Runtime1 stub", 2));
    add_scope(mw.c, 0x50, {{method_id(4), 1}});
    mw.announce();
    CodeLoad e = nmethod(target, 7, 2);
    e.time_ns = 100;
    w.add_code(e);
    w.map.apply(Event{CodeUnload{2000, method_id(7), target}});
    Decoder d(w.map, test_options());
    for (int i = 0; i < 2; ++i) {   // the second time from the memo
        CallTrace t = d.decode(sample_of(mw.s, mw.c_begin + 0x40, mw.sp_c, 0x2222, 1000));
        INFO(fail_reason_name(t.failure));
        REQUIRE(t.status == TraceStatus::kComplete);
    }
    CallTrace t = d.decode(sample_of(mw.s, mw.c_begin + 0x40, mw.sp_c, 0x2222, 3000));
    CHECK(t.failure == FailReason::kBadReturnAddress);
    CHECK(d.stats().returns_rejected_bad_target == 1);
}

TEST_CASE("C1's G1 post-barrier call from an out-of-line stub: no PcDesc, the method is where it jumps back",
          "[decoder][moved_sp]") {
    MovedWorld mw(jdk_param());
    mw.c.comp_level = 3;
    // 0x20 jne 0x100 | 0x26 ... PcDesc 0x30 | 0x100 call g1_post_barrier_slow; 0x105 jmp 0x26
    put_bytes(mw.c, 0x20, {0x0f, 0x85, 0xda, 0x00, 0x00, 0x00});
    add_scope(mw.c, 0x30, {{method_id(4), 12}});
    const uint64_t stub_begin = kCodeCacheLow + 0x40000;
    put_call(mw.c, 0x100, stub_begin);
    put_bytes(mw.c, 0x105, {0xe9, 0x1c, 0xff, 0xff, 0xff});
    mw.announce();
    mw.w.map.apply(stub_at(stub_begin, "g1_post_barrier_slow", -1));
    const uint64_t stub_sp = mw.sp_c - 8 - 48;
    mw.s.put(mw.sp_c - 8, mw.c_begin + 0x105);
    Decoder d(mw.w.map, test_options());
    CallTrace t = d.decode(sample_of(mw.s, stub_begin + 0x10, stub_sp, 0x2222));
    INFO(fail_reason_name(t.failure));
    REQUIRE(t.status == TraceStatus::kComplete);
    CHECK(java_frames(t) == std::vector<MethodBci>{mb(4, 12), mb(5, 21)});
    SECTION("a return address without a PcDesc after a call elsewhere is no caller: the scan goes on to D") {
        put_call(mw.c, 0x100, stub_begin + 0x200);
        mw.c.time_ns = 2;
        mw.w.map.apply(mw.c);
        Decoder d2(mw.w.map, test_options());
        CallTrace t2 = d2.decode(sample_of(mw.s, stub_begin + 0x10, stub_sp, 0x2222));
        CHECK(java_frames(t2) == std::vector<MethodBci>{mb(5, 21)});
    }
}

namespace {

// C's out-of-line slow path as C1 emits it for a GC barrier (ZGC's load barrier, JDK 25):
// 0x20 jne 0x100 | 0x26 ... | 0x100 sub rsp, 16; call stub | 0x109 add rsp, 16; jmp 0x26.
void put_c1_barrier_slow_path(CodeLoad& c, uint64_t stub_begin) {
    put_bytes(c, 0x20, {0x0f, 0x85, 0xda, 0x00, 0x00, 0x00});
    put_bytes(c, 0x100, {0x48, 0x83, 0xec, 0x10});
    put_call(c, 0x104, stub_begin);
    put_bytes(c, 0x109, {0x48, 0x83, 0xc4, 0x10, 0xe9, 0x14, 0xff, 0xff, 0xff});
}

// The stub's frame as the sample finds it: C's 16 bytes of arguments, the return address into
// C's slow path, the rbp `enter` pushed, then 0x1c0 bytes of saved registers (ZGC's are 1.1 KB).
// Among those, where a scan from sp meets it first, a stale return address into E whose frame checks out (E "returns"
// into the interpreter). Gives the stub's rbp; the sample's sp is 0x1c0 below it.
uint64_t put_barrier_stub_frame(MovedWorld& mw, uint64_t stale_e_begin) {
    const uint64_t ret_slot = mw.sp_c - 16 - 8;
    mw.s.put(ret_slot, mw.c_begin + 0x109);
    const uint64_t rbp = ret_slot - 8;
    mw.s.put(rbp, 0x2222);
    const uint64_t sp = rbp - 0x1c0;
    mw.s.put(sp + 0x150, stale_e_begin + 0x40);
    mw.s.put(sp + 0x150 + 16, kInterpReturnPc);
    return rbp;
}

}  // namespace

TEST_CASE("a sample inside a GC barrier's C1 runtime stub of unknown size: its caller at [rbp+8], not a stale "
          "return address among the registers it saved", "[decoder][moved_sp][stub]") {
    // ZGC's load_barrier_on_oop_field_preloaded_runtime_stub (JDK 25, httpserver): `enter`, then every
    // register with the vector ones, 1.1 KB. A scan from sp took an arraycopy call's stale return
    // address 0x150 bytes up, and the walk failed or named the wrong callers.
    MovedWorld mw(jdk_param());
    mw.c.comp_level = 1;   // C1: its slow path's call has rsp moved by the 16 bytes of arguments
    const uint64_t stub_begin = kCodeCacheLow + 0x40000;
    put_c1_barrier_slow_path(mw.c, stub_begin);
    add_scope(mw.c, 0x30, {{method_id(4), 12}});
    mw.announce();
    CodeLoad stale = nmethod(kCodeCacheLow + 0x30000, 6, 2);
    add_scope(stale, 0x40, {{method_id(6), 3}});
    mw.w.add_code(stale);
    const uint64_t rbp = put_barrier_stub_frame(mw, stale.code_begin);
    const std::vector<MethodBci> expected{mb(4, 12), mb(5, 21)};
    // A sample at `pc` in a stub of unknown size called `name` at stub_begin.
    DecodeStats stats;
    auto decode_in = [&](const char* name, uint64_t pc, uint64_t sp, uint64_t fp) {
        mw.w.map.apply(stub_at(stub_begin, name, -1));
        Decoder d(mw.w.map, test_options());
        const CallTrace t = d.decode(sample_of(mw.s, pc, sp, fp));
        stats = d.stats();
        return t;
    };
    const char* const zgc = "load_barrier_on_oop_field_preloaded_runtime_stub";

    SECTION("ZGC's load barrier") {
        const CallTrace t = decode_in(zgc, stub_begin + 0xff, rbp - 0x1c0, rbp);
        INFO(fail_reason_name(t.failure));
        REQUIRE(t.status == TraceStatus::kComplete);
        CHECK(java_frames(t) == expected);
        CHECK(t.frames[1].sp_moved);
        CHECK(stats.stub_rbp_frames == 1);
        CHECK(stats.stub_scans == 0);
    }
    SECTION("G1's post barrier") {
        const CallTrace t = decode_in("g1_post_barrier_slow", stub_begin + 0x40, rbp - 0x1c0, rbp);
        INFO(fail_reason_name(t.failure));
        CHECK(java_frames(t) == expected);
        CHECK(stats.stub_rbp_frames == 1);
    }
    SECTION("StubRoutines' array copies") {
        // jint_conjoint_arraycopy_avx3 (JDK 17, httpserver): a Comparator lambda's stale return
        // address was taken for the caller, and the walk failed a frame on; after ArrayList.grow,
        // Arrays.copyOf was replaced by stale callers that did not fail.
        for (const char* name : {"jint_conjoint_arraycopy_avx3", "jint_disjoint_arraycopy", "oop_arraycopy_uninit",
                                 "arrayof_jlong_disjoint_arraycopy", "checkcast_arraycopy", "unsafe_arraycopy"}) {
            const CallTrace t = decode_in(name, stub_begin + 0xc0, rbp - 0x80, rbp);
            INFO(name << ": " << fail_reason_name(t.failure));
            CHECK(java_frames(t) == expected);
            CHECK(stats.stub_rbp_frames == 1);
            CHECK(stats.stub_scans == 0);
        }
    }
    SECTION("StubRoutines' compute stubs that begin with `enter`") {
        // updateBytesCRC32 (JDK 17, xalan): rsp 0x30 below rbp, a stale return into
        // TransformerImpl.executeChildTemplates at sp+8 taken for the caller, not CRC32.update.
        for (const char* name : {"updateBytesCRC32", "libmPow", "dlog", "sha256_implCompressMB", "vectorizedMismatch"}) {
            const CallTrace t = decode_in(name, stub_begin + 0xc0, rbp - 0x80, rbp);
            INFO(name << ": " << fail_reason_name(t.failure));
            CHECK(java_frames(t) == expected);
            CHECK(stats.stub_rbp_frames == 1);
        }
    }
    SECTION("a fill stub is not taken: on JDK 25 its `enter` comes after a `mov`") {
        const CallTrace t = decode_in("jint_fill", stub_begin + 0xc0, rbp - 0x80, rbp);
        CHECK(stats.stub_rbp_frames == 0);
    }
    SECTION("generic_arraycopy begins with a jump to its `enter`: its rbp is not taken at the top") {
        const CallTrace t = decode_in("generic_arraycopy", stub_begin + 0xc0, rbp - 0x80, rbp);
        CHECK(stats.stub_rbp_frames == 0);
        CHECK(stats.stub_scans == 1);
    }
    SECTION("before `mov rbp, rsp` rbp is C's: the scan decides, and meets the stale address") {
        const CallTrace t = decode_in(zgc, stub_begin + 1, rbp - 0x1c0, rbp);
        CHECK(stats.stub_rbp_frames == 0);
        CHECK(java_frames(t) != expected);
    }
    SECTION("Runtime1's frameless stubs of unknown size keep the caller's rbp: not taken") {
        // slow_subtype_check only pushes; the rbp there is C's, and [rbp+8] a plausible frame further up.
        const CallTrace t = decode_in("C1 Runtime slow_subtype_check_blob", stub_begin + 0x10, rbp - 0x1c0, rbp);
        CHECK(stats.stub_rbp_frames == 0);
        CHECK(java_frames(t) != expected);
    }
    SECTION("at the `ret` after `leave`: [sp] is the return address, taken by the scan") {
        const uint64_t fp_far = mw.sp_d + 4 * 8;   // C's rbp, a stack address whose [rbp+8] checks out too
        const CallTrace t = decode_in(zgc, stub_begin + 0xf0, rbp + 8, fp_far);
        INFO(fail_reason_name(t.failure));
        CHECK(java_frames(t) == expected);
        CHECK(stats.stub_rbp_frames == 0);
    }
}

TEST_CASE("JDK 17 ZGC's load barrier in a method-handle intrinsic pushes r12: the return address moves up",
          "[decoder][moved_sp]") {
    // invokeBasic with -XX:+UseZGC (Mixed probe, JDK 17, 1 ms): `push r12`, the load, the test of
    // the bad mask, a slow path that saves registers and calls the runtime, `pop r12`, the jump on.
    // At +0xa [sp] held r12 (an oop) and the walk failed bad_return_address, 10-17 samples a run.
    MovedWorld mw(jdk_param());
    CodeLoad mh = nmethod(kCodeCacheLow + 0x40000, 8, 0, CodeKind::kMethodHandleIntrinsic);
    mh.code.assign(0x40, 0x90);
    put_bytes(mh, 0x00, {0x41, 0x54, 0x4d, 0x8d, 0x61, 0x30, 0x49, 0x8b, 0x1c, 0x24,   // push r12; lea; mov rbx, [r12]
                         0x49, 0x85, 0x5f, 0x20, 0x0f, 0x84, 0x1c, 0x00, 0x00, 0x00,   // test; je 0x30
                         0x50, 0x51, 0x48, 0x81, 0xec, 0x80, 0x00, 0x00, 0x00});       // push rax; push rcx; sub rsp, 0x80
    put_call(mh, 0x1d, kNativePc);                                                     // the runtime's barrier
    put_bytes(mh, 0x22, {0x48, 0x81, 0xc4, 0x80, 0x00, 0x00, 0x00, 0x59, 0x48, 0x8b, 0xd8, 0x58,   // add rsp; pop rcx; mov rbx, rax; pop rax
                         0x90, 0x90, 0x41, 0x5c, 0x48, 0x8b, 0x5b, 0x10, 0xff, 0x63, 0x40});      // pop r12 (0x30); mov; jmp [rbx+0x40]
    mw.w.add_code(mh);
    const uint64_t entry_sp = mw.sp_c + 3 * 8;   // the return address into D
    const std::vector<MethodBci> expected{mb(8, -1), mb(5, 21)};
    auto decode_at = [&](uint32_t offset, uint64_t sp) {
        Decoder d(mw.w.map, test_options());
        const CallTrace t = d.decode(sample_of(mw.s, mh.code_begin + offset, sp, 0x2222));
        INFO("+" << offset << ": " << fail_reason_name(t.failure));
        CHECK(t.status == TraceStatus::kComplete);
        CHECK(java_frames(t) == expected);
        return t;
    };
    mw.s.put(entry_sp - 8, 0x00001000002caab0);   // r12 as pushed: a colored oop
    SECTION("before the push: [sp]") { CHECK(!decode_at(0x00, entry_sp).frames[0].sp_moved); }
    SECTION("past the push") { CHECK(decode_at(0x0a, entry_sp - 8).frames[0].sp_moved); }
    SECTION("back from the runtime in the slow path") { decode_at(0x22, entry_sp - 8 - 16 - 0x80); }
    SECTION("after `pop r12`") { decode_at(0x32, entry_sp); }
}

TEST_CASE("a compute stub whose caller was not announced yet: the caller is walked as unannounced code, and "
          "the sample decoded again once it is in", "[decoder][moved_sp][stub]") {
    // IntrinsicStubs (JDK 17): libmExp sampled 1.2 ms before the CompiledMethodLoad of the OSR nmethod
    // of `maths` that called it. [rbp+8] returned into code no event had announced; the walk passed
    // over it, scanned on from the stub's sp, and named the interpreted `task` as libmExp's caller:
    // a complete trace without `maths`, never decoded again. Here C is that caller and a stale
    // return into E lies among the stub's saves.
    MovedWorld mw(jdk_param());
    mw.c.comp_level = 1;
    const uint64_t stub_begin = kCodeCacheLow + 0x40000;
    put_c1_barrier_slow_path(mw.c, stub_begin);
    add_scope(mw.c, 0x30, {{method_id(4), 12}});
    CodeLoad stale = nmethod(kCodeCacheLow + 0x30000, 6, 2);
    add_scope(stale, 0x40, {{method_id(6), 3}});
    mw.w.add_code(stale);
    const uint64_t rbp = put_barrier_stub_frame(mw, stale.code_begin);
    const Stub libm = stub_at(stub_begin, "libmExp", -1);
    mw.w.map.apply(libm);
    mw.w.announced.push_back(libm);
    const uint64_t sample_time = 1'000'000;
    const Sample sample = sample_of(mw.s, stub_begin + 0xc0, rbp - 0x80, rbp, sample_time);

    SECTION("decoded before C's announcement: C is a frame of unknown code, not skipped") {
        Decoder d(mw.w.map, test_options());
        const CallTrace t = d.decode(sample);
        INFO(fail_reason_name(t.failure));
        REQUIRE(t.frames.size() >= 2);
        CHECK(t.frames[1].kind == FrameKind::kStub);
        CHECK(t.frames[1].pc == mw.c_begin + 0x109);
        CHECK(java_frames(t) == std::vector<MethodBci>{mb(5, 21)});   // not the stale E
        CHECK(d.stats().unannounced_code_steps >= 1);
    }
    SECTION("through a StreamDecoder: the second decode finds C") {
        StreamDecoderOptions options;
        options.decoder = test_options();
        std::vector<CallTrace> traces;
        StreamDecoder stream(options, [&](const Event&, const CallTrace& trace) { traces.push_back(trace); });
        for (Event event : mw.w.announced) stream.consume(std::move(event));
        stream.consume(Sample(sample));
        CodeLoad late = mw.c;
        late.time_ns = sample_time + 1'200'000;
        stream.consume(std::move(late));
        stream.flush();
        REQUIRE(traces.size() == 1);
        INFO(fail_reason_name(traces[0].failure));
        CHECK(traces[0].status == TraceStatus::kComplete);
        CHECK(java_frames(traces[0]) == std::vector<MethodBci>{mb(4, 12), mb(5, 21)});
        CHECK(stream.retry_stats().retried == 1);
        CHECK(stream.retry_stats().resolved == 1);
    }
}

TEST_CASE("a stub scan that passes over a return into code not announced yet has the sample decoded again",
          "[decoder][moved_sp][stub]") {
    // The same sample in a stub of unknown size that builds no rbp frame: the scan cannot take the
    // unannounced word, but it must not be the last word on the matter.
    MovedWorld mw(jdk_param());
    const uint64_t stub_begin = kCodeCacheLow + 0x40000;
    put_call(mw.c, 0x104, stub_begin);
    add_scope(mw.c, 0x109, {{method_id(4), 12}});
    const Stub stub = stub_at(stub_begin, "some stub", -1);
    mw.w.map.apply(stub);
    const uint64_t sp = mw.sp_c - 8;
    mw.s.put(sp, mw.c_begin + 0x109);
    Decoder before(mw.w.map, test_options());
    const CallTrace t = before.decode(sample_of(mw.s, stub_begin + 0x10, sp, 0x2222));
    CHECK(before.stats().unannounced_code_steps == 1);
    CHECK(std::find_if(t.frames.begin(), t.frames.end(), [](const Frame& f) { return f.method_id == method_id(4); }) ==
          t.frames.end());
    mw.announce();
    Decoder after(mw.w.map, test_options());
    const CallTrace u = after.decode(sample_of(mw.s, stub_begin + 0x10, sp, 0x2222));
    INFO(fail_reason_name(u.failure));
    CHECK(java_frames(u) == std::vector<MethodBci>{mb(4, 12), mb(5, 21)});
    CHECK(after.stats().unannounced_code_steps == 0);
}

TEST_CASE("the nmethod entry barrier's return address lies above its cookie, and its register saves hold copies "
          "of it", "[decoder][moved_sp][stub]") {
    // method_entry_barrier (JDK 25, httpserver): `push -1; enter`, every register saved, a call into
    // BarrierSetNMethod::nmethod_stub_entry_barrier. A scan from the stub's sp took a copy of the
    // return address among the saves for C's return slot: C's sp was off, its caller a second copy.
    MovedWorld mw(jdk_param());
    const uint64_t stub_begin = kCodeCacheLow + 0x40000;
    put_call(mw.c, 0x20, stub_begin);   // C's entry barrier: call the stub
    add_scope(mw.c, 0x30, {{method_id(4), 0}});
    mw.announce();
    mw.w.map.apply(stub_at(stub_begin, "method_entry_barrier", -1));
    const uint64_t ret = mw.c_begin + 0x25;
    const uint64_t rbp = mw.sp_c - 3 * 8;
    mw.s.put(rbp + 16, ret);
    mw.s.put(rbp + 8, ~uint64_t{0});   // the cookie
    mw.s.put(rbp, 0x2222);
    // The native function's frame below the saves; a copy of C's return address among them, and
    // another where C's return slot would be if the copy were taken.
    const uint64_t fp_native = rbp - 0x100;
    mw.s.put(fp_native + 8, stub_begin + 0xb7);
    mw.s.put(fp_native, rbp);
    mw.s.put(fp_native + 0x18, ret);
    mw.s.put(fp_native + 0x18 + 8 + 3 * 8, ret);
    Decoder d(mw.w.map, test_options());
    const CallTrace t = d.decode(sample_of(mw.s, kNativePc, fp_native - 0x20, fp_native));
    INFO(fail_reason_name(t.failure));
    REQUIRE(t.status == TraceStatus::kComplete);
    REQUIRE(t.frames.size() == 4);   // the native function, the stub, C, D
    CHECK(t.frames[1].kind == FrameKind::kStub);
    CHECK(t.frames[2].method_id == method_id(4));
    CHECK(t.frames[3].method_id == method_id(5));
    CHECK(d.stats().stub_rbp_frames == 1);
}

TEST_CASE("a c2i adapter past moving its return address: the caller's sp is r13, the return address at [sp]",
          "[decoder][moved_sp][stub]") {
    // httpserver, JDK 17: `pop rax; mov r13, rsp; sub rsp, 16; mov [rsp], rax` done, the arguments
    // being copied; the scan took [sp] with sp + 8, which fails, and then a stale return address.
    // The adapters made once JVMTI runs carry their signature's fingerprint in the name, a third of
    // a run's blobs (a program compiling regexes and deoptimizing, JDK 17: each such sample failed).
    const std::string name = GENERATE(std::string("I2C/C2I adapters"), std::string("I2C/C2I adapters(0xb7e7e)"));
    MovedWorld mw(jdk_param());
    const uint64_t adapters = kCodeCacheLow + 0x50000;
    put_call(mw.c, 0x30 - 5, adapters + 0x200);
    add_scope(mw.c, 0x30, {{method_id(4), 7}});
    mw.announce();
    Stub blob = stub_at(adapters, name.c_str(), -1);
    blob.end = adapters + 0x1000;
    mw.w.map.apply(blob);
    const uint64_t sp = mw.sp_c - 16;
    mw.s.put(sp, mw.c_begin + 0x30);
    mw.stale_at(sp + 8);
    Sample smp = sample_of(mw.s, adapters + 0x230, sp, 0x2222);
    smp.regs.r13 = mw.sp_c;
    Decoder d(mw.w.map, test_options());
    const std::vector<MethodBci> expected{mb(4, 7), mb(5, 21)};
    SECTION("r13 says where the caller's frame is") {
        const CallTrace t = d.decode(smp);
        INFO(fail_reason_name(t.failure));
        REQUIRE(t.status == TraceStatus::kComplete);
        CHECK(t.frames.front().kind == FrameKind::kStub);
        CHECK(java_frames(t) == expected);
    }
    SECTION("inside the call-site patch, registers saved below: the return address at [r13]") {
        // jython, JDK 25: `mov r13, rsp; and rsp, -16`, 2.8 KB of saves, [sp] the x87 control word.
        mw.s.put(mw.sp_c - 8, mw.c_begin + 0x30);
        const uint64_t low = mw.sp_c - 8 - 0x100;
        mw.s.put(low, 0x37f);
        // Among the saves, a stale return into E at a verified call site whose frame checks out.
        const uint64_t e_return = add_stale_caller(mw, 2);
        mw.s.put(low + 0x40, e_return);
        mw.s.put(low + 0x50, mw.d_begin + 0x30);
        smp = sample_of(mw.s, adapters + 0x240, low, 0x2222);
        smp.regs.r13 = mw.sp_c - 8;
        const CallTrace t = d.decode(smp);
        INFO(fail_reason_name(t.failure));
        REQUIRE(t.status == TraceStatus::kComplete);
        CHECK(java_frames(t) == expected);
    }
    SECTION("reached from fixup_callers_callsite's native frame: the saved r13 and rax say where it began") {
        // h2, JDK 17: rbp was whatever C's code kept there, and its [fp+8] a stale return into E
        // whose frame checked out; every caller after it was stale.
        const uint64_t e_return = add_stale_caller(mw, 2);
        const uint64_t entry_sp = mw.sp_c - 8;
        mw.s.put(entry_sp, mw.c_begin + 0x30);
        const uint64_t r13_slot = entry_sp - 0x88;
        mw.s.put(r13_slot, entry_sp);
        mw.s.put(r13_slot + 13 * 8, mw.c_begin + 0x30);   // the saved rax
        mw.s.put(r13_slot + 8 * 8, 0x1111);               // the saved rbp
        const uint64_t adapter_sp = r13_slot - 0x40;       // the FPU state between
        const uint64_t stale_fp = adapter_sp + 8;
        mw.s.put(stale_fp + 8, e_return);
        mw.s.put(stale_fp + 16 + 8, mw.d_begin + 0x30);
        const uint64_t fp_native = adapter_sp - 16;
        mw.s.put(fp_native + 8, adapters + 0x250);
        mw.s.put(fp_native, stale_fp);
        smp = sample_of(mw.s, kNativePc, fp_native - 0x20, fp_native);
        const CallTrace t = d.decode(smp);
        INFO(fail_reason_name(t.failure));
        REQUIRE(t.status == TraceStatus::kComplete);
        REQUIRE(t.frames.size() >= 2);
        CHECK(t.frames[0].kind == FrameKind::kNative);
        CHECK(t.frames[1].kind == FrameKind::kStub);
        CHECK(java_frames(t) == expected);
    }
    SECTION("before the `pop`, [sp] with the caller's sp above it is taken, whatever r13 holds") {
        mw.s.put(mw.sp_c - 8, mw.c_begin + 0x30);
        smp = sample_of(mw.s, adapters + 0x200, mw.sp_c - 8, 0x2222);
        smp.regs.r13 = mw.sp_c + 0x40;
        const CallTrace t = d.decode(smp);
        INFO(fail_reason_name(t.failure));
        CHECK(java_frames(t) == expected);
    }
}

TEST_CASE("C1's exception handler entry calls handle_exception_from_callee with no PcDesc after the call: the "
          "frame is the method's own, without a bci", "[decoder][moved_sp][stub]") {
    // lucene, JDK 17 (100 us): the query parser throws for control flow; sampled at the stub's first
    // bytes, [sp] returned into C's exception handler entry (`call stub; hlt`), and the walk failed
    // there as no_pc_desc.
    MovedWorld mw(jdk_param());
    mw.c.comp_level = 1;
    const uint64_t stub_begin = kCodeCacheLow + 0x40000;
    put_call(mw.c, 0x200, stub_begin);
    put_bytes(mw.c, 0x205, {0xf4});
    add_scope(mw.c, 0x30, {{method_id(4), 12}});
    mw.announce();
    const uint64_t sp = mw.sp_c - 8;
    mw.s.put(sp, mw.c_begin + 0x205);
    auto decode_in = [&](const char* name) {
        mw.w.map.apply(stub_at(stub_begin, name, 10));
        Decoder d(mw.w.map, test_options());
        return d.decode(sample_of(mw.s, stub_begin, sp, 0x2222));
    };
    for (const char* name : {"handle_exception_from_callee Runtime1 stub", "C1 Runtime handle_exception_from_callee_blob"}) {
        const CallTrace t = decode_in(name);
        INFO(name << ": " << fail_reason_name(t.failure));
        REQUIRE(t.status == TraceStatus::kComplete);
        CHECK(java_frames(t) == std::vector<MethodBci>{mb(4, -1), mb(5, 21)});
    }
    SECTION("a call into another stub without a PcDesc after it still fails") {
        const CallTrace t = decode_in("counter_overflow Runtime1 stub");
        CHECK(t.failure == FailReason::kNoPcDesc);
    }
}

TEST_CASE("handle_exception_from_callee past its call into the VM: the handler it wrote over its return address is "
          "where the method goes on", "[decoder][moved_sp][stub]") {
    // javac, JDK 25 (100 us): sampled at the stub's end, [rbp+8] held the handler's address (a
    // block that `jmp` leads into, no call before it), no check took it as a return address, and
    // the scan took a stale one and failed two frames on.
    const uint64_t stub_begin = kCodeCacheLow + 0x40000;
    uint64_t stub_rbp_frames = 0;
    // C's exception handler entry calls the stub at 0x200 (`call; hlt`); its handler block at 0x240
    // follows a jmp.
    auto decode_with_slot = [&](uint64_t slot_offset) {
        MovedWorld mw(jdk_param());
        mw.c.comp_level = 3;
        put_call(mw.c, 0x200, stub_begin);
        put_bytes(mw.c, 0x205, {0xf4});
        put_bytes(mw.c, 0x23b, {0xe9, 0x00, 0x00, 0x00, 0x00});
        add_scope(mw.c, 0x30, {{method_id(4), 12}});
        add_scope(mw.c, 0x260, {{method_id(4), 17}});   // the handler block's first PcDesc
        mw.announce();
        mw.w.map.apply(stub_at(stub_begin, "C1 Runtime handle_exception_from_callee_blob", 2));
        const uint64_t fp = mw.sp_c - 16;   // `enter` over the return address: the whole frame
        mw.s.put(fp + 8, mw.c_begin + slot_offset);
        mw.s.put(fp, 0x3333);
        mw.stale_at(fp + 24);               // a stale return address inside C's frame, for a scan to meet
        Decoder d(mw.w.map, test_options());
        const CallTrace t = d.decode(sample_of(mw.s, stub_begin + 0x80, fp, fp));
        stub_rbp_frames = d.stats().stub_rbp_frames;
        return t;
    };
    SECTION("after the write: the handler's PcDesc names the frame") {
        const CallTrace t = decode_with_slot(0x240);
        INFO(fail_reason_name(t.failure));
        REQUIRE(t.status == TraceStatus::kComplete);
        CHECK(java_frames(t) == std::vector<MethodBci>{mb(4, 17), mb(5, 21)});
        CHECK(stub_rbp_frames == 1);
    }
    SECTION("before it, [rbp+8] is a return address into the handler entry's call, which the rule leaves alone") {
        const CallTrace t = decode_with_slot(0x205);
        INFO(fail_reason_name(t.failure));
        REQUIRE(t.status == TraceStatus::kComplete);
        const std::vector<MethodBci> frames = java_frames(t);
        REQUIRE(frames.size() == 2);
        CHECK(frames[0].method_id == method_id(4));
        CHECK(frames[1] == mb(5, 21));
        CHECK(stub_rbp_frames == 0);
    }
}

TEST_CASE("a GC barrier's slow path jumps back to a PcDesc of its own: the frame is that PcDesc's", "[decoder][moved_sp]") {
    // C1's tier-1 VersionedValueCommitted.getCurrentValue (h2, ZGC, JDK 25): aload_0, getfield, areturn.
    // PcDescs at the entry barrier's return (bci 0) and where the load barrier's slow path jumps back
    // (bci 1, the getfield); none after it.
    MovedWorld mw(jdk_param());
    mw.c.comp_level = 1;
    const uint64_t stub_begin = kCodeCacheLow + 0x40000;
    put_c1_barrier_slow_path(mw.c, stub_begin);
    add_scope(mw.c, 0x1b, {{method_id(4), 0}});
    add_scope(mw.c, 0x26, {{method_id(4), 1}});
    mw.announce();
    mw.w.map.apply(stub_at(stub_begin, "load_barrier_on_oop_field_preloaded_runtime_stub", -1));
    CodeLoad stale = nmethod(kCodeCacheLow + 0x30000, 6, 2);
    add_scope(stale, 0x40, {{method_id(6), 3}});
    mw.w.add_code(stale);
    const uint64_t rbp = put_barrier_stub_frame(mw, stale.code_begin);
    Decoder d(mw.w.map, test_options());
    CallTrace t = d.decode(sample_of(mw.s, stub_begin + 0xff, rbp - 0x1c0, rbp));
    INFO(fail_reason_name(t.failure));
    REQUIRE(t.status == TraceStatus::kComplete);
    CHECK(java_frames(t) == std::vector<MethodBci>{mb(4, 1), mb(5, 21)});
    CHECK(d.stats().stub_continuations == 1);
}

TEST_CASE("ZGC's C2 load barrier: an out-of-line stub saves registers below the frame's sp and calls the "
          "runtime; the caller is the frame the stub jumps back into", "[decoder][moved_sp]") {
    MovedWorld mw(jdk_param());
    // 0x20 jne 0x100 | 0x26 ... PcDesc 0x30
    // 0x100 sub rsp, 0x20; mov r10, runtime; call r10 | 0x111 (no PcDesc) mov rdi, rax; mov rsi, [rsp];
    // vzeroupper; add rsp, 0x20; jmp 0x26
    put_bytes(mw.c, 0x20, {0x0f, 0x85, 0xda, 0x00, 0x00, 0x00});
    add_scope(mw.c, 0x30, {{method_id(4), 12}});
    put_bytes(mw.c, 0x100, {0x48, 0x83, 0xec, 0x20, 0x49, 0xba});
    std::memcpy(mw.c.code.data() + 0x106, &kNativePc, 8);
    put_bytes(mw.c, 0x10e, {0x41, 0xff, 0xd2});
    put_bytes(mw.c, 0x111, {0x48, 0x8b, 0xf8, 0x48, 0x8b, 0x34, 0x24, 0xc5, 0xf8, 0x77, 0x48, 0x83, 0xc4, 0x20,
                            0xe9, 0x02, 0xff, 0xff, 0xff});
    mw.announce();
    // The runtime function keeps rbp: its frame below the 0x20 bytes of saved registers.
    const uint64_t fp_native = mw.sp_c - 0x30;
    mw.s.put(fp_native + 8, mw.c_begin + 0x111);
    mw.s.put(fp_native, 0x2222);
    mw.stale_at(mw.sp_c - 0x20 + 3 * 8);
    Decoder d(mw.w.map, test_options());
    CallTrace t = d.decode(sample_of(mw.s, kNativePc, fp_native - 0x20, fp_native));
    INFO(fail_reason_name(t.failure));
    REQUIRE(t.status == TraceStatus::kComplete);
    CHECK(t.frames.front().kind == FrameKind::kNative);
    CHECK(java_frames(t) == std::vector<MethodBci>{mb(4, 12), mb(5, 21)});
    CHECK(d.stats().stub_continuations == 1);
}

TEST_CASE("C2's leaf call into a StubRoutines stub through r10: no PcDesc at the return address", "[decoder][moved_sp]") {
    MovedWorld mw(jdk_param());
    const uint64_t blob = kCodeCacheLow + 0x40000;
    // 0x40 mov r10, blob+0x100; call r10 | 0x4d (no PcDesc) ... PcDesc 0x60
    put_bytes(mw.c, 0x40, {0x49, 0xba});
    const uint64_t entry = blob + 0x100;
    std::memcpy(mw.c.code.data() + 0x42, &entry, 8);
    put_bytes(mw.c, 0x4a, {0x41, 0xff, 0xd2});
    add_scope(mw.c, 0x60, {{method_id(4), 7}});
    mw.announce();
    Stub stubs = stub_at(blob, "StubRoutines (finalstubs)", -1);
    stubs.end = blob + 0x1000;
    mw.w.map.apply(stubs);
    mw.w.map.apply(stub_at(entry, "jbyte_disjoint_arraycopy", -1));
    mw.w.map.apply(stub_at(blob + 0x800, "jbyte_arraycopy", -1));
    // The stub pushed rbp; the top pc is in another stub's code than the entry called.
    const uint64_t stub_sp = mw.sp_c - 16;
    mw.s.put(stub_sp, mw.sp_c + 0x100);
    mw.s.put(stub_sp + 8, mw.c_begin + 0x4d);
    Decoder d(mw.w.map, test_options());
    CallTrace t = d.decode(sample_of(mw.s, blob + 0x810, stub_sp, stub_sp));
    INFO(fail_reason_name(t.failure));
    REQUIRE(t.status == TraceStatus::kComplete);
    CHECK(java_frames(t) == std::vector<MethodBci>{mb(4, 7), mb(5, 21)});
    SECTION("not when the call went to a stub that calls into the VM") {
        mw.w.map.apply(stub_at(entry, "C2 Runtime new_array", -1));
        Decoder d2(mw.w.map, test_options());
        CallTrace t2 = d2.decode(sample_of(mw.s, blob + 0x810, stub_sp, stub_sp));
        CHECK(java_frames(t2) == std::vector<MethodBci>{mb(5, 21)});   // the scan goes on to D
    }
}

TEST_CASE("a leaf call into the VM's C code that jumped on into a stub: the stub's [sp] returns after it",
          "[decoder][return_address]") {
    // JDK 25's C1 calls SharedRuntime::drem (libjvm) for `drem`; drem tail-calls the fmod stub
    // through StubRoutines' pointer. Sampled inside that stub, [sp] returns into C after a call
    // whose target is libjvm's code, not the stub.
    MovedWorld mw(jdk_param());
    const uint64_t fmod = kCodeCacheLow + 0x40000;
    // 0x40 mov r10, native; call r10 | 0x4d (no PcDesc: a leaf call) ... PcDesc 0x60
    put_bytes(mw.c, 0x40, {0x49, 0xba});
    std::memcpy(mw.c.code.data() + 0x42, &kNativePc, 8);
    put_bytes(mw.c, 0x4a, {0x41, 0xff, 0xd2});
    add_scope(mw.c, 0x60, {{method_id(4), 9}});
    mw.announce();
    mw.w.map.apply(stub_at(fmod, "fmod", -1));
    const uint64_t stub_sp = mw.sp_c - 8;
    mw.s.put(stub_sp, mw.c_begin + 0x4d);   // the stub's first instruction: nothing pushed yet
    const auto decode_with_libjvm = [&](bool libjvm_announced) {
        if (libjvm_announced) {
            ModuleMap libjvm;
            libjvm.begin = kNativePc & ~uint64_t{0xfff};
            libjvm.end = libjvm.begin + 0x10000;
            libjvm.path = "/nonexistent/libjvm.so";
            mw.w.map.apply(libjvm);
        }
        Decoder d(mw.w.map, test_options());
        CallTrace t = d.decode(sample_of(mw.s, fmod, stub_sp, 0x2222));
        return std::make_pair(t, d.stats().scans_passed_over);
    };
    SECTION("the call's target is a module's code: C is the caller") {
        const auto [t, passed_over] = decode_with_libjvm(true);
        INFO(fail_reason_name(t.failure));
        REQUIRE(t.status == TraceStatus::kComplete);
        CHECK(java_frames(t) == std::vector<MethodBci>{mb(4, 9), mb(5, 21)});
        CHECK(passed_over == 0);
    }
    SECTION("a target in no module is no such call: the scan passes C over and takes D, and says so") {
        const auto [t, passed_over] = decode_with_libjvm(false);
        CHECK(java_frames(t) == std::vector<MethodBci>{mb(5, 21)});
        CHECK(passed_over == 1);
    }
}

TEST_CASE("a stub scan passes over a stale return address whose frame returns to no call site", "[decoder][return_address]") {
    MovedWorld mw(jdk_param());
    const uint64_t stub_begin = kCodeCacheLow + 0x40000;
    put_call(mw.c, 0x40, stub_begin);
    add_scope(mw.c, 0x45, {{method_id(4), 30}});
    mw.announce();
    mw.w.map.apply(stub_at(stub_begin, "jint_fill", -1));
    const uint64_t stub_sp = mw.sp_c - 8 - 64;
    mw.s.put(mw.sp_c - 8, mw.c_begin + 0x45);        // the real return address into C
    mw.s.put(stub_sp + 8, mw.d_begin + 0x30);        // a stale copy of D's call site in dead stack
    mw.s.put(stub_sp + 16 + 5 * 8, mw.c_begin + 0x80);   // where that frame's return slot would be: no call
    Decoder d(mw.w.map, test_options());
    CallTrace t = d.decode(sample_of(mw.s, stub_begin + 0x10, stub_sp, 0x2222));
    INFO(fail_reason_name(t.failure));
    REQUIRE(t.status == TraceStatus::kComplete);
    CHECK(java_frames(t) == std::vector<MethodBci>{mb(4, 30), mb(5, 21)});
}
