"""Slurm backend settings and what they turn into: sbatch options and the job script."""

from __future__ import annotations

import fnmatch
import shlex
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any, get_type_hints

from auditor.launch.model import RunItem
from testdb.errors import InputError, SourceLoc

_RULE_KEYS = ("partition", "constraint", "account")
SHAPE = ("expected: gpu_types: {GPU_TYPE_PATTERN: {partition: P, constraint: C, account: A}} "
         "and options (docs/launch.md, Slurm)")
Where = Callable[..., "SourceLoc | None"]
"""Where a key path (``"gpu_types"``, ``pattern``) is in the file the config came from."""


def _nowhere(*_keys: str) -> SourceLoc | None:
    return None


@dataclass(frozen=True)
class PartitionRule:
    """Where jobs for GPUs matching ``pattern`` (fnmatch, case-insensitive) go."""

    pattern: str
    partition: str | None = None
    constraint: str | None = None
    account: str | None = None

    def matches(self, gpu_type: str | None) -> bool:
        return fnmatch.fnmatch((gpu_type or "").lower(), self.pattern.lower())


@dataclass(frozen=True)
class SlurmConfig:
    gpu_types: tuple[PartitionRule, ...] = ()
    """First matching rule wins; an item whose GPU type matches none gets the cluster defaults."""
    time_margin_minutes: int = 10
    """Added to the item's timeout for ``--time``: the test's own timeout should fire first."""
    requeue_preempted: bool = False
    """Requeue a PREEMPTED job once with ``scontrol requeue`` instead of reporting it."""
    poll_interval_s: float = 10.0
    junit_grace_s: float = 30.0
    """How long a finished job's JUnit may take to appear on a shared file system."""
    sacct_grace_polls: int = 3
    """Polls to wait for a finished job's accounting record before asking scontrol."""
    max_poll_failures: int = 5
    """Consecutive failed squeue calls tolerated while waiting (slurmctld restarts happen)."""
    job_name_prefix: str = "testdb-"
    gres_name: str = "gpu"
    extra_args: tuple[str, ...] = ()
    """More sbatch options for every job, e.g. ``("--qos=ci", "--cpus-per-gpu=8")``."""

    @classmethod
    def from_mapping(cls, gpu_types: Mapping[str, Mapping[str, Any]] | None = None,
                     where: Where = _nowhere, **options: Any) -> SlurmConfig:
        """Build from the user's ``{gpu_type_pattern: {partition, constraint, account}}``;
        ``where`` places a wrong key in its file (a config read by ``load``)."""
        if gpu_types is not None and not isinstance(gpu_types, Mapping):
            raise InputError(f"slurm gpu_types: expected a mapping, got {gpu_types!r}",
                             where("gpu_types"), hint=SHAPE)
        rules = []
        for pattern, spec in (gpu_types or {}).items():
            if not isinstance(spec, Mapping):
                raise InputError(f"slurm gpu type {pattern!r}: expected a mapping, got {spec!r}",
                                 where("gpu_types", str(pattern)), hint=SHAPE)
            unknown = sorted(set(spec) - set(_RULE_KEYS))
            if unknown:
                raise InputError(f"slurm gpu type {pattern!r}: unknown key(s) {', '.join(unknown)}",
                                 where("gpu_types", str(pattern)),
                                 hint=f"allowed: {', '.join(_RULE_KEYS)}")
            rules.append(PartitionRule(str(pattern), *(
                None if spec.get(k) in (None, "") else str(spec[k]) for k in _RULE_KEYS)))
        known = {f.name for f in fields(cls)} - {"gpu_types"}
        unknown = sorted(set(options) - known)
        if unknown:
            raise InputError(f"unknown slurm option(s) {', '.join(unknown)}", where(unknown[0]),
                             hint=f"allowed: {', '.join(sorted(known))}")
        for name, value in options.items():
            problem = _type_problem(_OPTION_TYPES[name], value)
            if problem:
                raise InputError(f"slurm option {name}: expected {problem}, got {value!r}",
                                 where(name), hint=SHAPE)
        if "extra_args" in options:
            options["extra_args"] = tuple(str(a) for a in options["extra_args"])
        return cls(gpu_types=tuple(rules), **options)

    def rule_for(self, gpu_type: str | None) -> PartitionRule | None:
        return next((r for r in self.gpu_types if r.matches(gpu_type)), None)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["gpu_types"] = {r.pattern: {k: getattr(r, k) for k in _RULE_KEYS}
                             for r in self.gpu_types}
        data["extra_args"] = list(self.extra_args)
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> SlurmConfig:
        options = dict(data)
        return cls.from_mapping(options.pop("gpu_types", None), **options)


