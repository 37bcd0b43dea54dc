"""Command-line arguments shared by the examples (tiny defaults, so that the tests can run them)."""

import argparse
import os


def parse(description: str, setting: str = "chem_tiny", rounds: int = 3) -> argparse.Namespace:
  p = argparse.ArgumentParser(description=description)
  p.add_argument("--setting", default=setting)
  p.add_argument("--rounds", type=int, default=rounds)
  p.add_argument("--data_dir", default=os.environ.get("TFF_GRAPH_DATA", "../shared/data/TUDataset"))
  p.add_argument("--cache_dir", default=None)
  p.add_argument("--output_dir", default="runs/example")
  return p.parse_args()
