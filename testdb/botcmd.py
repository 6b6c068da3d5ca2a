"""Parse a PR comment's ``/bot run ...`` command into a typed record (trtllm-ci.md sec. 7).

Grammar (tokens are shell-like words: bare text, ``"..."`` or ``'...'``, concatenated until an
unquoted blank; a backslash outside single quotes takes the next character literally)::

    command  := "/bot" "run" option*
    option   := LIST_OPT list | FLAG | "--reuse-test" [pipeline-id] | LIST_OPT "=" list
    LIST_OPT := "--stage-list" | "--extra-stage" | "--gpu-type" | "--test-backend"
    FLAG     := "--add-multi-gpu-test" | "--disable-multi-gpu-test" | "--only-multi-gpu-test"
              | "--multi-gpu-test" | "--post-merge" | "--skip-test" | "--disable-cbts"
              | "--disable-fail-fast" | "--detailed-log" | "--debug"
              | "--disable-reuse-test" | "--high-priority"
    list     := word                 (split at commas, items trimmed, empty items dropped)

``--stage-list`` and ``--extra-stage`` items may hold ``*`` wildcards. ``--reuse-test``,
``--disable-fail-fast``, ``--detailed-log``, ``--debug``, ``--disable-reuse-test`` (the PR
template at cb044ee3) and ``--high-priority`` (the CBTS docs) do not change which stages start:
they are accepted and noted. ``--disable-cbts`` (``DISABLE_CBTS`` in L0_MergeRequest.groovy at
11ea7cc3, "forces a full run") turns change-based test selection off (``testdb.cbts``).
``--multi-gpu-test`` is the bot key ``multi_gpu_test`` that L0_MergeRequest.groovy (11ea7cc3,
``ENABLE_MULTI_GPU_TEST``) ORs into ``only_multi_gpu_test``. A repeated option keeps its last
value (argparse's ``store``).
Anything else (an unknown flag, a stray word, an unbalanced quote, a list option without a
list) is an :class:`BotCommandError` that names it and its column: exit 2.

Hand-written in the manner of pytest's ``_pytest/mark/expression.py`` (a scanner with
positions) because ``shlex`` reports neither the column of an unbalanced quote nor where each
word began, and the error must point at both.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from testdb.errors import InputError, SourceLoc

LIST_OPTIONS = {"--stage-list": "stage_list", "--extra-stage": "extra_stage",
                "--gpu-type": "gpu_type", "--test-backend": "test_backend"}
SET_FLAGS = {"--add-multi-gpu-test": "add_multi_gpu", "--disable-multi-gpu-test":
             "disable_multi_gpu", "--only-multi-gpu-test": "only_multi_gpu",
             # L0_MergeRequest (11ea7cc3): only_multi_gpu_test || multi_gpu_test, either key.
             "--multi-gpu-test": "only_multi_gpu", "--post-merge": "post_merge",
             "--skip-test": "skip_test", "--disable-cbts": "disable_cbts"}
NOTED_FLAGS = ("--reuse-test", "--disable-fail-fast", "--detailed-log", "--debug",
               "--disable-reuse-test", "--high-priority")
KNOWN = (*LIST_OPTIONS, *SET_FLAGS, *NOTED_FLAGS)


class BotCommandError(InputError):
    """A ``/bot`` command that the bot would not accept; ``column`` is 1-based."""

    def __init__(self, message: str, column: int, hint: str = "") -> None:
        self.column = column
        super().__init__(f"column {column}: {message}", SourceLoc("--bot-command"), hint)


@dataclass(frozen=True)
class Word:
    text: str
    column: int  # 1-based column of its first character in the command text


@dataclass(frozen=True)
class BotCommand:
    """What one ``/bot run`` asks of the pipeline; ``text`` is the command as given."""

    text: str = "/bot run"
    stage_list: tuple[str, ...] | None = None  # replaces the stage set (patterns, ``*``)
    extra_stage: tuple[str, ...] | None = None  # added to the stage set (patterns, ``*``)
    add_multi_gpu: bool = False
    disable_multi_gpu: bool = False
    only_multi_gpu: bool = False
    post_merge: bool = False
    gpu_type: tuple[str, ...] | None = None
    test_backend: tuple[str, ...] | None = None
    skip_test: bool = False
    disable_cbts: bool = False  # change-based test selection off: every started stage runs
    noted: tuple[str, ...] = field(default=())  # accepted flags that start no other stages

    def to_json(self) -> dict[str, object]:
        return {"text": self.text, "stage_list": _list(self.stage_list),
                "extra_stage": _list(self.extra_stage), "add_multi_gpu": self.add_multi_gpu,
                "disable_multi_gpu": self.disable_multi_gpu,
                "only_multi_gpu": self.only_multi_gpu, "post_merge": self.post_merge,
                "gpu_type": _list(self.gpu_type), "test_backend": _list(self.test_backend),
                "skip_test": self.skip_test, "disable_cbts": self.disable_cbts,
                "noted": list(self.noted)}


def render(cmd: BotCommand) -> str:
    """The command as one canonical line (``--reuse-test`` left out: its id is not kept)."""
    out = ["/bot run"]
    for flag, attr in LIST_OPTIONS.items():
        items = getattr(cmd, attr)
        if items is not None:
            out.append(f'{flag} "{", ".join(items)}"')
    seen = set()
    for flag, attr in SET_FLAGS.items():
        if getattr(cmd, attr) and attr not in seen:
            seen.add(attr)
            out.append(flag)
    out += [f for f in cmd.noted if f != "--reuse-test"]
    return " ".join(out)


def _list(v: tuple[str, ...] | None) -> list[str] | None:
    return None if v is None else list(v)


def scan(text: str) -> list[Word]:
    """Shell-like words with their columns; an unbalanced quote raises at its column."""
    words: list[Word] = []
    i, n = 0, len(text)
    while i < n:
        if text[i].isspace():
            i += 1
            continue
        start, buf = i, []
        while i < n and not text[i].isspace():
            c = text[i]
            if c in "\"'":
                end = i + 1
                while end < n and text[end] != c:
                    if c == '"' and text[end] == "\\" and end + 1 < n:
                        end += 1
                    end += 1
                if end >= n:
                    raise BotCommandError(f"unbalanced {c} (opened here, never closed)", i + 1,
                                          f"close the quote: {c}...{c}")
                body = text[i + 1:end]
                buf.append(body.replace('\\"', '"').replace("\\\\", "\\") if c == '"'
                           else body)
                i = end + 1
            elif c == "\\" and i + 1 < n:
                buf.append(text[i + 1])
                i += 2
            else:
                buf.append(c)
                i += 1
        words.append(Word("".join(buf), start + 1))
    return words


def split_list(value: str) -> tuple[str, ...]:
    """``"A10-PyTorch-1, xxx"`` -> ``("A10-PyTorch-1", "xxx")``."""
    return tuple(item.strip() for item in value.split(",") if item.strip())


def parse(text: str) -> BotCommand:
    """The record of one ``/bot run`` command, or BotCommandError naming what is wrong."""
    words = scan(text)
    if len(words) < 2 or words[0].text != "/bot" or words[1].text != "run":
        col = words[0].column if words else 1
        got = " ".join(w.text for w in words[:2]) or "nothing"
        raise BotCommandError(f"expected `/bot run`, got {got!r}", col,
                              "only `/bot run ...` starts a pipeline (kill, skip and "
                              "reuse-pipeline start none)")
    values: dict[str, object] = {}
    noted: list[str] = []
    i = 2
    while i < len(words):
        w = words[i]
        name, eq, inline = w.text.partition("=")
        if name in LIST_OPTIONS:
            if eq:
                raw, col = inline, w.column + len(name) + 1
            elif i + 1 < len(words) and not words[i + 1].text.startswith("--"):
                i += 1
                raw, col = words[i].text, words[i].column
            else:
                raise BotCommandError(f"{name} needs a list, e.g. {name} \"A, B\"",
                                      w.column + len(w.text))
            items = split_list(raw)
            if not items:
                raise BotCommandError(f"{name} got an empty list", col,
                                      "name at least one item, comma-separated")
            values[LIST_OPTIONS[name]] = items
        elif eq and name in (*SET_FLAGS, *NOTED_FLAGS) and name != "--reuse-test":
            raise BotCommandError(f"{name} takes no value", w.column + len(name))
        elif w.text in SET_FLAGS:
            values[SET_FLAGS[w.text]] = True
        elif name == "--reuse-test":
            # An optional pipeline id follows (the bot's help: `--reuse-test (optional)id`).
            if not eq and i + 1 < len(words) and not words[i + 1].text.startswith("--"):
                i += 1
            noted.append("--reuse-test")
        elif w.text in NOTED_FLAGS:
            noted.append(w.text)
        elif w.text.startswith("-"):
            raise BotCommandError(f"unknown flag {w.text}", w.column,
                                  "the bot accepts " + ", ".join(KNOWN))
        else:
            raise BotCommandError(f"unexpected word {w.text!r}", w.column,
                                  "quote a list that holds blanks: --extra-stage \"A, B\"")
        i += 1
    return BotCommand(text=" ".join(text.split()), noted=tuple(dict.fromkeys(noted)),
                      **values)  # type: ignore[arg-type]
