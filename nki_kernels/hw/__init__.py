"""Helpers for real Trainium2 hardware: the NKI 0.1 path (Neuron SDK 2.26/2.27,
``neuronxcc.nki``) and the NKI 0.7 path (SDK >= 2.33, ``import nki``).

Importing this package, or any module in it, needs neither the Neuron SDK nor torch:
each function imports ``neuronxcc`` / ``torch`` / ``torch_xla`` when called.

- ``sdk``: which SDK release is installed and which path it takes (or why it is refused).
- ``nki07_path``: the NKI 0.7 steps (smoke test, correctness, NEFF + latency, estimate).
- ``env``: instance type, ``neuron-ls --json-output``, free NeuronCores, SDK versions,
  and why hardware tests would skip here.
- ``shapes``: the CS149 conv2d matrix and extended shapes, in ``quick|cs149|full`` sets.
- ``device``: ``nki.baremetal`` / ``nki.benchmark`` runs, seeded inputs, oracles, tolerances.
- ``torch_path``: ``torch.nn.Module`` wrappers calling the kernels on XLA tensors.
- ``profile``: ``neuron-profile capture`` / ``view`` (summary-json, summary-text, perfetto).
- ``compare``: profile summary vs cost-model estimate, ratio per metric.
- ``job``: the per-case bench / estimate / simulate steps ``scripts/run_hw.sh`` runs.
"""
