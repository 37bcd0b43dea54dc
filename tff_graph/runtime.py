"""TFF execution contexts whose C++ workers never outlive the run, on one or several workers.

TFF's own `set_sync_local_cpp_execution_context` starts a `worker_binary` that inherits the parent's
stdout/stderr and is only stopped when a Python object is garbage collected: it can outlive Python and
hold a pipe open (`python ... | tail` then never ends). `local_execution_context()` instead

* starts the worker with its output sent to a log file (or discarded), in its own session, with a
  parent-death signal so that it dies with the Python process even after a SIGKILL;
* installs a synchronous context on it for the duration of a `with` block;
* stops the worker (SIGTERM, then SIGKILL) when the block exits, normally or not.

`execution_context(workers)` generalises this to several workers: `workers=N` starts N local workers
(stopped at the end, like above); `workers=["host:port", ...]` connects to workers started elsewhere
(`python -m programs.workers`). With more than one worker, TFF's `MergeableCompExecutionContext` splits
each call's clients into one contiguous block per worker, runs the blocks' client work and partial
aggregation on their workers, and merges the partial aggregates (so, with full participation, client i
always runs on the same worker).

TFF's contexts retry a call forever when a worker is unreachable (its `RetryableError`); ours do not:
a worker that dies or becomes unreachable mid-call raises `WorkerError` naming it, so a program stops
with a clear error (and resumes from its last checkpoint when rerun) instead of hanging.

A worker can also stop answering while alive: TensorFlow 2.14 deadlocks, rarely, when several client
calls destroy tf.data iterators at once (threads wait forever in `~ProcessFunctionLibraryRuntime`
from `IteratorResource`'s destructor; seen once in ~5,000 client calls of a GCFL run on molecules,
2026-12-02). With `stall_timeout`, a `StallGuard` watches every call to the workers; one that gets no
answer within the timeout stops the local workers and cancels the calls, raising `WorkerStalled`, and
the programs start new workers and resume from the last checkpoint (exact, as any resume).

It is built on TFF's own engine: the C++ `worker_binary` executor service and `RemoteExecutor`.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import pathlib
import signal
import subprocess
import threading
import time
from typing import Iterator, Sequence

from absl import logging
import grpc
import portpicker
import tensorflow_federated as tff
# Not re-exported by tff:
from tensorflow_federated.python.common_libs import async_utils
from tensorflow_federated.python.core.backends.native import compiler
from tensorflow_federated.python.core.backends.native import mergeable_comp_compiler
from tensorflow_federated.python.core.backends.test import compiler as test_compiler
from tensorflow_federated.python.core.impl.executors import executors_errors

from data_prep import cpu_kernels

_MAX_MESSAGE = 2_000_000_000
_CHANNEL_OPTIONS = [("grpc.max_message_length", _MAX_MESSAGE),
                    ("grpc.max_receive_message_length", _MAX_MESSAGE),
                    ("grpc.max_send_message_length", _MAX_MESSAGE)]
_PR_SET_PDEATHSIG = 1


class WorkerError(RuntimeError):
  """A TFF worker could not be started or stopped answering."""


class WorkerStalled(WorkerError):
  """A call to a worker got no answer within the stall timeout; the workers were stopped."""


class ComputationError(RuntimeError):
  """A TFF worker answered, but could not run the computation (its own message is included)."""


# gRPC codes that mean the worker is gone or unreachable; any other code is the worker's answer.
_LOST = {grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED, grpc.StatusCode.CANCELLED}


def compile_computation(comp):
  """TFF's native compilation, after replacing secure-sum intrinsics by their plain bodies.

  TFF's native backend cannot run `federated_secure_sum(_bitwidth)` (the secure aggregation a
  `tff.aggregators.SecureSumFactory` emits); its test backend replaces them by the equivalent
  clipped, quantised plain sums, which is what a simulation can run. A computation without secure
  intrinsics is unchanged. In a simulation the sum is computed in the clear: what secure aggregation
  protects (no single client's value at the server) needs a real deployment's protocol.
  """
  return compiler.desugar_and_transform_to_native(test_compiler.replace_secure_intrinsics_with_bodies(comp))


def _compile_mergeable(comp):
  return mergeable_comp_compiler.compile_to_mergeable_comp_form(
      test_compiler.replace_secure_intrinsics_with_bodies(comp))


def worker_binary_path() -> pathlib.Path:
  path = pathlib.Path(tff.__file__).parent / "data" / "worker_binary"
  if not path.is_file():
    raise WorkerError(f"TFF's worker_binary is missing at {path}; reinstall tensorflow-federated")
  return path


def die_with_parent() -> None:
  """For `preexec_fn`: the child gets its own session and is killed (SIGKILL) when this process dies."""
  os.setsid()
  ctypes.CDLL("libc.so.6", use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


# The CPU kernels TensorFlow may use are pinned by `data_prep.cpu_kernels` (imported before TensorFlow
# by `import data_prep` and `import tff_graph`); workers get the same pins in their environment.
CPU_ISA = cpu_kernels.CPU_ISA
CPU_KERNELS = cpu_kernels.CPU_KERNELS
pin_cpu_kernels = cpu_kernels.pin


def worker_environment() -> dict[str, str]:
  """The environment a worker runs in: this process's, with TensorFlow's intra-op threads set to 1
  and its CPU kernels pinned (`pin_cpu_kernels`).

  Each client's TensorFlow ops run on one thread (the worker runs the clients of a call concurrently,
  which keeps the cores busy), so a reduction's summation order, and hence every result, is the same
  on any machine whatever its core count; this is also what the clients' training loops got before
  they were taken out of tf.data (see `client_work`), so results stay bit-identical. With the
  CPU kernels pinned, the matrix kernels, and so the bits, are the same on any AVX2 machine.
  """
  environ = {**os.environ, "TF_NUM_INTRAOP_THREADS": "1"}
  pin_cpu_kernels(environ)
  return environ


def start_worker(port: int, *, log_path: str | os.PathLike[str] | None = None,
                 max_concurrent_calls: int = -1) -> subprocess.Popen[bytes]:
  """Starts a worker_binary on `port` that dies with this process (environment: `worker_environment`)."""
  out = open(log_path, "ab") if log_path else subprocess.DEVNULL  # noqa: SIM115
  try:
    return subprocess.Popen(
        [str(worker_binary_path()), f"--port={port}",
         f"--max_concurrent_computation_calls={max_concurrent_calls}"],
        stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, preexec_fn=die_with_parent,
        env=worker_environment())
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


def channel_options() -> list[tuple[str, int]]:
  """gRPC options of our channels to workers (messages up to 2 GB: large settings' weights/states)."""
  return list(_CHANNEL_OPTIONS)


def wait_ready(stub: tff.framework.RemoteExecutorGrpcStub, address: str,
                process: subprocess.Popen[bytes] | None, timeout: float) -> None:
  deadline = time.monotonic() + timeout
  while not stub.is_ready:
    if process is not None and process.poll() is not None:
      raise WorkerError(f"TFF worker at {address} exited with code {process.returncode} while starting")
    if time.monotonic() > deadline:
      raise WorkerError(f"TFF worker at {address} not ready after {timeout:.0f}s (is a worker running there, e.g. "
                        "`python -m programs.workers --ports=<port>`, and is the port reachable?)")
    time.sleep(0.05)


class _FailFastAsyncContext(tff.framework.AsyncExecutionContext):
  """TFF's async context on one worker, minus its endless retry of unreachable workers."""

  def __init__(self, stub: tff.framework.RemoteExecutorGrpcStub, address: str, guard: StallGuard | None = None):
    def stack_fn(cardinalities):
      if cardinalities.get(tff.CLIENTS) is None:  # Nothing at CLIENTS in this call.
        cardinalities[tff.CLIENTS] = 0
      executor = tff.framework.RemoteExecutor(stub)
      executor.set_cardinalities(cardinalities)
      return executor

    super().__init__(
        executor_fn=tff.framework.ResourceManagingExecutorFactory(executor_stack_fn=stack_fn),
        compiler_fn=compile_computation,
        transform_args=tff.tensorflow.transform_args, transform_result=tff.tensorflow.transform_result)
    self.address = address
    self._guard = guard

  async def invoke(self, comp, arg):
    # The base class's invoke is wrapped in `retrying.retry` (forever on RetryableError): call the
    # undecorated coroutine and turn a lost worker into one clear error.
    try:
      return await tff.framework.AsyncExecutionContext.invoke.__wrapped__(self, comp, arg)
    except Exception as e:  # pylint: disable=broad-except
      if self._guard is not None and self._guard.stalled:  # Whatever the cancelled call raised.
        raise WorkerStalled(self._guard.stalled) from e
      if not isinstance(e, (executors_errors.RetryableError, grpc.RpcError)):
        raise
      code = e.code() if isinstance(e, grpc.Call) else type(e).__name__
      if isinstance(e, grpc.Call) and e.code() not in _LOST:
        raise ComputationError(
            f"TFF worker at {self.address} could not run the computation ({e.code().name}): {e.details()}") from e
      raise WorkerError(
          f"TFF worker at {self.address} stopped answering ({code}); the run stops here. Restart the "
          "worker(s) and run the same command again: the run resumes from its last checkpoint") from e


class _SyncContext(tff.framework.SyncContext):
  """A synchronous context over one fail-fast async context (what TFF's SyncExecutionContext does)."""

  def __init__(self, async_context: _FailFastAsyncContext):
    self._async_context = async_context
    self._runner = async_utils.AsyncThreadRunner()

  def invoke(self, comp, arg):
    return self._runner.run_coro_and_return_result(self._async_context.invoke(comp, arg))


def _quiet_lost_workers(loop, context) -> None:
  """Event-loop exception handler: when one worker is lost, the other workers' abandoned sub-round
  tasks fail too; the first WorkerError already reached the caller, so these are not reported again."""
  if isinstance(context.get("exception"), WorkerError):
    return
  loop.default_exception_handler(context)


class _MergeableContext(tff.framework.MergeableCompExecutionContext):
  """TFF's multi-worker context, which runs a computation whose aggregations depend on one another
  (GCFL's round: collect the updates, split, then average within the new clusters) on one worker:
  TFF's mergeable form has a single aggregation phase, so such a computation cannot be spread."""

  def __init__(self, contexts):
    super().__init__(contexts, compiler_fn=_compile_mergeable, transform_args=tff.tensorflow.transform_args,
                     transform_result=tff.tensorflow.transform_result)
    self._single = _SyncContext(contexts[0])
    self._unmergeable: set[int] = set()

  def invoke(self, comp, arg=None):
    if isinstance(comp, tff.Computation) and id(comp) not in self._unmergeable:
      try:
        self._compiler_pipeline.compile(comp)  # Cached: invoke compiles it again for free.
      except ValueError as e:
        if "aggregate dependent on another" not in str(e):
          raise
        self._unmergeable.add(id(comp))
        logging.warning("a computation with dependent aggregations runs on one worker (%s)", self._single_name)
    if id(comp) in self._unmergeable:
      return self._single.invoke(comp, arg)
    return super().invoke(comp, arg)

  @property
  def _single_name(self) -> str:
    return self._single._async_context.address  # pylint: disable=protected-access


class TrafficCounter(grpc.UnaryUnaryClientInterceptor):
  """Counts the bytes of every request to and response from the workers, by executor method.

  Pass one to `execution_context(traffic=...)`: `sent` / `received` are the serialized sizes of the
  protocol messages on the driver-worker connections (values, computations, calls), which is what
  crosses the network in a deployment. `snapshot()` returns the totals (to take differences).
  """

  def __init__(self):
    self.sent: dict[str, int] = {}
    self.received: dict[str, int] = {}

  def intercept_unary_unary(self, continuation, client_call_details, request):
    method = client_call_details.method.rsplit("/", 1)[-1]
    self.sent[method] = self.sent.get(method, 0) + request.ByteSize()
    outcome = continuation(client_call_details, request)
    try:
      response = outcome.result()
    except grpc.RpcError:
      return outcome
    self.received[method] = self.received.get(method, 0) + response.ByteSize()
    return outcome

  def snapshot(self) -> dict[str, int]:
    return {"sent": sum(self.sent.values()), "received": sum(self.received.values())}


class StallGuard(grpc.UnaryUnaryClientInterceptor):
  """Watches the calls on the worker connections; one unanswered for `timeout` seconds is a stall.

  On a stall, `on_stall` runs once (from the guard's own thread: `execution_context` stops its local
  workers and closes the channels, which cancels the calls) and `stalled` says what happened; the
  context then raises `WorkerStalled` from the cancelled call.
  """

  def __init__(self, timeout: float, on_stall=None, *, poll: float | None = None):
    if not timeout > 0:
      raise ValueError(f"stall timeout must be > 0 seconds, got {timeout}")
    self.timeout = float(timeout)
    self.stalled: str | None = None
    self._on_stall = on_stall
    self._poll = poll if poll is not None else min(5.0, self.timeout / 4)
    self._inflight: dict[int, tuple[float, str]] = {}
    self._lock = threading.Lock()
    self._next = 0
    self._stop = threading.Event()
    self._thread = threading.Thread(target=self._watch, name="tff-graph-stall-guard", daemon=True)
    self._thread.start()

  def intercept_unary_unary(self, continuation, client_call_details, request):
    method = client_call_details.method.rsplit("/", 1)[-1]
    with self._lock:
      token = self._next
      self._next += 1
      self._inflight[token] = (time.monotonic(), method)
    try:
      outcome = continuation(client_call_details, request)
      try:
        outcome.result()  # Blocks until answered (a future-style call too).
      except grpc.RpcError:
        pass
      return outcome
    finally:
      with self._lock:
        self._inflight.pop(token, None)

  def _watch(self) -> None:
    while not self._stop.wait(self._poll):
      now = time.monotonic()
      with self._lock:
        oldest = min(self._inflight.values(), default=None)
      if oldest is not None and now - oldest[0] > self.timeout:
        self.stalled = (f"a TFF worker gave no answer to {oldest[1]} for {now - oldest[0]:.0f}s (stall timeout "
                        f"{self.timeout:.0f}s); its calls were cancelled and the local workers stopped")
        logging.warning("%s", self.stalled)
        if self._on_stall is not None:
          self._on_stall()
        return

  def close(self) -> None:
    self._stop.set()


def _context_for(stubs: Sequence[tuple[tff.framework.RemoteExecutorGrpcStub, str]], guard: StallGuard | None = None):
  contexts = [_FailFastAsyncContext(stub, address, guard) for stub, address in stubs]
  if len(contexts) == 1:
    return _SyncContext(contexts[0])
  context = _MergeableContext(contexts)
  runner = getattr(context, "_async_runner", None)  # TFF 0.87 keeps its event loop here.
  if runner is not None and hasattr(runner, "_event_loop"):
    runner._event_loop.set_exception_handler(_quiet_lost_workers)  # pylint: disable=protected-access
  return context


def parse_workers(value: str | int | Sequence[str] | None) -> int | list[str]:
  """`None`/"" -> 1 local worker; "local:N" or N -> N local workers; "h:p,h:p" -> those addresses."""
  if value is None or value == "":
    return 1
  if isinstance(value, int):
    count = value
  elif isinstance(value, str) and value.startswith("local:"):
    try:
      count = int(value[len("local:"):])
    except ValueError:
      raise ValueError(f"workers: {value!r} is not local:<number>") from None
  else:
    addresses = [a.strip() for a in (value.split(",") if isinstance(value, str) else value) if a.strip()]
    for a in addresses:
      host, _, port = a.rpartition(":")
      if not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"workers: {a!r} is not host:port (e.g. 10.0.0.2:8000)")
    if not addresses:
      raise ValueError("workers: no address given")
    return addresses
  if count < 1:
    raise ValueError(f"workers: need at least one local worker, got {count}")
  return count


