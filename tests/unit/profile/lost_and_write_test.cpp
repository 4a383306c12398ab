// Two things a long-running profiler owes its user: a profile with holes says so (lost samples in
// json, pprof and html), and writing a profile never goes through a planted symlink, gets the mode
// asked for, and a failed write names the file and the reason and leaves nothing behind.
#include <catch2/catch.hpp>

#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "profile_test_support.hpp"
#include "stackfrag/profile/export.hpp"
#include "test_env.hpp"

using namespace sf;
using namespace sf::profile;
using namespace sf::profile::testing;

namespace {

Cct profile_with_lost(const MethodTable& names, uint64_t lost) {
    Cct cct(&names);
    cct.info().period_ns = 1'000'000;
    cct.info().lost_samples = lost;
    for (int i = 0; i < 3; ++i) (void)cct.add(trace({compiled(1, 2)}));
    return cct;
}

std::string gunzip(const std::string& data) {
    z_stream z{};
    REQUIRE(inflateInit2(&z, 15 + 16) == Z_OK);
    std::string out;
    char buffer[1 << 14];
    z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
    z.avail_in = static_cast<uInt>(data.size());
    int rc = Z_OK;
    while (rc == Z_OK) {
        z.next_out = reinterpret_cast<Bytef*>(buffer);
        z.avail_out = sizeof buffer;
        rc = inflate(&z, Z_NO_FLUSH);
        out.append(buffer, sizeof buffer - z.avail_out);
    }
    inflateEnd(&z);
    REQUIRE(rc == Z_STREAM_END);
    return out;
}

std::string temp_dir() { return sf::test::temp_dir("write"); }

std::string read_all(const std::string& path) {
    std::ifstream in(path);
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
}

}  // namespace

TEST_CASE("lost samples are carried by json, pprof and html; a whole profile shows none") {
    MethodTable names;
    names.add(method(1, "app/Main", "work"));
    const uint64_t lost = GENERATE(uint64_t{0}, uint64_t{1234});
    const Cct cct = profile_with_lost(names, lost);

    std::stringstream json;
    REQUIRE(write_json(cct, json).ok());
    Result<Cct> back = read_json(json);
    REQUIRE(back.ok());
    CHECK(back->info().lost_samples == lost);

    std::ostringstream pprof;
    REQUIRE(write_pprof(cct, pprof).ok());
    const bool pprof_says = gunzip(pprof.str()).find("1234 samples lost") != std::string::npos;
    CHECK(pprof_says == (lost != 0));

    std::ostringstream html;
    REQUIRE(write_html(cct, html).ok());
    const bool html_says = html.str().find("<span id=\"lost\" class=\"muted\">1234 samples lost</span>") != std::string::npos;
    CHECK(html_says == (lost != 0));
    CHECK((html.str().find("samples lost") != std::string::npos) == (lost != 0));
}

TEST_CASE("json written before lost counts existed reads with none lost") {
    std::istringstream old(R"({"format":"stackfrag-cct","version":1,"info":{"title":"","period_ns":0,"start_unix_ns":0,"duration_ns":0},)"
                           R"("traces":{"added":0,"incomplete":0,"failed":0,"failed_by_reason":{}},"root":{"id":0,"name":"","type":"root"}})");
    Result<Cct> back = read_json(old);
    REQUIRE(back.ok());
    CHECK(back->info().lost_samples == 0);
}

TEST_CASE("a profile written over a planted symlink replaces the link, never its target, with the mode asked for") {
    const std::string dir = temp_dir();
    const std::string target = dir + "/precious", link = dir + "/out.collapsed";
    std::ofstream(target) << "keep me\n";
    std::filesystem::create_symlink(target, link);
    MethodTable names;
    names.add(method(1, "app/Main", "work"));
    REQUIRE(write_profile(profile_with_lost(names, 0), link, {}, 0600).ok());
    CHECK(read_all(target) == "keep me\n");
    CHECK_FALSE(std::filesystem::is_symlink(link));
    CHECK(read_all(link) == "app/Main.work_[j] 3\n");
    struct stat st{};
    REQUIRE(stat(link.c_str(), &st) == 0);
    CHECK((st.st_mode & 0777) == 0600);
    std::filesystem::remove_all(dir);
}

TEST_CASE("a failed write names the file and the reason and leaves no temporary file") {
    const std::string dir = temp_dir();
    const std::string path = dir + "/big.json";
    // A file size limit stands in for a full disk: the write fails with EFBIG (SIGXFSZ ignored, as
    // the default action would end the process).
    rlimit previous{};
    REQUIRE(getrlimit(RLIMIT_FSIZE, &previous) == 0);
    struct sigaction ignore{}, old_action{};
    ignore.sa_handler = SIG_IGN;
    REQUIRE(sigaction(SIGXFSZ, &ignore, &old_action) == 0);
    rlimit small = previous;
    small.rlim_cur = 1000;
    REQUIRE(setrlimit(RLIMIT_FSIZE, &small) == 0);
    const Status status = write_file_atomically(path, [](std::ostream& out) -> Status {
        out << std::string(100'000, 'x');
        return {};
    });
    setrlimit(RLIMIT_FSIZE, &previous);
    sigaction(SIGXFSZ, &old_action, nullptr);
    REQUIRE_FALSE(status.ok());
    INFO(status.error().describe());
    CHECK(status.error().describe().find("cannot write " + path) != std::string::npos);
    CHECK(status.error().describe().find(strerror(EFBIG)) != std::string::npos);
    CHECK(std::filesystem::is_empty(dir));   // neither the file nor its temporary
    std::filesystem::remove_all(dir);
}
