"""The pre-merge PR comment: markdown from the audit JSON, sticky by a hidden marker."""

from __future__ import annotations

import hashlib
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from reports.words import WEAK, level_lead

MARKER = "<!-- testdb-audit -->"
MAX_CHARS = 60_000
_ICON = {"error": "❌", "warning": "⚠️", "info": "ℹ️"}
_OUTCOME_ICON = {"passed": "✅", "failed": "❌", "error": "❌", "timeout": "⏱️", "oom": "❌",
                 "pending": "⏳", "running": "⏳"}
_GUARDS_PER_CELL = 4
_CELL_CHARS = 1_500  # one finding message never crowds out the others


def _cell(text: str, limit: int = _CELL_CHARS) -> str:
    text = " ".join(text.split()).replace("|", "\\|")
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _leaf(test_id: str) -> str:
    head, bracket, params = test_id.partition("[")
    return head.rsplit("::", 1)[-1] + bracket + params


def data_digest(data_files: dict[str, str]) -> str:
    """One short digest over every input file's hash: equal digests, equal test plans."""
    h = hashlib.sha256()
    for path, digest in sorted(data_files.items()):
        h.update(f"{path}\0{digest}\0".encode())
    return h.hexdigest()[:12]


def guards_by_id(data: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Each guard of an audit JSON by its test id: its first listing, in the JSON's order."""
    guards: dict[str, dict[str, Any]] = {}
    for b in data["behaviours"]:
        for gs in b["guards"].values():
            for g in gs:
                guards.setdefault(g["test_id"], g)
    return guards


@dataclass
class _Part:
    """A block of lines; `rows` may be cut from the end (then `more` says how many were left)."""

    head: list[str]
    rows: list[str] = field(default_factory=list)
    tail: list[str] = field(default_factory=list)
    more: str = ""  # format string with {n}; empty: the part is kept whole or dropped
    priority: int = 0  # 0: always kept; higher numbers are cut first

    def lines(self, keep: int | None = None) -> list[str]:
        keep = len(self.rows) if keep is None else keep
        if keep == 0 and self.rows and not self.more:
            return []
        cut = len(self.rows) - keep
        return [*self.head, *self.rows[:keep], *([self.more.format(n=cut)] if cut else []),
                *self.tail]


class _Comment:
    def __init__(self, data: dict[str, Any], repo: str | None, report_url: str | None,
                 results: list[dict[str, Any]] | None, head_sha: str | None) -> None:
        self.data = data
        self.repo = repo
        self.report_url = report_url
        self.results = results or []
        self.prov: dict[str, Any] = data.get("provenance") or {}
        # Without --head the audit judged the work tree; the HEAD sha beside it is no blob to
        # link changed lines to (their numbers are the work tree's), only named in the header.
        self.work_tree = head_sha is None and is_work_tree(self.prov)
        self.head: str | None = head_sha or (None if self.work_tree else self.prov.get("head"))
        self.caveats = audit_caveats(data)
        self.outcome = {r["test_id"]: r for r in self.results}
        self.guards = guards_by_id(data)

    # ---- pieces ---------------------------------------------------------------------------
    def link(self, path: str, line: int, label: str | None = None) -> str:
        text = label or (f"{path}:{line}" if line else path)
        if self.repo and self.head and path:
            anchor = f"#L{line}" if line else ""
            return f"[`{text}`](https://github.com/{self.repo}/blob/{self.head}/{path}{anchor})"
        return f"`{text}`"

    def guard(self, test_id: str) -> str:
        g = self.guards.get(test_id)
        text = f"`{_cell(_leaf(test_id), 300)}` {g['effective'] if g else '?'}"
        if g:
            # The test-db lines first: they decide the class; QA lines only add to it.
            lines = sorted({(r.get("kind") == "qa", r["path"], r["line"]) for r in g["runs"]
                            if not r["waived"]})
            text += "".join(f" · {self.link(p, n)}" for _, p, n in lines[:3])
        r = self.outcome.get(test_id)
        if r:
            text += f" · {_OUTCOME_ICON.get(r['outcome'], '⚠️')} {r['outcome']}"
        return text

    def provenance(self) -> str:
        p = self.prov
        files = p.get("data_files") or {}
        gates = self.data.get("gates") or {}
        started = (self.data.get("pipeline") or {}).get("started") or {}
        bits = [self.head_words(),
                f"base `{str(p['base'])[:12]}`" if p.get("base") else "",
                f"diff `{p['diff'].rsplit('/', 1)[-1]}`"
                if p.get("diff") and p["diff"] != "git" else "",  # "git": the range above
                _multi_gpu_words(gates, started)
                + (" (gate rules unknown)" if not gates.get("multi_gpu") and any(
                    c.startswith("gate rules unknown") for c in self.caveats) else ""),
                ("auto-trigger stages start for " + ", ".join(gates["auto_trigger_tags"]))
                if gates.get("auto_trigger_tags") else "",
                f"judged under `{p['bot_command']}`" if p.get("bot_command") else "",
                f"{len(started)} stage{'s' * (len(started) != 1)} started" if started else "",
                f"testdb-audit {p.get('version', '?')}",
                f"test plan `{data_digest(files)}` ({len(files)} files)" if files else ""]
        return "<sub>" + " · ".join(b for b in bits if b) + "</sub>"

    def head_words(self) -> str:
        """The head side as the text audit's header names it (render_audit.head_words)."""
        if self.work_tree:
            sha = str(self.prov.get("head") or "")[:12]
            return "head work tree (uncommitted changes" + (f"; HEAD `{sha}`)" if sha else ")")
        if self.head:
            return f"head `{str(self.head)[:12]}`"
        return "" if self.prov.get("diff") else "work tree"

    def caveat_lines(self) -> list[str]:
        """Each pipeline caveat whole, right under the headline (which names it in a few
        words): what the verdict rests on that the tool could not see."""
        sentence = self.data["summary"]["sentence"]
        return [line for c in self.caveats if c not in sentence  # a headline's whole one: once
                for line in ("", f"> ⚠️ **Caveat:** {' '.join(c.split())}")]

    def results_summary(self) -> str:
        counts = Counter(r["outcome"] for r in self.results)
        order = sorted(counts, key=lambda o: (o != "passed", o))
        return ", ".join(f"{counts[o]} {o}" for o in order)

    # ---- parts ----------------------------------------------------------------------------
    def parts(self, findings: list[dict[str, Any]]) -> list[_Part]:
        s = self.data["summary"]
        bad = s["errors"] or any(f["severity"] == "error" for f in findings)
        icon = "❌" if bad else "⚠️"
        parts = [_Part([f"{icon} **testdb-audit: {s['sentence']}.**", *self.caveat_lines(), "",
                        self.provenance()])]
        if findings:
            rows = []
            for f in findings:
                where = self.link(f["path"], f["line"])
                if f.get("function"):
                    where += f" `{_cell(f['function'], 200)}`"
                guards = f.get("guards") or []
                cells = [self.guard(t) for t in guards[:_GUARDS_PER_CELL]]
                if len(guards) > _GUARDS_PER_CELL:
                    cells.append(f"+{len(guards) - _GUARDS_PER_CELL} more")
                rows.append(f"| {_ICON[f['severity']]} {f['severity']} | {where} | "
                            f"{'<br>'.join(cells) or '-'} | {_cell(f['message'])} |")
            parts.append(_Part(["", "| | where | guards (verdict for this PR) | evidence |",
                                "|---|---|---|---|"], rows,
                               more="| ✂️ | {n} more findings | see the full report | |",
                               priority=2))
        sug = self.data.get("suggestion")
        stages = self.data.get("missing_stages") or []
        if sug is None and stages:  # an audit written before suggestions had costs
            sug = {"command": f'/bot run --extra-stage "{", ".join(stages)}"', "stages": [
                {"stage": s, "minutes": None} for s in stages], "shards": len(stages)}
        if sug:
            from reports.render_audit import RUNNER_UP_WORDS, cost_text

            lines = ["", "**Run the missing guards before merge** (the exact shards that "
                     "schedule them):", "", "```", sug["command"], "```",
                     f"<sub>{cost_text(sug)}</sub>"]
            alt = sug.get("runner_up")
            if alt:
                lines += ["", f"or the runner-up, {RUNNER_UP_WORDS}:", "", "```",
                          alt["command"], "```", f"<sub>{cost_text(alt)}</sub>"]
            parts.append(_Part(lines))
        if self.results:
            rows = []
            for r in sorted(self.results, key=lambda r: (r["outcome"] == "passed", r["test_id"])):
                dur = f"{r['duration_s']:.0f} s" if r.get("duration_s") is not None else "-"
                rows.append(f"| `{_cell(r['test_id'], 400)}` | "
                            f"{_OUTCOME_ICON.get(r['outcome'], '⚠️')} {r['outcome']} | "
                            f"{_cell(r.get('backend') or '-', 40)} | "
                            f"{_cell(r.get('where') or '-', 200)} | "
                            f"{r.get('started_at') or '-'} | {dur} |")
            parts.append(_Part(["", f"**Launched guards:** {self.results_summary()}", "",
                                "| test | outcome | backend | where | started | duration |",
                                "|---|---|---|---|---|---|"], rows,
                               more="| ✂️ {n} more results | | | | | |", priority=3))
        parts.append(self.details())
        tail = [""]
        if self.report_url:
            tail.append(f"[Full coverage report]({self.report_url})")
        parts.append(_Part([*tail, MARKER]))
        return parts

    def details(self) -> _Part:
        rows: list[str] = []
        for b in self.data["behaviours"]:
            tokens = ", ".join(f"`{t}`" for t in (b.get("tokens") or [])[:10])
            groups = guard_groups(b)
            rows.append(f"- **`{b['function']}`** {self.link(b['path'], b['line'])}: "
                        f"**{b['verdict']}**" + ("" if groups else f" ({decided_words(b)})")
                        + (f"; changed tokens {tokens}" if tokens else ""))
            for label, gs in groups:
                shown = ", ".join(f"`{_cell(g['test_id'], 300)}` ({g['effective']})"
                                  for g in gs[:8])
                rows.append(f"  - {label}: {shown}" + (f", +{len(gs) - 8} more"
                                                       if len(gs) > 8 else ""))
        for f in self.data["findings"]:
            if f["severity"] == "info":
                rows.append(f"- {_ICON['info']} {self.link(f['path'], f['line'])}: "
                            f"{_cell(f['message'])}")
        for lc in self.data.get("list_changes") or []:
            rows.append(f"- list change: {lc.get('kind')} `{lc.get('test')}` "
                        f"{self.link(str(lc.get('path', '')), int(lc.get('line') or 0))}")
        for n in self.data.get("notes") or []:
            rows.append(f"- note: {_cell(str(n))}")
        files = self.prov.get("data_files") or {}
        if files:
            rows.append("- test plan files: " + ", ".join(
                f"`{k}` {str(v)[:12]}" for k, v in sorted(files.items())))
        return _Part(["", "<details><summary>Behaviour changes, all guards and provenance"
                      "</summary>", ""], rows, ["", "</details>"],
                     more="- ✂️ {n} more lines: see the full report", priority=4)

    def one_liner(self) -> str:
        s = self.data["summary"]
        icon = "✅" if s["behaviours"] else "➖"
        extra = [self.head_words() if self.head or self.work_tree else "",
                 f"{len(self.results)} launched guards passed" if self.results else "",
                 f"[report]({self.report_url})" if self.report_url else ""]
        tail = "; ".join(e for e in extra if e)
        return f"{icon} **testdb-audit:** {s['sentence']}" + (f" ({tail})" if tail else "") + \
            f". {MARKER}\n"


def audit_caveats(data: dict[str, Any]) -> list[str]:
    """The pipeline's caveats of an audit JSON, whole (testdb.pipeline ``caveats``; the
    summary's ``caveats`` are their headline words): an audit from before them, the
    headline words; none, ``[]``."""
    pipe = data.get("pipeline") or {}
    return [str(c) for c in pipe.get("caveats")
            or (data.get("summary") or {}).get("caveats") or ()]


def is_work_tree(prov: dict[str, Any]) -> bool:
    """``audit --base B`` without ``--head``: B against the work tree, whose HEAD sha the
    provenance records as ``head`` (render_audit.head_words says so in the text header)."""
    return prov.get("diff") == "git" and prov.get("plan_from") == "work tree"


def decided_words(b: dict[str, Any]) -> str:
    """``decided by: a parameter value and its name are on the changed lines``: the evidence
    level in words (its tier and rank are in the audit JSON)."""
    d = b.get("decided_by") or {}
    tier = d.get("tier") or b.get("tier")
    if not tier:
        return "no test is linked to it"
    weak = f" ({WEAK})" if d.get("can_guard") is False else ""
    return "decided by: " + str(d.get("title") or _title(str(tier), _rank(d.get("rank")))) + weak


def _rank(value: Any) -> int:
    """A level's rank as written; anything but a positive int (an older or hand-edited audit)
    is 0: the tier's title names it."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def _title(tier: str, rank: int) -> str:
    """An evidence level in words; an audit written before ranks existed (rank 0, a level
    with no title of its own) by its tier's title."""
    from auditor.evidence import Level
    from reports.render_audit import level_title

    return level_title(Level(tier, rank))


def guard_groups(b: dict[str, Any]) -> list[tuple[str, list[dict[str, Any]]]]:
    """A behaviour's guards by evidence level, named in words: the deciding level's first;
    weaker levels (audit@2 ``"decides": false``) are context, never guards."""
    from auditor.evidence import LEVELS, Level

    groups: dict[tuple[bool, str, int], list[dict[str, Any]]] = {}
    for tier, gs in b["guards"].items():
        for g in gs:
            decides = g.get("decides", tier == b.get("tier"))  # older audits: by tier
            key = (decides is False, tier, _rank(g.get("rank")))
            groups.setdefault(key, []).append(g)
    order = {lv: i for i, lv in enumerate(LEVELS)}
    can_guard = (b.get("decided_by") or {}).get("can_guard") is not False
    out = []
    for (context, tier, rank), gs in sorted(groups.items(), key=lambda kv: (
            kv[0][0], order.get(Level(kv[0][1], kv[0][2] or 1), len(order)))):
        out.append((f"{level_lead(not context, can_guard)} — {_title(tier, rank)}", gs))
    return out


def render_comment(data: dict[str, Any], *, repo: str | None = None,
                   report_url: str | None = None, results: list[dict[str, Any]] | None = None,
                   max_chars: int = MAX_CHARS, head_sha: str | None = None) -> str:
    """The comment body: a verdict sentence first, then what to do; at most `max_chars`."""
    c = _Comment(data, repo, report_url, results, head_sha)
    rank = {"error": 0, "warning": 1}
    findings = sorted((f for f in data["findings"] if f["severity"] in rank),
                      key=lambda f: rank[f["severity"]])
    failed = [r for r in c.results if r["outcome"] != "passed"]
    # A caveat (gate rules unknown, CBTS may narrow) is no quiet ✅: the whole text is shown
    if not findings and not failed and not data["summary"]["errors"] and not c.caveats:
        return c.one_liner()
    return _fit(c.parts(findings), max_chars, report_url, len(findings))


def _size(lines: list[str]) -> int:
    return sum(len(line) + 1 for line in lines)


def _fit(parts: list[_Part], max_chars: int, report_url: str | None, n_findings: int) -> str:
    """Whole if it fits; otherwise cut the lowest-priority rows first, and say so up top."""
    text = "\n".join(line for p in parts for line in p.lines()) + "\n"
    if len(text) <= max_chars:
        return text
    where = (f"the [full HTML report]({report_url})" if report_url else
             "the full report (`testdb report --html DIR --audit audit.json`)")
    note_len = 400  # the note is written once the cuts are known; this bounds its length
    keep = {id(p): len(p.rows) for p in parts}
    budget = max_chars - note_len - _size([line for p in parts for line in p.lines(0)])
    budget -= sum(len(p.more) + 12 for p in parts if p.rows)  # the "n more" lines
    for p in sorted((p for p in parts if p.rows), key=lambda p: p.priority):
        n = 0
        for row in p.rows:
            if len(row) + 1 > budget:
                break
            budget -= len(row) + 1
            n += 1
        keep[id(p)] = n
    table = next((p for p in parts if p.priority == 2), None)
    shown = keep[id(table)] if table else 0
    cut_bits = [f"{shown} of {n_findings} findings shown" if table and shown < n_findings
                else "all findings shown"]
    if any(keep[id(p)] < len(p.rows) for p in parts if p.priority > 2):
        cut_bits.append("launch results or details shortened")
    note = ["", f"> ✂️ **This comment was cut to fit GitHub's limit ({max_chars:,} characters):** "
            f"{'; '.join(cut_bits)}. Everything is in {where}."]
    lines: list[str] = []
    for i, p in enumerate(parts):
        lines += p.lines(keep[id(p)])
        if i == 0:
            lines += note
    text = "\n".join(lines) + "\n"
    if len(text) > max_chars:  # only a monstrous header or stage list gets here
        text = text[: max_chars - len(MARKER) - 80].rsplit("\n", 1)[0]
        text += f"\n\n> ✂️ **Cut at {max_chars:,} characters.**\n{MARKER}\n"
    return text


def _multi_gpu_words(gates: dict[str, Any], started: dict[str, Any]) -> str:
    """Whether multi-GPU stages start: by the path list, or (a bot command) some by name."""
    from testdb.stages import MULTI_GPU_RE

    multi = [n for n in started if MULTI_GPU_RE.search(n) and "Post-Merge" not in n]
    if gates.get("multi_gpu"):
        return "multi-GPU stages start"
    if multi:
        return f"{len(multi)} multi-GPU stage{'s' * (len(multi) != 1)} started"
    return "multi-GPU stages not started"
