#include <catch2/catch.hpp>

#include <array>
#include <set>
#include <vector>

#include "vm_code_map.hpp"   // jvmti.h first: jvmticmlr.h needs its types

#include <jvmticmlr.h>

using sf::CodeKind;
using sf::CodeLoad;

namespace {

jmethodID fake_method(uintptr_t n) { return reinterpret_cast<jmethodID>(0x1000 * n); }

}  // namespace

TEST_CASE("method entry codelets are recognised by their description on 17 and 25") {
    CHECK(sf::agent::is_method_entry_codelet("method entry point (kind = zerolocals)"));
    CHECK(sf::agent::is_method_entry_codelet("method entry point (kind = native)"));
    CHECK(sf::agent::is_method_entry_codelet("native method entry point (kind = native)"));
    CHECK_FALSE(sf::agent::is_method_entry_codelet("return entry points"));
    CHECK_FALSE(sf::agent::is_method_entry_codelet("invoke return entry points"));
    CHECK_FALSE(sf::agent::is_method_entry_codelet(""));
}

TEST_CASE("nmethod blob names and kinds") {
    CHECK(sf::agent::is_nmethod_blob_name("nmethod"));
    CHECK(sf::agent::is_nmethod_blob_name("native nmethod"));
    CHECK_FALSE(sf::agent::is_nmethod_blob_name("Interpreter"));
    CHECK_FALSE(sf::agent::is_nmethod_blob_name("nmethod2"));
    CHECK(sf::agent::is_native_nmethod_blob_name("native nmethod"));
    CHECK_FALSE(sf::agent::is_native_nmethod_blob_name("nmethod"));

    CHECK(sf::agent::classify_nmethod(false, 6, -1) == CodeKind::kNmethod);
    CHECK(sf::agent::classify_nmethod(false, 8, 15) == CodeKind::kOsr);
    CHECK(sf::agent::classify_nmethod(false, 8, 0) == CodeKind::kOsr);
    CHECK(sf::agent::classify_nmethod(true, 10, -1) == CodeKind::kNativeWrapper);
    CHECK(sf::agent::classify_nmethod(true, 0, -1) == CodeKind::kMethodHandleIntrinsic);
}

TEST_CASE("segment map hops back to the block start") {
    // Block A: segments 0..2; free segment 3; block B: segments 4..(4+300) — longer than one hop.
    std::vector<uint8_t> map(310, 0xFF);
    map[0] = 0;
    map[1] = 1;
    map[2] = 2;
    // HotSpot numbers a block's segments 0, 1, ..., 254 and then restarts at 1 (0xFF is "free").
    for (size_t i = 0; i <= 300; ++i) {
        map[4 + i] = i == 0 ? 0 : static_cast<uint8_t>((i - 1) % 254 + 1);
    }
    CHECK(sf::agent::segmap_block_start(map.data(), map.size(), 0) == 0u);
    CHECK(sf::agent::segmap_block_start(map.data(), map.size(), 2) == 0u);
    CHECK_FALSE(sf::agent::segmap_block_start(map.data(), map.size(), 3).has_value());
    CHECK(sf::agent::segmap_block_start(map.data(), map.size(), 4) == 4u);
    CHECK(sf::agent::segmap_block_start(map.data(), map.size(), 4 + 254) == 4u);
    CHECK(sf::agent::segmap_block_start(map.data(), map.size(), 4 + 300) == 4u);
    CHECK_FALSE(sf::agent::segmap_block_start(map.data(), map.size(), 400).has_value());
    // A hop past the map start is corruption, not a block.
    std::vector<uint8_t> bad{5, 1};
    CHECK_FALSE(sf::agent::segmap_block_start(bad.data(), bad.size(), 1).has_value());
}

