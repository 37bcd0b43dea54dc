r"""Where a program's whole-process time goes: wall and CPU time per phase of a real run.

    .venv/bin/python -m benchmarks.phases programs.compare --algorithms=local,fedavg,gcfl \
        --setting=molecules --rounds=20 --output_dir=/tmp/phases --overwrite

Runs the program (`programs.train` or `programs.compare`, any of its flags) in this process with
timers around its phases — imports, data preparation, starting the workers, building each process,
its initial state, every `next` (the first one apart: it compiles on the worker), every evaluation,
checkpoints, metric releases, fetching the final client states, SavedModel export, tables — and
prints one table: per phase the calls, wall seconds, the driver's CPU seconds and the workers' CPU
seconds (every child process), and how many of the machine's cores were busy on average. `other` is
the wall time no timer saw (the loop's own Python, progress lines). The run's outputs are the
program's, unchanged (the timers only wrap calls).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import functools
import importlib
import inspect
import os
import sys
import time

import psutil

_EPOCH0 = time.time()
_CPU0 = time.process_time()

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")


class Phases:
  """Accumulates wall, driver CPU and children CPU per phase; nested phases count in the innermost."""

  def __init__(self):
    self.wall = collections.defaultdict(float)
    self.driver = collections.defaultdict(float)
    self.workers = collections.defaultdict(float)
    self.calls = collections.Counter()
    self._me = psutil.Process()
    self._stack: list[str] = []
    self._mark = self._now()

  def _children_cpu(self) -> float:
    total = 0.0
    for c in self._me.children(recursive=True):
      try:
        t = c.cpu_times()
        total += t.user + t.system
      except psutil.Error:
        pass
    return total

  def _now(self) -> tuple[float, float, float]:
    return time.perf_counter(), time.process_time(), self._children_cpu()

  def _charge(self, phase: str) -> None:
    now = self._now()
    w, d, c = (a - b for a, b in zip(now, self._mark))
    self.wall[phase] += w
    self.driver[phase] += d
    self.workers[phase] += max(c, 0.0)  # A finished child's CPU leaves the sum: never negative.
    self._mark = now

  @contextlib.contextmanager
  def phase(self, name: str):
    self._charge(self._stack[-1] if self._stack else "other")
    self._stack.append(name)
    self.calls[name] += 1
    try:
      yield
    finally:
      self._charge(self._stack.pop())

  def wrap(self, owner, attr: str, name: str | None = None, first: str | None = None) -> None:
    """Times `owner.attr` (a function, a coroutine function, or a property returning a callable)."""
    original = inspect.getattr_static(owner, attr)  # A class's property as the property itself.
    name = name or attr
    seen = [False]

    def label():
      if first and not seen[0]:
        seen[0] = True
        return first
      return name

    def timed(fn):
      if asyncio.iscoroutinefunction(fn):
        @functools.wraps(fn)
        async def run_async(*a, **k):
          with self.phase(label()):
            return await fn(*a, **k)
        return run_async

      @functools.wraps(fn)
      def run(*a, **k):
        with self.phase(label()):
          return fn(*a, **k)
      return run

    if isinstance(original, property):
      setattr(owner, attr, property(lambda obj: timed(original.fget(obj))))
    else:
      setattr(owner, attr, timed(original))

  def table(self, total_wall: float) -> str:
    names = [n for n in self.wall if self.wall[n] > 0.0005 or self.calls[n]]
    order = sorted(names, key=lambda n: -self.wall[n])
    cores = os.cpu_count() or 1
    rows = ["| phase | calls | wall s | share | driver CPU s | workers CPU s | cores busy |", "|---|---|---|---|---|---|---|"]
    for n in order:
      w = self.wall[n]
      busy = (self.driver[n] + self.workers[n]) / w if w > 0 else 0.0
      rows.append(f"| {n} | {self.calls[n] or ''} | {w:.1f} | {100 * w / total_wall:.1f} % | {self.driver[n]:.1f} | "
                  f"{self.workers[n]:.1f} | {busy:.2f} of {cores} |")
    d, c = sum(self.driver.values()), sum(self.workers.values())
    rows.append(f"| **all** | | {total_wall:.1f} | 100 % | {d:.1f} | {c:.1f} | {(d + c) / total_wall:.2f} of {cores} |")
    return "\n".join(rows)


def install(phases: Phases) -> None:
  """Timers around the phases of `programs.train` / `programs.compare` (their library calls)."""
  import tensorflow_federated as tff  # pylint: disable=g-import-not-at-top
  from programs import common  # pylint: disable=g-import-not-at-top
  from tff_graph import checkpoints, comparison, experiment, program_logic, runtime  # pylint: disable=g-import-not-at-top
  from tff_graph.federated import process as process_lib  # pylint: disable=g-import-not-at-top
  from tff_graph.models import export  # pylint: disable=g-import-not-at-top

  phases.wrap(common, "prepare", "data preparation")
  phases.wrap(runtime, "start_worker", "start workers")
  phases.wrap(experiment, "build_process", "build process")
  phases.wrap(program_logic, "initial_state", "initial state")
  phases.wrap(program_logic, "_load_newest", "load checkpoint")
  phases.wrap(process_lib.GraphProcess, "next", "next", first="first next (compiles)")
  phases.wrap(process_lib.GraphProcess, "evaluate", "evaluate", first="first evaluate (compiles)")
  phases.wrap(checkpoints.NpzProgramStateManager, "save", "checkpoint save")
  phases.wrap(tff.program.CSVFileReleaseManager, "release", "release CSV")
  phases.wrap(tff.program.TensorBoardReleaseManager, "release", "release TensorBoard")
  phases.wrap(process_lib.GraphProcess, "fetch_client_states", "fetch client states")
  phases.wrap(process_lib.GraphProcess, "client_model", "export (client model)")
  phases.wrap(export, "export_saved_model", "export (SavedModel)")
  phases.wrap(experiment, "write_tables", "tables and plots")
  phases.wrap(experiment, "write_plots", "tables and plots")
  phases.wrap(comparison, "write_table", "tables and plots")
  phases.wrap(comparison, "write_plot", "tables and plots")


def main() -> int:
  if len(sys.argv) < 2 or sys.argv[1] not in ("programs.train", "programs.compare"):
    print("usage: python -m benchmarks.phases programs.train|programs.compare [its flags]", file=sys.stderr)
    return 2
  from benchmarks import common as bench  # pylint: disable=g-import-not-at-top
  module_name = sys.argv[1]
  phases = Phases()
  with phases.phase("imports"):
    module = importlib.import_module(module_name)
    from absl import app  # pylint: disable=g-import-not-at-top
    from programs import cli  # pylint: disable=g-import-not-at-top
  # Python's own start before this module ran (interpreter, site) counts as imports too.
  before = _EPOCH0 - psutil.Process().create_time()
  phases.wall["imports"] += before
  phases.driver["imports"] += _CPU0
  install(phases)
  code = 1
  try:
    app.run(module.main, argv=[module_name] + sys.argv[2:], flags_parser=cli.parse_flags)
  except SystemExit as e:
    code = e.code if isinstance(e.code, int) else 1
  phases._charge("other")  # pylint: disable=protected-access
  total = sum(phases.wall.values())
  print(f"\n{bench.machine()}\n`python -m benchmarks.phases {' '.join(sys.argv[1:])}` (exit {code})\n")
  print(phases.table(total))
  return code


if __name__ == "__main__":
  sys.exit(main())
