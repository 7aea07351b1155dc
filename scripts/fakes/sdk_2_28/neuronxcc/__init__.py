"""Fake neuronx-cc 2.23 (Neuron SDK 2.28): no neuronxcc.nki, as in the real release."""
__version__ = "2.23.6484.0+fake"
