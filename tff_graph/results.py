"""Result tables from finished run folders, set beside the papers' numbers.

Runs of one table may come from several places (one comparison folder per seed, run across sessions
or machines): `load_results` merges every finished seed (`seed_<s>/final.json`) of runs with the same
configuration except their seeds, and refuses anything else (another setting, other
hyper-parameters, the same seed twice). `results_table` then aggregates as both papers do: per client
the mean and std over seeds, then the mean over clients of each.
"""

from __future__ import annotations

import dataclasses
import json
import math
import pathlib
import re
from typing import Iterable, Mapping, Sequence

import numpy as np

from data_prep import cache
from tff_graph import algorithms
from tff_graph import config as config_lib
from tff_graph import anchors
from tff_graph import comparison
from tff_graph import experiment


class ResultsError(ValueError):
  """Run folders that cannot be put in one table (named in the message)."""


def row_label(config: experiment.ExperimentConfig) -> str:
  """The algorithm, plus ` emb=<type>` when the structure embedding is not the default rw_dg,
  ` backbone=<conv>` / ` structure=<conv>` when the model's convolutions are not the algorithm's,
  ` epochs=<E>` for E != 1 local epochs, and the privacy of its aggregation (` dp z=<noise multiplier>
  clip=<clip>`, ` secagg`) when there is one."""
  kind = config.model.embedding_type
  label = config.algorithm + ("" if kind == "rw_dg" else f" emb={kind}")
  if config.model.backbone is not None:
    label += f" backbone={config.model.backbone}"
  if config.model.structure_backbone != config_lib.ModelConfig().structure_backbone:
    label += f" structure={config.model.structure_backbone}"
  if config.training.local_epochs != 1:
    label += f" epochs={config.training.local_epochs}"
  p = config.privacy
  if p.dp_noise_multiplier is not None:
    label += f" dp z={p.dp_noise_multiplier:g} clip={p.dp_clip:g}"
  if p.secure_aggregation:
    label += " secagg"
  return label


def file_label(label: str) -> str:
  """A row label as part of a file name (`fedstar emb=dg` -> `fedstar_emb_dg`)."""
  return re.sub(r"[^A-Za-z0-9.]+", "_", label)


def _comparable(config: experiment.ExperimentConfig) -> dict:
  d = config.to_dict()
  d["run"].pop("seeds")
  return d


def _run_folders(folder: pathlib.Path) -> Iterable[pathlib.Path]:
  if (folder / "config.json").is_file():
    yield folder
    return
  subs = sorted(p for p in folder.iterdir() if (p / "config.json").is_file()) if folder.is_dir() else []
  if not subs:
    raise ResultsError(f"{folder} is neither a run folder nor a folder of run folders (no config.json)")
  yield from subs


