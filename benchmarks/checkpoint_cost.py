"""Seconds per checkpoint save of a real loop state: tff-graph's `.npz` manager vs TFF's SavedModel one.

    .venv/bin/python -m benchmarks.checkpoint_cost --setting=chem --algorithm=fedstar

Builds the algorithm's process on the setting, takes its loop state before round 1 (the same arrays
as every later one: weights, Adam moments, dropout states, history) and saves it `--saves` times with
`tff_graph.checkpoints.NpzProgramStateManager` and with `tff.program.FileProgramStateManager`.
"""

from __future__ import annotations

import argparse
import os
import pathlib
import shutil
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")


def main() -> None:
  import numpy as np  # pylint: disable=g-import-not-at-top
  import tensorflow_federated as tff  # pylint: disable=g-import-not-at-top
  import tree  # pylint: disable=g-import-not-at-top

  from benchmarks import common  # pylint: disable=g-import-not-at-top
  from data_prep import cache  # pylint: disable=g-import-not-at-top
  from tff_graph import checkpoints, config as config_lib, experiment, program_logic, runtime  # pylint: disable=g-import-not-at-top

  parser = argparse.ArgumentParser(description=__doc__)
  parser.add_argument("--setting", default="chem")
  parser.add_argument("--algorithm", default="fedstar")
  parser.add_argument("--saves", type=int, default=4)
  parser.add_argument("--data_dir", default=os.environ.get("TFF_GRAPH_DATA", "../shared/data/TUDataset"))
  args = parser.parse_args()
  print(common.machine())
  prepared = cache.prepare_setting(args.setting, data_dir=args.data_dir)
  config = config_lib.ExperimentConfig(args.algorithm, data=config_lib.DataConfig(setting=args.setting))
  with runtime.local_execution_context():
    process = experiment.build_process(config, prepared, 1)
    state = program_logic.initial_state(process, prepared.clients, seed=1, rounds=200).to_structure()
    leaves = tree.flatten(state)
    print(f"{args.algorithm} on {args.setting}: loop state of {len(leaves)} arrays, "
          f"{sum(np.asarray(a).nbytes for a in leaves) / 2**20:.2f} MiB")
    root = pathlib.Path(tempfile.mkdtemp(prefix="checkpoint_cost-"))
    try:
      for name, make in (("npz (tff_graph.checkpoints)", checkpoints.NpzProgramStateManager),
                         ("SavedModel (tff.program.FileProgramStateManager)",
                          lambda d: tff.program.FileProgramStateManager(str(d)))):
        manager = make(root / name.split()[0])
        times = []
        for i in range(args.saves):
          t = time.perf_counter()
          program_logic.run_sync(manager.save(state, i + 1))
          times.append(time.perf_counter() - t)
        print(f"{name:50s} save s: {', '.join(f'{x:.3f}' for x in times)}; median {float(np.median(times)):.3f}")
    finally:
      shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
  main()
