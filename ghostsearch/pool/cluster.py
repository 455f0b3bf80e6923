"""Joining Ray: the one place a driver connects.

``connect`` joins the cluster named by ``--address`` / ``$RAY_ADDRESS`` or starts a local Ray of this
run's own: every server bound to 127.0.0.1 (``loopback_only``), Ray's token auth left on, the
dashboard (when asked for) on loopback at the first free port from 8265, with one line saying how
to open it (``dashboard_note``), and a watcher that ends the local Ray's processes when the driver
ends however it ends (``reap_with_driver``). The checks a run makes before it writes anything:
``check_address`` (a Jobs API address is not a GCS address), ``check_reachable`` and
``check_local_capacity``. The pool's lifecycle is pool.py; a driver uses both through
``session.PoolSession``.
"""

from __future__ import annotations

import contextlib
import logging
import os

import ray

from ghostsearch.config import Config
from ghostsearch.core import interrupts
from ghostsearch.core.errors import GhostsearchError
from ghostsearch.pool.actors import NAMESPACE


def check_address(address: str | None) -> None:
    """An http(s) address is the Jobs API (dashboard, port 8265) users export for `ray job submit`;
    a driver joins the cluster at its GCS address instead. One line saying which to use."""
    if address and address.startswith(("http://", "https://")):
        host = address.split("://", 1)[1].split("/")[0].rsplit(":", 1)[0]
        raise GhostsearchError(
            f"{address} is the Ray Jobs (dashboard) address; submit with `ray job submit "
            f"--address {address} -- ghostsearch ...`, or run here with --address {host}:6379 "
            "(the GCS address; unset RAY_ADDRESS or set it to that)"
        )


def check_local_capacity(cfg: Config, address: str | None) -> None:
    """Before a run directory exists: a usable address, and a local pool that fits this machine's
    CPUs (and GPUs)."""
    check_address(address or os.environ.get("RAY_ADDRESS"))
    start_budget()  # a bad $GHOSTSEARCH_RAY_START_S: one line now, not after the run directory exists
    if (address or os.environ.get("RAY_ADDRESS")) and not ray.is_initialized():
        check_reachable(address or os.environ["RAY_ADDRESS"])
    if address or os.environ.get("RAY_ADDRESS") or cfg.pool.name or ray.is_initialized():
        return
    gpus = cfg.pool.gpus_per_actor or 0
    need_cpu = 0 if gpus else cfg.pool.actors * cfg.pool.threads
    have_gpu = _local_gpus()
    if cfg.pool.gpus_per_actor is None and have_gpu:
        return  # one GPU each: checked against the cluster once Ray is up
    if need_cpu > (os.cpu_count() or 1):
        raise GhostsearchError(
            f"pool of {cfg.pool.actors} scorers x {cfg.pool.threads} threads needs {need_cpu} CPUs "
            f"but this machine has {os.cpu_count()}; lower pool.actors / pool.threads"
        )
    if gpus * cfg.pool.actors > have_gpu:
        raise GhostsearchError(
            f"pool of {cfg.pool.actors} scorers needs {gpus * cfg.pool.actors:g} GPUs but this "
            f"machine has {have_gpu}; lower pool.actors or pool.gpus_per_actor"
        )


def _local_gpus() -> int:
    import torch

    return torch.cuda.device_count()


