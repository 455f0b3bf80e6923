"""The account of what `ghostsearch target` has tested on which items: RUN_DIR/target/account.json.

A certificate's level holds for one test on its items. A rerun that tests again on the same items
(another repair, a looser target, more looks, another level) is another chance for a wrong
certificate: 5.0% becomes 7.4% after one rerun with looks extended, 12.6% after four repairs tried in
turn (issue 47; bench/target_level.py: 11.3% and 14.4% on its populations). So every test target
makes is written down, per metric (the question asked), with the items it read, its looks, each k's
looks run and the bounds they used, and the level it spent.
A new run asks the account (``plan``) before any work:

- **the same test** (the same config but ``out``, ``pool`` and ``target.rerun``, the same looks):
  the same items and the same values give the same verdicts; nothing more is spent (a resumed or
  repeated run).
- **the same test continued** (``target.rerun: continue``, the same config and the same last look):
  the spending function continued on the same items, each k's looks run keeping the bounds they
  used (``certify.one_sided``'s ``fixed``) and taking no futility stop again. Futility is
  non-binding (the bounds assume every k goes on), so a k that stopped early for futility may go on
  to the design's later looks; a k that reached its last look has spent its level. More items than
  the planned last look is not a continuation: the paths that ran to the last look already spent
  what was left, and giving the futility-stopped ones a larger design spends it again (measured:
  6.5% instead of 5% on LAMBADA k = 5 with looks extended from 64 to 800 windows).
- **a new test** (anything else changed: the repair, the target, the ks, the level, the looks
  otherwise) counts as one of ``target.tries`` (fixed by the first test, default 1): each try is
  judged at level alpha / tries (Bonferroni over the tries the account shows, whatever they were), so
  every certificate the account holds is wrong with probability at most alpha together. With
  ``target.rerun: fresh`` the try reads items no earlier test read (the draw continued past them).
  With no tries left the run is refused in one line that says what is left.

Fresh items alone do not restore the level over a sequence: a person who reruns on fresh items until
a run certifies has two chances at a wrong certificate (1 - 0.95^2 = 9.75% for two full-level runs at
a true drop exactly at the target; 10.1% measured); the tries split the level however the items are drawn.

``target.recovery`` as a list is one family in one try: each repair is judged at alpha / (tries x
repairs), the answer is the repair with the largest certified k.
"""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ghostsearch.core.errors import GhostsearchError

RERUNS = ("continue", "fresh")


@dataclass(frozen=True)
class Request:
    """What a run wants to test (resolved from its config before any work)."""

    metric: str
    key: str  # the test's identity: ``test_key``
    looks: list[int]
    level: float
    tries: int
    repairs: list[str]
    rerun: str | None = None  # None | continue | fresh


@dataclass
class Test:
    """One test the account holds: its identity, looks, level per repair, the items it read (from
    ``offset``, ``items`` of them per model), and per repair per k the looks run and their bounds."""

    metric: str
    key: str
    looks: list[int]
    alpha: float  # each repair's level (1 - level) / (tries x repairs)
    offset: int  # the first item of the draw it read
    items: int = 0  # items per model it read from offset (the dense model's count)
    repairs: list[str] = field(default_factory=list)
    ks: dict[str, dict[str, dict[str, Any]]] = field(default_factory=dict)  # repair -> k -> {looks, bounds, stop}
    certified_k: int = 0
    when: str = ""


@dataclass(frozen=True)
class Decision:
    """What the account lets a run do: the level of each repair (``alpha``), the draw's first item
    (``offset``), the bounds each (repair, k) already used (a continued test), and which recorded test
    it is (``index``; None: a new one, appended)."""

    alpha: float
    offset: int
    fixed: dict[str, dict[int, list[float]]]
    index: int | None
    note: str


def test_key(cfg_dict: dict) -> str:
    """The test's identity: the whole config but ``out``, ``pool``, ``target.rerun`` and
    ``target.looks`` (the looks are compared on their own: a continued test has more of them)."""
    d = json.loads(json.dumps(cfg_dict, default=str))
    d.pop("out", None)
    d.pop("pool", None)
    t = d.get("target", {})
    for k in ("rerun", "looks"):
        t.pop(k, None)
    return hashlib.sha256(json.dumps(d, sort_keys=True).encode()).hexdigest()[:16]


def path(run_dir: Path) -> Path:
    return Path(run_dir) / "target" / "account.json"


def read(run_dir: Path) -> dict:
    """The account ({"tries": N, "tests": [...]}), empty when there is none. An account that is not
    what target wrote is refused (never guessed: it is what keeps the level)."""
    f = path(run_dir)
    if not f.exists():
        return {"tries": None, "tests": []}
    try:
        data = json.loads(f.read_text(encoding="utf-8"))
        tests = [Test(**t) for t in data["tests"]]
        tries = data["tries"]
        if not isinstance(tries, int) or tries < 1:
            raise ValueError(f"tries {tries!r}")
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise GhostsearchError(
            f"{f} is not an account target wrote ({str(e).splitlines()[0][:100]}); it records what was tested on "
            "these items: restore it, or start a new out= directory (its items are then tested afresh)"
        ) from None
    return {"tries": tries, "tests": tests}


