"""Compare a captured neuron-profile summary with the cost model's estimate, metric by metric.

    python -m nki_kernels.hw.compare k.summary.json k.estimate.json [--json out.json]

``k.summary.json`` is ``neuron-profile view --output-format summary-json`` output (a JSON
object, a list of per-NeuronCore objects, or ``{"summary": [...]}``; numbers may be
strings).  ``k.estimate.json`` is either the cost model's ``summary_dict()`` (neuron-profile
field names: ``total_time`` in seconds, ``dma_transfer_count``, ...) or the record
``job estimate`` writes, whose ``"summary"`` entry is that dict.

For every numeric metric present in both, the ratio is measured / estimated: 1.0 means the
model was right, 2.0 means hardware took (or counted) twice the estimate.  Ratios are
reported for calibration; nothing is asserted.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from typing import Any

# Identifiers and bookkeeping fields, not performance metrics.
_SKIP_SUFFIXES = ("_idx", "_id")
_SKIP_KEYS = {"kernel", "case", "name", "estimate", "note", "source"}


def _first_json_value(text: str) -> Any:
    """Parse the first JSON value in ``text`` (tools may print log lines before it)."""
    text = text.strip()
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        pass
    dec = json.JSONDecoder()
    for i, ch in enumerate(text):
        if ch in "{[":
            try:
                return dec.raw_decode(text[i:])[0]
            except json.JSONDecodeError:
                continue
    raise ValueError(f"no JSON object found; first bytes: {text[:80]!r}")


def _as_number(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value) if math.isfinite(value) else None
    if isinstance(value, str):
        try:
            f = float(value.strip().rstrip("%"))
        except ValueError:
            return None
        return f if math.isfinite(f) else None
    return None


def numeric_metrics(obj: dict) -> dict:
    """Top-level numeric (or numeric-string) fields of a summary, minus identifiers."""
    out = {}
    for key, value in obj.items():
        if key in _SKIP_KEYS or key.endswith(_SKIP_SUFFIXES):
            continue
        num = _as_number(value)
        if num is not None:
            out[key] = num
    return out


def load_profile_summary(data: Any) -> dict:
    """Normalise neuron-profile summary JSON to one flat dict of metrics.

    Accepts a dict, ``{"summary": [dict, ...]}``, a list of dicts (the first is used and
    ValueError is raised when they disagree on ``total_time``, i.e. several NeuronCores
    or executions), or a dict wrapping exactly one such dict.
    """
    if isinstance(data, dict) and "summary" in data:
        data = data["summary"]
    if isinstance(data, list):
        dicts = [d for d in data if isinstance(d, dict)]
        if not dicts:
            raise ValueError("summary JSON list holds no objects")
        times = {d.get("total_time") for d in dicts}
        if len(dicts) > 1 and len(times) > 1:
            raise ValueError(
                f"summary holds {len(dicts)} profiles with different total_time "
                f"{sorted(map(str, times))}; pass one NeuronCore's summary"
            )
        data = dicts[0]
    if not isinstance(data, dict):
        raise ValueError(f"summary JSON must be an object or a list of objects, got {type(data).__name__}")
    if not numeric_metrics(data):
        nested = [v for v in data.values() if isinstance(v, dict)]
        if len(nested) == 1:
            return nested[0]
    return data


def load_estimate(data: Any) -> dict:
    """The estimate's neuron-profile-named metrics from a record or a bare summary dict."""
    if not isinstance(data, dict):
        raise ValueError(f"estimate JSON must be an object, got {type(data).__name__}")
    if isinstance(data.get("summary"), dict):
        return data["summary"]
    return data


def compare(measured: dict, estimated: dict, metrics: list[str] | None = None) -> dict:
    """Per-metric ratios measured / estimated.

    Returns ``{"rows": [{metric, measured, estimated, ratio}], "only_measured": [...],
    "only_estimated": [...]}``; ``ratio`` is None when the estimate is 0.
    Raises ValueError when a requested metric is missing on either side, or when the two
    share no metric at all.
    """
    m, e = numeric_metrics(measured), numeric_metrics(estimated)
    if metrics:
        missing = [k for k in metrics if k not in m or k not in e]
        if missing:
            raise ValueError(f"metrics {missing} missing; measured has {sorted(m)}, estimate has {sorted(e)}")
        keys = list(metrics)
    else:
        keys = sorted(set(m) & set(e))
    if not keys:
        raise ValueError(f"no common metric; measured has {sorted(m)}, estimate has {sorted(e)}")
    rows = [
        {"metric": k, "measured": m[k], "estimated": e[k], "ratio": (m[k] / e[k]) if e[k] != 0 else None} for k in keys
    ]
    return {"rows": rows, "only_measured": sorted(set(m) - set(e)), "only_estimated": sorted(set(e) - set(m))}


def format_table(result: dict) -> str:
    lines = [f"{'metric':<32} {'measured':>14} {'estimated':>14} {'ratio':>8}"]
    for r in result["rows"]:
        ratio = "n/a" if r["ratio"] is None else f"{r['ratio']:.3f}"
        lines.append(f"{r['metric']:<32} {r['measured']:>14.6g} {r['estimated']:>14.6g} {ratio:>8}")
    lines.append("ratio = measured / estimated (the cost model is an estimate; not asserted)")
    return "\n".join(lines)


def compare_files(summary_path: str, estimate_path: str, metrics: list[str] | None = None) -> dict:
    with open(summary_path, encoding="utf-8") as f:
        measured = load_profile_summary(_first_json_value(f.read()))
    with open(estimate_path, encoding="utf-8") as f:
        estimated = load_estimate(_first_json_value(f.read()))
    result = compare(measured, estimated, metrics)
    result.update(summary=summary_path, estimate=estimate_path)
    return result


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m nki_kernels.hw.compare",
        description="Ratio per metric of a neuron-profile summary to the cost-model estimate.",
    )
    ap.add_argument("summary", help="neuron-profile view --output-format summary-json output")
    ap.add_argument("estimate", help="estimate JSON (summary_dict() or a job estimate record)")
    ap.add_argument("--metrics", help="comma-separated metrics (default: all shared numeric fields)")
    ap.add_argument("--json", dest="json_out", help="also write the comparison to this JSON file")
    a = ap.parse_args(argv)
    try:
        result = compare_files(a.summary, a.estimate, [s.strip() for s in a.metrics.split(",")] if a.metrics else None)
    except (OSError, ValueError) as e:
        print(f"compare: {e}", file=sys.stderr)
        return 1
    print(format_table(result))
    if a.json_out:
        with open(a.json_out, "w", encoding="utf-8") as f:
            json.dump(result, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
