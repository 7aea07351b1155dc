"""Record every cost-model estimate the repository produces, to check that a change of the scheduler's
implementation moves none of them (bit for bit).

    python scripts/estimate_identity.py record OUT.json [--cache DIR] [--no-loo]
    python scripts/estimate_identity.py compare A.json B.json

``record`` estimates: the bench table (``dev.py bench``: every case of perf.bench), the calibration
(in-sample, leave-one-out refits and the trn1 cross-check of ``python -m nki_kernels.perf.calibration``),
the kernels of simulator_tests/data (part1 / tutorial style, the CS149-like conv2d files) and the CS149
part 1 "vector add tiled" with ROW_CHUNK=1 at n=25,600 (a 100k-event loop).  Every float is kept with its
full repr (JSON), and each main schedule's per-instruction start/end times are hashed.  Traces are pickled
into ``--cache`` (the interpreter is not what is being checked), so a second record is quicker.
``compare`` requires equality (==), or with ``--rel R`` floats equal to a relative error R.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import os
import pickle
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

ADD_TILED = """
import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl

@nki.jit
def add_tiled(a, b):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.hbm)
    n = a.shape[0]
    chunk = 1
    for m in nl.affine_range(n // chunk):
        ta = nl.ndarray((chunk, 1), dtype=a.dtype, buffer=nl.sbuf)
        tb = nl.ndarray((chunk, 1), dtype=a.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=ta, src=a[m * chunk:(m + 1) * chunk])
        nisa.dma_copy(dst=tb, src=b[m * chunk:(m + 1) * chunk])
        r = nisa.tensor_tensor(ta, tb, op=nl.add)
        nisa.dma_copy(dst=out[m * chunk:(m + 1) * chunk], src=r)
    return out
"""

_SKIP = {"trace", "schedule", "hw", "trace_seconds", "schedule_seconds", "steady"}


def _jsonable(x):
    if isinstance(x, dict):
        return {str(k): _jsonable(v) for k, v in sorted(x.items(), key=lambda kv: str(kv[0]))}
    if isinstance(x, (list, tuple)):
        return [_jsonable(v) for v in x]
    if isinstance(x, set):
        return sorted(_jsonable(v) for v in x)
    if dataclasses.is_dataclass(x) and not isinstance(x, type):
        return {f.name: _jsonable(getattr(x, f.name)) for f in dataclasses.fields(x)}
    if isinstance(x, float):
        return repr(x)  # the exact value (also nan / inf)
    if isinstance(x, (int, str, bool)) or x is None:
        return x
    return repr(x)


def _hash_schedule(s) -> str:
    h = hashlib.sha256()
    h.update(repr(list(s.start)).encode())
    h.update(repr(list(s.end)).encode())
    h.update(repr(list(s.engine_of)).encode())
    h.update(repr(sorted((k, (*v[:6], dataclasses.astuple(v.cost), v.dge)) for k, v in s.dma.items())).encode())
    h.update(repr(sorted(s.elided.items())).encode())
    h.update(repr((s.makespan_ns, s.issue_busy_ns, sorted(s.busy_ns.items()), s.reordered)).encode())
    return h.hexdigest()


def est_record(e: Any) -> dict:
    from nki_kernels.perf import accuracy

    rec = {f.name: _jsonable(getattr(e, f.name)) for f in dataclasses.fields(e) if f.name not in _SKIP}
    rec["band_us"] = _jsonable(accuracy.band_us(e))
    rec["band_text"] = accuracy.band_text(e)
    rec["typical_error"] = repr(accuracy.typical_error(e))
    rec["warnings"] = list(accuracy.warnings(e))
    rec["op_class"] = accuracy.op_class(e)
    if e.schedule is not None:
        rec["schedule_sha256"] = _hash_schedule(e.schedule)
    return rec


class _Cache:
    def __init__(self, folder: str | None):
        self.folder = Path(folder) if folder else None
        if self.folder:
            self.folder.mkdir(parents=True, exist_ok=True)

    def trace(self, key: str, make):
        path = self.folder / f"{key}.pkl" if self.folder else None
        if path and path.exists():
            with open(path, "rb") as f:
                return pickle.load(f)
        tr = make()
        if path:
            with open(path, "wb") as f:
                pickle.dump(tr, f, protocol=pickle.HIGHEST_PROTOCOL)
        return tr


def _estimate(cache: _Cache, key: str, kern, args, kwargs, mode: str = "benchmark"):
    """What perf.model.estimate does, with the trace cached."""
    from nki_kernels.perf.model import ModelOptions, _kernel_name, build_options, estimate_trace, trace_of

    tr = cache.trace(key, lambda: trace_of(kern, *args, numerics=False, **kwargs)[1])
    opts = ModelOptions(mode=mode, **build_options(kern))
    return estimate_trace(tr, options=opts, kernel_name=_kernel_name(kern))


def record_bench(cache: _Cache) -> dict:
    from nki_kernels.perf import bench

    out: dict[str, Any] = {}
    for c in bench.cases():
        try:
            kern = bench._load(c.kernel)
        except (ImportError, AttributeError) as exc:
            out[c.key] = {"status": "unavailable", "message": str(exc)}
            continue
        np.random.seed(0)
        args, kwargs = c.make_args()
        try:
            e = _estimate(cache, f"bench_{c.key}", kern, args, kwargs)
        except Exception as exc:  # the bench reports it as a row too
            out[c.key] = {"status": "error", "message": f"{type(exc).__name__}: {exc}"[:300]}
            continue
        out[c.key] = {"status": "ok", "goal_met": bool(c.check(e)) if c.check else None, "estimate": est_record(e)}
        print(f"  bench {c.key}: {e.latency_us!r}", file=sys.stderr, flush=True)
    return out


def record_calibration(cache: _Cache, loo: bool) -> dict:
    from nki_kernels.perf import calibration as cal

    traces = {}
    for p in list(cal.POINTS) + list(cal.TRN1_POINTS):
        for lc in p.launches:
            k = cal._trace_key(lc)
            if k in traces:
                continue
            name = "cal_" + hashlib.sha256(repr(k).encode()).hexdigest()[:16]

            def make(lc=lc):
                args, kwargs = lc.make_args()
                import warnings

                from nki_kernels.sim import SimWarning

                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", SimWarning)
                    return cal.trace_of(cal._kernel_fn(lc.kernel), *args, numerics=False, **kwargs)[1]

            traces[k] = cache.trace(name, make)
    main_traces = {cal._trace_key(lc): traces[cal._trace_key(lc)] for p in cal.POINTS for lc in p.launches}
    t1_traces = {cal._trace_key(lc): traces[cal._trace_key(lc)] for p in cal.TRN1_POINTS for lc in p.launches}

    def res(rs):
        return [[r.point.pid, repr(r.estimate), repr(r.error), r.op_class] for r in rs]

    out: dict[str, Any] = {"insample": res(cal.evaluate(main_traces))}
    from nki_kernels.perf.hardware import TRN1

    out["trn1"] = res(cal.evaluate(t1_traces, TRN1, points=cal.TRN1_POINTS))
    print("  calibration in-sample done", file=sys.stderr, flush=True)
    if loo:
        out["loo"] = res(cal.leave_one_out(main_traces))
        print("  calibration leave-one-out done", file=sys.stderr, flush=True)
    return out


def record_data_kernels(cache: _Cache) -> dict:
    import importlib.util

    from nki_kernels.sim import install_neuronxcc_alias

    data = ROOT / "simulator_tests" / "data"
    out: dict[str, Any] = {}

    def load(path: Path, name: str):
        spec: Any = importlib.util.spec_from_file_location(name, path)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        return mod

    rng = np.random.default_rng(0)
    f32 = np.float32
    with install_neuronxcc_alias():
        p1 = load(data / "part1_style_kernels.py", "part1_style_kernels")
        cases: list[Any] = [
            ("add_naive", p1.add_naive, (rng.random(128, dtype=f32), rng.random(128, dtype=f32)), {}),
            (
                "add_stream",
                p1.add_stream,
                (rng.random(128 * 512 * 8, dtype=f32), rng.random(128 * 512 * 8, dtype=f32), 512),
                {},
            ),
            (
                "add_stream_small",
                p1.add_stream,
                (rng.random(128 * 4 * 64, dtype=f32), rng.random(128 * 4 * 64, dtype=f32), 4),
                {},
            ),
            (
                "add_scalar_columns",
                p1.add_scalar_columns,
                (rng.random((128, 256), dtype=f32), rng.random((128, 1), dtype=f32)),
                {},
            ),
            ("transpose", p1.transpose, (rng.random((512, 512), dtype=f32),), {}),
        ]
        tu = load(data / "tutorial_style_kernels.py", "tutorial_style_kernels")
        cases += [
            (
                "tutorial_matmul",
                tu.tutorial_matmul,
                (rng.random((512, 256), dtype=f32), rng.random((512, 1024), dtype=f32)),
                {},
            ),
        ]
        q = rng.random((2, 2, 128, 64), dtype=f32)
        cases.append(("tiny_causal_attention", tu.tiny_causal_attention[2, 2], (q, q.copy(), q.copy(), 0.125), {}))
        for f in sorted((data / "cs149_like").glob("conv2d_*.py")):
            mod = load(f, f.stem)
            for dt, pool in ((np.float32, 1), (np.float16, 2)):
                X = rng.random((1, 128, 32, 16)).astype(dt)
                W = rng.random((128, 128, 3, 3)).astype(dt)
                bias = rng.random(128).astype(dt)
                cases.append(
                    (
                        f"{f.stem}_{np.dtype(dt).name}_p{pool}",
                        mod.fused_conv2d_maxpool,
                        (X, W, bias),
                        {"pool_size": pool},
                    )
                )
        src = Path("/tmp/_estimate_identity_add_tiled.py")
        src.write_text(ADD_TILED)
        at = load(src, "add_tiled_kernels")
        n = 25600
        cases.append(("add_tiled_25600", at.add_tiled, (rng.random(n, dtype=f32), rng.random(n, dtype=f32)), {}))
        for key, kern, args, kwargs in cases:
            t = time.process_time()
            try:
                e = _estimate(cache, f"data_{key}", kern, args, kwargs)
            except Exception as exc:
                out[key] = {"status": "error", "message": f"{type(exc).__name__}: {exc}"[:300]}
                continue
            out[key] = {"status": "ok", "estimate": est_record(e)}
            print(f"  {key}: {e.latency_us!r} ({time.process_time() - t:.1f} s CPU)", file=sys.stderr, flush=True)
    return out


def record(path: str, cache_dir: str | None, loo: bool, parts: list) -> None:
    cache = _Cache(cache_dir)
    rec: dict = {}
    for name, fn in (
        ("data", lambda: record_data_kernels(cache)),
        ("bench", lambda: record_bench(cache)),
        ("calibration", lambda: record_calibration(cache, loo)),
    ):
        if parts and name not in parts:
            continue
        t = time.process_time()
        rec[name] = fn()
        print(f"{name}: {time.process_time() - t:.1f} s CPU", file=sys.stderr, flush=True)
    with open(path, "w") as f:
        json.dump(rec, f, indent=1, sort_keys=True)


def _float(x):
    """A recorded float (kept as its repr) or None."""
    try:
        return float(x) if isinstance(x, str) else None
    except ValueError:
        return None


def _diff(a, b, where="", rel=0.0) -> list:
    if rel and a != b and _float(a) is not None and _float(b) is not None:
        x, y = _float(a), _float(b)
        return [] if abs(x - y) <= rel * max(abs(x), abs(y)) else [f"{where}: {a!r} != {b!r}"]
    if type(a) is not type(b):
        return [f"{where}: {a!r} != {b!r}"]
    if isinstance(a, dict):
        out = []
        for k in sorted(set(a) | set(b)):
            if k not in a or k not in b:
                out.append(f"{where}/{k}: only in {'B' if k not in a else 'A'}")
            else:
                out += _diff(a[k], b[k], f"{where}/{k}", rel)
        return out
    if isinstance(a, list):
        if len(a) != len(b):
            return [f"{where}: length {len(a)} != {len(b)}"]
        return [d for i, (x, y) in enumerate(zip(a, b, strict=True)) for d in _diff(x, y, f"{where}[{i}]", rel)]
    return [] if a == b else [f"{where}: {a!r} != {b!r}"]


def compare(a: str, b: str, rel: float = 0.0) -> int:
    """Differences between two records: exact, or with ``rel`` floats equal to that relative error (the
    per-instruction hashes of a schedule then differ when any time moved by rounding)."""
    with open(a) as f:
        ra = json.load(f)
    with open(b) as f:
        rb = json.load(f)
    diffs = _diff(ra, rb, "", rel)
    for d in diffs[:50]:
        print(d)
    n = sum(len(v) for v in ra.values() if isinstance(v, dict))
    same = "IDENTICAL" if not rel else f"EQUAL to a relative {rel:g}"
    print(same if not diffs else f"{len(diffs)} differences", f"({n} records)")
    return 0 if not diffs else 1


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("record")
    r.add_argument("out")
    r.add_argument("--cache", default=os.environ.get("ESTIMATE_IDENTITY_CACHE"))
    r.add_argument("--no-loo", action="store_true")
    r.add_argument("--only", action="append", default=[], choices=("data", "bench", "calibration"))
    c = sub.add_parser("compare")
    c.add_argument("a")
    c.add_argument("b")
    c.add_argument("--rel", type=float, default=0.0, help="floats equal to this relative error (default: ==)")
    a = ap.parse_args(argv)
    if a.cmd == "compare" and not 0.0 <= a.rel < 1.0:
        ap.error(f"compare --rel: a relative error in [0, 1) (0: exact), got {a.rel}")
    if a.cmd == "record":
        record(a.out, a.cache, not a.no_loo, a.only)
        return 0
    return compare(a.a, a.b, a.rel)


if __name__ == "__main__":
    sys.exit(main())
