"""GPU smoke tests for testdb-audit's launch path: they need CUDA (torch) and skip cleanly
without it. Ids follow TensorRT-LLM's style (``name=value`` parametrizations)."""

from __future__ import annotations

import os
import socket

import pytest

torch = pytest.importorskip("torch")

from smoke.ops import allreduce_sum, matmul  # noqa: E402

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


def _visible() -> int:
    return torch.cuda.device_count()


def test_device_visible():
    assert _visible() >= 1
    name = torch.cuda.get_device_name(0)
    print(f"CUDA_VISIBLE_DEVICES={os.environ.get('CUDA_VISIBLE_DEVICES')} device0={name}")


@pytest.mark.parametrize("size", [1024, 4096], ids=lambda s: f"size={s}")
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"], ids=lambda d: f"dtype={d}")
def test_matmul(size, dtype):
    dt = getattr(torch, dtype)
    a = torch.randn(size, size, device="cuda", dtype=dt)
    b = torch.randn(size, size, device="cuda", dtype=dt)
    got = matmul(a, b).float()
    want = a.float().cpu() @ b.float().cpu()
    tol = 1e-2 if dtype == "float32" else 0.5
    assert torch.allclose(got.cpu(), want, atol=tol * size ** 0.5, rtol=5e-2)


def test_single_gpu_isolated():
    # The launcher gives each 1-GPU test exactly one device.
    assert _visible() == 1


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _allreduce_worker(rank: int, world: int, port: int) -> None:
    import torch.distributed as dist

    dist.init_process_group("nccl", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=world)
    torch.cuda.set_device(rank)
    t = torch.full((1024,), float(rank + 1), device="cuda")
    allreduce_sum(t, dist)
    assert torch.allclose(t, torch.full_like(t, world * (world + 1) / 2))
    dist.destroy_process_group()


@pytest.mark.parametrize("world", [2], ids=lambda w: f"world={w}")
def test_nccl_allreduce(world):
    if _visible() < world:
        pytest.fail(f"needs {world} GPUs, sees {_visible()}")
    torch.multiprocessing.spawn(_allreduce_worker, args=(world, _free_port()), nprocs=world)


def test_peer_copy():
    if _visible() < 2:
        pytest.fail(f"needs 2 GPUs, sees {_visible()}")
    x = torch.arange(1 << 20, device="cuda:0", dtype=torch.float32)
    y = x.to("cuda:1")
    assert torch.equal(y.cpu(), x.cpu())
