"""TFF execution contexts whose C++ workers never outlive the run.

TFF's own `set_sync_local_cpp_execution_context` starts a `worker_binary` that inherits the parent's
stdout/stderr and is only stopped when a Python object is garbage collected: it can outlive Python and
hold a pipe open (`python ... | tail` then never ends). `local_execution_context()` instead

* starts the worker with its output sent to a log file (or discarded), in its own session, with a
  parent-death signal so that it dies with the Python process even after a SIGKILL;
* installs a synchronous context on it for the duration of a `with` block;
* stops the worker (SIGTERM, then SIGKILL) when the block exits, normally or not.

It is built on TFF's own engine: the C++ `worker_binary` executor service and `RemoteExecutor`.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import pathlib
import signal
import subprocess
import time
from typing import Iterator

import grpc
import portpicker
import tensorflow_federated as tff
from tensorflow_federated.python.core.backends.native import compiler  # Not re-exported by tff.

_MAX_MESSAGE = 2_000_000_000
_CHANNEL_OPTIONS = [("grpc.max_message_length", _MAX_MESSAGE),
                    ("grpc.max_receive_message_length", _MAX_MESSAGE),
                    ("grpc.max_send_message_length", _MAX_MESSAGE)]
_PR_SET_PDEATHSIG = 1


class WorkerError(RuntimeError):
  """A TFF worker could not be started or stopped answering."""


def worker_binary_path() -> pathlib.Path:
  path = pathlib.Path(tff.__file__).parent / "data" / "worker_binary"
  if not path.is_file():
    raise WorkerError(f"TFF's worker_binary is missing at {path}; reinstall tensorflow-federated")
  return path


def _die_with_parent() -> None:  # Runs in the child between fork and exec.
  os.setsid()
  ctypes.CDLL("libc.so.6", use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


def start_worker(port: int, *, log_path: str | os.PathLike[str] | None = None,
                 max_concurrent_calls: int = -1) -> subprocess.Popen[bytes]:
  """Starts a worker_binary on `port` that dies with this process."""
  out = open(log_path, "ab") if log_path else subprocess.DEVNULL  # noqa: SIM115
  try:
    return subprocess.Popen(
        [str(worker_binary_path()), f"--port={port}",
         f"--max_concurrent_computation_calls={max_concurrent_calls}"],
        stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, preexec_fn=_die_with_parent)
  finally:
    if log_path:
      out.close()


def stop_worker(process: subprocess.Popen[bytes], timeout: float = 5.0) -> None:
  if process.poll() is None:
    process.terminate()
    try:
      process.wait(timeout)
    except subprocess.TimeoutExpired:
      process.kill()
      process.wait()


def _wait_ready(stub: tff.framework.RemoteExecutorGrpcStub, address: str,
                process: subprocess.Popen[bytes] | None, timeout: float) -> None:
  deadline = time.monotonic() + timeout
  while not stub.is_ready:
    if process is not None and process.poll() is not None:
      raise WorkerError(f"TFF worker at {address} exited with code {process.returncode} while starting")
    if time.monotonic() > deadline:
      raise WorkerError(f"TFF worker at {address} not ready after {timeout:.0f}s")
    time.sleep(0.05)


def _context_for(stub: tff.framework.RemoteExecutorGrpcStub):
  def stack_fn(cardinalities):
    if cardinalities.get(tff.CLIENTS) is None:  # Nothing at CLIENTS in this call.
      cardinalities[tff.CLIENTS] = 0
    executor = tff.framework.RemoteExecutor(stub)
    executor.set_cardinalities(cardinalities)
    return executor

  factory = tff.framework.ResourceManagingExecutorFactory(executor_stack_fn=stack_fn)
  return tff.framework.SyncExecutionContext(
      executor_fn=factory, compiler_fn=compiler.desugar_and_transform_to_native,
      transform_args=tff.tensorflow.transform_args, transform_result=tff.tensorflow.transform_result)


@contextlib.contextmanager
def local_execution_context(*, log_path: str | os.PathLike[str] | None = None,
                            startup_timeout: float = 60.0) -> Iterator[object]:
  """Runs TFF computations in the `with` block on a private local C++ worker (see module docstring)."""
  port = portpicker.pick_unused_port()
  process = start_worker(port, log_path=log_path)
  channel = None
  try:
    address = f"localhost:{port}"
    channel = grpc.insecure_channel(address, _CHANNEL_OPTIONS)
    stub = tff.framework.RemoteExecutorGrpcStub(channel)
    _wait_ready(stub, address, process, startup_timeout)
    with tff.framework.get_context_stack().install(_context_for(stub)) as context:
      yield context
  finally:
    if channel is not None:
      channel.close()
    stop_worker(process)
