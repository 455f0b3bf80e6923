"""Checks over the deployment files (cluster/, configs/, docker/) that ghostsearch relies on.

Every check takes the repository root and returns a list of one-line problems
("" list == fine), so tests can run them on the real tree and on deliberately
broken copies of it.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any, Iterable

import yaml

RAY_VERSION = "2.60.0"
METRICS = (
    "ghostsearch_evaluations",
    "ghostsearch_scoring_seconds",
    "ghostsearch_queue_depth",
    "ghostsearch_best_value",
)
# used when pyproject.toml is absent; otherwise its [project].dependencies rule
FALLBACK_DEPS = (
    "torch",
    "transformers",
    "optuna",
    "deap",
    "datasets",
    "pyarrow",
    "lm-eval",
    "gguf",
    "safetensors",
    "pyyaml",
    "tqdm",
    "matplotlib",
    "scipy",
    "scikit-learn",
)
NOT_IN_RUNTIME_ENV = {"ray"}  # a job always uses the cluster's own Ray

SECRET_KEY = re.compile(
    r"(password|passwd|secret|token|api[_-]?key|access[_-]?key|private[_-]?key"
    r"|credentials?)$",
    re.I,
)
SECRET_ENV = re.compile(r"(TOKEN|SECRET|PASSWORD|PASSWD|API_KEY|ACCESS_KEY|PRIVATE_KEY)$", re.I)
SECRET_TEXT = [
    (re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----"), "private key"),
    (re.compile(r"\bhf_[A-Za-z0-9]{30,}\b"), "Hugging Face token"),
    (re.compile(r"\bAKIA[0-9A-Z]{16}\b"), "AWS access key id"),
    (re.compile(r"\bgh[pousr]_[A-Za-z0-9]{36,}\b"), "GitHub token"),
    (re.compile(r"\bsk-[A-Za-z0-9]{32,}\b"), "API secret key"),
]
# values a secret-named key may hold: a mode, a reference, a path, an empty value
SAFE_SECRET_VALUE = re.compile(r"^(token|disabled|none|null|true|false|)$|^\$\{?|^[~/.]|\{\{", re.I)


# ---------------------------------------------------------------------------
# loading
# ---------------------------------------------------------------------------
class _UniqueKeyLoader(yaml.SafeLoader):
    """safe_load that also refuses duplicate mapping keys (a silent-overwrite bug)."""

    def construct_mapping(self, node, deep=False):
        seen = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            if key in seen:
                raise yaml.constructor.ConstructorError(None, None, f"duplicate key {key!r}", key_node.start_mark)
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


def load_yaml_docs(path: Path) -> list[Any]:
    with open(path) as f:
        return [d for d in yaml.load_all(f, Loader=_UniqueKeyLoader) if d is not None]


def yaml_files(root: Path) -> list[Path]:
    out = []
    for d in ("cluster", "configs"):
        if (root / d).is_dir():
            out += [p for p in (root / d).rglob("*") if p.suffix in (".yaml", ".yml") and p.is_file()]
    return sorted(out)


def json_files(root: Path) -> list[Path]:
    out = []
    for d in ("cluster", "configs"):
        if (root / d).is_dir():
            out += [p for p in (root / d).rglob("*.json") if p.is_file()]
    return sorted(out)


def rel(root: Path, p: Path) -> str:
    return str(p.relative_to(root))


def parse_all(root: Path) -> tuple[dict[Path, list[Any]], list[str]]:
    docs, problems = {}, []
    for p in yaml_files(root):
        try:
            docs[p] = load_yaml_docs(p)
        except yaml.YAMLError as e:
            problems.append(f"{rel(root, p)}: YAML does not parse: {str(e).splitlines()[0]}")
    for p in json_files(root):
        try:
            docs[p] = [json.loads(p.read_text())]
        except ValueError as e:
            problems.append(f"{rel(root, p)}: JSON does not parse: {e}")
    return docs, problems


def walk(x: Any, path: str = ""):
    """(path, key or index, value) for every mapping entry and list item, recursively."""
    if isinstance(x, dict):
        for k, v in x.items():
            yield path, k, v
            yield from walk(v, f"{path}.{k}")
    elif isinstance(x, list):
        for i, v in enumerate(x):
            yield path, i, v
            yield from walk(v, f"{path}[{i}]")


# ---------------------------------------------------------------------------
# project dependencies
# ---------------------------------------------------------------------------
def norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def project_deps(root: Path) -> dict[str, str]:
    """normalised name -> specifier string, from pyproject.toml (or the fallback list)."""
    pp = root / "pyproject.toml"
    if pp.exists():
        import tomllib

        deps = tomllib.loads(pp.read_text()).get("project", {}).get("dependencies", [])
        out = {}
        for d in deps:
            m = re.match(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(\[[^\]]*\])?\s*([^;]*)", d)
            if m:
                out[norm(m.group(1))] = m.group(3).strip()
        if out:
            return out
    return {norm(d): "" for d in FALLBACK_DEPS}


def pins(reqs: Iterable[str]) -> dict[str, str]:
    out = {}
    for r in reqs:
        r = r.split("#", 1)[0].strip()
        m = re.match(r"^([A-Za-z0-9][A-Za-z0-9._-]*)(\[[^\]]*\])?\s*==\s*([^\s;]+)", r)
        if m:
            out[norm(m.group(1))] = m.group(3)
        elif r:
            out[norm(re.split(r"[\s\[<>=!~;]", r, maxsplit=1)[0])] = ""
    return out


def pip_packages(pip: Any) -> list[str]:
    """The package list of a runtime_env `pip` field (list, or dict with `packages`)."""
    if isinstance(pip, dict):
        pip = pip.get("packages")
    if isinstance(pip, list):
        return [str(p) for p in pip]
    return []


def check_pins_cover(what: str, have: dict[str, str], need: dict[str, str], skip: set[str] = frozenset()) -> list[str]:
    from packaging.specifiers import SpecifierSet
    from packaging.version import Version

    problems = []
    for name, spec in need.items():
        if name in skip:
            continue
        if name not in have:
            problems.append(f"{what}: project dependency {name!r} missing")
            continue
        if not have[name]:
            problems.append(f"{what}: {name!r} is not pinned (==)")
            continue
        if spec and Version(have[name].split("+")[0]) not in SpecifierSet(spec):
            problems.append(f"{what}: {name}=={have[name]} outside the project's {spec!r}")
    return problems


# ---------------------------------------------------------------------------
# per-kind checks
# ---------------------------------------------------------------------------
def _containers(pod_template: dict) -> list[dict]:
    return ((pod_template or {}).get("spec") or {}).get("containers") or []


def check_ray_cluster_spec(where: str, spec: dict) -> list[str]:
    problems = []
    if str(spec.get("rayVersion")) != RAY_VERSION:
        problems.append(f"{where}: rayVersion {spec.get('rayVersion')!r} != {RAY_VERSION!r}")
    head = spec.get("headGroupSpec") or {}
    groups = spec.get("workerGroupSpecs") or []
    all_containers = _containers(head.get("template")) + [c for g in groups for c in _containers(g.get("template"))]
    problems += _check_auth(where, spec, all_containers)
    problems += _check_gpu_groups(where, groups)
    if not spec.get("enableInTreeAutoscaling"):
        problems.append(f"{where}: enableInTreeAutoscaling is not true")
    problems += _check_pods(where, [head] + groups, all_containers)
    return problems


def _check_auth(where: str, spec: dict, all_containers: list[dict]) -> list[str]:
    """Token auth on: authOptions.mode, or RAY_AUTH_MODE=token on every container; no container
    setting RAY_AUTH_MODE to anything else."""
    problems = []
    token_by_env = all_containers and all(
        any(e.get("name") == "RAY_AUTH_MODE" and e.get("value") == "token" for e in c.get("env") or [])
        for c in all_containers
    )
    if (spec.get("authOptions") or {}).get("mode") != "token" and not token_by_env:
        problems.append(
            f"{where}: token auth off (need authOptions.mode: token or RAY_AUTH_MODE=token on every container)"
        )
    for c in all_containers:
        for e in c.get("env") or []:
            if e.get("name") == "RAY_AUTH_MODE" and e.get("value") != "token":
                problems.append(f"{where}: container {c.get('name')} sets RAY_AUTH_MODE={e.get('value')}")
    return problems


def _check_gpu_groups(where: str, groups: list[dict]) -> list[str]:
    """A worker group requests a GPU in its limits, and every such group can autoscale."""
    problems = []
    gpu_groups = []
    for g in groups:
        for c in _containers(g.get("template")):
            lim = (c.get("resources") or {}).get("limits") or {}
            if int(lim.get("nvidia.com/gpu", 0) or 0) >= 1:
                gpu_groups.append(g)
                break
    if not gpu_groups:
        problems.append(f"{where}: no worker group requests nvidia.com/gpu in its limits")
    for g in gpu_groups:
        if not int(g.get("maxReplicas", 0) or 0) > int(g.get("minReplicas", 0) or 0):
            problems.append(f"{where}: GPU group {g.get('groupName')} cannot autoscale (maxReplicas <= minReplicas)")
    return problems


def _check_pods(where: str, parts: list[dict], all_containers: list[dict]) -> list[str]:
    """Every pod runs as non-root; every container's image is pinned to a tag other than latest."""
    problems = []
    for part in parts:
        sc = ((part.get("template") or {}).get("spec") or {}).get("securityContext") or {}
        if not sc.get("runAsNonRoot"):
            problems.append(f"{where}: pod of {part.get('groupName', 'head')} lacks runAsNonRoot")
    for c in all_containers:
        if not str(c.get("image", "")).count(":") or str(c.get("image")).endswith(":latest"):
            problems.append(f"{where}: container {c.get('name')} image not pinned to a tag")
    return problems


