"""``neuronxcc.nki.language.constants``: the module public NKI 0.1 kernels import for sizes.

Seen in public kernels: ``from neuronxcc.nki.language.constants import sizeinbytes`` (bytes of
one element of a dtype) and ``import neuronxcc.nki.language.constants as constants``; the 2.26
allocation docs (``general/nki/api/nki/compiler/sbuf.py`` at 49ee15c5) name
``nki.language.constants.sbuf_min_align``.  The alignments are ``nl.tile_size``'s.
"""

from __future__ import annotations

from typing import TYPE_CHECKING as _TYPE_CHECKING

from ..core import dtypes as _dt
from .language import tile_size as _tile_size

if _TYPE_CHECKING:
    from typing import Any

sbuf_min_align = _tile_size.sbuf_min_align
psum_min_align = _tile_size.psum_min_align


def sizeinbytes(dtype: Any) -> int:
    """Bytes of one element of ``dtype`` (an NKI dtype, a NumPy dtype or its name)."""
    return _dt.itemsize(_dt.canonical(dtype, op="sizeinbytes"))
