#!/usr/bin/env python3
"""Helpers of bench/accuracy.sh.

  accuracy.py truth WORKLOAD_OUTPUT                   the groundtruth workload's own shares, as json
  accuracy.py tvd PROFILE_QUERY_JSON WORKLOAD_OUTPUT  one table cell set for a profile, as json

The groundtruth workload measures, around every call of its five kernel methods, the CPU time the
call took, and prints each method's share of the five's summed time ("truth: groundtruth.FFT.
transform_internal 23.45% (...)"). Those are inclusive times of the leaf calls, so a profile's share
of a kernel is its *total* (samples with the method anywhere on the stack, each sample once, from
`stackfrag query --json`) over the five methods' summed totals. For kernels that call nothing this
equals the self share; it differs where a kernel calls a helper (MonteCarlo.nextDouble when it is
not inlined) or where samples land in a stub or VM function the kernel called. The self-share
distance is reported next to it.

Total-variation distance: TVD(p, q) = 1/2 * sum_k |p_k - q_k|, in percentage points.
"""
import json
import re
import sys

TRUTH_LINE = re.compile(r"^truth: (\S+) ([0-9.]+)% ")


def truth(output_path):
    shares = {}
    with open(output_path, encoding="utf-8", errors="replace") as f:
        for line in f:
            m = TRUTH_LINE.match(line)
            if m:
                # "groundtruth.FFT.transform_internal" -> the profile's "groundtruth/FFT.transform_internal"
                package_and_class, method = m.group(1).rsplit(".", 1)
                shares[package_and_class.replace(".", "/") + "." + method] = float(m.group(2)) / 100.0
    if len(shares) != 5:
        raise SystemExit(f"{output_path}: expected 5 'truth:' lines, found {len(shares)}")
    return shares


def normalised(values):
    s = sum(values.values())
    return {k: (v / s if s else 0.0) for k, v in values.items()}


def tvd(p, q):
    return 0.5 * sum(abs(p[k] - q.get(k, 0.0)) for k in p)


def profile_cells(query_path, output_path):
    true_shares = truth(output_path)
    with open(query_path, encoding="utf-8") as f:
        query = json.load(f)
    by_name = {m["name"]: m for m in query["methods"]}
    totals = {k: float(by_name.get(k, {}).get("total", 0)) for k in true_shares}
    selfs = {k: float(by_name.get(k, {}).get("self", 0)) for k in true_shares}
    samples = query.get("samples", 0)
    total_shares = normalised(totals)
    return {
        "samples": samples,
        "kernel_samples": sum(totals.values()),
        "tvd_total_pp": 100.0 * tvd(true_shares, total_shares),
        "tvd_self_pp": 100.0 * tvd(true_shares, normalised(selfs)),
        "largest_error": max(
            ((k, 100.0 * (total_shares[k] - true_shares[k])) for k in true_shares), key=lambda kv: abs(kv[1])
        ),
        "truth": true_shares,
        "profile": total_shares,
    }


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "truth":
        print(json.dumps(truth(sys.argv[2]), indent=2))
    elif len(sys.argv) == 4 and sys.argv[1] == "tvd":
        print(json.dumps(profile_cells(sys.argv[2], sys.argv[3]), indent=2))
    else:
        raise SystemExit(__doc__)


if __name__ == "__main__":
    main()
