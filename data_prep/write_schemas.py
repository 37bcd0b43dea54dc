"""Regenerates the checked-in `schemas/<NAME>.pbtxt` of the 16 TU datasets (default widths).

  python -m data_prep.write_schemas --data_dir=../shared/data/TUDataset
"""

from __future__ import annotations

import argparse

from data_prep import features
from data_prep import graph_tensor
from data_prep import partition
from data_prep import structure
from data_prep import tu


def schema_for(name: str, data_dir: str | None) -> str:
  x, _ = features.node_features(tu.read_tu_dataset(name, data_dir))
  return graph_tensor.schema_to_text(
      graph_tensor.graph_schema(x.shape[1], structure.N_RW, structure.N_DG))


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__)
  parser.add_argument("--data_dir", default=None)
  args = parser.parse_args()
  graph_tensor.SCHEMA_DIR.mkdir(exist_ok=True)
  for name in partition.ALL_DATASETS:
    (graph_tensor.SCHEMA_DIR / f"{name}.pbtxt").write_text(schema_for(name, args.data_dir))


if __name__ == "__main__":
  main()
