"""NKI 0.1 (``neuronxcc.nki``, SDK 2.26/2.27): the interpreter's first front end, over the op core.

Module objects: :mod:`.nki` (``neuronxcc.nki``), :mod:`.language` (``nl``), :mod:`.isa` (``nisa``),
:mod:`.typing`, :mod:`.compiler`, :mod:`.language_constants`.  Calls return their results as new
tiles (:mod:`.adapt`); index expressions (``nl.arange``, ``nl.mgrid``, masks) are
:mod:`.indexing`'s; the tensor class is :class:`.tile.Tile`.
"""

from __future__ import annotations

from . import compiler, isa, language, language_constants, nki, typing  # noqa: F401

language.constants = language_constants  # `import neuronxcc.nki.language.constants as c` binds this