def check_kuberay(where: str, doc: dict, root: Path) -> list[str]:
    kind = doc.get("kind")
    if doc.get("apiVersion") != "ray.io/v1":
        return [f"{where}: {kind} apiVersion {doc.get('apiVersion')!r} != 'ray.io/v1'"]
    spec = doc.get("spec") or {}
    if kind == "RayCluster":
        return check_ray_cluster_spec(where, spec)
    if kind == "RayJob":
        problems = check_ray_cluster_spec(where, spec.get("rayClusterSpec") or {})
        if spec.get("shutdownAfterJobFinishes") is not True:
            problems.append(f"{where}: RayJob without shutdownAfterJobFinishes: true")
        ep = str(spec.get("entrypoint", ""))
        if not re.match(r"^\s*ghostsearch\s+(compare|search)\s", ep):
            problems.append(f"{where}: entrypoint is not `ghostsearch compare|search ...`: {ep!r}")
        if "out=" not in ep:
            problems.append(f"{where}: entrypoint sets no out= (results would land in the pod)")
        # the job needs the project's dependencies: from the image or the runtime env
        renv = yaml.safe_load(spec.get("runtimeEnvYAML") or "") or {}
        images = [
            c.get("image", "")
            for g in [spec.get("rayClusterSpec", {}).get("headGroupSpec", {})]
            + spec.get("rayClusterSpec", {}).get("workerGroupSpecs", [])
            for c in _containers(g.get("template"))
        ]
        if not (images and all("ghostsearch" in i for i in images)):
            problems += check_pins_cover(
                f"{where} runtimeEnvYAML", pins(pip_packages(renv.get("pip"))), project_deps(root), NOT_IN_RUNTIME_ENV
            )
        return problems
    return [f"{where}: unexpected kind {kind!r}"]


