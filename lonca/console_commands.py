"""`lonca console` (the review console alone) and `lonca up` (the worker and the console together,
stopped together on Ctrl-C or SIGTERM; `--demo` adds a demo repository and simulated agents)."""
import errno
import ipaddress
import os
import signal
import socket
import subprocess
import sys
import threading

from lonca.client import wait_until_answering
from lonca.output import OK, REFUSED, USAGE, Usage

DEFAULT_PORT = 8765


def register(sub) -> None:
    c = sub.add_parser("console", help="serve the review console (the worker must be running)")
    _console_args(c)
    c.set_defaults(run=cmd_console)
    u = sub.add_parser("up", help="start the worker and the review console together (Ctrl-C or SIGTERM stops both)")
    _console_args(u)
    u.add_argument("--demo", action="store_true",
                   help="also create a demo repository and run simulated agents; enrols every key registered "
                        "in the console with your file key (for a newcomer on their own machine only: refused "
                        "on an interface other than loopback)")
    u.add_argument("--demo-public", action="store_true",
                   help="--demo on an interface other than loopback: anyone who reaches the console can enrol")
    u.set_defaults(run=cmd_up)


def _console_args(p) -> None:
    p.add_argument("--host", default="localhost", help="the interface to listen on (default localhost)")
    p.add_argument("--port", type=int, default=DEFAULT_PORT)
    p.add_argument("--origin", help="the origin browsers use, e.g. https://review.example.com (default http://HOST:PORT)")


def _settings(make, args):
    try:
        return make(args.host, args.port, args.origin)
    except ValueError as e:
        raise Usage(str(e)) from None


def _listen(host: str, port: int) -> list[socket.socket]:
    """The console's listening sockets, bound before anything is announced or started, so that a
    busy port is a usage error said first (uvicorn would log it after `lonca up` gave its address)."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except OSError as e:
        raise Usage(f"cannot resolve --host {host}: {e.strerror or e}") from None
    bound: list[socket.socket] = []
    try:
        for family, kind, proto, _, address in dict.fromkeys((i[0], i[1], i[2], "", i[4]) for i in infos):
            s = socket.socket(family, kind, proto)
            bound.append(s)
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6:  # "localhost" also names 127.0.0.1: one socket each
                s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            s.bind(address)
    except OSError as e:
        for s in bound:
            s.close()
        if e.errno == errno.EADDRINUSE:
            raise Usage(f"port {port} on {host} is already in use (another `lonca up` or console?); "
                        "stop what holds it or choose another with --port") from None
        raise Usage(f"cannot listen on {host}:{port}: {e.strerror or e}") from None
    return bound


def _serve(app, args, sockets: list[socket.socket]) -> None:
    import uvicorn
    config = uvicorn.Config(app, host=args.host, port=args.port, log_level="warning", timeout_graceful_shutdown=2)
    uvicorn.Server(config).run(sockets=sockets)


def cmd_console(args) -> int:
    from lonca.console import settings
    from lonca.console.app import create_app

    cfg = _settings(settings.make, args)
    sockets = _listen(args.host, args.port)
    print(f"lonca console: {cfg.origin}/ (worker socket {cfg.socket})", flush=True)
    _serve(create_app(cfg), args, sockets)
    return OK


def _wait_for_worker(proc: subprocess.Popen) -> None:
    why = wait_until_answering(proc)
    if why == "exited":
        raise Usage("the worker exited at start; its messages are above")
    if why:
        raise Usage("the worker did not answer ping within a minute")


def loopback_only(host: str) -> bool:
    """Whether every address `host` names is a loopback one (an unresolvable name is not)."""
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        pass
    try:
        infos = socket.getaddrinfo(host, None)
    except OSError:
        return False
    return bool(infos) and all(ipaddress.ip_address(i[4][0].split("%")[0]).is_loopback for i in infos)


def _demo_interface(args) -> None:
    """The demo enrols every key registered in the console: on an interface others reach, that
    is anyone who registers. Refused there unless --demo-public says so, which is warned about."""
    if loopback_only(args.host):
        return
    if not args.demo_public:
        raise Usage(f"--demo enrols every key registered in the console, and {args.host} is not a loopback "
                    "interface: anyone who reaches it could enrol. Serve the demo on localhost, or pass "
                    "--demo-public to expose it anyway")
    print(f"warning: the demo on {args.host} enrols anyone who registers a key in the console; "
          "do not keep anything you care about in this worker", file=sys.stderr, flush=True)


def cmd_up(args) -> int:
    from lonca.console import settings
    from lonca.console.app import create_app

    args.demo = args.demo or args.demo_public
    if args.demo:
        _demo_interface(args)
    cfg = _settings(settings.make, args)
    try:
        sockets = _listen(args.host, args.port)
    except Usage as e:
        print(f"usage: {e}", file=sys.stderr)
        return USAGE
    # SIGTERM (a service manager, `kill`) ends `lonca up` as Ctrl-C does, so that the worker is
    # stopped too: uvicorn re-raises the signal it caught after its shutdown, which by default would
    # end this process on the spot and leave the worker running.
    signal.signal(signal.SIGTERM, _interrupt)
    worker = subprocess.Popen([sys.executable, "-m", "lonca", "daemon"], env=os.environ.copy())
    stopping, died = threading.Event(), threading.Event()
    try:
        _wait_for_worker(worker)
        _stop_with(worker, stopping, died)
        app = create_app(cfg)
        demo = None
        if args.demo:
            from lonca.demo import Demo
            demo = Demo(app.state.enrolments)
            demo.start()
        print(f"lonca up: the console is at {cfg.origin}/  (Ctrl-C stops the console and the worker)", flush=True)
        _serve(app, args, sockets)
        if demo:
            demo.stop()
    except Usage as e:
        print(f"usage: {e}", file=sys.stderr)
        return USAGE
    except KeyboardInterrupt:
        pass  # Ctrl-C, SIGTERM, or the worker's end
    finally:
        for s in sockets:
            s.close()
        stopping.set()
        if worker.poll() is None:
            worker.terminate()
        try:
            worker.wait(20)
        except subprocess.TimeoutExpired:
            worker.kill()
            worker.wait()
    if died.is_set():
        print(f"lonca up: the worker died (exit code {worker.returncode}; its messages are above, in this "
              "output); the console stopped with it. Run `lonca up` again to restart both", file=sys.stderr)
        return REFUSED
    return OK


def _interrupt(signum, frame) -> None:
    raise KeyboardInterrupt


STOP_GRACE_S = 5.0  # how long a worker's clean exit waits for `lonca up`'s own stop signal


def _stop_with(worker: subprocess.Popen, stopping: threading.Event, died: threading.Event) -> None:
    """When the worker ends by itself (a fatal failure, a kill), the console stops too, as if by
    Ctrl-C, and `lonca up` exits non-zero so that whatever runs it sees the failure."""
    def watch():
        worker.wait()
        if stopping.is_set():
            return
        if worker.returncode == 0:
            # a clean stop: a service manager (or `timeout`) signals the whole process group, and
            # the worker can end before `lonca up` has taken its own signal; wait for that one
            if stopping.wait(STOP_GRACE_S):
                return
        else:
            died.set()
        os.kill(os.getpid(), signal.SIGINT)
    threading.Thread(target=watch, daemon=True, name="lonca up: worker watch").start()
