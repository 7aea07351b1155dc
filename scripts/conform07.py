#!/usr/bin/env python3
"""Development conformance runner for the NKI 0.7 front end (not part of CI).

Runs public NKI 0.6/0.7 (``import nki``) code, unmodified, through ``install_nki_alias`` and
prints a Markdown table for the README.  The third-party code stays outside this repository:
point the runner at local clones.

    .venv/bin/python scripts/conform07.py --sdk /path/aws-neuron-sdk \\
        [--nki-library /path/nki-library --library-python /path/venv-with-torch/bin/python]

Suites:
  sdk-examples    the SDK's nki/examples kernels that import `nki`, with inputs and NumPy
                  references written here (the examples' own mains need a device or torch_xla)
  sdk-docstrings  the code blocks of the NKI 0.6 API docstrings (nki/api/nki/language, nki/api/nki/isa),
                  the NKI language guide and the access-pattern deep dive: self-contained ones run
                  as a kernel body, their asserts checked
  nki-library     nki-library's own `-m fast` tests in its simulation mode, with its simulator
                  hook pointed at this interpreter (scripts/conform07_nkilib_plugin.py); needs a
                  Python with torch and the library's test requirements (--library-python)
"""
from __future__ import annotations

import argparse
import ast
import collections
import importlib.util
import os
import re
import subprocess
import sys
import textwrap
import time
import traceback
import warnings

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from nki_kernels.sim import install_nki_alias  # noqa: E402