def connect(address: str | None = None, dashboard: bool = True, num_cpus: int | None = None) -> bool:
    """Connect to Ray. Returns True when this call started a local Ray (the caller stops it).
    Actor output reaches the driver (and so `ray job logs`)."""
    if ray.is_initialized():
        return False
    address = address or os.environ.get("RAY_ADDRESS")
    check_address(address)
    quiet_ray_banner()
    if address:
        check_reachable(address)
        busy_machine_settings()  # this driver's own waits for the cluster's GCS
        try:
            # a submitted job inherits the job's runtime env (working dir, env vars): add nothing
            ctx = ray.init(address=address, namespace=NAMESPACE, log_to_driver=True)
        except (ConnectionError, RuntimeError, ValueError) as e:
            raise GhostsearchError(
                f"cannot reach the Ray cluster at {address}: {str(e).splitlines()[0]}; "
                "check --address / RAY_ADDRESS and that the head is up"
            ) from None
        finally:
            interrupts.reinstall()  # ray.init replaced the SIGTERM handler
        if dashboard and getattr(ctx, "dashboard_url", None):  # the cluster's: it outlives this run
            log.info(dashboard_note(f"http://{ctx.dashboard_url}"))
        return False
    port = free_port(DASHBOARD_PORT) if dashboard else None  # never another run's dashboard port
    attempt, taken = 1, 0
    while True:
        try:
            ctx = _start_local(dashboard, port, num_cpus)
            break
        except DashboardPortTaken:  # another run's dashboard bound it between our check and ours (a busy machine)
            _end_leftovers()
            taken += 1
            if taken > PORT_TRIES:
                raise GhostsearchError(
                    f"the local Ray's dashboard found no free port from {DASHBOARD_PORT} ({PORT_TRIES} taken by "
                    "other runs while it started); set pool.dashboard=false, or rerun"
                ) from None
            port = free_port((port or DASHBOARD_PORT) + 1)
            log.warning(
                "the dashboard's port was taken by another run while Ray started; starting it again on %s", port
            )
            continue
        except (GcsUnreachable, RayletDied) as e:  # a start a busy machine can end: tried again, then one line
            _end_leftovers()
            attempt += 1
            gcs = isinstance(e, GcsUnreachable)
            what = (
                f"control process (GCS) did not answer its first connection ({e}; the machine is overloaded)"
                if gcs
                else f"raylet ended during its start ({e})"
            )
            if attempt > START_TRIES:
                raise GhostsearchError(
                    f"the local Ray did not start in {START_TRIES} tries, the last because its {what}; rerun when the "
                    "machine has room, or start one then with `RAY_worker_niceness=0 ray start --head` and join it "
                    "with --address"
                ) from None
            log.warning("the local Ray's %s; starting it again (try %d)", what, attempt)
    reap_with_driver()
    if dashboard and getattr(ctx, "dashboard_url", None):
        log.info(dashboard_note(f"http://{ctx.dashboard_url}"))
    return True


# Ray's waits that a busy machine outlasts (docs/reliability.md, "A busy machine"): RAY_<name> variables,
# read by the driver's core worker and inherited by every process of a local Ray; a variable the user set wins.
# Ray 2.60's defaults in brackets (src/ray/common/ray_config_def.h).
BUSY_MACHINE = {
    "RAY_gcs_rpc_server_reconnect_timeout_s": "600",  # [60] how long a raylet, worker or driver waits for a
    # GCS that does not answer before it exits ("Failed to connect to GCS within 60 seconds")
    "RAY_health_check_timeout_ms": "30000",  # [10000] the GCS's health check of a raylet: one check's timeout
    "RAY_health_check_failure_threshold": "20",  # [5] failed checks (3 s apart) before a raylet is declared dead
    "RAY_worker_register_timeout_seconds": "300",  # [60] a worker process (importing torch) to register
    "RAY_gcs_server_request_timeout_seconds": "300",  # [60] a GCS client's request
    "RAY_gcs_rpc_server_connect_timeout_s": "60",  # [5] a GCS client's first connection (the start's own:
    # "Failed to connect to GCS" when the just-started GCS answers late)
}
# The pool's priority: a raylet starts every worker process (the scorer actors and the broker) at its own niceness
# plus RAY_worker_niceness [15], so on a shared machine any nice-0 process outranks the whole pool ~28:1 (CFS
# weights 1024 against 36) and a busy machine starves the run. 0 for a local Ray: the raylet has the driver's
# niceness (it is the driver's child), so the pool runs at the priority of the command that started it (`nice -n 10
# ghostsearch ...`: nice-10 scorers; a plain start: nice 0). Read by the raylet when it starts (and from a job's or
# actor's runtime_env env_vars); a variable the user set wins. A cluster someone else started: docs/reliability.md.
POOL_PRIORITY = {"RAY_worker_niceness": "0"}
START_TRIES = 2  # a local start whose GCS did not answer its first connection is tried once more
START_ENV = "GHOSTSEARCH_RAY_START_S"  # how long a local Ray's raylet may take to register with its GCS
START_S = 180  # its default
RAY_START_WAIT_S = 30.0  # Ray's own: a literal in ray/_private/node.py around calls that each wait up to
# RAY_raylet_start_wait_time_s [30] in C++ (GlobalStateAccessor::GetNode), during which no Python signal handler
# runs: that one is left at Ray's value, so Ctrl-C or SIGTERM during a slow start is honoured within it


