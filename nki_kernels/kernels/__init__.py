"""The project's NKI kernels.  Each imports ``nki, nl, nisa`` from ``nki_kernels.backend`` only."""
