"""The words every output of the cost model shares: the estimate label and the engines' names."""

from __future__ import annotations

# Printed beside every figure of the model (it is an estimate, never a measurement).
ESTIMATE_LABEL = "estimate (cost model)"

ENGINE_NAMES = {"PE": "TensorE", "ACT": "ScalarE", "DVE": "VectorE", "POOL": "GpSimdE", "DMA": "DMA"}