def write(run_dir: Path, account: dict) -> None:
    from ghostsearch.core.io import write_json_atomic

    path(run_dir).parent.mkdir(parents=True, exist_ok=True)
    write_json_atomic(path(run_dir), {"tries": account["tries"], "tests": [asdict(t) for t in account["tests"]]})


def plan(account: dict, req: Request) -> Decision:
    """What ``req`` may do given the account (module docstring); a ``GhostsearchError`` (one line)
    when it would test again on spent items."""
    if req.rerun not in (None, *RERUNS):
        raise GhostsearchError(f"target.rerun={req.rerun!r}: use continue or fresh, or leave it unset")
    tests: list[Test] = [t for t in account["tests"] if t.metric == req.metric]
    tries = account["tries"] if account["tries"] is not None else req.tries
    if account["tests"] and tries != req.tries:
        raise GhostsearchError(
            f"target.tries={req.tries} but this run directory's first test fixed it at {tries} (the tries split "
            f"the level; changing them after a test would spend it again): set target.tries={tries}"
        )
    alpha = (1 - req.level) / (tries * len(req.repairs))
    end = max((t.offset + t.items for t in tests), default=0)
    for t in tests:
        if t.key != req.key:
            continue
        if req.rerun == "continue":
            return _continued(account, t, req)
        if t.looks == req.looks:
            return Decision(alpha, t.offset, {}, account["tests"].index(t), "the same test, read back")
    used = len(tests)
    if req.rerun == "continue":
        raise GhostsearchError(
            f"target.rerun=continue: this run directory holds no test of {req.metric} with this config (every key but "
            "out, pool, target.rerun and target.looks) to continue; leave target.rerun unset"
        )
    if used < tries:
        offset = end if req.rerun == "fresh" else 0
        note = f"try {used + 1} of {tries}" + (f", on items {offset}.. (fresh)" if offset else "")
        return Decision(alpha, offset, {}, None, note)
    what = ", ".join(f"{t.repairs} looks {t.looks} on items {t.offset}..{t.offset + t.items}" for t in tests)
    raise GhostsearchError(
        f"{req.metric}: this run directory already tested {what} ({used} of target.tries={tries}); testing again "
        "on its items would spend the level twice: a k that stopped early for futility can go on "
        "(target.rerun: continue, the same config), anything else needs tries planned before the first test "
        "(target.tries: N, each at level/N; target.rerun: fresh for unread items) or the repairs named together "
        "(target.recovery: [a, b, ...], one family)"
    )


def _continued(account: dict, t: Test, req: Request) -> Decision:
    """``target.rerun: continue`` of the recorded test ``t``: the same spending design (the same last
    look, the looks run kept), each k's looks run keeping their bounds and taking no futility stop
    again (futility is non-binding: going on is what the bounds assumed); refused where nothing is
    left (every repair's first failed k reached the last look)."""
    ran = max((v["looks"] for ks in t.ks.values() for v in ks.values()), default=0)
    if req.looks[-1] != t.looks[-1] or list(req.looks[:ran]) != list(t.looks[:ran]):
        raise GhostsearchError(
            f"target.rerun=continue: the recorded test's looks are {t.looks} and its ks ran {t.looks[:ran]}; a "
            f"continued test keeps those and the last look ({t.looks[-1]} items: the spending was planned to it). "
            "More items than that is a new test (target.tries)"
        )
    spent = [f"{r} k={k}" for r, ks in t.ks.items() for k, v in ks.items() if v["stop"] == "last look"]
    if len(spent) >= len(t.repairs):
        raise GhostsearchError(
            f"target.rerun=continue: {', '.join(spent)} reached the last look ({t.looks[-1]} items) and spent the "
            "level on these items; nothing is left to continue (a new test needs a try left: target.tries)"
        )
    return Decision(t.alpha, t.offset, _fixed_of(t), account["tests"].index(t), "continued past its futility stops")


def _fixed_of(t: Test) -> dict[str, dict[int, list[float]]]:
    return {r: {int(k): list(v["bounds"]) for k, v in ks.items() if v.get("bounds")} for r, ks in t.ks.items()}


def record(account: dict, req: Request, d: Decision, items: int, verdicts: dict[str, Any], certified_k: int) -> dict:
    """The account with this run's test written in (``verdicts``: repair -> certify.Certification);
    ``items``: the items per model it read from its offset."""
    ks = {
        r: {
            str(v.k): {"looks": v.looks, "bounds": list(v.bounds_by_look or []), "stop": v.stop}
            for v in c.ks
            if v.stop != "not tested"
        }
        for r, c in verdicts.items()
    }
    test = Test(
        req.metric,
        req.key,
        list(req.looks),
        d.alpha,
        d.offset,
        items,
        list(req.repairs),
        ks,
        certified_k,
        time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
    )
    tests = list(account["tests"])
    if d.index is None:
        tests.append(test)
    else:
        old = tests[d.index]
        test.items = max(items, old.items)
        tests[d.index] = test
    tries = account["tries"] if account["tries"] is not None else req.tries
    return {"tries": tries, "tests": tests}
