r"""Prepares a setting (TU files -> per-client TFRecords of GraphTensors) and prints its statistics.

Example:
  python -m programs.data_stats --setting=chem --data_dir=../shared/data/TUDataset
"""

from __future__ import annotations

import os
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from absl import app  # noqa: E402
from absl import flags  # noqa: E402

from data_prep import cache  # noqa: E402
from data_prep import partition  # noqa: E402
from data_prep import tu  # noqa: E402

_SETTING = flags.DEFINE_string(
    "setting", "chem",
    "A group (molecules, small, biochem, mix, chem, biochemsn, biosncv), optionally with _tiny "
    "and/or @k clients per dataset, or <DATASET>:<N>[:overlap] for one dataset over N clients.")
_DATA_DIR = flags.DEFINE_string(
    "data_dir", None, f"Folder holding <NAME>.zip or <NAME>/ TU files (default: ${tu.DEFAULT_DATA_DIR_ENV}).")
_CACHE_DIR = flags.DEFINE_string(
    "cache_dir", None, f"Cache folder (default: ${cache.CACHE_DIR_ENV} or ~/.cache/tff_graph).")
_SEED = flags.DEFINE_integer("split_seed", partition.DEFAULT_SPLIT_SEED, "Seed of the client partition.")
_N_RW = flags.DEFINE_integer("n_rw", 16, "Random-walk steps of the RWSE structure embedding.", lower_bound=1)
_N_DG = flags.DEFINE_integer("n_dg", 16, "Width of the one-hot degree structure embedding.", lower_bound=1)

_COLUMNS = ["client", "train", "val", "test", "avg_nodes", "avg_edges", "classes", "feature_dim",
            "feature_kind"]


def main(argv: list[str]) -> int:
  del argv
  start = time.perf_counter()
  try:
    prepared = cache.prepare_setting(_SETTING.value, data_dir=_DATA_DIR.value,
                                     cache_dir=_CACHE_DIR.value, seed=_SEED.value,
                                     n_rw=_N_RW.value, n_dg=_N_DG.value)
  except (tu.TUFormatError, partition.SettingError) as e:
    print(f"error: {e}", file=sys.stderr)
    return 2
  print(f"setting {prepared.setting.name}: {len(prepared.clients)} clients, split seed "
        f"{prepared.seed}, cached in {prepared.root} ({time.perf_counter() - start:.1f}s)")
  print(cache.format_table(cache.statistics_table(prepared), _COLUMNS))
  return 0


if __name__ == "__main__":
  app.run(main)
