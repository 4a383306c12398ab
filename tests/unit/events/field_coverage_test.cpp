#include <catch2/catch.hpp>
#include <utility>

// The codec's field lists are internal to sf_events; this test is their only outside check.
#include "../../../events/src/event_codec.hpp"
#include "stackfrag/events/events.hpp"

namespace {

// Converts to any member type, so T{AnyMember, ...} compiles exactly up to T's member count.
struct AnyMember {
    template <class T>
    operator T() const;
};

template <class T, class... Members>
concept BraceInitializableFrom = requires { T{std::declval<Members>()...}; };

template <class T, class... Members>
constexpr size_t member_count() {
    if constexpr (BraceInitializableFrom<T, Members..., AnyMember>) return member_count<T, Members..., AnyMember>();
    else return sizeof...(Members);
}

template <class T>
void check_covered(const char* name) {
    INFO(name << " has " << member_count<T>() << " members but events/src/event_codec.cpp records "
              << sf::event_codec::field_count<T>()
              << ": add the new field to its field list (at the end) and to docs/recording-format.md");
    CHECK(sf::event_codec::field_count<T>() == member_count<T>());
}

}  // namespace

TEST_CASE("the recording encodes every member of every event type") {
    using namespace sf;
    check_covered<Registers>("Registers");
    check_covered<Sample>("Sample");
    check_covered<MethodBci>("MethodBci");
    check_covered<PcScope>("PcScope");
    check_covered<CodeLoad>("CodeLoad");
    check_covered<CodeUnload>("CodeUnload");
    check_covered<Stub>("Stub");
    check_covered<LineEntry>("LineEntry");
    check_covered<MethodInfo>("MethodInfo");
    check_covered<CodeRange>("CodeRange");
    check_covered<VmInfo>("VmInfo");
    check_covered<Oracle>("Oracle");
    check_covered<ThreadInfo>("ThreadInfo");
    check_covered<Lost>("Lost");
    check_covered<ModuleMap>("ModuleMap");
    check_covered<JvmtiTrace>("JvmtiTrace");
    check_covered<ProcessCpu>("ProcessCpu");
    check_covered<MethodEntry>("MethodEntry");
    check_covered<MethodBatch>("MethodBatch");
    check_covered<NamedMethod>("NamedMethod");
    // Every Event alternative is one of the types above.
    STATIC_REQUIRE(std::variant_size_v<Event> == 14);
}
