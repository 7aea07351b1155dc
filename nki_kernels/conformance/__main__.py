"""Internal worker of the ``sdk-tests`` suite: ``python -m nki_kernels.conformance FILE TEST RESULT_JSON``
runs one test method of an SDK test file under the interpreter's ``neuronxcc`` alias."""

from __future__ import annotations

import sys

from nki_kernels.conformance.sdk_tests import worker

if len(sys.argv) != 4:
    sys.exit(
        "internal worker of `nki-kernels conformance`: python -m nki_kernels.conformance FILE TEST RESULT_JSON "
        "(run `nki-kernels conformance PATH` instead)"
    )
sys.exit(worker(*sys.argv[1:]))
