r"""Runs one algorithm on one setting as a TFF simulation, for one or more seeds.

Writes a run folder (see tff_graph/experiment.py): CSV metrics, TensorBoard events, checkpoints,
one SavedModel per client, per-client and summary tables, plots. Running the same command again resumes
an interrupted run from its last checkpoint; a finished run is never overwritten without --overwrite.

Example (FedStar on CHEM, the paper's protocol):
  python -m programs.train --algorithm=fedstar --setting=chem --rounds=200 --seeds=1,2,3,4,5 \
      --data_dir=../shared/data/TUDataset --output_dir=runs/fedstar-chem
  tensorboard --logdir runs/fedstar-chem
"""

from __future__ import annotations

import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

from absl import app  # noqa: E402
from absl import flags  # noqa: E402

from programs import cli  # noqa: E402
from programs import common  # noqa: E402
from tff_graph import experiment  # noqa: E402

common.define_experiment_flags()
flags.adopt_module_key_flags(common)
_ALGORITHM = flags.DEFINE_string("algorithm", "fedstar", common.algorithm_help())
_OUTPUT_DIR = flags.DEFINE_string("output_dir", None, "Run folder (default: runs/<algorithm>-<setting>).")


def main(argv: list[str]) -> int:
  if not common.start(argv):
    return 2
  try:
    config, prepared = common.resolve(_ALGORITHM.value)
    folder = _OUTPUT_DIR.value or f"runs/{_ALGORITHM.value}-{config.setting.replace(':', '_')}"
    common.workers()
    experiment.check_output_folder(folder)
    if not common.overwrite():
      experiment.check_run_folder(common.path(folder), config, prepared=prepared)
  except (common.UsageError, experiment.RunFolderError) as e:
    print(f"error: {e}", file=sys.stderr)
    return 2
  try:
    result = common.run_restarting(folder, lambda first: experiment.run_experiment(
        config, prepared, folder, overwrite=common.overwrite() and first, progress=common.progress_line))
  except common.RUN_ERRORS as e:
    return common.report_run_error(e)
  common.end_progress()
  mean, std = result.aggregate()
  for cid, values in result.per_client().items():
    print(f"{cid:16s} final test accuracy " + " ".join(f"{v:.4f}" for v in values))
  print(f"{config.algorithm} on {config.setting}, seeds {list(config.seeds)}, {config.run.rounds} rounds: "
        f"average test accuracy {mean * 100:.2f} ± {std * 100:.2f}  ->  {folder}")
  return 0


if __name__ == "__main__":
  app.run(main, flags_parser=cli.parse_flags)
