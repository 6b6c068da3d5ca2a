"""The symbol tier links a test to a changed unit only when a name in the test resolves to it
(auditor.resolve): one table of package shapes in TensorRT-LLM's layout, each a trap (a test
that merely spells the name, names the class, calls an unresolved receiver) or its guarded
twin (the test really calls the changed code through a resolved name)."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

import pytest

from auditor import candidates
from auditor.graph import build_graph
from auditor.resolve import Link, Node, Resolver, link_of, reach_of, target_unit

# The package: a re-export chain (tensorrt_llm -> llmapi -> llm), a base class whose method
# a subclass inherits, a subclass that overrides, two classes defining `generate`, a helper
# module that returns an instance, a method only one class defines (`propose`).
PACKAGE = {
    "tensorrt_llm/__init__.py": "from .llmapi import LLM\nfrom . import _torch\n",
    "tensorrt_llm/llmapi/__init__.py": "from .llm import LLM\n",
    "tensorrt_llm/llmapi/llm.py": """\
        class BaseLLM:
            def __init__(self, model):
                self.model = model

            def generate(self, prompts):
                return [self._one(p) for p in prompts]

            def _one(self, prompt):
                return prompt[::-1]


        class _TorchLLM(BaseLLM):
            pass


        LLM = _TorchLLM
        """,
    "tensorrt_llm/_torch/__init__.py": "",
    "tensorrt_llm/_torch/speculative/__init__.py": "from .ngram import NGramDrafter\n",
    "tensorrt_llm/_torch/speculative/ngram.py": """\
        class NGramDrafter:
            def __init__(self, max_draft_len):
                self.max_draft_len = max_draft_len

            def generate(self, tokens):
                return self._match(tokens)

            def propose(self, tokens):
                return tokens[: self.max_draft_len]

            def _match(self, tokens):
                return tokens[-1:]
        """,
    "tensorrt_llm/_torch/speculative/utils.py": """\
        from .ngram import NGramDrafter


        def get_spec_drafter(n):
            return NGramDrafter(n)
        """,
    "tensorrt_llm/_torch/pyexecutor/__init__.py": "",
    "tensorrt_llm/_torch/pyexecutor/resource_manager.py": """\
        class BaseResourceManager:
            def shutdown(self):
                return None


        class KVCacheManager(BaseResourceManager):
            def __init__(self, num_blocks):
                self.num_blocks = num_blocks
                self._setup()

            def _setup(self):
                self.ready = True

            def get_num_kv_blocks(self):
                return self.num_blocks

            def get_attention_window(self):
                return self._window_size() * 2

            def _window_size(self):
                return 64


        class VSWAKVCacheManager(KVCacheManager):
            def get_num_kv_blocks(self):
                return 2 * self.num_blocks

            def _window_size(self):
                return 128
        """,
    "tests/unittest/conftest.py": """\
        import pytest

        from tensorrt_llm._torch.speculative.ngram import NGramDrafter


        @pytest.fixture
        def drafter():
            return NGramDrafter(4)


        @pytest.fixture
        def llm(request):
            return request.getfixturevalue("model")
        """,
}
RM = "tensorrt_llm._torch.pyexecutor.resource_manager"
NGRAM = "tensorrt_llm._torch.speculative.ngram"
LLM_MOD = "tensorrt_llm.llmapi.llm"
# Indented as the bodies below are: dedented with them.
KV_IMPORT = f"        from {RM} import KVCacheManager, VSWAKVCacheManager\n"

# (case, test module body, changed unit, expected link rank: 1 symbol, 2 symbol/2, None)
CASES = [
    # A method through its receiver: an instance built from a resolved class.
    ("instance-calls-method", KV_IMPORT + """
        def test_it():
            mgr = KVCacheManager(4)
            assert mgr.get_attention_window() == 128
        """, f"{RM}:KVCacheManager.get_attention_window", 1),
    # Trap, class named only: the test builds the class and calls another method.
    ("class-named-only", KV_IMPORT + """
        def test_it():
            mgr = KVCacheManager(4)
            assert mgr.get_num_kv_blocks() == 4
        """, f"{RM}:KVCacheManager.get_attention_window", 2),
    # Constructing a class reaches __init__ and what __init__ calls ...
    ("constructor-reaches-init-calls", KV_IMPORT + """
        def test_it():
            assert KVCacheManager(4).num_blocks == 4
        """, f"{RM}:KVCacheManager._setup", 1),
    # ... not every method.
    ("constructor-not-every-method", KV_IMPORT + """
        def test_it():
            assert KVCacheManager(4).num_blocks == 4
        """, f"{RM}:KVCacheManager._window_size", 2),
    # A self. call path: the test calls U, U calls self._window_size().
    ("self-call-path", KV_IMPORT + """
        def test_it():
            assert KVCacheManager(4).get_attention_window() == 128
        """, f"{RM}:KVCacheManager._window_size", 1),
    # Trap, self. dispatch: through the subclass's instance, self._window_size() is its own.
    ("self-call-dispatches-to-override", KV_IMPORT + """
        def test_it():
            assert VSWAKVCacheManager(4).get_attention_window() == 256
        """, f"{RM}:KVCacheManager._window_size", None),
    # An inherited method: the subclass does not override get_attention_window.
    ("inherited-method", KV_IMPORT + """
        def test_it():
            assert VSWAKVCacheManager(4).get_attention_window() == 256
        """, f"{RM}:KVCacheManager.get_attention_window", 1),
    # Trap, overridden method: the subclass's own get_num_kv_blocks runs.
    ("overridden-method", KV_IMPORT + """
        def test_it():
            assert VSWAKVCacheManager(4).get_num_kv_blocks() == 8
        """, f"{RM}:KVCacheManager.get_num_kv_blocks", None),
    # A base class's method through a subclass instance (BaseResourceManager.shutdown).
    ("base-method-via-subclass", KV_IMPORT + """
        def test_it():
            KVCacheManager(4).shutdown()
        """, f"{RM}:BaseResourceManager.shutdown", 1),
    # ClassName.method, called unbound.
    ("class-dot-method", KV_IMPORT + """
        def test_it():
            mgr = KVCacheManager(4)
            assert KVCacheManager.get_attention_window(mgr) == 128
        """, f"{RM}:KVCacheManager.get_attention_window", 1),
    # A parameter with a resolved type annotation.
    ("annotated-parameter", KV_IMPORT + """
        def check(mgr: KVCacheManager):
            return mgr.get_attention_window()

        def test_it():
            assert check(KVCacheManager(4))
        """, f"{RM}:KVCacheManager.get_attention_window", 1),
    # A module-level helper the test calls.
    ("module-helper", KV_IMPORT + """
        def _window():
            return KVCacheManager(4).get_attention_window()

        def test_it():
            assert _window() == 128
        """, f"{RM}:KVCacheManager.get_attention_window", 1),
    # Trap, shared leaf name: `llm.generate()` of the re-exported LLM is not NGramDrafter's.
    ("shared-leaf-name", """
        from tensorrt_llm import LLM

        def test_it():
            llm = LLM("model")
            assert llm.generate(["ab"]) == ["ba"]
        """, f"{NGRAM}:NGramDrafter.generate", None),
    # The re-export chain, an alias and the inherited method: it is BaseLLM.generate.
    ("re-export-chain", """
        from tensorrt_llm import LLM

        def test_it():
            with LLM("model") as llm:
                assert llm.generate(["ab"]) == ["ba"]
        """, f"{LLM_MOD}:BaseLLM.generate", 1),
    # ... and what it calls through self.
    ("re-export-chain-self-call", """
        from tensorrt_llm import LLM

        def test_it():
            assert LLM("model").generate(["ab"]) == ["ba"]
        """, f"{LLM_MOD}:BaseLLM._one", 1),
    # Trap, re-export chain spelled but not called: the test names LLM only.
    ("re-export-named-only", """
        from tensorrt_llm import LLM

        def test_it():
            assert LLM("model").model == "model"
        """, f"{LLM_MOD}:BaseLLM.generate", 2),
    # The guarded twin of shared-leaf-name.
    ("drafter-generate", f"""
        from {NGRAM} import NGramDrafter

        def test_it():
            drafter = NGramDrafter(3)
            assert drafter.generate([1, 2]) == [2]
        """, f"{NGRAM}:NGramDrafter.generate", 1),
    # import a.b as m; m.C()
    ("import-as-module", """
        import tensorrt_llm._torch.speculative.ngram as ng

        def test_it():
            assert ng.NGramDrafter(3).generate([1]) == [1]
        """, f"{NGRAM}:NGramDrafter.generate", 1),
    # from a import b; b.f(): a helper module's function returning an instance.
    ("from-package-import-module", """
        from tensorrt_llm._torch.speculative import utils

        def test_it():
            assert utils.get_spec_drafter(2).generate([1]) == [1]
        """, f"{NGRAM}:NGramDrafter.generate", 1),
    # A package re-export of a class (speculative/__init__.py) and a function-local import.
    ("local-import-reexport", """
        def test_it():
            from tensorrt_llm._torch.speculative import NGramDrafter
            assert NGramDrafter(3).generate([1]) == [1]
        """, f"{NGRAM}:NGramDrafter._match", 1),
    # A fixture from conftest.py above the test: its return value types the parameter.
    ("conftest-fixture", """
        def test_it(drafter):
            assert drafter.generate([1]) == [1]
        """, f"{NGRAM}:NGramDrafter.generate", 1),
    # Trap, unresolved common name: `llm` is a fixture whose value resolves to nothing, and
    # two classes define `generate`.
    ("unresolved-common-name", """
        def test_it(llm):
            assert llm.generate([1])
        """, f"{NGRAM}:NGramDrafter.generate", 2),
    # An unresolved receiver, but only one class defines the name: linked by that name.
    ("unresolved-unique-name", """
        def test_it(llm):
            assert llm.propose([1, 2])
        """, f"{NGRAM}:NGramDrafter.propose", 1),
    # A receiver that resolves to nothing further down a chain (an attribute no method sets):
    # every call after it is by name; `generate` is two units', `propose` one's.
    ("unresolved-down-a-chain", KV_IMPORT + """
        def test_it():
            KVCacheManager(4).pool.generate([1]).propose([2])
        """, f"{NGRAM}:NGramDrafter.propose", 1),
    # Trap, spelling only: the test module's own function of the same name.
    ("own-function-same-name", """
        def get_attention_window():
            return 1

        def test_it():
            assert get_attention_window() == 1
        """, f"{RM}:KVCacheManager.get_attention_window", None),
    # A test method: self.helper() of the test class reaches the code.
    ("test-class-self-helper", KV_IMPORT + """
        class TestKV:
            def _mgr(self):
                return KVCacheManager(4)

            def test_it(self):
                assert self._mgr().get_attention_window() == 128
        """, f"{RM}:KVCacheManager.get_attention_window", 1),
]


def _tree(root: Path, test_body: str) -> None:
    for rel, text in {**PACKAGE, "tests/unittest/test_case.py": test_body}.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(textwrap.dedent(text))


def _link(root: Path, test: str, target: str) -> Link | None:
    graph = build_graph(str(root), use_cache=False)
    resolver = Resolver(graph.modules, graph.definers())
    mod, q = "tests.unittest.test_case", test
    cls = q.rpartition(".")[0]
    start = Node(mod, q, f"{mod}:{cls}" if cls else "")
    reach = reach_of(resolver, start,
                     lambda m: bool(candidates.test_file_id(graph.modules[m].path)))
    tmod, tq = target.split(":", 1)
    assert target_unit(graph.modules, tmod, tq) == target  # the changed unit exists
    return link_of(reach, target, resolver)


@pytest.mark.parametrize(("body", "target", "rank"),
                         [pytest.param(b, t, r, id=c) for c, b, t, r in CASES])
def test_a_test_links_only_what_its_names_resolve_to(tmp_path: Path, body: str, target: str,
                                                     rank: int | None) -> None:
    _tree(tmp_path, body)
    test = "TestKV.test_it" if "class TestKV" in body else "test_it"
    got = _link(tmp_path, test, target)
    assert (got.rank if got else None) == rank, got


def test_the_reasons_name_the_path_and_the_weak_cause(tmp_path: Path) -> None:
    _tree(tmp_path, dict((c, b) for c, b, _, _ in CASES)["self-call-path"])
    got = _link(tmp_path, "test_it", f"{RM}:KVCacheManager._window_size")
    assert got == Link(1, "calls KVCacheManager.get_attention_window -> "
                          "KVCacheManager._window_size")
    _tree(tmp_path, dict((c, b) for c, b, _, _ in CASES)["unresolved-common-name"])
    got = _link(tmp_path, "test_it", f"{NGRAM}:NGramDrafter.generate")
    assert got == Link(2, "an unresolved call of generate, a name 2 units define")
    _tree(tmp_path, dict((c, b) for c, b, _, _ in CASES)["class-named-only"])
    got = _link(tmp_path, "test_it", f"{RM}:KVCacheManager.get_attention_window")
    assert got == Link(2, "names KVCacheManager without a call that reaches "
                          "KVCacheManager.get_attention_window")


def test_the_call_graph_is_depth_bounded(tmp_path: Path) -> None:
    """A chain of helpers longer than MAX_DEPTH calls is not followed to its end."""
    from auditor.resolve import MAX_DEPTH

    hops = "\n".join(f"def f{i}():\n    return f{i + 1}()\n" for i in range(MAX_DEPTH + 2))
    PACKAGE_DEEP = {"tensorrt_llm/deep.py": hops + f"def f{MAX_DEPTH + 2}():\n    return 1\n"}
    for rel, text in PACKAGE_DEEP.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    _tree(tmp_path, "from tensorrt_llm.deep import f0\n\ndef test_it():\n    f0()\n")
    assert _link(tmp_path, "test_it", f"tensorrt_llm.deep:f{MAX_DEPTH - 1}") is not None
    assert _link(tmp_path, "test_it", f"tensorrt_llm.deep:f{MAX_DEPTH + 2}") is None


def test_a_local_bound_to_several_classes_reaches_what_each_reaches(tmp_path: Path) -> None:
    _tree(tmp_path, KV_IMPORT + f"""
        from {NGRAM} import NGramDrafter

        def test_it():
            obj = NGramDrafter(2)
            obj.propose([1])
            obj = KVCacheManager(4)
            obj.get_attention_window()
        """)
    for target in (f"{RM}:KVCacheManager.get_attention_window", f"{NGRAM}:NGramDrafter.propose"):
        got = _link(tmp_path, "test_it", target)
        assert got is not None and got.rank == 1, target


def _facts(g: Any) -> tuple[object, ...]:
    return ({m: (i.bindings, i.stars, i.code, i.bases, i.fixtures)
             for m, i in g.modules.items()}, g.definers())


def test_the_plain_form_keeps_the_resolvers_facts_and_old_shapes_are_misses(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import marshal
    import pickle

    import testdb.stamp
    from auditor import graph as graph_mod
    from testdb.files import write_cache

    monkeypatch.setenv("TESTDB_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(testdb.stamp, "RACY_NS", -10**12)
    root = tmp_path / "tree"
    _tree(root, dict((c, b) for c, b, _, _ in CASES)["conftest-fixture"])
    cold = build_graph(str(root))
    warm = build_graph(str(root))
    assert cold.graph is not None and warm.graph is None  # the second read the plain form
    assert _facts(warm) == _facts(cold) == _facts(build_graph(str(root), use_cache=False))
    # A scan cache or a plain form of the shape before the resolver's facts is a miss.
    cache = graph_mod._GraphCache(str(root))
    assert cache.entries  # the scans were kept
    old = {rel: (digest, graph_mod.ModuleInfo(info.path, info.module))
           for rel, (digest, info) in cache.entries.items()}
    write_cache(cache.path, pickle.dumps((1, old)), keep=32)
    assert graph_mod._GraphCache(str(root)).entries == {}
    (plain,) = (tmp_path / "cache").glob("graphplain-*")
    write_cache(str(plain), marshal.dumps((1, {}, {}, {}, {})), keep=4)
    assert graph_mod._read_plain(str(plain)) is None


@pytest.mark.parametrize(("text", "target", "rank"), [
    ("class A:\n    def __init__(self):\n        self.x = self.x.copy()\n"
     "    def m(self):\n        return self.x.y()\n", "A.m", 1),
    # A loops to nothing: ``a.m()`` is an unresolved call, of the one unit named m.
    ("from tensorrt_llm.cyc import B as A\nB = A\ndef m():\n    return 1\n", "m", 1),
    ("class A(B):\n    pass\nclass B(A):\n    def m(self):\n        return self.m()\n",
     "B.m", 1),
], ids=["self-attribute-of-itself", "alias-cycle", "base-cycle"])
def test_cycles_resolve_and_end(tmp_path: Path, text: str, target: str, rank: int | None
                                ) -> None:
    """Cycles in what a name stands for end (unknown where they loop), and what does resolve
    still links."""
    (tmp_path / "tensorrt_llm").mkdir()
    (tmp_path / "tensorrt_llm/cyc.py").write_text(text)
    _tree(tmp_path, """
        from tensorrt_llm.cyc import A, B

        def test_it():
            a = A()
            a.m()
            B().m()
        """)
    got = _link(tmp_path, "test_it", f"tensorrt_llm.cyc:{target}")
    assert (got.rank if got else None) == rank
