"""Start and run the daemon: take the locks, bind the socket, recover, serve until stopped.

One daemon per socket and per state directory, enforced with ``flock``: a second one fails
with a clear message. A socket file left by a dead daemon is probed by connecting and removed
only if nobody answers. A user's own daemon listens on a 0600 socket; the system daemon
(``--system``, root) on a 0666 one, and its state directory is passable by the users, whose
log directories are in it (:mod:`berth.daemon.engine.admission.userdir`). Stopping the daemon (SIGTERM, Ctrl-C, `berth daemon --stop`) leaves
running jobs running under their supervisors; the next daemon adopts them.
"""

from __future__ import annotations

import asyncio
import grp
import logging
import os
import signal
import socket
import sqlite3

from berth.admin import checks
from berth.admin.verdict import OK
from berth.claims import paths as claim_paths
from berth.claims.ledger import Ledger
from berth.claims.listing import Listing
from berth.claims.wake import Watcher
from berth.daemon import process, sockets
from berth.daemon.engine import notify_events
from berth.daemon.engine.admission import oom_retry, userdir
from berth.daemon.engine.control import PURGE_BATCH, PURGE_SOON
from berth.daemon.engine.enforcer import AUDIT_NAME, Enforcer
from berth.daemon.engine.engine import Engine
from berth.daemon.engine.front import Front
from berth.daemon.engine.recovery import recover
from berth.daemon.engine.resources import Resources
from berth.daemon.options import Options
from berth.daemon.procs.port import Supervisors
from berth.daemon.procs.spawner import Spawner
from berth.daemon.requests.server import Server
from berth.daemon.store.store import Store, open_store
from berth.daemon.store.writer import Writer
from berth.devices import nvml
from berth.errors import BerthError, ConfigError
from berth.units import default_http_port, parse_bind
from berth.web.auth import token_handler
from berth.web.bind import Binding, listen
from berth.web.server import WebServer

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable

    from berth.config import Config

log = logging.getLogger("berth.daemon")


def setup_logging(opts: Options) -> None:
    handler: logging.Handler = logging.StreamHandler()  # background: stderr is daemon.log
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s"))
    log.addHandler(handler)
    log.setLevel(logging.INFO)


def serve(opts: Options, cfg: Config, ready: Callable[[], None] | None = None) -> int:
    """Run the daemon until it is stopped; returns the exit code."""
    os.umask(0o077)  # what the daemon makes is root's (its user's) alone, unless said otherwise
    os.makedirs(opts.state_dir, mode=0o700, exist_ok=True)
    setup_logging(opts)
    state_lock = sockets.lock(
        os.path.join(opts.state_dir, "daemon.lock"), f"state dir {opts.state_dir}"
    )
    userdir.prepare(opts.state_dir)
    _doctor(opts, cfg)
    if os.geteuid() == 0:  # a job's supervisor, as its user, reads its attempt's signal file
        run_dir = os.path.join(opts.state_dir, "run")
        os.makedirs(run_dir, mode=0o711, exist_ok=True)
        os.chmod(run_dir, 0o711)
    sock_dir = os.path.dirname(opts.socket) or "."
    sockets.check_socket_dir(sock_dir, opts.system)
    # The lock beside the socket, unless others may create files there (a sticky shared
    # directory): then in the state directory, where nobody can take it first.
    lock_path = opts.socket + ".lock"
    if sockets.shared_dir(sock_dir):
        lock_path = os.path.join(opts.state_dir, "socket.lock")
    socket_lock = sockets.lock(lock_path, f"socket {opts.socket}")
    sock = sockets.bind(opts.socket, opts.system)
    web_sock: tuple[str, int, socket.socket | BerthError] | None = None
    if cfg.http:  # the dashboard's port, bound now: in use, tried again later (web.bind)
        host, port = parse_bind(cfg.http, cfg.http_allow_remote, default_http_port(opts.system))
        try:
            web_sock = (host, port, listen(host, port))
        except BerthError as e:
            web_sock = (host, port, e)

    spawner = Spawner()  # a fresh, small interpreter that forks the supervisors
    try:
        return asyncio.run(_main(opts, cfg, sock, ready, spawner, web_sock))
    finally:
        if web_sock is not None and isinstance(web_sock[2], socket.socket):
            web_sock[2].close()
        spawner.close()
        try:
            os.unlink(opts.socket)
        except FileNotFoundError:
            pass
        os.close(socket_lock)
        os.close(state_lock)


