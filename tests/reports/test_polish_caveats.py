"""The pipeline's caveats (gate rules unknown, CBTS may narrow) in the HTML audit card and the
PR comment, as loud as in the terminal's headline; and the comment's and the card's head side
for an audit of the work tree (``audit --base B`` without ``--head``).

Each case audits a real copy of examples/flashinfer-reuse through the CLI: the TRAP is a
clean (guarded, warning-free) audit whose green rests on a caveat; the GUARDED case is the
same audit with the caveat's cause removed, which must stay green."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from html import unescape
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from click.testing import CliRunner

from reports.cli import cli
from reports.comment import MARKER, render_comment
from reports.html import generate
from reports.html_audit import WORK_TREE, audit_status, audit_view, code_pieces, provenance_items
from reports.render_audit import headline_colour
from testdb.caveats import GATES_UNKNOWN
from testdb.index import load

if TYPE_CHECKING:
    from tests.reports.conftest import Page

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "flashinfer-reuse"
CBTS_MAIN = "jenkins/scripts/cbts/main.py"
SHA = "0123456789abcdef0123456789abcdef01234567"


def _cli(*args: str) -> str:
    r = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    assert r.exit_code in (0, 1), r.output
    return r.output


def checkout(tmp: Path, *, gates: bool = True, cbts: bool = False) -> Path:
    root = tmp / "flashinfer-reuse"
    shutil.copytree(EXAMPLE, root)
    if not gates:
        (root / "ci" / "pr-triggers.yml").unlink()
    if cbts:  # its presence is what says CBTS may narrow (never run without --cbts run)
        main = root / CBTS_MAIN
        main.parent.mkdir(parents=True)
        main.write_text("raise SystemExit('never run by these tests')\n", encoding="utf-8")
    return root


def audit(root: Path, *extra: str) -> dict[str, Any]:
    """The audit of the copy's pr.diff, run from the copy's parent as a user in a clone runs
    it (relative paths in the provenance)."""
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(root.parent)
        out = _cli("--root", root.name, "--no-cache", "audit", "--diff",
                   f"{root.name}/pr.diff", "--format", "json", *extra)
    data: dict[str, Any] = json.loads(out)
    return data


def clean(data: dict[str, Any]) -> dict[str, Any]:
    """The audit with its findings dropped: guarded and warning-free, so the caveat alone
    decides whether it may read green (the same shape a clean PR's audit has)."""
    data = {**data, "findings": [], "summary": {**data["summary"], "warnings": 0, "errors": 0}}
    s = data["summary"]
    caveats = s.get("caveats") or []
    s["sentence"] = "The behaviour change is guarded pre-merge" + (
        f" ({'; '.join(caveats)})" if caveats else "")
    return data


@pytest.fixture(scope="module")
def audits(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    tmp = tmp_path_factory.mktemp("caveats")
    return {"plain": audit(checkout(tmp / "plain")),
            "no-gates": audit(checkout(tmp / "no-gates", gates=False)),
            "cbts": audit(checkout(tmp / "cbts", cbts=True)),
            "cbts-off": audit(checkout(tmp / "cbts-off", cbts=True),
                              "--bot-command", "/bot run --disable-cbts")}


@pytest.mark.parametrize("name, caveat, headline", [
    ("no-gates", GATES_UNKNOWN, GATES_UNKNOWN),
    ("cbts", "CBTS may narrow", "CBTS may narrow this PR's stages"),
])
def test_a_caveat_is_under_the_cards_headline_and_keeps_it_from_green(
        audits: dict[str, dict[str, Any]], tmp_path: Path, name: str, caveat: str,
        headline: str) -> None:
    data = clean(audits[name])
    assert headline_colour(data["summary"]) == "yellow"  # what the terminal shows
    view = audit_view(data, {})
    assert view["status"] == "warn"  # TRAP: the green rests on the caveat
    assert any(c.startswith(caveat) for c in view["caveats"])
    generate(load(str(EXAMPLE)), str(tmp_path / "r"), data)
    page = unescape((tmp_path / "r" / "index.html").read_text(encoding="utf-8"))
    card = page[page.index('id="audit"'):page.index("</section>", page.index('id="audit"'))]
    assert 'class="card warn"' in page and 'class="card ok"' not in card
    h2 = card[card.index("<h2>"):card.index("</h2>")]
    assert headline in h2
    box = card[card.index('<ul class="caveats">'):]
    assert card.index('<ul class="caveats">') < card.index('class="prov"')  # before all else
    assert re.search(r"⚠ caveat:</strong> " + re.escape(caveat), box)
    if name == "cbts":  # the whole caveat: where CBTS sits and how to turn it off, as code
        assert CBTS_MAIN in box and "<code>/bot run --disable-cbts</code>" in box
        assert "`" not in box[:box.index("</ul>")]


def test_without_a_caveat_a_clean_card_is_green(audits: dict[str, dict[str, Any]]) -> None:
    for name in ("plain", "cbts-off"):  # GUARDED: known gates, CBTS absent or off
        data = clean(audits[name])
        assert not audits[name]["pipeline"]["caveats"], name
        view = audit_view(data, {})
        assert view["status"] == "ok" and view["caveats"] == [], name


@pytest.mark.parametrize("name, caveat", [
    ("no-gates", GATES_UNKNOWN), ("cbts", "CBTS may narrow")])
def test_the_comment_carries_each_caveat_whole(audits: dict[str, dict[str, Any]], name: str,
                                              caveat: str) -> None:
    full = render_comment(audits[name])  # with its warning: the full comment
    lines = full.splitlines()
    assert "(" + (caveat if name == "no-gates" else "CBTS may narrow this PR's stages") \
        in lines[0]
    quoted = [ln for ln in lines if ln.startswith("> ⚠️ **Caveat:**")]
    if name == "no-gates":  # the headline holds it whole: said once
        assert quoted == [] and f"({GATES_UNKNOWN})." in lines[0]
        assert "multi-GPU stages not started (gate rules unknown)" in full
    else:  # the headline's few words, then the whole caveat under it
        assert len(quoted) == 1 and caveat in quoted[0]
        assert lines.index(quoted[0]) < next(i for i, ln in enumerate(lines) if "<sub>" in ln)
        assert CBTS_MAIN in quoted[0] and "--disable-cbts" in quoted[0]
        assert "(gate rules unknown)" not in full
    # TRAP: a clean audit is no quiet ✅ one-liner when its green rests on a caveat
    text = render_comment(clean(audits[name]))
    assert not text.startswith("✅") and text.startswith("⚠️ **testdb-audit:")
    assert caveat in text.split("<sub>", 1)[0]
    assert text.rstrip().endswith(MARKER)


def test_a_clean_comment_without_caveats_stays_a_quiet_one_liner(
        audits: dict[str, dict[str, Any]]) -> None:
    for name in ("plain", "cbts-off"):  # GUARDED
        text = render_comment(clean(audits[name]))
        assert text.startswith("✅ **testdb-audit:** The behaviour change is guarded pre-merge")
        assert text.count("\n") == 1 and "Caveat" not in text


def _git(root: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(root), *args], check=True, capture_output=True,
                          text=True).stdout.strip()


@pytest.fixture(scope="module")
def work_tree_audit(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], str]:
    """``audit --base HEAD`` of a checkout whose change is uncommitted."""
    root = checkout(tmp_path_factory.mktemp("wt"))
    _git(root, "init", "-q")
    _git(root, "-c", "user.name=t", "-c", "user.email=t@t", "add", "-A")
    _git(root, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "base")
    _git(root, "apply", "pr.diff")
    sha = _git(root, "rev-parse", "HEAD")
    out = _cli("--root", str(root), "--no-cache", "audit", "--base", "HEAD", "--format", "json")
    data: dict[str, Any] = json.loads(out)
    return data, sha