def check_launcher(where: str, doc: dict) -> list[str]:
    import jsonschema
    import ray

    problems = []
    schema = json.loads((Path(ray.__file__).parent / "autoscaler" / "ray-schema.json").read_text())
    try:
        jsonschema.validate(doc, schema)
    except jsonschema.ValidationError as e:
        problems.append(f"{where}: not a valid cluster-launcher config: {e.message}")
    docker = doc.get("docker") or {}
    if not (docker.get("image") or docker.get("worker_image")):
        problems.append(f"{where}: no docker image")
    types = doc.get("available_node_types") or {}
    head_type = doc.get("head_node_type")
    if head_type not in types:
        problems.append(f"{where}: head_node_type {head_type!r} not in available_node_types")
    gpu = [n for n, t in types.items() if n != head_type and float((t.get("resources") or {}).get("GPU", 0)) >= 1]
    if not gpu:
        problems.append(f"{where}: no worker node type with resources.GPU >= 1")
    for n in gpu:
        t = types[n]
        if not int(t.get("max_workers", doc.get("max_workers", 0))) > int(t.get("min_workers", 0)):
            problems.append(f"{where}: GPU node type {n} cannot autoscale")
    for key in ("head_start_ray_commands", "worker_start_ray_commands"):
        cmds = " ".join(doc.get(key) or [])
        if "RAY_AUTH_MODE=token" not in cmds:
            problems.append(f"{where}: {key} do not set RAY_AUTH_MODE=token")
        if "ray start" not in cmds:
            problems.append(f"{where}: {key} do not run `ray start`")
    head_cmds = " ".join(doc.get("head_start_ray_commands") or [])
    if "--dashboard-host=0.0.0.0" in head_cmds or "--dashboard-host 0.0.0.0" in head_cmds:
        problems.append(f"{where}: dashboard bound to 0.0.0.0 (use 127.0.0.1 + `ray dashboard`)")
    if not any("auth_token" in str(k) for k in (doc.get("file_mounts") or {})):
        problems.append(f"{where}: the auth token is not file-mounted onto the nodes")
    return problems


