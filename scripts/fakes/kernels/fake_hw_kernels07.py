"""The NumPy stand-ins of fake_hw_kernels.py wrapped in the fake ``nki.jit`` (NKI 0.7 fakes).

Needs a fake SDK tree with ``nki`` on PYTHONPATH (``sdk_2_33``); selected with
``NKI_HW_KERNEL_<NAME>=fake_hw_kernels07:<name>``.  Where ``nki`` is the project's interpreter
alias (the cross-check's interpreter process), the plain NumPy functions are exported: the
interpreter's ``jit`` would hand them NKI tensors.  Not NKI code.
"""

import fake_hw_kernels
import nki

if getattr(nki, "__nki_kernels_sim__", False):
    matmul, conv2d = fake_hw_kernels.matmul, fake_hw_kernels.conv2d
else:
    matmul = nki.jit(fake_hw_kernels.matmul)
    conv2d = nki.jit(fake_hw_kernels.conv2d)