class GcsUnreachable(Exception):
    """Ray's "Failed to connect to GCS" while a local Ray starts: its GCS was not answering yet."""


class DashboardPortTaken(Exception):
    """Ray's dashboard could not bind the port ``free_port`` found free: another run's dashboard took it meanwhile
    (two runs starting at once on a busy machine: "Failed to find a valid port for dashboard after 0 retries")."""


PORT_TRIES = 5  # dashboard ports taken while starting before giving up


class RayletDied(Exception):
    """The local Ray's raylet ended while Ray waited for it to register (its cause, from raylet.out, as the text).
    On a busy machine: Ray 2.60's raylet waits a fixed 15 s (not configurable: ``WaitForPersistedPort``'s default;
    ``RAY_agent_register_timeout_ms`` does not reach it) for its dashboard agent, a Python process, to write its
    ports, and ends when it has not ("Check failed: ... Timed out waiting for file .../metrics_agent_port_<node>")."""


AGENT_FILES = {  # the port files a 2.60 raylet waits for, and whose they are
    "metrics_agent_port": "its dashboard agent",
    "metrics_export_port": "its dashboard agent",
    "dashboard_agent_listen_port": "its dashboard agent",
    "runtime_env_agent_port": "its runtime-env agent",
}


def raylet_end_cause(log_path: str | None) -> str:
    """Why a raylet ended, from its raylet.out: the agent it waited for, or that its log names none."""
    import re

    try:
        with open(log_path or "", errors="replace") as f:
            text = f.read()[-200_000:]
    except OSError:
        return "its log names no cause"
    m = re.search(r"Timed out waiting for file \S*?/([a-z_]+)_[0-9a-f]{20,}", text)
    if m:
        who = AGENT_FILES.get(m.group(1), "a Ray agent")
        return (
            f"it waits Ray's fixed 15 s for {who} to start ({m.group(1)}), which this machine's load exceeded: "
            "the machine is overloaded"
        )
    m = re.search(r"Check failed: (.{0,100})", text)
    return f"raylet.out: {m.group(1).strip()}" if m else "its log names no cause"


def start_budget() -> int:
    """``$GHOSTSEARCH_RAY_START_S`` (default ``START_S``), checked before a run directory exists."""
    raw = os.environ.get(START_ENV, str(START_S))
    if not raw.strip().isdigit() or not 0 < int(raw) <= 86400:
        raise GhostsearchError(
            f"{START_ENV}={raw!r} is not a whole number of seconds in 1..86400 (how long a local Ray's raylet may "
            "take to start); unset it or fix it"
        )
    return int(raw)


