r"""Heterogeneity analysis of a setting (GCFL paper, Section 3): tables and heatmaps.

Writes to --output_dir: properties.csv/.md (graph properties vs G(n, m) random graphs, with p-values),
structure.csv / feature.csv (client x client mean heterogeneity), summary.md (one client per dataset:
within dataset, within domain, across domains; shards of datasets: within a client vs between clients),
heatmap_structure.png / heatmap_feature.png and, with --run_dir naming
GCFL-family run folders of the same setting (one per algorithm and seed, or one folder holding several
seeds), within_clusters.csv (within-cluster vs all-client heterogeneity of each run's final clusters),
within_clusters.md (mean ± std over the seeds per algorithm) and within_clusters.png (the paper's
Figure 3).

  python -m programs.heterogeneity --setting=molecules --output_dir=results/heterogeneity-molecules
  python -m programs.heterogeneity --setting=molecules --run_dir=runs/.../seed10/gcfl/gcfl,runs/.../seed42/gcfl/gcfl
"""

from __future__ import annotations

import json
import os
import pathlib
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

from absl import app  # noqa: E402
from absl import flags  # noqa: E402

from programs import cli  # noqa: E402
import numpy as np  # noqa: E402

from data_prep import cache  # noqa: E402
from data_prep import partition  # noqa: E402
from data_prep import tu  # noqa: E402
from programs import cli  # noqa: E402
from tff_graph import config as config_lib  # noqa: E402
from tff_graph import heterogeneity as het  # noqa: E402

_SETTING = flags.DEFINE_string("setting", "molecules", "Setting whose clients are compared (see programs.train).")
_GRAPHS = flags.DEFINE_integer("graphs_per_client", 50, "Training graphs sampled per client.", lower_bound=2)
_LENGTH = flags.DEFINE_integer("walk_length", 5, "Steps of each anonymous walk.", lower_bound=1)
_WALKS = flags.DEFINE_integer("num_walks", 500, "Anonymous walks sampled per graph.", lower_bound=1)
_BINS = flags.DEFINE_integer("bins", 20, "Bins of the linked-feature similarity histogram.", lower_bound=2)
_SEED = flags.DEFINE_integer("seed", 0, "Seed of every sample (graphs, walks, random twins).")
_RUN_DIR = flags.DEFINE_list("run_dir", [], "GCFL-family run folders of this setting (optional): their final "
                             "clusters give within_clusters.csv/.md/.png.")
_OUTPUT_DIR = flags.DEFINE_string("output_dir", None, "Output folder (default: results/heterogeneity-<setting>).")
_DATA_DIR = flags.DEFINE_string("data_dir", None, "TU data folder (default: $TFF_GRAPH_DATA).")
_CACHE_DIR = flags.DEFINE_string("cache_dir", None, "Prepared-data cache (default: $TFF_GRAPH_CACHE).")
_SPLIT = flags.DEFINE_enum("split", partition.DEFAULT_SPLIT, list(partition.SPLIT_KINDS),
                           "Client split (as programs.train's --split; a --run_dir's own split is used if it has one).")


def _heatmap(path: pathlib.Path, names: list[str], matrix: np.ndarray, title: str) -> None:
  import matplotlib  # pylint: disable=g-import-not-at-top
  matplotlib.use("Agg")
  from matplotlib import pyplot as plt  # pylint: disable=g-import-not-at-top
  fig, ax = plt.subplots(figsize=(1.0 + 0.6 * len(names), 0.8 + 0.6 * len(names)))
  im = ax.imshow(matrix, cmap="viridis")
  ax.set_xticks(range(len(names)), names, rotation=60, ha="right")
  ax.set_yticks(range(len(names)), names)
  for i in range(len(names)):
    for j in range(len(names)):
      ax.text(j, i, f"{matrix[i, j]:.2f}", ha="center", va="center", color="w", fontsize=7)
  ax.set_title(title)
  fig.colorbar(im, ax=ax)
  fig.tight_layout()
  fig.savefig(path, dpi=100)
  plt.close(fig)


def _matrix_csv(path: pathlib.Path, names: list[str], matrix: np.ndarray) -> None:
  rows = ["client," + ",".join(names)]
  rows += [f"{n}," + ",".join(f"{v:.4f}" for v in row) for n, row in zip(names, matrix)]
  path.write_text("\n".join(rows) + "\n")


