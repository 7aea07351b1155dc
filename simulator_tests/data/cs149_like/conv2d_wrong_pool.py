"""A wrong part2 solution for part2_harness.py: it ignores pool_size (right without maxpool, wrong
with it)."""
import neuronxcc.nki as nki

from nki_kernels.kernels.conv2d import fused_conv2d_maxpool as _project_kernel


@nki.jit
def fused_conv2d_maxpool(X, W, bias, pool_size=1):
    return _project_kernel(X, W, bias, pool_size=1)
