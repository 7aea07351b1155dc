"""Cost model for NKI 0.1 kernels on Trainium2 (NeuronCore-v3).

    from nki_kernels.perf import estimate
    est = estimate(kernel, *args)            # runs the NumPy interpreter, schedules its trace
    print(est.summary())                     # every figure is an ESTIMATE of the cost model
    est.write_chrome_trace("out/k.trace.json")

No Trainium is involved: all numbers are estimates from trn2-hardware.md §4 constants
(hardware.py) and a list scheduler (schedule.py).  Every estimate carries the typical error
from the leave-one-out calibration on the public trn2 measurements (``est.band_text``;
``nki_kernels.perf.calibration``, ``nki_kernels.perf.accuracy``, docs/cost-model.md).
"""

from .hardware import TRN1, TRN2, Const, HardwareSpec, get_hardware, load_hardware
from .labels import ESTIMATE_LABEL
from .model import Estimate, estimate, estimate_trace, trace_of
from .schedule import ModelOptions, Scheduler, schedule

__all__ = [
    "estimate",
    "estimate_trace",
    "trace_of",
    "Estimate",
    "ModelOptions",
    "Scheduler",
    "schedule",
    "HardwareSpec",
    "Const",
    "TRN2",
    "TRN1",
    "get_hardware",
    "load_hardware",
    "ESTIMATE_LABEL",
]
