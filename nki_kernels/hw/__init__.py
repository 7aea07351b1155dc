"""Helpers for real Trainium2 hardware: the NKI 0.1 path (Neuron SDK 2.26/2.27,
``neuronxcc.nki``) and the NKI 0.7 path (SDK >= 2.33, ``import nki``).

Importing this package, or any module in it, needs neither the Neuron SDK nor torch:
each function imports ``neuronxcc`` / ``torch`` / ``torch_xla`` when called.

- ``run``: the hardware job (``scripts/run_hw.sh`` starts it): preflight, plan, install, smoke
  test, one worker per NeuronCore, the manifest, Ctrl-C / SIGTERM / disk-full handling.
- ``protocol``: what the job asks of an SDK path (its step commands and bodies), implemented by
  ``job`` (NKI 0.1) and ``nki07_path`` (NKI 0.7).
- ``manifest``: ``manifest.json`` and ``SUMMARY.md`` of a results folder.
- ``sdk``: which SDK release is installed and which path it takes (or why it is refused).
- ``nki07_path``: the NKI 0.7 steps (smoke test, correctness, NEFF + latency, estimate).
- ``env``: instance type, ``neuron-ls --json-output``, free NeuronCores, SDK versions,
  and why hardware tests would skip here.
- ``device``: ``nki.baremetal`` / ``nki.benchmark`` runs, seeded inputs, oracles, tolerances.
- ``torch_path``: ``torch.nn.Module`` wrappers calling the kernels on XLA tensors.
- ``profile``: ``neuron-profile capture`` / ``view`` (summary-json, summary-text, perfetto).
- ``compare``: profile summary vs cost-model estimate, ratio per metric.
- ``job``: the NKI 0.1 steps (bench with ``nki.benchmark``, estimate, simulate; hw_tests via pytest).
"""