def _doctor(opts: Options, cfg: Config) -> None:
    """`berth admin doctor`'s checks of the host (but this daemon's socket and lock), one
    log line each: what is not ok is a warning."""
    try:
        claims = claim_paths.claims_dir(cfg, create=False)
    except BerthError as e:
        log.warning("check claims dir: %s", e)
        claims = None
    for c in checks.run(opts.state_dir, claims, None, daemon=True):
        (log.info if c.level == OK else log.warning)("check %s", c.line())


async def _main(
    opts: Options,
    cfg: Config,
    sock: socket.socket,
    ready: Callable[[], None] | None,
    spawner: Spawner,
    web_sock: tuple[str, int, socket.socket | BerthError] | None = None,
) -> int:
    """The daemon's life on its event loop: each step is a function below."""
    process.raise_fd_limit()  # (after the fork server started: jobs keep the usual limit)
    loop = asyncio.get_running_loop()
    store, unclean, rebooted = _open_store(opts)
    engine, procs = _start_engine(opts, cfg, store, loop, spawner, rebooted, unclean)
    announcer = notify_events.start(engine, os.path.join(opts.state_dir, AUDIT_NAME))  # [notify]
    oom_retry.attach(engine)  # (--retry-oom, and each completed run's peak: learned memory)
    process.tune_gc()
    trimmer = process.Trimmer(loop)  # (what bursts leave in the C heap, given back)
    trimmer.start()
    admin_gid = _admin_gid(cfg)
    srv, server, web = await _serve(engine, cfg, sock, web_sock, admin_gid, trimmer.after_burst)
    watcher = _watch(engine, procs, opts, loop, announcer)
    engine.kick()
    if ready is not None:
        ready()
    await engine.stop_event.wait()
    trimmer.stop()
    srv.close()
    if web is not None:
        if web.binding is not None:
            web.binding.close()
        web.close()
    if opts.end_jobs_on_stop:
        await _end_jobs(engine, opts.kill_after)
    await server.close(grace=CLOSE_GRACE)  # (no request may run on over the closed store)
    await _stop(engine, procs, store, watcher)
    return 0


async def _end_jobs(engine: Engine, grace: float) -> None:
    """``--inside-slurm``: the allocation ends, so do its jobs (SIGTERM now, SIGKILL after
    the grace, by their supervisors even if Slurm kills this daemon first), whatever the
    cluster's proctrack plugin tracks."""
    ends = []
    for job in list(engine.unfinished()):
        fut = engine.on_end(job.id)
        engine.control.cancel(job, None)
        if fut is not None:
            ends.append(fut)
    log.info("the allocation ends: ending %d job(s)", len(ends))
    if ends:
        await asyncio.wait(ends, timeout=grace + 5)


def _open_store(opts: Options) -> tuple[Store, bool, bool]:
    """Open the store and mark the daemon running: (store, the last daemon stopped
    uncleanly, and the machine restarted since)."""
    store = open_store(opts.state_dir)
    unclean = store.meta("running") == "1"
    boot = process.boot_id()
    last_boot = store.meta("boot_id")
    rebooted = unclean and boot is not None and last_boot is not None and last_boot != boot
    with store.tx():
        store.set_meta("running", "1")
        if boot is not None:
            store.set_meta("boot_id", boot)
        if unclean and opts.paused_after_crash:
            store.set_meta("queue_paused", "1")
    return store, unclean, rebooted


