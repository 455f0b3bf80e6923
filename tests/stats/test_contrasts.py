"""compare.contrasts: the grammar, its one-line errors at config load, resolution to eval keys, and
the power statement made before any model work."""

import json

import pytest

from ghostsearch.config import load_config
from ghostsearch.core.errors import GhostsearchError
from ghostsearch.rundir.cell import CellResult
from ghostsearch.stats.contrasts import power_lines, resolve_contrasts

GRID = [
    "compare.searchers=[greedy,lorp,shortgpt]",
    "compare.objectives=[perplexity,margin]",
    "compare.ks=[8]",
    "compare.seeds=[0,1]",
]
CONFIG = "configs/compare-smollm2.yaml"


def cfg_with(contrasts):
    return load_config(CONFIG, GRID + ["compare.contrasts=" + json.dumps(contrasts)])


def test_the_grammar_says_repair_searcher_objective_and_dense():
    cfg = cfg_with(
        [
            "ghosted - none | searcher=greedy, objective=perplexity",
            "lorp - shortgpt | objective=perplexity",
            "perplexity - margin | searcher=greedy, recovery=ghosted",
            "ghosted - dense | searcher=lorp, objective=margin, seed=1",
        ]
    )
    results = [
        CellResult(
            cell=f"{s}-{o}-k8-s{sd}",
            searcher=s,
            objective=o,
            k=8,
            seed=sd,
            removed={"lorp": (4, 5), "greedy": (1, 2)}.get(s, (1, 2) if o == "perplexity" else (7, 9)),
            value=1.0,
            evaluations=1,
            budget_used=1.0,
            cache_hits=0,
            wall_seconds=0.0,
        )
        for s in ("greedy", "lorp", "shortgpt")
        for o in ("perplexity", "margin")
        for sd in (0, 1)
    ]
    got = resolve_contrasts(cfg.contrasts(), results, lambda removed, method: f"{removed}/{method}")
    assert [(p.left_key, p.right_key, p.same) for p in got] == [
        ("[1, 2]/ghosted", "[1, 2]/none", False),
        ("[4, 5]/none", "[1, 2]/none", False),  # shortgpt found greedy's set under perplexity
        ("[1, 2]/ghosted", "[1, 2]/ghosted", True),  # greedy found the same set under both objectives
        ("[4, 5]/ghosted", "[]/none", False),
    ]
    assert got[0].left == "greedy/perplexity/k=8/s0/ghosted [1, 2]" and got[3].right == "dense"


@pytest.mark.parametrize(
    "text, msg",
    [
        ("ghosted-none", "exactly one ' - '"),
        ("lorp - shortgpt", "does not say which objective"),
        ("foo - none | searcher=greedy, objective=margin", "'foo' is not dense, a searcher"),
        ("ghosted - none | searcher=greedy, objective=margin, k=4", "k=4 is not in the grid"),
        ("none - none | searcher=greedy, objective=margin", "both sides are the same model"),
        ("ghosted - none | searcher=greedy, objective=margin, kk=8", "unknown key 'kk'"),
    ],
)
def test_bad_contrasts_are_one_line_errors_at_load(text, msg):
    with pytest.raises(GhostsearchError) as e:
        cfg_with([text])
    assert msg in str(e.value) and "compare.contrasts" in str(e.value) and "\n" not in str(e.value)


def test_power_lines_say_what_the_size_can_decide():
    cfg = cfg_with(["ghosted - none | searcher=greedy, objective=perplexity", "lorp - shortgpt | objective=perplexity"])
    small, big = power_lines(cfg.contrasts(), 80), power_lines(cfg.contrasts(), 20_000)
    assert len(small) == 2 and "cannot decide a difference of 0.03" in small[0] and "level 0.025" in small[0]
    assert "can decide a difference of 0.03" in big[0]
    need = int(small[0].split("; ")[-1].split()[0].replace(",", ""))
    assert need == 1722  # ((z_0.9875 + z_0.8) / 0.03)^2 x 0.163 = ((2.2414 + 0.8416) / 0.03)^2 x 0.163 = 1,721.4
    assert power_lines(load_config(CONFIG, GRID).contrasts(), 80) == []
