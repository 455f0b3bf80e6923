"""out=s3://... against a real S3-compatible server on loopback (moto's server mode): a search's
run directory reaches the bucket, and a rerun after the local staging directory is deleted
resumes from the bucket (nothing scored twice)."""

from __future__ import annotations

import json
import shutil

import pytest

from ghostsearch.core.errors import GhostsearchError
from ghostsearch.rundir.remote import Staged, stage

moto_server = pytest.importorskip("moto.server")
boto3 = pytest.importorskip("boto3")


@pytest.fixture(scope="module")
def s3_server():
    server = moto_server.ThreadedMotoServer(ip_address="127.0.0.1", port=0)
    server.start()
    host, port = server.get_host_and_port()
    yield f"http://{host}:{port}"
    server.stop()


@pytest.fixture
def bucket(s3_server, monkeypatch, tmp_path):
    import uuid

    for k, v in {
        "AWS_ENDPOINT_URL": s3_server,
        "AWS_ACCESS_KEY_ID": "test",
        "AWS_SECRET_ACCESS_KEY": "test",
        "AWS_DEFAULT_REGION": "us-east-1",
        "GHOSTSEARCH_STAGING": str(tmp_path / "staging"),
    }.items():
        monkeypatch.setenv(k, v)
    name = f"gs-{uuid.uuid4().hex[:8]}"
    client = boto3.client("s3", endpoint_url=s3_server, region_name="us-east-1")
    client.create_bucket(Bucket=name)
    return name, client


def keys(client, bucket, prefix) -> set[str]:
    pages = client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix + "/")
    return {o["Key"][len(prefix) + 1 :] for p in pages for o in p.get("Contents", [])}


def test_push_pull_round_trip(bucket):
    name, client = bucket
    s = Staged(f"s3://{name}/run")
    assert s.remote and not s.local.exists()
    (s.local / "ledger").mkdir(parents=True)
    (s.local / "config.yaml").write_text("k: 3\n")
    (s.local / "ledger" / "journal-1.jsonl").write_text('{"a": 1}\n')
    (s.local / ".x.tmp").write_text("half-written")
    assert s.push() == 2 and s.push() == 0  # unchanged files are not sent again
    with open(s.local / "ledger" / "journal-1.jsonl", "a") as f:
        f.write('{"a": 2}\n')
    assert s.push() == 1
    assert keys(client, name, "run") == {"config.yaml", "ledger/journal-1.jsonl"}
    shutil.rmtree(s.local)
    again = stage(f"s3://{name}/run")
    assert (again.local / "ledger" / "journal-1.jsonl").read_text() == '{"a": 1}\n{"a": 2}\n'
    assert again.push() == 0  # what was pulled is not pushed back


def test_foreign_prefix_is_refused(bucket):
    name, client = bucket
    client.put_object(Bucket=name, Key="data/notes.txt", Body=b"not ours")
    with pytest.raises(GhostsearchError, match="no ghostsearch run"):
        stage(f"s3://{name}/data")
    assert keys(client, name, "data") == {"notes.txt"}


@pytest.mark.slow
def test_search_to_s3_and_resume_without_staging(bucket, tiny_model_dir, ray_local):
    from ghostsearch.config import load_config
    from ghostsearch.run.runner import search
    from ghostsearch.rundir import read_ledger

    name, client = bucket
    uri = f"s3://{name}/runs/quick"
    items = {
        "model": tiny_model_dir,
        "dtype": "fp32",
        "device": "cpu",
        "calibration.dataset": "lambada",
        "calibration.n_seq": 4,
        "calibration.seq_len": 32,
        "k": 2,
        "searcher": "greedy",
        "out": uri,
        "pool.actors": 1,
        "pool.dashboard": False,
    }
    cfg = load_config(None, [f"{k}={v}" for k, v in items.items()])
    first = search(cfg, progress=False)
    remote = keys(client, name, "runs/quick")
    assert {"config.yaml", "env.json", "result.json", "pool.json"} <= remote
    assert any(k.startswith("ledger/") and k.endswith(".parquet") for k in remote)
    body = client.get_object(Bucket=name, Key="runs/quick/result.json")["Body"].read()
    assert json.loads(body)["cells"] == json.loads(json.dumps(first["cells"]))

    staging = Staged(uri).local
    computed = sum(not r["cached"] for r in read_ledger(staging).to_pylist())
    shutil.rmtree(staging)  # a new pod: nothing local
    again = search(cfg, progress=False)
    (cell,) = again["cells"]
    assert again["cells"][cell]["removed"] == first["cells"][cell]["removed"]
    assert again["cells"][cell]["value"] == first["cells"][cell]["value"]
    rows = read_ledger(Staged(uri).local).to_pylist()
    assert sum(not r["cached"] for r in rows) == computed  # the rerun scored nothing: answered from the bucket
