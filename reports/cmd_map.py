"""``testdb map``: the measured test-to-code map (add, merge, stats); docs/map.md."""

from __future__ import annotations

import datetime
import json
from typing import Any

import click

from reports.common import format_option
from testdb.errors import UsageError

MAP_HELP = ("Map file (default: the checkout's own, under the cache directory; "
            "`testdb map stats` prints its path).")


def map_path(opts: Any, given: str | None) -> str:
    from auditor.covmap.locate import default_path

    return given or default_path(opts.root)


def _when(text: str | None) -> int | None:
    if text is None:
        return None
    try:
        dt = datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise UsageError(f"--measured-at {text!r} is not an ISO date and time",
                         hint="e.g. 2026-12-01T08:00:00Z") from None
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=datetime.timezone.utc)
    return int(dt.timestamp())


@click.group(name="map")
def map_group() -> None:
    """The measured test-to-code map: which functions each test executed, per commit.

    \b
    Examples:
      testdb map add .coverage.* --commit "$GIT_COMMIT"
      testdb map add cbts_touchmap.sqlite          # a CBTS touch DB; its meta names the commit
      testdb map merge node1.sqlite node2.sqlite -o ci-map.sqlite
      testdb map stats --map ci-map.sqlite
    """


@map_group.command()
@click.argument("data", nargs=-1, required=True, type=click.Path(dir_okay=False))
@click.option("--commit", help="The commit the tests ran at (default: HEAD of --root; a CBTS "
                               "DB's meta may name it).")
@click.option("--measured-at", "measured_at", metavar="ISO",
              help="When the tests ran (default: now).")
@click.option("--map", "map_file", type=click.Path(dir_okay=False), help=MAP_HELP)
@format_option("text", "json")
@click.pass_obj
def add(opts: Any, data: tuple[str, ...], commit: str | None, measured_at: str | None,
        map_file: str | None, fmt: str) -> int:
    """Add coverage.py data files (one dynamic context per test: pytest-cov's
    --cov-context=test, or `testdb launch --coverage`) or CBTS touch DBs (v1, v3) to the
    map. Executed lines become functions by the source of --root at that commit."""
    from auditor.covmap.add import add_files

    when = _when(measured_at)
    path = map_path(opts, map_file)
    got = add_files(list(data), opts.root, commit, path, measured_at=when)
    res, sha = got.result, got.commit
    out = {"map": path, "commit": sha, "tests": got.tests, "added": res.added,
           "joined": res.joined, "replaced": res.replaced, "older": res.older,
           "links": res.links, "files_not_in_checkout": sorted(got.unmatched_files),
           "unknown_functions": got.unknown_functions}
    if fmt == "json":
        click.echo(json.dumps(out, indent=2))
        return 0
    click.echo(f"{path}: {got.tests} test(s) measured at {sha[:12]}: {res.added} new, "
               f"{res.joined} joined, {res.replaced} replaced, {res.older} older than the "
               f"map's (kept the map's); {res.links:,} link(s)")
    if got.unmatched_files:
        some = ", ".join(sorted(got.unmatched_files)[:3])
        click.echo(f"note: {len(got.unmatched_files)} measured file(s) are not Python files of "
                   f"the checkout at that commit, not mapped (e.g. {some})")
    if got.unknown_functions:
        click.echo(f"note: {got.unknown_functions} row(s) name a function the source at that "
                   "commit does not hold, not mapped")
    return 0


@map_group.command()
@click.argument("inputs", nargs=-1, required=True, type=click.Path(dir_okay=False))
@click.option("-o", "--output", required=True, type=click.Path(dir_okay=False),
              help="The merged map (written under a temporary name, then renamed).")
def merge(inputs: tuple[str, ...], output: str) -> int:
    """Join maps from many CI nodes: per test the newest commit's measurement, joined across
    inputs of the same commit."""
    from auditor.covmap.store import merge_files

    res = merge_files(list(inputs), output)
    click.echo(f"{output}: {len(inputs)} map(s) merged: {res.added} test(s), {res.joined} "
               f"joined, {res.replaced} replaced by a newer commit, {res.older} older "
               f"measurement(s) dropped; {res.links:,} link(s) read")
    return 0


@map_group.command()
@click.option("--map", "map_file", type=click.Path(dir_okay=False), help=MAP_HELP)
@format_option("text", "json")
@click.pass_obj
def stats(opts: Any, map_file: str | None, fmt: str) -> int:
    """Tests, functions, commits, age and size of the map."""
    from auditor.covmap.store import MapStore, age

    path = map_path(opts, map_file)
    with MapStore.open(path) as store:
        st = store.stats()
    data = {"map": path, "tests": st.tests, "functions": st.functions, "files": st.files,
            "links": st.links, "bytes": st.bytes,
            "bytes_per_link": round(st.bytes_per_link, 2),
            "commits": [{"commit": c, "tests": n, "oldest": lo, "newest": hi}
                        for c, n, lo, hi in st.commits]}
    if fmt == "json":
        click.echo(json.dumps(data, indent=2))
        return 0
    click.echo(f"{path}")
    click.echo(f"  {st.tests:,} tests, {st.functions:,} functions executed in {st.files:,} "
               f"files, {st.links:,} links")
    click.echo(f"  {st.bytes:,} bytes ({st.bytes_per_link:.1f} bytes a link)")
    for c, n, lo, hi in st.commits[:10]:
        span = age(hi) if lo == hi else f"{age(hi)} .. {age(lo)}"
        click.echo(f"  {c[:12]}  {n:,} test(s), measured {span}")
    if len(st.commits) > 10:
        click.echo(f"  ... {len(st.commits) - 10} older commit(s)")
    return 0
