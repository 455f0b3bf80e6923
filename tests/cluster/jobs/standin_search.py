"""STAND-IN for `ghostsearch search`, submitted by tests/cluster/test_multinode.py.

It honours the same observable contract the multi-node test checks, so the
test can later submit the real CLI unchanged (see ``search_command`` in
tests/cluster/multinode.py):

* two named scorer actors ``ghostsearch-scorer-<i>`` in Ray namespace
  ``ghostsearch``, placed with SPREAD, restartable (``max_restarts``), whose
  calls are retried (``max_task_retries``) when their node dies;
* the ``ray.util.metrics`` of the pool: Counter ``ghostsearch_evaluations``
  (tags searcher, objective, cached), Histogram ``ghostsearch_scoring_seconds``
  (actors), Gauges ``ghostsearch_queue_depth`` and ``ghostsearch_best_value``
  (tag searcher; driver) -- exported by Ray as ``ray_<name>[_total|_bucket...]``;
* ``RUN_DIR/ledger/part-*.parquet`` written as evaluations finish (columns
  searcher, objective, removed, value, cached, actor, node), ``result.json``.

Usage: python standin_search.py out=RUN_DIR [n=40] [seconds=0.25]
"""

import itertools
import json
import os
import sys
import time

import pyarrow as pa
import pyarrow.parquet as pq
import ray
from ray.util.metrics import Counter, Gauge, Histogram

NAMESPACE = "ghostsearch"
L, K = 12, 2  # "remove 2 of 12 blocks"


def value_of(removed):  # deterministic stand-in for a model score
    return round(sum((i + 1) ** 1.5 for i in removed) / 10.0, 6)


@ray.remote(num_cpus=1, max_restarts=-1, max_task_retries=-1)
class Scorer:
    def __init__(self, name):
        self.name = name
        self.node = ray.get_runtime_context().get_node_id()
        self.evals = Counter(
            "ghostsearch_evaluations",
            description="evaluations (stand-in)",
            tag_keys=("searcher", "objective", "cached"),
        )
        self.seconds = Histogram(
            "ghostsearch_scoring_seconds", description="scoring seconds (stand-in)",
            boundaries=[0.01, 0.1, 0.5, 1, 5, 30, 120], tag_keys=("objective",),
        )

    def where(self):
        return self.node

    def score(self, removed, seconds):
        t = time.perf_counter()
        time.sleep(seconds)
        self.seconds.observe(time.perf_counter() - t, tags={"objective": "toy"})
        self.evals.inc(1, tags={"searcher": "standin", "objective": "toy", "cached": "false"})
        return {"removed": list(removed), "value": value_of(removed), "actor": self.name,
                "node": self.node}


def main(argv):
    args = dict(a.split("=", 1) for a in argv)
    run_dir = args["out"]
    n = int(args.get("n", 40))
    seconds = float(args.get("seconds", 0.25))
    os.makedirs(os.path.join(run_dir, "ledger"), exist_ok=True)
    ray.init(namespace=NAMESPACE)  # joins the job's cluster (RAY_ADDRESS is set by the job)

    t0 = time.time()
    actors = [Scorer.options(name=f"ghostsearch-scorer-{i}", scheduling_strategy="SPREAD")
              .remote(f"ghostsearch-scorer-{i}") for i in range(2)]
    nodes = ray.get([a.where.remote() for a in actors])
    print("scorer nodes:", nodes, flush=True)

    queue = Gauge("ghostsearch_queue_depth", description="pending requests (stand-in)")
    best_g = Gauge("ghostsearch_best_value", description="best value (stand-in)",
                   tag_keys=("searcher",))
    best = float("inf")

    candidates = list(itertools.islice(itertools.combinations(range(L), K), n))
    rows, part = [], 0
    pending = {}
    it = iter(enumerate(candidates))
    for a in actors:  # two in flight per actor
        for _ in range(2):
            i, c = next(it)
            pending[a.score.remote(c, seconds)] = a
    while pending:
        done, _ = ray.wait(list(pending), num_returns=1)
        a = pending.pop(done[0])
        r = ray.get(done[0])
        rows.append(dict(r, searcher="standin", objective="toy", cached=False))
        best = min(best, r["value"])
        best_g.set(best, tags={"searcher": "standin"})
        queue.set(len(pending))
        nxt = next(it, None)
        if nxt is not None:
            pending[a.score.remote(nxt[1], seconds)] = a
        if len(rows) % 4 == 0 or not pending:  # durable as we go
            pq.write_table(pa.Table.from_pylist(rows), os.path.join(run_dir, "ledger",
                                                                   f"part-{part:05d}.parquet"))
            part += 1
            rows = []

    table = pq.read_table(os.path.join(run_dir, "ledger")).to_pylist()
    best = min(table, key=lambda r: (r["value"], r["removed"]))
    result = {"standin": {"best_removed": best["removed"], "best_value": best["value"],
                          "evaluations": len(table), "wall_seconds": time.time() - t0}}
    with open(os.path.join(run_dir, "result.json"), "w") as f:
        json.dump(result, f, indent=1)
    print("result:", json.dumps(result), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
