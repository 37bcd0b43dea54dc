r"""Runs several algorithms on one setting with the same client splits and seeds; writes one table.

The table (like Table 1 of the FedStar paper) gives, per algorithm, the average test accuracy as the
papers aggregate it (mean over clients of per-client means over seeds ± mean over clients of per-client
stds), the gain over `local` when it is among the algorithms (average per-client gain and the share of
clients whose gain is >= 0), and the number of parameters of a client's model (total and shared).

Example:
  python -m programs.compare --algorithms=local,fedavg,fedprox,fedper,fedsage,gcfl,fedstar \
      --setting=chem --rounds=200 --seeds=1,2,3,4,5 --output_dir=runs/compare-chem
"""

from __future__ import annotations

import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

from absl import app  # noqa: E402
from absl import flags  # noqa: E402

from programs import cli  # noqa: E402
from programs import common  # noqa: E402
from tff_graph import comparison  # noqa: E402
from tff_graph import experiment  # noqa: E402

common.define_experiment_flags()
flags.adopt_module_key_flags(common)
_ALGORITHMS = flags.DEFINE_list("algorithms", ["local", "fedavg", "fedstar"],
                                "Algorithms to compare: registered names (built in and --plugins).")
_OUTPUT_DIR = flags.DEFINE_string("output_dir", None, "Folder for the comparison (one run folder per algorithm).")


def main(argv: list[str]) -> int:
  if not common.start(argv):
    return 2
  try:
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

  def run_all(first: bool) -> list:  # After a restart: finished algorithms load, the others resume.
    for c in configs:
      if c.algorithm not in done:
        done[c.algorithm] = experiment.run_experiment(
            c, prepared, root / c.algorithm, overwrite=common.overwrite() and first, allow_finished=True,
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