def test_the_comment_names_the_work_tree_as_head(
        work_tree_audit: tuple[dict[str, Any], str]) -> None:
    data, sha = work_tree_audit
    assert data["provenance"]["head"] == sha  # HEAD's sha, beside the work tree it judged
    text = render_comment(data, repo="o/r")
    sub = next(ln for ln in text.splitlines() if ln.startswith("<sub>"))
    assert f"head work tree (uncommitted changes; HEAD `{sha[:12]}`)" in sub
    assert f"head `{sha[:12]}`" not in sub  # TRAP: not the HEAD commit as the head
    assert "diff `git`" not in sub  # "git" is the range, no diff file
    # the changed lines are the work tree's: no blob link at HEAD that may show other lines
    assert f"/blob/{sha}/" not in text
    # GUARDED: a head the caller names (the PR's head commit) is the head, linked
    named = render_comment(data, repo="o/r", head_sha=SHA)
    assert f"head `{SHA[:12]}`" in named and f"/blob/{SHA}/" in named
    assert "work tree" not in next(ln for ln in named.splitlines() if ln.startswith("<sub>"))
    quiet = render_comment(clean(data))
    assert f"head work tree (uncommitted changes; HEAD `{sha[:12]}`)" in quiet


def test_a_committed_head_is_named_by_its_sha() -> None:
    data = json.loads((Path(__file__).parent / "fixtures" / "flashinfer-audit.json")
                      .read_text(encoding="utf-8"))
    data["provenance"].update(base="a" * 40, head="b" * 40, diff="git", plan_from="b" * 40)
    sub = next(ln for ln in render_comment(data).splitlines() if ln.startswith("<sub>"))
    assert sub.startswith(f"<sub>head `{'b' * 12}` · base `{'a' * 12}` · ")  # GUARDED
    assert "work tree" not in sub and "diff `git`" not in sub