TEST_CASE("CompiledMethodLoad inline records become sorted scopes, innermost frame first") {
    const uint64_t code_begin = 0x7f0000001000;
    jmethodID chain_methods[] = {fake_method(1), fake_method(2), fake_method(3)};
    jint chain_bcis[] = {7, 14, 21};
    jmethodID single_methods[] = {fake_method(3)};
    jint single_bcis[] = {4};
    PCStackInfo pcs[3] = {};
    // Out of order on purpose: the conversion sorts by pc.
    pcs[0].pc = reinterpret_cast<void*>(code_begin + 0x90);
    pcs[0].numstackframes = 3;
    pcs[0].methods = chain_methods;
    pcs[0].bcis = chain_bcis;
    pcs[1].pc = reinterpret_cast<void*>(code_begin + 0x20);
    pcs[1].numstackframes = 1;
    pcs[1].methods = single_methods;
    pcs[1].bcis = single_bcis;
    pcs[2].pc = reinterpret_cast<void*>(code_begin + 0x5000);   // outside the code: dropped
    pcs[2].numstackframes = 1;
    pcs[2].methods = single_methods;
    pcs[2].bcis = single_bcis;

    jvmtiCompiledMethodLoadInlineRecord inline_record{};
    inline_record.header.kind = JVMTI_CMLR_INLINE_INFO;
    inline_record.header.majorinfoversion = JVMTI_CMLR_MAJOR_VERSION_1;
    inline_record.numpcs = 3;
    inline_record.pcinfo = pcs;
    jvmtiCompiledMethodLoadDummyRecord dummy{};
    dummy.header.kind = JVMTI_CMLR_DUMMY;
    dummy.header.next = &inline_record.header;

    CodeLoad load;
    load.code_begin = code_begin;
    load.code_end = code_begin + 0x200;
    std::vector<jmethodID> seen;
    auto stats = sf::agent::append_inline_scopes(&dummy, load, seen);

    CHECK(stats.inline_records == 1);
    CHECK(stats.pcs == 3);
    CHECK(stats.pcs_outside_code == 1);
    REQUIRE(load.scopes.size() == 2);
    CHECK(load.scopes[0].pc_offset == 0x20);
    CHECK(load.scopes[0].count == 1);
    CHECK(load.frames[load.scopes[0].first].method_id == reinterpret_cast<uint64_t>(fake_method(3)));
    CHECK(load.frames[load.scopes[0].first].bci == 4);
    CHECK(load.scopes[1].pc_offset == 0x90);
    REQUIRE(load.scopes[1].count == 3);
    for (uint32_t i = 0; i < 3; ++i) {
        const auto& frame = load.frames[load.scopes[1].first + i];
        CHECK(frame.method_id == reinterpret_cast<uint64_t>(chain_methods[i]));
        CHECK(frame.bci == chain_bcis[i]);
    }
    // Every method met, once (method 3 ends the chain and is the next pc's).
    REQUIRE(seen.size() == 3);
    CHECK(seen[0] == fake_method(1));
    CHECK(seen[1] == fake_method(2));
    CHECK(seen[2] == fake_method(3));
}

TEST_CASE("a compile_info without inline records leaves the CodeLoad without scopes") {
    CodeLoad load;
    load.code_begin = 0x1000;
    load.code_end = 0x2000;
    std::vector<jmethodID> seen;
    auto stats = sf::agent::append_inline_scopes(nullptr, load, seen);
    CHECK(stats.inline_records == 0);
    CHECK(load.scopes.empty());
    CHECK(load.frames.empty());

    // A cyclic chain (garbage) is cut, not followed forever.
    jvmtiCompiledMethodLoadDummyRecord loop{};
    loop.header.kind = JVMTI_CMLR_DUMMY;
    loop.header.next = &loop.header;
    stats = sf::agent::append_inline_scopes(&loop, load, seen);
    CHECK(stats.inline_records == 0);
}

TEST_CASE("a caller chain repeated at every pc lists each method once") {
    // 400 pcs, each inside one of 20 inlined leaves called from the same three callers, as a large
    // C2 method's records read.
    const uint64_t code_begin = 0x7f0000100000;
    constexpr int kPcs = 400, kLeaves = 20;
    std::vector<std::array<jmethodID, 4>> chains(kPcs);
    std::vector<std::array<jint, 4>> bcis(kPcs);
    std::vector<PCStackInfo> pcs(kPcs);
    for (int i = 0; i < kPcs; ++i) {
        chains[i] = {fake_method(100 + i % kLeaves), fake_method(3), fake_method(2), fake_method(1)};
        bcis[i] = {i, 1, 2, 3};
        pcs[i].pc = reinterpret_cast<void*>(code_begin + 16 * static_cast<uint64_t>(i));
        pcs[i].numstackframes = 4;
        pcs[i].methods = chains[i].data();
        pcs[i].bcis = bcis[i].data();
    }
    jvmtiCompiledMethodLoadInlineRecord inline_record{};
    inline_record.header.kind = JVMTI_CMLR_INLINE_INFO;
    inline_record.header.majorinfoversion = JVMTI_CMLR_MAJOR_VERSION_1;
    inline_record.numpcs = kPcs;
    inline_record.pcinfo = pcs.data();
    CodeLoad load;
    load.code_begin = code_begin;
    load.code_end = code_begin + 16 * kPcs;
    std::vector<jmethodID> seen;
    sf::agent::append_inline_scopes(&inline_record, load, seen);

    CHECK(load.scopes.size() == static_cast<size_t>(kPcs));
    CHECK(load.frames.size() == static_cast<size_t>(4 * kPcs));
    std::set<jmethodID> distinct(seen.begin(), seen.end());
    CHECK(distinct.size() == static_cast<size_t>(kLeaves + 3));
    CHECK(seen.size() == distinct.size());   // of 1,600 frames met
}
