r"""Heterogeneity analysis of a setting (GCFL paper, Section 3): tables and heatmaps.

Writes to --output_dir: properties.csv/.md (graph properties vs G(n, m) random graphs, with p-values),
structure.csv / feature.csv (client x client mean heterogeneity), summary.md (within dataset, within
domain, across domains), heatmap_structure.png / heatmap_feature.png and, with --run_dir pointing at a
GCFL-family run folder of the same setting, within_clusters.csv (within-cluster vs all-client
heterogeneity per seed, the paper's Figure 3).

  python -m programs.heterogeneity --setting=molecules --output_dir=results/heterogeneity-molecules
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
_RUN_DIR = flags.DEFINE_string("run_dir", None, "A GCFL-family run folder of this setting (optional).")
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


def main(argv: list[str]) -> int:
  del argv
  start = time.perf_counter()
  try:
    split = _SPLIT.value
    if _RUN_DIR.value and (pathlib.Path(_RUN_DIR.value) / "config.json").is_file():
      split = config_lib.ExperimentConfig.from_dict(
          json.loads((pathlib.Path(_RUN_DIR.value) / "config.json").read_text())).data.split
    prepared = cache.prepare_setting(_SETTING.value, data_dir=_DATA_DIR.value, cache_dir=_CACHE_DIR.value,
                                     split=split)
  except (tu.TUFormatError, partition.SettingError) as e:
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
  summary = ["| measure | within dataset | within domain | across domains |", "|---|---|---|---|"]
  for label, measure in (("structure", het.structure_measure), ("feature", het.feature_measure)):
    m = het.pairwise_matrix(groups, measure)
    _matrix_csv(out / f"{label}.csv", names, m)
    _heatmap(out / f"heatmap_{label}.png", names, m, f"{label} heterogeneity ({_SETTING.value})")
    if prepared.setting.one_client_per_dataset:
      s = het.domain_summary([c.dataset for c in prepared.clients], m)
      summary.append(f"| {label} | {s['within_dataset']:.3f} | {s['within_domain']:.3f} | {s['across_domains']:.3f} |")
  if _RUN_DIR.value:
    rows = ["seed,measure,within_clusters,all_clients,clusters"]
    for final in sorted(pathlib.Path(_RUN_DIR.value).glob("seed_*/final.json")):
      clusters = json.loads(final.read_text())["gcfl"]["clusters"]
      index = [[names.index(cid) for cid in members] for members in clusters]
      for label, measure in (("structure", het.structure_measure), ("feature", het.feature_measure)):
        within, overall = het.within_vs_all(groups, index, measure)
        rows.append(f"{final.parent.name},{label},{within:.4f},{overall:.4f},\"{clusters}\"")
    (out / "within_clusters.csv").write_text("\n".join(rows) + "\n")
  config = {"setting": _SETTING.value, "graphs_per_client": _GRAPHS.value, "walk_length": _LENGTH.value,
            "num_walks": _WALKS.value, "bins": _BINS.value, "seed": _SEED.value,
            "seconds": round(time.perf_counter() - start, 1),
            "command": "python -m programs.heterogeneity " + " ".join(sys.argv[1:])}
  (out / "summary.md").write_text("\n".join(summary) + "\n\n```\n" + json.dumps(config, indent=1) + "\n```\n")
  print((out / "summary.md").read_text())
  return 0


if __name__ == "__main__":
  app.run(main, flags_parser=cli.parse_flags)