class _StretchedClock:
    """``time`` as ray/_private/node.py sees it while ray.init starts a local Ray, its ``monotonic`` running
    ``RAY_START_WAIT_S / budget`` as fast: Ray's one startup wait there that reads it (the raylet's
    registration, a literal 30 s) becomes ``budget`` seconds. Every other name is the ``time`` module's.
    A raylet that ended while Ray waits (it will never register) ends the wait at once: the clock jumps past
    it and ``raylet_log`` names the ended raylet's log (before: the whole budget was waited for a dead raylet)."""

    def __init__(self, budget: float):
        import time

        self._time, self._rate = time, RAY_START_WAIT_S / budget
        self._raylet: object = None  # psutil.Process of this start's raylet, once seen
        self._log: str | None = None  # its raylet.out, once known
        self._checked = 0.0
        self._jump = 0.0
        self.raylet_log: str | None = None  # set when the raylet ended during the wait

    def __getattr__(self, name: str):
        return getattr(self._time, name)

    def monotonic(self) -> float:
        now = self._time.monotonic()
        if not self._checked:  # the wait's start (node.py's start_time): the raylet is looked at from the next read
            self._checked = now
        elif not self._jump and now - self._checked >= 0.5:
            self._checked = now
            if self.raylet_ended():
                self._jump = 10 * RAY_START_WAIT_S
        return now * self._rate + self._jump

    def raylet_ended(self) -> bool:
        """Whether the raylet this driver started has ended: seen, then a zombie (until Ray reaps it) or gone. Only
        a raylet seen can have ended: none found (not expected: Ray's Popen returns after the raylet's exec), or a
        descendant that ended while the look read it, is waited for, the budget bounding the wait (before, either
        ended the wait and the start was tried again, "no cause"). A raylet first seen already a zombie (Ray's
        C++ wait between two looks can outlast its 15 s) is named from its session's raylet.out (``_raylet_log``;
        before: "its log names no cause", the load window's line, as a zombie has no command line)."""
        import psutil

        if self._raylet is None:
            self._raylet = _child_named("raylet")
            if self._raylet is None:
                return False
        if self._log is None:
            self._log = _raylet_log(self._raylet)
        try:
            alive = self._raylet.is_running() and self._raylet.status() != psutil.STATUS_ZOMBIE  # type: ignore[attr-defined]
        except psutil.Error:  # reaped since it was seen
            alive = False
        if not alive:
            self.raylet_log = self._log or ""
        return not alive


def _child_named(prefix: str):
    """The first of this process's descendants whose name starts with ``prefix`` (a zombie keeps its name), or None;
    a descendant that ends while it is read is skipped, not taken as an answer."""
    import psutil

    for p in psutil.Process().children(recursive=True):
        try:
            if p.name().startswith(prefix):
                return p
        except psutil.Error:
            continue
    return None


def _raylet_log(raylet) -> str | None:
    """The raylet.out of this start's raylet: from its command line while it runs; once it is a zombie (its command
    line is gone: a raylet that ended before it was first looked at, as Ray's C++ wait can outlast its 15 s) from
    the session directory its GCS, this start's other child, was given (``--session-dir``)."""
    import glob

    import psutil

    try:
        path = _arg(raylet.cmdline(), "--stdout_filepath=")
        if path:
            return path
    except psutil.Error:
        pass
    gcs = _child_named("gcs_server")
    try:
        session = _arg(gcs.cmdline(), "--session-dir=") if gcs is not None else None
    except psutil.Error:
        session = None
    if not session:
        return None
    logs = sorted(glob.glob(os.path.join(session, "logs", "raylet*.out")), key=os.path.getmtime)
    return logs[-1] if logs else os.path.join(session, "logs", "raylet.out")


def _arg(argv: list[str], prefix: str) -> str | None:
    return next((a[len(prefix) :] for a in argv if a.startswith(prefix)), None)


@contextlib.contextmanager
def start_wait(budget: float):
    """Ray's Python wait for a local raylet to register is ``budget`` seconds inside the block (``_StretchedClock``);
    yields the clock (its ``raylet_log`` is set when the raylet ended during the wait)."""
    from ray._private import node

    real = node.time
    clock = _StretchedClock(budget)
    node.time = clock  # type: ignore[assignment]
    try:
        yield clock
    finally:
        node.time = real


