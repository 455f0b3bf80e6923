"""tests/durations.json from a test run's JUnit XML: each test file's seconds (setup, call and teardown of
its tests, summed), which tests/conftest.py uses to start the longest files first under xdist. The order
of the run depends on it, never a result.

    python scripts/test-durations.py .ci/last/junit.xml     (after .ci/run, or TEST_JUNIT=... scripts/test.sh)
"""

from __future__ import annotations

import collections
import json
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def per_file(junit: Path) -> dict[str, int]:
    seconds: collections.Counter[str] = collections.Counter()
    for case in ET.parse(junit).iter("testcase"):
        module = [p for p in case.get("classname", "").split(".") if not p[:1].isupper()]  # drops a class name
        name = case.get("file") or "/".join(module) + ".py"
        seconds[name] += float(case.get("time") or 0)
    return {name: round(s) for name, s in sorted(seconds.items()) if round(s) >= 1 and (ROOT / name).is_file()}


if __name__ == "__main__":
    if len(sys.argv) != 2 or not Path(sys.argv[1]).is_file():
        sys.exit("usage: python scripts/test-durations.py JUNIT_XML (e.g. .ci/last/junit.xml, written by .ci/run)")
    table = per_file(Path(sys.argv[1]))
    (ROOT / "tests" / "durations.json").write_text(json.dumps(table, indent=0, sort_keys=True) + "\n")
    print(f"tests/durations.json: {len(table)} files, {sum(table.values())} s")
