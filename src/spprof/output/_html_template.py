"""The page html.py fills in: markup, CSS and the flame graph's JavaScript, no network use.

Placeholders (replaced by html.py, never by str.format, since CSS and JS are full of braces):
`__TITLE__` (HTML-escaped text) and `__DATA__` (JSON with "</" escaped so it cannot end the
script element).

The script reads the data, builds a call tree for the selected thread (or all threads) and
draws it as absolutely positioned boxes, root at the top, children sorted hottest first. Only
boxes at least one pixel wide are drawn, so a large profile stays fast. The page can be driven
by its URL hash: `#thread=<index>&search=<text>&zoom=<name>` (the selector and search box keep
the hash in step), which is also how the tests drive it in headless Chromium.
"""

PAGE = r"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>__TITLE__</title>
<script>
  // Record script errors on the page itself so they can be seen (and tested) without devtools.
  window.addEventListener("error", function (e) {
    var el = document.documentElement;
    el.dataset.errors = (el.dataset.errors || "") + e.message + "\n";
  });
</script>
<style>
  :root { --row: 18px; --fg: #1d1d1f; --muted: #6e6e73; --line: #d2d2d7; }
  * { box-sizing: border-box; }
  body { margin: 0; font: 13px/1.4 -apple-system, "Segoe UI", Roboto, "DejaVu Sans", sans-serif;
         color: var(--fg); background: #fbfbfd; }
  header { padding: 10px 16px 8px; border-bottom: 1px solid var(--line); background: #fff; }
  h1 { font-size: 16px; margin: 0 0 4px; font-weight: 600; }
  #meta { color: var(--muted); font-size: 12px; }
  #controls { display: flex; flex-wrap: wrap; gap: 10px; align-items: center; margin-top: 8px; }
  select, input, button { font: inherit; padding: 3px 6px; border: 1px solid var(--line);
                          border-radius: 4px; background: #fff; }
  #search { width: 260px; }
  #matchinfo { color: #a0006e; font-weight: 600; min-width: 12em; }
  #crumbs { color: var(--muted); font-size: 12px; padding: 6px 16px 0; min-height: 20px;
            white-space: nowrap; overflow: hidden; text-overflow: ellipsis; }
  #flame { position: relative; margin: 6px 16px 16px; overflow: hidden; }
  .box { position: absolute; height: calc(var(--row) - 1px); overflow: hidden; white-space: nowrap;
         font: 11px/17px Menlo, Consolas, "DejaVu Sans Mono", monospace; padding: 0 3px;
         color: #1b1b1b; cursor: pointer; border-right: 1px solid rgba(255,255,255,.6); }
  .box:hover { filter: brightness(1.12); outline: 1px solid #333; z-index: 1; }
  .box.dim { opacity: .45; }
  .box.match { background: #e040a0 !important; color: #fff; }
  #tip { position: fixed; pointer-events: none; display: none; max-width: 560px; z-index: 10;
         background: #1d1d1f; color: #f5f5f7; padding: 7px 9px; border-radius: 6px;
         font-size: 12px; box-shadow: 0 4px 14px rgba(0,0,0,.25); }
  #tip b { display: block; margin-bottom: 2px; word-break: break-all; }
  #tip .where { color: #a1a1a6; word-break: break-all; }
  #empty { padding: 24px 16px; color: var(--muted); display: none; }
</style>
</head>
<body>
<header>
  <h1 id="title">__TITLE__</h1>
  <div id="meta"></div>
  <div id="controls">
    <label>Thread <select id="thread"></select></label>
    <input id="search" type="search" autocomplete="off"
           placeholder="Search functions or files ( / )">
    <span id="matchinfo"></span>
    <button id="reset" type="button" title="Show the whole profile again (Esc)">Reset zoom</button>
  </div>
</header>
<div id="crumbs"></div>
<div id="flame"></div>
<div id="empty">No samples in this selection.</div>
<div id="tip"></div>
<script type="application/json" id="spprof-data">__DATA__</script>
<script>
(function () {
  "use strict";
  var started = performance.now();
  var D = JSON.parse(document.getElementById("spprof-data").textContent);
  var funcs = D.funcs;    // [name, file, first line, native]
  var frames = D.frames;  // [function index, line]
  var stacks = D.stacks;  // frame indices, root first
  var ROW = 18;
  var flame = document.getElementById("flame");
  var tip = document.getElementById("tip");
  var threadSel = document.getElementById("thread");
  var search = document.getElementById("search");
  var matchinfo = document.getElementById("matchinfo");
  var crumbs = document.getElementById("crumbs");
  var state = { thread: -1, zoom: null, term: "" };
  var root = null, drawn = [];

  function fmtTime(ns) {
    if (ns >= 1e9) return (ns / 1e9).toFixed(2) + " s";
    if (ns >= 1e6) return (ns / 1e6).toFixed(1) + " ms";
    return (ns / 1e3).toFixed(0) + " \u00b5s";
  }
  function pct(part, whole) { return whole ? (100 * part / whole).toFixed(1) + "%" : "0%"; }
  function esc(s) {
    return String(s).replace(/[&<>"]/g, function (c) {
      return { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;" }[c];
    });
  }

  // ---- the call tree -------------------------------------------------------------------
  function node(f, parent) {
    return { f: f, total: 0, self: 0, n: 0, kids: new Map(), lines: new Map(), parent: parent,
             depth: parent ? parent.depth + 1 : 0, sorted: null };
  }
  function build(thread) {
    var r = node(-1, null);
    var lists = thread < 0 ? D.counts : [D.counts[thread]];
    for (var l = 0; l < lists.length; l++) {
      var c = lists[l];
      for (var i = 0; i < c.length; i += 3) {
        var st = stacks[c[i]], n = c[i + 1], w = c[i + 2], cur = r;
        r.total += w; r.n += n;
        for (var d = 0; d < st.length; d++) {
          var fr = frames[st[d]], k = cur.kids.get(fr[0]);
          if (!k) { k = node(fr[0], cur); cur.kids.set(fr[0], k); }
          k.total += w; k.n += n;
          k.lines.set(fr[1], (k.lines.get(fr[1]) || 0) + w);
          cur = k;
        }
        cur.self += w;
      }
    }
    return r;
  }
  function kids(nd) {
    if (!nd.sorted) {
      nd.sorted = Array.from(nd.kids.values()).sort(function (a, b) { return b.total - a.total; });
    }
    return nd.sorted;
  }
  function name(nd) { return nd.f < 0 ? "all" : funcs[nd.f][0]; }
  function hotLine(nd) {
    var best = -1, bw = -1;
    nd.lines.forEach(function (w, line) { if (w > bw) { bw = w; best = line; } });
    return best;
  }
  function where(nd) {
    if (nd.f < 0) return "";
    var f = funcs[nd.f], line = hotLine(nd);
    return f[1] ? f[1] + ":" + (line > 0 ? line : f[2]) : "";
  }

  // ---- search ----------------------------------------------------------------------------
  function matches(nd) {
    if (!state.term || nd.f < 0) return false;
    var f = funcs[nd.f], t = state.term.toLowerCase();
    return f[0].toLowerCase().indexOf(t) >= 0 || f[1].toLowerCase().indexOf(t) >= 0;
  }
  function matchedTotal(nd) {  // time under matching boxes, each sample counted once
    if (matches(nd)) return nd.total;
    var s = 0;
    nd.kids.forEach(function (k) { s += matchedTotal(k); });
    return s;
  }

  // ---- drawing ---------------------------------------------------------------------------
  function color(nd) {
    var f = funcs[nd.f];
    if (f[3]) return "hsl(200,45%,70%)";  // native frames: blue
    var h = 0, s = f[1] + "/" + f[0];
    for (var i = 0; i < s.length; i++) h = (h * 31 + s.charCodeAt(i)) >>> 0;
    return "hsl(" + (8 + h % 42) + "," + (70 + h % 25) + "%," + (58 + (h >> 8) % 14) + "%)";
  }
  function box(nd, x, w, dim, out) {
    var el = document.createElement("div");
    el.className = "box" + (dim ? " dim" : "") + (matches(nd) ? " match" : "");
    el.style.left = x + "px";
    el.style.top = (nd.depth - 1) * ROW + "px";
    el.style.width = Math.max(w, 1) + "px";
    el.style.background = color(nd);
    el.dataset.i = drawn.length;
    el.dataset.name = name(nd);
    if (w > 28) el.textContent = name(nd);
    drawn.push(nd);
    out.appendChild(el);
  }
  function draw() {
    var width = flame.clientWidth || 1000;
    var z = state.zoom || root;
    var frag = document.createDocumentFragment(), maxDepth = 0;
    drawn = [];
    for (var a = z; a && a.f >= 0; a = a.parent) {  // ancestors of the zoomed box: full width
      box(a, 0, width, a !== z, frag);
    }
    var scale = z.total ? width / z.total : 0;
    var stack = [[z, 0]];
    while (stack.length) {
      var item = stack.pop(), nd = item[0], x = item[1];
      maxDepth = Math.max(maxDepth, nd.depth);
      var ks = kids(nd);
      for (var i = 0; i < ks.length; i++) {
        var k = ks[i], w = k.total * scale;
        if (w >= 1) { box(k, x, w, false, frag); stack.push([k, x]); }
        x += w;
      }
    }
    flame.textContent = "";
    flame.appendChild(frag);
    flame.style.height = Math.max(1, maxDepth) * ROW + "px";
    document.getElementById("empty").style.display = root.total ? "none" : "block";
    var path = [];
    for (var p = z; p; p = p.parent) path.unshift(name(p));
    crumbs.textContent = state.zoom ? "Zoomed: " + path.join(" \u203a ") : "";
    if (state.term) {
      var m = matchedTotal(root);
      matchinfo.textContent = "Matched " + pct(m, root.total) + " (" + fmtTime(m) + ")";
      matchinfo.dataset.share = root.total ? (m / root.total).toFixed(4) : "0";
    } else {
      matchinfo.textContent = "";
      delete matchinfo.dataset.share;
    }
  }

  // ---- state and the URL hash ----------------------------------------------------------------
  function writeHash() {
    var parts = [];
    if (state.thread >= 0) parts.push("thread=" + state.thread);
    if (state.term) parts.push("search=" + encodeURIComponent(state.term));
    if (state.zoom) parts.push("zoom=" + encodeURIComponent(name(state.zoom)));
    history.replaceState(null, "", parts.length ? "#" + parts.join("&") : location.pathname);
  }
  function findByName(nd, want) {  // the widest box with that name (breadth first)
    var queue = [nd];
    while (queue.length) {
      var cur = queue.shift();
      if (cur.f >= 0 && name(cur) === want) return cur;
      queue.push.apply(queue, kids(cur));
    }
    return null;
  }
  function setThread(t) {
    state.thread = t; state.zoom = null;
    threadSel.value = String(t);
    root = build(t);
  }
  function readHash() {
    var h = {};
    location.hash.replace(/^#/, "").split("&").forEach(function (kv) {
      var i = kv.indexOf("=");
      if (i > 0) h[kv.slice(0, i)] = decodeURIComponent(kv.slice(i + 1));
    });
    var t = parseInt(h.thread, 10);
    setThread(t >= 0 && t < D.threads.length ? t : -1);
    state.term = h.search || "";
    search.value = state.term;
    if (h.zoom) state.zoom = findByName(root, h.zoom);
  }

  // ---- events ----------------------------------------------------------------------------
  flame.addEventListener("click", function (e) {
    var i = e.target.dataset && e.target.dataset.i;
    if (i === undefined) return;
    var nd = drawn[+i];
    state.zoom = nd === state.zoom ? nd.parent && nd.parent.f >= 0 ? nd.parent : null : nd;
    writeHash(); draw();
  });
  flame.addEventListener("mousemove", function (e) {
    var i = e.target.dataset && e.target.dataset.i;
    if (i === undefined) { tip.style.display = "none"; return; }
    var nd = drawn[+i], whole = root.total, loc = where(nd);
    tip.innerHTML = "<b>" + esc(name(nd)) + "</b>" +
      (loc ? "<div class=where>" + esc(loc) + "</div>" : "") +
      "<div>Total: " + fmtTime(nd.total) + " (" + pct(nd.total, whole) + ")</div>" +
      "<div>Self: " + fmtTime(nd.self) + " (" + pct(nd.self, whole) + ")</div>" +
      "<div>Samples: " + nd.n + "</div>";
    tip.style.display = "block";
    var x = Math.min(e.clientX + 14, window.innerWidth - tip.offsetWidth - 8);
    var below = e.clientY + 16 + tip.offsetHeight <= window.innerHeight;
    var y = below ? e.clientY + 16 : e.clientY - tip.offsetHeight - 10;
    tip.style.left = x + "px"; tip.style.top = y + "px";
  });
  flame.addEventListener("mouseleave", function () { tip.style.display = "none"; });
  threadSel.addEventListener("change", function () {
    setThread(parseInt(threadSel.value, 10)); writeHash(); draw();
  });
  search.addEventListener("input", function () {
    state.term = search.value.trim(); writeHash(); draw();
  });
  document.getElementById("reset").addEventListener("click", function () {
    state.zoom = null; writeHash(); draw();
  });
  document.addEventListener("keydown", function (e) {
    if (e.key === "Escape") { state.zoom = null; writeHash(); draw(); }
    if (e.key === "/" && document.activeElement !== search) { e.preventDefault(); search.focus(); }
  });
  window.addEventListener("resize", draw);
  window.addEventListener("hashchange", function () { readHash(); draw(); });

  // ---- start -----------------------------------------------------------------------------
  var total = 0;
  D.threads.forEach(function (t) { total += t.samples; });
  var all = document.createElement("option");
  all.value = "-1";
  all.textContent = "All threads \u2014 " + total + " samples";
  threadSel.appendChild(all);
  D.threads.forEach(function (t, i) {
    var o = document.createElement("option");
    o.value = String(i);
    o.textContent = t.name + " (tid " + t.tid + ") \u2014 CPU " + t.cpu_pct.toFixed(1) +
      "% \u2014 " + t.samples + " samples";
    threadSel.appendChild(o);
  });
  document.getElementById("meta").textContent = D.summary;
  readHash();
  draw();
  document.body.dataset.renderMs = (performance.now() - started).toFixed(1);
  document.body.dataset.ready = "1";
})();
</script>
</body>
</html>
"""
