"""The papers' figures from finished run folders (each function returns what it plotted).

* `convergence`: a metric of the released evaluations (default the average test accuracy; GCFL's
  Fig. 4 uses the test loss) against the round, per algorithm, mean ± std over seeds as a band
  (FedStar Fig. 3);
* `gradient_norms`: every client's per-round norm sequence of one GCFL run (`last_grad_norm`, or the
  update norm GCFL+dWs uses) with the rounds of its cluster splits marked (GCFL Fig. 1);
* `violins`: the distribution over clients of each client's final test accuracy (mean over seeds),
  per algorithm (GCFL Appendix D);
* `scaling`: the average final test accuracy against the number of clients the setting splits the
  same data into (FedStar's CHEM@k sweep), per algorithm, mean ± std over seeds.

Run folders are the ones `programs.train` / `programs.compare` write (as for `tff_graph.results`);
only finished seeds (`seed_<s>/final.json`) are used, rows are labelled by `results.row_label`.
"""

from __future__ import annotations

import csv
import json
import pathlib
from typing import Sequence

import numpy as np

from data_prep import partition
from tff_graph import experiment
from tff_graph import results


class FigureError(ValueError):
  """Run folders that cannot make the figure (named in the message)."""


def _finished(folders: Sequence[str | pathlib.Path]
              ) -> dict[str, list[tuple[pathlib.Path, experiment.ExperimentConfig]]]:
  """Row label -> (`seed_<s>` folder, its run's config) of every finished seed, in seed order."""
  out: dict[str, list[tuple[int, pathlib.Path, experiment.ExperimentConfig]]] = {}
  for top in folders:
    try:
      runs = list(results._run_folders(pathlib.Path(top)))  # pylint: disable=protected-access
    except results.ResultsError as e:
      raise FigureError(str(e)) from None
    for run in runs:
      record = json.loads((run / "config.json").read_text())
      record.pop("components", None)
      config = experiment.ExperimentConfig.from_dict(record)
      for seed in config.seeds:
        folder = run / f"seed_{seed}"
        if (folder / "final.json").is_file():
          out.setdefault(results.row_label(config), []).append((seed, folder, config))
  if not out:
    raise FigureError(f"no finished seed under {', '.join(map(str, folders))}")
  return {label: [(f, c) for _, f, c in sorted(seeds, key=lambda x: x[:2])] for label, seeds in out.items()}


def finished_seeds(folders: Sequence[str | pathlib.Path]) -> dict[str, list[pathlib.Path]]:
  """Row label -> the `seed_<s>` folders of its finished seeds (in seed order)."""
  return {label: [f for f, _ in seeds] for label, seeds in _finished(folders).items()}


def read_rounds(path: pathlib.Path) -> dict[int, dict[str, float]]:
  """A released metrics CSV (`round` key column) as round -> {column: value}; a round released twice
  (a resumed run repeats the rounds after its checkpoint) keeps its last row."""
  if not path.is_file():
    raise FigureError(f"{path} is missing")
  rows: dict[int, dict[str, float]] = {}
  with open(path, newline="") as f:
    for row in csv.DictReader(f):
      rows[int(float(row["round"]))] = {k: float(v) for k, v in row.items() if k != "round" and v not in ("", None)}
  return rows


def _plt():
  import matplotlib  # pylint: disable=g-import-not-at-top
  matplotlib.use("Agg")
  from matplotlib import pyplot as plt  # pylint: disable=g-import-not-at-top
  return plt


def _save(fig, ax, path, title: str | None, **legend) -> None:
  """Title, legend (its keyword arguments; none: no legend), tight layout, PNG at 120 dpi, closed."""
  if title:
    ax.set_title(title)
  if legend:
    ax.legend(**legend)
  fig.tight_layout()
  fig.savefig(path, dpi=120)
  _plt().close(fig)


def convergence(folders: Sequence[str | pathlib.Path], path: str | pathlib.Path, *,
                metric: str = "average/test_accuracy", title: str | None = None) -> dict[str, dict[str, np.ndarray]]:
  """Mean ± std over seeds of `metric` per evaluated round, per row label (rounds every seed evaluated)."""
  series = {}
  for label, seeds in finished_seeds(folders).items():
    per_seed = [read_rounds(s / "eval_metrics.csv") for s in seeds]
    rounds = sorted(set.intersection(*(set(r for r, v in p.items() if metric in v) for p in per_seed)))
    if not rounds:
      raise FigureError(f"{label}: no round with {metric} in every seed's eval_metrics.csv")
    values = np.array([[p[r][metric] for r in rounds] for p in per_seed])
    series[label] = {"round": np.array(rounds), "mean": values.mean(0), "std": values.std(0),
                     "seeds": np.array([int(s.name.split("_")[1]) for s in seeds])}
  scale = 100.0 if metric.endswith("accuracy") else 1.0
  plt = _plt()
  fig, ax = plt.subplots(figsize=(6.4, 4.2))
  for label, s in series.items():
    mean, std = s["mean"] * scale, s["std"] * scale
    ax.plot(s["round"], mean, label=f"{label} ({len(s['seeds'])} seeds)")
    ax.fill_between(s["round"], mean - std, mean + std, alpha=0.2)
  ax.set_xlabel("round")
  ax.set_ylabel(metric.replace("average/", "average ") + (" (%)" if scale == 100.0 else ""))
  _save(fig, ax, path, title, fontsize=7)
  return series


