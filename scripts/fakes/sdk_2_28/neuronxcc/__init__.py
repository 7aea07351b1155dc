"""Fake neuronx-cc 2.23 without ``neuronxcc.nki``: a venv whose SDK lacks the NKI 0.1 namespace.
(The real SDK 2.28 still ships it, deprecated: 2.28 release notes; see sdk_2_29 for that case.)"""

__version__ = "2.23.6484.0+fake"