def busy_machine_settings() -> dict[str, str]:
    """BUSY_MACHINE set in this process's environment where the user has not set them; returns what was set."""
    added = {k: v for k, v in BUSY_MACHINE.items() if k not in os.environ}
    os.environ.update(added)
    return added


def pool_priority_settings() -> dict[str, str]:
    """POOL_PRIORITY set in this process's environment (a local Ray's raylet inherits it) where the user has not
    set it; returns what was set."""
    added = {k: v for k, v in POOL_PRIORITY.items() if k not in os.environ}
    os.environ.update(added)
    return added


def _start_local(dashboard: bool, port: int | None, num_cpus: int | None):
    busy_machine_settings()
    pool_priority_settings()
    budget = start_budget()
    clock = None
    try:
        with loopback_only(), start_wait(budget) as clock:
            return ray.init(
                # "local": a Ray of this run's own. Without it ray.init joins the newest Ray started on this
                # machine by `ray start` (another user's, another run's cluster: "Found multiple active Ray
                # instances ... Connecting to latest cluster"), so runs would share a Ray and its dashboard
                address="local",
                namespace=NAMESPACE,
                include_dashboard=dashboard,
                dashboard_host="127.0.0.1",
                dashboard_port=port or None,  # None: Ray's own choice (an explicit busy port is an error)
                num_cpus=num_cpus,
                log_to_driver=True,
                configure_logging=False,
            )  # workers inherit this env
    except Exception as e:
        if "Failed to find a valid port for dashboard" in str(e) or (  # bound by another run between check and bind
            "dashboard" in str(e) and "already occupied" in str(e)  # ... or between free_port and Ray's own check
        ):
            raise DashboardPortTaken(str(e).splitlines()[0][:120]) from None
        if "Failed to connect to GCS" in str(e):
            raise GcsUnreachable(str(e).splitlines()[0][:120]) from None
        if "timed out during startup" not in str(e):
            raise
        if clock is not None and clock.raylet_log is not None:
            raise RayletDied(raylet_end_cause(clock.raylet_log)) from None
        _end_leftovers()
        raise GhostsearchError(
            f"the local Ray did not start within {budget} s (its raylet did not register with its GCS: the machine "
            f"is overloaded, or short of memory or address space, see `ulimit -v`); set {START_ENV} higher (seconds), "
            "rerun when it has room, or start one with `RAY_worker_niceness=0 ray start --head` and join it with "
            "--address"
        ) from None
    finally:
        interrupts.reinstall()


def _end_leftovers() -> None:
    """The processes a failed local start left (GCS, raylet, Ray's reaper, its agents), ended before the next try:
    this driver's descendants running Ray's code, and the agents of its raylet that outlived it (``_orphans``)."""
    import psutil

    ray_dir = os.path.dirname(ray.__file__)
    ended, sessions = [], set()
    for p in psutil.Process().children(recursive=True):
        try:
            if p.name().startswith(("gcs_server", "raylet", "ray::")) or any(
                a.startswith(ray_dir) for a in p.cmdline()[:3]
            ):
                with contextlib.suppress(psutil.Error):  # a zombie has no command line
                    argv = p.cmdline()
                    sessions.add(_arg(argv, "--session-dir=") or _arg(argv, "--session_dir=") or "")
                p.kill()
                ended.append(p)
        except psutil.Error:
            pass
    for p in _orphans(sessions - {""}):
        with contextlib.suppress(psutil.Error):
            p.kill()
            ended.append(p)
    psutil.wait_procs(ended, timeout=10)  # gone (and this driver's own children reaped), not just signalled


