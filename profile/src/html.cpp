#include <unordered_map>

#include <fmt/format.h>

#include "stackfrag/profile/export.hpp"
#include "text_util.hpp"

namespace sf::profile {
namespace {

// The page before the title text.
constexpr std::string_view kPageStart = R"HTML(<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>)HTML";

constexpr std::string_view kStyle = R"HTML(</title>
<style>
  body { margin: 0; font: 13px system-ui, sans-serif; background: #fafafa; color: #222; }
  header { position: sticky; top: 0; z-index: 2; background: #fafafaee; padding: 6px 10px;
           border-bottom: 1px solid #ddd; display: flex; flex-wrap: wrap; gap: 6px 14px; align-items: center; }
  h1 { font-size: 16px; margin: 0; }
  #search { width: 18em; }
  .legend span { display: inline-block; padding: 0 6px; margin-right: 3px; border-radius: 3px; font-size: 11px; }
  #graph { position: relative; padding: 0 10px; }
  canvas { display: block; width: 100%; }
  #tooltip { position: fixed; pointer-events: none; display: none; background: #fffffe; border: 1px solid #999;
             padding: 4px 7px; border-radius: 3px; box-shadow: 1px 2px 6px #0003; max-width: 60em;
             word-break: break-all; z-index: 3; }
  #tooltip b { font-family: monospace; }
  .muted { color: #666; }
</style>
</head>
<body>
<header>
  <h1 id="title">)HTML";

constexpr std::string_view kTitleEnd = "</h1>";
constexpr std::string_view kBody = R"HTML(
  <span id="total" class="muted"></span>
  <input id="search" type="search" placeholder="Search (regular expression)" title="Highlights matching frames">
  <span id="matched" class="muted"></span>
  <button id="reset" type="button" title="Show all frames (Esc)">Reset zoom</button>
  <span id="zoom-info" class="muted"></span>
  <span class="legend" id="legend"></span>
</header>
<div id="graph">
  <canvas id="canvas"><ol id="frames-text"></ol></canvas>
</div>
<div id="tooltip"></div>
<script>
"use strict";
const PROFILE = )HTML";

// The viewer. Data layout: S = strings; F = per frame [name index, type]; N = per node in
// depth-first pre-order [frame, total, child count, call line], children right after their parent.
constexpr std::string_view kScript = R"HTML(;
(function () {
  const TYPE_NAMES = ["root", "interpreted", "compiled", "inlined", "native wrapper", "native", "stub", "thread", "truncated", "java", "failed"];
  // hue, saturation: one family per frame type so they stay apart whatever the shade.
  const TYPE_COLOURS = [[0, 0], [48, 85], [110, 55], [185, 60], [280, 45], [12, 75], [0, 0], [215, 60], [0, 0], [140, 40], [330, 85]];
  const ROW = 16, FONT = "12px monospace", MIN_WIDTH = 0.5, LABEL_MIN = 24, TEXT_LIST_MAX = 400;

  const S = PROFILE.S, F = PROFILE.F, N = PROFILE.N;
  const count = N.length / 4;
  const frameOf = new Int32Array(count), total = new Float64Array(count), self = new Float64Array(count);
  const line = new Int32Array(count), depth = new Int32Array(count), parent = new Int32Array(count);
  const start = new Float64Array(count), end = new Int32Array(count);
  let maxDepth = 0;
  {
    const open = [];   // ancestors still expecting children: {node, left, x}
    for (let i = 0; i < count; i++) {
      frameOf[i] = N[4 * i]; total[i] = N[4 * i + 1]; line[i] = N[4 * i + 3]; self[i] = total[i];
      const kids = N[4 * i + 2];
      if (open.length > 0) {
        const top = open[open.length - 1];
        parent[i] = top.node; start[i] = top.x; top.x += total[i]; top.left--;
        self[top.node] -= total[i];
        depth[i] = open.length;
      } else {
        parent[i] = -1; start[i] = 0; depth[i] = 0;
      }
      if (depth[i] > maxDepth) maxDepth = depth[i];
      if (kids > 0) {
        open.push({node: i, left: kids, x: start[i]});
      } else {
        end[i] = i + 1;
        while (open.length > 0 && open[open.length - 1].left === 0) end[open.pop().node] = i + 1;
      }
    }
  }
  const nameOf = (i) => S[F[2 * frameOf[i]]];
  const typeOf = (i) => F[2 * frameOf[i] + 1];

  const canvas = document.getElementById("canvas"), ctx = canvas.getContext("2d");
  const tooltip = document.getElementById("tooltip"), searchBox = document.getElementById("search");
  const framesText = document.getElementById("frames-text");
  const unit = PROFILE.unit, grand = count > 0 ? total[0] : 0;
  document.getElementById("total").textContent = "Total: " + grand.toLocaleString("en-US") + " " + unit;

  let zoom = 0, matches = null, width = 0, height = 0;

  function colour(i) {
    const type = typeOf(i), hs = TYPE_COLOURS[type] || [0, 0];
    // A stable per-name shade so neighbours with the same type are still told apart.
    let h = 0; const name = nameOf(i);
    for (let k = 0; k < name.length; k += 3) h = (h * 31 + name.charCodeAt(k)) & 0xffff;
    const light = (type === 6 || type === 8 || type === 0 ? 72 : type === 10 ? 45 : 58) + (h % 18);
    return "hsl(" + (hs[0] + (h % 12) - 6) + "," + hs[1] + "%," + light + "%)";
  }

  function legend() {
    const el = document.getElementById("legend");
    for (let t = 1; t < TYPE_NAMES.length; t++) {
      const span = document.createElement("span");
      const hs = TYPE_COLOURS[t];
      span.style.background = "hsl(" + hs[0] + "," + hs[1] + "%," + (t === 6 || t === 8 ? 78 : 66) + "%)";
      span.textContent = TYPE_NAMES[t];
      el.appendChild(span);
    }
    const m = document.createElement("span"); m.style.background = "#ee66ee"; m.textContent = "search match";
    el.appendChild(m);
  }

  function rowTop(d) { return height - (d + 1) * ROW; }   // root at the bottom, callees above

  function layout() {
    width = canvas.parentElement.clientWidth - 20;
    height = (maxDepth + 1) * ROW + 4;
    const ratio = window.devicePixelRatio || 1;
    canvas.width = Math.max(1, Math.floor(width * ratio));
    canvas.height = Math.floor(height * ratio);
    canvas.style.height = height + "px";
    ctx.setTransform(ratio, 0, 0, ratio, 0, 0);
  }

  // Walks the nodes visible at the current zoom and calls fn(i, x, w) for each; subtrees that
  // lie outside the zoomed range or are narrower than MIN_WIDTH pixels are skipped whole.
  function forVisible(fn) {
    if (count === 0) return;
    const viewStart = start[zoom], viewEnd = start[zoom] + total[zoom], scale = width / total[zoom];
    for (let i = 0; i < count;) {
      const a = Math.max(start[i], viewStart), b = Math.min(start[i] + total[i], viewEnd);
      const w = (b - a) * scale;
      if (b <= a || w < MIN_WIDTH) { i = end[i]; continue; }
      fn(i, (a - viewStart) * scale, w);
      i++;
    }
  }

  function draw() {
    layout();
    ctx.clearRect(0, 0, width, height);
    ctx.font = FONT; ctx.textBaseline = "middle";
    const charWidth = ctx.measureText("M").width || 7;
    const listed = [];
    forVisible((i, x, w) => {
      const y = rowTop(depth[i]);
      const outside = depth[i] < depth[zoom];
      ctx.globalAlpha = outside ? 0.55 : 1;
      ctx.fillStyle = matches && matches[frameOf[i]] ? "#ee66ee" : colour(i);
      ctx.fillRect(x, y, Math.max(w - 0.5, 0.5), ROW - 1);
      if (w >= LABEL_MIN) {
        const fit = Math.floor((w - 6) / charWidth), name = nameOf(i);
        const text = name.length <= fit ? name : name.slice(0, Math.max(fit - 2, 0)) + "..";
        ctx.fillStyle = "#000";
        ctx.fillText(text, x + 3, y + ROW / 2);
        if (listed.length < TEXT_LIST_MAX) listed.push(i);
      }
    });
    ctx.globalAlpha = 1;
    // The same frames as text, for screen readers, find-in-page and tests that read the DOM.
    const items = listed.map((i) => {
      const li = document.createElement("li");
      li.dataset.depth = depth[i];
      li.textContent = nameOf(i) + " (" + total[i] + " " + unit + ")";
      return li;
    });
    framesText.replaceChildren(...items);
    const zoomed = zoom !== 0;
    document.body.dataset.zoom = zoomed ? nameOf(zoom) : "";
    document.getElementById("zoom-info").textContent = zoomed
      ? "Zoomed: " + nameOf(zoom) + " (" + percent(total[zoom]) + ")" : "";
  }

  function percent(v) { return grand > 0 ? (100 * v / grand).toFixed(2) + "%" : "0%"; }

  function nodeAt(px, py) {
    if (count === 0) return -1;
    const d = Math.floor((height - py) / ROW);
    if (d < 0 || d > maxDepth) return -1;
    const viewStart = start[zoom], scale = width / total[zoom];
    const s = viewStart + px / scale;
    let at = 0;
    if (s < start[0] || s >= start[0] + total[0]) return -1;
    while (depth[at] < d) {
      let next = -1;
      for (let c = at + 1; c < end[at]; c = end[c]) {
        if (s >= start[c] && s < start[c] + total[c]) { next = c; break; }
      }
      if (next < 0) return -1;
      at = next;
    }
    const visibleWidth = Math.min(total[at], total[zoom]) * scale;
    return visibleWidth >= MIN_WIDTH ? at : -1;
  }

  function setHash() {
    const parts = [];
    if (zoom !== 0) parts.push("zoom=" + encodeURIComponent(nameOf(zoom)));
    if (searchBox.value) parts.push("search=" + encodeURIComponent(searchBox.value));
    history.replaceState(null, "", parts.length ? "#" + parts.join("&") : location.pathname + location.search);
  }

  function zoomTo(i) { zoom = i; draw(); setHash(); }

  function search(text) {
    const box = document.getElementById("matched");
    if (!text) { matches = null; box.textContent = ""; draw(); return; }
    let re = null;
    try { re = new RegExp(text); } catch (e) { re = null; }
    matches = new Uint8Array(F.length / 2);
    for (let f = 0; f < matches.length; f++) {
      const name = S[F[2 * f]];
      matches[f] = re ? re.test(name) : name.includes(text);
    }
    // A matched frame counts once with its subtree, even when it calls itself again.
    let matched = 0;
    for (let i = 0; i < count;) {
      if (matches[frameOf[i]]) { matched += total[i]; i = end[i]; } else i++;
    }
    box.textContent = "Matched: " + percent(matched) + " (" + matched.toLocaleString("en-US") + " " + unit + ")";
    draw();
  }

  function showTooltip(i, ev) {
    if (i < 0) { tooltip.style.display = "none"; return; }
    const rows = [
      ["b", nameOf(i)],
      ["div", TYPE_NAMES[typeOf(i)] + (line[i] > 0 ? ", called at line " + line[i] + " of its caller" : "")],
      ["div", total[i].toLocaleString("en-US") + " " + unit + " (" + percent(total[i]) + ")" +
              (zoom !== 0 ? ", " + (100 * total[i] / total[zoom]).toFixed(2) + "% of zoomed" : "")],
      ["div", "self: " + self[i].toLocaleString("en-US") + " " + unit + " (" + percent(self[i]) + ")"],
    ];
    tooltip.replaceChildren(...rows.map(([tag, text]) => {
      const el = document.createElement(tag); el.textContent = text; return el;
    }));
    tooltip.style.display = "block";
    const x = Math.min(ev.clientX + 12, window.innerWidth - tooltip.offsetWidth - 4);
    const y = ev.clientY + 16 + tooltip.offsetHeight > window.innerHeight
      ? ev.clientY - tooltip.offsetHeight - 8 : ev.clientY + 16;
    tooltip.style.left = Math.max(0, x) + "px"; tooltip.style.top = y + "px";
  }

  function position(ev) { const r = canvas.getBoundingClientRect(); return [ev.clientX - r.left, ev.clientY - r.top]; }

  canvas.addEventListener("mousemove", (ev) => { const [x, y] = position(ev); showTooltip(nodeAt(x, y), ev); });
  canvas.addEventListener("mouseleave", () => { tooltip.style.display = "none"; });
  canvas.addEventListener("click", (ev) => { const [x, y] = position(ev); const i = nodeAt(x, y); if (i >= 0) zoomTo(i); });
  document.getElementById("reset").addEventListener("click", () => zoomTo(0));
  document.addEventListener("keydown", (ev) => { if (ev.key === "Escape") zoomTo(0); });
  let pending = 0;
  searchBox.addEventListener("input", () => {
    clearTimeout(pending);
    pending = setTimeout(() => { search(searchBox.value); setHash(); }, 150);
  });
  window.addEventListener("resize", () => draw());

  // "#zoom=NAME&search=TEXT": zooms to the widest node of that name, as a click on it would.
  function applyHash() {
    const params = {};
    for (const part of location.hash.replace(/^#/, "").split("&")) {
      const eq = part.indexOf("=");
      if (eq > 0) params[part.slice(0, eq)] = decodeURIComponent(part.slice(eq + 1));
    }
    zoom = 0;
    if (params.zoom) {
      let best = -1;
      for (let i = 0; i < count; i++) if (nameOf(i) === params.zoom && (best < 0 || total[i] > total[best])) best = i;
      if (best >= 0) zoom = best;
    }
    searchBox.value = params.search || "";
    search(searchBox.value);
    // "#click=NAME" clicks the middle of the widest frame of that name, through the same hit test
    // a mouse click takes (for checking the page in a headless browser).
    if (params.click) {
      let best = -1;
      forVisible((i) => { if (nameOf(i) === params.click && (best < 0 || total[i] > total[best])) best = i; });
      if (best >= 0) {
        const r = canvas.getBoundingClientRect(), scale = width / total[zoom];
        const x = (Math.max(start[best], start[zoom]) - start[zoom]) * scale + Math.min(total[best], total[zoom]) * scale / 2;
        canvas.dispatchEvent(new MouseEvent("click", {clientX: r.left + x, clientY: r.top + rowTop(depth[best]) + ROW / 2}));
      }
    }
  }

  legend();
  applyHash();
  window.scrollTo(0, document.body.scrollHeight);
})();
</script>
</body>
</html>
)HTML";

// A number in decimal at the end of `out`: the page lists five per node, and a format string
// parsed for each made the final write of a large tree cost the decoder thread milliseconds.
template <typename Integer>
void append_decimal(std::string& out, Integer value) {
    const fmt::format_int text(value);
    out.append(text.data(), text.size());
}

}  // namespace

Status write_html(const Cct& cct, std::ostream& out, const HtmlOptions& options) {
    std::string title = !options.title.empty()        ? options.title
                        : !cct.info().title.empty() ? cct.info().title
                                                    : std::string("stackfrag flame graph");
    std::string page;
    page.append(kPageStart).append(html_escape(title)).append(kStyle).append(html_escape(title)).append(kTitleEnd);
    // A subtitle, so a flame graph with holes does not pass for a whole one.
    if (cct.info().lost_samples != 0) {
        fmt::format_to(std::back_inserter(page), "\n  <span id=\"lost\" class=\"muted\">{} samples lost</span>",
                       cct.info().lost_samples);
    }
    page.append(kBody);

    // Only frames some node uses get into the page, and each name string once.
    std::vector<int64_t> frame_index(cct.frame_count(), -1);
    std::vector<FrameId> frames;
    std::string nodes;
    nodes.reserve(cct.node_count() * 12);
    bool first = true;
    cct.visit([&](NodeId id, const Node& n) {
        uint64_t value = options.counter == Counter::kSamples ? n.total_samples : n.total_weight;
        if (frame_index[n.frame] < 0) {
            frame_index[n.frame] = static_cast<int64_t>(frames.size());
            frames.push_back(n.frame);
        }
        if (!first) nodes.push_back(',');
        append_decimal(nodes, frame_index[n.frame]);
        nodes.push_back(',');
        append_decimal(nodes, value);
        nodes.push_back(',');
        append_decimal(nodes, cct.children(id).size());
        nodes.push_back(',');
        append_decimal(nodes, n.call_line);
        first = false;
    });
    // Nodes with a zero count would still be laid out with zero width; keeping them keeps the
    // child counts right.
    page.append("{\"unit\":");
    append_quoted(page, options.counter == Counter::kSamples ? "samples" : "ns", QuoteFor::kScript);
    page.append(",\"S\":[");
    std::string types;
    std::unordered_map<std::string_view, size_t> name_index;
    for (size_t i = 0; i < frames.size(); ++i) {
        const FrameDesc& f = cct.frame(frames[i]);
        std::string_view name = f.type == FrameType::kRoot ? std::string_view("all") : std::string_view(f.name);
        auto [it, inserted] = name_index.try_emplace(name, name_index.size());
        if (inserted) {
            if (it->second > 0) page.push_back(',');
            append_quoted(page, name, QuoteFor::kScript);
        }
        if (i > 0) types.push_back(',');
        append_decimal(types, it->second);
        types.push_back(',');
        append_decimal(types, static_cast<int>(f.type));
    }
    // Written piece by piece: one string of the whole page grew by doubling to twice the nodes'
    // size in fresh pages, each a page fault at the stop of a live profile.
    const auto write = [&out](std::string_view piece) { out.write(piece.data(), static_cast<std::streamsize>(piece.size())); };
    page.append("],\n\"F\":[");
    write(page);
    write(types);
    write("],\n\"N\":[");
    write(nodes);
    write("]}");
    write(kScript);
    out.flush();
    if (!out) return make_error(Errc::kIo, "writing the html flame graph failed");
    return {};
}

}  // namespace sf::profile
