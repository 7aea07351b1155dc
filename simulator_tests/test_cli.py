"""The main job (`nki-kernels verify`) and the interpreter benchmark run end to end."""

import concurrent.futures
import re

from nki_kernels import cli, commands


def test_verify_quick_passes_every_kernel_and_labels_estimates(capsys):
    assert cli.main(["verify", "--quick"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"^20 passed, 0 failed$", out, re.M), out[-2000:]
    for kernel in ("conv2d+bias+maxpool", "matmul", "flash_attention"):
        assert kernel in out
    assert "not a hardware measurement" in out and "est. latency us*" in out
    # every row carries a numeric estimate with its leave-one-out band ("221.7 ±6%")
    rows = [ln for ln in out.splitlines() if re.search(r" [0-9][0-9,]*\.[0-9] \u00b1[0-9]+%$", ln) and " PASS " in ln]
    assert len(rows) == 20, out[-3000:]
    # each case twice, side by side: the NKI 0.1 kernel, then its NKI 0.7 generation
    apis = [ln.split()[1] for ln in rows]
    assert apis == ["0.1", "0.7"] * 10, apis


def test_verify_worker_processes_give_the_rows_of_one_process(capsys, monkeypatch):
    # two small groups (4 rows); the pool must print the same table, in the same order, as one process
    small = commands._verify_groups(True)[:2]
    monkeypatch.setattr(commands, "_verify_groups", lambda quick: small)
    tables = {}
    for jobs in ("1", "2"):
        assert cli.main(["verify", "--quick", "--no-estimate", "--jobs", jobs]) == 0
        out = capsys.readouterr().out
        assert ("2 worker processes" in out) == (jobs == "2")
        rows = [ln.split() for ln in out.splitlines() if " PASS " in ln and not ln.lstrip().startswith("[")]
        assert len(rows) == 4, out
        tables[jobs] = [r[:-2] for r in rows]  # all but the wall time and the (absent) estimate
    assert tables["1"] == tables["2"]


def test_verify_starts_the_biggest_case_first():
    # the pool submits the trace jobs by case size, so the CS149 224x224 conv (the longest) never starts last
    from nki_kernels.kernels import registry

    groups = commands._verify_groups(False)
    heaviest = max(groups, key=lambda g: commands._verify_weight(*g, False))
    case = registry.SPECS[heaviest[0]].cases("verify")[heaviest[1]]
    assert case.kernel == "conv2d" and case.p["H"] == 224, case


def test_verify_pool_submits_traces_by_size_and_reads_their_saved_outputs(monkeypatch):
    # a stand-in pool that runs each job at submit: the order of submission, and the outputs go through
    # the .npy files a worker writes (the rows must be those of one process)
    from concurrent.futures import Future

    submitted = []

    class InlinePool:
        def __init__(self, max_workers, initializer=None, initargs=()):
            pass

        def shutdown(self, wait=True, *, cancel_futures=False):
            pass

        def submit(self, fn, job, spill):
            submitted.append(job[:3])
            f: Future = Future()
            f.set_result(fn(job, spill))
            assert isinstance(f.result()[2], str) and f.result()[2].endswith(".npy")
            return f

    groups = commands._verify_groups(True)[:3]
    inline = list(commands._verify_results(groups, True, False, 1))
    monkeypatch.setattr(concurrent.futures, "ProcessPoolExecutor", InlinePool)
    pooled = list(commands._verify_results(groups, True, False, 2))
    weights = [commands._verify_weight(i, j, True) for i, j, _ in submitted]
    assert weights == sorted(weights, reverse=True) and len(set(weights)) > 1
    assert [api for *_, api in submitted[:2]] == ["0.1", "0.7"]
    assert len(submitted) == 2 * len(groups)
    assert [[r[:7] for r in g] for g in pooled] == [[r[:7] for r in g] for g in inline]
    assert all(r[6] == "PASS" for g in pooled for r in g)


def test_verify_error_drops_the_oracles_not_yet_started(monkeypatch):
    # the first oracle fails; the second may be running when the error reaches the main thread; the third,
    # still queued, must be dropped rather than computed after the error
    import threading

    import pytest

    groups = commands._verify_groups(True)[:3]
    release = threading.Event()
    called = []

    def oracle(spec_i, case_i, quick):
        called.append((spec_i, case_i))
        if len(called) == 1:
            raise RuntimeError("oracle failed")
        release.wait(timeout=60)

    monkeypatch.setattr(commands, "_verify_oracle", oracle)
    threads = []
    real = commands._OracleThread

    class Recorded(real):  # type: ignore[misc,valid-type]
        def __init__(self, quick):
            super().__init__(quick)
            threads.append(self.thread)

    monkeypatch.setattr(commands, "_OracleThread", Recorded)
    with pytest.raises(RuntimeError, match="oracle failed"):
        for _ in commands._verify_results(groups, True, False, 1):
            pass
    release.set()
    (thread,) = threads
    thread.join(timeout=60)
    assert thread.daemon and not thread.is_alive()
    assert called in (groups[:1], groups[:2]) and groups[2] not in called


def test_sim_bench_reports_both_measurements(capsys):
    assert cli.main(["sim-bench", "--iters", "20"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"small-tile instruction .*: [0-9.]+ us per instruction", out)
    assert re.search(r"20 x nc_matmul 128x128x512 fp32 into PSUM, every iteration run: [0-9.]+ s vs bare NumPy", out)
    assert re.search(r"as a loop program [0-9.]+ s", out)
    assert "not a Trainium figure" in out