def _orphans(sessions: set[str]) -> list:
    """This user's Ray processes (``ray::...``) that write into the logs of one of ``sessions``, whoever their parent:
    a raylet that ends during its start leaves its dashboard and runtime-env agents reparented to init, out of reach
    of a walk of the driver's children (seen: 8 ray::DashboardAgent left by a load window's failed starts). Found by
    the session named in their command line (an agent still importing, as on a busy machine) or by the session's log
    files they hold open (once their title has overwritten their command line), never by name alone: another run's
    agents belong to their own session."""
    import psutil

    if not sessions:
        return []
    me, found, ray_dir = os.getuid(), [], os.path.dirname(ray.__file__)
    dirs = tuple(os.path.join(s, "") for s in sessions)
    names = {os.path.basename(s) for s in sessions}
    for p in psutil.process_iter(["name", "uids"]):
        try:
            if p.info["uids"].real != me or p.pid == os.getpid():
                continue
            argv = p.cmdline()
            if not ((p.info["name"] or "").startswith("ray::") or any(a.startswith(ray_dir) for a in argv[:3])):
                continue  # not Ray's: kept, whatever it has open
            values = [a[a.find("=") + 1 :] for a in argv]  # --session-dir=S, --log-dir=S/logs, --session-name=N
            if any(v in sessions or v.startswith(dirs) or v in names for v in values) or any(
                f.path.startswith(dirs) for f in p.open_files()
            ):
                found.append(p)
        except (psutil.Error, AttributeError):
            continue
    return found


def shutdown() -> None:
    """``ray.shutdown()``, then SIGTERM and SIGHUP ours again: Ray's core worker leaves SIGTERM at the
    default action when it shuts down (Python's ``signal.getsignal`` still names our handler), so a
    SIGTERM after it, during target's repairs, looks or speed timing, would end the process with no
    ``interrupted`` line and the run directory's lock not released through ``finally``."""
    try:
        ray.shutdown()
    finally:
        interrupts.reinstall()


log = logging.getLogger("ghostsearch.pool")
DASHBOARD_PORT = 8265  # Ray's default; the next free port when another run (or anything) holds it


def free_port(first: int, tries: int = 50) -> int:
    """``first`` when nothing listens on 127.0.0.1:first, else the next free port after it."""
    import socket

    for port in range(first, first + tries):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    return 0  # Ray picks one


def dashboard_note(url: str) -> str:
    """The line a run prints about its dashboard: where, and how to get in with Ray's token auth
    (on by default for a local Ray since 2.52: the page asks for the token, `ray get-auth-token`
    prints it, from ~/.ray/auth_token; RAY_AUTH_MODE=disabled before the run opens it without one,
    which is safe here only because the dashboard listens on 127.0.0.1)."""
    from ray._private.authentication.authentication_token_setup import AUTH_MODE_ENV_VAR

    mode = os.environ.get(AUTH_MODE_ENV_VAR, "token").lower()
    how = (
        "no token (RAY_AUTH_MODE=disabled; loopback only)"
        if mode == "disabled"
        else "paste the token that `ray get-auth-token` prints (~/.ray/auth_token) when the page asks"
    )
    port = url.rsplit(":", 1)[-1].strip("/")
    return (
        f"Ray dashboard: {url} (open it while the run lasts; {how}; from another machine: "
        f"ssh -L {port}:127.0.0.1:{port})"
    )


# The watcher of reap_with_driver, run as `python -c REAPER DRIVER_PID RAY_PACKAGE_DIR`: while its
# stdin (a pipe only the driver writes to) is open, it notes every Ray process below the driver once
# a second; when the pipe closes (the driver ended, in any way) it waits 3 s, then kills those still
# running (psutil checks the pid still names the same process: same start time).
REAPER = """
import os, select, signal, sys, time
import psutil
driver, RAY_DIR = psutil.Process(int(sys.argv[1])), sys.argv[2]
known = {}
def note():
    try:
        for p in driver.children(recursive=True):
            if p.pid != os.getpid() and (p.name().startswith("ray::") or any(
                    a.startswith(RAY_DIR) for a in p.cmdline()[:3])):
                known[p.pid] = p
    except psutil.Error:
        pass
while True:
    note()
    ready, _, _ = select.select([sys.stdin], [], [], 1.0)
    if ready and not os.read(sys.stdin.fileno(), 4096):
        break
time.sleep(3)  # a clean shutdown (ray.shutdown) ends them itself
for p in known.values():
    try:
        if p.is_running():
            p.kill()
    except psutil.Error:
        pass
"""