def check_runtime_env(where: str, doc: dict, root: Path) -> list[str]:
    from ray.runtime_env import RuntimeEnv

    problems = []
    try:
        RuntimeEnv(**doc)
    except Exception as e:  # noqa: BLE001 - any validation error is a problem to report
        problems.append(f"{where}: Ray rejects this runtime_env: {e}")
    have = pins(pip_packages(doc.get("pip")))
    if "ray" in have:
        problems.append(f"{where}: lists ray (a job must use the cluster's Ray)")
    problems += check_pins_cover(where, have, project_deps(root), NOT_IN_RUNTIME_ENV)
    env = doc.get("env_vars") or {}
    for k, v in env.items():
        if not isinstance(v, str):
            problems.append(f"{where}: env_vars.{k} must be a string, got {type(v).__name__}")
    if "HF_HUB_OFFLINE" not in env:
        problems.append(f"{where}: env_vars lack HF_HUB_OFFLINE")
    if "working_dir" in doc:
        problems.append(f"{where}: working_dir belongs on the command line (--working-dir .)")
    return problems


def check_runtime_env_matches_image(where: str, doc: dict, root: Path) -> list[str]:
    """Every pin equals the image's (lock file; torch: the Dockerfile's TORCH_VERSION), so on
    the ghostsearch image Ray's pip step installs nothing."""
    image: dict[str, str] = {}
    lock = root / "docker" / "requirements.lock.txt"
    if lock.exists():
        image.update(pins(lock.read_text().splitlines()))
    df = root / "docker" / "Dockerfile"
    if df.exists():
        m = re.search(r"(?m)^ARG TORCH_VERSION=(\S+)", df.read_text())
        if m:
            image["torch"] = m.group(1)
    problems = []
    for name, v in pins(pip_packages(doc.get("pip"))).items():
        if name in image and image[name] != v:
            problems.append(f"{where}: {name}=={v} but the image has {name}=={image[name]}")
    return problems


