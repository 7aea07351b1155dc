"""Interpreter options (frozen, keyword-only), in the style of Pallas' interpret params.

    from nki_kernels.sim import SimOptions, simulate_kernel
    simulate_kernel(k, x, options=SimOptions(poison=True, shuffle_affine_seed=0))

or process-wide via ``nki_kernels.sim.set_default_options(...)`` / env ``NKI_SIM_OPTIONS``
("poison=1,shuffle_affine_seed=3,precision=compat").
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, kw_only=True)
class SimOptions:
    # Fill memory that is allocated but not initialised (nl.ndarray, kernel outputs, results
    # of masked ops) with NaN (floats) or the dtype's max (ints), so reads of uninitialised
    # data show up in the output.  Real hardware leaves garbage; the real simulator zeros.
    poison: bool = True
    # If set, run every nl.affine_range loop in a shuffled order (seeded): on hardware the
    # iterations may be reordered/pipelined, so a kernel whose result depends on the order
    # has a loop-carried dependency bug.  Ignored under skip_middle_end_transformations,
    # where affine_range is documented to behave like sequential_range.
    shuffle_affine_seed: int | None = None
    # "hw": every write rounds to the destination dtype (bf16/fp8/tf32 RNE), like hardware
    #        and NKI_PRECISE_FP=1.  "compat": bf16/fp8/tf32 tiles are held at fp32 precision
    #        and rounded only when outputs are returned, like neuronxcc's simulate_kernel.
    precision: str = "hw"
    # Warn (SimWarning) on `+=` that is not a matmul accumulating into PSUM.
    warn_non_psum_accumulate: bool = True
    # Enforce SBUF/PSUM capacity per partition and one 2 KiB PSUM bank per tile.
    check_capacity: bool = True
    # Record the instruction trace (input of the cost model).
    trace: bool = True
    # Skip NumPy math in the big compute ops (matmul/transpose/elementwise) and only record
    # the trace; outputs are then meaningless.  For cost-model runs on large shapes.
    trace_only: bool = False
    # Turn every SimWarning about a hardware-unproven construct (3-D SBUF->SBUF dma_transpose,
    # slice of a slice, a zero-trip affine_range, ...) into an error.  The project's own kernel
    # tests run strict; third-party code gets warnings.
    strict: bool = False
    # Stop a run after this many instructions with E031: a runaway kernel (a `while True` loop of
    # instructions) otherwise grows its trace by about 1 KB per instruction until the machine runs
    # out of memory (measured: 1.1 GB in 60 s).  The default leaves room for the CS149 part 1 starter
    # at the assignment's size (vector add tiled with 1-element chunks, n = 262,144: 1,048,576
    # instructions, a trace of about 1.2 GB) and stops a runaway loop before about 5 GB; raise it for
    # bigger kernels (NKI_SIM_OPTIONS=max_instructions=N, or nki-kernels run/profile --max-instructions N).
    max_instructions: int = 4_000_000
    # Run the body of an NKI 0.1 affine_range as a loop program where it can be proven affine and independent: its
    # first two iterations traced, the others run at once over NumPy (core/program.py).  Same outputs, trace and
    # errors as running every iteration; False runs every iteration (for comparison).
    loop_programs: bool = True
    # Print one line per affine_range entry: ran as a program, or why it ran per iteration (nki-kernels run --verbose).
    explain_loops: bool = False

    def __post_init__(self) -> None:
        if self.precision not in ("hw", "compat"):
            raise ValueError(f"SimOptions(precision): got {self.precision!r}, allowed 'hw' or 'compat'")
        if self.shuffle_affine_seed is not None and not isinstance(self.shuffle_affine_seed, int):
            raise ValueError(
                f"SimOptions(shuffle_affine_seed): must be an int or None, got {self.shuffle_affine_seed!r}"
            )
        m = self.max_instructions
        if isinstance(m, bool) or not isinstance(m, int) or m < 1:
            raise ValueError(f"SimOptions(max_instructions): must be an int >= 1, got {m!r}")

    def replace(self, **kw: Any) -> SimOptions:
        return dataclasses.replace(self, **kw)


_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off")


def _from_env() -> SimOptions:
    """Parse ``NKI_SIM_OPTIONS`` ("name=value,..."); anything unclear is an error, never a guess.

    Booleans take only 1/0, true/false, yes/no, on/off (any case): ``poison=maybe`` or a bare
    ``poison`` must not silently turn an option off.
    """
    spec = os.environ.get("NKI_SIM_OPTIONS", "").strip()
    if not spec:
        return SimOptions()
    kw: dict[str, Any] = {}
    fields = {f.name: f for f in dataclasses.fields(SimOptions)}
    for item in spec.split(","):
        if not item.strip():
            continue
        name, sep, val = item.partition("=")
        name, val = name.strip(), val.strip()
        if name not in fields:
            raise ValueError(f"NKI_SIM_OPTIONS: unknown option {name!r}; allowed: {', '.join(fields)}")
        if not sep:
            raise ValueError(f"NKI_SIM_OPTIONS: option {name!r} needs a value ({name}=...), got {item.strip()!r}")
        if name in kw:  # `poison=0,poison=1`: which one was meant is not ours to guess
            raise ValueError(f"NKI_SIM_OPTIONS: option {name!r} given twice; give it once")
        if name == "precision":
            kw[name] = val
        elif name == "shuffle_affine_seed":
            if val in ("", "none", "None"):
                kw[name] = None
            elif not val.isdigit():  # the same rule as `nki-kernels run --shuffle SEED`
                raise ValueError(f"NKI_SIM_OPTIONS: shuffle_affine_seed must be an integer >= 0 or none, got {val!r}")
            else:
                kw[name] = int(val)
        elif name == "max_instructions":
            if not val.isdigit() or int(val) < 1:
                raise ValueError(f"NKI_SIM_OPTIONS: max_instructions must be an integer >= 1, got {val!r}")
            kw[name] = int(val)
        elif val.lower() in _TRUE:
            kw[name] = True
        elif val.lower() in _FALSE:
            kw[name] = False
        else:
            raise ValueError(
                f"NKI_SIM_OPTIONS: {name}={val!r} is not a boolean; allowed: "
                f"{', '.join(_TRUE)} (true) or {', '.join(_FALSE)} (false)"
            )
    return SimOptions(**kw)


_default: SimOptions | None = None


def default_options() -> SimOptions:
    global _default
    if _default is None:
        _default = _from_env()
    return _default


def set_default_options(options: SimOptions | None = None, **kw: Any) -> SimOptions:
    """Set the process-wide default options; returns the previous ones."""
    global _default
    prev = default_options()
    _default = options if options is not None else prev.replace(**kw)
    return prev
