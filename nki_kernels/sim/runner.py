"""Compatibility path: NKI 0.1 kernels live in ``nki_kernels.sim.nki01.kernel`` (the run machinery in
``nki_kernels.sim.core.runner``)."""

from .nki01.kernel import (  # noqa: F401
    DeviceKernel,
    Kernel,
    baremetal,
    benchmark,
    device_handlers,
    jit,
    profile,
    simulate_kernel,
    skip_middle_end_transformations,
    trace,
    trace_kernel,
)
