"""Suites ``sdk-examples`` and ``sdk-docstrings`` (NKI 0.7): the aws-neuron-sdk's ``import nki`` code.

``sdk-examples``: the ``nki/examples`` kernels that import ``nki`` (their own mains need a device,
torch_xla or JAX), called here with inputs and float64 NumPy references written for them, and
compared by the project's one comparison, ``tolerances.compare`` (exact for integer outputs).
One example is the docs' own layout violation, which must fail with E001.

``sdk-docstrings``: the ``.. code-block:: python`` blocks of the NKI 0.6 ``nki.language`` /
``nki.isa`` docstrings (``nki/api``), the language guide and the access-pattern deep dive; a
self-contained block runs as the body of a kernel, its asserts checked.  Blocks that are not
runnable as they stand (pseudo-code, ``...`` placeholders, names defined elsewhere, a function
without inputs) are ``skip`` with the reason; blocks the docs call illegal must raise a coded error.

Both run in this process with ``install_nki_alias()`` installed.
"""

from __future__ import annotations

import ast
import importlib.util
import os
import re
import textwrap
import time
import traceback
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from nki_kernels.conformance.results import Options, Report, Result
from nki_kernels.sim import install_nki_alias
from nki_kernels.tolerances import compare

_EXAMPLES = "sdk-examples"
_DOCS = "sdk-docstrings"


@dataclass(frozen=True)
class Example:
    """One ``nki/examples`` kernel: where it is, its inputs, and its reference (or the error code it
    must raise)."""

    label: str
    file: str  # relative to nki/examples
    kernel: str
    inputs: Callable[[], tuple[Any, ...]]
    reference: Callable[..., Any] | str


def _mamba_ref(delta: Any, u: Any, A: Any, B: Any, C: Any) -> Any:
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


def examples() -> list[Example]:
    """The examples, with seeded inputs (seed 0, drawn when the example runs)."""
    rng = np.random.default_rng(0)

    def r(*s: int, dt: Any = np.float32) -> Any:
        return rng.standard_normal(s).astype(dt)

    f64 = np.float64

    def _exp(a: Any) -> Any:
        return np.exp(a.astype(f64))

    def _big() -> tuple[Any, ...]:
        return (r(256, 512),)  # 256 partitions: over the 128 limit

    mm = "matrix_multiplication/matrix_multiplication_nki_kernels.py"
    out = [
        Example(
            "tensor_addition",
            "tensor_addition/tensor_addition_nki_kernels.py",
            "nki_tensor_add",
            lambda: (r(256, 1024, dt=np.float16), r(256, 1024, dt=np.float16)),
            lambda a, b: a.astype(f64) + b,
        ),
        Example(
            "getting_started_baremetal",
            "getting_started_baremetal.py",
            "nki_tensor_add_kernel",
            lambda: (r(4, 3, dt=np.float16), r(4, 3, dt=np.float16)),
            lambda a, b: a.astype(f64) + b,
        ),
        Example(
            "transpose2d",
            "transpose2d/transpose2d_nki_kernels.py",
            "tensor_transpose2D_kernel_",
            lambda: (np.arange(60, dtype=np.int8).reshape(5, 12), (3, 4)),
            lambda a, s: np.transpose(a.reshape(5, 3, 4), (0, 2, 1)).reshape(5, 12),
        ),
        Example(
            "average_pool2d",
            "average_pool2d/average_pool2d_nki_kernels.py",
            "tensor_avgpool_kernel",
            lambda: (np.arange(72, dtype=np.float16).reshape(2, 6, 6), 2),
            lambda a, p: a.astype(f64).reshape(2, 3, 2, 3, 2).mean(axis=(2, 4)),
        ),
        Example(
            "index-case-3 maxpool",
            "index-case-3.py",
            "tensor_maxpool_kernel_",
            lambda: (r(2, 6, 6), 2),
            lambda a, p: a.astype(f64).reshape(2, 3, 2, 3, 2).max(axis=(2, 4)),
        ),
        Example("layout-pass", "layout-pass.py", "tensor_exp_kernel_", lambda: (r(128, 512),), _exp),
        Example("layout-violation (must fail: E001)", "layout-violation.py", "tensor_exp_kernel_", _big, "E001"),
    ]
    for kn, (K, M, N) in [
        ("nki_matmul_basic_", (128, 64, 512)),
        ("nki_matmul_tiled_", (256, 256, 1024)),
        ("nki_matmul_hoist_load_", (256, 256, 1024)),
        ("nki_matmul_block_free_dimension_", (256, 256, 2048)),
        ("nki_matmul_fully_optimized_", (1024, 2048, 1024)),
    ]:
        out.append(
            Example(
                f"matmul {kn}",
                mm,
                kn,
                lambda K=K, M=M, N=N: (r(K, M), r(K, N)),  # type: ignore[misc]
                lambda a, b: a.T.astype(f64) @ b,
            )
        )
    for v in ("mamba_v1", "mamba_v2", "mamba_v3"):
        out.append(
            Example(
                f"fused_mamba {v}",
                "fused_mamba/mamba_nki_kernels.py",
                v,
                lambda: (np.abs(r(1, 256, 512)), r(1, 256, 512), -np.abs(r(256, 16)), r(1, 16, 512), r(1, 16, 512)),
                _mamba_ref,
            )
        )
    return out


