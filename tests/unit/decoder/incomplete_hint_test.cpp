// The advice replay and the agent's stop summary give when traces often run off the fragment.
#include <catch2/catch.hpp>

#include "stackfrag/decoder/call_trace.hpp"

TEST_CASE("incomplete traces above 1% get a stack= suggestion, otherwise none") {
    const std::string hint = sf::incomplete_hint(120, 1000, 16384);
    CHECK(hint.find("12.0% of the traces ran off the 16384-byte stack fragment") == 0);
    CHECK(hint.find("stack=65528") != std::string::npos);
    CHECK(hint.find("3x deeper") != std::string::npos);
    CHECK(sf::incomplete_hint(9, 1000, 16384).empty());       // under 1%
    CHECK(sf::incomplete_hint(500, 1000, 65528).empty());     // already the largest fragment
    CHECK(sf::incomplete_hint(500, 1000, 0).empty());         // fragment size unknown
    CHECK(sf::incomplete_hint(0, 0, 16384).empty());
}
