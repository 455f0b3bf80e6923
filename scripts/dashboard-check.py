"""The dashboard check a user does by hand, in a headless browser (issue 38): start a search, read the
dashboard line it prints, get the token the way that line says (`ray get-auth-token`), open the page,
paste the token where the page asks, and screenshot the token prompt and the Actors view with the
search's scorers in it. Also checks the Jobs API answers with the token and refuses without it.

  python scripts/dashboard-check.py [--out docs/images] [--config configs/smollm2-quick.yaml]

Needs Playwright (`pip install playwright`, in any Python) and a Chromium (`apt-get install chromium`;
`--chromium PATH` elsewhere): neither is a project dependency, so this is a documented manual check,
not a test. The search runs in a temporary directory, with no HF_* variables, as a user's would.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=str(ROOT / "docs/images"))
    ap.add_argument("--config", default="configs/smollm2-quick.yaml")
    ap.add_argument("--chromium", default="/usr/bin/chromium")
    args = ap.parse_args()
    from playwright.sync_api import sync_playwright

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith("HF_")}
    bin_dir = ROOT / ".venv/bin" if (ROOT / ".venv/bin/ghostsearch").exists() else Path(sys.executable).parent
    with tempfile.TemporaryDirectory() as tmp:
        # greedy on the quick config: long enough (~1 min) to look at the dashboard while it runs
        cmd = [str(bin_dir / "ghostsearch"), "search", args.config, f"out={tmp}/run", "searcher=greedy"]
        proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        url, t0 = None, time.monotonic()
        assert proc.stderr is not None
        while url is None and time.monotonic() - t0 < 180:
            line = proc.stderr.readline()
            if not line:
                break
            m = re.search(r"Ray dashboard: (http://\S+)", line)
            if m:
                url = m.group(1)
                print("the run printed:", line.strip())
        if url is None:
            proc.kill()
            print("no dashboard line within 180 s", file=sys.stderr)
            return 1
        token = subprocess.run(
            [str(bin_dir / "ray"), "get-auth-token"], capture_output=True, text=True, env=env, timeout=60
        ).stdout.strip()
        print(f"ray get-auth-token: {len(token)} characters")
        for hdr in ({}, {"Authorization": f"Bearer {token}"}):
            try:
                with urllib.request.urlopen(urllib.request.Request(url + "/api/version", headers=hdr), timeout=30) as r:
                    print("/api/version", "with token" if hdr else "without token", "->", r.status)
            except urllib.error.HTTPError as e:
                print("/api/version", "with token" if hdr else "without token", "->", e.code)
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=args.chromium, args=["--no-sandbox"])
            page = browser.new_page(viewport={"width": 1400, "height": 900})
            page.goto(url, timeout=60_000)
            page.get_by_text("Authentication Token Required").wait_for(timeout=60_000)
            page.screenshot(path=str(out / "dashboard-token-prompt.png"))
            dialog = page.get_by_role("dialog")
            dialog.locator("input").first.fill(token)
            dialog.locator("input").first.press("Enter")
            page.get_by_text("Authentication Token Required").wait_for(state="hidden", timeout=30_000)
            page.goto(url + "/#/actors", timeout=60_000)
            page.get_by_text("Scorer", exact=False).first.wait_for(timeout=60_000)
            for _ in range(60):  # the actors are created first, then load the model: wait until they are ALIVE
                if page.get_by_text("ALIVE", exact=True).count() >= 2:
                    break
                time.sleep(2)
                page.reload()
            time.sleep(2)
            page.screenshot(path=str(out / "dashboard-actors.png"))
            text = page.inner_text("body")
            browser.close()
        print("actors view lists:", sorted(set(re.findall(r"\b(Broker|Scorer\w*)\b", text))))
        rc = proc.wait(timeout=900)
        print("search exit", rc, "; screenshots:", out / "dashboard-token-prompt.png", out / "dashboard-actors.png")
        return rc


if __name__ == "__main__":
    raise SystemExit(main())