def _start_engine(
    opts: Options,
    cfg: Config,
    store: Store,
    loop: asyncio.AbstractEventLoop,
    spawner: Spawner,
    rebooted: bool,
    unclean: bool,
) -> tuple[Engine, Supervisors]:
    """The GPUs, the ledger, the supervisors' pool and the engine; recovery (what the last
    daemon left: :mod:`berth.daemon.engine.recovery`); then commits leave the loop's thread."""
    ledger = Ledger(cfg=cfg, keep=True)
    ledger.check_claimable()  # (a claims dir another user controls: refuse to start, say why)
    res = Resources(cfg, ledger)
    res.health.audit_path = os.path.join(opts.state_dir, AUDIT_NAME)  # (GPUs lost and back)
    res.poll()
    if res.error:
        log.warning("cannot read GPUs: %s", res.error)
    late = (cfg.supervisor_grace, cfg.supervisor_last_chance)
    procs = Supervisors(loop, os.path.join(opts.state_dir, "run"), ledger.path, late)  # (its port)
    procs.pool.spawner = spawner
    if cfg.isolate_devices:
        _isolate(cfg, res, procs)
    loop.add_reader(spawner.sock.fileno(), procs.pool.on_spawner_reply)
    engine = Engine(opts, store, res, loop, procs=procs)
    engine.pauses.queue = store.meta("queue_paused") == "1"
    engine.enforcer = Enforcer(engine, os.path.join(opts.state_dir, AUDIT_NAME))
    engine.enforcer.devices = procs.devices_note
    counts = recover(engine, rebooted)
    engine.journal.writer = Writer(store.path, loop)  # from now on commits leave the loop's thread
    log.info(
        "berth daemon %d on %s: %s%s",
        os.getpid(),
        opts.socket,
        ", ".join(f"{k} {v}" for k, v in counts.items()),
        (" (the machine restarted since)" if rebooted else "")
        + (
            " (after an unclean stop; queue paused: `berth resume --all`)"
            if engine.pauses.queue
            else (" (after an unclean stop)" if unclean else "")
        ),
    )
    return engine, procs


def _isolate(cfg: Config, res: Resources, procs: Supervisors) -> None:
    """[daemon] isolate_devices: each job may open only its own GPUs' device files, where
    this host allows it (else the log says why; "required": the daemon does not start)."""
    minors: dict[int, int | None] = {}
    if res.by_index and not any(s.logical for s in res.by_index.values()):
        try:
            minors = nvml.minor_numbers()
        except BerthError as e:
            log.warning("cannot read the GPUs' device minor numbers: %s", e)
    if not procs.isolate(minors) and cfg.isolate_devices == "required":
        raise ConfigError(
            f'{procs.devices_note}; with isolate_devices = "required" the daemon does not '
            "start (set it to true to run without it, or make it enforceable: docs/admin.md)"
        )


def _admin_gid(cfg: Config) -> int | None:
    if cfg.admin_group:
        try:
            return grp.getgrnam(cfg.admin_group).gr_gid
        except KeyError:
            log.warning("admin group %r does not exist", cfg.admin_group)
    return None


async def _serve(
    engine: Engine,
    cfg: Config,
    sock: socket.socket,
    web_sock: tuple[str, int, socket.socket | BerthError] | None,
    admin_gid: int | None,
    on_large: Callable[[], None] | None = None,
) -> tuple[asyncio.AbstractServer, Server, WebServer | None]:
    """Serve the socket, and with ``--http`` the dashboard and /metrics (:mod:`berth.web`),
    which registers its own request (``web_token``) with the socket's server. ``on_large``:
    after a burst's answer (a trim: :mod:`berth.daemon.requests.answers`)."""
    front = Front(engine)
    server = Server(front, admin_gid, engine.opts)
    server.on_large = on_large
    server.handshake_timeout = cfg.handshake_timeout
    web = None
    if web_sock is not None:
        host, port, first = web_sock
        web = WebServer(
            front, host, port, rules=engine.opts, token_ttl=cfg.web_token_ttl,
            anonymous=cfg.http_anonymous,
            allow_remote=cfg.http_allow_remote, admin_gid=admin_gid,
            usage_every=cfg.usage_flush,
        )  # fmt: skip

    def url() -> str | None:  # (None while another process holds the dashboard's port)
        if web is None or (web.binding is not None and web.binding.unavailable):
            return None
        return web.url

    def unavailable() -> str | None:
        return next((line for note in engine.notes if (line := note())), None)

    server.register(
        "web_token", token_handler(url, engine.opts.state_dir, cfg.web_token_ttl, unavailable)
    )
    srv = await asyncio.start_unix_server(server.handle, sock=sock)
    if web is not None and web_sock is not None:
        binding = web.binding = Binding(asyncio.get_running_loop(), host, port, web.start)
        engine.notes.append(lambda: binding.unavailable)
        await binding.start(first)
    return srv, server, web


