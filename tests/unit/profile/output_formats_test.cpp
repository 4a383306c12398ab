// The output-format table is the one list of formats: every row's endings pick that row, each row
// writes through write_profile, rows with a reader read their own output back, and the help texts
// and off-CPU names are made from the same rows.
#include <filesystem>
#include <fstream>
#include <set>
#include <string>

#include <catch2/catch.hpp>

#include "profile_test_support.hpp"
#include "stackfrag/profile/export.hpp"
#include "test_env.hpp"

using namespace sf;
using namespace sf::profile;
using namespace sf::profile::testing;

TEST_CASE("every ending in the output-format table picks its own row and nothing else") {
    std::set<std::string_view> seen;
    for (const OutputFormat& row : output_formats()) {
        REQUIRE_FALSE(row.endings.empty());
        REQUIRE_FALSE(row.description.empty());
        REQUIRE(row.write != nullptr);
        for (std::string_view ending : row.endings) {
            INFO(ending);
            CHECK(seen.insert(ending).second);   // no ending in two rows
            const std::string path = "/tmp/dir.with.dots/profile" + std::string(ending);
            Result<ProfileFormat> format = format_for_path(path);
            REQUIRE(format.ok());
            CHECK(*format == row.format);
            CHECK(output_format_of(path) == &row);
            CHECK(format_ending_size(path) == ending.size());
            CHECK(std::string(accepted_profile_extensions()).find(ending) != std::string::npos);
            CHECK(std::string(accepted_profile_extensions_phrase()).find(ending) != std::string::npos);
        }
    }
    CHECK(seen.count(".jfr") == 1);
    CHECK(seen.count(".pb.gz") == 1);
    Result<ProfileFormat> unknown = format_for_path("/tmp/profile.txt");
    REQUIRE_FALSE(unknown.ok());
    CHECK(unknown.error().describe().find(accepted_profile_extensions()) != std::string::npos);
    CHECK(format_ending_size("/tmp/profile.txt") == 0);
}

TEST_CASE("write_profile writes every row's format, and the rows with a reader read it back") {
    MethodTable names;
    names.add(method(1, "app/Main", "main", "()V", {{0, 10}}, "Main.java"));
    names.add(method(2, "app/Main", "work", "()I", {{0, 20}}, "Main.java"));
    Cct cct(&names, CctOptions{});
    (void)cct.add(trace({compiled(2, 0), interpreted(1, 0)}), 3);
    (void)cct.add(trace({interpreted(1, 0)}), 2);
    const std::string dir = sf::test::temp_dir("output-formats");
    for (const OutputFormat& row : output_formats()) {
        for (std::string_view ending : row.endings) {
            const std::string path = dir + "/p" + std::string(ending);
            INFO(path);
            REQUIRE(write_profile(cct, path, HtmlOptions{}).ok());
            REQUIRE(std::filesystem::file_size(path) > 0);
            Result<Cct> back = read_profile(path);
            if (row.read == nullptr) {
                REQUIRE_FALSE(back.ok());   // says which endings are readable
                CHECK(back.error().describe().find(".json") != std::string::npos);
                continue;
            }
            REQUIRE(back.ok());
            CHECK(back->total_samples() == cct.total_samples());
        }
    }
    std::filesystem::remove_all(dir);
}
