// Every HotSpot fact that changes between JDK releases, one row per feature-release family, and the
// one function (jdk_facts) that picks the row for a VM's release. The agent and the decoder both use it.
// Source of every value: shared/docs/hotspot-frames.md (section in brackets) and the JDK's own sources.
// What the VM's VMStructs tables state (offsets, sizes: ConstMethod, CodeBlob, ...) is never here: the
// agent reads those from the running VM.
//
// A new JDK: add its row to kJdkFacts (sorted by first_release), the VMStructs entries it needs to
// vm_layout.hpp's kFieldNames (its bit), and synthetic decoder tests for its frames (see CONTRIBUTING.md).
#pragma once

#include <array>
#include <cstdint>

namespace sf::hotspot {

// A family is named after the release its row was taken from; the value is that release's number
// (and is what a recording's VmInfo.layout stores).
enum class Family : uint8_t { kJdk17 = 17, kJdk21 = 21, kJdk25 = 25 };

// How a CodeBlob header says where its code is [b.2].
enum class BlobHeader : uint8_t {
    kAbsoluteAddresses,   // _code_begin/_code_end addresses; nmethod fields split with CompiledMethod (17, 21)
    kOffsets,             // _code_offset/_data_offset from the blob; nmethod entry points as offsets (25)
};

struct JdkFacts {
    Family family;
    int first_release;   // the row serves releases from here up to the next row's first_release

    // Interpreter frames [a.1]: which fixed slots hold a word offset from fp instead of an address.
    bool locals_fp_relative;       // JDK-8299795, JDK 21
    bool last_sp_fp_relative;      // JDK-8308984, JDK 22
    bool initial_sp_fp_relative;   // JDK-8315966, JDK 22
    // generate_fixed_frame pushes the initial_sp slot as 0 and stores rsp into it one instruction
    // later, so a top frame may show 0 there [a.4]; the relativized form pushes the constant at once.
    bool initial_sp_pushed_as_zero;

    // Code blobs [b.2, b.4].
    BlobHeader blob_header;
    bool blob_has_kind;            // CodeBlob::_kind tells nmethods apart; otherwise the blob's name does

    // JVMTI. A virtual thread that switches to its carrier's stack (VirtualThread.scheduleUnpark)
    // is in a transition during which the VM posts no event: a class prepared there has no
    // ClassPrepare, and the code poll has to find it (seen on 21.0.13; none missed on 25.0.3).
    bool class_prepare_missed_on_carrier;

    // Which kFieldNames entries (vm_layout.hpp) the agent's VM capture needs: this row's bit.
    uint8_t field_bit;
};

inline constexpr uint8_t kIn17 = 1;
inline constexpr uint8_t kIn21 = 2;
inline constexpr uint8_t kIn25 = 4;

inline constexpr std::array<JdkFacts, 3> kJdkFacts = {{
    // JDK 17 [a.1, b.2 verified live on 17.0.15; decoding checked against ASGCT on 17.0.21.1 too].
    // Also used for 18-20 (frame encoding unchanged).
    {Family::kJdk17, 0,
     /*locals*/ false, /*last_sp*/ false, /*initial_sp*/ false, /*initial_sp_pushed_as_zero*/ true,
     BlobHeader::kAbsoluteAddresses, /*blob_has_kind*/ false, /*class_prepare_missed_on_carrier*/ false, kIn17},
    // JDK 21 [from jdk21u's sources: frame_x86.inline.hpp reads locals as &fp()[n] and last_sp as an
    // address; templateInterpreterGenerator_x86.cpp pushes the relativized locals, pushes 0 for the
    // expression stack bottom and stores rsp into it; vmStructs.cpp still has CompiledMethod,
    // CodeBlob::_code_begin/_code_end, nmethod::_entry_point and JavaThread::_osthread]. Decoding
    // checked against ASGCT on Debian 13's 21.0.13.
    {Family::kJdk21, 21,
     /*locals*/ true, /*last_sp*/ false, /*initial_sp*/ false, /*initial_sp_pushed_as_zero*/ true,
     BlobHeader::kAbsoluteAddresses, /*blob_has_kind*/ false, /*class_prepare_missed_on_carrier*/ true, kIn21},
    // JDK 25 [a.1, b.2 verified live on 25.0.3]. Also used for 22-24 and later: their interpreter
    // frames are relativized like 25's; their blob headers are told apart by the VMStructs markers.
    {Family::kJdk25, 22,
     /*locals*/ true, /*last_sp*/ true, /*initial_sp*/ true, /*initial_sp_pushed_as_zero*/ false,
     BlobHeader::kOffsets, /*blob_has_kind*/ true, /*class_prepare_missed_on_carrier*/ false, kIn25},
}};

struct JdkChoice {
    const JdkFacts* facts;
    bool exact;   // the release is the one the row was taken from (otherwise a neighbour's row)
};

// The row for a VM of feature release `release` (java.vm.specification.version): the last row whose
// first_release is <= release. Releases before every row (and 0, unknown) take the first row.
inline constexpr JdkChoice jdk_facts(int release) {
    const JdkFacts* chosen = &kJdkFacts.front();
    for (const JdkFacts& row : kJdkFacts) {
        if (row.first_release <= release) chosen = &row;
    }
    return JdkChoice{chosen, static_cast<int>(chosen->family) == release};
}

// The row of a family, by its number (17, 21, 25); null when `family` names no row.
inline constexpr const JdkFacts* facts_of_family(int family) {
    for (const JdkFacts& row : kJdkFacts) {
        if (static_cast<int>(row.family) == family) return &row;
    }
    return nullptr;
}

// What a decoder of a recorded VmInfo uses: the family the agent chose and recorded when it is a
// row, else (0: the agent guessed; or a value this build does not know) the row of the release.
inline constexpr const JdkFacts& recorded_jdk_facts(int recorded_family, int release) {
    const JdkFacts* recorded = facts_of_family(recorded_family);
    return recorded != nullptr ? *recorded : *jdk_facts(release).facts;
}

}  // namespace sf::hotspot