def reap_with_driver() -> None:
    """Ray's agents (ray::DashboardAgent, ray::RuntimeEnvAgent) outlive a SIGKILLed driver by about
    64 s (docs/reliability.md: they report the raylet's death to the dead GCS with a 60 s timeout).
    A watcher process in its own session ends every process of the local Ray this driver started
    within about 4 s of the driver's end, however it ended."""
    import subprocess
    import sys

    if _REAPER_PIPE:  # one watcher per driver: it follows every local Ray this process starts
        return
    read, write = os.pipe()
    subprocess.Popen(
        [sys.executable, "-c", REAPER, str(os.getpid()), os.path.dirname(ray.__file__)],
        stdin=read,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
        close_fds=True,
    )
    os.close(read)
    os.set_inheritable(write, False)
    _REAPER_PIPE.append(write)  # held open for the driver's lifetime; the kernel closes it when the driver dies


_REAPER_PIPE: list = []


LOOPBACK_VAR = "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"


@contextlib.contextmanager
def loopback_only():
    """A local Ray started inside binds its GCS, raylet, workers and agents to 127.0.0.1 instead of
    every interface. Ray 2.60 rewrites ``_node_ip_address="127.0.0.1"`` to the machine's address
    (``services.resolve_ip_for_localhost``) unless clusters are disabled, which it does on macOS and
    Windows and, on Linux, with RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0: then the node's address is
    127.0.0.1 and its gRPC servers listen on loopback only (docs/reliability.md). The variable
    reaches the processes ray.init starts (they inherit the environment); Ray's constant, read when
    ray was imported, is set for the call. A user who sets the variable keeps their choice."""
    from ray._private import ray_constants

    if os.environ.get(LOOPBACK_VAR) is not None:
        yield
        return
    before = ray_constants.ENABLE_RAY_CLUSTER
    os.environ[LOOPBACK_VAR] = "0"
    ray_constants.ENABLE_RAY_CLUSTER = False
    try:
        yield
    finally:
        ray_constants.ENABLE_RAY_CLUSTER = before
        os.environ.pop(LOOPBACK_VAR, None)


REACH_TIMEOUT = 5.0  # seconds to open a TCP connection to a cluster's GCS before ray.init


def check_reachable(address: str, timeout: float = REACH_TIMEOUT) -> None:
    """A HOST:PORT address must accept a TCP connection within ``timeout`` seconds: ray.init on a
    closed port retries forever ("Failed to get cluster ID from GCS server: TimedOut")."""
    import socket

    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit() or "://" in address:
        return  # "auto", "local", ray://...: Ray resolves those itself
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=timeout).close()
    except OSError as e:
        reason = f"no answer within {timeout:g} s" if isinstance(e, socket.timeout) else (e.strerror or str(e)).lower()
        raise GhostsearchError(
            f"cannot reach the Ray cluster at {address} ({reason}); check "
            "--address / RAY_ADDRESS (the head's GCS address, e.g. 10.0.0.1:6379) and that the "
            "head is up (`ray status` there)"
        ) from None


class _NoBanner:
    """Drops Ray's "Token authentication is enabled ..." notice (every local start prints it)."""

    def filter(self, record) -> bool:
        return not str(record.msg).startswith("Token authentication is enabled for this Ray cluster")


def quiet_ray_banner() -> None:
    """Ray's token-authentication notice is shown with -v only."""
    import logging

    if logging.getLogger("ghostsearch").isEnabledFor(logging.DEBUG):
        return
    log = logging.getLogger("ray._private.authentication.authentication_token_setup")
    if not any(isinstance(f, _NoBanner) for f in log.filters):
        log.addFilter(_NoBanner())
