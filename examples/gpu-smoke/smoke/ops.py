"""Tiny GPU operations the smoke tests guard."""

from __future__ import annotations


def matmul(a, b):
    """a @ b; bfloat16 inputs accumulate in float32 for accuracy."""
    if str(a.dtype).endswith("bfloat16"):
        return (a.float() @ b.float()).to(a.dtype)
    return a @ b


def allreduce_sum(tensor, dist):
    """Sum a tensor across every rank of the default process group."""
    work = dist.all_reduce(tensor, op=dist.ReduceOp.SUM, async_op=True)
    work.wait()
    return tensor
