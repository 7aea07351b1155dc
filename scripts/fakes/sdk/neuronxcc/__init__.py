"""Fake neuronx-cc 2.21 (Neuron SDK 2.26) for tests; see scripts/fakes/README.md."""

__version__ = "2.21.18209.0+fake"
