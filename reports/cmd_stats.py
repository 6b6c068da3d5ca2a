"""``testdb stats``: what the test plan holds."""

from __future__ import annotations

from typing import Any

import click

from reports.common import dump_json, format_option, report_diagnostics
from testdb.stats import compute_stats


@click.command()
@format_option("text", "json")
@click.pass_obj
def stats(opts: Any, fmt: str) -> int:
    """Count contexts, blocks, entries, QA lists and waives, plus warnings.

    \b
    Example:
      testdb --root data/trtllm stats --format json
    """
    index = opts.index()
    data = compute_stats(index)
    if fmt == "json":
        data["diagnostics"] = [{"path": d.loc.path, "line": d.loc.line,
                                "severity": d.severity.value, "message": d.message}
                               for d in index.diagnostics]
        click.echo(dump_json(data))
        # The JSON holds every diagnostic; stderr still says why the exit status is 2.
        return report_diagnostics(index.diagnostics, quiet_warnings=True)
    click.echo(render_text(data))
    return report_diagnostics(index.diagnostics)


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
        + ", ".join(f"{v} {n}" for v, n in sorted(d["verdicts"].items())),
    ]
    for s in d["skipped_files"]:
        lines.append(f"skipped         {s['path']}: {s['reason']}")
    lines.append(f"diagnostics     {d['errors']} errors, {d['warnings']} warnings")
    return "\n".join(lines)