def load_results(folders: Sequence[str | pathlib.Path]) -> list[experiment.ExperimentResult]:
  """Finished seeds of every run under `folders`, merged per row label."""
  merged: dict[str, experiment.ExperimentResult] = {}
  origin: dict[tuple[str, int], pathlib.Path] = {}
  for top in folders:
    for run in _run_folders(pathlib.Path(top)):
      try:
        record = json.loads((run / "config.json").read_text())
        components = record.pop("components", {})
        if "setting" not in record and "data" not in record:
          raise ValueError("no setting")
        config = experiment.ExperimentConfig.from_dict(record)
        if "algorithm" not in components:
          algorithms.get(config.algorithm)  # A built-in or registered algorithm.
      except (TypeError, ValueError, KeyError) as e:
        raise ResultsError(f"{run}/config.json is not a tff-graph run configuration: {e}") from None
      label = row_label(config)
      for seed in config.seeds:
        done = run / f"seed_{seed}" / "final.json"
        if not done.is_file():
          continue  # Unfinished seed: not in the table (yet).
        if (label, seed) in origin:
          raise ResultsError(f"{label} seed {seed} is in both {origin[(label, seed)]} and {run}")
        origin[(label, seed)] = run
        data = json.loads(done.read_text())
        seed_result = experiment.SeedResult(seed, data["final"], [tuple(x) for x in data["curve"]],
                                            data.get("gcfl"), data.get("privacy"))
        if label not in merged:
          merged[label] = experiment.ExperimentResult(config, [])
        elif _comparable(merged[label].config) != _comparable(config):
          diff = {k: (v, _comparable(config)[k]) for k, v in _comparable(merged[label].config).items()
                  if _comparable(config)[k] != v}
          raise ResultsError(f"{run}: {label} was run with another configuration than in "
                             f"{origin[next(k for k in origin if k[0] == label)]}: {diff}")
        merged[label].seeds.append(seed_result)
  for r in merged.values():
    r.seeds.sort(key=lambda s: s.seed)
    r.config = r.config.replace_seeds(s.seed for s in r.seeds)
    ids = [set(s.final) for s in r.seeds]
    if any(i != ids[0] for i in ids):
      raise ResultsError(f"{row_label(r.config)}: seeds have different clients")
  if not merged:
    raise ResultsError(f"no finished seed under {', '.join(map(str, folders))}")
  settings = {r.config.setting for r in merged.values()}
  if len(settings) > 1:
    raise ResultsError(f"runs of several settings cannot share a table: {sorted(settings)}")
  return list(merged.values())


def same_seeds(results: Sequence[experiment.ExperimentResult]) -> list[experiment.ExperimentResult]:
  """`results` restricted to the seeds every one of them has finished, so that rows (and gains) compare
  the same model seeds; a ResultsError if no seed is common to all."""
  common = set.intersection(*({s.seed for s in r.seeds} for r in results))
  if not common:
    have = "; ".join(f"{row_label(r.config)}: {','.join(str(s.seed) for s in r.seeds)}" for r in results)
    raise ResultsError(f"no seed is finished in every row ({have})")
  kept = []
  for r in results:
    seeds = [s for s in r.seeds if s.seed in common]
    kept.append(experiment.ExperimentResult(r.config.replace_seeds(s.seed for s in seeds), seeds))
  return kept


@dataclasses.dataclass(frozen=True)
class ResultRow:
  label: str
  seeds: tuple[int, ...]
  mean: float  # %, the papers' aggregate of final test accuracy
  std: float
  best_mean: float | None  # GCFL family: each client's best snapshot (what the reference reports)
  best_std: float | None
  gain: float | None  # vs local, points
  gain_ratio: float | None
  min_gain: float | None  # the lowest client's gain vs local, points (GCFL's tables' "min gain")
  parameters: int
  shared_parameters: int
  paper_mean: float | None
  paper_std: float | None
  epsilon: float | None = None  # DP runs: the privacy spent over the run (at `delta`); inf without noise.
  delta: float | None = None

  @property
  def diff(self) -> float | None:
    return None if self.paper_mean is None else self.mean - self.paper_mean


def _natural_key(label: str) -> list:
  """Sorts numbers inside labels by value (`dp z=4` before `dp z=16`)."""
  return [(0, float(part), "") if re.fullmatch(r"\d+(\.\d+)?", part) else (1, 0.0, part)
          for part in re.split(r"(\d+(?:\.\d+)?)", label) if part]


def _aggregate(per_client: Mapping[str, Sequence[float]]) -> tuple[float, float]:
  return (float(np.mean([np.mean(v) for v in per_client.values()])) * 100,
          float(np.mean([np.std(v) for v in per_client.values()])) * 100)


