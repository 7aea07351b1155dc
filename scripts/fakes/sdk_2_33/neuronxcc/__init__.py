"""Fake neuronx-cc for Neuron SDK 2.33 (version line extrapolated: 2.N is SDK 2.(N+5));
no ``neuronxcc.nki``.  The kernels use the ``nki`` package beside it."""

__version__ = "2.28.1024.0+fake"
