// The live profile's off-CPU side without a JVM: context-switch samples (SampleSource::kPerfSwitch)
// go to their own tree and file (".offcpu" before the extension), the summary counts them apart,
// and the on_trace hook (interval=auto) sees every trace.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "../decoder/synthetic.hpp"
#include "live_profile.hpp"
#include "stackfrag/profile/export.hpp"

using namespace sf;
using namespace sf::test;
using sf::agent::LiveProfile;
using sf::agent::LiveSettings;

namespace {

// A complete interpreted chain T.m2@3 -> T.m1@11 (as live_profile_test.cpp builds it).
Sample chain_sample(const World& w, uint64_t time, SampleSource source) {
    FakeStack s;
    const uint64_t fp_a = s.at(0x100), fp_b = s.at(0x300), fp_stub = s.at(0x500);
    w.interp_frame(s, fp_a, 1, bcp(1, 14), fp_a + 32, kInterpReturnPc, fp_b);
    w.interp_frame(s, fp_b, 2, bcp(2, 3), fp_b + 16, kCallStubReturn, fp_stub, fp_a + 32);
    w.entry_frame(s, fp_stub);
    Sample smp = sample_of(s, kInterpBodyPc, s.at(0), fp_a, time);
    smp.regs.r13 = bcp(1, 11);
    smp.source = source;
    return smp;
}

std::vector<Event> stream_of(const World& w, int on_cpu, int off_cpu) {
    std::vector<Event> out;
    VmInfo vm = w.map.vm();
    vm.sample_period_ns = 1'000'000;
    out.emplace_back(vm);
    for (int i = 0; i < 16; ++i) out.emplace_back(*w.map.method_by_id(method_id(i)));
    uint64_t t = 1000;
    for (int i = 0; i < on_cpu; ++i) out.emplace_back(chain_sample(w, t++, SampleSource::kPerf));
    for (int i = 0; i < off_cpu; ++i) out.emplace_back(chain_sample(w, t++, SampleSource::kPerfSwitch));
    return out;
}

std::string collapsed(const profile::Cct& cct) {
    std::ostringstream out;
    REQUIRE(profile::write_collapsed(cct, out).ok());
    return out.str();
}

std::string read_all(const std::string& path) {
    std::ifstream in(path);
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
}

}  // namespace

TEST_CASE("the off-CPU profile's file name has .offcpu before the format's extension") {
    CHECK(agent::off_cpu_path("/tmp/profile.html") == "/tmp/profile.offcpu.html");
    CHECK(agent::off_cpu_path("p.collapsed") == "p.offcpu.collapsed");
    CHECK(agent::off_cpu_path("/x/p.pb.gz") == "/x/p.offcpu.pb.gz");
    CHECK(agent::off_cpu_path("/a.b/noext") == "/a.b/noext.offcpu");
}

TEST_CASE("switch samples go to the off-CPU tree and file, counted apart from the on-CPU ones") {
    World w;
    char pattern[] = "/tmp/sf-offcpu-XXXXXX";
    REQUIRE(mkdtemp(pattern) != nullptr);
    const std::string dir = pattern;
    LiveSettings settings;
    settings.decoder.decoder = test_options();
    settings.file = dir + "/p.collapsed";
    settings.off_cpu = true;
    uint64_t hooked = 0, decode_ns = 0;
    settings.on_trace = [&hooked, &decode_ns](const Event&, const CallTrace&, uint64_t ns) {
        ++hooked;
        decode_ns += ns;
    };
    LiveProfile live(std::move(settings));
    for (const Event& e : stream_of(w, 3, 2)) live.observe(e);
    while (live.poll_once()) {
    }
    CHECK(collapsed(live.cct()) == "T.m2_[0];T.m1_[0] 3\n");
    CHECK(collapsed(live.off_cpu_cct()) == "T.m2_[0];T.m1_[0] 2\n");
    CHECK(live.off_cpu_cct().total_weight() == 0);   // counts, not time
    CHECK(hooked == 5);
    CHECK(decode_ns > 0);   // interval=auto's hook gets each decode's time (the stream times them for it)
    const agent::LiveCounts counts = live.counts();
    CHECK(counts.samples == 3);
    CHECK(counts.decoded == 3);
    CHECK(counts.off_cpu_samples == 2);
    CHECK(counts.off_cpu_decoded == 2);
    CHECK(live.summary_text().find("off-CPU: 2 context switches sampled") != std::string::npos);

    live.stop(5000);
    CHECK(read_all(dir + "/p.collapsed") == "T.m2_[0];T.m1_[0] 3\n");
    CHECK(read_all(dir + "/p.offcpu.collapsed") == "T.m2_[0];T.m1_[0] 2\n");
    std::filesystem::remove_all(dir);
}

TEST_CASE("without events=switch and without switch samples no off-CPU file is written") {
    World w;
    char pattern[] = "/tmp/sf-offcpu-XXXXXX";
    REQUIRE(mkdtemp(pattern) != nullptr);
    const std::string dir = pattern;
    LiveSettings settings;
    settings.decoder.decoder = test_options();
    settings.file = dir + "/p.collapsed";
    LiveProfile live(std::move(settings));
    for (const Event& e : stream_of(w, 2, 0)) live.observe(e);
    live.stop(5000);
    CHECK(std::filesystem::exists(dir + "/p.collapsed"));
    CHECK_FALSE(std::filesystem::exists(dir + "/p.offcpu.collapsed"));
    CHECK(live.summary_text().find("off-CPU") == std::string::npos);
    std::filesystem::remove_all(dir);
}
