"""The never-stricter policy: which of the interpreter's rules are errors by default.

A rule is an **error by default** only where a documented error class (the SDK 2.26 errors page), a stated
constraint of the docs (API docstrings, the known-issues page, the programming model), or a known compiler failure
names it.  Where the sources are silent, or where public code that ran on hardware contradicts our reading of them,
the rule is **lenient**: a ``SimWarning`` that names the rule and the code it would raise, once per kernel line,
and the coded error under ``SimOptions(strict=True)`` (``nki-kernels run --strict``).  Public code that ran on
hardware outranks our reading of the docs (spec corrections, turn 4, item H).

Every lenient rule is one row of :data:`LENIENT`; :func:`nki_kernels.sim.core.context.lenient` is the one function
that applies it.  The README's rejection table lists each row (checked by ``simulator_tests/test_policy.py``), and
``simulator_tests/data/nki01_rules/`` holds a bad form (``STRICT = True``) and its fixed twin for each.
"""

from __future__ import annotations

import os
import warnings
from typing import NamedTuple

from .errors import CODES, SimWarning


class Lenient(NamedTuple):
    """A rule that warns by default and raises ``code`` under strict; ``why`` says why it is not an error by
    default (the silent source, or the public code that ran on hardware)."""

    code: str
    why: str


