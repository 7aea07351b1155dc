"""A correct part2 solution for part2_harness.py: the project's fused kernel (also the user kernel of
the hardware job's NKI_HW_KERNEL_CONV2D tests)."""
import neuronxcc.nki as nki

from nki_kernels.kernels.conv2d import fused_conv2d_maxpool as _project_kernel


@nki.jit
def fused_conv2d_maxpool(X, W, bias, pool_size=1):
    return _project_kernel(X, W, bias, pool_size=pool_size)
