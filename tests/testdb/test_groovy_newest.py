"""Stage rows read by what their fields are for the map's consumer (issue 23, item 1): the
shapes of the newest stored L0_Test.groovy (aebac710), in a hand-written fixture."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_groovy import PATH, key, row, wrap

from testdb.errors import Severity
from testdb.groovy import load_groovy_stages_text

FIXTURE = Path(__file__).parent / "fixtures" / "groovy" / "L0_Test_newest.groovy"
SLURM = "x86SlurmTestConfigs"


def test_newest_fixture_reads_every_stage_with_notes_only() -> None:
    stages, diags = load_groovy_stages_text(FIXTURE.read_text(), str(FIXTURE))
    assert [d for d in diags if d.severity is not Severity.INFO] == []
    active = [s for s in stages if not s.disabled]
    assert (len(active), len(stages) - len(active)) == (20, 2)
    by = {s.name: s for s in stages}
    # the sixth field of a Kubernetes row is a pod-config flag, not a node count
    assert key(by["DGX_H100-2_GPUs-PyTorch-Sidecar-1"]) == row(
        "DGX_H100-2_GPUs-PyTorch-Sidecar-1", "dgx-h100-x4", "l0_sidecar", 1, 1, 2)
    assert by["DGX_H100-4_GPUs-PyTorch-Sidecar-OnDemand-1"].is_on_demand
    assert [s.name for s in active if s.is_on_demand] == [
        "DGX_H100-4_GPUs-PyTorch-Sidecar-OnDemand-1",
        *(f"DGX_B300-8_GPUs-PyTorch-Startup-OnDemand-{k}" for k in (1, 2, 3))]
    assert key(by["DGX_B300-8_GPUs-PyTorch-Startup-OnDemand-2"]) == row(
        "DGX_B300-8_GPUs-PyTorch-Startup-OnDemand-2", "auto:dgx-b300-flex",
        "l0_startup_ondemand", 2, 3, 8, 1, True, map=SLURM)
    notes = [d.message for d in diags]
    assert any("x86TestConfigs: 2 stage row(s)" in m and "pod-config flag" in m for m in notes)
    assert any(f"{SLURM}: 1 stage row(s)" in m and "field 9 of 9" in m for m in notes)


# Each shape: (the row, the map) -> the stage read, or the error. An added field is at worst
# a note and never loses the stage (the TRAP: a field read at the wrong position would have
# made True a node count and dropped the stage); a field the tool reads with the wrong type
# stays an error (the GUARDED case: the stage's facts would be wrong).
ROWS = [
    ("k8s 6th bool", "x86TestConfigs", '["p", "c", 1, 1, 2, true]',
     row("S-1", "p", "c", 1, 1, 2), Severity.INFO),
    ("k8s 6th int", "x86TestConfigs", '["p", "c", 1, 1, 2, 3]',
     row("S-1", "p", "c", 1, 1, 2), Severity.INFO),
    ("k8s 7 fields", "x86TestConfigs", '["p", "c", 1, 1, 2, true, "x"]',
     row("S-1", "p", "c", 1, 1, 2), Severity.INFO),
    ("slurm 6th is the node count", SLURM, '["p", "c", 1, 1, 2, 3]',
     row("S-1", "p", "c", 1, 1, 2, 3, map=SLURM), None),
    ("slurm 9 fields", SLURM, '["p", "c", 1, 1, 2, 1, true, false, 7]',
     row("S-1", "p", "c", 1, 1, 2, 1, True, map=SLURM), Severity.INFO),
    ("slurm node count a boolean", SLURM, '["p", "c", 1, 1, 2, true]', None, Severity.ERROR),
    ("k8s gpu count a boolean", "x86TestConfigs", '["p", "c", 1, 1, true]', None,
     Severity.ERROR),
]


@pytest.mark.parametrize(("map_name", "fields", "expected", "severity"),
                         [r[1:] for r in ROWS], ids=[r[0] for r in ROWS])
def test_row_fields_by_the_maps_consumer(map_name: str, fields: str,
                                         expected: tuple[object, ...] | None,
                                         severity: Severity | None) -> None:
    text = wrap(f'{map_name} = [\n    "S-1": {fields},\n    "S-2": ["p", "c", 1, 1],\n]')
    stages, diags = load_groovy_stages_text(text, PATH)
    names = [s.name for s in stages]
    assert "S-2" in names  # a neighbour always survives
    assert [key(s) for s in stages if s.name == "S-1"] == ([expected] if expected else [])
    assert [d.severity for d in diags] == ([severity] if severity else [])
    if severity is not None:
        assert diags[0].loc.line == 4  # the row's own line


def test_a_commented_out_row_with_a_wrong_field_is_a_warning_and_disabled_rows_get_no_note(
        ) -> None:
    text = wrap('x86SlurmTestConfigs = [\n    "S-2": ["p", "c", 1, 1],\n'
                '    // "S-1": ["p", "c", 1, 1, 2, true],\n'
                '    // "S-3": ["p", "c", 1, 1, 2, 1, true, false, 9],\n]')
    stages, diags = load_groovy_stages_text(text, PATH)
    assert [(s.name, s.disabled) for s in stages] == [("S-2", False), ("S-3", True)]
    assert [(d.severity, "commented-out" in d.message) for d in diags] == [
        (Severity.WARNING, True)]
