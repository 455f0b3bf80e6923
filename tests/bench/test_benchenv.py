"""bench/benchenv.commit_dir: how the long bench runs (bench/study2*.py --commit) save their data as
they go. It commits the directory alone, in the directory's own repository, wherever the process
runs from (the study runs a copy of bench/ from outside the checkout: git there once left a night's
rows uncommitted), and says why when it commits nothing."""

from __future__ import annotations

import subprocess

from tests.conftest import load_bench


def git(repo, *args) -> str:
    return subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True, check=True).stdout


def test_commits_the_directory_alone_from_outside_the_checkout(tmp_path, monkeypatch, capsys):
    env = load_bench("benchenv")
    repo = tmp_path / "repo"
    (repo / "data").mkdir(parents=True)
    git(repo, "init", "-q")
    git(repo, "config", "user.email", "t@example.invalid")
    git(repo, "config", "user.name", "t")
    (repo / "other.txt").write_text("someone's work in progress\n")
    git(repo, "add", "other.txt")  # staged, not to be committed by a bench run
    (repo / "data" / "rows.json").write_text("{}\n")
    elsewhere = tmp_path / "snapshot"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)  # not a git repository
    assert env.commit_dir(repo / "data", "rows saved")
    assert git(repo, "log", "--format=%s") == "rows saved\n"
    assert git(repo, "show", "--name-only", "--format=", "HEAD").split() == ["data/rows.json"]
    assert "other.txt" in git(repo, "diff", "--cached", "--name-only")  # still staged, not committed
    assert not env.commit_dir(repo / "data", "nothing new")
    assert "not committed (" in capsys.readouterr().out


def test_commit_paths_commits_a_file_and_a_removal_alone(tmp_path, monkeypatch):
    """commit_paths (bench/study3.py --perplexity: a model's file added, its partial file removed)
    commits exactly those paths, the removal included, from outside the checkout."""
    env = load_bench("benchenv")
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q")
    git(repo, "config", "user.email", "t@example.invalid")
    git(repo, "config", "user.name", "t")
    (repo / "m.partial.jsonl").write_text('{"window": 0}\n')
    (repo / "other.txt").write_text("x\n")
    git(repo, "add", "m.partial.jsonl")
    git(repo, "commit", "-q", "-m", "partial")
    (repo / "m.partial.jsonl").unlink()
    (repo / "m.json").write_text('{"windows": 148}\n')
    monkeypatch.chdir(tmp_path)  # not a git repository
    assert env.commit_paths([repo / "m.json", repo / "m.partial.jsonl"], "model done")
    assert git(repo, "show", "--name-status", "--format=", "HEAD").split() == ["A", "m.json", "D", "m.partial.jsonl"]
    assert git(repo, "status", "--porcelain").split() == ["??", "other.txt"]
