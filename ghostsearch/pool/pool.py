"""Starting, finding and using the scoring pool.

``connect`` joins the cluster named by ``--address`` / ``$RAY_ADDRESS`` or starts a local Ray
with the dashboard bound to 127.0.0.1. ``start_pool`` creates the scorer actors (optionally in a
SPREAD placement group) and their ``Broker``; with a name and ``detached=True`` the pool
outlives the job (``ghostsearch pool up``), and later jobs find it with ``find_pool``.
``PoolClient`` is what a searcher evaluates through: it adds the objective, answers a resumed
run's candidates from its own ledger, and writes every finished evaluation to the ledger
before the searcher sees it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import time
import uuid
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import ray

from ghostsearch.config import Config
from ghostsearch.core import interrupts
from ghostsearch.core.errors import GhostsearchError
from ghostsearch.objectives import ObjectiveSpec
from ghostsearch.pool.actors import NAMESPACE, Broker, ScorerActor, Served
from ghostsearch.pool.blocks import RaceBlocks
from ghostsearch.pool.resume import Entry, Resume, entry_of
from ghostsearch.rundir.ledger import Ledger, LedgerRow
from ghostsearch.search import Candidate
from ghostsearch.search.racing import RowRequest


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
    try:
        with loopback_only():
            ctx = ray.init(
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
        if "timed out during startup" not in str(e):
            raise
        raise GhostsearchError(
            "the local Ray did not start within Ray's 30 s (the machine is overloaded, or short of memory or "
            "address space: see `ulimit -v`); rerun when it has room, or join a running Ray with --address"
        ) from None
    finally:
        interrupts.reinstall()
    reap_with_driver()
    if dashboard and getattr(ctx, "dashboard_url", None):
        log.info(dashboard_note(f"http://{ctx.dashboard_url}"))
    return True


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


def resources(cfg: Config) -> tuple[float, float]:
    gpus = cfg.pool.gpus_per_actor
    if gpus is None:
        gpus = 1.0 if ray.cluster_resources().get("GPU", 0) >= 1 else 0.0
    cpus = 0 if gpus else cfg.pool.threads
    return cpus, gpus


def check_capacity(cfg: Config) -> None:
    cpus, gpus = resources(cfg)
    have = ray.cluster_resources()
    for res, per in (("CPU", cpus), ("GPU", gpus)):
        need = per * cfg.pool.actors
        if need > have.get(res, 0) + 1e-9:
            raise GhostsearchError(
                f"pool of {cfg.pool.actors} scorers needs {need:g} {res} but the cluster has {have.get(res, 0):g}; "
                "lower pool.actors / pool.threads or add nodes"
            )


def start_pool(
    cfg: Config,
    name: str | None = None,
    detached: bool = False,
    wait: bool = True,
    actor_class=ScorerActor,
    load_dtype: str | None = None,
):
    """Create scorer actors (``actor_class``: the real scorer; benchmarks pass a stand-in) and
    their broker. Returns the broker handle. ``load_dtype``: the scorers load the model in this
    dtype instead of resolving ``dtype: auto`` on their machine (a resumed run keeps the dtype its
    values were computed in); the broker's keys still carry the config's dtype."""
    check_capacity(cfg)
    actor_cfg = cfg if load_dtype is None else dataclasses.replace(cfg, dtype=load_dtype)
    cpus, gpus = resources(cfg)
    prefix = name or f"ghostsearch-{uuid.uuid4().hex[:6]}"
    lifetime = "detached" if detached else None
    opts: Any = {}
    pg = None
    if cfg.pool.spread:
        from ray.util.placement_group import placement_group
        from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

        bundle = {"CPU": cpus} if cpus else {}
        if gpus:
            bundle["GPU"] = gpus
        pg = placement_group([bundle] * cfg.pool.actors, strategy="SPREAD", lifetime=lifetime, name=f"{prefix}-pg")
        ray.get(pg.ready(), timeout=600)
        opts = lambda i: {"scheduling_strategy": PlacementGroupSchedulingStrategy(pg, placement_group_bundle_index=i)}  # noqa: E731
    names = [
        f"{prefix}-scorer-{i}" if name else f"ghostsearch-scorer-{i}-{prefix[-6:]}" for i in range(cfg.pool.actors)
    ]
    scorers = []
    for i, n in enumerate(names):
        extra = opts(i) if callable(opts) else {}
        scorers.append(
            actor_class.options(
                name=n, namespace=NAMESPACE, lifetime=lifetime, num_cpus=cpus, num_gpus=gpus, **extra
            ).remote(actor_cfg, cfg.pool.threads, n)
        )
    # the broker lives on this (head/driver) node: it must survive the loss of any worker node
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    here = ray.get_runtime_context().get_node_id()
    broker = Broker.options(  # type: ignore[attr-defined]  # a Ray actor class
        name=f"{prefix}-broker" if name else None,
        namespace=NAMESPACE,
        lifetime=lifetime,
        num_cpus=0,
        max_concurrency=10000,
        scheduling_strategy=NodeAffinitySchedulingStrategy(here, soft=False),
    ).remote(cfg, names, scorers)
    _KEEP.append((broker, scorers, pg))
    if wait:
        ray.get(broker.ready.remote())
    return broker


_KEEP: list = []  # the driver owns local pools: keep handles alive for the driver's lifetime


def release_pool(broker) -> bool:
    """End a pool this driver started (scorers, broker, placement group) so that its CPUs/GPUs
    are free for what comes next (downstream evaluation). False if the pool is not ours (named)."""
    for entry in list(_KEEP):
        if entry[0] == broker:
            b, scorers, pg = entry
            for a in scorers:
                ray.kill(a, no_restart=True)
            ray.kill(b, no_restart=True)
            if pg is not None:
                from ray.util.placement_group import remove_placement_group

                remove_placement_group(pg)
            _KEEP.remove(entry)
            return True
    return False


def pool_identity(broker, cfg: Config, specs: list[ObjectiveSpec]) -> dict:
    """What the pool's values depend on (model content, resolved dtype and device, calibration token
    ids of ``specs``). A job using a named pool whose model or precision differs from its own
    config is refused: its ledger would record the pool's values under its own model's name."""
    try:
        ident = ray.get(broker.identity.remote(list(specs)))
    except ray.exceptions.RayTaskError as e:
        raise GhostsearchError(str(e.cause if getattr(e, "cause", None) else e).splitlines()[0]) from None
    if cfg.pool.name:
        from ghostsearch.model.models import DTYPES

        want = str(DTYPES[cfg.dtype]).replace("torch.", "") if cfg.dtype != "auto" else ident["dtype"]
        device = cfg.device.split(":")[0] if cfg.device != "auto" else ident["device"]
        for key, mine in (("model", cfg.model), ("dtype", want), ("device", device)):
            if mine != ident[key]:
                raise GhostsearchError(
                    f"pool {cfg.pool.name!r} serves {key} {ident[key]!r} but this job asks for "
                    f"{mine!r}; use a pool started with this config, or set {key}={ident[key]}"
                )
    return ident


def pool_exists(name: str) -> bool:
    try:
        ray.get_actor(f"{name}-broker", namespace=NAMESPACE)
        return True
    except ValueError:
        return False


def find_pool(name: str):
    try:
        return ray.get_actor(f"{name}-broker", namespace=NAMESPACE)
    except ValueError:
        raise GhostsearchError(
            f"no pool named {name!r} on this cluster; start it with `ghostsearch pool up CONFIG pool.name={name}`"
        ) from None


def stop_pool(name: str) -> list[str]:
    broker = find_pool(name)
    names = ray.get(broker.status.remote())["actors"]
    killed = []
    for n in names:
        try:
            ray.kill(ray.get_actor(n, namespace=NAMESPACE), no_restart=True)
            killed.append(n)
        except ValueError:
            pass
    ray.kill(broker, no_restart=True)
    try:
        from ray.util.placement_group import get_placement_group, remove_placement_group

        remove_placement_group(get_placement_group(f"{name}-pg"))
    except Exception:  # noqa: BLE001  (no placement group)
        pass
    return killed + [f"{name}-broker"]


@dataclass
class PoolClient:
    """The Evaluator and Oracle of one searcher (one cell of a run): the transport to the pool's
    broker. What a resumed run reads back from its ledger is ``Resume`` (resume.py); how a race block
    becomes a value and a ledger row's numbers is ``RaceBlocks`` (blocks.py)."""

    broker: Any  # the Broker's actor handle
    spec: ObjectiveSpec
    ledger: Ledger
    cell: str
    seed: int
    model: str
    dtype: str
    k: int | None = None  # the cell's k: its best value counts only k-sets
    on_result: Callable[[LedgerRow], None] | None = None  # called with each row for progress
    evaluations: int = 0
    cache_hits: int = 0
    sources: dict = field(default_factory=dict)  # objective name -> CalibrationSpec statistics may come from
    resume: Resume = field(init=False)
    blocks: RaceBlocks | None = field(default=None, init=False)  # racing: known once n_rows is asked

    def __post_init__(self) -> None:
        self.resume = Resume(self.spec.key(), self.cell)

    def load_known(self, run_dir) -> int:
        """Resume: every value this run's ledger holds for the cell's objective (see Resume)."""
        return self.resume.load(run_dir)

    def _append_new(self, key: Entry, row: LedgerRow) -> None:
        """Ledger a resumed cell's answer unless the ledger already has this cell's row for it."""
        if self.resume.is_new(key):
            self.ledger.append(row)

    def _row(
        self, c: Candidate, searcher: str, value: float, cached: bool, source: Served | LedgerRow, **race
    ) -> LedgerRow:
        """The ledger row of ``c``'s answer: scored now (``source``: what the pool served) or replayed
        from the ledger (``source``: the row that holds it); ``race``: a block's cost, partial, row_losses."""
        tokens: int | None
        seconds: float | None
        actor: str | None
        node: str | None
        if isinstance(source, Served):
            tokens, seconds, actor, node = source.score.tokens, source.score.seconds, source.actor, source.node
        else:
            tokens, seconds, actor, node = source.tokens, source.seconds, source.actor, source.node
        return LedgerRow(
            cell=self.cell,
            searcher=searcher,
            objective=self.spec.name,
            objective_key=self.spec.key(),
            removed=list(c.removed),
            k=len(c.removed),
            fidelity=c.fidelity,
            value=value,
            tokens=tokens,
            seconds=seconds,
            cached=cached,
            actor=actor,
            node=node,
            time=time.time(),
            seed=self.seed,
            **race,
        )

    def evaluate(self, candidates: Sequence[Candidate], searcher: str) -> list[float]:
        values: list[float | None] = [None] * len(candidates)
        pending = {}
        for i, c in enumerate(candidates):
            known = self.resume.value(c.removed, c.fidelity)
            if known is not None:  # resumed run: answered from this run's own ledger
                row = self._row(c, searcher, known.value, True, known)
                self._answer(entry_of(c.removed, c.fidelity), row)
                values[i] = row.value
            else:
                ref = self.broker.evaluate.remote(
                    self.spec,
                    list(c.removed),
                    c.fidelity,
                    list(c.prefix) if c.prefix else None,
                    searcher,
                    self.cell,
                    self.k,
                )
                pending[ref] = i
        for i, r in self._finished(pending):
            c = candidates[i]
            row = self._row(c, searcher, r.score.value, r.cached, r)
            self._answer(entry_of(c.removed, c.fidelity), row)  # durable before the searcher sees the value
            values[i] = row.value
        return values  # type: ignore[return-value]

    def _answer(self, key: Entry, row: LedgerRow) -> None:
        self._append_new(key, row)
        self.evaluations += 1
        self.cache_hits += int(row.cached)
        if self.on_result is not None:
            self.on_result(row)

    @staticmethod
    def _finished(pending: dict):
        """(request index, result) as each pending Ray reference finishes."""
        while pending:
            ready, _ = ray.wait(list(pending), num_returns=1)
            yield pending.pop(ready[0]), ray.get(ready[0])

    def n_rows(self) -> int:
        return self._blocks().n_rows

    def _blocks(self) -> RaceBlocks:
        if self.blocks is None:
            self.blocks = RaceBlocks.of(self.spec, self.statistic("row_counts"))
        return self.blocks

    def rows(self, requests: Sequence[RowRequest], searcher: str) -> list[tuple[list[float], list[float], float]]:
        """Racing (search/racing.py): per-row loss sums of blocks of calibration rows. Each block is a
        ledger row (fidelity: rows seen / all rows; value: on those rows, ``partial`` below 1;
        ``row_losses``; ``cost``), written before the race sees it; a resumed run replays it."""
        blocks = self._blocks()
        out: list = [None] * len(requests)
        todo: list[int] = []
        done: list[tuple[int, list[float], bool, Served | LedgerRow]] = []  # (request, sums, cached, source)
        for i, q in enumerate(requests):
            c = blocks.candidate(q)
            known = self.resume.block(c.removed, c.fidelity, len(q.rows))
            if known is not None and known.row_losses is not None:  # resumed run: in the run's own ledger
                done.append((i, list(known.row_losses), True, known))
            else:
                todo.append(i)
        if len({tuple(requests[i].rows) for i in todo}) > 1:
            raise ValueError("one look scores the same rows for every survivor")
        if todo:  # the look's rows for every survivor: one broker call
            items = [(list(q.removed), list(q.prefix) if q.prefix else None) for q in (requests[i] for i in todo)]
            rs = ray.get(self.broker.rows.remote(self.spec, items, tuple(requests[todo[0]].rows), searcher))
            done += [(i, list(r.score.sums), r.cached, r) for i, r in zip(todo, rs)]
        for i, sums, cached, source in done:
            q = requests[i]
            v = blocks.value(q, sums)
            c = blocks.candidate(q)
            row = self._row(
                c, searcher, v, cached, source, cost=blocks.cost(q), partial=blocks.partial(q), row_losses=sums
            )
            self._answer(entry_of(c.removed, c.fidelity, len(q.rows)), row)  # durable before the race sees it
            out[i] = (list(sums), blocks.counts(q), v)
        return out

    def statistic(self, name: str, source: str | None = None):
        """A dense statistic of this cell's calibration data or, with ``source`` (an objective name
        in ``sources``, e.g. 'perplexity'), of that objective's, whatever this cell's objective."""
        spec = self.spec
        if source not in (None, self.spec.name):
            if source not in self.sources:
                raise GhostsearchError(
                    f"statistic {name!r} from {source!r}: this run has no such calibration "
                    f"source; use one of: {', '.join([self.spec.name, *self.sources])}"
                )
            spec = ObjectiveSpec.make(source, self.sources[source])
        return ray.get(self.broker.statistic.remote(spec, name))

    def best_known(self, n: int) -> list[tuple[list[int], float]]:
        """The n best full-fidelity k-sets (this cell's k) any searcher has scored on this pool so far."""
        return ray.get(self.broker.best_known.remote(self.spec, self.k, n))

    def dense_value(self) -> float:
        """The dense model's value on this objective (the reference; no ledger row, not charged)."""
        return ray.get(self.broker.evaluate.remote(self.spec, [], 1.0, None, "dense")).score.value
