"""Public peer kernels beside the headline table (``nki-kernels bench --peers PATH ...``).

The user points at their own checkouts of aws-neuron/nki-library and aws-neuron/nki-samples; no
peer code is part of this project.  :data:`PEERS` says, for each public kernel that does the job of
one of our headline kernels, where it lives in which checkout, how to call it at our headline shape
and which of our rows it sits beside.  Each peer is imported from the checkout with the
interpreter's NKI aliases its file's imports ask for (as ``profile path/to/file.py:kernel`` does),
then traced and scheduled by :func:`nki_kernels.perf.model.estimate`, the same call as ``profile``
and ``bench`` make for our kernels, in the same run.  Every figure is a cost-model ESTIMATE.

Where a peer's estimate depends on a constant no public measurement has calibrated (today the DMA
transpose efficiencies: ``dma_transpose_eff_sbuf`` 0.5 and ``dma_transpose_eff_hbm`` 0.9, both "up
to" figures of the Trainium2 architecture guide), the trace is scheduled again at the other end of
:data:`UNCALIBRATED`'s range and both estimates are printed.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import math
import os
import subprocess
import sys
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import IO, Any

from nki_kernels.kernels import registry
from nki_kernels.sim import install_neuronxcc_alias, install_nki_alias, jit, nki07
from nki_kernels.usage import UsageError
from nki_kernels.userkernel import apis_of_source, kernel_api

from . import accuracy
from . import limits as L
from .bench import _arr
from .costs import HBM_BUFFERS
from .hardware import get_hardware
from .labels import ENGINE_NAMES, ESTIMATE_LABEL
from .model import Estimate, build_options, estimate, estimate_trace
from .schedule import ModelOptions

# ------------------------------------------------------------------------------- checkouts
# What makes a folder a checkout of each kind: a path that exists in every public commit we know.
KINDS: dict[str, str] = {
    "nki-library": "src/nkilib_src/nkilib",  # aws-neuron/nki-library (d2ad3a5 and before)
    "nki-samples": "src/nki_samples",  # aws-neuron/nki-samples (6905a68 and before)
}


@dataclass(frozen=True)
class Checkout:
    kind: str  # a key of KINDS
    path: str  # absolute
    commit: str  # "d2ad3a5b1c2e" / "d2ad3a5b1c2e + local changes" / "no git metadata"


def _git(path: str, *args: str) -> str | None:
    try:
        proc = subprocess.run(["git", "-C", path, *args], capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.SubprocessError):
        return None
    return proc.stdout.strip() if proc.returncode == 0 else None


def commit_of(path: str) -> str:
    """The checkout's commit (12 hex digits), "+ local changes" if tracked files differ from it, or
    "no git metadata" (no git, or ``path`` is not the top of a git work tree: a copied folder
    inside another repository must not be reported under that repository's commit)."""
    top = _git(path, "rev-parse", "--show-toplevel")
    if not top or os.path.realpath(top) != os.path.realpath(path):
        return "no git metadata"
    head = _git(path, "rev-parse", "--short=12", "HEAD")
    if not head:
        return "no git metadata"
    dirty = _git(path, "status", "--porcelain", "--untracked-files=no")
    return f"{head} + local changes" if dirty else head


def check_checkout(path: str) -> Checkout:
    """A ``--peers`` PATH: an existing folder that is an nki-library or an nki-samples checkout."""
    if not os.path.exists(path):
        raise UsageError(f"--peers {path!r}: no such directory (give a checkout of nki-library or nki-samples)")
    if not os.path.isdir(path):
        raise UsageError(f"--peers {path!r} is not a directory (give a checkout of nki-library or nki-samples)")
    for kind, marker in KINDS.items():
        if os.path.isdir(os.path.join(path, marker)):
            return Checkout(kind, os.path.abspath(path), commit_of(path))
    expected = "; ".join(f"{k} has {m}/" for k, m in KINDS.items())
    raise UsageError(
        f"--peers {path!r} is neither an nki-library nor an nki-samples checkout (expected the top folder of "
        f"one: {expected})"
    )


def check_peers(paths: Sequence[str]) -> list[Checkout]:
    """Every PATH checked before any work; at most one checkout of each kind."""
    out: list[Checkout] = []
    for p in paths:
        c = check_checkout(p)
        same = [o for o in out if o.kind == c.kind]
        if same and os.path.realpath(same[0].path) != os.path.realpath(c.path):
            raise UsageError(f"--peers: two {c.kind} checkouts ({same[0].path}, {c.path}); give one of each kind")
        if not same:
            out.append(c)
    return out


# ------------------------------------------------------------------------------- registry
class NotApplicable(Exception):
    """The peer does not do this case (a shape or mode its code does not support)."""


Args = tuple[tuple, dict]


def _attn_sizes(p: dict) -> tuple[int, int, int, int, bool]:
    return p["B"] * p["H"], p["Sq"], p["Sk"], p["D"], bool(p["causal"])


def _attention_cte_args(tp_k: bool) -> Callable[[dict, str, Any], Args]:
    """nki-library attention_cte: heads folded into the batch (its docstring: "For MHA attention, the
    heads can be included as part of the batch dimension"); q (BH, S, D) with tp_q=True as ours,
    v (BH, S, D), output (BH, S, D) (tp_out=False); k (BH, S, D) with tp_k=True as ours, or
    (BH, D, S) with tp_k=False as the library's unit tests give it."""

    def make(p: dict, dtype: str, module: Any) -> Args:
        bh, sq, sk, d, causal = _attn_sizes(p)
        k = _arr((bh, sk, d) if tp_k else (bh, d, sk), dtype, 2)
        kwargs = {"scale": 1.0 / math.sqrt(d), "causal_mask": causal, "tp_q": True, "tp_k": tp_k, "tp_out": False}
        return (_arr((bh, sq, d), dtype, 1), k, _arr((bh, sk, d), dtype, 3)), kwargs

    return make


def _tutorial_attention_args(p: dict, dtype: str, module: Any) -> Args:
    """nki-samples attention tutorial (attn_fwd_v1..v11): one head, q, k, v each (d_head, seqlen),
    d_head 128, no mask (its NumPy reference has none)."""
    bh, sq, sk, d, causal = _attn_sizes(p)
    if causal:
        raise NotApplicable("no causal mask in the tutorial kernel")
    if bh != 1 or sq != sk or d != 128:
        raise NotApplicable("one head, Sq == Sk, D == 128 only")
    return tuple(_arr((d, sq), dtype, s) for s in (1, 2, 3)), {}


def _pipelined_flash_args(p: dict, dtype: str, module: Any) -> Args:
    """nki-samples contributed/pipelined_attention.py flash_fwd: q, k (B, d, S), v (B, S, d); its
    causal path is disabled by an assert."""
    bh, sq, sk, d, causal = _attn_sizes(p)
    if causal:
        raise NotApplicable("its causal path is disabled (assert use_causal_mask == False)")
    return (_arr((bh, d, sq), dtype, 1), _arr((bh, d, sk), dtype, 2), _arr((bh, sk, d), dtype, 3)), {
        "use_causal_mask": False,
        "mixed_precision": True,
    }


def _reference_flash_args(p: dict, dtype: str, module: Any) -> Args:
    """nki-samples reference flash_fwd (src/nki_samples/reference/attention.py, removed from the
    repository in c4b806e): q, k (B, H, d, S), v (B, H, S, d), launched on a [B, H] grid;
    inference (FlashConfig(training=False), seed None), mixed precision."""
    B, H, S, D, causal = p["B"], p["H"], p["Sq"], p["D"], bool(p["causal"])
    args = (_arr((B, H, D, S), dtype, 1), _arr((B, H, D, p["Sk"]), dtype, 2), _arr((B, H, p["Sk"], D), dtype, 3), None)
    return args, {"use_causal_mask": causal, "mixed_precision": True, "config": module.FlashConfig(training=False)}


def _matmul_args(p: dict, dtype: str, module: Any) -> Args:
    """lhsT (K, M), rhs (K, N): the layout of our matmul too."""
    return (_arr((p["K"], p["M"]), dtype, 1), _arr((p["K"], p["N"]), dtype, 2)), {}


@dataclass(frozen=True)
class Peer:
    """A public kernel that does one of our headline kernels' jobs."""

    key: str
    label: str
    checkout: str  # a key of KINDS
    path: str  # the kernel's file, relative to the checkout
    function: str
    kernel: str  # registry kernel whose headline rows it sits beside ("attention", "matmul", "conv2d")
    make_args: Callable[[dict, str, Any], Args]  # (case params, dtype, the peer's module) -> (args, kwargs)
    package_root: str = ""  # "" = import the file alone; else a folder put on sys.path, the module named from it
    grid: Callable[[dict], tuple] | None = None  # launch grid from the case params; None = no grid
    plain: bool = False  # an undecorated function the file's own harness wraps: jit it with its front end
    depends: tuple[str, ...] = ()  # uncalibrated constants its estimate depends on (UNCALIBRATED keys)
    note: str = ""


PEERS: tuple[Peer, ...] = (
    Peer(
        "attention_cte",
        "nki-library attention_cte (k as B*H,S,D: tp_k=True)",
        "nki-library",
        "src/nkilib_src/nkilib/core/attention/attention_cte.py",
        "attention_cte",
        "attention",
        _attention_cte_args(tp_k=True),
        package_root="src",
        depends=("dma_transpose_eff_sbuf", "dma_transpose_eff_hbm"),
        note="same q, k, v, out layouts as ours",
    ),
    Peer(
        "attention_cte_tpk0",
        "nki-library attention_cte (k as B*H,D,S: tp_k=False)",
        "nki-library",
        "src/nkilib_src/nkilib/core/attention/attention_cte.py",
        "attention_cte",
        "attention",
        _attention_cte_args(tp_k=False),
        package_root="src",
        depends=("dma_transpose_eff_sbuf", "dma_transpose_eff_hbm"),
        note="k pre-transposed, as the library's unit tests give it",
    ),
    Peer(
        "attn_fwd_v11",
        "nki-samples tutorial attn_fwd_v11",
        "nki-samples",
        "src/nki_samples/tutorials/attention_fwd_performance/attention_kernels.py",
        "attn_fwd_v11",
        "attention",
        _tutorial_attention_args,
        note="q, k, v as (D, S); non-causal only",
    ),
    Peer(
        "flash_fwd_pipelined",
        "nki-samples contributed flash_fwd (pipelined)",
        "nki-samples",
        "contributed/pipelined_attention.py",
        "flash_fwd",
        "attention",
        _pipelined_flash_args,
        note="q, k as (B, D, S); non-causal only",
    ),
    Peer(
        "flash_fwd_reference",
        "nki-samples reference flash_fwd",
        "nki-samples",
        "src/nki_samples/reference/attention.py",
        "flash_fwd",
        "attention",
        _reference_flash_args,
        grid=lambda p: (p["B"], p["H"]),
        note="q, k as (B, H, D, S); removed from nki-samples in c4b806e",
    ),
    Peer(
        "nki_matmul_fully_optimized",
        "nki-samples tutorial nki_matmul_fully_optimized_",
        "nki-samples",
        "src/nki_samples/tutorials/matrix_multiplication/matrix_multiplication_nki_kernels.py",
        "nki_matmul_fully_optimized_",
        "matmul",
        _matmul_args,
    ),
    Peer(
        "contributed_matmul",
        "nki-samples contributed matmul",
        "nki-samples",
        "contributed/matmul.py",
        "matmul",
        "matmul",
        _matmul_args,
        plain=True,
        note="undecorated in the file (its harness wraps it in nki.baremetal / nki.benchmark)",
    ),
)

# No public conv2d kernel is known to this registry (nki-library d2ad3a5 has conv1d and
# depthwise_conv1d under experimental/conv, nki-samples 6905a68 no convolution).
NO_PEER = {"conv2d": "no public conv2d kernel in the peer registry (nki-library: conv1d only; nki-samples: none)"}


@dataclass(frozen=True)
class Uncalibrated:
    model: float  # the value the model uses
    other: float  # the other end of the range the table shows
    why: str


# Constants an estimate may depend on that no public measurement has calibrated (hardware.py tag "D":
# from the documentation only).  The documentation gives only a ceiling ("up to"); no public figure
# bounds them from below, so the table shows the estimate again at half the ceiling -- a sensitivity,
# not a bound.  Source: aws-neuron-sdk 81ce03ae nki/guides/architecture/trainium2_arch.rst (DMA
# transpose: "up to 90% DMA throughput utilization" HBM->SBUF, "up to 50%" SBUF->SBUF).
UNCALIBRATED: dict[str, Uncalibrated] = {
    "dma_transpose_eff_sbuf": Uncalibrated(0.5, 0.25, "SBUF->SBUF DMA transpose: 'up to 50%' (trainium2_arch.rst)"),
    "dma_transpose_eff_hbm": Uncalibrated(0.9, 0.45, "HBM->SBUF DMA transpose: 'up to 90%' (trainium2_arch.rst)"),
}


def used_constants(est: Estimate) -> list[str]:
    """The UNCALIBRATED constants this estimate's schedule actually charged (DMA transposes by where
    they read and write, as ``costs.dma_cost`` picks the efficiency)."""
    found = set()
    trace, sched = est.trace, est.schedule
    if trace is None:
        return []
    elided = sched.elided if sched is not None else set()
    for i, ev in enumerate(trace.events):
        if ev.op != "dma_transpose" or i in elided:
            continue
        m = ev.payload
        src = m.src.value if getattr(m, "src", None) is not None else "const"
        dst = m.dst.value
        found.add("dma_transpose_eff_hbm" if src in HBM_BUFFERS or dst in HBM_BUFFERS else "dma_transpose_eff_sbuf")
    return sorted(found)


def headline_cases() -> list[registry.Case]:
    """Our headline cases, the shapes peers are estimated at (tests replace this with small shapes)."""
    return [c for s in registry.SPECS for c in s.cases("headline")]


# ------------------------------------------------------------------------------- running
@dataclass
class PeerRow:
    peer: Peer
    case_key: str  # our headline case it sits beside
    status: str  # "ok" | "no checkout" | "not found" | "not applicable" | "error"
    message: str = ""
    est: Any = None
    seconds: float = 0.0
    checkout: Checkout | None = None
    job_flops: int = 0
    dtype: str = ""
    sensitivity: list = field(default_factory=list)  # [(constant, other value, latency_us at it)]
    sim_warnings: int = 0


@contextlib.contextmanager
def _imported(peer: Peer, checkout: Checkout):
    """The peer's module, imported from the checkout with the NKI aliases its file asks for; sys.path,
    the aliases and the checkout's modules are removed again afterwards."""
    file = os.path.join(checkout.path, peer.path)
    with open(file, encoding="utf-8") as f:
        apis = apis_of_source(f.read())
    before = set(sys.modules)
    root = os.path.join(checkout.path, peer.package_root) if peer.package_root else os.path.dirname(file)
    with contextlib.ExitStack() as stack:
        for api in apis:
            stack.enter_context(install_nki_alias() if api == "0.7" else install_neuronxcc_alias())
        sys.path.insert(0, root)
        stack.callback(_remove_from_path, root)
        stack.callback(_forget_modules, before, checkout.path)
        if peer.package_root:
            rel = os.path.relpath(os.path.splitext(file)[0], root)
            module = importlib.import_module(rel.replace(os.sep, "."))
        else:
            name = f"_nki_kernels_peer_{peer.key}"
            spec = importlib.util.spec_from_file_location(name, file)
            assert spec is not None and spec.loader is not None
            module = importlib.util.module_from_spec(spec)
            sys.modules[name] = module
            spec.loader.exec_module(module)
        yield module, apis


def _remove_from_path(folder: str) -> None:
    if folder in sys.path:
        sys.path.remove(folder)


def _forget_modules(before: set, folder: str) -> None:
    """Drop the modules a peer brought in from its checkout (a second checkout of the same package
    in another run of this process must not find the first one's)."""
    folder = os.path.realpath(folder)
    for name in set(sys.modules) - before:
        mod = sys.modules.get(name)
        f = getattr(mod, "__file__", None) or ""
        if name.startswith("_nki_kernels_peer_") or (f and os.path.realpath(f).startswith(folder + os.sep)):
            sys.modules.pop(name, None)


def _kernel_of(peer: Peer, module: Any, apis: tuple) -> Any:
    if not hasattr(module, peer.function):
        raise AttributeError(f"{peer.path} has no {peer.function!r}")
    obj = getattr(module, peer.function)
    if peer.plain and kernel_api(obj) is None:
        obj = nki07.jit(obj) if apis == ("0.7",) else jit(obj)
    if kernel_api(obj) is None:
        raise TypeError(f"{peer.path}:{peer.function} is not an NKI kernel")
    return obj


def _one_line(exc: BaseException) -> str:
    text = " ".join(f"{type(exc).__name__}: {exc}".split())
    return text[:240] + (" ..." if len(text) > 240 else "")


def run_one(
    peer: Peer,
    case: registry.Case,
    checkout: Checkout | None,
    mode: str = "benchmark",
    numerics: bool = False,
    hw: str = "trn2",
) -> PeerRow:
    """One peer at one of our headline cases (estimate + the uncalibrated constants' other ends)."""
    p, dtype = case.p, case.dtype
    lim = _limits(case)
    row = PeerRow(peer, case.key, "ok", checkout=checkout, job_flops=int(lim["flops"]), dtype=dtype)
    if checkout is None:
        row.status, row.message = "no checkout", f"no {peer.checkout} checkout given (--peers)"
        return row
    if not os.path.isfile(os.path.join(checkout.path, peer.path)):
        row.status, row.message = "not found", f"not found in {checkout.path} ({peer.path})"
        return row
    t = time.perf_counter()
    stage = f"importing {peer.path}"
    try:
        with warnings.catch_warnings(record=True) as caught, contextlib.redirect_stdout(sys.stderr):
            warnings.simplefilter("always")
            with _imported(peer, checkout) as (module, apis):
                stage = "running on the interpreter"
                kern = _kernel_of(peer, module, apis)
                try:
                    args, kwargs = peer.make_args(p, dtype, module)
                except NotApplicable as exc:
                    row.status, row.message = "not applicable", str(exc)
                    return row
                if peer.grid is not None:
                    kern = kern[peer.grid(p)]
                est = estimate(kern, *args, numerics=numerics, mode=mode, hw=hw, **kwargs)
        row.sim_warnings = len(caught)
    except Exception as exc:  # noqa: BLE001 - a peer that fails prints its one line; the table goes on
        row.status, row.message, row.seconds = "error", f"{stage}: {_one_line(exc)}", time.perf_counter() - t
        return row
    row.est = est
    base = get_hardware(hw)
    trace = est.trace
    for const in used_constants(est):
        u = UNCALIBRATED[const]
        if trace is None:
            break
        if const not in base.constants or base.v(const) != u.model:
            continue  # another hardware description: its own value, no range known
        other = estimate_trace(
            trace,
            hw=base.with_values(**{const: u.other}),
            options=ModelOptions(mode=mode, **build_options(kern)),
            kernel_name=est.kernel_name,
            keep=False,
        )
        row.sensitivity.append((const, u.other, other.latency_us))
    row.seconds = time.perf_counter() - t
    return row


def _limits(case: registry.Case) -> dict:
    p, dt = case.p, case.dtype
    if case.kernel == "attention":
        return L.attention_limits(p["B"], p["H"], p["Sq"], p["D"], bool(p["causal"]), dt)
    if case.kernel == "matmul":
        return L.matmul_limits(p["M"], p["K"], p["N"], dt)
    return L.conv_limits(p["B"], p["C_in"], p["C_out"], p["H"], p["W"], p["K"], p["pool_size"], dt)


def run_peers(
    checkouts: Sequence[Checkout],
    selected: Sequence[str] | None = None,
    progress: IO[str] | None = sys.stderr,
    mode: str = "benchmark",
    numerics: bool = False,
    hw: str = "trn2",
    cases: Sequence[registry.Case] | None = None,
    peers: Sequence[Peer] = PEERS,
) -> list[PeerRow]:
    """Every peer at every headline case of its kernel selected by ``--only`` (substrings of case keys);
    ``cases`` replaces the registry's headline cases (tests use small shapes)."""
    by_kind = {c.kind: c for c in checkouts}
    all_cases = list(cases) if cases is not None else headline_cases()
    todo = [
        (peer, case)
        for case in all_cases
        if not selected or any(s in case.key for s in selected)
        for peer in peers
        if peer.kernel == case.kernel
    ]
    rows = []
    for k, (peer, case) in enumerate(todo):
        if progress:
            print(f"[peer {k + 1}/{len(todo)}] {peer.label} at {case.key} ...", file=progress, flush=True)
        row = run_one(peer, case, by_kind.get(peer.checkout), mode=mode, numerics=numerics, hw=hw)
        if progress and row.status == "ok":
            print(f"      {accuracy.band_text(row.est)} ({ESTIMATE_LABEL}) in {row.seconds:.1f} s", file=progress)
        elif progress:
            print(f"      {_status(row)}", file=progress)
        rows.append(row)
    return rows


# ------------------------------------------------------------------------------- output
def _status(r: PeerRow) -> str:
    return r.message if r.message.startswith(r.status) else f"{r.status}: {r.message}"


def job_mfu(est: Estimate, job_flops: int, dtype: str) -> float:
    """The job's useful matmul FLOPs (the case's, not what the kernel executes: a transpose done as a
    matmul with an identity does not count) over estimate x TensorE peak for the case's dtype."""
    hw = est.hw or get_hardware("trn2")
    return job_flops / (est.latency_us * 1e-6 * hw.pe_peak_flops(dtype)) if est.latency_us > 0 else 0.0


def _engine(est: Estimate) -> str:
    e = est.critical_engine
    return ENGINE_NAMES.get(e, e)


_HEAD = (
    f"  {'kernel':54s} {'estimate us':>12s} {'band':>5s} {'band us':>15s} {'MFU est':>8s} {'bound engine':>12s} "
    f"{'vs ours':>8s}"
)


def _line(name: str, est: Estimate, job_flops: int, dtype: str, ours: float | None, mark: str = "") -> str:
    lo, hi = accuracy.band_us(est)
    band = f"\u00b1{100 * accuracy.typical_error(est):.0f}%"
    rel = f"{est.latency_us / ours:7.2f}x" if ours else f"{'-':>8s}"
    return (
        f"  {name:54s} {est.latency_us:11.1f}{mark or ' '} {band:>5s} {f'{lo:.0f}..{hi:.0f}':>15s} "
        f"{100 * job_mfu(est, job_flops, dtype):7.1f}% {_engine(est):>12s} {rel}"
    )


def render_peers(peer_rows: Sequence[PeerRow], our_rows: Sequence[Any], checkouts: Sequence[Checkout]) -> str:
    """The peers section: per headline case, our row(s) then each peer's, in the same columns."""
    given = ", ".join(f"{c.kind} {c.path} @ {c.commit}" for c in checkouts) or "none"
    out = [f"Peers (public kernels, same interpreter + cost model, same run; {ESTIMATE_LABEL}): {given}"]
    missing = [k for k in KINDS if k not in {c.kind for c in checkouts}]
    if missing:
        out.append(f"  (no {' or '.join(missing)} checkout given: its peers are listed as 'no checkout')")
    out.append(_HEAD)
    ours_by_key: dict[str, list] = {}
    for r in our_rows:
        ours_by_key.setdefault(r.case.key.removesuffix("_nki07"), []).append(r)
    keys = list(dict.fromkeys(r.case_key for r in peer_rows))
    warned: list[str] = []
    for key in [k for k in ours_by_key if k not in keys] + keys:
        ours = ours_by_key.get(key, [])
        peers = [r for r in peer_rows if r.case_key == key]
        label = ours[0].case.label if ours else key
        out.append(f"{label}  [{key}]")
        ref = next((r.est.latency_us for r in ours if r.status == "ok"), None)
        flops = peers[0].job_flops if peers else int(ours[0].case.limits["flops"])
        dtype = peers[0].dtype if peers else ours[0].case.dtype
        for r in ours:
            name = "ours" + (" [NKI 0.7]" if r.case.key.endswith("_nki07") else "")
            if r.status == "ok":
                out.append(_line(name, r.est, flops, dtype, ref))
            else:
                out.append(f"  {name:54s} {'-':>12s}   {r.message}")
        if not peers:
            kname = next((s.name for s in registry.SPECS if key in [c.key for c in s.cases("headline")]), "")
            out.append(f"  {NO_PEER.get(kname, 'no public peer in the registry'):54s}")
        for r in peers:
            if r.status == "ok":
                mark = "\u2020" if r.sensitivity else ""
                out.append(_line(r.peer.label, r.est, r.job_flops, r.dtype, ref, mark))
                warned.extend(f"  {r.peer.label} at {key}: {w}" for w in accuracy.warnings(r.est))
                for const, val, lat in r.sensitivity:
                    rel = f"{lat / ref:7.2f}x" if ref else f"{'-':>8s}"
                    out.append(
                        f"  {'  at ' + const + ' = ' + format(val, 'g'):54s} {lat:11.1f}\u2020 "
                        f"{'':>5s} {'':>15s} {'':>8s} {'':>12s} {rel}"
                        f"   (model value {UNCALIBRATED[const].model:g})"
                    )
            else:
                out.append(f"  {r.peer.label:54s} {'-':>12s}   {_status(r)}")
    out.append(
        "MFU est = the case's useful matmul FLOPs (transposes done on TensorE not counted) / (estimate x "
        "TensorE peak of the case's dtype), for ours and peers alike; bound engine = the engine busiest in "
        "the estimated schedule; band us = the band incl. undecidable compiler choices; vs ours = estimate / "
        "our NKI 0.1 kernel's estimate. (The headline table's MFU counts the matmuls the kernel executes, "
        "e.g. a causal kernel's full diagonal blocks.)"
    )
    if warned:
        out.append("Warnings on peer estimates (as for ours above):")
        out.extend(warned)
    if any(r.sensitivity for r in peer_rows):
        used = sorted({c for r in peer_rows for c, _, _ in r.sensitivity})
        out.append(
            "\u2020 depends on a constant no public measurement calibrates; shown again at the other end of its "
            "range (half the documented ceiling, a sensitivity, not a bound): "
            + "; ".join(
                f"{c} {UNCALIBRATED[c].model:g} ({UNCALIBRATED[c].why}) .. {UNCALIBRATED[c].other:g}" for c in used
            )
        )
    return "\n".join(out)


def peer_records(peer_rows: Sequence[PeerRow], checkouts: Sequence[Checkout]) -> dict:
    rows = []
    for r in peer_rows:
        rec: dict[str, Any] = {
            "peer": r.peer.key,
            "label": r.peer.label,
            "checkout": r.peer.checkout,
            "path": r.peer.path,
            "function": r.peer.function,
            "beside": r.case_key,
            "status": r.status,
            "message": r.message,
            "seconds": r.seconds,
            "interpreter_warnings": r.sim_warnings,
        }
        if r.est is not None:
            rec["estimate"] = r.est.to_record()
            rec["job_mfu"] = job_mfu(r.est, r.job_flops, r.dtype)
            rec["uncalibrated"] = [
                {"constant": c, "model_value": UNCALIBRATED[c].model, "other_value": v, "latency_us": lat}
                for c, v, lat in r.sensitivity
            ]
        rows.append(rec)
    return {
        "checkouts": [{"kind": c.kind, "path": c.path, "commit": c.commit} for c in checkouts],
        "rows": rows,
    }
