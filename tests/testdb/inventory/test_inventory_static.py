"""Static scanning details that need no pytest run: bases, aliases, the decorator memo."""

from __future__ import annotations

import textwrap

from testdb.inventory import Inventory, StaticConfig, scan_source


def scan(src: str, file_id: str = "accuracy/test_x.py", **kw: object) -> Inventory:
    return Inventory(scan_source(textwrap.dedent(src), file_id, dirs=("accuracy",),
                                 **kw))  # type: ignore[arg-type]


HARNESS = """
    import pytest
    from ..conftest import parametrize_with_ids, skip_pre_hopper
    from .accuracy_core import LlmapiAccuracyTestHarness
    from .elsewhere import SomeBase

    class TestLlama(LlmapiAccuracyTestHarness):
        @skip_pre_hopper
        @parametrize_with_ids("attn_backend", ["TRTLLM", "FLASHINFER"])
        def test_chunked_prefill(self, attn_backend):
            pass

    class TestOther(SomeBase):
        def test_own(self):
            pass
"""


def test_relative_helper_import_and_known_bases() -> None:
    inv = scan(HARNESS)
    assert inv.status("accuracy/test_x.py::TestLlama::test_chunked_prefill"
                      "[attn_backend=FLASHINFER]") == "present"
    # the accuracy harness is known to add no tests: a typo is absent, not unknowable
    assert inv.status("accuracy/test_x.py::TestLlama::test_chunked_prefil[x]") == "absent"
    # an unknown imported base may define tests we cannot see
    assert inv.status("accuracy/test_x.py::TestOther::test_inherited") == "indeterminate"
    assert inv.status("accuracy/test_x.py::TestOther::test_own") == "present"
    strict = scan(HARNESS, config=StaticConfig(plain_bases=()))
    assert strict.status("accuracy/test_x.py::TestLlama::test_typo") == "indeterminate"


def test_memo_does_not_leak_constants_between_modules() -> None:
    a = scan("""
        import pytest
        VALUES = [1, 2]

        @pytest.mark.parametrize("v", VALUES)
        def test_v(v):
            pass
    """, "test_a.py")
    b = scan("""
        import pytest
        VALUES = ["x"]

        @pytest.mark.parametrize("v", VALUES)
        def test_v(v):
            pass
    """, "test_b.py")
    assert [i.params for i in a] == ["1", "2"]
    assert [i.params for i in b] == ["x"]


def test_memo_respects_import_aliases() -> None:
    a = scan("""
        import pytest as pt

        @pt.mark.parametrize("v", [1])
        def test_v(v):
            pass
    """, "test_a.py")
    b = scan("""
        import something_else as pt

        @pt.mark.parametrize("v", [1])
        def test_v(v):
            pass
    """, "test_b.py")
    assert [i.nodeid for i in a] == ["test_a.py::test_v[1]"]
    assert [i.nodeid for i in b] == ["test_b.py::test_v"]  # not pytest: no parametrization


def test_constant_defined_after_use_is_not_read() -> None:
    inv = scan("""
        import pytest

        @pytest.mark.parametrize("v", LATER)
        def test_v(v):
            pass

        LATER = [1]
    """)
    assert [(i.nodeid, i.indeterminate) for i in inv] == [("accuracy/test_x.py::test_v", True)]


def test_marks_through_module_aliases_and_keywords() -> None:
    inv = scan("""
        import pytest
        from pytest import mark

        gpu2 = pytest.mark.gpu2

        @gpu2
        @mark.part3
        class TestA:
            def test_a(self):
                pass
    """)
    item = inv.items[0]
    assert item.markers == ("part3", "gpu2")
    assert set(item.keywords) == {"test_a", "TestA", "test_x.py", "accuracy", "part3", "gpu2"}


def test_non_ascii_source_offsets() -> None:
    inv = scan("""
        import pytest
        X = "é"  # a multi-byte character before the decorators shifts byte offsets

        @pytest.mark.parametrize("v", ["ü", "a"])
        def test_v(v):
            pass
    """)
    assert [i.params for i in inv] == ["\\xfc", "a"]
