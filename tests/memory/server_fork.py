"""The test CRYSTALIUM server (``crystalium_server.py``), started in milliseconds: importing
the ``mcp`` SDK takes about a second, so one parent imports it once and forks a server per
launch.

- ``python server_fork.py --parent SOCKET``: import the server, listen on ``SOCKET``, say
  ``ready``; for each launch, fork a server that takes the launcher's standard input,
  output and error, environment, directory and arguments.
- ``python -S server_fork.py SOCKET ARGS...`` (the launcher, standard library only): hand
  over its pipes and wait until the server exits; SIGTERM is passed on to the server. A
  client talks to the forked server over the launcher's own pipes, as to any stdio server.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import sys


def launch(path: str, argv: list[str]) -> int:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    sock.connect(path)
    request = {"argv": argv, "env": dict(os.environ), "cwd": os.getcwd()}
    socket.send_fds(sock, [json.dumps(request).encode()], [0, 1, 2])
    pid = int(sock.recv(64))
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1):  # the server holds the pipes now: their ends close when it exits
        os.dup2(devnull, fd)

    def stop(*_: object) -> None:
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            pass

    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, stop)
    while sock.recv(64):  # end of file: the server, which holds the other copy, exited
        pass
    return 0


def parent(path: str) -> None:
    import importlib

    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    crystalium_server = importlib.import_module("crystalium_server")  # the slow import, once

    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # the kernel reaps the servers
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    listener.bind(path)
    listener.listen(16)
    print("ready", flush=True)
    while True:
        conn, _ = listener.accept()
        message, fds, _, _ = socket.recv_fds(conn, 1 << 20, 3)
        if os.fork() == 0:
            listener.close()
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            code = 1
            try:
                request = json.loads(message)
                for target, fd in enumerate(fds):
                    os.dup2(fd, target)
                    os.close(fd)
                os.environ.clear()
                os.environ.update(request["env"])
                os.chdir(request["cwd"])
                conn.send(b"%d" % os.getpid())  # conn stays open until this process ends
                code = crystalium_server.main(request["argv"])
            except BaseException:
                import traceback

                traceback.print_exc()
            finally:
                for stream in (sys.stdout, sys.stderr):
                    try:
                        stream.flush()
                    except OSError:  # the client closed its end
                        pass
                os._exit(code)
        for fd in fds:
            os.close(fd)
        conn.close()


if __name__ == "__main__":
    if sys.argv[1] == "--parent":
        parent(sys.argv[2])
    else:
        sys.exit(launch(sys.argv[1], sys.argv[2:]))