@pytest.mark.parametrize("prov, head", [
    ({"base": "a" * 40, "head": "b" * 40, "diff": "git", "plan_from": "work tree"},
     f"the work tree (uncommitted changes; HEAD {'b' * 12})"),
    ({"base": "a" * 40, "head": "b" * 40, "diff": "git", "plan_from": "b" * 40}, "b" * 12),
    ({"base": "a" * 40, "head": None, "diff": "git"}, WORK_TREE),
])
def test_the_cards_head_is_the_work_tree_without_head(prov: dict[str, Any], head: str) -> None:
    assert provenance_items(prov)[0] == ("head", head)


@pytest.mark.parametrize("text, pieces", [
    ("a `b c` d", [("a ", False), ("b c", True), (" d", False)]),
    ("`x`", [("x", True)]),
    ("no code", [("no code", False)]),
    ("one ` only", [("one ` only", False)]),  # unpaired: printed as it is
])
def test_a_caveats_code_spans(text: str, pieces: list[tuple[str, bool]]) -> None:
    assert code_pieces(text) == pieces


@pytest.mark.parametrize("summary, status", [
    ({"errors": 0, "warnings": 0, "unguarded": 1}, "bad"),  # red as the terminal is
    ({"errors": 0, "warnings": 0, "caveats": ["CBTS may narrow this PR's stages"]}, "warn"),
    ({"errors": 0, "warnings": 0, "caveats": []}, "ok"),
])
def test_the_cards_colour_is_the_headlines(summary: dict[str, Any], status: str) -> None:
    assert audit_status(summary) == status
    colour = headline_colour({"unguarded": 0, **summary})
    assert {"red": "bad", "yellow": "warn", "green": "ok"}[colour] == status


