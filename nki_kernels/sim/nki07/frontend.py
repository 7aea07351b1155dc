"""Which specialization the NKI 0.7 front end models: ``NKI_COMPILER_FRONTEND`` (docs/nki-0.7-spec.md K9).

NKI 0.7.0 (SDK 2.33) specializes a kernel by tracing it with Python (the "tracer"); the previous
specialization (the "parser": dedicated compiler lowering passes over the kernel's source) stays
available for one release with ``NKI_COMPILER_FRONTEND=custom``, deprecated in 2.33 (SDK 2.33
announcement ``about-neuron/announcements/neuron2.x/announce-nki-specialization-change``; RN 0.7.0
"Specialization by Python tracing").  The variable only selects the specialization; the interpreter
reads it when a kernel uses a construct whose rules differ between the two:

* tracer (unset, the 2.33 default): ``nl.dynamic_range`` and ``while reg:`` are removed (E015 naming
  ``fori_loop`` / ``while_loop``); a register in Python control flow or ``int()`` raises; NkiScalars
  (``scalar_load`` / ``scalar_store``) exist; the body of a ``fori_loop`` with int bounds gets an
  NkiScalar; the 0.6 parser's source restrictions on meta-programming no longer apply;
* custom (the NKI 0.6 parser): the 0.6 rules, ``dynamic_range`` deprecated but running, scalars rejected.

Other values: the pages we have name only ``custom``; any other non-empty value warns and selects the
tracer, the 2.33 default.
"""

from __future__ import annotations

import os

from ..core.context import maybe_current

ENV = "NKI_COMPILER_FRONTEND"


def custom() -> bool:
    """True when ``NKI_COMPILER_FRONTEND=custom`` selects the previous (0.6 parser) specialization."""
    v = os.environ.get(ENV, "").strip().lower()
    if not v:
        return False
    ctx = maybe_current()
    if v == "custom":
        if ctx is not None:
            ctx.warn_once(
                "nki07_frontend_custom",
                "NKI_COMPILER_FRONTEND=custom keeps the NKI 0.6 specialization: deprecated in Neuron 2.33.0 and "
                "removed in the next release (migrate dynamic_range / `while reg:` to nl.fori_loop / nl.while_loop)",
            )
        return True
    if ctx is not None:
        ctx.warn_once(
            "nki07_frontend_unknown",
            f"NKI_COMPILER_FRONTEND={v!r}: the SDK 2.33 pages name only 'custom' (the previous specialization); "
            "the interpreter traces the kernel (the 2.33 default)",
        )
    return False
