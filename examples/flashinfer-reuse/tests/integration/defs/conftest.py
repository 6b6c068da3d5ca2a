"""Shared pytest helpers (reduced from TensorRT-LLM's defs/conftest.py)."""
import pytest


def parametrize_with_ids(argnames, argvalues, **kwargs):
    """pytest.mark.parametrize with ids of the form name=value, joined by '-'."""
    names = [n.strip() for n in argnames.split(",")]
    ids = []
    for values in argvalues:
        values = values if len(names) > 1 else (values,)
        ids.append("-".join(f"{n}={v}" for n, v in zip(names, values)))
    return pytest.mark.parametrize(argnames, argvalues, ids=ids, **kwargs)