def _load(path: str, name: str) -> Any:
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path}")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _compare(out: Any, ref: Any) -> str | None:
    """Why ``out`` does not match ``ref`` (None if it does): ``tolerances.compare`` at the output's
    dtype, exact for integer outputs."""
    o = np.asarray(out)
    exact = o.dtype.kind in "iub"
    res = compare(o, ref, "float32" if exact else o.dtype, rtol=0.0 if exact else None, atol=0.0 if exact else None)
    return None if res["ok"] else str(res["reason"])


def _run_example(ex: Example, examples_dir: str, k: int) -> Result:
    path = os.path.join(examples_dir, ex.file)
    t0 = time.perf_counter()
    tb = ""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            kernel = getattr(_load(path, f"_nki_conformance_example_{k}"), ex.kernel)
            args = ex.inputs()
            if isinstance(ex.reference, str):
                try:
                    kernel(*args)
                    outcome, why = "fail", f"expected the coded error {ex.reference}, but the kernel ran"
                except Exception as e:  # noqa: BLE001 - any exception is judged by its code
                    got = f"expected {ex.reference}, got {type(e).__name__}: {e}"
                    outcome, why = ("pass", "") if f"[{ex.reference}]" in str(e) else ("fail", got)
            else:
                why_not = _compare(kernel(*args), ex.reference(*args))
                outcome, why = ("pass", "") if why_not is None else ("fail", why_not)
    except Exception as e:  # noqa: BLE001 - an interpreter error or a missing API: reported, not raised
        outcome, why, tb = "error", f"{type(e).__name__}: {str(e)[:300]}", traceback.format_exc()
    return Result(_EXAMPLES, ex.label, path, outcome, time.perf_counter() - t0, why, tb)


def run_examples(opts: Options, report: Report) -> list[Result]:
    """The ``sdk-examples`` suite over ``opts.sdk``."""
    assert opts.sdk is not None
    examples_dir = os.path.join(opts.sdk, "nki", "examples")
    results = []
    with install_nki_alias():
        for k, ex in enumerate(examples()):
            if opts.select and opts.select not in ex.label:
                continue
            r = _run_example(ex, examples_dir, k)
            report(r)
            results.append(r)
    return results


# ---------------------------------------------------------------------------------------------- docstrings


def code_blocks(doc: str) -> list[str]:
    """The bodies of the ``.. code-block:: python`` directives of a reStructuredText text."""
    lines, i, out = doc.splitlines(), 0, []
    while i < len(lines):
        if lines[i].strip().startswith(".. code-block:: python"):
            body: list[str] = []
            indent = None
            i += 1
            while i < len(lines):
                ln = lines[i]
                if ln.strip():
                    cur = len(ln) - len(ln.lstrip())
                    indent = cur if indent is None else indent
                    if cur < indent:
                        break
                body.append(ln)
                i += 1
            out.append(textwrap.dedent("\n".join(body)))
        else:
            i += 1
    return out


