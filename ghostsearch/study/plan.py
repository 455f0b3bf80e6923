"""`ghostsearch plan`: what a run will cost, from the configs alone (no weights loaded).

Per cell (searcher x objective x k x seed) and in total: evaluations, as each searcher's class states
them (``Searcher.expected_evaluations``: exact for greedy and the one-shot searchers; the budget for a
budget-driven one such as ga, bo, cbo: greedy's cost under ``compare.budget: matched``, else
``search.budget`` or twice greedy's; an estimate for the others, whose cost depends on their answers),
calibration tokens and
FLOPs per evaluation with prefix caching's expected saving, memory per actor against the device
(ghostsearch/model/memplan.py), wall time and device-hours on the cluster the config names.

FLOPs: 2 x parameters x tokens per block run and for the LM head (attention's T^2 term added).
Blocks run per evaluation, with prefix caching (every candidate starts from the deepest cached
state it shares; ``Searcher.blocks_run``): a searcher with a prefix (greedy, beam: ``uses_prefix``)
starts R + {j} at j, on average half the free depth; a random k-subset starts at its first removed
block, on average L/(k+1). Rate: ``plan --measure``
(a few block and head forwards at the run's dtype on this device), else ``pool.device_tflops``,
else a stated default (CPU 0.05, CUDA 200 TFLOP/s: a planning guess, not a measurement).
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass
from typing import Any

from ghostsearch.core.errors import GhostsearchError
from ghostsearch.model.memplan import GiB, Shape, plan_memory, read_config, resolve_every, shape_of, shipped_config
from ghostsearch.model.memplan import Plan as MemoryPlan
from ghostsearch.rundir.cell import CellSpec, grid_cells

DEFAULT_TFLOPS = {"cpu": 0.05, "cuda": 200.0}
# fixed costs of a run, stated, when plan --measure does not time them (a cluster, or no --measure): a
# local Ray cluster's start with its actors, and reading weights (bytes per second)
RAY_START_S = {"cpu": 12.0, "cuda": 20.0}
LOAD_BYTES_PER_S = 0.5e9


@dataclass(frozen=True)
class Cell:
    """One planned cell: its evaluations (``kind``: exact, budget or estimate), calibration tokens,
    blocks run and FLOPs per evaluation."""

    searcher: str
    objective: str
    k: int
    seed: int
    evaluations: float
    kind: str
    tokens: int
    blocks_run: float
    flops: float


@dataclass(frozen=True)
class Part:
    """A fixed cost of a run (start-up, the cells' own cost, ...): seconds, and where the number
    comes from (measured, stated)."""

    seconds: float
    note: str


@dataclass(frozen=True)
class TaskItems:
    """One task's evaluation per model: items, requests, tokens (characters / 4)."""

    items: int
    requests: int
    tokens: float


@dataclass(frozen=True)
class EvalProbe:
    """What probe_evaluation timed: ``items`` of ``of_items`` items and ``windows`` perplexity windows
    per set; ``dense_s`` a share's dense pass, ``share_s`` the share with ``models`` finalists added."""

    items: int
    of_items: int
    windows: int
    models: int
    dense_s: float
    share_s: float


@dataclass(frozen=True)
class RunMeasured:
    """measure_run's timings of a local run around its scoring: start (Ray, the pool, the identity
    check), ``probes`` probe cells, compare's evaluation probe, stop (the pool released, Ray down)."""

    start_s: float
    cells_s: float
    probes: int
    stop_s: float
    evaluation: EvalProbe | None = None


@dataclass(frozen=True)
class EvaluationPlan:
    """The downstream evaluation one model gets (``tasks``: None for a task whose data is not here;
    ``perplexity``: per corpus, what is evaluated), how many models (``repaired`` of them repaired),
    the quick protocol's perplexity tokens, and the seconds at the FLOP rate: task items,
    perplexity windows, repair fits; ``measured``: the evaluation probe, when --measure ran one."""

    tasks: dict[str, TaskItems | None]
    perplexity: dict[str, str]
    models: int
    repaired: int
    ppl_tokens: int
    seconds: float = 0.0
    ppl_seconds: float = 0.0
    repair_seconds: float = 0.0
    measured: EvalProbe | None = None

    @property
    def item_tokens(self) -> float:
        """Tokens of one model's task items (tasks with data here)."""
        return sum(t.tokens for t in self.tasks.values() if t)


@dataclass(frozen=True)
class RunPlan:
    """Everything ``plan`` prints (``format_plan``): the model (``model``: as shown, ``shape``), the
    cells, memory per actor, the evaluation, the FLOP rate and where it comes from, the fixed costs
    by part (``fixed``: process, checks, start, cells, stop, report; those not timed in
    ``not_counted``), and the wall times: scoring (``prepare_s`` + ``scoring_s`` = ``wall_s``), the
    whole search and the whole compare."""

    model: str
    shape: Shape
    cells: list[Cell]
    memory: MemoryPlan
    evaluation: EvaluationPlan
    rate: float
    rate_note: str
    total_flops: float
    command: str
    fixed: dict[str, Part]
    not_counted: list[str]
    startup_measured: bool
    search_wall_s: float
    compare_wall_s: float
    evaluation_s: float
    evaluation_note: str
    prepare_s: float
    scoring_s: float
    device_hours: float
    actors: int
    devices_per_actor: int
    on_gpu: bool

    @property
    def fits(self) -> bool:
        return bool(self.memory.fits)

    @property
    def evaluations(self) -> float:
        return sum(c.evaluations for c in self.cells)

    @property
    def wall_s(self) -> float:
        """Scoring's wall time: every actor preparing each objective, then the cells' evaluations."""
        return self.prepare_s + self.scoring_s

    @property
    def startup_s(self) -> float:
        return self.fixed["start"].seconds

    @property
    def load_note(self) -> str:
        return self.fixed["start"].note


def searcher_params(cfg, searcher: str) -> tuple[Any, float | None]:
    """(the searcher's parsed Params, its budget: its own or ``search.budget``) from the config
    (``Search.searcher_settings``, as ``config.build_searcher`` reads it), before a run directory exists."""
    from ghostsearch.search.base import get_searcher

    params, budget = cfg.search.searcher_settings(searcher)
    return get_searcher(searcher).parse_params(params), budget


def evaluations(cfg, searcher: str, k: int, n_blocks: int, rows: int | None = None) -> tuple[float, str]:
    """(evaluations, exact | budget | estimate) of one cell, as the searcher's class states it
    (``Searcher.expected_evaluations``); ``rows``: the calibration rows, which decide whether
    ``race: auto`` (the default) races greedy (then its exact cost is an upper bound). A budget-driven
    searcher gets greedy's cost under ``compare.budget: matched``, else its own budget or
    ``search.budget``."""
    from ghostsearch.config import protected_blocks
    from ghostsearch.search.base import Space, get_searcher, greedy_cost

    space = Space(n_blocks, k, protected_blocks(cfg, n_blocks))
    cls = get_searcher(searcher)
    params, budget = searcher_params(cfg, searcher)
    if cls.default_budget(space, params) is not None and cfg.compare.searchers and cfg.compare.budget == "matched":
        budget = float(greedy_cost(space))
    return cls.expected_evaluations(space, params, budget, rows)


def blocks_run(searcher: str, k: int, n_blocks: int) -> float:
    """Expected blocks one evaluation runs, prefix caching included (``Searcher.blocks_run``)."""
    from ghostsearch.search.base import get_searcher

    return get_searcher(searcher).blocks_run(n_blocks, k)


def flops_per_token_block(shape: Shape, T: int) -> float:
    return 2.0 * shape.block_params[0] + 4.0 * T * shape.heads * shape.head_dim  # weights + QK^T and AV


def rate(cfg, shape: Shape, measure: bool) -> tuple[float, str]:
    """FLOP/s of one device and where the number comes from."""
    dev = cfg.resolved_device().split(":")[0]
    if measure:
        return measure_rate(cfg, shape), f"measured on this {dev} (plan --measure)"
    if cfg.pool.device_tflops:
        return cfg.pool.device_tflops * 1e12, f"stated: pool.device_tflops={cfg.pool.device_tflops:g}"
    return (
        DEFAULT_TFLOPS[dev] * 1e12,
        f"default {DEFAULT_TFLOPS[dev]:g} TFLOP/s for {dev} (a guess: measure or state it)",
    )


def measure_rate(cfg, shape_: Shape, repeats: int = 3, rows: tuple[int, int] | None = None) -> float:
    """Time two real blocks and the head of the model's architecture (random weights, the run's
    dtype, one micro-batch) on this device: effective FLOP/s. ``rows``: (sequences, tokens) of a
    driver's batch (target's looks and fits), timed with this process's threads; else a scorer's
    calibration micro-batch with an actor's threads."""
    import torch

    from ghostsearch.model.models import resolve_dtype

    config = read_config(cfg.model, cfg.trust_remote_code)
    c = getattr(config, "text_config", None) or config
    c.num_hidden_layers = 2
    for key in [k for k, v in vars(c).items() if isinstance(v, list) and "layer" in k]:
        setattr(c, key, getattr(c, key)[:2])
    dev = cfg.resolved_device()
    dtype = resolve_dtype(cfg.dtype, dev)
    threads = torch.get_num_threads()
    if dev == "cpu" and rows is None:
        torch.set_num_threads(max(1, cfg.pool.threads))  # an actor's threads, not this process's
    try:
        return _time_forwards(cfg, config, shape_, dev, dtype, repeats, rows)
    finally:
        torch.set_num_threads(threads)


def _time_forwards(cfg, config, shape_: Shape, dev: str, dtype, repeats: int, rows=None) -> float:
    import torch
    from transformers import AutoModelForCausalLM

    from ghostsearch.model.stack import Batch, Stack

    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(config, dtype=dtype).to(dev).eval()
    stack = Stack(model)
    cal = cfg.calibration.for_objective(cfg.objective)
    m, T = rows or (min(cal.micro_batch, cal.n_seq), cal.seq_len)
    ids = torch.randint(0, shape_.vocab, (m, T))
    cap = stack.capture(Batch(input_ids=ids))
    h = cap.states[0]
    with torch.no_grad():
        stack.run(h, cap, 0, ())  # warm-up
        if dev.startswith("cuda"):
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(repeats):
            out = stack.run(h, cap, 0, ())
            stack.token_logprobs(out.reshape(-1, out.shape[-1]), ids.reshape(-1).to(out.device))
        if dev.startswith("cuda"):
            torch.cuda.synchronize()
        dt = (time.perf_counter() - t0) / repeats
    flops = m * T * (2 * flops_per_token_block(shape_, T) + 2.0 * shape_.head_weight)
    return flops / dt


def evaluation_items(cfg) -> EvaluationPlan:
    """The downstream evaluation one model gets: items and requests per task (from the data, no
    tokenizer: tokens estimated as characters / 4, the context once per item as the native engine
    packs it) and the perplexity windows. ``None`` for a task whose data is not here. No seconds
    yet (``evaluation_seconds`` adds them)."""
    from ghostsearch.evaluation.native import task_docs

    tasks: dict[str, TaskItems | None] = {}
    for t in cfg.eval.tasks:
        try:
            docs = task_docs(t, cfg.data_dir, cfg.eval.limit)
        except Exception:  # noqa: BLE001  (a task without data here: not counted, said so)
            tasks[t] = None
            continue
        if cfg.eval.max_items is not None:
            docs = docs[: max(1, cfg.eval.max_items // max(1, len(cfg.eval.tasks)))]
        chars = sum(len(d.requests[0][0]) + sum(len(c) for _, c in d.requests) for d in docs)
        tasks[t] = TaskItems(items=len(docs), requests=sum(len(d.requests) for d in docs), tokens=chars / 4)
    ppl = {
        c: (
            "the whole test set in 2048-token windows"
            if cfg.eval.protocol == "paper"
            else f"{cfg.eval.ppl_max_seq} x {cfg.eval.ppl_seq_len} tokens"
        )
        for c in cfg.eval.perplexity
    }
    ppl_tokens = (
        0
        if cfg.eval.protocol == "paper" or cfg.eval.ppl_max_seq is None
        else len(cfg.eval.perplexity) * cfg.eval.ppl_max_seq * cfg.eval.ppl_seq_len
    )
    cells = len(
        {
            (s, o, k, sd)
            for s in (cfg.compare.searchers or [cfg.searcher])
            for o in (cfg.compare.objectives or [cfg.objective])
            for k in (cfg.compare.ks or [cfg.k])
            for sd in (cfg.compare.seeds or [cfg.seed])
        }
    )
    models = 1 + cells * len(cfg.compare.recovery)
    repaired = cells * len([m for m in cfg.compare.recovery if m != "none"])
    return EvaluationPlan(tasks=tasks, perplexity=ppl, models=models, repaired=repaired, ppl_tokens=ppl_tokens)


def measure_load_rate(cfg, limit: int = 1 << 30) -> float | None:
    """Bytes per second reading the model's local weight files (at most ``limit`` bytes), or None
    when the weights are not on this machine (then LOAD_BYTES_PER_S, stated)."""
    from pathlib import Path

    from ghostsearch.model.models import model_path

    try:
        path = Path(model_path(cfg.model)[0])
    except Exception:  # noqa: BLE001  (a hub id: nothing local to time)
        return None
    files = sorted(path.glob("*.safetensors")) if path.is_dir() else []
    if not files:
        return None
    done, t0 = 0, time.perf_counter()
    for f in files:
        with open(f, "rb") as fh:
            while done < limit and (chunk := fh.read(64 << 20)):
                done += len(chunk)
        if done >= limit:
            break
    return done / max(time.perf_counter() - t0, 1e-6)


def command_of(cfg) -> str:
    """The command a config is for: ``compare`` when it names a grid (compare.searchers, objectives,
    ks or seeds), else ``search``."""
    c = cfg.compare
    return "compare" if (c.searchers or c.objectives or c.ks or c.seeds) else "search"


def target_stated(cfg) -> bool:
    """The config is a ``ghostsearch target``'s: it states target.quality's bound, target.params or
    target.speedup (``plan`` then plans the target run, not a search)."""
    t = cfg.target
    return any(v is not None for v in (t.quality.max_ratio, t.quality.max_drop, t.params, t.speedup))


def distinct_sets(cfg, cells: list[CellSpec]) -> int:
    """Finalist sets a grid can give at most: one per cell, less LoRP's repeats (its set follows
    from the similarity of ``similarity_source``'s text, perplexity by default, not from the
    cell's objective: its cells that differ only in objective give one set, evaluated once)."""
    from ghostsearch.search.base import get_searcher

    keys = set()
    same = {
        s: get_searcher(s).same_set_for_every_objective(searcher_params(cfg, s)[0]) for s in {c.searcher for c in cells}
    }
    for c in cells:
        keys.add((c.searcher, "*" if same[c.searcher] else c.objective, c.k, c.seed))
    return len(keys)


def measure_process(cfg, command: str) -> tuple[float, float, Any]:
    """(seconds, checks' seconds, the data plan) of a fresh Python doing what ``ghostsearch <command>``
    does before Ray: start, import the CLI, the recipe, Ray, torch and transformers, run the checks
    (measure_checks: a cold process's data plan, no cache of this one) and exit; timed here. The data
    plan comes back pickled, so this process need not read every data set again."""
    import os
    import pickle
    import subprocess
    import sys
    import tempfile

    mods = [
        "ghostsearch.cli.main",
        "ghostsearch.run.runner",
        "ghostsearch.data.dataplan",
        "ghostsearch.pool.session",
        "ghostsearch.pool.client",
        "ghostsearch.model.models",
        "torch",
        "transformers",
    ] + (["ghostsearch.study.compare"] if command == "compare" else [])
    code = (
        "import pickle, sys\nimport " + ", ".join(mods) + "\nfrom ghostsearch.study.plan import measure_checks\n"
        "s, dp = measure_checks(pickle.load(open(sys.argv[1], 'rb')), sys.argv[2])\n"
        "pickle.dump(dp, open(sys.argv[3], 'wb'))\nprint(s)"
    )
    with tempfile.TemporaryDirectory() as d:
        cfg_file, plan_file = f"{d}/cfg.pkl", f"{d}/plan.pkl"
        with open(cfg_file, "wb") as f:
            pickle.dump(cfg, f)
        t0 = time.perf_counter()
        r = subprocess.run(
            [sys.executable, "-c", code, cfg_file, command, plan_file],
            check=True,
            capture_output=True,
            text=True,
            env=os.environ.copy(),
        )
        seconds = time.perf_counter() - t0
        with open(plan_file, "rb") as f:
            data_plan = pickle.load(f)
    return seconds, float(r.stdout.strip().splitlines()[-1]), data_plan


def measure_checks(cfg, command: str) -> tuple[float, Any]:
    """Seconds of a run's checks before Ray (``runner.Run``'s: the model's config, compare's tasks,
    the data plan, which reads every calibration and evaluation set), done here for real; and the
    data plan."""
    from ghostsearch.config import check_model_fit
    from ghostsearch.data.dataplan import plan as data_plan

    t0 = time.perf_counter()
    check_model_fit(cfg)
    compare = command == "compare"
    if compare:
        from ghostsearch.evaluation.evaluate import check_tasks

        check_tasks(cfg.eval.tasks, cfg.data_dir)
    dp = data_plan(
        cfg,
        [c.objective for c in grid_cells(cfg)],
        evaluate=compare,
        repair=compare and any(m != "none" for m in cfg.compare.recovery),
    )
    return time.perf_counter() - t0, dp


PROBE = "shortgpt"  # the probe cells' searcher: one evaluation, its set from a statistic
EVAL_PROBE_ITEMS, EVAL_PROBE_WINDOWS = 32, 4  # the evaluation probe's items (all tasks) and perplexity windows


def _probe_cell(cfg, broker, run_dir: str, cell: CellSpec, n_blocks: int) -> float:
    """One probe cell in a Ray task process, as compare runs its cells: the process's imports, the
    searcher, the pool client, its statistic, one evaluation, the dense value. Its seconds."""
    t0 = time.perf_counter()
    import ghostsearch.study.compare  # noqa: F401  (what compare's cell task process imports)
    from ghostsearch.core.logs import quiet_libraries
    from ghostsearch.run.runner import run_cell

    quiet_libraries()
    run_cell(
        cfg,
        broker,
        __import__("pathlib").Path(run_dir),
        searcher=PROBE,
        objective=cell.objective,
        k=cell.k,
        seed=cell.seed,
        n_blocks=n_blocks,
        progress=False,
    )
    return time.perf_counter() - t0


def probe_cells(cfg, broker, root, command: str, n_blocks: int) -> tuple[float, int]:
    """(seconds, probes): real cells with a one-evaluation searcher (``PROBE``) on the started pool.
    search: one, in this process (as ``ghostsearch search`` runs its cell); compare: one wave of
    compare.concurrent cells (at most the grid's), each in a Ray task process of its own on this
    node (as compare runs them), timed from submission to the last one's end."""
    import ray

    from ghostsearch.run.runner import run_cell

    cells = grid_cells(cfg)
    if command == "search":
        c = cells[0]
        t0 = time.perf_counter()
        run_cell(
            cfg,
            broker,
            root,
            searcher=PROBE,
            objective=c.objective,
            k=c.k,
            seed=c.seed,
            n_blocks=n_blocks,
            progress=False,
        )
        return time.perf_counter() - t0, 1
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    here = NodeAffinitySchedulingStrategy(ray.get_runtime_context().get_node_id(), soft=False)
    task = ray.remote(num_cpus=0, max_retries=0)(_probe_cell)
    n = min(max(1, cfg.compare.concurrent), len(cells))
    dirs = [root / f"probe{i}" for i in range(n)]
    for d in dirs:
        d.mkdir()
    t0 = time.perf_counter()
    ray.get(
        [task.options(scheduling_strategy=here).remote(cfg, broker, str(d), c, n_blocks) for d, c in zip(dirs, cells)]
    )
    return time.perf_counter() - t0, n


def probe_evaluation(cfg, broker, root, held_out, n_blocks: int) -> EvalProbe:
    """Finalist evaluation on the started pool, for real (``evaluate.evaluate_finalist_specs`` through
    Broker.with_model, as compare runs a share), on the run's item draw: the dense model alone
    (``dense_s``: a share's dense pass, with its first-time costs: task data, corpus, tokenizer), and
    the same share with one middle k-set per compare.recovery method added, each under that method
    (``share_s``: the dense pass, the repair fits and those models; ``share_s - dense_s``: what those
    finalists add to a share), side by side on two scorers when the pool has them (as compare's shares run),
    else one after the other. At most EVAL_PROBE_ITEMS items and EVAL_PROBE_WINDOWS windows
    (``items``, ``windows``: what was timed)."""
    import dataclasses

    import ray

    from ghostsearch.config import protected_blocks
    from ghostsearch.data import items as item_draw
    from ghostsearch.evaluation.evaluate import evaluate_finalist_specs

    draw = item_draw.run_draw(cfg.eval, root, cfg.eval.tasks, cfg.data_dir, held_out)
    n = min(len(draw), EVAL_PROBE_ITEMS)
    quick = cfg.eval.protocol != "paper" and bool(cfg.eval.perplexity) and bool(cfg.eval.ppl_max_seq)
    windows = min(cfg.eval.ppl_max_seq or 0, EVAL_PROBE_WINDOWS) if quick else 0
    pcfg = dataclasses.replace(cfg, eval=dataclasses.replace(cfg.eval, ppl_max_seq=windows or cfg.eval.ppl_max_seq))
    k = max(cfg.compare.ks or [cfg.k])
    free = [b for b in range(n_blocks) if b not in set(protected_blocks(cfg, n_blocks))]
    mid = max(0, min(len(free) - k, (len(free) - k) // 2))
    # middle windows, one per method (compare deals a set's repairs into different shares): a finalist
    # starts, on average, half-way down
    sets = [
        free[min(mid + i, len(free) - k) : min(mid + i, len(free) - k) + k] for i in range(len(cfg.compare.recovery))
    ]
    calls: dict[str, list[tuple[list[int], str]]] = {
        "dense_s": [([], "none")],
        "share_s": [([], "none"), *zip(sets, cfg.compare.recovery)],
    }

    def submit(specs):
        return broker.with_model.remote(
            evaluate_finalist_specs, pcfg, specs, list(held_out), False, draw.first(n), windows > 0
        )

    took: dict[str, float] = {}
    if cfg.pool.actors >= 2:
        t0 = time.perf_counter()
        refs = {submit(specs): name for name, specs in calls.items()}
        pending = list(refs)
        while pending:
            ready, pending = ray.wait(pending, num_returns=1)
            ray.get(ready[0])
            took[refs[ready[0]]] = time.perf_counter() - t0
    else:
        for name, specs in calls.items():
            t0 = time.perf_counter()
            ray.get(submit(specs))
            took[name] = time.perf_counter() - t0
    return EvalProbe(
        items=n,
        of_items=len(draw),
        windows=windows,
        models=len(calls["share_s"]) - 1,
        dense_s=took["dense_s"],
        share_s=took["share_s"],
    )


def measure_report(cfg, n_blocks: int, data_plan: Any = None) -> float:
    """Seconds of compare's report (``report.write_report``: the statistics, the five plots, the
    Markdown, HTML and summary.json) written for real into a scratch folder, over a stand-in grid of
    the planned cells x compare.recovery with made-up numbers (no per-item rows: their paired
    bootstraps are not timed)."""
    import tempfile
    from pathlib import Path

    import numpy as np

    from ghostsearch.config import protected_blocks
    from ghostsearch.core.eval_numbers import FinalistNumbers, TaskNumbers
    from ghostsearch.study.report import comparison_table, write_report

    free = [b for b in range(n_blocks) if b not in set(protected_blocks(cfg, n_blocks))] or list(range(n_blocks))
    results, evals = [], {}
    tasks = {t: TaskNumbers(acc=0.5) for t in cfg.eval.tasks}
    for i, c in enumerate(grid_cells(cfg)):
        removed = sorted({free[(i + j) % len(free)] for j in range(c.k)})
        name = c.name
        results.append(
            {
                "cell": name,
                **c.to_dict(),
                "removed": removed,
                "value": 1.0 + 0.1 * i,
                "dense_value": 1.0,
                "relative_change": 0.1 * i,
                "evaluations": 1,
                "budget_used": 1.0,
                "budget_mode": "own",
                "wall_seconds": 1.0,
                "cache_hits": 0,
            }
        )
        for j, m in enumerate(cfg.compare.recovery):
            evals[(name, m)] = FinalistNumbers(tasks=tasks, mean_acc=0.5 - 0.01 * i + 0.005 * j, eval_key=f"{i}-{j}")
    table = comparison_table(
        cfg, results, evals, FinalistNumbers(tasks=tasks, mean_acc=0.55, eval_key="dense"), data_plan
    )
    rng = np.random.default_rng(0)
    a = rng.normal(size=(n_blocks, 8))
    sim = np.corrcoef(a)
    with tempfile.TemporaryDirectory() as d:
        t0 = time.perf_counter()
        write_report(Path(d), table, {"similarity": sim, "block_influence": np.ones(n_blocks)}, cfg, data_plan)
        return time.perf_counter() - t0


def measure_run(cfg, command: str, n_blocks: int, held_out) -> RunMeasured | None:
    """What a local run does around its scoring, timed for real in one Ray session, in the run's
    order: ``start_s`` (start Ray and the pool, every actor loading the model; the identity check,
    where the first actor prepares every objective), ``cells_s`` with ``probes`` (probe_cells), for
    compare ``evaluation`` (probe_evaluation), and ``stop_s`` (the pool released, Ray shut down).
    None when this process already has Ray or the config names a pool (a cluster: its start is not
    this command's to time)."""
    import tempfile
    from pathlib import Path

    import ray

    from ghostsearch.pool.session import PoolSession

    if ray.is_initialized() or cfg.pool.name:
        return None
    t0 = time.perf_counter()
    evaluation = None
    import dataclasses

    local = dataclasses.replace(cfg, pool=dataclasses.replace(cfg.pool, address=None))  # a local run, as timed
    with PoolSession(local) as session:
        broker = session.start()
        specs: dict = {}
        for c in grid_cells(cfg):
            spec = cfg.objective_spec(c.objective, c.seed)
            specs.setdefault(spec.key(), spec)
        session.identity(list(specs.values()))
        start_s = time.perf_counter() - t0
        with tempfile.TemporaryDirectory() as d:
            cells_s, probes = probe_cells(cfg, broker, Path(d), command, n_blocks)
            if command == "compare":
                evaluation = probe_evaluation(cfg, broker, Path(d), held_out, n_blocks)
        t1 = time.perf_counter()
        session.release()
    return RunMeasured(start_s, cells_s, probes, time.perf_counter() - t1, evaluation)


def model_shape(cfg, model_config: str | None) -> tuple[Shape, str]:
    """The model's shape and how the plan names it: ``model_config`` (a config.json or its directory),
    or ``hub`` (ask the hub for cfg.model's config, not the one shipped in configs/models/), or None
    (the shipped config for a hub id that has one, else cfg.model)."""
    hub = model_config == "hub"
    model_config = None if hub else model_config
    shipped = None if hub or model_config else shipped_config(cfg.model)
    shape = shape_of(read_config(model_config or cfg.model, cfg.trust_remote_code, hub=hub))
    shown = model_config or (f"{cfg.model} (configs/models/{cfg.model})" if shipped else cfg.model)
    return shape, shown


def gpus_per_actor(cfg) -> tuple[int, bool]:
    """(whole GPUs per actor, on a GPU), checked against pool.cluster_gpus where the config states it."""
    gpa = cfg.pool.gpus_per_actor
    on_gpu = cfg.resolved_device().startswith("cuda")
    per_actor = int(gpa) if gpa and gpa >= 1 else (1 if on_gpu else 0)
    if cfg.pool.cluster_gpus is not None and per_actor > cfg.pool.cluster_gpus:
        raise GhostsearchError(
            f"pool.gpus_per_actor={gpa:g} is more than the cluster's {cfg.pool.cluster_gpus} GPUs "
            "(pool.cluster_gpus); lower it or plan for a bigger cluster"
        )
    if cfg.pool.cluster_gpus is not None and on_gpu and per_actor * cfg.pool.actors > cfg.pool.cluster_gpus:
        raise GhostsearchError(
            f"pool of {cfg.pool.actors} actors x {per_actor} GPUs needs "
            f"{per_actor * cfg.pool.actors} GPUs but pool.cluster_gpus={cfg.pool.cluster_gpus}; "
            "lower pool.actors"
        )
    return per_actor, on_gpu


def plan_cells(cfg, shape: Shape) -> list[Cell]:
    """Every cell of the run (objective x searcher x k x seed), with its evaluations and their cost."""
    L = shape.n_blocks
    cells = []
    for obj in cfg.compare.objectives or [cfg.objective]:
        cal = cfg.calibration.for_objective(obj)
        tokens = cal.n_seq * cal.seq_len
        for s in cfg.compare.searchers or [cfg.searcher]:
            for k in cfg.compare.ks or [cfg.k]:
                n, kind = evaluations(cfg, s, k, L, rows=cal.n_seq)
                run = blocks_run(s, k, L)
                fl = tokens * (run * flops_per_token_block(shape, cal.seq_len) + 2.0 * shape.head_weight)
                for seed in cfg.compare.seeds or [cfg.seed]:
                    cells.append(Cell(s, obj, k, seed, n, kind, tokens, run, fl))
    return cells


def prepare_flops(cfg, shape: Shape) -> float:
    """FLOPs of every actor preparing every objective once (one dense forward of its calibration)."""
    out = 0.0
    for obj in cfg.compare.objectives or [cfg.objective]:
        cal = cfg.calibration.for_objective(obj)
        out += (
            cal.n_seq
            * cal.seq_len
            * (shape.n_blocks * flops_per_token_block(shape, cal.seq_len) + 2.0 * shape.head_weight)
        )
    return out


def evaluation_seconds(cfg, shape: Shape, ev: EvaluationPlan, flop_rate: float) -> EvaluationPlan:
    """``ev`` with its seconds at the pool's FLOP rate (``flop_rate``: all actors): task items (a
    finalist starts at its first removed block over the dense model's cached states: half the depth),
    quick-protocol perplexity windows (every token through half the depth and the LM head), and repair
    fits (Ghosted, LinearPatch, ReplaceMe: one dense forward of their data)."""
    L = shape.n_blocks
    T = cfg.eval.ppl_seq_len
    ppl = (L / 2) * flops_per_token_block(shape, T) + 2.0 * shape.head_weight
    rep = cfg.recovery.n_seq * cfg.recovery.seq_len * L * flops_per_token_block(shape, cfg.recovery.seq_len)
    return dataclasses.replace(
        ev,
        seconds=ev.models * ev.item_tokens * (L / 2) * flops_per_token_block(shape, 512) / flop_rate,
        ppl_seconds=ev.models * ev.ppl_tokens * ppl / flop_rate,
        repair_seconds=ev.repaired * rep / flop_rate,
    )


def stated_start(cfg, shape: Shape, mem: MemoryPlan, measure: bool) -> Part:
    """Start-up when it is not timed: a local Ray start (stated) and every actor reading the weights
    (in parallel) at the rate measured here (``measure``, local weights) or stated."""
    dev = cfg.resolved_device().split(":")[0]
    load_rate = measure_load_rate(cfg) if measure else None
    weight_bytes = shape.params * mem.parts["bytes_per_param"]
    startup = RAY_START_S.get(dev, RAY_START_S["cuda"]) + weight_bytes / (load_rate or LOAD_BYTES_PER_S)
    return Part(
        startup,
        "a local Ray start, stated, and the weights read at "
        + (f"{load_rate / 1e9:.2f} GB/s (measured)" if load_rate else f"{LOAD_BYTES_PER_S / 1e9:g} GB/s (stated)"),
    )


def measured_parts(
    cfg, shape: Shape, run_m: RunMeasured, n_cells: int, command: str, flop_rate: float
) -> dict[str, Part]:
    """start, cells and stop from measure_run's timings. A probe cell's one evaluation is its scoring;
    the rest is a cell's own cost (process, searcher, client, statistics, dense value), paid once per
    wave of compare.concurrent cells."""
    probe_eval = run_m.probes * blocks_run_flops(cfg, shape, PROBE) / (flop_rate * cfg.pool.actors)
    per_wave = max(0.0, run_m.cells_s - probe_eval)
    waves = -(-n_cells // max(1, cfg.compare.concurrent)) if command == "compare" else n_cells
    return {
        "start": Part(
            run_m.start_s,
            "measured: Ray, the pool (every actor loading the weights) and the first actor's prepare, started here",
        ),
        "cells": Part(
            waves * per_wave,
            f"measured: {run_m.probes} probe cell(s) ({PROBE}, one evaluation) "
            f"{per_wave:.1f} s less their evaluation, x {waves} wave(s)",
        ),
        "stop": Part(run_m.stop_s, "measured: the pool released and Ray shut down here"),
    }


def fixed_costs(
    cfg, shape: Shape, mem: MemoryPlan, n_cells: int, command: str, measure: bool, timed: bool, flop_rate: float
) -> tuple[dict[str, Part], RunMeasured | None, Any]:
    """A run's costs beyond scoring, part by part in the run's order (process, checks, start, cells,
    stop): measured on a local run when ``timed`` (measure_process, measure_run), else start-up only,
    stated. Also measure_run's timings (None when not timed) and the data plan (None when not timed)."""
    fixed: dict[str, Part] = {}
    run_m, dp = None, None
    if timed:
        process_s, checks_s, dp = measure_process(cfg, command)
        fixed["process"] = Part(
            process_s - checks_s, "measured: a fresh Python starting, importing the command's modules and exiting"
        )
        fixed["checks"] = Part(checks_s, "measured: the model config, tasks and data plan, in that fresh Python")
        run_m = measure_run(cfg, command, shape.n_blocks, dp.held_out)
    if run_m is not None:
        fixed.update(measured_parts(cfg, shape, run_m, n_cells, command, flop_rate))
    else:
        fixed["start"] = stated_start(cfg, shape, mem, measure)
    return fixed, run_m, dp


def plan_run(
    cfg, model_config: str | None = None, measure: bool = False, time_start: bool = True, command: str | None = None
) -> RunPlan:
    """Everything ``plan`` prints (cells, totals, memory, assumptions). ``measure``: time the forwards
    here and, with ``time_start``, what a local run does around them (measure_process, measure_checks,
    measure_run, and for compare measure_report). ``command``: search or compare (default: command_of
    the config)."""
    command = command or command_of(cfg)
    shape, shown = model_shape(cfg, model_config)
    per_actor, on_gpu = gpus_per_actor(cfg)
    mem = resolve_every(cfg, shape)
    flop_rate, rate_note = rate(cfg, shape, measure)
    actors = cfg.pool.actors
    cells = plan_cells(cfg, shape)
    total_flops = sum(c.evaluations * c.flops for c in cells)
    # a split actor runs its blocks one device after another: one device's rate per actor
    prepare_s, scoring_s = prepare_flops(cfg, shape) / flop_rate, total_flops / (flop_rate * actors)
    ev = evaluation_seconds(cfg, shape, evaluation_items(cfg), flop_rate * actors)
    eval_s = ev.seconds + ev.ppl_seconds + ev.repair_seconds
    eval_note = "at the FLOP rate (task items, quick-protocol perplexity windows, repair fits)"
    timed = measure and time_start and model_config is None
    fixed, run_m, dp = fixed_costs(cfg, shape, mem, len(cells), command, measure, timed, flop_rate)
    if run_m is not None and run_m.evaluation is not None:
        eval_s, eval_note = evaluation_from_probe(cfg, shape, ev, run_m.evaluation, distinct_sets(cfg, grid_cells(cfg)))
        ev = dataclasses.replace(ev, measured=run_m.evaluation)
    if timed and command == "compare":
        fixed["report"] = Part(
            measure_report(cfg, shape.n_blocks, dp),
            "measured: write_report over a stand-in grid of this size, here (per-item bootstraps not timed)",
        )
    wall = prepare_s + scoring_s
    search_parts = ("process", "checks", "start", "cells", "stop")
    not_counted = [p for p in ("process", "checks", "cells", "stop") if p not in fixed]
    if command == "compare" and "report" not in fixed:
        not_counted.append("report")
    devices_per_actor = max(1, per_actor)
    return RunPlan(
        model=shown,
        shape=shape,
        cells=cells,
        memory=mem,
        evaluation=ev,
        rate=flop_rate,
        rate_note=rate_note,
        total_flops=total_flops,
        command=command,
        fixed=fixed,
        not_counted=not_counted,
        startup_measured=run_m is not None,
        search_wall_s=wall + sum(v.seconds for p, v in fixed.items() if p in search_parts),
        compare_wall_s=wall + eval_s + sum(v.seconds for v in fixed.values()),
        evaluation_s=eval_s,
        evaluation_note=eval_note,
        prepare_s=prepare_s,
        scoring_s=scoring_s,
        device_hours=wall * actors * devices_per_actor / 3600 if on_gpu else 0.0,
        actors=actors,
        devices_per_actor=devices_per_actor,
        on_gpu=on_gpu,
    )


def blocks_run_flops(cfg, shape: Shape, searcher: str) -> float:
    """FLOPs of one evaluation of ``searcher`` on the config's first objective and k."""
    cal = cfg.calibration.for_objective((cfg.compare.objectives or [cfg.objective])[0])
    k = (cfg.compare.ks or [cfg.k])[0]
    return (
        cal.n_seq
        * cal.seq_len
        * (
            blocks_run(searcher, k, shape.n_blocks) * flops_per_token_block(shape, cal.seq_len)
            + 2.0 * shape.head_weight
        )
    )


def evaluation_from_probe(cfg, shape: Shape, ev: EvaluationPlan, probe: EvalProbe, sets: int) -> tuple[float, str]:
    """Seconds of compare's finalist evaluation from probe_evaluation's two timings. A share costs
    the dense pass (``dense_s``) and, per finalist model, ``(share_s - dense_s) / models`` (its
    repair fit included); the finalists (``sets`` distinct sets x compare.recovery, and the dense
    model) are dealt into shares as compare deals them (at least one per scorer, at most eval.share
    models each), the shares run side by side on the scorers. When the probe timed fewer items or
    windows than the run has, both parts are scaled by their FLOPs at the two sizes."""
    L = shape.n_blocks
    fb, T = flops_per_token_block(shape, 512), cfg.eval.ppl_seq_len
    item_tokens = ev.item_tokens
    windows = cfg.eval.ppl_max_seq if probe.windows else 0

    def flops(depth: float, items: float, wins: float) -> float:
        return item_tokens * items * depth * fb + wins * len(cfg.eval.perplexity) * T * (
            depth * flops_per_token_block(shape, T) + 2.0 * shape.head_weight
        )

    full_items = 1.0
    probe_items = probe.items / max(1, probe.of_items)
    dense = probe.dense_s * flops(L, full_items, windows) / max(flops(L, probe_items, probe.windows), 1.0)
    per_model = max(0.0, probe.share_s - probe.dense_s) / max(1, probe.models)
    per_model *= flops(L / 2, full_items, windows) / max(flops(L / 2, probe_items, probe.windows), 1.0)
    models = sets * len(cfg.compare.recovery)  # the finalists, less the dense model
    n_shares = min(models + 1, max(cfg.pool.actors, -(-(models + 1) // max(1, cfg.eval.share))))
    waves = -(-n_shares // max(1, cfg.pool.actors))
    per_share = -(-models // n_shares)
    note = (
        f"measured: a share's dense pass {probe.dense_s:.1f} s and {per_model:.1f} s per finalist model "
        f"(evaluate_finalist_specs on the pool, {probe.items} of {probe.of_items} items, "
        f"{probe.windows} of {windows} windows per set"
        f"{', scaled by FLOPs' if probe_items < 1 or probe.windows < windows else ''}); "
        f"{models} finalist models ({sets} distinct sets x {len(cfg.compare.recovery)} repairs) + dense in "
        f"{n_shares} share(s), {waves} wave(s) of {per_share} model(s) after the dense pass"
    )
    return waves * (dense + per_share * per_model), note


def format_plan(cfg, p: RunPlan, whole: list[str] | None = None) -> str:
    """What ``plan`` prints of a search or compare; ``whole``: lines in place of the whole run's and the
    finalist evaluation's (a target's: ``target_lines``)."""
    from ghostsearch.model.memplan import fmt_count

    sh, mem = p.shape, p.memory
    out = [
        f"model {p.model}: {sh.n_blocks} blocks, hidden {sh.hidden}, {fmt_count(sh.params)} parameters, "
        f"dtype {cfg.dtype}, {mem.parts['bytes_per_param']} bytes/parameter",
        "",
        f"{'searcher':<10} {'objective':<11} {'k':>3} {'seed':>4} {'evaluations':>12} {'kind':<8} "
        f"{'tokens/eval':>11} {'blocks/eval':>11} {'FLOPs/eval':>10} {'hours':>8}",
    ]
    for c in p.cells:
        hrs = c.evaluations * c.flops / (p.rate * p.actors) / 3600
        out.append(
            f"{c.searcher:<10} {c.objective:<11} {c.k:>3} {c.seed:>4} {c.evaluations:>12,.0f} {c.kind:<8} "
            f"{c.tokens:>11,} {c.blocks_run:>11.1f} {fmt_count(c.flops):>10} {hrs:>8.2f}"
        )
    out += [
        "",
        f"total: {p.evaluations:,.0f} evaluations, {p.total_flops / 1e15:,.0f} PFLOP, wall "
        f"{p.wall_s / 3600:.2f} h ({p.wall_s:.0f} s) on {p.actors} actor(s) x "
        f"{p.devices_per_actor} device(s)" + (f", {p.device_hours:.1f} GPU-hours" if p.on_gpu else ""),
        f"time: preparing {p.prepare_s:,.0f} s (every actor, once per objective) + scoring "
        f"{p.scoring_s:,.0f} s; "
        f"rate: {p.rate / 1e12:.3g} TFLOP/s per actor ({p.rate_note})",
        *([whole_run_line(p)] if whole is None else []),
        f"memory per actor: {mem.line()}; cache.every={mem.every} ({mem.parts['kept_boundaries']} boundaries of "
        f"{mem.parts['state_bytes'] / GiB:.2f} GiB), prefix runs {mem.parts['prefix_run_count']}"
        + (f", host {mem.host / GiB:.1f} GiB (cache.offload)" if mem.host else "")
        + ("" if mem.fits else "  DOES NOT FIT"),
        *([evaluation_line(p.evaluation)] if whole is None else whole),
        "kinds: exact (the count follows from the space: greedy not raced, and the one-shot searchers); "
        "budget = at most that many (raced greedy: race auto from 32 "
        "calibration rows; ga stops when its next generation does not fit what is left); estimate = depends on "
        "the searcher's answers",
        "not counted: the paper protocol's perplexity windows (their token count needs the corpus)"
        + "".join(f", {PARTS[n]}" for n in p.not_counted)
        + " (plan --measure times them on a local run)",
    ]
    return "\n".join(out)


def target_lines(tp: TargetPlan) -> list[str]:
    """A target run's phases after the search, each with its seconds and where they come from, and the whole
    run as a range (every k settled at its first look .. every model to the last look)."""
    s = tp.search
    search_parts = [f"{PARTS[n]} {v.seconds:,.0f} s ({v.note})" for n, v in s.fixed.items() if n != "report"]
    names = {"load": "the model's load in the driver", "repair": "repair fits", "looks": "looks", "speed": "speed"}
    out = [
        f"target: {tp.metric}, ks {', '.join(map(str, tp.ks))}, repair {', '.join(tp.repairs)}, looks "
        f"{'/'.join(map(str, tp.looks))} {tp.unit} per model ({tp.models} models: dense + {len(tp.ks)} ks x "
        f"{len(tp.repairs)} repair(s))",
        f"  search {s.search_wall_s:,.0f} s = the wall above + " + " + ".join(search_parts),
    ]
    for name, part in tp.parts.items():
        out.append(f"  {names[name]} {part.seconds:,.0f} s ({part.note})")
    out.append(
        f"  looks if every k is settled at its first look: {tp.least_items:,} {tp.unit}, {tp.least_looks_s:,.0f} s"
    )
    out.append(
        f"whole target run: {tp.least_s:,.0f} s ({tp.least_s / 3600:.2f} h) if every k is settled at its first "
        f"look, {tp.worst_s:,.0f} s ({tp.worst_s / 3600:.2f} h) at most (every model to the last look)"
    )
    return out


def format_target_plan(cfg, tp: TargetPlan) -> str:
    """What ``plan`` prints of a target run: the search's cells, rate and memory, then ``target_lines``."""
    return format_plan(cfg, tp.search, whole=target_lines(tp))


PARTS = {
    "process": "the process's start and imports",
    "checks": "the checks and data plan",
    "start": "start-up",
    "cells": "the cells' own cost",
    "stop": "the pool's release and Ray's shutdown",
    "report": "the report",
}


def whole_run_line(p: RunPlan) -> str:
    """The whole run's wall time, part by part, each with where its number comes from."""
    parts = [f"{PARTS[n]} {v.seconds:,.0f} s ({v.note})" for n, v in p.fixed.items() if n != "report"]
    head = f"whole run: search {p.search_wall_s:,.0f} s = the wall above + " + " + ".join(parts)
    rep = p.fixed.get("report")
    return (
        head + f"; compare {p.compare_wall_s:,.0f} s = that + finalist evaluation {p.evaluation_s:,.0f} s "
        f"({p.evaluation_note})" + (f" + the report {rep.seconds:,.0f} s ({rep.note})" if rep else "")
    )


def evaluation_line(ev: EvaluationPlan) -> str:
    parts = [
        f"{t} {v.items:,} items ({v.requests:,} requests, ~{v.tokens / 1e6:.2f}M tokens)"
        if v
        else f"{t} (no data here)"
        for t, v in ev.tasks.items()
    ]
    ppl = "; ".join(f"{c}: {w}" for c, w in ev.perplexity.items())
    return (
        f"evaluation per model: {', '.join(parts) or 'no tasks'}; perplexity {ppl}; up to {ev.models} models "
        f"(cells x compare.recovery + dense; a set found twice is evaluated once): ~{ev.seconds / 3600:.2f} h "
        "of task items at the rate (tokens ~ characters / 4; perplexity windows not timed)"
    )


# ---------------------------------------------------------------- a target run
@dataclass(frozen=True)
class TargetPlan:
    """``plan`` of a ``ghostsearch target`` run (ghostsearch/study/target.py), phase by phase in its order:
    the search (``search``: its cells, greedy's nested path being one cell at max(ks), with the run's
    fixed costs), then in the driver, Ray down: the model's load, the repair fits, the looks and the
    speed timing (``parts``, each with where its number comes from). The looks are a range: at most
    every model to the last look (``worst``), at least every k settled at its first look (``least``);
    ``items``: windows (a perplexity) or items (an accuracy) per model at each look."""

    search: RunPlan
    metric: str
    ks: list[int]
    looks: list[int]
    repairs: list[str]
    unit: str  # windows | items
    models: int  # the dense model and every k under every repair
    least_items: int
    worst_items: int
    cuts: int  # repair fits' cuts at most: every removed block its own cut, per k and repair
    parts: dict[str, Part]
    least_looks_s: float

    @property
    def worst_s(self) -> float:
        """The whole run when every model goes to the last look."""
        return self.search.search_wall_s + sum(p.seconds for p in self.parts.values())

    @property
    def least_s(self) -> float:
        """The whole run when every k is settled at its first look."""
        return self.worst_s - self.parts["looks"].seconds + self.least_looks_s


def search_config(cfg, ks: list[int]):
    """The config of the search a target runs: greedy's nested path at max(ks) (k), else one cell per k
    (compare.ks, which ``plan_cells`` walks)."""
    from ghostsearch.study.target import nested

    if nested(cfg.searcher):
        return dataclasses.replace(cfg, k=ks[-1])
    return dataclasses.replace(cfg, compare=dataclasses.replace(cfg.compare, ks=list(ks)))


def measure_gram(hidden: int, rows: int = 4096, repeats: int = 3) -> float:
    """FLOP/s of a repair fit's accumulation here, with this process's threads (target fits in its driver):
    X^T X and X^T Y of ``rows`` float64 rows of the model's width (``GramLS.update``: what a cut's fit does
    per calibration token)."""
    import torch

    x = torch.randn(rows, hidden, dtype=torch.float64)
    y = torch.randn(rows, hidden, dtype=torch.float64)
    x.T @ x  # warm-up
    t0 = time.perf_counter()
    for _ in range(repeats):
        x.T @ x
        x.T @ y
    return repeats * 4.0 * rows * hidden * hidden / max(time.perf_counter() - t0, 1e-9)


def measure_driver(cfg) -> tuple[float, float]:
    """(seconds to load the model as the target's driver does, seconds of the speed timing of the dense model
    alone as target times it): ``load_configured`` and ``speed.measure_speed`` with target's settings (its
    warm-up, rounds and peak pass: a decode step's first-time costs included) for real, here."""
    from ghostsearch.evaluation import speed
    from ghostsearch.model.models import load_configured
    from ghostsearch.study import target as tg

    t0 = time.perf_counter()
    model, _ = load_configured(cfg)
    load_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    speed.measure_speed(
        model, batches=(1,), seq_len=tg.SPEED_SEQ_LEN, decode_tokens=tg.SPEED_DECODE, repeats=tg.SPEED_REPEATS
    )
    return load_s, time.perf_counter() - t0


def plan_target(cfg, model_config: str | None = None, measure: bool = False, time_start: bool = True) -> TargetPlan:
    """What ``ghostsearch target`` will cost, phase by phase (TargetPlan): the search as ``plan_run`` plans
    it (``search_config``), the model's load in the driver, the repair fits (one dense pass over the repair
    calibration per repair, then per k a least-squares fit per cut: X^T X and X^T Y in float64), the looks
    (per model and item: a window of eval.ppl_seq_len tokens through the model's depth and head, or an
    accuracy item's tokens as ``evaluation_items`` counts them) and the speed timing (``target.measure``:
    the dense and the certified model, warm-up, SPEED_REPEATS rounds and a peak pass of a SPEED_SEQ_LEN
    prompt and SPEED_DECODE decode steps). ``measure``: the load, the fit's float64 rate and the dense
    model's prefill and decode speed timed here (else the FLOP rate, which a decode step's overheads
    exceed: stated)."""
    from ghostsearch.study import target as tg

    shape, _ = model_shape(cfg, model_config)
    L = shape.n_blocks
    p = tg.plan(cfg, L)
    ecfg = tg.eval_cfg(cfg, p)
    search = plan_run(search_config(ecfg, p.ks), model_config, measure, time_start, command="search")
    flop_rate, mem = search.rate, search.memory
    repairs = [r for r in p.repairs if r != "none"]
    models = 1 + len(p.ks) * len(p.repairs)
    parts: dict[str, Part] = {}
    # the model in the driver
    timed = measure and model_config is None
    load_s, dense_speed_s = measure_driver(cfg) if timed else (0.0, 0.0)
    rate_note = "the FLOP rate"
    if timed:  # the driver's phases (fits, looks) run with this process's threads, on eval batches
        flop_rate = measure_rate(cfg, shape, rows=(max(1, cfg.eval.batch_size), cfg.eval.ppl_seq_len))
        rate_note = f"{flop_rate / 1e12:.3g} TFLOP/s (measured here: the driver's threads, an eval batch)"
    if timed:
        parts["load"] = Part(load_s, "measured: load_configured here")
    else:
        weight_bytes = shape.params * mem.parts["bytes_per_param"]
        parts["load"] = Part(
            weight_bytes / LOAD_BYTES_PER_S, f"the weights read at {LOAD_BYTES_PER_S / 1e9:g} GB/s (stated)"
        )
    # the repair fits
    rec = cfg.recovery
    tokens = rec.n_seq * rec.seq_len
    capture = len(repairs) * tokens * L * flops_per_token_block(shape, rec.seq_len) / flop_rate
    cuts = len(repairs) * sum(p.ks)
    gram = measure_gram(shape.hidden) if timed else flop_rate
    fits = cuts * tokens * 4.0 * shape.hidden**2 / gram
    parts["repair"] = Part(
        capture + fits,
        f"{len(repairs)} dense pass(es) over {rec.n_seq} x {rec.seq_len} tokens {capture:,.0f} s at {rate_note} "
        f"+ at most {cuts} "
        f"cut fits (every removed block its own cut) {fits:,.0f} s at "
        + (f"{gram / 1e9:.3g} GFLOP/s float64 (measured)" if timed else "the FLOP rate (float64 not timed)"),
    )
    # the looks: per model and item, FLOPs at the depth it runs
    if p.perplexity:
        T = cfg.eval.ppl_seq_len

        def item_flops(depth: int) -> float:
            return T * (depth * flops_per_token_block(shape, T) + 2.0 * shape.head_weight)

        unit = "windows"
    else:
        ev = evaluation_items(ecfg)
        have = [t for t in ev.tasks.values() if t]
        per_item = sum(t.tokens for t in have) / max(1, sum(t.items for t in have))

        def item_flops(depth: int) -> float:
            return per_item * depth * flops_per_token_block(shape, 512)

        unit = "items"
    per_look = item_flops(L) + len(p.repairs) * sum(item_flops(L - k) for k in p.ks)  # every model, one item
    worst_items, least_items = models * p.looks[-1], models * p.looks[0]
    parts["looks"] = Part(
        p.looks[-1] * per_look / flop_rate,
        f"worst case: {worst_items:,} {unit} ({models} models to the last look, {p.looks[-1]}), at {rate_note}",
    )
    least_looks_s = p.looks[0] * per_look / flop_rate
    # the speed timing: the dense and the certified model (at most: the least k), batch 1
    import inspect

    from ghostsearch.evaluation.speed import measure_speed

    warmup = int(inspect.signature(measure_speed).parameters["warmup"].default)  # target.measure leaves it
    prefills = warmup + tg.SPEED_REPEATS + 1  # the warm-up, the rounds, the peak pass
    steps = warmup * min(2, tg.SPEED_DECODE) + (tg.SPEED_REPEATS + 1) * tg.SPEED_DECODE
    T = tg.SPEED_SEQ_LEN

    def token_flops(depth: int) -> float:  # one decode step (a prompt's head runs for its last token only)
        return depth * flops_per_token_block(shape, T) + 2.0 * shape.head_weight

    depths = (L, L - p.ks[0])  # the dense model and the certified one, at most as deep as the least k leaves
    if timed:
        speed_s = sum(dense_speed_s * token_flops(d) / token_flops(L) for d in depths)
        speed_note = (
            f"measured: the dense model timed as target times it, {dense_speed_s:,.1f} s here, and the certified "
            "model's scaled by its FLOPs"
        )
    else:
        per_model = [prefills * T * d * flops_per_token_block(shape, T) + steps * token_flops(d) for d in depths]
        speed_s = sum(per_model) / flop_rate
        speed_note = (
            f"{prefills} prompts of {tg.SPEED_SEQ_LEN} tokens and {steps} decode steps per model at the FLOP rate "
            "(a decode step's overheads not counted: plan --measure times them)"
        )
    parts["speed"] = Part(speed_s, speed_note)
    return TargetPlan(
        search=search,
        metric=p.metric,
        ks=list(p.ks),
        looks=list(p.looks),
        repairs=list(p.repairs),
        unit=unit,
        models=models,
        least_items=least_items,
        worst_items=worst_items,
        cuts=cuts,
        parts=parts,
        least_looks_s=least_looks_s,
    )


__all__ = [
    "RunPlan",
    "TargetPlan",
    "plan_run",
    "plan_target",
    "format_plan",
    "format_target_plan",
    "evaluations",
    "blocks_run",
    "measure_rate",
    "plan_memory",
]
