// Writing a Cct in the formats profiler users already have tools for (collapsed stacks, an html
// flame graph, pprof, the CCT as json, JFR) and reading collapsed and json back into a Cct.
#pragma once

#include <sys/types.h>

#include <functional>
#include <istream>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include "stackfrag/base/result.hpp"
#include "stackfrag/profile/cct.hpp"

namespace sf::profile {

// Which count the collapsed and html outputs show.
enum class Counter : uint8_t {
    kSamples,   // number of samples
    kWeight,    // sum of the weights passed to Cct::add (ns)
};

// The name a frame has in collapsed stacks and the flame graph: FrameDesc::name plus a suffix
// saying how the frame ran, as async-profiler writes it: "_[j]" compiled and native wrappers (both
// JIT code), "_[i]" inlined, "_[0]" interpreted. Native, stub, thread and "[truncated]" frames
// have no suffix, so native symbols read the same as in perf and async-profiler output; neither
// have Java frames of unknown kind (mode=jvmti), as no suffix would be true for them.
std::string collapsed_frame_name(const FrameDesc& frame);

// Collapsed ("folded") stacks, the input of flamegraph.pl, speedscope and async-profiler's
// converters: one line per distinct stack, root first, frames joined by ';', then a space and the
// count. Lines are sorted by stack text; nodes whose stack texts are equal (e.g. one callee from
// two call sites) are summed into one line. Stacks with a zero count and the root's own samples
// (traces without frames) are left out.
// kAuto writes that order by a walk over the tree (no whole line is built twice or compared);
// kFullSort builds every line and sorts them, the reference the walk must equal byte for byte
// (and what kAuto does when a frame name is empty or holds ';').
enum class CollapsedOrder { kAuto, kFullSort };
Status write_collapsed(const Cct& cct, std::ostream& out, Counter counter = Counter::kSamples,
                       CollapsedOrder order = CollapsedOrder::kAuto);

// Reads collapsed stacks into a new Cct: "_[j]"/"_[1]" compiled, "_[i]" inlined, "_[0]"
// interpreted; "[... tid=N]" as the first frame is a thread frame, "[truncated]" the truncated
// marker, anything else native (so stub frames come back as native, and native wrappers as
// compiled). Blank lines and lines starting with '#' are skipped. Call sites are not in the
// format, so every node's call_bci is -1.
Result<Cct> read_collapsed(std::istream& in);

struct HtmlOptions {
    std::string title;        // empty: the Cct's info().title, else "stackfrag flame graph"
    Counter counter = Counter::kSamples;
};

// One self-contained html page (inline script and style, no network) with an interactive flame
// graph drawn on a canvas: click zooms, search highlights and shows the matched share, colours
// say the frame type. The page honours "#zoom=<frame name>&search=<text>&click=<frame name>" in
// its url (click: a synthetic click on the widest frame of that name, for headless checks).
Status write_html(const Cct& cct, std::ostream& out, const HtmlOptions& options = {});

// pprof's profile.proto, gzip-compressed (what `go tool pprof` and most pprof viewers read).
// Sample types: samples/count, and cpu/nanoseconds when the Cct has weights (their sum) or a
// known period (samples x period). Thread frames become a "thread" label instead of a frame.
Status write_pprof(const Cct& cct, std::ostream& out);

// A JDK Flight Recorder recording (docs/jfr-format.md) that `jfr print`, JDK Mission Control and
// IntelliJ open: one jdk.ExecutionSample event per sample (stackfrag.OffCpuSample when
// info().off_cpu) with its stack trace, thread and time when the tree kept its samples
// (CctOptions::keep_samples: replay, report of a recording, the agent with file=*.jfr); else one
// event per count of each node, at synthetic times one period apart. "[truncated]" sets the stack
// trace's truncated flag; a per-thread tree's thread frames become the events' threads.
Status write_jfr(const Cct& cct, std::ostream& out);

// The Cct as json, keeping node ids, call sites, counts, trace counts and ProfileInfo:
// {"format":"stackfrag-cct","version":1, "info":{...}, "traces":{...}, "root":NODE} where NODE is
// {"id","name","type","signature","file","first_line","call_bci","call_line","self","total",
//  "self_weight","total_weight","children":[NODE...]} (empty/zero members are left out).
Status write_json(const Cct& cct, std::ostream& out);

// Reads write_json's output back; node ids stay the same. Per-thread trees come back with
// options().per_thread false (the thread frames are still there).
Result<Cct> read_json(std::istream& in);

// The formats write_profile and read_profile know, by file name ending.
enum class ProfileFormat : uint8_t { kCollapsed, kHtml, kPprof, kJson, kJfr };

// One row per output format: the file endings that pick it, what it is (for help texts), how it is
// written, and how it is read back (null when stackfrag does not read it). format_for_path, the
// agent's file= option, the CLI's help, the off-CPU file name and `report` all go by this table, so
// a new format is one new row in profile_file.cpp.
struct OutputFormat {
    ProfileFormat format;
    std::vector<std::string_view> endings;   // ".collapsed", ".folded"; matched at the path's end
    std::string_view description;
    Status (*write)(const Cct& cct, std::ostream& out, const HtmlOptions& options);
    Result<Cct> (*read)(std::istream& in);
};
const std::vector<OutputFormat>& output_formats();

// The row whose ending `path` has, or null.
const OutputFormat* output_format_of(std::string_view path);
// The length of the format ending `path` has (".pb.gz": 6), 0 when none.
size_t format_ending_size(std::string_view path);
// ".collapsed", ".folded", ".html", ".pb.gz", ".json", ".jfr"; an error naming the accepted ones otherwise.
Result<ProfileFormat> format_for_path(std::string_view path);
// The accepted endings, for messages and --help: ".collapsed, .folded, .html, .pb.gz, .json, .jfr".
const char* accepted_profile_extensions();
// The same as a phrase: ".collapsed, .folded, .html, .pb.gz or .json".
const char* accepted_profile_extensions_phrase();

// Writes the format `path` ends with to a temporary file in the same directory, then renames it
// over `path`, so readers never see a half-written profile. The file gets `mode` (the agent: 0600),
// else 0666 less the umask. The temporary is created with O_EXCL and written through its
// descriptor, and rename replaces a symlink at `path` rather than following it: a link planted in
// a shared directory cannot redirect the write. Errors name `path` and the reason (errno).
Status write_profile(const Cct& cct, const std::string& path, const HtmlOptions& html = {},
                     std::optional<mode_t> mode = std::nullopt);

// Writes whatever `produce` puts into the stream to `path` the same atomic way.
Status write_file_atomically(const std::string& path, const std::function<Status(std::ostream&)>& produce,
                             std::optional<mode_t> mode = std::nullopt);

// Reads a .json (write_json) or .collapsed/.folded file.
Result<Cct> read_profile(const std::string& path);

}  // namespace sf::profile