def _load(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    m = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(m)
    return m


def _close(out, ref, rtol=2e-2, atol_scale=1e-2):
    o = np.asarray(out, dtype=np.float64)
    r = np.asarray(ref, dtype=np.float64)
    if o.shape != r.shape:
        return f"shape {o.shape} vs {r.shape}"
    if not np.all(np.isfinite(o)):
        return "non-finite output"
    err = np.abs(o - r)
    tol = atol_scale * max(1.0, float(np.abs(r).max())) + rtol * np.abs(r)
    return None if np.all(err <= tol) else f"max abs err {err.max():.3g}"


# ---- suite 1: SDK examples ---------------------------------------------------------------------
def _mamba_ref(delta, u, A, B, C):
    bsz, ch, L = delta.shape
    out = np.zeros((bsz, ch, L))
    for b in range(bsz):
        dA = np.exp(delta[b][:, None, :] * A[:, :, None])
        dBu = delta[b][:, None, :] * B[b][None, :, :] * u[b][:, None, :]
        st = np.zeros(A.shape)
        for t in range(L):
            st = dA[:, :, t] * st + dBu[:, :, t]
            out[b, :, t] = (st * C[b][None, :, t]).sum(1)
    return out


def sdk_example_cases(ex):
    rng = np.random.default_rng(0)

    def r(*s, dt=np.float32):
        return rng.standard_normal(s).astype(dt)

    mm = os.path.join(ex, "matrix_multiplication/matrix_multiplication_nki_kernels.py")
    cases = [
        ("tensor_addition", "tensor_addition/tensor_addition_nki_kernels.py", "nki_tensor_add",
         lambda: (r(256, 1024, dt=np.float16), r(256, 1024, dt=np.float16)), lambda a, b: a + b),
        ("getting_started_baremetal", "getting_started_baremetal.py", "nki_tensor_add_kernel",
         lambda: (r(4, 3, dt=np.float16), r(4, 3, dt=np.float16)), lambda a, b: a + b),
        ("transpose2d", "transpose2d/transpose2d_nki_kernels.py", "tensor_transpose2D_kernel_",
         lambda: (np.arange(60, dtype=np.int8).reshape(5, 12), (3, 4)),
         lambda a, s: np.transpose(a.reshape(5, 3, 4), (0, 2, 1)).reshape(5, 12)),
        ("average_pool2d", "average_pool2d/average_pool2d_nki_kernels.py", "tensor_avgpool_kernel",
         lambda: (np.arange(72, dtype=np.float16).reshape(2, 6, 6), 2),
         lambda a, p: a.astype(np.float32).reshape(2, 3, 2, 3, 2).mean(axis=(2, 4))),
        ("index-case-3 maxpool", "index-case-3.py", "tensor_maxpool_kernel_",
         lambda: (r(2, 6, 6), 2), lambda a, p: a.reshape(2, 3, 2, 3, 2).max(axis=(2, 4))),
        ("layout-pass", "layout-pass.py", "tensor_exp_kernel_", lambda: (r(128, 512),), np.exp),
        ("layout-violation (must fail: E001)", "layout-violation.py", "tensor_exp_kernel_",
         lambda: (r(256, 512),), "E001"),
    ]
    for kn, (K, M, N) in [("nki_matmul_basic_", (128, 64, 512)), ("nki_matmul_tiled_", (256, 256, 1024)),
                          ("nki_matmul_hoist_load_", (256, 256, 1024)),
                          ("nki_matmul_block_free_dimension_", (256, 256, 2048)),
                          ("nki_matmul_fully_optimized_", (1024, 2048, 1024))]:
        cases.append((f"matmul {kn}", mm, kn, lambda K=K, M=M, N=N: (r(K, M), r(K, N)),
                      lambda a, b: a.T.astype(np.float64) @ b))
    for v in ("mamba_v1", "mamba_v2", "mamba_v3"):
        cases.append((f"fused_mamba {v}", "fused_mamba/mamba_nki_kernels.py", v,
                      lambda: (np.abs(r(1, 256, 512)), r(1, 256, 512), -np.abs(r(256, 16)), r(1, 16, 512),
                               r(1, 16, 512)), _mamba_ref))
    return cases


def run_sdk_examples(sdk):
    ex = os.path.join(sdk, "nki/examples")
    rows = []
    for i, (label, rel, kname, make, ref) in enumerate(sdk_example_cases(ex)):
        path = rel if os.path.isabs(rel) else os.path.join(ex, rel)
        t0 = time.perf_counter()
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                mod = _load(path, f"_conf07_ex{i}")
                args = make()
                if isinstance(ref, str):
                    try:
                        getattr(mod, kname)(*args)
                        status, why = "FAIL", f"expected {ref}, ran"
                    except Exception as e:  # noqa: BLE001 - classify any failure
                        ok = f"[{ref}]" in str(e)
                        status, why = ("PASS" if ok else "FAIL"), ("" if ok else f"{type(e).__name__}: {e}")
                else:
                    out = getattr(mod, kname)(*args)
                    why = _close(out, ref(*args))
                    status = "PASS" if why is None else "FAIL"
        except Exception as e:  # noqa: BLE001
            status, why = "ERROR", f"{type(e).__name__}: {str(e)[:160]}"
        rows.append((label, status, why or "", time.perf_counter() - t0))
    return rows


# ---- suite 2: docstring examples ----------------------------------------------------------------
def _code_blocks(doc):
    lines, i, out = doc.splitlines(), 0, []
    while i < len(lines):
        if lines[i].strip().startswith(".. code-block:: python"):
            body, ind = [], None
            i += 1
            while i < len(lines):
                ln = lines[i]
                if ln.strip():
                    cur = len(ln) - len(ln.lstrip())
                    ind = cur if ind is None else ind
                    if cur < ind:
                        break
                body.append(ln)
                i += 1
            out.append(textwrap.dedent("\n".join(body)))
        else:
            i += 1
    return out


_GUIDES = ("nki/get-started/nki-language-guide.rst", "nki/deep-dives/nki-aps.rst")


def _doc_snippets(sdk):
    """(label, code, needs_import) for the API docstrings' and the guides' python code blocks."""
    for rel in ("nki/api/nki/language/__init__.py", "nki/api/nki/isa/__init__.py"):
        mod = "nl" if "language" in rel else "nisa"
        tree = ast.parse(open(os.path.join(sdk, rel), encoding="utf-8").read())
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
                for j, code in enumerate(_code_blocks(ast.get_docstring(node) or "")):
                    if "import nki" in code:
                        yield f"{mod}.{node.name}#{j}", code
    for rel in _GUIDES:
        for j, code in enumerate(_code_blocks(open(os.path.join(sdk, rel), encoding="utf-8").read())):
            if re.search(r"\b(nl|nisa)\.", code):
                yield f"{os.path.basename(rel)}#{j}", code


def run_sdk_docstrings(sdk):
    import nki  # the alias
    rows = []
    for label, code in _doc_snippets(sdk):
        if True:
                if "@nki.jit" in code or re.search(r"^\s*def \w+\(", code, re.M):
                    rows.append((label, "SKIP", "defines a kernel/function without inputs", 0.0))
                    continue
                src = ("import numpy as np\nimport nki\nimport nki.language as nl\nimport nki.isa as nisa\n"
                       "def _k():\n" + textwrap.indent(code, "    ") + "\n    return None\n")
                if re.search(r"=\s*\.\.\.\s*[,)]", code):
                    rows.append((label, "SKIP", "has `...` placeholders", 0.0))
                    continue
                try:
                    compile(code, label, "exec")
                except SyntaxError as e:
                    rows.append((label, "SKIP", f"not valid Python ({e.msg})", 0.0))
                    continue
                expect_error = "illegal" in code.lower()    # the docs' own counter-examples
                env = {}
                t0 = time.perf_counter()
                try:
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore")
                        exec(compile(src, f"<{label}>", "exec"), env)
                        nki.simulate(env["_k"])()
                    status, why = ("FAIL", "a documented illegal access ran") if expect_error else ("PASS", "")
                except NameError as e:
                    status, why = "SKIP", f"not self-contained ({e})"
                except AssertionError:
                    status, why = "FAIL", "an assert of the example failed"
                except AttributeError as e:
                    status, why = "SKIP", f"pseudo-code ({e})"
                except Exception as e:  # noqa: BLE001
                    coded = re.match(r"\[E\d{3}\]", str(e)) is not None
                    status = "PASS" if expect_error and coded else "ERROR"
                    why = "" if status == "PASS" else f"{type(e).__name__}: {str(e)[:160]}"
                rows.append((label, status, why, time.perf_counter() - t0))
    return rows


# ---- suite 3: nki-library ---------------------------------------------------------------------------
def run_nki_library(lib, python, timeout, only=()):
    plugin_dir = os.path.join(ROOT, "scripts")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([plugin_dir, ROOT, os.path.join(lib, "src"), lib]),
               OPENBLAS_NUM_THREADS="1", NKI_BACKEND="sim")
    rows = []
    files = sorted(os.path.relpath(os.path.join(d, f), lib) for d, _, fs in os.walk(os.path.join(lib, "test/integration"))
                   for f in fs if f.startswith("test_") and f.endswith(".py"))
    if only:
        files = [f for f in files if any(o in f for o in only)]
    for f in files:
        t0 = time.perf_counter()
        try:
            p = subprocess.run([python, "-m", "pytest", "-p", "conform07_nkilib_plugin", f, "-q", "-m", "fast",
                                "--test-mode=simulation", "-p", "no:cacheprovider", "-rfE", "--tb=line",
                                "-o", "cache_dir=/tmp/conform07-cache"],
                               cwd=lib, env=env, capture_output=True, text=True, timeout=timeout)
            text = p.stdout + p.stderr
        except subprocess.TimeoutExpired:
            rows.append((f, "ERROR", f"timeout {timeout}s", time.perf_counter() - t0))
            continue
        counts = {k: int(n) for n, k in re.findall(r"(\d+) (passed|failed|errors?|skipped|deselected)", text)}
        counts["error"] = counts.pop("errors", 0) + counts.pop("error", 0)
        first = next((ln for ln in text.splitlines() if ln.startswith(("FAILED", "ERROR", "E "))), "")
        rows.append((f, counts, first[:200], time.perf_counter() - t0))
    return rows