@pytest.mark.browser
def test_the_caveat_box_in_chromium(audits: dict[str, dict[str, Any]], tmp_path: Path,
                                    page: Page) -> None:
    """The audit of pr.diff in a checkout with CBTS, drawn: a yellow card (the gated colour,
    never the pre-merge green), the caveat box under the headline and inside the card at 800
    px; the same made clean (no warning) stays yellow."""
    generate(load(str(EXAMPLE)), str(tmp_path / "r"), audits["cbts"])
    generate(load(str(EXAMPLE)), str(tmp_path / "c"), clean(audits["cbts"]))
    page.page.set_viewport_size({"width": 800, "height": 1000})
    pg = page.open((tmp_path / "r" / "index.html").as_uri())
    assert pg.eval_on_selector("#audit", "e => getComputedStyle(e).borderLeftColor") == \
        "rgb(154, 103, 0)"  # --gated, never --pre's rgb(26, 127, 55)
    box = pg.eval_on_selector("#audit ul.caveats", """b => {
      const r = b.getBoundingClientRect(), c = b.closest('#audit').getBoundingClientRect();
      const h = b.closest('#audit').querySelector('h2').getBoundingClientRect();
      return {inside: r.left >= c.left && r.right <= c.right + 0.5, below: r.top >= h.bottom,
              visible: r.height > 0, text: b.innerText};
    }""")
    assert box["inside"] and box["below"] and box["visible"], box
    assert "CBTS" in box["text"] and "--disable-cbts" in box["text"]
    page.shot("report-audit-caveat.png", "#audit", doc=True)
    pg = page.open((tmp_path / "c" / "index.html").as_uri())
    assert pg.eval_on_selector("#audit", "e => getComputedStyle(e).borderLeftColor") == \
        "rgb(154, 103, 0)"  # TRAP: no warning left, the caveat alone keeps it from green
    assert pg.is_visible("#audit ul.caveats")


def test_a_cut_comment_keeps_its_caveats(audits: dict[str, dict[str, Any]]) -> None:
    """A body past GitHub's limit loses detail rows, never the caveat under its headline."""
    data = audits["cbts"]
    one = data["findings"][0]
    data = {**data, "findings": [{**one, "line": i, "message": one["message"] + " x" * 200}
                                 for i in range(1, 900)]}
    text = render_comment(data, max_chars=20_000)
    assert len(text) <= 20_000 and "cut to fit" in text  # it was cut
    lines = text.splitlines()
    caveat = next(i for i, ln in enumerate(lines) if ln.startswith("> ⚠️ **Caveat:** CBTS"))
    assert caveat < next(i for i, ln in enumerate(lines) if "cut to fit" in ln)


@pytest.mark.parametrize("root, caveat", [
    ("examples/gpu-smoke", True),  # TRAP: no gate rules, post-merge-only counts rest on them
    ("examples/flashinfer-reuse", False),  # GUARDED: ci/pr-triggers.yml read
])
def test_the_plan_report_says_when_its_gates_are_unknown(tmp_path: Path, root: str,
                                                        caveat: bool) -> None:
    """The whole-plan page (no audit) owns up to unknown gates as `stats` does."""
    from testdb.stats import compute_stats

    index = load(str(Path(__file__).resolve().parents[2] / root))
    generate(index, str(tmp_path / "r"))
    page = unescape((tmp_path / "r" / "index.html").read_text(encoding="utf-8"))
    top = page[:page.index("</header>")]
    assert ('id="plan-caveats"' in top) == caveat
    assert (GATES_UNKNOWN in top) == caveat
    assert (GATES_UNKNOWN in compute_stats(index).get("caveats", [])) == caveat  # as stats


def test_the_comment_counts_one_stage_in_the_singular() -> None:
    root = Path(__file__).resolve().parents[2] / "examples" / "gpu-smoke"
    data = json.loads(_cli("--root", str(root), "--no-cache", "audit", "--diff",
                           str(root / "pr.diff"), "--format", "json"))
    assert len(data["pipeline"]["started"]) == 1
    sub = next(ln for ln in render_comment(data).splitlines() if ln.startswith("<sub>"))
    assert " · 1 stage started · " in sub and "stages started" not in sub
    assert "multi-GPU stages not started (gate rules unknown)" in sub  # no gates there
