"""The comparison table of several algorithms run on the same setting, splits and seeds."""

from __future__ import annotations

import dataclasses
import pathlib
from typing import Sequence

import numpy as np

from data_prep import cache
from tff_graph import experiment
from tff_graph.experiment import ExperimentResult


@dataclasses.dataclass(frozen=True)
class Row:
  algorithm: str
  mean: float
  std: float
  gain: float | None  # Average over clients of (mean over seeds) - local's, in accuracy points.
  gain_ratio: float | None  # Share of clients with gain >= 0.
  min_gain: float | None  # The lowest client's gain, in accuracy points (GCFL's tables' "min gain").
  parameters: int  # Of one client's model (the setting's widest client), from the run's configuration.
  shared_parameters: int


def comparison_table(results: Sequence[ExperimentResult], prepared: cache.PreparedSetting) -> list[Row]:
  """One row per result; gains against the `local` result when present.

  A gain compares like with like: over the seeds that the row and `local` both have (a table may
  hold an ablation run for one seed beside a five-seed `local`); None when they share no seed.
  """
  local = next((r for r in results if r.config.algorithm == "local"), None)
  local_by_seed = {s.seed: s.final for s in local.seeds} if local else {}
  rows = []
  for r in results:
    mean, std = r.aggregate()
    gain = ratio = min_gain = None
    common = [s for s in r.seeds if s.seed in local_by_seed]
    if common:
      gains = [np.mean([s.final[cid]["test_accuracy"] - local_by_seed[s.seed][cid]["test_accuracy"]
                        for s in common]) for cid in r.seeds[0].final]
      gain, ratio = float(np.mean(gains)) * 100, float(np.mean(np.array(gains) >= 0))
      min_gain = float(np.min(gains)) * 100
    total, shared = experiment.parameter_counts(r.config, prepared)
    rows.append(Row(r.config.algorithm, mean * 100, std * 100, gain, ratio, min_gain, total, shared))
  return rows


def to_markdown(rows: Sequence[Row]) -> str:
  lines = ["| algorithm | test accuracy | gain vs local | clients with gain >= 0 | min client gain | parameters "
           "| shared |", "|---|---|---|---|---|---|---|"]
  for r in rows:
    gain = "" if r.gain is None else f"{r.gain:+.2f}"
    ratio = "" if r.gain_ratio is None else f"{r.gain_ratio:.2f}"
    low = "" if r.min_gain is None else f"{r.min_gain:+.2f}"
    lines.append(f"| {r.algorithm} | {r.mean:.2f} ± {r.std:.2f} | {gain} | {ratio} | {low} | {r.parameters} | "
                 f"{r.shared_parameters} |")
  return "\n".join(lines)


def write_table(folder: pathlib.Path, rows: Sequence[Row]) -> None:
  folder.mkdir(parents=True, exist_ok=True)
  header = "algorithm,mean,std,gain,gain_ratio,min_gain,parameters,shared_parameters"
  body = [f"{r.algorithm},{r.mean:.2f},{r.std:.2f},{'' if r.gain is None else f'{r.gain:.2f}'},"
          f"{'' if r.gain_ratio is None else f'{r.gain_ratio:.2f}'},"
          f"{'' if r.min_gain is None else f'{r.min_gain:.2f}'},{r.parameters},{r.shared_parameters}"
          for r in rows]
  (folder / "table.csv").write_text("\n".join([header, *body]) + "\n")
  (folder / "table.md").write_text(to_markdown(rows) + "\n")


def write_plot(folder: pathlib.Path, results: Sequence[ExperimentResult]) -> None:
  """accuracy.png: average test accuracy vs round, one line per algorithm (mean over seeds)."""
  import matplotlib  # pylint: disable=g-import-not-at-top
  matplotlib.use("Agg")
  from matplotlib import pyplot as plt  # pylint: disable=g-import-not-at-top
  fig, ax = plt.subplots(figsize=(7, 4.5))
  for r in results:
    rounds = [x for x, _ in r.seeds[0].curve]
    mean = np.mean([[acc for _, acc in s.curve] for s in r.seeds], axis=0)
    ax.plot(rounds, mean * 100, label=r.config.algorithm)
  ax.set_xlabel("round")
  ax.set_ylabel("average test accuracy (%)")
  ax.set_title(f"{results[0].config.setting}, seeds {list(results[0].config.seeds)}")
  ax.legend()
  fig.tight_layout()
  fig.savefig(folder / "accuracy.png", dpi=100)
  plt.close(fig)