_API_FILES = ("nki/api/nki/language/__init__.py", "nki/api/nki/isa/__init__.py")
_GUIDES = ("nki/get-started/nki-language-guide.rst", "nki/deep-dives/nki-aps.rst")


def snippets(sdk: str) -> Iterator[tuple[str, str, str]]:
    """(label, file, code) of every Python code block of the API docstrings and the two guides."""
    for rel in _API_FILES:
        mod = "nl" if "language" in rel else "nisa"
        path = os.path.join(sdk, rel)
        with open(path, encoding="utf-8") as f:
            tree = ast.parse(f.read())
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
                for j, code in enumerate(code_blocks(ast.get_docstring(node) or "")):
                    if "import nki" in code:
                        yield f"{mod}.{node.name}#{j}", path, code
    for rel in _GUIDES:
        path = os.path.join(sdk, rel)
        with open(path, encoding="utf-8") as f:
            text = f.read()
        for j, code in enumerate(code_blocks(text)):
            if re.search(r"\b(nl|nisa)\.", code):
                yield f"{os.path.basename(rel)}#{j}", path, code


def _run_snippet(label: str, path: str, code: str) -> Result:
    import nki  # the interpreter's alias, importable only while the caller has it installed

    def done(outcome: str, why: str = "", seconds: float = 0.0, tb: str = "") -> Result:
        return Result(_DOCS, label, path, outcome, seconds, why, tb)

    if "@nki.jit" in code or re.search(r"^\s*def \w+\(", code, re.M):
        return done("skip", "defines a kernel or function without inputs")
    if re.search(r"=\s*\.\.\.\s*[,)]", code):
        return done("skip", "has `...` placeholders")
    try:
        compile(code, label, "exec")
    except SyntaxError as e:
        return done("skip", f"not valid Python ({e.msg})")
    src = (
        "import numpy as np\nimport nki\nimport nki.language as nl\nimport nki.isa as nisa\n"
        "def _k():\n" + textwrap.indent(code, "    ") + "\n    return None\n"
    )
    expect_error = "illegal" in code.lower()  # the docs' own counter-examples
    env: dict[str, Any] = {}
    t0 = time.perf_counter()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            exec(compile(src, f"<{label}>", "exec"), env)
            nki.simulate(env["_k"])()
        if expect_error:
            return done("fail", "a documented illegal access ran", time.perf_counter() - t0)
        return done("pass", "", time.perf_counter() - t0)
    except NameError as e:
        return done("skip", f"not self-contained ({e})")
    except AssertionError:
        return done("fail", "an assert of the example failed", time.perf_counter() - t0, traceback.format_exc())
    except AttributeError as e:
        return done("skip", f"pseudo-code ({e})")
    except Exception as e:  # noqa: BLE001 - judged by its code
        if expect_error and re.match(r"\[E\d{3}\]", str(e)):
            return done("pass", "", time.perf_counter() - t0)
        return done("error", f"{type(e).__name__}: {str(e)[:300]}", time.perf_counter() - t0, traceback.format_exc())


def run_docs(opts: Options, report: Report) -> list[Result]:
    """The ``sdk-docstrings`` suite over ``opts.sdk``.

    The snapshot documents NKI 0.6 (SDK 2.32), whose docstrings still show ``nl.dynamic_range`` and
    ``while reg:``; SDK 2.33 runs such 0.6 code only under its previous specialization,
    ``NKI_COMPILER_FRONTEND=custom`` (docs/nki-0.7-spec.md K9), so the blocks run under it."""
    assert opts.sdk is not None
    results = []
    saved = os.environ.get("NKI_COMPILER_FRONTEND")
    os.environ["NKI_COMPILER_FRONTEND"] = "custom"
    try:
        with install_nki_alias():
            for label, path, code in snippets(opts.sdk):
                if opts.select and opts.select not in label:
                    continue
                r = _run_snippet(label, path, code)
                report(r)
                results.append(r)
    finally:
        if saved is None:
            del os.environ["NKI_COMPILER_FRONTEND"]
        else:
            os.environ["NKI_COMPILER_FRONTEND"] = saved
    return results
