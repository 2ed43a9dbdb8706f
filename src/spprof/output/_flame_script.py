"""The style and script embedded in spprof's SVG flame graphs (_flame.py), no network use.

The script works on the frames _flame.py placed: each `<g class="f">` carries its depth,
x and width in px (`data-d`, `data-x`, `data-w`), its name and file. It adds:
- details: hovering a frame shows its tooltip text on the bottom line (the `<title>` also
  gives the browser's own tooltip);
- click-to-zoom: the clicked frame fills the width, its descendants scale with it, its
  ancestors stay full width and dimmed, the rest hides; click an ancestor, "Reset Zoom" or
  Esc to go back;
- search: "Search" (or Ctrl-F, or /) asks for a text; frames whose name or file contains it
  turn magenta and the bottom right shows the share of time they cover, each sample once.
The URL hash drives it too (`#search=<text>&zoom=<name>`), which is how the tests do it;
`data-ready="1"` on the `<svg>` tells that the script finished, `data-errors` any error.
"""

STYLE = r"""
  .bg { fill: #f6f6f0; }
  text { font-family: Menlo, Consolas, "DejaVu Sans Mono", monospace; font-size: 11.5px;
         fill: #000; }
  #title { font-size: 17px; text-anchor: middle; font-family: Verdana, "DejaVu Sans", sans-serif; }
  #subtitle { font-size: 12px; text-anchor: middle; fill: #555;
              font-family: Verdana, "DejaVu Sans", sans-serif; }
  #search, #matched, #note { text-anchor: end; }
  #note { fill: #777; font-size: 10px; }
  .btn { cursor: pointer; fill: #124; text-decoration: underline; }
  g.f { cursor: pointer; }
  g.f:hover rect { stroke: #333; stroke-width: 0.6; }
  g.f text { pointer-events: none; }
  g.parent rect { opacity: 0.55; }
  g.hide { display: none; }
"""

SCRIPT = r"""
(function () {
  "use strict";
  var svg = document.getElementById("spprof-flame");  // standalone, or inline in HTML
  window.addEventListener("error", function (e) {
    svg.setAttribute("data-errors", (svg.getAttribute("data-errors") || "") + e.message + "\n");
  });
  var full = parseFloat(svg.getAttribute("width")) - 2 * parseFloat(svg.getAttribute("data-side"));
  var side = parseFloat(svg.getAttribute("data-side"));
  var charPx = parseFloat(svg.getAttribute("data-char"));
  var frames = Array.prototype.slice.call(document.querySelectorAll("g.f"));
  var details = document.getElementById("details");
  var legend = details.textContent;
  var matched = document.getElementById("matched");
  var reset = document.getElementById("reset");
  var state = { zoom: null, term: "" };

  function num(g, k) { return parseFloat(g.getAttribute("data-" + k)); }
  function fit(name, w) {
    var room = Math.floor((w - 6) / charPx);
    if (room < 3) return "";
    return name.length <= room ? name : name.slice(0, room - 2) + "..";
  }
  function place(g, x, w) {
    var r = g.querySelector("rect"), t = g.querySelector("text");
    r.setAttribute("x", (side + x).toFixed(2));
    r.setAttribute("width", w.toFixed(2));
    t.setAttribute("x", (side + x + 3).toFixed(2));
    t.textContent = fit(g.getAttribute("data-l") || g.getAttribute("data-n"), w);
  }

  function zoom(z) {
    state.zoom = z;
    var zx = z ? num(z, "x") : 0, zw = z ? num(z, "w") : full, zd = z ? num(z, "d") : 0;
    var ratio = full / zw, eps = 0.05;
    frames.forEach(function (g) {
      var x = num(g, "x"), w = num(g, "w"), d = num(g, "d");
      g.classList.remove("hide", "parent");
      if (!z) { place(g, x, w); return; }
      if (d < zd && x <= zx + eps && x + w >= zx + zw - eps) {
        g.classList.add("parent"); place(g, 0, full);
      } else if (d >= zd && x >= zx - eps && x + w <= zx + zw + eps) {
        place(g, (x - zx) * ratio, w * ratio);
      } else {
        g.classList.add("hide");
      }
    });
    reset.setAttribute("display", z ? "inline" : "none");
  }

  function search(term) {
    state.term = term;
    var spans = [];
    frames.forEach(function (g) {
      var r = g.querySelector("rect");
      if (!r.hasAttribute("data-fill")) r.setAttribute("data-fill", r.getAttribute("fill"));
      var hit = !!term && (g.getAttribute("data-n").toLowerCase().indexOf(term) >= 0 ||
                           g.getAttribute("data-file").toLowerCase().indexOf(term) >= 0);
      r.setAttribute("fill", hit ? "rgb(230,0,230)" : r.getAttribute("data-fill"));
      g.classList.toggle("match", hit);
      if (hit) spans.push([num(g, "x"), num(g, "x") + num(g, "w")]);
    });
    if (!term) { matched.textContent = ""; svg.removeAttribute("data-matched"); return; }
    // Union of the matching spans: a match nested in another counts once.
    spans.sort(function (a, b) { return a[0] - b[0]; });
    var covered = 0, end = -1;
    spans.forEach(function (s) {
      if (s[1] <= end) return;
      covered += s[1] - Math.max(s[0], end);
      end = s[1];
    });
    var share = covered / full;
    svg.setAttribute("data-matched", share.toFixed(4));
    matched.textContent = "Matched: " + (100 * share).toFixed(1) + "%";
  }

  function writeHash() {
    var parts = [];
    if (state.term) parts.push("search=" + encodeURIComponent(state.term));
    if (state.zoom) parts.push("zoom=" + encodeURIComponent(state.zoom.getAttribute("data-n")));
    try {
      history.replaceState(null, "", parts.length ? "#" + parts.join("&") : location.pathname);
    } catch (e) { /* an SVG inside a sandboxed viewer: the hash is a convenience */ }
  }
  function readHash() {
    var h = {};
    location.hash.replace(/^#/, "").split("&").forEach(function (kv) {
      var i = kv.indexOf("=");
      if (i > 0) h[kv.slice(0, i)] = decodeURIComponent(kv.slice(i + 1));
    });
    search((h.search || "").toLowerCase());
    var z = null;
    if (h.zoom) {  // the widest frame of that name
      frames.forEach(function (g) {
        if (g.getAttribute("data-n") === h.zoom && (!z || num(g, "w") > num(z, "w"))) z = g;
      });
    }
    zoom(z);
  }
  function ask() {
    var t = window.prompt("Search for (part of) a function or file name:", state.term);
    if (t !== null) { search(t.trim().toLowerCase()); writeHash(); }
  }

  frames.forEach(function (g) {
    g.addEventListener("click", function () {
      zoom(g === state.zoom ? null : g); writeHash();
    });
    g.addEventListener("mouseover", function () {
      details.textContent = g.querySelector("title").textContent.split("\n").join("  \u00b7  ");
    });
    g.addEventListener("mouseout", function () { details.textContent = legend; });
  });
  reset.addEventListener("click", function () { zoom(null); writeHash(); });
  document.getElementById("search").addEventListener("click", ask);
  window.addEventListener("keydown", function (e) {
    if ((e.ctrlKey || e.metaKey) && e.key === "f" || e.key === "/") { e.preventDefault(); ask(); }
    if (e.key === "Escape") { zoom(null); search(""); writeHash(); }
  });
  window.addEventListener("hashchange", readHash);
  readHash();
  svg.setAttribute("data-ready", "1");
})();
"""
