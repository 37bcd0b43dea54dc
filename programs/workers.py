r"""Starts TFF workers (C++ `worker_binary` executor services) and keeps them up until stopped.

Run it on each machine that should do client work, then point a program at the workers:

  # on machine A (and likewise on B):
  python -m programs.workers --ports=8000,8001
  # on the machine that drives the run:
  python -m programs.train --workers=A:8000,A:8001,B:8000 --setting=chem ...

It prints one line `ready <host>:<port> ...` on stdout once every worker answers, then waits. It stops
all its workers on SIGINT/SIGTERM (exit 0), and also when one of them dies (the others are stopped,
exit 1, the dead worker named on stderr), so a half-dead set of workers never lingers. Workers die
with the launcher even if it is SIGKILLed (parent-death signal).

The workers listen on all interfaces without TLS or authentication: use them on a trusted network only.
Each worker reads the clients' prepared TFRecord files by the path the driver sends, so the prepared
cache (`--cache_dir` / $TFF_GRAPH_CACHE) must exist at the same path on every worker machine.
"""

from __future__ import annotations

import os
import signal
import socket
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

from absl import app  # noqa: E402
from absl import flags  # noqa: E402

from programs import cli  # noqa: E402
import grpc  # noqa: E402
import tensorflow_federated as tff  # noqa: E402

from tff_graph import runtime  # noqa: E402

_PORTS = flags.DEFINE_list("ports", None, "Ports to start one worker on each, e.g. 8000,8001.", required=True)
_LOG_DIR = flags.DEFINE_string("worker_log_dir", None, "Folder for worker_<port>.log (default: discard the output).")
_STARTUP_TIMEOUT = flags.DEFINE_float("startup_timeout", 60.0, "Seconds to wait for the workers to answer.")


class _Stop(Exception):
  pass


def _on_signal(signum, frame):  # noqa: ARG001
  raise _Stop()


def main(argv: list[str]) -> int:
  if cli.stray_arguments(argv):
    return 2
  try:
    ports = [int(p) for p in _PORTS.value]
  except ValueError:
    print(f"error: --ports must be integers, got {_PORTS.value}", file=sys.stderr)
    return 2
  bad = [p for p in ports if not 0 < p < 65536]
  if bad or len(set(ports)) != len(ports):
    print(f"error: --ports must be distinct ports in 1..65535, got {_PORTS.value}", file=sys.stderr)
    return 2
  if _LOG_DIR.value:
    os.makedirs(_LOG_DIR.value, exist_ok=True)
  signal.signal(signal.SIGTERM, _on_signal)
  signal.signal(signal.SIGINT, _on_signal)
  processes = {}
  channels = []
  try:
    for port in ports:
      log = os.path.join(_LOG_DIR.value, f"worker_{port}.log") if _LOG_DIR.value else None
      processes[port] = runtime.start_worker(port, log_path=log)
    for port, process in processes.items():
      channels.append(grpc.insecure_channel(f"localhost:{port}", runtime.channel_options()))
      runtime.wait_ready(tff.framework.RemoteExecutorGrpcStub(channels[-1]), f"localhost:{port}", process,
                         _STARTUP_TIMEOUT.value)
    for channel in channels:
      channel.close()
    host = socket.gethostname()
    print("ready " + " ".join(f"{host}:{p}" for p in ports), flush=True)
    while True:
      for port, process in processes.items():
        if process.poll() is not None:
          print(f"error: the worker on port {port} exited with code {process.returncode}; stopping the others",
                file=sys.stderr)
          return 1
      time.sleep(0.5)
  except _Stop:
    return 0
  except runtime.WorkerError as e:
    print(f"error: {e}", file=sys.stderr)
    return 1
  finally:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    for process in processes.values():
      runtime.stop_worker(process)


if __name__ == "__main__":
  app.run(main, flags_parser=cli.parse_flags)
