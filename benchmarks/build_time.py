"""Time to build a process with worker-held client states: passed to the builder vs rebuilt after.

    .venv/bin/python -m benchmarks.build_time --setting=chem --algorithms fedstar fedavg --repeats 2

Per algorithm and repeat, alternating in one process: `experiment.build_process(...,
worker_states=...)` (one build: the built-in builders take the states) and `with_worker_states(
experiment.build_process(...))` (a build, then the rebuild a builder that ignores
`BuildContext.worker_states` costs). The first repeat also pays one-time tracing/import costs; the
ratio of the later repeats is the one to read. Prints one line per measurement.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
  parser.add_argument("--setting", default="chem")
  parser.add_argument("--algorithms", nargs="+", default=["fedstar", "fedavg"])
  parser.add_argument("--repeats", type=int, default=2)
  parser.add_argument("--split", default="reference")
  parser.add_argument("--data_dir", default=None)
  args = parser.parse_args()
  from data_prep import cache  # pylint: disable=g-import-not-at-top
  from tff_graph import config as config_lib, experiment  # pylint: disable=g-import-not-at-top
  from tff_graph.federated import process as process_lib  # pylint: disable=g-import-not-at-top
  prepared = cache.prepare_setting(args.setting, data_dir=args.data_dir, split=args.split)
  for algorithm in args.algorithms:
    config = config_lib.ExperimentConfig(algorithm, data=config_lib.DataConfig(setting=args.setting, split=args.split),
                                         run=config_lib.RunConfig(rounds=3, seeds=(1,)))
    with tempfile.TemporaryDirectory() as d:
      states = process_lib.WorkerStates(d)
      for rep in range(args.repeats):
        t = time.perf_counter()
        experiment.build_process(config, prepared, 1, worker_states=states)
        once = time.perf_counter() - t
        t = time.perf_counter()
        process_lib.with_worker_states(experiment.build_process(config, prepared, 1), d)
        twice = time.perf_counter() - t
        print(f"{algorithm} repeat {rep}: one build {once:.2f} s, build + with_worker_states {twice:.2f} s, "
              f"ratio {once / twice:.2f}", flush=True)


if __name__ == "__main__":
  main()
