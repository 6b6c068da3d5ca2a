"""``testdb stats``'s click-free half, shared with the warm answer: what checks it, its output."""

from __future__ import annotations

from typing import Any

from reports.unread import as_reported, diagnostic_lines, unread_note
from reports.words import plural, skipped_note
from testdb.stats import DiagRow


def checks_names(root: str) -> bool:
    """Whether the listed ids of ``root`` are checked against its test sources, as ``where``
    checks them: the integration tests' directory has any."""
    from testdb.inventory.tree import INTEGRATION_DIR, has_test_sources

    return has_test_sources(root, (INTEGRATION_DIR,))


def render(data: dict[str, Any], diags: list[DiagRow], fmt: str
           ) -> tuple[str, list[str], int]:
    """(stdout text, stderr lines, exit code) of ``testdb stats --format FMT``; the caller
    prints the stderr lines first (errors before the result). A diagnostic is counted and
    listed with the severity it is reported with (a ``.test_durations`` error is a warning)."""
    diags = [as_reported(d) for d in diags]
    data = {**data, "errors": sum(1 for d in diags if d[2] == "error"),
            "warnings": sum(1 for d in diags if d[2] == "warning")}
    if fmt == "json":
        import json

        doc = {**data, "diagnostics": [{"path": p, "line": ln, "severity": sev, "message": msg}
                                       for p, ln, sev, msg, _ in diags]}
        # The JSON holds every diagnostic; stderr still says why the exit status is 2.
        return (json.dumps(doc, indent=2, sort_keys=False, ensure_ascii=False),
                *diagnostic_lines(diags, quiet_warnings=True))
    note = unread_note((p for p, _, sev, _, _ in diags if sev == "error"), "these counts")
    text = render_text(data)
    return (f"{note}\n{text}" if note else text, *diagnostic_lines(diags))


def render_text(d: dict[str, Any]) -> str:
    k = d["entries_by_kind"]
    lines = [
        f"root            {d['root']}  ({d['files']} files)",
        f"contexts        {d['contexts']} test-db contexts, {d['blocks']} blocks",
        f"entries         {d['entries']}: {k['nodeid']} node ids, {k['unittest']} unittest "
        f"selections, {k['other']} other",
        f"                {d['entries_with_timeout']} with TIMEOUT, "
        f"{d['entries_with_isolation']} with ISOLATION",
        f"QA              {d['qa_lists']} lists ({d['qa_list_entries']} entries), "
        f"{d['qa_contexts']} QA contexts ({d['qa_context_entries']} entries)",
        f"waives          {d['waives']}: "
        + ", ".join(f"{m} {n}" for m, n in d["waives_by_marker"].items()),
        "  by prefix     " + ", ".join(f"{p} {n}" for p, n in d["waives_by_prefix"].items()),
        f"stages          {d['stages']} enabled, {d['stages_disabled']} disabled; "
        f"{d['durations']} recorded durations",
        f"test ids        {d['test_ids']}: "
        + ", ".join(f"{v} {n}" for v, n in sorted(d["verdicts"].items())) + _checked(d)
        + "".join(f" ({c})" for c in d.get("caveats") or ()),
    ]
    for s in d["skipped_files"]:
        lines.append(f"note            {skipped_note(s['path'], s['reason'])}")
    lines.append(f"diagnostics     {plural(d['errors'], 'error')}, "
                 f"{plural(d['warnings'], 'warning')}")
    return "\n".join(lines)


def _checked(d: dict[str, Any]) -> str:
    """How the verdicts were checked against the test sources (as ``where`` says it)."""
    names = d.get("names") or {}
    if not names.get("checked"):
        return " (not checked against sources)"
    n = names.get("not_checked", 0)
    return f"; {n} not checked against sources (ids computed at run time)" if n else ""
