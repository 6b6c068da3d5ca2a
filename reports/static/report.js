/* testdb-audit coverage report: vanilla JS, no dependencies, works from file:// and offline.
 * data.js defines TESTDB_DATA(...) input; the tables draw one page of rows at a time so the
 * DOM stays small on the full corpus. */
(function () {
  "use strict";

  var DATA = null;
  var DETAILS = {};
  var PAGE_SIZE = 100;
  var LINT_PAGE_SIZE = 25;

  window.TESTDB_DATA = function (d) { DATA = d; };
  window.TESTDB_DETAIL = function (d) {
    DETAILS[d.file] = d;
    if (document.body && document.body.dataset.page === "function") { renderFunction(); }
  };

  // A list path:line as every output spells it (relative to the root, so an editor opens it),
  // allowed to wrap after each "/" in a narrow matrix cell.
  function loc(path, line) {
    return esc(path + ":" + line).split("/").join("/<wbr>");
  }
  /* A test id or stage name that wraps only after ::, /, - (inside a word), =, "," and before [
   * (reports/html.py id_breaks, the same points; test_html_layout.py compares the two): never
   * inside a name. A loop, not a regex: a lookbehind would not even parse in older engines. */
  function tidPieces(s) {
    s = String(s);
    var out = [], cur = "", colon = false;
    for (var i = 0; i < s.length; i++) {
      var c = s.charAt(i), prev = i ? s.charAt(i - 1) : "";
      if (c === "[" && cur) { out.push(cur); cur = ""; }
      cur += c;
      var cut = c === "/" || c === "=" || c === ",";
      if (c === ":") { cut = colon; colon = !colon; } else { colon = false; }
      if (c === "-" && prev && !/[\s-]/.test(prev)) { cut = true; }
      if (cut) { out.push(cur); cur = ""; }
    }
    if (cur) { out.push(cur); }
    return out;
  }
  function tid(s) { return tidPieces(s).map(esc).join("<wbr>"); }
  window.TESTDB_TID_PIECES = tidPieces;  // for the tests: the same cuts as id_breaks
  function esc(s) {
    return String(s).replace(/[&<>"']/g, function (c) {
      return { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" }[c];
    });
  }
  function badge(v, text) {
    return '<span class="v v-' + esc(v) + '">' + esc(text === undefined ? v : text) + "</span>";
  }
  function duration(s) {
    if (!s) { return "-"; }
    var m = Math.round(s / 60);
    return m < 60 ? m + " min" : Math.floor(m / 60) + " h " + (m % 60) + " min";
  }
  function fnHref(f, n, p) {
    return "function.html#f=" + f + "&n=" + n + (p ? "&p=" + encodeURIComponent(p) : "");
  }
  function $(id) { return document.getElementById(id); }
  /* "1 parametrization", "2 parametrizations": every count a page prints agrees with its noun. */
  function plural(n, word) { return n + " " + word + (n === 1 ? "" : "s"); }
  /* Marks the first rows as drawn: tests wait on data-ready, benchmarks read the mark. */
  function ready() {
    if (document.body.dataset.ready !== "1" && window.performance && performance.mark) {
      performance.mark("testdb-ready");
    }
    document.body.dataset.ready = "1";
  }

  /* A sortable, filterable, paged table over an array of row objects. */
  function Table(o) {
    this.o = o;
    this.key = o.sortKey;
    this.dir = o.sortDir || 1;
    this.page = 0;
    this.view = [];
    var self = this;
    var tr = document.createElement("tr");
    o.columns.forEach(function (c) {
      var th = document.createElement("th");
      th.textContent = c.label;
      th.dataset.key = c.key;
      th.tabIndex = 0;
      th.title = "Sort by " + c.label;
      if (c.num) { th.className = "num"; }
      if (c.verdict) { th.className += " v-" + c.verdict; }
      th.addEventListener("click", function () { self.sortBy(c.key); });
      th.addEventListener("keydown", function (e) {
        if (e.key === "Enter" || e.key === " ") { e.preventDefault(); self.sortBy(c.key); }
      });
      tr.appendChild(th);
    });
    o.table.tHead.replaceChildren(tr);
    var again = function () { self.page = 0; self.refresh(); };
    (o.inputs || []).forEach(function (el) {
      el.addEventListener(el.type === "checkbox" || el.tagName === "SELECT" ? "change" : "input",
        again);
    });
  }
  Table.prototype.column = function (key) {
    return this.o.columns.filter(function (c) { return c.key === key; })[0];
  };
  Table.prototype.sortBy = function (key) {
    if (this.key === key) { this.dir = -this.dir; } else {
      this.key = key;
      this.dir = this.column(key).num ? -1 : 1;
    }
    this.page = 0;
    this.refresh();
  };
  Table.prototype.refresh = function () {
    var o = this.o;
    var rows = o.rows();
    var query = o.filter ? o.filter.value : "";
    var id = o.matchId ? parseTestId(query) : null;
    var terms = query.toLowerCase().split(/\s+/).filter(Boolean);
    var keep = o.keep ? o.keep() : null;
    var out = rows.filter(function (r) {
      if (keep && !keep(r)) { return false; }
      if (id) { return o.matchId(r, id); }
      for (var i = 0; i < terms.length; i++) {
        if (r.text.indexOf(terms[i]) < 0) { return false; }
      }
      return true;
    });
    this.id = id;
    var col = this.column(this.key) || o.columns[0];
    var dir = this.dir;
    out.sort(function (a, b) {
      var x = col.get(a), y = col.get(b);
      var c = col.num ? x - y : (x < y ? -1 : x > y ? 1 : 0);
      return c * dir || a.pos - b.pos;
    });
    this.view = out;
    this.total = rows.length;
    var pages = Math.max(1, Math.ceil(out.length / PAGE_SIZE));
    if (this.page >= pages) { this.page = pages - 1; }
    this.render(pages);
  };
  Table.prototype.render = function (pages) {
    var o = this.o, self = this;
    var start = this.page * PAGE_SIZE;
    var slice = this.view.slice(start, start + PAGE_SIZE);
    o.table.tBodies[0].innerHTML = slice.map(function (r) {
      return "<tr>" + o.columns.map(function (c) {
        return "<td" + (c.num ? ' class="num"' : "") + ">" + c.html(r) + "</td>";
      }).join("") + "</tr>";
    }).join("");
    Array.prototype.forEach.call(o.table.tHead.rows[0].cells, function (th) {
      th.setAttribute("aria-sort", th.dataset.key !== self.key ? "none"
        : self.dir > 0 ? "ascending" : "descending");
    });
    o.count.dataset.count = String(this.view.length);
    o.count.textContent = this.view.length + " of " + plural(this.total, "row");
    drawPager(o.pager, this.page, pages, start, slice.length, this.view.length,
      function (page) { self.page = page; self.render(pages); });
    if (o.after) { o.after(this.view); }
  };

  /* "◀ previous  rows 101–200 of 342 (page 2 of 4)  next ▶"; nothing when one page holds all. */
  function drawPager(pager, page, pages, start, shown, total, go) {
    pager.replaceChildren();
    if (pages <= 1) { return; }
    var button = function (label, to, disabled) {
      var b = document.createElement("button");
      b.type = "button";
      b.textContent = label;
      b.disabled = disabled;
      b.addEventListener("click", function () { go(to); });
      pager.appendChild(b);
    };
    button("◀ previous", page - 1, page === 0);
    var span = document.createElement("span");
    span.textContent = " rows " + (start + 1) + "–" + (start + shown) + " of " + total +
      " (page " + (page + 1) + " of " + pages + ") ";
    pager.appendChild(span);
    button("next ▶", page + 1, page >= pages - 1);
  }

  var UNIT_FUNCTION = "(unit-test selection)";
  /* A pasted test id, as `where`, `audit`, `lint` and the PR comment print it (also a list
   * line's "- " and TIMEOUT marker): {term, params} to match the function rows and to jump to
   * the parametrization, or null for plain words. Mirrors split_test_id in reports/html.py. */
  function parseTestId(q) {
    q = q.trim().replace(/^-\s+/, "").replace(/\s+TIMEOUT\s*\(\d+\)\s*$/i, "")
      .replace(/^(\.\/)?tests\/integration\/defs\//, "");
    var bracket = q.indexOf("[");
    var head = bracket < 0 ? q : q.slice(0, bracket);
    if (head.indexOf("::") >= 0 && !/\s/.test(head)) {
      return { term: head.toLowerCase(), params: bracket < 0 ? "" : q.slice(bracket) };
    }
    var space = q.indexOf(" ");
    var path = space < 0 ? q : q.slice(0, space);
    if (/^unittest\//.test(path) && DATA.files.indexOf(path) >= 0) {
      return { term: (path + "::" + UNIT_FUNCTION).toLowerCase(), exact: true,
        params: space < 0 ? "" : q.slice(space + 1).trim() };
    }
    return null;
  }

  function countColumns(verdicts, get) {
    return verdicts.map(function (v, i) {
      return { key: v, label: v, num: true, verdict: v,
        get: function (r) { return get(r)[i]; },
        html: function (r) { var n = get(r)[i]; return n ? badge(v, n) : ""; } };
    });
  }

  function indexPage() {
    var V = DATA.verdicts;
    var sum = function (a) { return a.reduce(function (x, y) { return x + y; }, 0); };
    var fnRows = DATA.functions.map(function (r, pos) {
      var counts = r.slice(3);
      var file = DATA.files[r[0]];
      return { pos: pos, f: r[0], n: r[2], file: file, name: r[1], counts: counts,
        total: sum(counts), text: (file + "::" + r[1]).toLowerCase() };
    });
    var fileRows = DATA.file_rows.map(function (r, pos) {
      var counts = r.slice(2);
      return { pos: pos, f: r[0], file: DATA.files[r[0]], nfn: r[1], counts: counts,
        total: sum(counts), text: DATA.files[r[0]].toLowerCase() };
    });
    var group = $("group");
    var toggle = $("not-premerge");
    var fileCol = { key: "file", label: "file", get: function (r) { return r.file; },
      html: function (r) { return '<a class="file tid" href="#" data-file="' + esc(r.file) +
        '">' + tid(r.file) + "</a>"; } };
    var byFunction = [fileCol,
      { key: "function", label: "function", get: function (r) { return r.name; },
        html: function (r) {
          var id = parseTestId($("filter").value);
          return '<a class="tid" href="' + fnHref(r.f, r.n, id ? id.params : "") + '">' +
            tid(r.name) + "</a>";
        } }];
    var byFile = [fileCol, { key: "nfn", label: "functions", num: true,
      get: function (r) { return r.nfn; }, html: function (r) { return String(r.nfn); } }];
    var rest = countColumns(V, function (r) { return r.counts; }).concat([
      { key: "total", label: "total", num: true, get: function (r) { return r.total; },
        html: function (r) { return String(r.total); } }]);
    var table = $("tests-table");
    var jump = $("tests-jump");
    /* A function row matches a pasted id when its file::function holds the id's head (the
     * whole of it for a unit-test selection); a file row when one of its functions does. */
    var fnMatches = function (r, id) {
      return id.exact ? r.text === id.term : r.text.indexOf(id.term) >= 0;
    };
    var matchId = function (r, id) {
      if (r.n !== undefined) { return fnMatches(r, id); }
      return fnRows.some(function (x) { return x.f === r.f && fnMatches(x, id); });
    };
    /* The one function a pasted id names: its exact file::function, else the only match. */
    var target = function (id) {
      var hits = fnRows.filter(function (r) { return fnMatches(r, id); });
      var exact = hits.filter(function (r) {
        return r.text === id.term || r.text.slice(-id.term.length - 1) === "/" + id.term;
      });
      return exact.length === 1 ? exact[0] : hits.length === 1 ? hits[0] : null;
    };
    var showJump = function () {
      var id = parseTestId($("filter").value);
      var hit = id && id.params ? target(id) : null;
      jump.hidden = !hit;
      if (hit) {
        jump.href = fnHref(hit.f, hit.n, id.params);
        jump.innerHTML = "open <code>" + esc(id.params) + "</code> of " + esc(hit.name) + " →";
      } else {
        jump.removeAttribute("href");
      }
    };
    var make = function () {
      var isFile = group.value === "file";
      return new Table({ table: table, columns: (isFile ? byFile : byFunction).concat(rest),
        rows: function () { return isFile ? fileRows : fnRows; }, sortKey: "file",
        filter: $("filter"), count: $("tests-count"), pager: $("tests-pager"),
        inputs: [$("filter"), toggle], matchId: matchId, after: showJump,
        keep: function () {
          return toggle.checked ? function (r) { return r.total > r.counts[0]; } : null;
        } });
    };
    $("filter").addEventListener("keydown", function (e) {
      if (e.key === "Enter" && !jump.hidden) { e.preventDefault(); location.href = jump.href; }
    });
    var t = make();
    group.addEventListener("change", function () { t = make(); t.refresh(); });
    table.addEventListener("click", function (e) {
      var a = e.target.closest("a.file");
      if (!a) { return; }
      e.preventDefault();
      $("filter").value = a.dataset.file;
      if (group.value !== "function") { group.value = "function"; t = make(); }
      t.refresh();
    });
    t.refresh();

    var stRows = DATA.stages.map(function (s, pos) {
      return { pos: pos, s: s, text: [s[0], s[1], s[4], s[9]].join(" ").toLowerCase() };
    });
    var st = function (i, num) {
      return { get: function (r) { return r.s[i]; }, num: !!num };
    };
    var stCols = [
      Object.assign(st(0), { key: "stage", label: "stage",
        html: function (r) { return "<code>" + esc(r.s[0]) + "</code>"; } }),
      Object.assign(st(1), { key: "context", label: "context",
        html: function (r) { return esc(r.s[1]) + (r.s[11] ? " " + badge("unscheduled", "missing") : ""); } }),
      Object.assign(st(2, true), { key: "shard", label: "shard",
        html: function (r) { return r.s[2] + "/" + r.s[3]; } }),
      Object.assign(st(5), { key: "class", label: "for a PR that opens nothing",
        html: function (r) { return '<span title="' + esc(r.s[4]) + '">' + badge(r.s[5]) +
          "</span>"; } }),
      Object.assign(st(6, true), { key: "tests", label: "tests",
        html: function (r) { return String(r.s[6]); } }),
      Object.assign(st(7, true), { key: "duration", label: "known duration",
        html: function (r) {
          return duration(r.s[7]) + ' <small title="tests with a recorded duration">(' +
            r.s[8] + "/" + r.s[6] + ")</small>";
        } }),
      Object.assign(st(9), { key: "platform", label: "platform",
        html: function (r) { return esc(r.s[9]); } }),
      Object.assign(st(10, true), { key: "gpus", label: "GPUs",
        html: function (r) { return String(r.s[10]); } })];
    new Table({ table: $("stages-table"), columns: stCols, rows: function () { return stRows; },
      sortKey: "stage", filter: $("stage-filter"), count: $("stages-count"),
      pager: $("stages-pager"), inputs: [$("stage-filter")] }).refresh();
    lintTable();
    ready();
  }

  /* The lint rows are plain HTML (all of them show with JS off); here they get a filter, rule
   * and severity choices and pages, by hiding rows. */
  function lintTable() {
    var table = $("lint-table");
    if (!table) { return; }
    var rows = Array.prototype.slice.call(table.tBodies[0].rows);
    var texts = rows.map(function (r) { return r.textContent.toLowerCase(); });
    var filter = $("lint-filter"), rule = $("lint-rule"), sev = $("lint-sev");
    var page = 0;
    var refresh = function () {
      var terms = filter.value.toLowerCase().split(/\s+/).filter(Boolean);
      var kept = rows.filter(function (r, i) {
        return (!rule.value || r.dataset.rule === rule.value) &&
          (!sev.value || r.dataset.sev === sev.value) &&
          terms.every(function (t) { return texts[i].indexOf(t) >= 0; });
      });
      var pages = Math.max(1, Math.ceil(kept.length / LINT_PAGE_SIZE));
      if (page >= pages) { page = pages - 1; }
      var shown = kept.slice(page * LINT_PAGE_SIZE, (page + 1) * LINT_PAGE_SIZE);
      var visible = new Set(shown);
      rows.forEach(function (r) { r.hidden = !visible.has(r); });
      var count = $("lint-count");
      count.dataset.count = String(kept.length);
      count.textContent = kept.length + " of " + plural(rows.length, "finding");
      drawPager($("lint-pager"), page, pages, page * LINT_PAGE_SIZE, shown.length, kept.length,
        function (to) { page = to; refresh(); });
    };
    [filter, rule, sev].forEach(function (el) {
      el.addEventListener(el.tagName === "SELECT" ? "change" : "input",
        function () { page = 0; refresh(); });
    });
    $("lint-controls").hidden = false;
    refresh();
  }

  function parseHash() {
    var out = {};
    location.hash.replace(/^#/, "").split("&").forEach(function (kv) {
      var i = kv.indexOf("=");
      if (i > 0) { out[kv.slice(0, i)] = decodeURIComponent(kv.slice(i + 1)); }
    });
    return out;
  }

  function functionPage() {
    var h = parseHash();
    var f = parseInt(h.f, 10);
    if (isNaN(f) || !DATA.files[f]) {
      $("fn-title").textContent = "No such test file";
      $("fn-status").textContent = "Open this page from the index.";
      ready();
      return;
    }
    if (DETAILS[f]) { renderFunction(); return; }
    var s = document.createElement("script");
    s.src = "detail/f" + f + ".js";
    s.onerror = function () { $("fn-status").textContent = "detail/f" + f + ".js is missing"; };
    document.body.appendChild(s);
  }

  function renderFunction() {
    var h = parseHash();
    var d = DETAILS[parseInt(h.f, 10)];
    if (!d) { return; }
    var n = parseInt(h.n, 10) || 0;
    var fn = d.functions[n] || d.functions[0];
    var stages = DATA.stages;
    var results = DATA.results || {};
    var hasResults = fn.params.some(function (p) { return results[p.id]; });
    document.title = "testdb-audit: " + fn.name;
    $("fn-title").textContent = fn.name;
    $("fn-file").innerHTML = "<code>" + esc(d.name) + "</code> · " +
      plural(fn.params.length, "parametrization") + " · " + plural(fn.stages.length, "stage");
    var head = "<tr><th>parametrization</th><th>verdict</th>" +
      (hasResults ? "<th>launch</th>" : "") +
      fn.stages.map(function (i) {
        var s = stages[i];
        return '<th class="st v-' + s[5] + '" title="' + esc(s[0] + " · " + s[4] + " · shard " +
          s[2] + "/" + s[3]) + '"><span>' + esc(s[0]) + "</span></th>";
      }).join("") + '<th class="st"><span>QA lists</span></th></tr>';
    $("matrix").tHead.innerHTML = head;
    $("matrix").tBodies[0].innerHTML = fn.params.map(function (p, row) {
      var hl = h.p !== undefined && h.p === p.params ? ' class="hl"' : "";
      var cells = fn.stages.map(function (i) {
        var c = p.cells[String(i)];
        if (!c) { return '<td class="empty"></td>'; }
        var v = c[0][4];
        var tip = c.map(function (x) {
          return stages[i][0] + " · shard " + x[2] + "/" + x[3] + " · " + x[4] + " · " +
            d.paths[x[0]] + ":" + x[1] + (x[5] ? " · assumed " + x[5] : "");
        }).join("\n");
        return '<td class="c v-' + v + '" title="' + esc(tip) + '">' + c.map(function (x) {
          return loc(d.paths[x[0]], x[1]) +
            (x[3] > 1 ? " <small>" + x[2] + "/" + x[3] + "</small>" : "");
        }).join("<br>") + "</td>";
      }).join("");
      var qa = p.qa.length ? '<td class="c v-' + (p.qa.every(function (q) { return q[3]; })
        ? "waived" : "qa-only") + '" title="' + esc(p.qa.map(function (q) {
          return d.paths[q[0]] + ":" + q[1] + (q[3] ? " (waived)" : "");
        }).join("\n")) + '">' + plural(p.qa.length, "list") + "</td>" : '<td class="empty"></td>';
      var r = results[p.id];
      return "<tr id=\"p" + row + "\"" + hl + "><th><code>" + esc(p.params || "(no parameters)") +
        "</code></th><td>" + badge(p.verdict) + "</td>" +
        (hasResults ? "<td>" + (r ? '<span class="o o-' + esc(r) + '">' + esc(r) + "</span>" : "") +
          "</td>" : "") + cells + qa + "</tr>";
    }).join("");
    $("fn-lines").innerHTML = fn.params.map(function (p) {
      var items = p.lines.map(function (l) {
        return "<li><code>" + esc(d.paths[l[0]] + ":" + l[1]) + "</code> context <b>" +
          esc(l[2]) + "</b>, " + (l[4] === "any" ? "block at line " + l[3] + " (every stage)"
            : esc(l[4]) + " block at line " + l[3]) +
          (l[5] ? " <small>" + esc(l[5]) + "</small>" : "") + (l[6] ? " " + esc(l[6]) : "") +
          "</li>";
      }).concat(p.qa.map(function (q) {
        return "<li><code>" + esc(d.paths[q[0]] + ":" + q[1]) + "</code> QA " + esc(q[2]) +
          (q[3] ? " " + badge("waived") : "") + "</li>";
      }));
      var invalid = p.verdict === "invalid" ? '<p class="invalid-note">' + esc(p.reason ||
        "names no test in this checkout; CI ignores it") + (p.nearest && p.nearest.length
        ? "; nearest: " + p.nearest.map(function (n) { return "<code>" + esc(n) + "</code>"; })
          .join(", ") : "") + "</p>" : "";
      return "<h3><code>" + esc(p.params || "(no parameters)") + "</code> " + badge(p.verdict) +
        "</h3>" + invalid + "<ul>" + (items.join("") || "<li>no line names it</li>") + "</ul>";
    }).join("");
    $("fn-others").innerHTML = d.functions.map(function (g, i) {
      return "<li>" + (g === fn ? "<b>" + esc(g.name) + "</b>"
        : '<a href="' + fnHref(d.file, i) + '">' + esc(g.name) + "</a>") + "</li>";
    }).join("");
    var target = document.querySelector("#matrix tr.hl");
    $("fn-status").textContent = plural(fn.params.length, "row");
    var missing = $("fn-missing");
    missing.hidden = !(h.p && !target);
    if (h.p && !target) {
      missing.innerHTML = "No test list names <code>" + esc(fn.name + h.p) + "</code>: it is not " +
        "among the " + plural(fn.params.length, "listed parametrization") + " below.";
    }
    if (target) { target.scrollIntoView({ block: "center" }); }
    ready();
  }

  function start() {
    if (!DATA) {
      document.body.insertAdjacentHTML("afterbegin",
        '<p class="card bad">data.js did not load; keep the report directory together.</p>');
      return;
    }
    if (document.body.dataset.page === "function") {
      window.addEventListener("hashchange", functionPage);
      functionPage();
    } else {
      indexPage();
    }
  }
  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", start);
  } else {
    start();
  }
}());
