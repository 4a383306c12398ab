#include <catch2/catch.hpp>

#include "stackfrag/base/result.hpp"

TEST_CASE("Result carries a value or an error that describes itself") {
    sf::Result<int> good = 42;
    REQUIRE(good.ok());
    CHECK(*good == 42);

    sf::Result<int> bad = sf::sys_error(sf::Errc::kPermission, EACCES, "perf_event_open(tid 7)",
                                        "lower kernel.perf_event_paranoid");
    REQUIRE_FALSE(bad.ok());
    CHECK(bad.error().code == sf::Errc::kPermission);
    const std::string text = bad.error().describe();
    CHECK(text.find("perf_event_open(tid 7)") != std::string::npos);
    CHECK(text.find("Permission denied") != std::string::npos);
    CHECK(text.find("perf_event_paranoid") != std::string::npos);

    sf::Status fine;
    CHECK(fine.ok());
    sf::Status failed = sf::make_error(sf::Errc::kIo, "write x");
    CHECK_FALSE(failed.ok());
    CHECK(failed.error().describe() == "write x");
}
