"""Run directories off the cluster: ``out=s3://bucket/prefix`` or ``out=gs://bucket/prefix``.

A run writes into a local staging directory and ``Staged.push()`` copies what changed to the URI
(after every cell and at the end), so a Ray job leaves its results in object storage, not on a
head pod's disk. Opening a URI first pulls what the URI has and the staging directory lacks: a
rerun resumes from the URI even after the staging directory is gone (a new pod).

Object storage is reached through ``pyarrow.fs`` (no extra dependency); credentials and endpoint
come from the usual environment (``AWS_ACCESS_KEY_ID``, ``AWS_ENDPOINT_URL``, ...; Google's
application default credentials). The staging directory is ``$GHOSTSEARCH_STAGING/<hash of the
URI>`` (default ``~/.cache/ghostsearch/staging``). A local or NFS ``out=`` is used as it is.
"""

from __future__ import annotations

import hashlib
import logging
import os
from pathlib import Path

from ghostsearch.core.errors import GhostsearchError

SCHEMES = ("s3://", "gs://", "gcs://")
log = logging.getLogger(__name__)


def is_remote(out: str) -> bool:
    return str(out).startswith(SCHEMES)


def staging_dir(uri: str) -> Path:
    root = Path(os.environ.get("GHOSTSEARCH_STAGING") or Path.home() / ".cache" / "ghostsearch" / "staging")
    name = uri.split("://", 1)[1].strip("/").replace("/", "_")[-60:]
    return root / f"{name}-{hashlib.sha256(uri.encode()).hexdigest()[:12]}"


def _filesystem(uri: str):
    import pyarrow.fs as pafs

    if uri.startswith("s3://") and os.environ.get("AWS_ENDPOINT_URL"):  # MinIO, moto, Ceph...
        endpoint = os.environ["AWS_ENDPOINT_URL"]
        fs = pafs.S3FileSystem(
            endpoint_override=endpoint.split("://")[-1],
            scheme="http" if endpoint.startswith("http://") else "https",
            region=os.environ.get("AWS_DEFAULT_REGION", "us-east-1"),
        )
        return fs, uri[len("s3://") :].rstrip("/")
    try:
        fs, path = pafs.FileSystem.from_uri(uri.replace("gcs://", "gs://", 1))
    except Exception as e:  # noqa: BLE001  (pyarrow raises ArrowInvalid/OSError with long messages)
        raise GhostsearchError(
            f"out={uri}: cannot open it ({str(e).splitlines()[0]}); check the URI and "
            "the credentials in the environment"
        ) from None
    return fs, path.rstrip("/")


class Staged:
    """A run directory staged locally for ``out=URI``; ``local`` is where the run writes."""

    def __init__(self, out: str):
        self.uri = str(out).rstrip("/")
        self.remote = is_remote(self.uri)
        self.local = staging_dir(self.uri) if self.remote else Path(out)
        self._pushed: dict[str, tuple[int, int]] = {}
        if self.remote:
            self.fs, self.root = _filesystem(self.uri)

    def _remote_files(self) -> dict[str, int]:
        import pyarrow.fs as pafs

        try:
            infos = self.fs.get_file_info(pafs.FileSelector(self.root, recursive=True, allow_not_found=True))
        except OSError as e:
            raise GhostsearchError(
                f"out={self.uri}: cannot list it ({str(e).splitlines()[0]}); check the bucket "
                "exists and the credentials allow listing"
            ) from None
        return {i.path[len(self.root) + 1 :]: i.size for i in infos if i.type == pafs.FileType.File}

    def pull(self) -> int:
        """Copy every file the URI has and the staging directory lacks; the number copied."""
        if not self.remote:
            return 0
        files = self._remote_files()
        if files and "config.yaml" not in files:
            raise GhostsearchError(
                f"{self.uri} holds files but no ghostsearch run (no config.yaml); choose another out="
            )
        n = 0
        for rel in files:
            dst = self.local / rel
            if dst.exists():
                continue
            dst.parent.mkdir(parents=True, exist_ok=True)
            tmp = dst.with_name(f".{dst.name}.pull")
            with self.fs.open_input_stream(f"{self.root}/{rel}") as src, open(tmp, "wb") as f:
                f.write(src.read())
            os.replace(tmp, dst)
            st = dst.stat()
            self._pushed[rel] = (st.st_size, st.st_mtime_ns)
            n += 1
        if n:
            log.info("pulled %d files from %s into %s", n, self.uri, self.local)
        return n

    def push(self) -> int:
        """Copy every file changed since the last push to the URI (temporary files skipped)."""
        if not self.remote or not self.local.is_dir():
            return 0
        n = 0
        for path in sorted(self.local.rglob("*")):
            if not path.is_file() or path.name.startswith(".") and path.name.endswith((".tmp", ".pull")):
                continue
            rel, st = path.relative_to(self.local).as_posix(), path.stat()
            if self._pushed.get(rel) == (st.st_size, st.st_mtime_ns):
                continue
            data = path.read_bytes()
            with self.fs.open_output_stream(f"{self.root}/{rel}") as f:
                f.write(data)
            self._pushed[rel] = (st.st_size, st.st_mtime_ns)
            n += 1
        if n:
            log.info("synced %d files to %s", n, self.uri)
        return n


def stage(out: str) -> Staged:
    """The run directory of ``out=``: for a URI, the staging directory, filled from the URI."""
    s = Staged(out)
    s.pull()
    return s