_OPTION_TYPES = {k: v for k, v in get_type_hints(SlurmConfig).items() if k != "gpu_types"}


def _type_problem(kind: Any, value: Any) -> str:
    """What ``value`` should have been for an option annotated ``kind`` (empty: it is fine).
    YAML gives bools for yes/no and ints for 10, so bool is checked before int."""
    if kind is bool:
        return "" if isinstance(value, bool) else "true or false"
    if kind is int:
        return "" if isinstance(value, int) and not isinstance(value, bool) else "an integer"
    if kind is float:
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
        return "" if ok else "a number"
    if kind is str:
        return "" if isinstance(value, str) else "a string"
    ok = isinstance(value, (list, tuple)) and all(isinstance(a, (str, int, float)) for a in value)
    return "" if ok else "a list of strings"


def load(path: str) -> SlurmConfig:
    """The config in the YAML file ``path``; a wrong shape is an InputError at its line."""
    import yaml

    from testdb.files import read_text

    text = read_text(path)
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        raise InputError(f"malformed YAML: {exc}",
                         SourceLoc(path, mark.line + 1 if mark else 0)) from None
    if data is None:
        return SlurmConfig()
    if not isinstance(data, dict) or not isinstance(node, yaml.MappingNode):
        line = node.start_mark.line + 1 if node is not None else 1
        raise InputError(f"slurm config must be a mapping, got {data!r}", SourceLoc(path, line),
                         hint=SHAPE)
    lines = _key_lines(node)

    def where(*keys: str) -> SourceLoc:
        return SourceLoc(path, next((lines[k] for k in (keys, keys[:1]) if k in lines), 1))

    return SlurmConfig.from_mapping(data.pop("gpu_types", None), where=where, **data)


def _key_lines(node: Any) -> dict[tuple[str, ...], int]:
    """The 1-based line of each top-level key and of each key one level under gpu_types."""
    import yaml

    out: dict[tuple[str, ...], int] = {}
    for key, value in node.value:
        name = str(key.value)
        out[(name,)] = key.start_mark.line + 1
        if name == "gpu_types" and isinstance(value, yaml.MappingNode):
            for sub, _ in value.value:
                out[(name, str(sub.value))] = sub.start_mark.line + 1
    return out


def time_limit_minutes(item: RunItem, config: SlurmConfig) -> int:
    return item.timeout_minutes + max(0, config.time_margin_minutes)


def sbatch_argv(item: RunItem, config: SlurmConfig, script: Path, log: Path) -> tuple[str, ...]:
    argv = ["sbatch", "--parsable", f"--job-name={config.job_name_prefix}{item.key}",
            f"--output={log}", f"--time={time_limit_minutes(item, config)}"]
    if item.gpus > 0:
        argv.append(f"--gres={config.gres_name}:{item.gpus}")
    rule = config.rule_for(item.gpu_type)
    if rule is not None:
        argv += [f"--{k}={getattr(rule, k)}" for k in _RULE_KEYS if getattr(rule, k)]
    argv += config.extra_args
    argv.append(str(script))
    return tuple(argv)


def sbatch_dry_run(item: RunItem, config: SlurmConfig, run_dir: Path, shell_line: str) -> str:
    """The sbatch call a launch would make, as one line a shell accepts: the same options
    (partition, gres, time, ...), the job's command passed with ``--wrap`` instead of the
    script file a real launch writes first."""
    argv = list(sbatch_argv(item, config, run_dir / "scripts" / f"{item.key}.sh",
                            run_dir / "logs" / f"{item.key}.log"))
    argv[-1] = f"--wrap={shell_line}"
    return shlex.join(argv)


def job_script(item: RunItem, junit: Path) -> str:
    """The batch script: go to the item's directory, set its environment, become the command.

    Written to a file rather than passed with --wrap so that a person can read and re-run
    exactly what the job ran.
    """
    exports = "".join(f"export {k}={shlex.quote(v)}\n" for k, v in item.env)
    return (
        "#!/bin/bash\n"
        f"# testdb-audit run {item.key}: {item.test_id.replace(chr(10), ' ')}\n"
        f"cd {shlex.quote(item.cwd)} || "
        f"{{ echo {shlex.quote(f'testdb-audit: cannot cd to {item.cwd}')}; exit 97; }}\n"
        f"{exports}"
        'echo "# testdb-audit: job ${SLURM_JOB_ID:-?} on $(hostname)'
        ' CUDA_VISIBLE_DEVICES=${CUDA_VISIBLE_DEVICES-}"\n'
        f"exec {shlex.join(item.command(str(junit)))}\n"
    )
