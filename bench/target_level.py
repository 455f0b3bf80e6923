"""The certification rule's error rate at the sizes `ghostsearch target` runs at, on committed real
populations: which small-sample correction holds the level, the least first look, and the reruns a
person makes (issue 47).

  python bench/target_level.py                      # every scenario, 20,000 replications each
  python bench/target_level.py --reps 4000 --only ppl
  python bench/target_level.py --build              # (re)write the populations file from its sources

The populations (docs/results/target-level/populations.json, written by --build from committed run
data, each with its source: ghostsearch/study/target_level.py says which) and the report's designs
live in the package. Each rate is over ``--reps`` replications (MC SE sqrt(r (1 - r) / reps), printed
beside it), with futility stops as the rule has them. The simulation is the rule's arithmetic
vectorised (per look: each stratum's count and sums of d, d^2, d^3 -> ``certify.cumulants``,
``certify.skewness``, ``certify.null_se``, ``certify.corrected``, the spending bounds of
``certify.one_sided``: ghostsearch/stats/certify_level.py), checked against ``certify.certify_matrix``
draw by draw in tests/target/test_level.py.
"""

from __future__ import annotations

import argparse

import benchenv  # noqa: F401  (repository on sys.path)

from ghostsearch.stats import certify as cert
from ghostsearch.stats.certify_level import load
from ghostsearch.study import target_level

POPULATIONS = benchenv.ROOT / "docs" / "results" / "target-level" / "populations.json"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=20_000)
    ap.add_argument("--only", default="ppl,acc,reruns", help="comma list of: ppl, acc, reruns")
    ap.add_argument("--corrections", default=",".join(cert.CORRECTIONS))
    ap.add_argument("--build", action="store_true", help="write the populations file from its sources and exit")
    args = ap.parse_args()
    if args.build:
        target_level.write(benchenv.ROOT, POPULATIONS)
        print(f"wrote {POPULATIONS}")
        return
    for line in target_level.report(load(POPULATIONS), args.reps, args.corrections.split(","), args.only.split(",")):
        print(line, flush=True)


if __name__ == "__main__":
    main()
