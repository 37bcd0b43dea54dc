r"""Builds a result table from finished run folders and sets it beside a paper's numbers.

Every finished seed under the given folders (run folders of `programs.train`, or comparison folders of
`programs.compare`) is merged per algorithm; runs must share their configuration except the seeds.

Example (the CHEM table of results/chem/, seeds run one per comparison folder):
  python -m programs.tables --paper=fedstar \
      --runs=runs/compare-chem-seed1,runs/compare-chem-seed2,runs/compare-chem-seed3 \
      --output_dir=results/chem
"""

from __future__ import annotations

import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

from absl import app  # noqa: E402
from absl import flags  # noqa: E402

from data_prep import features  # noqa: E402
from data_prep import partition  # noqa: E402
from data_prep import tu  # noqa: E402
from programs import cli  # noqa: E402
from tff_graph import anchors  # noqa: E402
from tff_graph import experiment  # noqa: E402
from tff_graph import results  # noqa: E402

_RUNS = flags.DEFINE_list("runs", None, "Run folders or comparison folders to merge.", required=True)
_PAPER = flags.DEFINE_enum("paper", None, ["fedstar", "gcfl"], "Whose published numbers go beside ours.")
_OUTPUT_DIR = flags.DEFINE_string("output_dir", None, "Where table.csv, table.md, per_client_*.csv go.",
                                  required=True)
_DATA_DIR = flags.DEFINE_string("data_dir", None, f"TU data folder (default ${tu.DEFAULT_DATA_DIR_ENV}); "
                                "needed for the parameter counts of the setting's widest client.")
_CACHE_DIR = flags.DEFINE_string("cache_dir", None, "Prepared-data cache.")
_SAME_SEEDS = flags.DEFINE_bool("same_seeds", False, "Only the seeds every row has finished (a fair "
                                "comparison while runs are still going); default: each row's finished seeds.")


def main(argv: list[str]) -> int:
  if cli.stray_arguments(argv):
    return 2
  try:
    loaded = results.load_results(_RUNS.value)
    if _SAME_SEEDS.value:
      loaded = results.same_seeds(loaded)
    config = loaded[0].config
    results.split_of(loaded)
    paper = anchors.lookup(_PAPER.value, config.setting) if _PAPER.value else None
    prepared = experiment.prepare_data(config, data_dir=_DATA_DIR.value, cache_dir=_CACHE_DIR.value)
  except (results.ResultsError, KeyError, partition.SettingError, tu.TUFormatError, features.FeatureError) as e:
    print(f"error: {e.args[0] if isinstance(e, KeyError) else e}", file=sys.stderr)
    return 2
  rows = results.results_table(loaded, prepared, paper)
  results.write(_OUTPUT_DIR.value, rows, loaded)
  print(results.to_markdown(rows) + "\n\n" + results.SPLIT_NOTE[results.split_of(loaded)])
  return 0


if __name__ == "__main__":
  app.run(main, flags_parser=cli.parse_flags)
