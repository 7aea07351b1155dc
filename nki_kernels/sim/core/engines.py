"""Which engine may run which ALU op: the SDK 2.26 table, encoded once, as data.

Source: aws-neuron-sdk 49ee15c5 (Neuron 2.26.0), ``general/nki/api/nki.api.shared.rst``,
table ``tbl-aluop`` ("Supported Math Operators by NKI ISA": operator, legal reduction op,
supported engine) and its note: "Add and Multiply are supported on Scalar Engine only from
NeuronCore-v3" (trn2 is NeuronCore-v3, so Scalar is listed).  ``divide`` is not in the table:
it is not an ISA ALU op (``nl.divide`` stays a legal ``nl.*`` op, 2.26 language docs).

Per-instruction rules from the 2.26 ISA docstrings (``general/nki/api/nki/isa/__init__.py``):
``tensor_tensor`` runs on Vector or GpSimd ("power or integer add, multiply, or subtract ...
run on the GpSimd Engine"); ``tensor_scalar`` on Vector, Scalar or GpSimd, GpSimd "only allowed
for rsqrt", Scalar on trn2 only for (multiply, add), (multiply, None), (add, None), bitvec ops
only on Vector; ``tensor_reduce`` and ``scalar_tensor_tensor`` run on Vector and have no
``engine`` parameter.
"""

from __future__ import annotations

from collections.abc import Sequence

from .errors import NKISyntaxError, SimValueError
from .trace import ACT, DVE, POOL, Engine

VECTOR, SCALAR, GPSIMD = DVE, ACT, POOL
ENGINE_NAME = {DVE: "Vector", ACT: "Scalar", POOL: "GpSimd"}

_V, _VGS, _GS, _VS, _G = (VECTOR,), (VECTOR, GPSIMD, SCALAR), (GPSIMD, SCALAR), (VECTOR, SCALAR), (GPSIMD,)

# op name -> (engines that run it, legal as a reduction op)            [tbl-aluop, 2.26]
ALU_OPS: dict[str, tuple[tuple[Engine, ...], bool]] = {
    # bitvec
    "invert": (_V, False),
    "bitwise_and": (_V, True),
    "bitwise_or": (_V, True),
    "bitwise_xor": (_V, True),
    "left_shift": (_V, False),
    "right_shift": (_V, False),
    # arithmetic
    "add": (_VGS, True),
    "subtract": (_V, True),
    "multiply": (_VGS, True),
    "maximum": (_V, True),
    "minimum": (_V, True),
    "equal": (_V, False),
    "not_equal": (_V, False),
    "greater_equal": (_V, False),
    "greater": (_V, False),
    "less_equal": (_V, False),
    "less": (_V, False),
    "logical_not": (_V, False),
    "logical_and": (_V, True),
    "logical_or": (_V, True),
    "logical_xor": (_V, True),
    "rsqrt": (_GS, False),
    "reciprocal": (_VS, False),
    "abs": (_VS, False),
    "power": (_G, False),
}
ALIASES = {"max": "maximum", "min": "minimum"}
BITVEC = frozenset(("invert", "bitwise_and", "bitwise_or", "bitwise_xor", "left_shift", "right_shift"))

# tensor_scalar on the Scalar Engine of trn2: the only (op0, op1) combinations [isa tensor_scalar]
SCALAR_TENSOR_SCALAR = frozenset((("multiply", "add"), ("multiply", None), ("add", None)))


LEGAL = frozenset((op, e) for op, (engines, _) in ALU_OPS.items() for e in engines)


def legal(name: str, engine: str) -> bool:
    """Does ALU op ``name`` run on ``engine`` (tbl-aluop)?  A tuple membership test: the engines are
    enum members, whose hash is a Python-level call, so the hot paths do not hash them."""
    entry = ALU_OPS.get(name)
    return entry is not None and engine in entry[0]


_PICKED: dict[tuple[tuple[str | None, ...], tuple[Engine, ...], Engine], Engine] = {}


def canonical(name: str) -> str:
    return ALIASES.get(name, name)


def _legal(name):
    return ", ".join(ENGINE_NAME[e] for e in ALU_OPS[name][0])


def alu_op(api: str, arg: str, name: str) -> str:
    """``name`` as an ISA ALU op, or E021 if it is not one (e.g. divide)."""
    if name in ALU_OPS:
        return name
    n = canonical(name)
    if n not in ALU_OPS:
        raise NKISyntaxError(
            "E021",
            api,
            arg,
            f"{name} is not supported in '{api}': not an ISA ALU op (SDK 2.26 tbl-aluop)",
            "Use an op of the table, e.g. nl.multiply by a reciprocal instead of divide; "
            "nl.divide is an nl.* op, not an instruction op",
        )
    return n


def check(api: str, arg: str, name: str, engine: Engine, *, integer: bool = False) -> None:
    """E025 if ALU op ``name`` cannot run on ``engine`` (names the legal engines)."""
    if legal(name, engine):
        return
    n = alu_op(api, arg, name)
    engines = ALU_OPS[n][0]
    if engine in engines:
        return
    if integer and engine == GPSIMD and n in ("add", "multiply", "subtract") and api == "tensor_tensor":
        return  # tensor_tensor doc: integer add/multiply/subtract run on GpSimd
    raise SimValueError(
        "E025",
        api,
        arg,
        f"'{n}' does not run on the {ENGINE_NAME[engine]} Engine (SDK 2.26 tbl-aluop: {_legal(n)})",
        f"Use engine={'/'.join('nisa.' + ENGINE_NAME[e].lower() + '_engine' for e in engines)} or leave engine unset",
        got=ENGINE_NAME[engine],
        limit=_legal(n),
    )


def check_reduce(api: str, arg: str, name: str) -> str:
    """E021 if ``name`` is not a legal reduction op (tbl-aluop 'Legal Reduction op')."""
    n = alu_op(api, arg, name)
    if not ALU_OPS[n][1]:
        legal = ", ".join(k for k, v in ALU_OPS.items() if v[1])
        raise NKISyntaxError(
            "E021",
            api,
            arg,
            f"{n} is not supported in '{api}': not a legal reduction op (SDK 2.26 tbl-aluop)",
            f"Legal reduction ops: {legal}",
        )
    return n


def pick(names: Sequence[str | None], allowed: tuple[Engine, ...], preferred: Engine) -> Engine:
    """The engine the compiler would use for ``engine=unknown``: ``preferred`` if every op runs
    there, else the first engine of ``allowed`` that runs them all (else ``preferred``, and the
    legality check names the problem)."""
    key = (tuple(names), allowed, preferred)
    r = _PICKED.get(key)
    if r is None:
        ns = [canonical(n) for n in names if n is not None]
        r = preferred
        for e in (preferred,) + tuple(allowed):
            if all(n not in ALU_OPS or e in ALU_OPS[n][0] for n in ns):
                r = e
                break
        _PICKED[key] = r
    return r


def no_engine_parameter(api: str, kw: dict) -> None:
    """E025 for ``engine=`` on an instruction whose 2.26 signature has no engine parameter."""
    if "engine" in kw:
        raise SimValueError(
            "E025",
            api,
            "engine",
            f"nisa.{api} has no engine parameter in SDK 2.26 (it always runs on the Vector Engine)"
            if api in ("tensor_reduce", "scalar_tensor_tensor")
            else f"nisa.{api} has no engine parameter in SDK 2.26",
            "Remove engine=; only tensor_tensor, tensor_scalar, tensor_copy, nc_transpose and memset take one",
        )
