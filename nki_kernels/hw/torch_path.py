"""torch-neuronx path: ``torch.nn.Module`` wrappers that call the NKI kernels on XLA tensors.

torch and torch_xla are imported only when a module is first used, so importing this
file needs neither.  A ``@nki.jit`` kernel called with XLA tensors becomes a custom call
inside the lazily traced XLA graph.  Nothing runs until the graph is cut, so
``run_on_device`` calls ``xm.mark_step()`` and then ``.cpu()``, which blocks until the
device has finished.  Never time a kernel with a wall clock around the call; use
``nki.benchmark`` (``device.run_benchmark``).

    mod = torch_path.Conv2dMaxPool(W, bias, pool_size=2)     # NumPy weights
    out = torch_path.run_on_device(mod, X)                   # NumPy in, NumPy out
    ref = torch_path.torch_reference("conv2d", X, W, bias, pool_size=2)
"""

from __future__ import annotations

import functools
from typing import Any

from . import device

# Conv2dMaxPool, Matmul and Attention exist once torch is importable (module __getattr__, PEP 562),
# so they are not in __all__ (a star import would fail without torch).
__all__ = ["make_module", "run_on_device", "torch_reference"]


def _to_torch(a: Any) -> Any:
    """NumPy array (including ml_dtypes bfloat16) -> CPU torch tensor of the same dtype."""
    import numpy as np  # noqa: PLC0415 - the job's own process has the standard library only
    import torch  # noqa: PLC0415 - torch: only in the Neuron venv, optional elsewhere

    a = np.asarray(a)
    if a.dtype.name == "bfloat16":
        return torch.from_numpy(np.ascontiguousarray(a.astype(np.float32))).to(torch.bfloat16)
    return torch.from_numpy(np.ascontiguousarray(a))


def _to_numpy(t: Any) -> Any:
    import torch  # noqa: PLC0415 - torch: only in the Neuron venv, optional elsewhere

    t = t.detach().cpu()
    if t.dtype == torch.bfloat16:
        t = t.float()
    return t.numpy()


@functools.cache
def _classes() -> dict[str, Any]:
    import torch  # noqa: PLC0415 - torch: only in the Neuron venv, optional elsewhere

    class Conv2dMaxPool(torch.nn.Module):
        """conv2d (stride 1, no padding) + bias + max-pool via the fused NKI kernel."""

        def __init__(self, weight: Any, bias: Any, pool_size: int = 1, api: str = "0.1") -> None:
            super().__init__()
            self.weight = torch.nn.Parameter(_to_torch(weight), requires_grad=False)
            self.bias = torch.nn.Parameter(_to_torch(bias), requires_grad=False)
            self.pool_size, self.api = int(pool_size), api

        def forward(self, x: Any) -> Any:
            kernel = device.load_kernel("conv2d", self.api)
            return kernel(x, self.weight, self.bias, pool_size=self.pool_size)

    class Matmul(torch.nn.Module):
        """``lhsT.T @ rhs`` via the tiled NKI matmul (lhsT is K x M, rhs is K x N)."""

        def __init__(self, api: str = "0.1") -> None:
            super().__init__()
            self.api = api

        def forward(self, lhs_t: Any, rhs: Any) -> Any:
            return device.load_kernel("matmul", self.api)(lhs_t, rhs)

    class Attention(torch.nn.Module):
        """softmax(q k^T * scale [+ causal mask]) v via the NKI flash-attention kernel."""

        def __init__(self, causal: bool = False, softmax_scale: float | None = None, api: str = "0.1") -> None:
            super().__init__()
            self.causal, self.softmax_scale, self.api = bool(causal), softmax_scale, api

        def forward(self, q: Any, k: Any, v: Any) -> Any:
            kernel = device.load_kernel("attention", self.api)
            return kernel(q, k, v, causal=self.causal, softmax_scale=self.softmax_scale)

    return {"Conv2dMaxPool": Conv2dMaxPool, "Matmul": Matmul, "Attention": Attention}


def __getattr__(name: str) -> Any:  # PEP 562: the classes exist once torch is importable
    if name in ("Conv2dMaxPool", "Matmul", "Attention"):
        return _classes()[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def make_module(kernel: str, args: Any, kwargs: Any, api: str = "0.1") -> tuple[Any, tuple[Any, ...]]:
    """Module for a kernel (of NKI generation ``api``) plus the forward inputs, from
    ``device.make_inputs`` output."""
    cls = _classes()
    if kernel == "conv2d":
        x, w, b = args
        return cls["Conv2dMaxPool"](w, b, pool_size=kwargs.get("pool_size", 1), api=api), (x,)
    if kernel == "matmul":
        return cls["Matmul"](api=api), tuple(args)
    if kernel == "attention":
        return (cls["Attention"](kwargs.get("causal", False), kwargs.get("softmax_scale"), api=api), tuple(args))
    raise KeyError(f"unknown kernel {kernel!r}; allowed: conv2d, matmul, attention")


def run_on_device(module: Any, *arrays: Any) -> Any:
    """Move module and inputs to the XLA device, run forward, sync, return NumPy."""
    import torch  # noqa: PLC0415 - torch: only in the Neuron venv, optional elsewhere
    import torch_xla.core.xla_model as xm  # noqa: PLC0415 - torch-neuronx's XLA: only in the Neuron venv

    dev = xm.xla_device()
    module = module.to(dev)
    inputs = [_to_torch(a).to(dev) for a in arrays]
    with torch.no_grad():
        out = module(*inputs)
    xm.mark_step()  # cut the lazy graph: compile (first time) and launch it
    result = _to_numpy(out)  # .cpu() blocks until the device finished
    xm.wait_device_ops()
    return result


def torch_reference(kernel: str, *arrays: Any, **kwargs: Any) -> Any:
    """The same computation with stock torch ops on CPU in float64.

    conv2d: ``F.conv2d`` + bias, then ``F.max_pool2d`` when ``pool_size > 1``;
    matmul: ``lhsT.T @ rhs``; attention: ``F.scaled_dot_product_attention``.
    """
    import torch  # noqa: PLC0415 - torch: only in the Neuron venv, optional elsewhere
    import torch.nn.functional as F  # noqa: N812, PLC0415 - torch: optional, as above

    t = [_to_torch(a).to(torch.float64) for a in arrays]
    if kernel == "conv2d":
        x, w, b = t
        y = F.conv2d(x, w, b)
        pool = int(kwargs.get("pool_size", 1))
        return _to_numpy(F.max_pool2d(y, pool) if pool > 1 else y)
    if kernel == "matmul":
        lhs_t, rhs = t
        return _to_numpy(lhs_t.T @ rhs)
    if kernel == "attention":
        q, k, v = t
        return _to_numpy(
            F.scaled_dot_product_attention(
                q, k, v, is_causal=bool(kwargs.get("causal", False)), scale=kwargs.get("softmax_scale")
            )
        )
    raise KeyError(f"unknown kernel {kernel!r}; allowed: conv2d, matmul, attention")