def gradient_norms(seed_folder: str | pathlib.Path, path: str | pathlib.Path, *, metric: str = "last_grad_norm",
                   title: str | None = None) -> dict[str, object]:
  """Every client's `metric` per round from one seed folder of a GCFL run, with its split rounds."""
  seed_folder = pathlib.Path(seed_folder)
  final = seed_folder / "final.json"
  if not final.is_file():
    raise FigureError(f"{seed_folder} is not a finished seed folder (no final.json)")
  gcfl = json.loads(final.read_text()).get("gcfl")
  if not gcfl:
    raise FigureError(f"{seed_folder} is not a run of the GCFL family (no cluster record in final.json)")
  rows = read_rounds(seed_folder / "train_metrics.csv")
  rounds = sorted(rows)
  clients = sorted({k.rsplit("/", 1)[0] for k in rows[rounds[0]] if k.endswith("/" + metric)
                    and not k.startswith("server/")})
  if not clients:
    raise FigureError(f"{seed_folder}/train_metrics.csv has no <client>/{metric} column")
  norms = {c: np.array([rows[r].get(f"{c}/{metric}", np.nan) for r in rounds]) for c in clients}
  splits = [(int(s["round"]), [len(side) for side in s["into"]]) for s in gcfl["splits"]]
  plt = _plt()
  fig, ax = plt.subplots(figsize=(6.4, 4.2))
  for c in clients:
    ax.plot(rounds, norms[c], linewidth=1, label=c)
  span, level, last = max(rounds[-1] - rounds[0], 1), 0, None
  for r, sizes in splits:
    ax.axvline(r, color="black", linestyle="--", linewidth=0.8)
    # Splits a few rounds apart (IMDB-BINARY:10, NCI1:30 split every few rounds): labels step down a line.
    level = (level + 1) % 8 if last is not None and r - last < 0.08 * span else 0
    last = r
    ax.annotate(f"split {'+'.join(map(str, sizes))}", (r, ax.get_ylim()[1]), textcoords="offset points",
                xytext=(2, -10 - 8 * level), fontsize=7)
  ax.set_xlabel("round")
  ax.set_ylabel(metric.replace("_", " "))
  ax.set_yscale("log")
  _save(fig, ax, path, title, fontsize=6, ncol=2)
  return {"round": np.array(rounds), "norms": norms, "splits": splits}


def violins(folders: Sequence[str | pathlib.Path], path: str | pathlib.Path, *,
            title: str | None = None) -> dict[str, np.ndarray]:
  """Per row label: each client's final test accuracy (%), mean over its finished seeds."""
  data = {}
  for label, seeds in finished_seeds(folders).items():
    finals = [json.loads((s / "final.json").read_text())["final"] for s in seeds]
    clients = sorted(finals[0])
    data[label] = np.array([np.mean([f[c]["test_accuracy"] for f in finals]) * 100 for c in clients])
  plt = _plt()
  fig, ax = plt.subplots(figsize=(max(4.0, 1.1 * len(data) + 1), 4.2))
  ax.violinplot(list(data.values()), showmedians=True)
  for i, v in enumerate(data.values(), start=1):
    ax.scatter(np.full(len(v), i), v, s=8, color="black", zorder=3)
  ax.set_xticks(range(1, len(data) + 1), list(data), rotation=30, ha="right", fontsize=8)
  ax.set_ylabel("client test accuracy (%), mean over seeds")
  _save(fig, ax, path, title)
  return data


def scaling(folders: Sequence[str | pathlib.Path], path: str | pathlib.Path, *,
            title: str | None = None) -> dict[str, dict[str, np.ndarray]]:
  """Per row label: the client counts of its runs and, at each, the mean and std over seeds of the
  seed's average final test accuracy over all clients (%); every seed's count is its final.json's.

  A client count reached by only some of a label's runs is drawn with the seeds it has ("seeds" holds
  how many); a label whose runs all hold one client count is refused (no curve to draw).
  """
  points: dict[str, dict[int, list[float]]] = {}
  first = None  # ((datasets, split), run folder) of the first run: every other run must match it
  for label, seeds in _finished(folders).items():
    for s, config in seeds:
      key = (tuple(sorted(partition.parse_setting(config.data.setting).datasets)), config.data.split)
      first = first or (key, s.parent)
      if key != first[0]:
        a, run = first
        raise FigureError(f"a scaling curve splits the same data over more clients, but {run} holds "
                          f"{', '.join(a[0])} ({a[1]} split) and {s.parent} {', '.join(key[0])} ({key[1]} split)")
      final = json.loads((s / "final.json").read_text())["final"]
      points.setdefault(label, {}).setdefault(len(final), []).append(
          float(np.mean([c["test_accuracy"] for c in final.values()])) * 100)
  series = {}
  for label, by_count in points.items():
    if len(by_count) < 2:
      raise FigureError(f"{label}: every run has {next(iter(by_count))} clients; a scaling curve needs runs "
                        "of the same data split over different numbers of clients")
    counts = sorted(by_count)
    series[label] = {"clients": np.array(counts),
                     "mean": np.array([np.mean(by_count[n]) for n in counts]),
                     "std": np.array([np.std(by_count[n]) for n in counts]),
                     "seeds": np.array([len(by_count[n]) for n in counts])}
  plt = _plt()
  fig, ax = plt.subplots(figsize=(6.4, 4.2))
  for label, s in series.items():
    ax.errorbar(s["clients"], s["mean"], yerr=s["std"], marker="o", capsize=3,
                label=f"{label} ({int(s['seeds'].min())}-{int(s['seeds'].max())} seeds per point)"
                if s["seeds"].min() != s["seeds"].max() else f"{label} ({int(s['seeds'][0])} seeds)")
  counts = sorted({int(n) for s in series.values() for n in s["clients"]})
  ax.set_xscale("log")
  ax.set_xticks(counts, [str(n) for n in counts])
  ax.minorticks_off()
  ax.set_xlabel("clients")
  ax.set_ylabel("average final test accuracy (%), mean ± std over seeds")
  _save(fig, ax, path, title, fontsize=7)
  return series