def results_table(results: Sequence[experiment.ExperimentResult], prepared: cache.PreparedSetting,
                  paper: Mapping[str, anchors.Anchor] | None = None) -> list[ResultRow]:
  """One row per result, in the paper's order (then the algorithm table's); gains vs `local`."""
  order = list(paper or {}) + algorithms.names()
  results = sorted(results, key=lambda r: (order.index(row_label(r.config)) if row_label(r.config) in order
                                           else order.index(r.config.algorithm) + 0.5,
                                           _natural_key(row_label(r.config))))
  rows = []
  base = comparison.comparison_table(results, prepared)
  for r, b in zip(results, base):
    label = row_label(r.config)
    best_mean = best_std = None
    if all(s.gcfl for s in r.seeds):
      best = {cid: [s.gcfl["best_snapshot_accuracy"][cid] for s in r.seeds] for cid in r.seeds[0].final}
      best_mean, best_std = _aggregate(best)
    mean, std = _aggregate(r.per_client())
    anchor = (paper or {}).get(label)
    spent = [s.privacy for s in r.seeds if s.privacy]
    if spent and len({(p["epsilon"], p["delta"]) for p in spent}) != 1:
      raise ResultsError(f"{label}: seeds report different privacy spent ({spent})")
    rows.append(ResultRow(label, tuple(s.seed for s in r.seeds), mean, std, best_mean, best_std, b.gain,
                          b.gain_ratio, b.min_gain, b.parameters, b.shared_parameters,
                          None if anchor is None else anchor[0], None if anchor is None else anchor[1],
                          float(spent[0]["epsilon"]) if spent else None, float(spent[0]["delta"]) if spent else None))
  return rows


def _pm(mean: float | None, std: float | None) -> str:
  if mean is None:
    return ""
  return f"{mean:.2f}" if std is None else f"{mean:.2f} ± {std:.2f}"


def _epsilon(r: ResultRow) -> str:
  if r.epsilon is None:
    return ""
  return ("inf" if math.isinf(r.epsilon) else f"{r.epsilon:.2f}") + f" (δ={r.delta:g})"


def to_markdown(rows: Sequence[ResultRow]) -> str:
  has_best = any(r.best_mean is not None for r in rows)
  has_dp = any(r.epsilon is not None for r in rows)
  head = ["algorithm", "seeds", "ours (final round)"] + (["ours (best snapshot)"] if has_best else []) + [
      "paper", "ours - paper", "gain vs local", "clients with gain >= 0", "min client gain", "parameters",
      "shared"] + (
      ["ε spent"] if has_dp else [])
  lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
  for r in rows:
    cells = [r.label, ",".join(map(str, r.seeds)), _pm(r.mean, r.std)]
    if has_best:
      cells.append(_pm(r.best_mean, r.best_std))
    cells += [_pm(r.paper_mean, r.paper_std), "" if r.diff is None else f"{r.diff:+.2f}",
              "" if r.gain is None else f"{r.gain:+.2f}", "" if r.gain_ratio is None else f"{r.gain_ratio:.2f}",
              "" if r.min_gain is None else f"{r.min_gain:+.2f}", str(r.parameters),
              str(r.shared_parameters)] + ([_epsilon(r)] if has_dp else [])
    lines.append("| " + " | ".join(cells) + " |")
  return "\n".join(lines)


SPLIT_NOTE = {
    "reference": "Split: reference (the papers' own scikit-learn split: the same train/val/test graphs as their code).",
    "numpy": "Split: numpy (tff-graph's earlier NumPy split: stratified 80/10/10 like the papers', but other graphs "
             "in each split than their code).",
}


def split_of(results: Sequence[experiment.ExperimentResult]) -> str:
  """The split all `results` were run on; ResultsError if they differ (they would not be comparable)."""
  splits = sorted({r.config.data.split for r in results})
  if len(splits) != 1:
    raise ResultsError(f"the runs use different splits ({', '.join(splits)}); a table compares runs on one split")
  return splits[0]


def _num(x: float | None) -> str:
  return "" if x is None else f"{x:.2f}"


