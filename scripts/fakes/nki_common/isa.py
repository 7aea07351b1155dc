"""Fake ``nki.isa``: no instructions (the fake kernels are NumPy stand-ins)."""
