"""The warm answer to ``testdb [--root DIR] stats [--format text|json]``, before click loads.

A warm ``testdb stats`` is a stat stamp and one small cache file; importing click (and the
records a loaded index needs) cost several times more than that. So before click is
imported, a command line of that plain shape is answered here when the stamp proves the plan
unchanged and its stats are cached. Anything else (another option, ``--help``, a cold cache, a
changed plan) goes to click, which gives the same answer and fills the cache. The shape is
matched by hand: no parser library is lighter to import than the answer itself.

Both doors into the command line use it: the console script (``reports.entry``) and the
in-process ``reports.cli.main``; it imports neither, so they do not import each other.
"""

from __future__ import annotations

import os
import sys

# The group's options a user may also write after the command (`testdb audit --root X`):
# click reads a group's options only before the command name, and said "No such option".
GLOBAL_VALUED = ("--root", "--stages", "--triggers", "--platform-facts")
GLOBAL_FLAGS = ("--no-cache",)


def command_at(args: list[str]) -> int:
    """Where the command name is in ``args``: after the group options and their values."""
    at = 0
    while at < len(args) and args[at].startswith("-"):
        at += 2 if args[at] in GLOBAL_VALUED else 1
    return at


def hoist_globals(args: list[str], command_opts: frozenset[str] = frozenset()) -> list[str]:
    """``args`` with the group options found after the command moved in front of it (with
    their values), as click expects; an option the command defines itself, and anything after
    ``--``, stay where they are. Only the first word that is not a group option (or a value of
    one) is taken as the command."""
    at = command_at(args)
    if at >= len(args):
        return list(args)
    front = args[:at]
    rest, moved, i = [args[at]], [], at + 1
    while i < len(args):
        word = args[i]
        name = word.split("=", 1)[0]
        if word == "--":
            rest += args[i:]
            break
        if name in command_opts or name not in (*GLOBAL_VALUED, *GLOBAL_FLAGS):
            rest.append(word)
            i += 1
            continue
        step = 2 if word in GLOBAL_VALUED else 1  # `--root X`; `--root=X` and flags are one
        moved += args[i:i + step]
        i += step
    return [*front, *moved, *rest]


def range_of(argv: list[str]) -> tuple[str, str, str | None] | None:
    """``(root, base, head)`` of ``[group options] audit [options]`` with ``--base`` and no
    ``--diff``, as click will read them; None for any other shape (or when unsure)."""
    args = hoist_globals(argv)
    at = command_at(args)
    if at >= len(args) or args[at] != "audit":
        return None
    root = "."
    i = 0
    while i < at:  # the group options (hoisted in front of the command)
        name, eq, value = args[i].partition("=")
        if name in GLOBAL_VALUED:
            if not eq:
                if i + 1 >= at:
                    return None
                value = args[i + 1]
                i += 1
            if name == "--root":
                root = value
        i += 1
    found: dict[str, str] = {}
    rest = args[at + 1:]
    i = 0
    while i < len(rest):
        word = rest[i]
        if word == "--" or word.startswith("--diff"):
            return None
        name, eq, value = word.partition("=")
        if name in ("--base", "--head"):
            if not eq:
                if i + 1 >= len(rest):
                    return None
                value = rest[i + 1]
                i += 1
            found[name] = value
        i += 1
    if not found.get("--base"):
        return None
    return root, found["--base"], found.get("--head") or None


def answer(argv: list[str]) -> int | None:
    """The exit code after printing the warm answer to ``argv``, or None (nothing printed)
    when there is none: the caller runs the full command line."""
    shape = plain_stats(argv)
    if shape is None:
        return None
    try:
        found = _warm_stats(*shape)
    except Exception:  # whatever went wrong, the full command line answers
        return None
    if found is None:
        return None
    out, err, code = found
    try:
        if err:  # errors before the result, as the full command line prints them
            sys.stderr.write("\n".join(err) + "\n")
            sys.stderr.flush()
        sys.stdout.write(out + "\n")
        sys.stdout.flush()
    except BrokenPipeError:
        return 0
    return code


def plain_stats(argv: list[str]) -> tuple[str, str] | None:
    """``(root, format)`` when ``argv`` is ``[--root DIR] stats [--format text|json]``
    (either ``--opt value`` or ``--opt=value``; ``--root`` also after ``stats``, as click
    takes it: ``hoist_globals``), else None."""
    words = hoist_globals(list(argv))
    root: str | None = "."
    fmt: str | None = "text"
    if words and (words[0] == "--root" or words[0].startswith("--root=")):
        root, words = _value(words)
    if not words or words[0] != "stats":
        return None
    words = words[1:]
    if words and (words[0] == "--format" or words[0].startswith("--format=")):
        fmt, words = _value(words)
    if words or fmt not in ("text", "json") or not root or root.startswith("-"):
        return None
    return root, fmt


def _value(words: list[str]) -> tuple[str | None, list[str]]:
    head = words[0]
    if "=" in head:
        return head.split("=", 1)[1], words[1:]
    return (words[1], words[2:]) if len(words) > 1 else (None, [])


def _warm_stats(root: str, fmt: str) -> tuple[str, list[str], int] | None:
    if not os.path.isdir(root):
        return None
    from testdb.stamp import plan_stamp

    hit = plan_stamp(root).check()
    if hit is None:
        return None
    recorded, key = hit
    if not any(recorded.get(k) for k in ("testdb", "qa_yaml", "qa_txt")):
        return None  # no test lists: the full command line says what is wrong
    from reports.render_stats import checks_names, render
    from testdb.stats import cache_key, cached_stats

    tests = None
    if checks_names(root):
        # Verdicts checked against the test sources: cached under the inventory's key too,
        # which its stamp proves (a changed test file sends the run to click).
        from testdb.inventory.tree import inventory_key

        tests = inventory_key(root)
        if tests is None:
            return None
    cached = cached_stats(cache_key(key, tests), root)
    return None if cached is None else render(*cached, fmt)