class _RunError(ValueError):
  pass


def _gcfl_runs(folders: list[str], setting: str
               ) -> list[tuple[config_lib.ExperimentConfig | None, pathlib.Path, list[list[str]]]]:
  """(config or None for a folder without one, final.json, its final clusters) of every finished seed."""
  found = []
  for folder in map(pathlib.Path, folders):
    finals = sorted(folder.glob("seed_*/final.json"))
    if not finals:
      raise _RunError(f"--run_dir {folder} has no finished seed (seed_*/final.json)")
    config = None
    if (folder / "config.json").is_file():
      config = config_lib.ExperimentConfig.from_dict(json.loads((folder / "config.json").read_text()))
      if config.setting != setting:
        raise _RunError(f"--run_dir {folder} is a run on {config.setting}, not --setting={setting}")
    for final in finals:
      clusters = (json.loads(final.read_text()).get("gcfl") or {}).get("clusters")
      if not clusters:
        raise _RunError(f"{final} has no clusters (not a GCFL-family run)")
      found.append((config, final, clusters))
  return found


def _within_outputs(out: pathlib.Path, measured: list[tuple]) -> None:
  """within_clusters.csv (every run), .md (mean ± std over seeds per algorithm), .png (GCFL Fig. 3)."""
  rows = ["algorithm,seed,measure,within_clusters,all_clients,clusters"]
  rows += [f"{a},{s},{m},{w:.4f},{o:.4f},\"{c}\"" for a, s, m, w, o, c in measured]
  (out / "within_clusters.csv").write_text("\n".join(rows) + "\n")
  algorithms = list(dict.fromkeys(a for a, *_ in measured))
  summary = {(a, m): np.array([(w, o) for a2, _, m2, w, o, _ in measured if (a2, m2) == (a, m)])
             for a in algorithms for m in ("structure", "feature")}
  lines = ["| algorithm | measure | seeds | within clusters | all clients |", "|---|---|---|---|---|"]
  for (a, m), v in summary.items():
    lines.append(f"| {a} | {m} | {len(v)} | {np.nanmean(v[:, 0]):.3f} ± {np.nanstd(v[:, 0]):.3f} | "
                 f"{v[:, 1].mean():.3f} ± {v[:, 1].std():.3f} |")
  (out / "within_clusters.md").write_text("\n".join(lines) + "\n")
  import matplotlib  # pylint: disable=g-import-not-at-top
  matplotlib.use("Agg")
  from matplotlib import pyplot as plt  # pylint: disable=g-import-not-at-top
  fig, axes = plt.subplots(1, 2, figsize=(4 + 1.5 * len(algorithms), 3.5))
  x = np.arange(len(algorithms))
  for ax, m in zip(axes, ("structure", "feature")):
    for k, (label, column) in enumerate((("within clusters", 0), ("all clients", 1))):
      v = [summary[(a, m)][:, column] for a in algorithms]
      ax.bar(x + (k - 0.5) * 0.38, [np.nanmean(e) for e in v], 0.38, yerr=[np.nanstd(e) for e in v],
             label=label, capsize=3)
    ax.set_xticks(x, algorithms)
    ax.set_title(f"{m} heterogeneity")
  axes[0].legend(fontsize=8)
  fig.tight_layout()
  tmp = out / ".within_clusters.tmp.png"
  fig.savefig(tmp, dpi=100)
  plt.close(fig)
  tmp.replace(out / "within_clusters.png")