def check_grafana(where: str, doc: dict) -> list[str]:
    exprs = []

    def collect(panels):
        for p in panels or []:
            exprs.extend(t.get("expr", "") for t in p.get("targets") or [])
            collect(p.get("panels"))

    collect(doc.get("panels"))
    text = "\n".join(exprs)
    problems = []
    if not exprs:
        problems.append(f"{where}: no panel queries")
    for m in METRICS:
        if f"ray_{m}" not in text:
            problems.append(f"{where}: no panel queries ray_{m}")
    for name in set(re.findall(r"\b(ghostsearch_\w+)", text)):
        if not re.search(rf"\bray_{name}\b", text):
            problems.append(f"{where}: {name} used without Ray's ray_ prefix")
    return problems


def exported_names(grafana_doc: dict) -> set[str]:
    """The ray_ghostsearch_* series a Grafana dashboard queries."""
    return set(re.findall(r"\b(ray_ghostsearch_\w+)", json.dumps(grafana_doc)))


def check_secrets_in_doc(where: str, doc: Any) -> list[str]:
    problems = []
    for path, k, v in walk(doc):
        if (
            isinstance(k, str)
            and SECRET_KEY.search(k)
            and isinstance(v, (str, int))
            and not isinstance(v, bool)
            and not SAFE_SECRET_VALUE.search(str(v))
        ):
            problems.append(f"{where}: literal secret-like value at {path}.{k}")
        if (
            isinstance(v, dict)
            and isinstance(v.get("name"), str)
            and SECRET_ENV.search(v["name"])
            and "value" in v
            and not SAFE_SECRET_VALUE.search(str(v["value"]))
        ):
            problems.append(f"{where}: env {v['name']} has a literal value (use valueFrom/secretKeyRef)")
        if isinstance(k, str) and k == "env_vars" and isinstance(v, dict):
            for ek, ev in v.items():
                if SECRET_ENV.search(str(ek)) and not SAFE_SECRET_VALUE.search(str(ev)):
                    problems.append(f"{where}: env_vars.{ek} holds a literal secret")
    return problems


def check_secrets_in_text(root: Path) -> list[str]:
    problems = []
    for d in ("cluster", "configs", "docker"):
        base = root / d
        if not base.is_dir():
            continue
        for p in sorted(base.rglob("*")):
            if not p.is_file() or p.stat().st_size > 2_000_000:
                continue
            try:
                text = p.read_text()
            except UnicodeDecodeError:
                continue
            for rx, what in SECRET_TEXT:
                if rx.search(text):
                    problems.append(f"{rel(root, p)}: contains what looks like a {what}")
            for m in re.finditer(r"(?im)^\s*(?:ENV|ARG)\s+(\w+)\s*=\s*(\S+)", text):
                if SECRET_ENV.search(m.group(1)) and not SAFE_SECRET_VALUE.search(m.group(2)):
                    problems.append(f"{rel(root, p)}: {m.group(1)} baked into an image")
    return problems


