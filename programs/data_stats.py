r"""Prepares a setting (TU files -> per-client TFRecords of GraphTensors) and prints its statistics.

Examples:
  python -m programs.data_stats --setting=chem --data_dir=../shared/data/TUDataset
  python -m programs.data_stats --setting=MUTAG,PTC_MR,NCI1@4      # a federation of chosen datasets
  python -m programs.data_stats --setting=NCI1:30:dirichlet=0.5    # label-skewed over 30 clients
"""

from __future__ import annotations

import os
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

from absl import app  # noqa: E402
from absl import flags  # noqa: E402

from data_prep import cache  # noqa: E402
from data_prep import features  # noqa: E402
from data_prep import partition  # noqa: E402
from data_prep import tu  # noqa: E402
from programs import cli  # noqa: E402
from tff_graph import config as config_lib  # noqa: E402

_HELP = {f.name: f.metadata["help"] for f in config_lib.dataclasses.fields(config_lib.DataConfig)}
_SETTING = flags.DEFINE_string("setting", "chem", _HELP["setting"])
_DATA_DIR = flags.DEFINE_string(
    "data_dir", None, f"Folder holding <NAME>.zip or <NAME>/ TU files (default: ${tu.DEFAULT_DATA_DIR_ENV}).")
_CACHE_DIR = flags.DEFINE_string(
    "cache_dir", None, f"Cache folder (default: ${cache.CACHE_DIR_ENV} or ~/.cache/tff_graph).")
_SPLIT = flags.DEFINE_enum("split", partition.DEFAULT_SPLIT, list(partition.SPLIT_KINDS), _HELP["split"])
_SEED = flags.DEFINE_integer("split_seed", partition.DEFAULT_SPLIT_SEED, _HELP["split_seed"], lower_bound=0,
                             upper_bound=2**32 - 1)
_FEATURES = flags.DEFINE_enum("node_features", "auto", list(features.MODES), _HELP["node_features"])
_STANDARDIZE = flags.DEFINE_bool("standardize_attributes", False, _HELP["standardize_attributes"])
_N_RW = flags.DEFINE_integer("n_rw", 16, "Random-walk steps of the RWSE structure embedding.", lower_bound=1)
_N_DG = flags.DEFINE_integer("n_dg", 16, "Width of the one-hot degree structure embedding.", lower_bound=1)

_COLUMNS = ["client", "train", "val", "test", "avg_nodes", "avg_edges", "classes", "feature_dim",
            "feature_kind"]


def main(argv: list[str]) -> int:
  if cli.stray_arguments(argv):
    return 2
  start = time.perf_counter()
  try:
    prepared = cache.prepare_setting(_SETTING.value, data_dir=_DATA_DIR.value, cache_dir=_CACHE_DIR.value,
                                     seed=_SEED.value, n_rw=_N_RW.value, n_dg=_N_DG.value, split=_SPLIT.value,
                                     node_features=_FEATURES.value,
                                     standardize_attributes=_STANDARDIZE.value)
  except (tu.TUFormatError, partition.SettingError, features.FeatureError) as e:
    print(f"error: {e}", file=sys.stderr)
    return 2
  print(f"setting {prepared.setting.name}: {len(prepared.clients)} clients, {prepared.split} split, seed "
        f"{prepared.seed}, cached in {prepared.root} ({time.perf_counter() - start:.1f}s)")
  for name, where in prepared.sources.items():
    print(f"  {name}: read from {where}")
  rows = cache.statistics_table(prepared)
  columns = _COLUMNS + (["stratified"] if not all(r.get("stratified", True) for r in rows) else [])
  if any(p.mode == "dirichlet" for p in prepared.setting.parts):
    columns.append("train_class_counts")
  print(cache.format_table(rows, columns))
  return 0


if __name__ == "__main__":
  app.run(main, flags_parser=cli.parse_flags)
