"""Jenkins stages: the record, the YAML stage-table loader, facts from names."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from testdb.errors import Diagnostic, InputError, Severity, SourceLoc

if TYPE_CHECKING:
    import yaml

NO_LOC = SourceLoc("", 0)
MULTI_GPU_RE = re.compile(r"\d+_GPUs")
ON_DEMAND_TAG = "-OnDemand-"
_BACKENDS = (("-PyTorch-", "pytorch"), ("-CPP-", "cpp"), ("-Triton-", "triton"),
             ("-FMHA-", "fmha"), ("-AutoDeploy-", "autodeploy"), ("-Generic-", "generic"),
             ("-Verl-", "verl"), ("-TensorRT-", "tensorrt"))
_AUTO_TRIGGERS = (("-DeepSeek-", "deepseek"), ("-GptOss-", "gpt_oss"))
_GPUS_IN_NAME = re.compile(r"-(\d+)_GPUs")


@dataclass(frozen=True)
class Stage:
    """One Jenkins test stage: ``"A10-PyTorch-1": ["a10", "l0_a10", 1, 3]`` and friends."""

    name: str
    platform: str
    context: str
    split_id: int = 1
    splits: int = 1
    gpu_count: int = 1
    node_count: int = 1
    run_with_sbatch: bool = False
    use_cluster_durations: bool = False
    map: str = ""
    arch: str = "x86_64"
    loc: SourceLoc = NO_LOC
    disabled: bool = False

    @property
    def gpu_type(self) -> str:
        """The first ``-`` token of the name: what ``--gpu-type`` and ``full:GPU/`` compare."""
        return self.name.split("-", 1)[0]

    @property
    def is_post_merge(self) -> bool:
        return "Post-Merge" in self.name

    @property
    def is_multi_gpu(self) -> bool:
        return bool(MULTI_GPU_RE.search(self.name))

    @property
    def is_on_demand(self) -> bool:
        """``-OnDemand-`` (L0_Test.groovy at aebac710): out of every automatic selection;
        only ``/bot run --stage-list`` or ``--extra-stage`` starts it."""
        return ON_DEMAND_TAG in self.name

    @property
    def is_perf(self) -> bool:
        return "-Perf-" in self.name

    @property
    def is_cpu(self) -> bool:
        return self.name.startswith("CPU-")

    @property
    def is_slurm(self) -> bool:
        return self.run_with_sbatch or self.platform.startswith("auto:") or "Slurm" in self.map


@dataclass(frozen=True)
class Fact:
    """A value a stage is known (or only assumed) to have; ``values`` holds aliases."""

    values: tuple[str, ...]
    known: bool = True

    @property
    def value(self) -> str:
        return self.values[0]


def stage_facts(stage: Stage, platform_facts: dict[str, dict[str, object]] | None = None
                ) -> dict[str, Fact]:
    """The facts ``getMakoArgsFromStageName`` and the machine give a stage (trtllm-ci.md sec. 4)."""
    name = stage.name
    facts: dict[str, Fact] = {
        "stage": Fact(("post_merge" if "Post-Merge" in name else "pre_merge",)),
        "auto_trigger": Fact((next((v for k, v in _AUTO_TRIGGERS if k in name), "others"),)),
        "orchestrator": Fact(("ray" if "-Ray-" in name else "mpi",)),
    }
    backend = next((v for k, v in _BACKENDS if k in name), None)
    if backend:
        facts["backend"] = Fact((backend,))
    if stage.is_cpu:
        facts["system_gpu_count"] = Fact(("0",))
        facts["cpu"] = Fact((stage.arch,))
        facts["linux_distribution_name"] = Fact(("ubuntu",))
    else:
        m = _GPUS_IN_NAME.search(name)
        sbatch = stage.run_with_sbatch
        if sbatch:
            facts["gpu"] = Fact((stage.gpu_type,))
            facts["system_gpu_count"] = Fact((m.group(1) if m else "1",))
        else:
            # K8s stages: the machine reports the GPU; the name's first token stands in for it.
            facts["gpu"] = Fact((stage.gpu_type,), known=False)
            facts["system_gpu_count"] = Fact((str(stage.gpu_count),))
        facts["cpu"] = Fact((stage.arch,), known=False)
    for key, value in (platform_facts or {}).get(stage.platform, {}).items():
        vals = tuple(str(v) for v in value) if isinstance(value, list) else (str(value),)
        facts[key] = Fact(vals)
    return facts


_INT_FIELDS = ("split_id", "splits", "gpu_count", "node_count")
_BOOL_FIELDS = ("run_with_sbatch", "use_cluster_durations")


def load_stage_table_text(text: str, path: str) -> tuple[list[Stage], list[Diagnostic]]:
    """A YAML stage table shaped like ``ci/stages.yml`` (``stages:`` and ``disabled:`` lists)."""
    # yaml loads here, not at import: a cached index needs the Stage record but no YAML.
    import yaml

    from testdb.yamlnodes import compose, line_of

    root = compose(text, path)
    diags: list[Diagnostic] = []
    if not isinstance(root, yaml.MappingNode):
        raise InputError("a stage table is a mapping with a `stages:` list", SourceLoc(path, 1))
    top = {str(k.value): v for k, v in root.value}
    if "stages" not in top:
        raise InputError("no `stages:` list in the stage table", SourceLoc(path, 1),
                         "give a YAML file shaped like ci/stages.yml")
    out: list[Stage] = []
    for key, disabled in (("stages", False), ("disabled", True)):
        node = top.get(key)
        if node is None:
            continue
        if not isinstance(node, yaml.SequenceNode):
            raise InputError(f"`{key}` must be a list of stage rows",
                             SourceLoc(path, line_of(node)))
        for item in node.value:
            loc = SourceLoc(path, line_of(item))
            try:
                out.append(_stage_row(item, loc, disabled))
            except InputError as exc:
                diags.append(Diagnostic(exc.loc or loc, Severity.ERROR, exc.bare, "bad-stage"))
    return out, diags


def _stage_row(item: yaml.Node, loc: SourceLoc, disabled: bool) -> Stage:
    import yaml

    if not isinstance(item, yaml.MappingNode):
        raise InputError("a stage row must be a mapping with name, platform and context", loc)
    row = {str(k.value): v.value for k, v in item.value if isinstance(v, yaml.ScalarNode)}
    missing = [f for f in ("name", "context") if not row.get(f)]
    if missing:
        raise InputError(f"stage row lacks {', '.join(missing)}", loc)
    kwargs: dict[str, object] = {}
    for f in _INT_FIELDS:
        if f in row:
            try:
                kwargs[f] = int(row[f])
            except ValueError:
                raise InputError(f"stage {row['name']}: {f} must be an integer, got "
                                 f"{row[f]!r}", loc) from None
    for f in _BOOL_FIELDS:
        if f in row:
            kwargs[f] = str(row[f]).lower() == "true"
    arch = (str(row.get("arch", "")).split() or ["x86_64"])[0]
    return Stage(name=str(row["name"]), platform=str(row.get("platform", "")),
                 context=str(row["context"]), map=str(row.get("map", "")), arch=arch, loc=loc,
                 disabled=disabled, **kwargs)  # type: ignore[arg-type]