def check_dockerfile(root: Path) -> list[str]:
    p = root / "docker" / "Dockerfile"
    if not p.exists():
        return ["docker/Dockerfile missing"]
    text = p.read_text()
    problems = []
    lines = [ln.strip() for ln in text.splitlines()]
    users = [ln.split(None, 1)[1] for ln in lines if ln.upper().startswith("USER ")]
    if not users or users[-1].split(":")[0] in ("root", "0"):
        problems.append("docker/Dockerfile: final USER is root or unset")
    elif not users[-1].split(":")[0].isdigit():
        problems.append("docker/Dockerfile: final USER not numeric (runAsNonRoot cannot verify it)")
    if not re.search(r"(?m)^HEALTHCHECK\s", text):
        problems.append("docker/Dockerfile: no HEALTHCHECK")
    if not re.search(r"torch==\$\{?TORCH_VERSION", text) or not re.search(r"ARG TORCH_VERSION=\d", text):
        problems.append("docker/Dockerfile: torch not pinned (ARG TORCH_VERSION + torch==)")
    if re.search(r"(?m)^FROM\s+\S+:latest\b", text) or re.search(r"(?m)^ARG \w*IMAGE=\S+:latest", text):
        problems.append("docker/Dockerfile: base image uses :latest")
    if not (root / ".dockerignore").exists():
        problems.append(".dockerignore missing")
    else:
        ignored = {ln.strip().strip("/") for ln in (root / ".dockerignore").read_text().splitlines()}
        for need in (".venv", ".git", "runs"):
            if need not in ignored:
                problems.append(f".dockerignore does not exclude {need}")
    lock = root / "docker" / "requirements.lock.txt"
    if lock.exists():
        have = pins(lock.read_text().splitlines())
        problems += check_pins_cover("docker/requirements.lock.txt", have, project_deps(root), {"torch"})
        if have.get("ray") != RAY_VERSION:
            problems.append(f"docker/requirements.lock.txt: ray=={have.get('ray')} != {RAY_VERSION}")
    return problems


def check_configs(where: str, doc: Any) -> list[str]:
    problems = []
    for _path, k, v in walk(doc):
        if k == "trust_remote_code" and v is True:
            problems.append(f"{where}: sets trust_remote_code: true")
    return problems


def referenced_configs(root: Path) -> dict[str, list[str]]:
    """configs/*.yaml named in cluster/ files -> where."""
    refs: dict[str, list[str]] = {}
    for p in sorted((root / "cluster").rglob("*")) if (root / "cluster").is_dir() else []:
        if p.is_file() and p.suffix in (".yaml", ".yml", ".md", ".json"):
            for m in re.finditer(r"\bconfigs/([\w.-]+\.ya?ml)\b", p.read_text()):
                refs.setdefault(m.group(1), []).append(rel(root, p))
    return refs


# ---------------------------------------------------------------------------
# everything
# ---------------------------------------------------------------------------
def all_problems(root: Path) -> list[str]:
    root = Path(root)
    docs, problems = parse_all(root)
    seen_kinds: set[str] = set()
    for p, ds in docs.items():
        where = rel(root, p)
        under_cluster = where.startswith("cluster" + os.sep)
        for d in ds:
            problems += check_secrets_in_doc(where, d)
            if not isinstance(d, dict):
                if under_cluster:
                    problems.append(f"{where}: top level is not a mapping")
                continue
            if where.startswith("configs" + os.sep):
                problems += check_configs(where, d)
                continue
            if d.get("kind") in ("RayCluster", "RayJob"):
                seen_kinds.add(d["kind"])
                problems += check_kuberay(where, d, root)
            elif "available_node_types" in d:
                seen_kinds.add("launcher")
                problems += check_launcher(where, d)
            elif p.name.startswith("runtime_env"):
                seen_kinds.add("runtime_env")
                problems += check_runtime_env(where, d, root)
                problems += check_runtime_env_matches_image(where, d, root)
            elif "panels" in d:
                seen_kinds.add("grafana")
                problems += check_grafana(where, d)
    for kind in ("RayCluster", "RayJob", "launcher", "runtime_env", "grafana"):
        if kind not in seen_kinds:
            problems.append(f"cluster/: no {kind} file found")
    problems += check_secrets_in_text(root)
    problems += check_dockerfile(root)
    if not (root / "cluster" / "README.md").exists():
        problems.append("cluster/README.md missing")
    else:
        readme = (root / "cluster" / "README.md").read_text()
        for m in set(re.findall(r"\b((?:cluster|docker)/[\w./-]+\.(?:ya?ml|json|sh|txt))\b", readme)):
            if not (root / m).exists():
                problems.append(f"cluster/README.md names {m}, which does not exist")
    return problems
