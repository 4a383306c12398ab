// The choice of a JDK row from a release number, and the facts that tell the rows apart.
#include <catch2/catch.hpp>

#include "stackfrag/hotspot/frame_layout.hpp"
#include "stackfrag/hotspot/jdk_facts.hpp"
#include "stackfrag/hotspot/vm_layout.hpp"

using namespace sf::hotspot;

namespace {
int family_of(int release) { return static_cast<int>(jdk_facts(release).facts->family); }
}  // namespace

TEST_CASE("each release gets the row at or below it, exact only for the row's own release", "[hotspot]") {
    CHECK(family_of(17) == 17);
    CHECK(jdk_facts(17).exact);
    CHECK(family_of(21) == 21);
    CHECK(jdk_facts(21).exact);
    CHECK(family_of(25) == 25);
    CHECK(jdk_facts(25).exact);
    // Between rows: 18-20 frame like 17; 22-24 relativize every slot like 25.
    for (int release : {18, 19, 20}) {
        CHECK(family_of(release) == 17);
        CHECK_FALSE(jdk_facts(release).exact);
    }
    for (int release : {22, 23, 24, 26, 30}) {
        CHECK(family_of(release) == 25);
        CHECK_FALSE(jdk_facts(release).exact);
    }
    // Unknown (0) and older releases: the first row, not exact.
    CHECK(family_of(0) == 17);
    CHECK_FALSE(jdk_facts(0).exact);
    CHECK(family_of(11) == 17);
}

TEST_CASE("JDK 21 relativizes only locals; 25 also last_sp and initial_sp", "[hotspot]") {
    const JdkFacts& j17 = *jdk_facts(17).facts;
    const JdkFacts& j21 = *jdk_facts(21).facts;
    const JdkFacts& j25 = *jdk_facts(25).facts;
    CHECK_FALSE(j17.locals_fp_relative);
    CHECK(j21.locals_fp_relative);
    CHECK(j25.locals_fp_relative);
    CHECK_FALSE(j21.last_sp_fp_relative);
    CHECK_FALSE(j21.initial_sp_fp_relative);
    CHECK(j25.last_sp_fp_relative);
    CHECK(j25.initial_sp_fp_relative);
    CHECK(j21.initial_sp_pushed_as_zero);
    CHECK_FALSE(j25.initial_sp_pushed_as_zero);
    // JDK 21 still has CompiledMethod and absolute code addresses in the blob header.
    CHECK(j21.blob_header == BlobHeader::kAbsoluteAddresses);
    CHECK_FALSE(j21.blob_has_kind);
    CHECK(j25.blob_header == BlobHeader::kOffsets);

    const uint64_t fp = 0x7ffd'0000'1000;
    CHECK(interp::locals_address(j21, fp, 2) == fp + 16);
    CHECK(interp::locals_address(j17, fp, fp + 16) == fp + 16);
    CHECK(interp::initial_sp_address(j21, fp, fp - 72) == fp - 72);
    CHECK(interp::initial_sp_address(j25, fp, uint64_t(int64_t(-9))) == fp - 72);
    CHECK(interp::last_sp_address(j21, fp, fp - 88) == fp - 88);
    CHECK(interp::last_sp_address(j25, fp, uint64_t(int64_t(-11))) == fp - 88);
    CHECK(interp::last_sp_address(j25, fp, 0) == 0);
}

TEST_CASE("a recorded family wins over the release; unknown values fall back to the release", "[hotspot]") {
    CHECK(recorded_jdk_facts(17, 25).family == Family::kJdk17);
    CHECK(recorded_jdk_facts(21, 21).family == Family::kJdk21);
    CHECK(recorded_jdk_facts(25, 0).family == Family::kJdk25);
    // 0 = the agent guessed: the release decides (an older agent recorded JDK 21 VMs so).
    CHECK(recorded_jdk_facts(0, 21).family == Family::kJdk21);
    CHECK(recorded_jdk_facts(0, 23).family == Family::kJdk25);
    CHECK(recorded_jdk_facts(0, 17).family == Family::kJdk17);
    CHECK(recorded_jdk_facts(33, 25).family == Family::kJdk25);
    CHECK(recorded_jdk_facts(33, 17).family == Family::kJdk17);
}

TEST_CASE("rows are sorted by release and each has its own VMStructs bit", "[hotspot]") {
    uint8_t bits = 0;
    for (size_t i = 0; i < kJdkFacts.size(); ++i) {
        if (i > 0) CHECK(kJdkFacts[i - 1].first_release < kJdkFacts[i].first_release);
        CHECK((kJdkFacts[i].field_bit & bits) == 0);
        bits |= kJdkFacts[i].field_bit;
        CHECK(facts_of_family(static_cast<int>(kJdkFacts[i].family)) == &kJdkFacts[i]);
    }
    // Every field a row's blob header needs is required in that row.
    for (const JdkFacts& row : kJdkFacts) {
        const bool absolute = row.blob_header == BlobHeader::kAbsoluteAddresses;
        const FieldName& begin = kFieldNames[static_cast<size_t>(Field::kCodeBlobCodeBegin)];
        const FieldName& offset = kFieldNames[static_cast<size_t>(Field::kCodeBlobCodeOffset)];
        CHECK(((begin.required_in & row.field_bit) != 0) == absolute);
        CHECK(((offset.required_in & row.field_bit) != 0) == !absolute);
        const FieldName& kind = kFieldNames[static_cast<size_t>(Field::kCodeBlobKind)];
        CHECK(((kind.required_in & row.field_bit) != 0) == row.blob_has_kind);
    }
}
