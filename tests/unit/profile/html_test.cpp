#include <chrono>
#include <cstdio>
#include <sstream>

#include <catch2/catch.hpp>

#include "profile_test_support.hpp"
#include "stackfrag/profile/export.hpp"

using namespace sf;
using namespace sf::profile;
using namespace sf::profile::testing;

namespace {

size_t occurrences(const std::string& text, const std::string& what) {
    size_t n = 0;
    for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
    return n;
}

}  // namespace

TEST_CASE("the html flame graph is one self-contained page with the frames, title and total") {
    MethodTable names;
    names.add(method(1, "app/Main", "main"));
    names.add(method(2, "app/Main", "renderPage"));
    names.add(method(3, "evil</script><b>", "x"));
    Cct cct(&names);
    for (int i = 0; i < 41; ++i) (void)cct.add(trace({compiled(2), interpreted(1, 3)}));
    (void)cct.add(trace({native("https://example.invalid/x"), interpreted(1, 3)}));
    (void)cct.add(trace({compiled(3), interpreted(1, 3)}));
    std::ostringstream out;
    REQUIRE(write_html(cct, out, HtmlOptions{.title = "My <app> profile"}).ok());
    std::string page = out.str();

    CHECK(page.rfind("<!DOCTYPE html>", 0) == 0);
    CHECK(page.size() > 20);
    CHECK(page.substr(page.size() - 8) == "</html>\n");
    CHECK(occurrences(page, "<script") == 1);
    CHECK(occurrences(page, "</script>") == 1);   // the frame name cannot close the script
    CHECK(occurrences(page, "<style>") == 1);
    CHECK(page.find("<script src") == std::string::npos);
    CHECK(page.find("<link") == std::string::npos);
    CHECK(page.find("http://") == std::string::npos);
    CHECK(page.find("https://") == std::string::npos);   // not even from a frame name
    CHECK(page.find("<title>My &lt;app&gt; profile</title>") != std::string::npos);
    CHECK(page.find("\"app/Main.main\"") != std::string::npos);
    CHECK(page.find("\"app/Main.renderPage\"") != std::string::npos);
    // The root's total is the first node's count in the embedded data.
    CHECK(page.find("\"N\":[0,43,1,0,") != std::string::npos);
}

TEST_CASE("a flame graph of 100,000 distinct frames is written") {
    Cct cct;
    const uint32_t frames = 100'000;
    std::vector<NodeId> nodes{kRootNode};
    for (uint32_t i = 0; i < frames; ++i) {
        FrameDesc f;
        f.type = static_cast<FrameType>(1 + i % 6);
        f.name = "org/example/pkg" + std::to_string(i % 97) + "/Class" + std::to_string(i) + ".method" +
                 std::to_string(i % 13);
        // Parents spread over earlier nodes give a tree both wide and about 20 deep.
        NodeId parent = nodes[(static_cast<uint64_t>(i) * 2654435761u % (nodes.size())) / (i % 3 == 0 ? 1 : 2)];
        if (cct.node(parent).depth > 40) parent = kRootNode;
        NodeId id = cct.child_or_create(parent, cct.intern_frame(f), -1, 0);
        nodes.push_back(id);
        cct.add_samples(id, 1 + i % 5);
    }
    REQUIRE(cct.frame_count() == frames + 1);
    auto started = std::chrono::steady_clock::now();
    std::ostringstream out;
    REQUIRE(write_html(cct, out).ok());
    double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - started).count();
    std::string page = out.str();
    CHECK(page.find("org/example/pkg" + std::to_string(99998 % 97) + "/Class99998.method") != std::string::npos);
    std::printf("html flame graph of %u frames / %zu nodes: %.1f MB in %.0f ms\n", frames, cct.node_count(),
                page.size() / 1e6, ms);
}