LENIENT: dict[str, Lenient] = {
    # -- trace semantics of loop indices (nki01/symbolic.py) -----------------------------------------------------
    "pm.predicate_truth_value": Lenient(
        "E028",
        "no source documents an error; Python treats the traced object as true (min(k, n - i*k) bounds masks in "
        "CS149 solutions that ran on trn2; `and` joins loop-index predicates in AWS's flash-attention backward)",
    ),
    "pm.index_range_bound": Lenient("E028", "range(i) / affine_range(i) with a loop-index bound: sources silent"),
    "pm.loop_body_traced_once": Lenient(
        "E028", "Python state carried out of a body traced once compiles (MIG 'Consistent control flow behavior')"
    ),
    "pm.scope_carried": Lenient(
        "E027", "a tensor read by the next iteration compiles; the front end reads the tensor from before the loop"
    ),
    # -- tiles and masks --------------------------------------------------------------------------------------------
    "ki.tile_rank_1d": Lenient(
        "E010", "the known-issues page says users 'may' get 'Insufficient rank'; 2024 CS149 solutions used (128,) tiles"
    ),
    "pm.mask_loop_index_nonaffine": Lenient(
        "E015",
        "err_unsupported_expression_in_mask shows `%` of an nl.arange index; a CS149 solution that ran masked a "
        "store with `//` of an affine_range index",
    ),
    "ki.bn_stats_reduce_mask": Lenient(
        "E011",
        "the known-issues page says bn_stats does not support a reduce-axis mask, but the SDK's own layernorm "
        "example (2.26 general/nki/examples/layernorm) masks bn_stats on its free axis",
    ),
    "ki.mask_and": Lenient(
        "E024", "`m1 and m2` is m2 in the SDK's golden nc_match_replace8 test; known issues: unsupported"
    ),
    "ki.invert_bool": Lenient("E024", "nl.invert on bool runs but gives wrong results on hardware (known issues)"),
    "ki.nested_slice": Lenient("E024", "slice of a slice is legal on paper; CS149 course tips report trouble"),
    "ki.top_level_hbm": Lenient(
        "E007", "simulate_kernel returns an on-chip tile's values; hardware needs HBM outputs (known issues)"
    ),
    "ki.psum_operand": Lenient(
        "E024", "a PSUM TensorE operand compiles (the compiler inserts a copy); AWS's flash attention backward does it"
    ),
    # -- instructions -------------------------------------------------------------------------------------------------
    "isa.reduce_axes": Lenient(
        "E024", "the 2.26 doc requires consecutive tensor_reduce axes; trn2 accepts others (aws-neuron-sdk#1257)"
    ),
    "isa.tensor_tensor_column": Lenient(
        "E011", "the ISA docstring requires equal shapes; a student kernel with a (P, 1) operand passed on trn2"
    ),
    "isa.find_index8_absent": Lenient("E024", "SDK 2.26 silent; the NKI 0.6 docs give all ones"),
    "isa.matmul_stationary_rank": Lenient(
        "E003",
        "nc_matmul's stationary with more than one free axis: the isa docs draw [K, M] but state no rank rule; "
        "AWS's nki-library (d2ad3a5) MoE CTE passes a (128, 1, 128) view (the free axes are M)",
    ),
    "isa.dma_transpose_3d": Lenient("E024", "legal on paper; nki-samples keep 3-D DMA transposes off on trn2"),
    "pm.zero_trip_loop": Lenient("E024", "legal on paper; public reports of trouble"),
    "arch.start_partition": Lenient(
        "E026",
        "the arch guide says the compiler's allocator handles start partitions; an NxDI NKI 0.7 kernel writes a "
        "1-partition slice starting at partition 1",
    ),
    # -- iterations and instances ------------------------------------------------------------------------------------
    "err_unexpected_output_dependencies.rmw": Lenient(
        "E029",
        "a non-matmul `+=` across affine_range iterations: the affine_range docstring admits associative "
        "reductions, aws-neuron-sdk#1056 shows the compiler failing on one",
    ),
    "spmd.output_overlap": Lenient(
        "E029", "err_unexpected_output_dependencies covers affine_range iterations, not SPMD instances"
    ),
    # -- NKI 0.7 (nki07/) --------------------------------------------------------------------------------------------
    "nki07.kwonly_signature": Lenient(
        "E010",
        "`*` in a kernel signature was the NKI 0.3-0.6 parser's rule; NKI 0.7 specializes by Python tracing (RN 0.7.0) "
        "and the 2.33 pages do not repeat it (an error under NKI_COMPILER_FRONTEND=custom)",
    ),
    "nki07.is_operator": Lenient(
        "E010", "`is` / `is not` in a kernel: the 0.3+ migration guide drops it, nki-library's helpers use `is None`"
    ),
    "nki07.argument_value": Lenient(
        "E010",
        "a kernel argument outside the documented NKI values where the sources do not say what the compiler does (an "
        "int outside int32, a float outside fp32, an NKIObject class with a second base under 0.7 tracing)",
    ),
    "nki07.if_tensor": Lenient(
        "E015",
        "`if` on a tensor: the compiler resolves ifs at specialization time, where a tensor is an object: true, "
        "never its contents (nki-library's `if params.expert_index:` tests presence)",
    ),
    "nki07.fori_variable_write": Lenient(
        "E015",
        "SDK 2.33 fori_loop: writing the loop variable 'has no effect on the loop'; the 0.6 rule made it read-only "
        "(an error under NKI_COMPILER_FRONTEND=custom)",
    ),
    "nki07.dma_transpose_dge_none": Lenient(
        "E020",
        "dma_transpose with dge_mode=none: the NKI 0.6 isa docstring lists unknown/hwdge (direct) and unknown/swdge "
        "(indirect) as the only valid modes, yet AWS's nki-library (d2ad3a5) passes dge_mode 3 (none, 'STATIC DMA') "
        "in its MLP/QKV/norm TKG kernels",
    ),
    "nki07.psum_multi_bank": Lenient(
        "E004",
        "an NKI 0.7 PSUM tensor larger than one 2 KiB bank per partition: the 0.7 docs state only that PSUM "
        "allocations start at a bank boundary (migration guide, direct allocation); AWS's nki-library rotational "
        "top-k allocates (128, 1024) fp32 PSUM tensors and matmuls into 512-wide slices of them",
    ),
    "nki07.scalar_immediate_width": Lenient(
        "E011", "a Python int that does not fit an NkiScalar's width: the 2.33 pages are silent (it wraps here)"
    ),
    # -- memory ------------------------------------------------------------------------------------------------------
    "pm.sbuf_spill": Lenient("E006", "the compiler spills SBUF (programming model 'Memory hierarchy')"),
    "pm.psum_capacity": Lenient(
        "E005",
        "the compiler's allocator places PSUM tiles; public GEMMs that ran hold more nl.zeros(buffer=nl.psum) tiles "
        "than the naive count allows",
    ),
}


def enforce(
    rule: str,
    strict: bool,
    warned: set,
    what: str,
    fix: str | None = None,
    *,
    op: str | None = None,
    arg: str | None = None,
    got: object = None,
    limit: object = None,
    where: tuple[str, int],
) -> None:
    """Apply the lenient ``rule`` to one finding at ``where`` (file, line): under ``strict`` raise its coded error;
    otherwise a SimWarning ``[E0xx under strict] rule: what; fix``, once per (rule, line) (``warned`` holds the
    keys already given).  ``context.lenient`` is the entry point inside a run."""
    code = LENIENT[rule].code
    if strict:
        raise CODES[code][0](code, op or rule, arg, what, fix, got=got, limit=limit, where=where)
    file, line = where
    k = (rule, file, line)
    if k in warned:
        return
    warned.add(k)
    text = what.rstrip(".") + (f" (got {got}, limit {limit})" if got is not None else "")
    text += f"; {fix.rstrip('.')}" if fix else ""
    warnings.warn_explicit(
        f"[{code} under strict] {rule}: {text} at {os.path.basename(file)}:{line}", SimWarning, file, line
    )
