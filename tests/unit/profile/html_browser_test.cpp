// Hidden ([.browser]): runs only when asked for, as the CTest test labelled "browser" does.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include <catch2/catch.hpp>

#include "profile_test_support.hpp"
#include "stackfrag/profile/export.hpp"

using namespace sf;
using namespace sf::profile;
using namespace sf::profile::testing;

namespace {

namespace fs = std::filesystem;

struct TempDir {
    fs::path path = fs::temp_directory_path() / ("sf_browser_" + std::to_string(getpid()));
    TempDir() { fs::create_directories(path); }
    ~TempDir() { fs::remove_all(path); }
};

// The DOM of `page` (a file url plus fragment) after its scripts ran, as headless Chromium dumps it.
std::string rendered_dom(const TempDir& dir, const std::string& url) {
    fs::path profile_dir = dir.path / "chromium-profile";
    fs::path out = dir.path / "dom.html";
    std::string cmd = "timeout 120 chromium --headless --no-sandbox --disable-gpu --disable-background-networking "
                      "--disable-component-update --disable-sync --no-first-run --window-size=1200,900 "
                      "--virtual-time-budget=3000 --user-data-dir='" + profile_dir.string() + "' --dump-dom '" + url +
                      "' > '" + out.string() + "' 2>/dev/null";
    int rc = std::system(cmd.c_str());
    REQUIRE(rc == 0);
    std::ifstream in(out);
    return std::string(std::istreambuf_iterator<char>(in), {});
}

// The text alternative the page keeps inside the canvas: one <li> per frame wide enough for a label.
std::string drawn_frames(const std::string& dom) {
    size_t begin = dom.find("<ol id=\"frames-text\">");
    size_t end = dom.find("</ol>", begin);
    REQUIRE(begin != std::string::npos);
    REQUIRE(end != std::string::npos);
    return dom.substr(begin, end - begin);
}

bool has_chromium() { return std::system("command -v chromium >/dev/null 2>&1") == 0; }

}  // namespace

TEST_CASE("the flame graph renders, zooms on a click and searches in headless Chromium", "[.browser]") {
    if (!has_chromium()) {
        WARN("chromium is not installed: skipping the browser check");
        return;
    }
    MethodTable names;
    names.add(method(1, "app/Main", "main"));
    names.add(method(2, "app/Main", "parseInput"));
    names.add(method(3, "app/Main", "tokenize"));
    names.add(method(4, "app/Main", "writeOutput"));
    Cct cct(&names);
    for (int i = 0; i < 60; ++i) (void)cct.add(trace({compiled(3), compiled(2), interpreted(1, 2)}));
    for (int i = 0; i < 30; ++i) (void)cct.add(trace({compiled(4), interpreted(1, 6)}));
    for (int i = 0; i < 10; ++i) (void)cct.add(trace({native("fwrite"), compiled(4), interpreted(1, 6)}));
    TempDir dir;
    std::string page = (dir.path / "small.html").string();
    REQUIRE(write_profile(cct, page, HtmlOptions{.title = "browser check"}).ok());
    std::string url = "file://" + page;

    std::string plain = rendered_dom(dir, url);
    CHECK_THAT(plain, Catch::Contains("Total: 100 samples"));
    CHECK_THAT(plain, Catch::Contains("data-zoom=\"\""));
    std::string frames = drawn_frames(plain);
    CHECK_THAT(frames, Catch::Contains("app/Main.main (100 samples)"));
    CHECK_THAT(frames, Catch::Contains("app/Main.parseInput (60 samples)"));
    CHECK_THAT(frames, Catch::Contains("app/Main.tokenize (60 samples)"));
    CHECK_THAT(frames, Catch::Contains("app/Main.writeOutput (40 samples)"));
    CHECK_THAT(frames, Catch::Contains("fwrite (10 samples)"));

    // A click on writeOutput zooms to it: its subtree fills the width, its sibling leaves the view.
    std::string clicked = rendered_dom(dir, url + "#click=app/Main.writeOutput");
    CHECK_THAT(clicked, Catch::Contains("data-zoom=\"app/Main.writeOutput\""));
    CHECK_THAT(clicked, Catch::Contains("Zoomed: app/Main.writeOutput (40.00%)"));
    std::string zoomed = drawn_frames(clicked);
    CHECK_THAT(zoomed, Catch::Contains("fwrite (10 samples)"));
    CHECK_THAT(zoomed, Catch::Contains("app/Main.main (100 samples)"));   // ancestors stay, full width
    CHECK_THAT(zoomed, !Catch::Contains("parseInput"));
    CHECK_THAT(zoomed, !Catch::Contains("tokenize"));

    std::string searched = rendered_dom(dir, url + "#search=tokenize%7Cfwrite");
    CHECK_THAT(searched, Catch::Contains("Matched: 70.00% (70 samples)"));
}

TEST_CASE("a flame graph of 100,000 distinct frames loads in headless Chromium", "[.browser]") {
    if (!has_chromium()) {
        WARN("chromium is not installed: skipping the browser check");
        return;
    }
    Cct cct;
    NodeId chain = kRootNode;
    uint64_t expected = 0;
    for (uint32_t i = 0; i < 100'000; ++i) {
        FrameDesc f;
        f.type = static_cast<FrameType>(1 + i % 6);
        f.name = "org/example/Class" + std::to_string(i) + ".run";
        // 200 chains of 500: wide and deep, with most frames far below a pixel.
        if (i % 500 == 0) chain = kRootNode;
        chain = cct.child_or_create(chain, cct.intern_frame(f), -1, 0);
        // The first chain is heavy enough to be wide and labelled; the others are slivers.
        uint64_t samples = i < 500 ? 400 : 1 + i % 3;
        cct.add_samples(chain, samples);
        expected += samples;
    }
    TempDir dir;
    std::string page = (dir.path / "large.html").string();
    REQUIRE(write_profile(cct, page).ok());
    auto started = std::chrono::steady_clock::now();
    std::string dom = rendered_dom(dir, "file://" + page);
    double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    std::printf("100,000-frame flame graph: %.1f MB, loaded and dumped by chromium in %.1f s\n",
                fs::file_size(page) / 1e6, seconds);
    std::string total = "Total: ";
    total += std::to_string(expected / 1000) + "," + std::to_string(expected % 1000 + 1000).substr(1);
    CHECK_THAT(dom, Catch::Contains(total));
    CHECK_THAT(drawn_frames(dom), Catch::Contains("org/example/Class0.run ("));
}
