"""Fake ``nki.language``: buffer names only, no operations (the fake kernels are NumPy stand-ins)."""

sbuf, psum, hbm, shared_hbm, private_hbm = "sbuf", "psum", "hbm", "shared_hbm", "private_hbm"
