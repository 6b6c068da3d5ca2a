"""The pre-merge PR comment: markdown from the audit JSON, sticky by a hidden marker."""

from __future__ import annotations

from typing import Any

MARKER = "<!-- testdb-audit -->"
MAX_CHARS = 60_000
_ICON = {"error": "❌", "warning": "⚠️", "info": "ℹ️"}


def _link(repo: str | None, head: str | None, path: str, line: int) -> str:
    label = f"{path}:{line}" if line else path
    if repo and head and path:
        anchor = f"#L{line}" if line else ""
        return f"[`{label}`](https://github.com/{repo}/blob/{head}/{path}{anchor})"
    return f"`{label}`"


def _guard_cell(data: dict[str, Any], f: dict[str, Any], limit: int = 4) -> str:
    verdicts = {}
    for b in data["behaviours"]:
        for gs in b["guards"].values():
            for g in gs:
                verdicts.setdefault(g["test_id"], g["effective"])
    cells = [f"`{t.split('::')[-1]}` {verdicts.get(t, '?')}" for t in f["guards"][:limit]]
    if len(f["guards"]) > limit:
        cells.append(f"+{len(f['guards']) - limit} more")
    return "<br>".join(cells) or "none"


def render_comment(data: dict[str, Any], *, repo: str | None = None,
                   report_url: str | None = None, results: list[dict[str, Any]] | None = None,
                   max_chars: int = MAX_CHARS) -> str:
    s = data["summary"]
    p = data["provenance"]
    head, base = p.get("head"), p.get("base")
    findings = [f for f in data["findings"] if f["severity"] in ("error", "warning")]
    if not findings and not results:
        icon = "✅" if s["behaviours"] else "➖"
        return (f"{MARKER}\n{icon} **testdb-audit:** {s['sentence']}"
                f" (head `{str(head or '-')[:10]}`).\n")
    out = [MARKER, f"{'❌' if s['errors'] else '⚠️'} **testdb-audit:** {s['sentence']}", ""]
    hashes = ", ".join(f"`{k.rsplit('/', 1)[-1]}` {v[:8]}"
                       for k, v in list(p.get("data_files", {}).items())[:6])
    more = len(p.get("data_files", {})) - 6
    out.append(f"<sub>head `{str(head or '-')[:12]}` · base `{str(base or '-')[:12]}` · "
               f"testdb-audit {p.get('version', '?')} · data: {hashes}"
               + (f" +{more} files" if more > 0 else "") + "</sub>")
    out += ["", "| | where | guards (verdict for this PR) | evidence |", "|---|---|---|---|"]
    for f in findings:
        where = _link(repo, head, f["path"], f["line"])
        if f.get("function"):
            where += f" `{f['function']}`"
        msg = f["message"].replace("|", "\\|")
        out.append(f"| {_ICON[f['severity']]} {f['severity']} | {where} | "
                   f"{_guard_cell(data, f)} | {msg} |")
    stages = data.get("missing_stages") or []
    if stages:
        out += ["", "**Run the missing guards before merge:**", "", "```",
                f'/bot run --extra-stage "{", ".join(stages)}"', "```"]
    if results:
        out += ["", "**Launched guards:**", "", "| test | outcome | where | when | duration |",
                "|---|---|---|---|---|"]
        for r in results:
            dur = f"{r['duration_s']:.0f} s" if r.get("duration_s") is not None else "-"
            out.append(f"| `{r['test_id']}` | {r['outcome']} | {r.get('where') or '-'} | "
                       f"{r.get('started_at') or '-'} | {dur} |")
    out += ["", "<details><summary>Behaviour changes and all guards</summary>", ""]
    for b in data["behaviours"]:
        out.append(f"- **`{b['function']}`** {_link(repo, head, b['path'], b['line'])}: "
                   f"**{b['verdict']}** (decided by the {b['tier'] or 'no'} tier); tokens "
                   + ", ".join(f"`{t}`" for t in b["tokens"][:10]))
        for tier, gs in b["guards"].items():
            out.append(f"  - {tier}: " + ", ".join(f"`{g['test_id']}` ({g['effective']})"
                                                   for g in gs[:8])
                       + (f", +{len(gs) - 8} more" if len(gs) > 8 else ""))
    for lc in data.get("list_changes", []):
        out.append(f"- list change: {lc['kind']} `{lc['test']}` "
                   f"{_link(repo, head, lc['path'], lc['line'])}")
    for n in data.get("notes", []):
        out.append(f"- note: {n}")
    out += ["", "</details>", ""]
    return _cap("\n".join(out), max_chars, report_url)


def _cap(text: str, max_chars: int, report_url: str | None) -> str:
    if len(text) <= max_chars:
        return text
    note = ("\n\n**This comment was cut to fit GitHub's limit.** "
            + (f"See the full [HTML report]({report_url})." if report_url
               else "See the full report: `testdb report --html DIR --audit audit.json`."))
    cut = text[: max_chars - len(note) - 20]
    if cut.count("<details>") > cut.count("</details>"):
        note = "\n</details>" + note
    return cut.rsplit("\n", 1)[0] + note