@contextlib.contextmanager
def execution_context(workers: str | int | Sequence[str] | None = None, *,
                      log_path: str | os.PathLike[str] | None = None,
                      startup_timeout: float = 60.0, traffic: TrafficCounter | None = None,
                      stall_timeout: float | None = None) -> Iterator[object]:
  """Runs TFF computations in the `with` block on local or remote workers (see module docstring).

  Args:
    workers: see `parse_workers`; default one private local worker.
    log_path: where local workers write their output (appended; discarded if None).
    startup_timeout: seconds to wait for every worker to answer.
    traffic: a `TrafficCounter` that counts the bytes exchanged with the workers.
    stall_timeout: seconds a call may go unanswered before the workers count as stalled (local ones
      are stopped) and the call raises `WorkerStalled`; None: wait for ever.
  """
  spec = parse_workers(workers)
  processes: list[subprocess.Popen[bytes]] = []
  channels = []

  def stop_all() -> None:  # From the guard's thread: the stuck workers go, the waiting calls are cancelled.
    for process in processes:
      if process.poll() is None:
        process.kill()
    for channel in channels:
      channel.close()

  guard = StallGuard(stall_timeout, stop_all) if stall_timeout else None
  try:
    if isinstance(spec, int):
      targets = []
      for _ in range(spec):
        port = portpicker.pick_unused_port()
        processes.append(start_worker(port, log_path=log_path))
        targets.append((f"localhost:{port}", processes[-1]))
    else:
      targets = [(address, None) for address in spec]
    stubs = []
    for address, process in targets:
      channels.append(grpc.insecure_channel(address, _CHANNEL_OPTIONS))
      interceptors = [i for i in (traffic, guard) if i is not None]
      channel = grpc.intercept_channel(channels[-1], *interceptors) if interceptors else channels[-1]
      stub = tff.framework.RemoteExecutorGrpcStub(channel)
      wait_ready(stub, address, process, startup_timeout)
      stubs.append((stub, address))
    with tff.framework.get_context_stack().install(_context_for(stubs, guard)) as context:
      yield context
  finally:
    if guard is not None:
      guard.close()
    for channel in channels:
      channel.close()
    for process in processes:
      stop_worker(process)


def local_execution_context(*, log_path: str | os.PathLike[str] | None = None,
                            startup_timeout: float = 60.0):
  """`execution_context()` with one private local worker."""
  return execution_context(1, log_path=log_path, startup_timeout=startup_timeout)
