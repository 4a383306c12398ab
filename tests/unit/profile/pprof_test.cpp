#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include <unistd.h>

#include <catch2/catch.hpp>
#include <protozero/pbf_reader.hpp>
#include <zlib.h>

#include "profile_test_support.hpp"
#include "stackfrag/profile/export.hpp"

using namespace sf;
using namespace sf::profile;
using namespace sf::profile::testing;

namespace {

std::string gunzip(const std::string& data) {
    z_stream z{};
    REQUIRE(inflateInit2(&z, 15 + 16) == Z_OK);   // gzip framing only: a zlib stream is an error
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

// The parts of a decoded profile.proto the checks look at.
struct Decoded {
    std::vector<std::string> strings;
    std::vector<std::pair<int64_t, int64_t>> sample_types;   // (type, unit) string indices
    struct Sample {
        std::vector<uint64_t> locations;
        std::vector<int64_t> values;
        std::vector<std::pair<int64_t, int64_t>> labels;   // (key, str)
    };
    std::vector<Sample> samples;
    std::vector<uint64_t> location_ids;
    std::map<uint64_t, std::pair<uint64_t, int64_t>> location_line;   // id -> (function, line)
    std::vector<uint64_t> function_ids;
    std::map<uint64_t, std::vector<int64_t>> function_strings;   // id -> name, system_name, filename
    std::map<uint64_t, int64_t> function_start_line;
    std::pair<int64_t, int64_t> period_type{0, 0};
    int64_t period = 0;
};

std::pair<int64_t, int64_t> value_type(protozero::pbf_reader m) {
    std::pair<int64_t, int64_t> vt{0, 0};
    while (m.next()) {
        if (m.tag() == 1) vt.first = m.get_int64();
        else if (m.tag() == 2) vt.second = m.get_int64();
        else m.skip();
    }
    return vt;
}

Decoded decode(const std::string& gz) {
    std::string body = gunzip(gz);
    Decoded d;
    protozero::pbf_reader profile(body);
    while (profile.next()) {
        switch (profile.tag()) {
            case 1: d.sample_types.push_back(value_type(profile.get_message())); break;
            case 2: {
                protozero::pbf_reader s = profile.get_message();
                Decoded::Sample sample;
                while (s.next()) {
                    if (s.tag() == 1) {
                        auto r = s.get_packed_uint64();
                        sample.locations.assign(r.begin(), r.end());
                    } else if (s.tag() == 2) {
                        auto r = s.get_packed_int64();
                        sample.values.assign(r.begin(), r.end());
                    } else if (s.tag() == 3) {
                        sample.labels.push_back(value_type(s.get_message()));   // key=1, str=2 like a ValueType
                    } else {
                        s.skip();
                    }
                }
                d.samples.push_back(sample);
                break;
            }
            case 4: {
                protozero::pbf_reader loc = profile.get_message();
                uint64_t id = 0;
                std::pair<uint64_t, int64_t> line{0, 0};
                while (loc.next()) {
                    if (loc.tag() == 1) {
                        id = loc.get_uint64();
                    } else if (loc.tag() == 4) {
                        protozero::pbf_reader l = loc.get_message();
                        while (l.next()) {
                            if (l.tag() == 1) line.first = l.get_uint64();
                            else if (l.tag() == 2) line.second = l.get_int64();
                            else l.skip();
                        }
                    } else {
                        loc.skip();
                    }
                }
                d.location_ids.push_back(id);
                d.location_line[id] = line;
                break;
            }
            case 5: {
                protozero::pbf_reader fn = profile.get_message();
                uint64_t id = 0;
                std::vector<int64_t> strings(3, 0);
                int64_t start_line = 0;
                while (fn.next()) {
                    if (fn.tag() == 1) id = fn.get_uint64();
                    else if (fn.tag() >= 2 && fn.tag() <= 4) strings[fn.tag() - 2] = fn.get_int64();
                    else if (fn.tag() == 5) start_line = fn.get_int64();
                    else fn.skip();
                }
                d.function_ids.push_back(id);
                d.function_strings[id] = strings;
                d.function_start_line[id] = start_line;
                break;
            }
            case 6: d.strings.push_back(profile.get_string()); break;
            case 11: d.period_type = value_type(profile.get_message()); break;
            case 12: d.period = profile.get_int64(); break;
            default: profile.skip();
        }
    }
    return d;
}

Cct sample_profile(const MethodTable& names) {
    Cct cct(&names, CctOptions{.per_thread = true});
    cct.set_thread_name(1, "main");
    cct.info().period_ns = 1'000'000;
    for (int i = 0; i < 6; ++i) (void)cct.add(trace({compiled(3, 2), compiled(2, 4), interpreted(1, 5)}));
    for (int i = 0; i < 3; ++i) (void)cct.add(trace({native("memcpy"), compiled(2, 4), interpreted(1, 9)}, TraceStatus::kComplete, 2));
    (void)cct.add(trace({interpreted(1, 0)}));
    return cct;
}

MethodTable sample_names() {
    MethodTable names;
    names.add(method(1, "app/Main", "main", "([Ljava/lang/String;)V", {{0, 10}, {5, 11}, {9, 12}}, "Main.java"));
    names.add(method(2, "app/Main", "hotWork", "()I", {{0, 20}, {4, 21}}, "Main.java"));
    names.add(method(3, "app/util/Maths", "hotLeaf", "(J)J", {{0, 30}}, "Maths.java"));
    return names;
}

}  // namespace

TEST_CASE("pprof output decodes: string 0 empty, ids 1..N, sample types, leaf-first locations") {
    MethodTable names = sample_names();
    Cct cct = sample_profile(names);
    std::ostringstream out;
    REQUIRE(write_pprof(cct, out).ok());
    Decoded d = decode(out.str());

    REQUIRE(!d.strings.empty());
    CHECK(d.strings[0].empty());
    auto str = [&](int64_t i) { return d.strings.at(static_cast<size_t>(i)); };
    REQUIRE(d.sample_types.size() == 2);
    CHECK(str(d.sample_types[0].first) == "samples");
    CHECK(str(d.sample_types[0].second) == "count");
    CHECK(str(d.sample_types[1].first) == "cpu");
    CHECK(str(d.sample_types[1].second) == "nanoseconds");
    CHECK(str(d.period_type.first) == "cpu");
    CHECK(d.period == 1'000'000);
    for (size_t i = 0; i < d.location_ids.size(); ++i) CHECK(d.location_ids[i] == i + 1);
    for (size_t i = 0; i < d.function_ids.size(); ++i) CHECK(d.function_ids[i] == i + 1);
    CHECK(d.function_ids.size() == 4);   // main, hotWork, hotLeaf, memcpy

    std::map<std::string, uint64_t> function_by_name;
    for (auto& [id, s] : d.function_strings) function_by_name[str(s[0])] = id;
    REQUIRE(function_by_name.count("app/util/Maths.hotLeaf"));
    uint64_t leaf_fn = function_by_name["app/util/Maths.hotLeaf"];
    CHECK(str(d.function_strings[leaf_fn][1]) == "app/util/Maths.hotLeaf(J)J");
    CHECK(str(d.function_strings[leaf_fn][2]) == "app/util/Maths.java");
    CHECK(d.function_start_line[leaf_fn] == 30);

    int64_t total_samples = 0, total_cpu = 0;
    bool saw_leaf_sample = false;
    for (const auto& s : d.samples) {
        REQUIRE(s.values.size() == 2);
        total_samples += s.values[0];
        total_cpu += s.values[1];
        CHECK(s.values[1] == s.values[0] * 1'000'000);
        for (uint64_t loc : s.locations) CHECK((loc >= 1 && loc <= d.location_ids.size()));
        REQUIRE(s.labels.size() == 1);
        CHECK(str(s.labels[0].first) == "thread");
        if (s.values[0] == 6) {
            saw_leaf_sample = true;
            REQUIRE(s.locations.size() == 3);
            // Leaf first; a caller's line is where it called the next frame.
            CHECK(d.location_line[s.locations[0]].first == leaf_fn);
            CHECK(d.location_line[s.locations[1]] == std::make_pair(function_by_name["app/Main.hotWork"], int64_t{21}));
            CHECK(d.location_line[s.locations[2]] == std::make_pair(function_by_name["app/Main.main"], int64_t{11}));
            CHECK(str(s.labels[0].second) == "[main tid=1]");
        }
    }
    CHECK(saw_leaf_sample);
    CHECK(total_samples == 10);
    CHECK(total_cpu == 10'000'000);
}

TEST_CASE("pprof without a period or weights has only the samples type") {
    MethodTable names = sample_names();
    Cct cct(&names);
    (void)cct.add(trace({compiled(2), compiled(1)}));
    std::ostringstream out;
    REQUIRE(write_pprof(cct, out).ok());
    Decoded d = decode(out.str());
    REQUIRE(d.sample_types.size() == 1);
    CHECK(d.strings.at(static_cast<size_t>(d.sample_types[0].first)) == "samples");
    REQUIRE(d.samples.size() == 1);
    CHECK(d.samples[0].values == std::vector<int64_t>{1});
}

TEST_CASE("go tool pprof reads the profile and ranks the hot functions") {
    if (std::system("command -v go >/dev/null 2>&1") != 0) {
        WARN("go is not installed (scripts/setup.sh installs golang-go): skipping the go tool pprof check");
        return;
    }
    MethodTable names = sample_names();
    Cct cct = sample_profile(names);
    auto dir = std::filesystem::temp_directory_path() / ("sf_pprof_" + std::to_string(getpid()));
    std::filesystem::create_directories(dir);
    std::string path = (dir / "cpu.pb.gz").string();
    REQUIRE(write_profile(cct, path).ok());
    std::string output_path = (dir / "top.txt").string();
    // GOCACHE/HOME point into the temp dir: go wants a writable cache even for `go tool`.
    std::string cmd = "cd '" + dir.string() + "' && HOME='" + dir.string() + "' GOCACHE='" + dir.string() +
                      "/gocache' GOFLAGS= go tool pprof -top -sample_index=samples '" + path + "' > '" + output_path +
                      "' 2>&1";
    int rc = std::system(cmd.c_str());
    std::ifstream in(output_path);
    std::stringstream top;
    top << in.rdbuf();
    INFO(top.str());
    REQUIRE(rc == 0);
    CHECK_THAT(top.str(), Catch::Contains("app/util/Maths.hotLeaf"));
    CHECK_THAT(top.str(), Catch::Contains("memcpy"));
    CHECK_THAT(top.str(), Catch::Contains("app/Main.hotWork"));
    // hotLeaf has 6 of 10 samples flat, ahead of memcpy's 3.
    CHECK(top.str().find("app/util/Maths.hotLeaf") < top.str().find("memcpy"));
    std::filesystem::remove_all(dir);
}