def write(folder: str | pathlib.Path, rows: Sequence[ResultRow],
          results: Sequence[experiment.ExperimentResult]) -> None:
  """table.csv, table.md and per_client_<label>.csv (final test accuracy per client and seed)."""
  folder = pathlib.Path(folder)
  folder.mkdir(parents=True, exist_ok=True)
  header = ("algorithm,seeds,mean,std,best_snapshot_mean,best_snapshot_std,paper_mean,paper_std,diff,gain,"
            "gain_ratio,min_gain,parameters,shared_parameters,split,epsilon,delta")
  split = split_of(results)
  body = [",".join([r.label, " ".join(map(str, r.seeds)), _num(r.mean), _num(r.std), _num(r.best_mean),
                    _num(r.best_std), _num(r.paper_mean), _num(r.paper_std), _num(r.diff), _num(r.gain),
                    _num(r.gain_ratio), _num(r.min_gain), str(r.parameters), str(r.shared_parameters), split,
                    "" if r.epsilon is None else f"{r.epsilon:.4f}", "" if r.delta is None else f"{r.delta:g}"])
          for r in rows]
  (folder / "table.csv").write_text("\n".join([header, *body]) + "\n")
  (folder / "table.md").write_text(to_markdown(rows) + "\n\n" + SPLIT_NOTE[split] + "\n")
  for r in results:
    seeds = [s.seed for s in r.seeds]
    lines = ["client," + ",".join(f"seed_{s}" for s in seeds) + ",mean,std"]
    for cid, values in r.per_client().items():
      lines.append(",".join([cid, *(f"{v:.4f}" for v in values), f"{np.mean(values):.4f}",
                             f"{np.std(values):.4f}"]))
    (folder / f"per_client_{file_label(row_label(r.config))}.csv").write_text("\n".join(lines) + "\n")
  if any(r.epsilon is not None for r in rows):
    plot_privacy(rows, folder / "privacy.png")


def plot_privacy(rows: Sequence[ResultRow], path: pathlib.Path) -> None:
  """Accuracy (mean ± std over seeds) against the ε spent, one line per algorithm; the rows without DP
  (e.g. the plain algorithm, local, secure aggregation) as horizontal lines."""
  import matplotlib  # pylint: disable=g-import-not-at-top
  matplotlib.use("Agg")
  from matplotlib import pyplot as plt  # pylint: disable=g-import-not-at-top
  dp = [r for r in rows if r.epsilon is not None]
  finite = [r.epsilon for r in dp if math.isfinite(r.epsilon)]
  right = max(finite) * 3 if finite else 10.0  # Where "no noise" (ε = inf) is drawn.
  fig, ax = plt.subplots(figsize=(6.4, 4.2))
  by_algorithm: dict[str, list[ResultRow]] = {}
  for r in dp:  # Label: "<algorithm> dp z=<z> clip=<clip>[ secagg]".
    clip = re.search(r"clip=(\S+)", r.label).group(1)
    by_algorithm.setdefault(f"{r.label.split(' dp ')[0]} (DP, clip {clip})", []).append(r)
  for name, group in by_algorithm.items():
    group.sort(key=lambda r: r.epsilon)
    x = [r.epsilon if math.isfinite(r.epsilon) else right for r in group]
    ax.errorbar(x, [r.mean for r in group], yerr=[r.std for r in group], marker="o", capsize=3, label=name)
    for r, xi in zip(group, x):
      ax.annotate("z=" + re.search(r"z=(\S+)", r.label).group(1), (xi, r.mean), textcoords="offset points",
                  xytext=(4, 4), fontsize=7)
  styles = iter(["--", ":", "-.", (0, (5, 1)), (0, (1, 3))] * 4)
  for r in rows:
    if r.epsilon is None:
      ax.axhline(r.mean, linestyle=next(styles), linewidth=1.2, color="dimgray" if r.label == "local" else "C1",
                 label=f"{r.label} (no DP): {r.mean:.2f}")
  ax.set_xscale("log")
  if not all(math.isfinite(r.epsilon) for r in dp):  # The clip-only points: no noise, no guarantee.
    ax.axvline(right, color="lightgray", linewidth=0.8)
    ax.text(right, ax.get_ylim()[0], " ε=∞", fontsize=7, va="bottom")
  ax.set_xlabel(f"ε spent over the run (δ={dp[0].delta:g}); label: noise multiplier z")
  ax.legend(fontsize=7)
  fig.tight_layout()
  fig.savefig(path, dpi=120)
  plt.close(fig)
