r"""Runs several algorithms on one setting with the same client splits and seeds; writes one table.

The table (like Table 1 of the FedStar paper) gives, per algorithm, the average test accuracy as the
papers aggregate it (mean over clients of per-client means over seeds ± mean over clients of per-client
stds), the gain over `local` when it is among the algorithms (average per-client gain and the share of
clients whose gain is >= 0), and the number of parameters of a client's model (total and shared).

Example:
  python -m programs.compare --algorithms=local,fedavg,fedprox,fedper,fedsage,gcfl,fedstar \
      --setting=chem --rounds=200 --seeds=1,2,3,4,5 --output_dir=runs/compare-chem

With --parallel=N the algorithms train N at a time, each as a `programs.train` process (same flags, its
own local worker, progress lines prefixed with its name); this process then loads the finished runs and
writes the table. Every run is independent, so the run folders hold the same bits as one at a time; a
run keeps each op on one thread, so on a 2-core machine two runs at once fill the cores that one run
leaves idle (its largest client's call is each round's critical path; build and export use one core).
"""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys
import threading
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

from absl import app  # noqa: E402
from absl import flags  # noqa: E402

from programs import cli  # noqa: E402
from programs import common  # noqa: E402
from tff_graph import comparison  # noqa: E402
from tff_graph import experiment  # noqa: E402
from tff_graph import runtime  # noqa: E402

common.define_experiment_flags()
flags.adopt_module_key_flags(common)
_ALGORITHMS = flags.DEFINE_list("algorithms", ["local", "fedavg", "fedstar"],
                                "Algorithms to compare: registered names (built in and --plugins).")
_OUTPUT_DIR = flags.DEFINE_string("output_dir", None, "Folder for the comparison (one run folder per algorithm).")
_PARALLEL = flags.DEFINE_integer(
    "parallel", 1, "Run up to this many algorithms at once, each as its own programs.train process with its own "
    "local TFF worker (the same bits as one at a time: every run is independent; fills the cores a single "
    "run leaves idle). Local workers only.", lower_bound=1)

# programs.compare's own flags, never passed on to programs.train.
_OWN_FLAGS = ("algorithms", "output_dir", "parallel")


def train_command(algorithm: str, folder: pathlib.Path) -> list[str]:
  """The programs.train command that runs `algorithm` into `folder` with every experiment flag this
  command was given (the same config tree as this process builds)."""
  forwarded = [f.serialize() for f in flags.FLAGS.get_flags_for_module(common)
               if f.present and f.name not in _OWN_FLAGS]
  return [sys.executable, "-m", "programs.train", *forwarded, f"--algorithm={algorithm}", f"--output_dir={folder}"]


def run_parallel(algorithms: list[str], root: pathlib.Path, parallel: int) -> int:
  """Runs each algorithm's programs.train, up to `parallel` at once; their progress lines go to stderr
  prefixed with the algorithm. Returns 0, or the first failing run's exit code (the others finish:
  every run resumes when the command runs again)."""
  pending = list(algorithms)
  running: list[tuple[str, subprocess.Popen[str], threading.Thread]] = []
  code = 0
  lock = threading.Lock()

  def relay(name: str, stream) -> None:
    for line in stream:
      with lock:
        sys.stderr.write(f"{name}: {line}")
        sys.stderr.flush()

  try:
    while pending or running:
      while pending and len(running) < parallel:
        name = pending.pop(0)
        proc = subprocess.Popen(train_command(name, root / name), stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE, text=True, preexec_fn=runtime.die_with_parent)
        thread = threading.Thread(target=relay, args=(name, proc.stderr), daemon=True)
        thread.start()
        running.append((name, proc, thread))
      name, proc, thread = running.pop(_wait_any([p for _, p, _ in running]))
      thread.join()
      if proc.returncode != 0 and code == 0:
        code = proc.returncode
        with lock:
          sys.stderr.write(f"error: {name} stopped (exit {proc.returncode}); see its lines above\n")
  finally:
    for _, proc, _ in running:
      proc.kill()
  return code


def _wait_any(procs: list[subprocess.Popen[str]]) -> int:
  """Index of the first of `procs` to finish (polling: a child's exit is what matters, not its output)."""
  while True:
    for i, p in enumerate(procs):
      if p.poll() is not None:
        return i
    time.sleep(0.5)


def main(argv: list[str]) -> int:
  if not common.start(argv):
    return 2
  try:
    if _PARALLEL.value > 1 and not isinstance(common.workers(), int):
      raise common.UsageError("--parallel starts a local worker per algorithm: it cannot be combined with "
                              "--workers=host:port,...")
    configs = common.experiment_configs(_ALGORITHMS.value)
    prepared = common.prepare(configs[0])
    root = common.path(_OUTPUT_DIR.value or f"runs/compare-{configs[0].setting.replace(':', '_')}")
    common.workers()
    for c in configs:
      experiment.check_output_folder(root / c.algorithm)
      if not common.overwrite():  # A rerun resumes unfinished algorithms and reuses finished ones.
        experiment.check_run_folder(root / c.algorithm, c, allow_finished=True, prepared=prepared)
  except (common.UsageError, experiment.RunFolderError) as e:
    print(f"error: {e}", file=sys.stderr)
    return 2
  done: dict[str, object] = {}
  if _PARALLEL.value > 1:  # Train in child processes; this one then loads the finished runs.
    todo = [c.algorithm for c in configs
            if common.overwrite() or not (root / c.algorithm / "DONE").exists()]
    code = run_parallel(todo, root, _PARALLEL.value)
    if code != 0:
      return code
  # With --parallel the children already replaced what --overwrite asked to replace: only load here.
  overwrite = common.overwrite() and _PARALLEL.value == 1

  def run_all(first: bool) -> list:  # After a restart: finished algorithms load, the others resume.
    for c in configs:
      if c.algorithm not in done:
        done[c.algorithm] = experiment.run_experiment(
            c, prepared, root / c.algorithm, overwrite=overwrite and first, allow_finished=True,
            progress=common.progress_line)
    return [done[c.algorithm] for c in configs]

  try:
    results = common.run_restarting(str(root), run_all)
  except common.RUN_ERRORS as e:
    return common.report_run_error(e)
  common.end_progress()
  table = comparison.comparison_table(results, prepared)  # Parameter counts from each run's config.
  comparison.write_table(root, table)
  comparison.write_plot(root, results)
  print(comparison.to_markdown(table))
  return 0


if __name__ == "__main__":
  app.run(main, flags_parser=cli.parse_flags)