def _watch(
    engine: Engine, procs: Supervisors, opts: Options, loop: asyncio.AbstractEventLoop,
    announcer: notify_events.Announcer,
) -> Watcher:
    """What wakes the engine besides requests: the claim ledger (inotify), the poll of the
    GPUs and the idle supervisors, the hourly purge, signals, ``--exit-with``'s process."""
    watcher = Watcher(engine.res.ledger.path)
    if watcher.fd is not None:
        loop.add_reader(watcher.fd, _on_claims, watcher, engine, [False])
    listing = engine.res.ledger.listing
    if listing is not None and listing.fd is not None:  # (41.2: owners learned between passes)
        loop.add_reader(listing.fd, _on_listing, listing, listing.fd, loop)

    def poll() -> None:
        engine.res.poll()
        if engine.enforcer is not None:
            try:  # (issue 25: class the GPU processes, flag idle holders, apply [enforce])
                engine.enforcer.check()
            except Exception:
                log.exception("enforcement pass failed")
        announcer.polled()  # (GPUs lost, reservations begun or over, the disk full)
        procs.pool.sweep(loop.time())
        engine.kick()
        loop.call_later(opts.poll_interval, poll)

    loop.call_later(opts.poll_interval if watcher.fd is not None else 0.25, poll)

    def purge() -> None:
        more = engine.control.purge_finished() >= PURGE_BATCH  # (a backlog: the next batch soon)
        loop.call_later(PURGE_SOON if more else PURGE_EVERY, purge)

    purge()
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        loop.add_signal_handler(sig, engine.stop_event.set)
    if opts.exit_with is not None:
        try:
            watched = os.pidfd_open(opts.exit_with)
            loop.add_reader(watched, engine.stop_event.set)
            log.info("stopping when process %d exits", opts.exit_with)
        except OSError:
            engine.stop_event.set()  # it has gone already
    return watcher


async def _stop(engine: Engine, procs: Supervisors, store: Store, watcher: Watcher) -> None:
    """Stop with every change committed; running jobs stay under their supervisors."""
    log.info("stopping; %d running job(s) stay under their supervisors", engine.running_count())
    await engine.drain()
    procs.pool.close()  # idle supervisors exit; busy ones finish their attempt first
    assert engine.journal.writer is not None
    engine.journal.writer.close()
    engine.journal.writer = None
    lost = engine.journal.unsaved_changes()
    try:
        if lost:  # (commits fail: a full disk); the next start then recovers as after a crash
            raise sqlite3.OperationalError(engine.journal.failing or "commits fail")
        with store.tx():
            store.set_meta("running", "0")
    except sqlite3.Error as e:
        log.error(
            "stopped without saving %s: the state database cannot commit (%s). The next "
            "start finds these jobs as last saved and recovers them from their run files "
            "(attempts that ended are read there; starts never recorded start again)",
            lost or "that it stopped cleanly", e,
        )  # fmt: skip
    store.close()
    watcher.close()


PURGE_EVERY = 3600.0  # seconds between purges of old finished jobs (and one at start)
CLOSE_GRACE = 1.0  # seconds the requests in hand get to be answered when the daemon stops


def _on_listing(listing: Listing, fd: int, loop: asyncio.AbstractEventLoop) -> None:
    listing.apply()
    if listing.fd is None:  # (the watch is gone: the listing lists on every look now)
        loop.remove_reader(fd)


def _on_claims(watcher: object, engine: object, due: list[bool]) -> None:
    assert isinstance(watcher, Watcher) and isinstance(engine, Engine)
    watcher._drain()
    engine.kick()
    if not due[0]:  # claims outside the queue followed, the queue empty or not: a scan a burst
        due[0] = True
        engine.loop.call_later(0.2, lambda: (due.__setitem__(0, False), engine.outside_usage()))
