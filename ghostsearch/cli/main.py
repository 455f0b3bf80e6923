"""``ghostsearch``: the parser, built from the explicit list of command modules. Errors a user can
cause print one line (no traceback unless --debug) and exit 2."""

from __future__ import annotations

import argparse
import errno
import sys

from ghostsearch.cli import compare, export, ledger, plan, pool, recover, score, search, speed, target
from ghostsearch.cli import eval as eval_cmd
from ghostsearch.core import interrupts
from ghostsearch.core.errors import GhostsearchError
from ghostsearch.core.logs import quiet_libraries, setup_logging

# name -> module with add(sub) and run(args); the order of `ghostsearch --help`
COMMANDS = {
    "score": score,
    "search": search,
    "compare": compare,
    "pool": pool,
    "recover": recover,
    "export": export,
    "eval": eval_cmd,
    "ledger": ledger,
    "plan": plan,
    "target": target,
    "speed": speed,
}


class Parser(argparse.ArgumentParser):
    """argparse whose errors are one line (no usage block), exit 2 like every user error."""

    def error(self, message):
        self.exit(2, f"ghostsearch: error: {message} (see {self.prog} --help)\n")


def _values_with_dashes(argv: list[str]) -> list[str]:
    """`--remove -1,3` reads as --remove=-1,3 (argparse would take -1,3 for an option)."""
    out, i = [], 0
    while i < len(argv):
        if argv[i] == "--remove" and i + 1 < len(argv) and argv[i + 1].startswith("-") and argv[i + 1] != "--":
            out.append(f"--remove={argv[i + 1]}")
            i += 2
            continue
        out.append(argv[i])
        i += 1
    return out


def version() -> str:
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as dist_version

    try:
        return dist_version("ghostsearch")
    except PackageNotFoundError:  # run from a source tree that was never installed
        return "unknown (not installed)"


def build_parser() -> argparse.ArgumentParser:
    p = Parser(prog="ghostsearch", description="Depth-pruning search for LLMs on Ray.")
    p.add_argument("--debug", action="store_true", help="show tracebacks")
    p.add_argument("--version", action="version", version=f"ghostsearch {version()}", help="print the version")
    p.add_argument("-v", "--verbose", action="count", default=0, help="more progress messages (debug)")
    p.add_argument("-q", "--quiet", action="store_true", help="warnings and errors only, no progress bars")
    sub = p.add_subparsers(dest="cmd", required=True)
    for module in COMMANDS.values():
        module.add(sub)
    return p


def main(argv: list[str] | None = None) -> int:
    command = argv is None  # this process's own command (console script, python -m), not a caller's
    argv = _values_with_dashes(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    # key=value overrides may come after flags too: `search CONFIG --no-progress k=6`
    stray = [a for a in extra if a.startswith("-") or "=" not in a or not hasattr(args, "overrides")]
    if stray:
        parser.error(f"unrecognized arguments: {' '.join(stray)}")
    if extra:
        args.overrides = list(args.overrides or []) + extra
    quiet_libraries()
    setup_logging(-1 if args.quiet else args.verbose)
    # SIGTERM and SIGHUP end a command like Ctrl-C (lock released, ledger kept, Ray stopped)
    handlers = interrupts.install()
    try:
        COMMANDS[args.cmd].run(args)
    except GhostsearchError as e:
        if args.debug:
            raise
        _say(f"ghostsearch: error: {one_line(str(e))}")
        return 2
    except OSError as e:
        if args.debug or e.errno not in DISK_ERRORS:
            raise
        _say(f"ghostsearch: error: {disk_error(e)}")
        return 2
    except RuntimeError as e:  # torch's for weights it cannot map (`ulimit -v`, little memory): one line
        if args.debug or "unable to mmap" not in str(e):
            raise
        _say(
            "ghostsearch: error: cannot map the model's weights into memory (unable to mmap: the address-space "
            "limit `ulimit -v` or the free memory is too small for this model); raise the limit or free memory"
        )
        return 2
    except KeyboardInterrupt as e:
        _say("ghostsearch: interrupted")
        code = interrupts.exit_code(e)
        if command:  # this process's own command: it ends as its exit begins, without the interpreter's teardown
            interrupts.leave_at_exit(code)
        return code
    except Exception as e:
        if args.debug or not ray_died(e):
            raise
        _say(f"ghostsearch: error: {one_line(ray_death(e, argv))}")
        return 3
    finally:
        interrupts.restore(handlers)
    return 0


# Ray's errors of a control plane or pool process that died mid-run (a starved GCS, a killed actor): not a
# user's input, not survivable in this process, and the ledger keeps what was done
RAY_DEATHS = ("ActorDiedError", "ActorUnavailableError", "RaySystemError", "NodeDiedError", "OwnerDiedError")


def ray_died(e: BaseException) -> bool:
    return type(e).__module__.startswith("ray") and any(c.__name__ in RAY_DEATHS for c in type(e).__mro__)


def ray_death(e: BaseException, argv: list[str]) -> str:
    """One line for a Ray death mid-run: what died, that the work is kept, the exact command that resumes."""
    import shlex

    first = next((x.strip() for x in str(e).splitlines() if x.strip()), "")[:160]
    return (
        f"Ray's control plane or a pool process died mid-run ({type(e).__name__}: {first}); every evaluation "
        f"finished so far is kept in the run's ledger: rerun `{shlex.join(['ghostsearch', *argv])}` to resume"
    )


# a disk that cannot take what ghostsearch writes: read-only, full, over quota, no permission
DISK_ERRORS = {errno.EROFS, errno.ENOSPC, errno.EDQUOT, errno.EACCES, errno.EPERM, errno.EFBIG}


def disk_error(e: OSError) -> str:
    """One line for a disk that refused a write: what, where, and that rerunning resumes."""
    where = f": {e.filename}" if e.filename else ""
    code = errno.errorcode.get(e.errno, e.errno) if e.errno is not None else None
    return (
        f"{e.strerror or e} ({code}){where}; make room or make it writable "
        "(or choose another out=), then rerun the same command: what the run's ledger holds is kept and not "
        "recomputed"
    )


def one_line(message: str, limit: int = 400) -> str:
    """An error message as one line of at most ``limit`` characters (the middle elided)."""
    message = " ".join(message.split("\n"))
    if len(message) <= limit:
        return message
    return f"{message[: limit - 160]} [...] {message[-150:]}"


def _say(line: str) -> None:
    try:  # after SIGHUP the terminal may be gone
        print(line, file=sys.stderr, flush=True)
    except OSError:
        pass


if __name__ == "__main__":
    sys.exit(main())
