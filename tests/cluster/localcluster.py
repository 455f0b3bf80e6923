"""A real two-node Ray cluster on one machine, for the multi-node tests.

Each node is its own ``ray start --block`` process tree with its own node id,
node IP (loopback range: head 127.0.0.2, worker 127.0.0.3; dashboard and
job server on 127.0.0.1), temp dir and
ports.  Token authentication is on (``RAY_AUTH_MODE=token``) with a fresh
random token kept in a 0600 file inside the cluster's temp dir and handed to
every Ray process and client through ``RAY_AUTH_TOKEN_PATH`` -- never
``~/.ray/auth_token``, never a command line.

Everything this module starts carries a marker environment variable with a
per-cluster random value; cleanup kills exactly the processes that carry it
(by pid), so nothing else on the machine is touched and no ``ray stop`` is
ever run.

Jobs are submitted with the real ``ray job submit`` CLI to the head's job
server; the dashboard REST API, the state API and the Prometheus metrics
export endpoints are read over plain HTTP with the bearer token.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable

# `ray start --node-ip-address=127.0.0.1` is rewritten by Ray to the machine's
# routable address (services.resolve_ip_for_localhost), so the nodes take
# other loopback addresses; the dashboard/job server binds to 127.0.0.1.
HEAD_IP = "127.0.0.1"  # dashboard + job server (--dashboard-host)
HEAD_NODE_IP = "127.0.0.2"
WORKER_IP = "127.0.0.3"
MARKER_VAR = "GHOSTSEARCH_TEST_CLUSTER"
TERMINAL_JOB_STATES = {"SUCCEEDED", "FAILED", "STOPPED"}

# Fast failure detection and metrics export, so a test sees a dead node and a
# custom metric within seconds instead of the production defaults (~30 s / 10 s).
START_ATTEMPTS = 3  # of a worker node whose `ray start` timed out waiting for the GCS

FAST_RAY_ENV = {
    "RAY_health_check_initial_delay_ms": "1000",
    "RAY_health_check_period_ms": "1000",
    "RAY_health_check_timeout_ms": "1000",
    "RAY_health_check_failure_threshold": "3",
    "RAY_metrics_report_interval_ms": "1000",
    "RAY_USAGE_STATS_ENABLED": "0",
}


def free_port(host: str) -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def loopback_alias_works(ip: str = WORKER_IP) -> bool:
    """True when this kernel routes the whole 127/8 to lo (Linux does)."""
    try:
        with socket.socket() as s:
            s.bind((ip, 0))
        return True
    except OSError:
        return False


# --------------------------------------------------------------------------
# process bookkeeping (/proc scan on the marker; Linux only)
# --------------------------------------------------------------------------
def _environ(pid: int) -> dict[str, str]:
    try:
        raw = Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return {}
    out = {}
    for item in raw.split(b"\0"):
        k, sep, v = item.partition(b"=")
        if sep:
            out[k.decode(errors="replace")] = v.decode(errors="replace")
    return out


def _cmdline(pid: int) -> list[str]:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return []
    return [a.decode(errors="replace") for a in raw.split(b"\0") if a]


def marked_pids(marker_value: str) -> list[int]:
    """Pids of live processes whose environment carries our marker value."""
    me = os.getpid()
    pids = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit() or int(d.name) == me:
            continue
        if _environ(int(d.name)).get(MARKER_VAR, "").startswith(marker_value):
            pids.append(int(d.name))
    return pids


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # a zombie is dead for our purposes
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


def kill_pids(pids: Iterable[int], grace_s: float = 5.0) -> None:
    pids = [p for p in pids if _alive(p)]
    for p in pids:
        try:
            os.kill(p, signal.SIGTERM)
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline and any(_alive(p) for p in pids):
        time.sleep(0.1)
    for p in pids:
        if _alive(p):
            try:
                os.kill(p, signal.SIGKILL)
            except ProcessLookupError:
                pass


# --------------------------------------------------------------------------
# the cluster
# --------------------------------------------------------------------------
@dataclass
class Node:
    name: str
    ip: str
    temp_dir: Path
    marker: str
    metrics_port: int
    proc: subprocess.Popen | None = None
    log: Path | None = None

    def pids(self) -> list[int]:
        return marked_pids(self.marker)

    def raylet_pid(self) -> int:
        for pid in self.pids():
            argv = _cmdline(pid)
            if argv and os.path.basename(argv[0]) == "raylet":
                return pid
        raise RuntimeError(f"no raylet found for node {self.name}")


@dataclass
class LocalCluster:
    root: Path
    token_path: Path
    marker: str
    gcs_port: int
    dashboard_port: int
    python_bin: Path
    nodes: list[Node] = field(default_factory=list)
    extra_env: dict[str, str] = field(default_factory=dict)

    # -- addresses --------------------------------------------------------
    @property
    def gcs_address(self) -> str:
        return f"{HEAD_NODE_IP}:{self.gcs_port}"

    @property
    def dashboard_url(self) -> str:
        return f"http://{HEAD_IP}:{self.dashboard_port}"

    def token(self) -> str:
        return self.token_path.read_text().strip()

    # -- environment ------------------------------------------------------
    def env(self, marker_suffix: str = "client") -> dict[str, str]:
        """Environment for anything we run against this cluster."""
        env = dict(os.environ)
        # never pick up a developer's cluster, token or address by accident
        for k in ("RAY_ADDRESS", "RAY_AUTH_TOKEN", "RAY_JOB_HEADERS"):
            env.pop(k, None)
        env.update(FAST_RAY_ENV)
        env.update(self.extra_env)
        env["RAY_AUTH_MODE"] = "token"
        env["RAY_AUTH_TOKEN_PATH"] = str(self.token_path)
        env["PATH"] = f"{self.python_bin.parent}{os.pathsep}{env.get('PATH', '')}"
        env[MARKER_VAR] = f"{self.marker}-{marker_suffix}"
        return env

    def ray_cli(self) -> list[str]:
        ray = self.python_bin.parent / "ray"
        return [str(ray)] if ray.exists() else [str(self.python_bin), "-m", "ray.scripts.scripts"]

    # -- lifecycle ----------------------------------------------------------
    def _start_node(self, node: Node, head: bool, num_cpus: int) -> None:
        node.temp_dir.mkdir(parents=True, exist_ok=True)
        # a stale pointer file would make `ray start` believe a cluster runs
        (node.temp_dir / "ray_current_cluster").unlink(missing_ok=True)
        ip = node.ip
        args = self.ray_cli() + [
            "start",
            "--block",
            "--disable-usage-stats",
            f"--node-ip-address={ip}",
            f"--temp-dir={node.temp_dir}",
            f"--num-cpus={num_cpus}",
            "--num-gpus=0",
            f"--object-store-memory={100 * 1024 * 1024}",
            f"--metrics-export-port={node.metrics_port}",
            f"--dashboard-agent-listen-port={free_port(ip)}",
            f"--dashboard-agent-grpc-port={free_port(ip)}",
            f"--runtime-env-agent-port={free_port(ip)}",
            f"--node-manager-port={free_port(ip)}",
            f"--object-manager-port={free_port(ip)}",
        ]
        if head:
            args += [
                "--head",
                f"--port={self.gcs_port}",
                "--include-dashboard=true",
                f"--dashboard-host={HEAD_IP}",
                f"--dashboard-port={self.dashboard_port}",
                f"--ray-client-server-port={free_port(HEAD_NODE_IP)}",
            ]
        else:
            args += [f"--address={self.gcs_address}"]
        node.log = self.root / f"{node.name}.log"
        with open(node.log, "wb") as log:
            node.proc = subprocess.Popen(
                args,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=self.env(node.name),
                cwd=self.root,
                start_new_session=True,
            )
        self.nodes.append(node)

    def start(self, num_cpus: int = 2, timeout_s: float = 90) -> "LocalCluster":
        self.token_path.write_text(secrets.token_hex(32))
        self.token_path.chmod(0o600)
        head = Node("head", HEAD_NODE_IP, self.root / "h", self.marker + "-head", free_port(HEAD_NODE_IP))
        self._start_node(head, head=True, num_cpus=num_cpus)
        self.wait_dashboard(timeout_s)
        # `ray start` of a worker gives up when the GCS does not answer within its fixed 30 s
        # (ray/_private/node.py: "timed out during startup"); on a loaded 2-core CI machine that
        # happens now and then. Such a worker never joined: end its processes and start it again.
        for attempt in range(1, START_ATTEMPTS + 1):
            worker = Node("worker", WORKER_IP, self.root / f"w{attempt}", self.marker + "-worker", free_port(WORKER_IP))
            self._start_node(worker, head=False, num_cpus=num_cpus)
            try:
                self.wait_nodes(2, timeout_s)
                return self
            except RuntimeError:
                if attempt == START_ATTEMPTS or not self._timed_out_at_start(worker):
                    raise
                print(f"worker `ray start` timed out at startup (attempt {attempt}); again", file=sys.stderr)
                kill_pids(marked_pids(worker.marker))
                self._wait_alive_at_most(1, timeout_s)  # its raylet, if it had registered, is seen dead
                self.nodes.remove(worker)
                assert worker.log is not None
                worker.log.rename(worker.log.with_name(f"worker-attempt{attempt}.log"))
        return self

    @staticmethod
    def _timed_out_at_start(node: "Node") -> bool:
        exited = node.proc is not None and node.proc.poll() is not None
        text = node.log.read_text(errors="replace") if node.log and node.log.exists() else ""
        return exited and "timed out during startup" in text

    def stop(self) -> None:
        """Stop exactly what this cluster started, by pid, then remove its dir."""
        t0 = time.monotonic()
        for node in reversed(self.nodes):
            if node.proc and node.proc.poll() is None:
                node.proc.send_signal(signal.SIGTERM)  # `ray start --block` tears down its node
        for node in reversed(self.nodes):
            if node.proc:
                try:
                    node.proc.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    node.proc.kill()
                    node.proc.wait(timeout=10)
        t1 = time.monotonic()
        # stragglers: workers, agents, job drivers, CLI clients carrying the marker
        for _ in range(3):
            left = marked_pids(self.marker)
            if not left:
                break
            kill_pids(left)
        t2 = time.monotonic()
        shutil.rmtree(self.root, ignore_errors=True)
        self.stop_timings = (t1 - t0, t2 - t1, time.monotonic() - t2)
        print(
            f"cluster stop: nodes {t1 - t0:.1f}s, stragglers {t2 - t1:.1f}s, rmtree {time.monotonic() - t2:.1f}s",
            file=sys.stderr,
        )

    def __enter__(self) -> "LocalCluster":
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def logs_tail(self, n: int = 60) -> str:
        out = []
        for node in self.nodes:
            if node.log and node.log.exists():
                lines = node.log.read_text(errors="replace").splitlines()[-n:]
                out.append(f"--- {node.name} ---\n" + "\n".join(lines))
        return "\n".join(out)

    # -- HTTP ---------------------------------------------------------------
    def http_get(self, url: str, auth: bool = True, timeout: float = 10):
        req = urllib.request.Request(url)
        if auth:
            req.add_header("Authorization", f"Bearer {self.token()}")
        with urllib.request.urlopen(req, timeout=timeout) as r:
            body = r.read().decode()
            ctype = r.headers.get("Content-Type", "")
        return json.loads(body) if "json" in ctype else body

    def http_status(self, url: str, token: str | None) -> int:
        req = urllib.request.Request(url)
        if token is not None:
            req.add_header("Authorization", f"Bearer {token}")
        try:
            with urllib.request.urlopen(req, timeout=10) as r:
                return r.status
        except urllib.error.HTTPError as e:
            return e.code

    def wait_dashboard(self, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        last = None
        while time.monotonic() < deadline:
            if self.nodes[0].proc.poll() is not None:
                raise RuntimeError("head `ray start` exited:\n" + self.logs_tail())
            try:
                self.http_get(f"{self.dashboard_url}/api/version", timeout=3)
                return
            except Exception as e:  # noqa: BLE001 - retry until the deadline
                last = e
            time.sleep(0.5)
        raise TimeoutError(f"dashboard not up: {last}\n{self.logs_tail()}")

    def alive_nodes(self) -> list[dict]:
        data = self.http_get(f"{self.dashboard_url}/api/v0/nodes?limit=100")
        rows = data["data"]["result"]["result"]
        return [r for r in rows if r.get("state") == "ALIVE"]

    def wait_nodes(self, n: int, timeout_s: float) -> list[dict]:
        deadline = time.monotonic() + timeout_s
        alive: list[dict] = []
        while time.monotonic() < deadline:
            for node in self.nodes:
                if node.proc.poll() is not None:
                    raise RuntimeError(f"`ray start` of {node.name} exited:\n" + self.logs_tail())
            try:
                alive = self.alive_nodes()
                if len(alive) == n:
                    return alive
            except Exception:  # noqa: BLE001
                pass
            time.sleep(0.5)
        raise TimeoutError(f"{len(alive)} of {n} nodes alive\n{self.logs_tail()}")

    def _wait_alive_at_most(self, n: int, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            try:
                if len(self.alive_nodes()) <= n:
                    return
            except Exception:  # noqa: BLE001 - retry until the deadline
                pass
            time.sleep(0.5)
        raise TimeoutError(f"more than {n} nodes still alive\n{self.logs_tail()}")

    def list_actors(self, namespace: str | None = None) -> list[dict]:
        data = self.http_get(f"{self.dashboard_url}/api/v0/actors?limit=1000&detail=1")
        rows = data["data"]["result"]["result"]
        if namespace is not None:
            rows = [r for r in rows if r.get("ray_namespace") == namespace]
        return rows

    def list_jobs(self) -> list[dict]:
        return self.http_get(f"{self.dashboard_url}/api/jobs/")

    def metrics_text(self) -> str:
        """Concatenated Prometheus exposition text of every node's export port."""
        out = []
        for node in self.nodes:
            try:
                out.append(self.http_get(f"http://{node.ip}:{node.metrics_port}/metrics", auth=False))
            except Exception:  # noqa: BLE001 - a dead node exports nothing
                pass
        return "\n".join(out)

    # -- jobs ---------------------------------------------------------------
    def submit(
        self,
        entrypoint: list[str],
        working_dir: Path,
        runtime_env: dict | None = None,
        submission_id: str | None = None,
    ) -> str:
        """``ray job submit --no-wait`` to the head's job server; returns the submission id."""
        submission_id = submission_id or f"gs-test-{secrets.token_hex(4)}"
        args = self.ray_cli() + [
            "job",
            "submit",
            "--no-wait",
            f"--address={self.dashboard_url}",
            f"--submission-id={submission_id}",
            f"--working-dir={Path(working_dir).resolve()}",
        ]
        if runtime_env is not None:
            args.append(f"--runtime-env-json={json.dumps(runtime_env)}")
        args += ["--", *entrypoint]
        r = subprocess.run(args, env=self.env(), capture_output=True, text=True, timeout=120, cwd=self.root)
        if r.returncode != 0:
            raise RuntimeError(f"ray job submit failed ({r.returncode}):\n{r.stdout}\n{r.stderr}")
        return submission_id

    def job_info(self, submission_id: str) -> dict:
        return self.http_get(f"{self.dashboard_url}/api/jobs/{submission_id}")

    def job_logs(self, submission_id: str) -> str:
        r = subprocess.run(
            self.ray_cli() + ["job", "logs", f"--address={self.dashboard_url}", submission_id],
            env=self.env(),
            capture_output=True,
            text=True,
            timeout=60,
        )
        return r.stdout + r.stderr

    def wait_job(
        self, submission_id: str, timeout_s: float, on_poll: Callable[[dict], None] | None = None, poll_s: float = 0.5
    ) -> dict:
        """Poll until the job is terminal; ``on_poll(info)`` runs each round while it is not."""
        deadline = time.monotonic() + timeout_s
        info: dict = {}
        while time.monotonic() < deadline:
            info = self.job_info(submission_id)
            if info.get("status") in TERMINAL_JOB_STATES:
                return info
            if on_poll is not None:
                on_poll(info)
            time.sleep(poll_s)
        raise TimeoutError(f"job {submission_id} not finished: {info}\n" + self.job_logs(submission_id))


def make_cluster(
    python_bin: str | os.PathLike = sys.executable, extra_env: dict[str, str] | None = None
) -> LocalCluster:
    """A cluster object with a short private root dir (unix socket paths must stay < 108 chars)."""
    root = Path(tempfile.mkdtemp(prefix="gsray-", dir="/tmp"))
    return LocalCluster(
        root=root,
        token_path=root / "auth_token",
        marker=f"gs{secrets.token_hex(6)}",
        gcs_port=free_port(HEAD_NODE_IP),
        dashboard_port=free_port(HEAD_IP),
        python_bin=Path(python_bin),
        extra_env=dict(extra_env or {}),
    )