def main(argv: list[str]) -> int:
  del argv
  start = time.perf_counter()
  try:
    runs = _gcfl_runs(_RUN_DIR.value, _SETTING.value)
    splits = {c.data.split for c, _, _ in runs if c is not None}
    if len(splits) > 1:
      raise partition.SettingError(f"--run_dir mixes runs on the {' and '.join(sorted(splits))} splits")
    split = splits.pop() if splits else _SPLIT.value
    prepared = cache.prepare_setting(_SETTING.value, data_dir=_DATA_DIR.value, cache_dir=_CACHE_DIR.value,
                                     split=split)
    for _, final, clusters in runs:  # Checked before anything is written.
      unknown = sorted({cid for members in clusters for cid in members} - {c.client_id for c in prepared.clients})
      if unknown:
        raise _RunError(f"{final}: clients {unknown} are not clients of {_SETTING.value}")
  except (tu.TUFormatError, partition.SettingError, _RunError) as e:
    print(f"error: {e}", file=sys.stderr)
    return 2
  out = pathlib.Path(_OUTPUT_DIR.value or f"results/heterogeneity-{_SETTING.value.replace(':', '_')}")
  out.mkdir(parents=True, exist_ok=True)
  rng = np.random.default_rng(_SEED.value)
  datasets = {n: cache.load_dataset(n, data_dir=_DATA_DIR.value, cache_dir=_CACHE_DIR.value)
              for n in prepared.setting.datasets}
  names = [c.client_id for c in prepared.clients]
  groups, prop_rows = [], []
  for c in prepared.clients:
    train = np.asarray(c.graph_indices["train"])
    chosen = np.sort(rng.choice(train, size=min(_GRAPHS.value, len(train)), replace=False))
    ds = datasets[c.dataset]
    groups.append(het.profile_graphs(ds, chosen, length=_LENGTH.value, num_walks=_WALKS.value,
                                     bins=_BINS.value, rng=rng))
    graphs = [het.to_networkx(ds.data, int(g)) for g in chosen]
    for r in het.compare_with_random(graphs, rng):
      prop_rows.append((c.client_id, r.name, r.real, r.random, r.p_value))
  (out / "properties.csv").write_text("client,property,real,random,p_value\n" + "".join(
      f"{c},{n},{a:.4f},{b:.4f},{p:.3g}\n" for c, n, a, b, p in prop_rows))
  (out / "properties.md").write_text(
      "| client | property | real | G(n, m) | p-value |\n|---|---|---|---|---|\n" + "".join(
          f"| {c} | {n} | {a:.3f} | {b:.3f} | {p:.2g} |\n" for c, n, a, b, p in prop_rows))
  if prepared.setting.one_client_per_dataset:  # GCFL Table 2's layout.
    summary = ["| measure | within dataset | within domain | across domains |", "|---|---|---|---|"]
  else:  # Shards (PROTEINS:10, NCI1:30): the diagonal vs the pairs of clients.
    summary = ["| measure | within a client | between clients |", "|---|---|---|"]
  matrices = {}
  for label, measure in (("structure", het.structure_measure), ("feature", het.feature_measure)):
    m = matrices[label] = het.pairwise_matrix(groups, measure)
    _matrix_csv(out / f"{label}.csv", names, m)
    _heatmap(out / f"heatmap_{label}.png", names, m, f"{label} heterogeneity ({_SETTING.value})")
    if prepared.setting.one_client_per_dataset:
      s = het.domain_summary([c.dataset for c in prepared.clients], m)
      summary.append(f"| {label} | {s['within_dataset']:.3f} | {s['within_domain']:.3f} | {s['across_domains']:.3f} |")
    else:
      s = het.shard_summary(m)
      summary.append(f"| {label} | {s['within_client']:.3f} | {s['between_clients']:.3f} |")
  if runs:
    measured = []  # (algorithm, seed folder, measure, within, all, clusters)
    for config, final, clusters in runs:
      algorithm = config.algorithm if config is not None else final.parent.parent.name
      index = [[names.index(cid) for cid in members] for members in clusters]
      for label, m in matrices.items():  # The matrices above: not recomputed per run.
        within, overall = het.within_vs_all_of(m, index)
        measured.append((algorithm, final.parent.name, label, within, overall, clusters))
    _within_outputs(out, measured)
  config = {"setting": _SETTING.value, "graphs_per_client": _GRAPHS.value, "walk_length": _LENGTH.value,
            "num_walks": _WALKS.value, "bins": _BINS.value, "seed": _SEED.value,
            "seconds": round(time.perf_counter() - start, 1),
            "command": "python -m programs.heterogeneity " + " ".join(sys.argv[1:])}
  (out / "summary.md").write_text("\n".join(summary) + "\n\n```\n" + json.dumps(config, indent=1) + "\n```\n")
  print((out / "summary.md").read_text())
  return 0


if __name__ == "__main__":
  app.run(main, flags_parser=cli.parse_flags)