# ---- report ---------------------------------------------------------------------------------------------
def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sdk", help="path of an aws-neuron-sdk clone (NKI 0.6 docs, nki/examples)")
    ap.add_argument("--nki-library", help="path of an aws-neuron/nki-library clone")
    ap.add_argument("--library-python", default=sys.executable,
                    help="Python with torch + nki-library test requirements (default: this one)")
    ap.add_argument("--timeout", type=int, default=300, help="seconds per nki-library test file (default 300)")
    ap.add_argument("--only", action="append", default=[], metavar="SUBSTRING",
                    help="nki-library: only test files whose path contains SUBSTRING (repeatable)")
    ap.add_argument("-v", "--verbose", action="store_true", help="print every case")
    args = ap.parse_args(argv)
    if not args.sdk and not args.nki_library:
        ap.print_help()
        print("\nconform07: give --sdk and/or --nki-library", file=sys.stderr)
        return 2
    table = []
    with install_nki_alias():
        for name, fn, arg in (("sdk-examples", run_sdk_examples, args.sdk),
                              ("sdk-docstrings", run_sdk_docstrings, args.sdk)):
            if not arg:
                continue
            rows = fn(arg)
            c = collections.Counter(r[1] for r in rows)
            table.append((name, c["PASS"], c["FAIL"], c["ERROR"], c["SKIP"]))
            for r in rows:
                if args.verbose or r[1] in ("FAIL", "ERROR"):
                    print(f"  {name}: {r[0]:45s} {r[1]:5s} {r[3]:6.2f}s {r[2]}")
    if args.nki_library:
        rows = run_nki_library(args.nki_library, args.library_python, args.timeout, args.only)
        tot = collections.Counter()
        for f, counts, first, secs in rows:
            if isinstance(counts, str):
                tot["error"] += 1
                print(f"  nki-library: {f}: {counts} {first}")
                continue
            tot.update(counts)
            if args.verbose or counts.get("failed") or counts.get("error"):
                print(f"  nki-library: {f}: {dict(counts)} {secs:.0f}s {first}")
        table.append(("nki-library (-m fast)", tot["passed"], tot["failed"], tot["error"], tot["skipped"]))
    print("\n| suite | pass | fail | error | skipped |\n|---|---|---|---|---|")
    for name, p, f, e, s in table:
        print(f"| {name} | {p} | {f} | {e} | {s} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
