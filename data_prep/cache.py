"""Prepares a setting once: each client's train/val/test graphs as TFRecords of GraphTensors.

Two cache levels under `cache_dir` (argument, else $TFF_GRAPH_CACHE, else ~/.cache/tff_graph):

* `datasets/<NAME>-<key>.npz`: the parsed dataset plus its RWSE (parsing COLLAB and the RWSE of DD
  take seconds; they are done once per dataset, not once per setting).
* `settings/<setting>-seed<seed>-<key>/`: `manifest.json`, `<NAME>.schema.pbtxt` per dataset and
  `<client_id>/{train,val,test}.tfrecord.gz`.

A key hashes what the files depend on: the source files' sizes and modification times, n_rw, n_dg,
the split seed and `FORMAT_VERSION`. A current cache is reused; anything is first written under a
temporary name in the same folder and renamed into place only when complete, so an error or a kill
never leaves a half-written cache that looks current.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import pathlib
import shutil
import tempfile
from typing import Any

import numpy as np

from data_prep import features as features_lib
from data_prep import graph_tensor
from data_prep import partition
from data_prep import structure
from data_prep import tu

FORMAT_VERSION = 1
CACHE_DIR_ENV = "TFF_GRAPH_CACHE"
SPLITS = ("train", "val", "test")


def resolve_cache_dir(cache_dir: str | os.PathLike[str] | None) -> pathlib.Path:
  chosen = cache_dir or os.environ.get(CACHE_DIR_ENV) or "~/.cache/tff_graph"
  return pathlib.Path(chosen).expanduser()


def _source_fingerprint(data_dir: pathlib.Path, name: str) -> str:
  folder = data_dir / name
  files = sorted(folder.glob(f"{name}_*.txt")) if folder.is_dir() else [data_dir / f"{name}.zip"]
  missing = [f for f in files if not f.is_file()]
  if not files or missing:
    tu.read_tu_dataset(name, data_dir)  # Raises the reader's own clear error.
  parts = [f"{f.name}:{f.stat().st_size}:{f.stat().st_mtime_ns}" for f in files]
  return "|".join(parts)


def _key(*parts: Any) -> str:
  return hashlib.sha1(json.dumps(parts, sort_keys=True).encode()).hexdigest()[:12]


@dataclasses.dataclass(frozen=True)
class PreparedDataset:
  """A dataset with everything a GraphTensor needs, as NumPy arrays."""

  data: tu.TUDataset
  features: np.ndarray
  feature_kind: features_lib.FeatureKind
  rwse: np.ndarray
  dse: np.ndarray

  @property
  def name(self) -> str:
    return self.data.name

  def encode(self, g: int) -> bytes:
    """Serialized tf.train.Example of graph g."""
    d = self.data
    lo, hi = d.node_offsets[g], d.node_offsets[g + 1]
    edges = d.edges[d.edge_offsets[g]:d.edge_offsets[g + 1]] - lo
    return graph_tensor.encode_graph(features=self.features[lo:hi], rwse=self.rwse[lo:hi],
                                     dse=self.dse[lo:hi], edges=edges,
                                     label=int(d.graph_labels[g]))


def _atomic_write_npz(path: pathlib.Path, arrays: dict[str, np.ndarray]) -> None:
  path.parent.mkdir(parents=True, exist_ok=True)
  fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.stem}.", suffix=".npz")
  try:
    with os.fdopen(fd, "wb") as f:
      np.savez(f, **arrays)
    os.replace(tmp, path)
  finally:
    if os.path.exists(tmp):
      os.remove(tmp)


def load_dataset(name: str, *, data_dir: str | os.PathLike[str] | None = None,
                 cache_dir: str | os.PathLike[str] | None = None, n_rw: int = structure.N_RW,
                 n_dg: int = structure.N_DG) -> PreparedDataset:
  """Reads (or loads from cache) dataset `name` with its node features and structure embeddings."""
  if name not in partition.ALL_DATASETS:
    raise partition.SettingError(f"unknown dataset {name!r}; known: {', '.join(partition.ALL_DATASETS)}")
  source = tu.resolve_data_dir(data_dir)
  key = _key(FORMAT_VERSION, _source_fingerprint(source, name), n_rw)
  path = resolve_cache_dir(cache_dir) / "datasets" / f"{name}-{key}.npz"
  if path.is_file():
    with np.load(path) as z:
      data = tu.TUDataset(
          name=name, node_offsets=z["node_offsets"], edges=z["edges"],
          edge_offsets=z["edge_offsets"], graph_labels=z["graph_labels"],
          raw_label_values=z["raw_label_values"],
          node_labels=z["node_labels"] if "node_labels" in z else None,
          node_attributes=z["node_attributes"] if "node_attributes" in z else None,
          num_self_loops=int(z["num_self_loops"]))
      rwse = z["rwse"]
  else:
    data = tu.read_tu_dataset(name, source)
    rwse = structure.rwse(data, n_rw)
    arrays = {f.name: getattr(data, f.name) for f in dataclasses.fields(data)
              if isinstance(getattr(data, f.name), np.ndarray)}
    arrays["num_self_loops"] = np.asarray(data.num_self_loops)
    arrays["rwse"] = rwse
    _atomic_write_npz(path, arrays)
  feats, kind = features_lib.node_features(data)
  return PreparedDataset(data=data, features=feats, feature_kind=kind, rwse=rwse,
                         dse=structure.dse(data, n_dg))


@dataclasses.dataclass(frozen=True)
class ClientData:
  """One prepared client: where its splits are and what they hold."""

  client_id: str
  dataset: str
  num_classes: int
  feature_dim: int
  files: dict[str, str]
  sizes: dict[str, int]
  schema_path: str
  stats: dict[str, Any]
  graph_indices: dict[str, list[int]] = dataclasses.field(default_factory=dict)  # Into its dataset.


@dataclasses.dataclass(frozen=True)
class PreparedSetting:
  setting: partition.Setting
  seed: int
  n_rw: int
  n_dg: int
  root: pathlib.Path
  clients: tuple[ClientData, ...]


def _client_stats(ds: PreparedDataset, split: partition.ClientSplit) -> dict[str, Any]:
  sizes = ds.data.graph_sizes()
  edges = ds.data.graph_edge_counts()
  every = np.concatenate([split.train, split.val, split.test])
  return {
      "client": split.client_id, "dataset": ds.name,
      "train": len(split.train), "val": len(split.val), "test": len(split.test),
      "avg_nodes": float(sizes[every].mean()), "avg_edges": float(edges[every].mean()),
      "classes": ds.data.num_classes, "feature_dim": int(ds.features.shape[1]),
      "feature_kind": ds.feature_kind.value,
      "train_class_counts": np.bincount(ds.data.graph_labels[split.train],
                                        minlength=ds.data.num_classes).tolist(),
  }


def prepare_setting(setting: partition.Setting | str, *,
                    data_dir: str | os.PathLike[str] | None = None,
                    cache_dir: str | os.PathLike[str] | None = None,
                    seed: int = partition.DEFAULT_SPLIT_SEED, n_rw: int = structure.N_RW,
                    n_dg: int = structure.N_DG) -> PreparedSetting:
  """Partitions `setting` and writes every client's splits once; reuses a current cache.

  Raises:
    partition.SettingError: unknown setting or dataset name.
    tu.TUFormatError: missing data folder or a bad dataset file (nothing is left in the cache).
  """
  if isinstance(setting, str):
    setting = partition.parse_setting(setting)
  source = tu.resolve_data_dir(data_dir)
  fingerprints = {n: _source_fingerprint(source, n) for n in setting.datasets}
  key = _key(FORMAT_VERSION, dataclasses.asdict(setting), seed, n_rw, n_dg, fingerprints)
  safe = setting.name.replace(":", "_").replace("@", "_k")
  root = resolve_cache_dir(cache_dir) / "settings" / f"{safe}-seed{seed}-{key}"
  manifest = root / "manifest.json"
  if not manifest.is_file():
    _write_setting(setting, root, source=source, cache_dir=cache_dir, seed=seed, n_rw=n_rw, n_dg=n_dg)
  info = json.loads(manifest.read_text())
  clients = tuple(
      ClientData(client_id=c["client_id"], dataset=c["dataset"], num_classes=c["num_classes"],
                 feature_dim=c["feature_dim"],
                 files={s: str(root / p) for s, p in c["files"].items()}, sizes=c["sizes"],
                 schema_path=str(root / c["schema"]), stats=c["stats"],
                 graph_indices=c["graph_indices"])
      for c in info["clients"])
  return PreparedSetting(setting=setting, seed=seed, n_rw=n_rw, n_dg=n_dg, root=root, clients=clients)


def _write_setting(setting: partition.Setting, root: pathlib.Path, *, source: pathlib.Path,
                   cache_dir: str | os.PathLike[str] | None, seed: int, n_rw: int, n_dg: int) -> None:
  root.parent.mkdir(parents=True, exist_ok=True)
  tmp = pathlib.Path(tempfile.mkdtemp(dir=root.parent, prefix=f".{root.name}.tmp-"))
  try:
    prepared = {n: load_dataset(n, data_dir=source, cache_dir=cache_dir, n_rw=n_rw, n_dg=n_dg)
                for n in setting.datasets}
    splits = partition.partition(
        setting, {n: d.data.graph_labels for n, d in prepared.items()}, seed=seed)
    for name, ds in prepared.items():
      schema = graph_tensor.graph_schema(ds.features.shape[1], n_rw, n_dg)
      (tmp / f"{name}.schema.pbtxt").write_text(graph_tensor.schema_to_text(schema))
    clients = []
    for split in splits:
      ds = prepared[split.dataset]
      (tmp / split.client_id).mkdir()
      files, sizes = {}, {}
      for part in SPLITS:
        rel = f"{split.client_id}/{part}.tfrecord.gz"
        idx = getattr(split, part)
        sizes[part] = graph_tensor.write_tfrecord(tmp / rel, (ds.encode(int(g)) for g in idx))
        files[part] = rel
      clients.append({
          "client_id": split.client_id, "dataset": split.dataset,
          "num_classes": ds.data.num_classes, "feature_dim": int(ds.features.shape[1]),
          "files": files, "sizes": sizes, "schema": f"{split.dataset}.schema.pbtxt",
          "stats": _client_stats(ds, split),
          "graph_indices": {p: getattr(split, p).tolist() for p in SPLITS},
      })
    (tmp / "manifest.json").write_text(json.dumps({
        "format_version": FORMAT_VERSION, "setting": dataclasses.asdict(setting), "seed": seed,
        "n_rw": n_rw, "n_dg": n_dg, "clients": clients}, indent=1))
    if root.exists():  # A concurrent writer finished first: keep its copy.
      shutil.rmtree(tmp)
    else:
      os.replace(tmp, root)
  except BaseException:
    shutil.rmtree(tmp, ignore_errors=True)
    raise


def statistics_table(prepared: PreparedSetting) -> list[dict[str, Any]]:
  """Per-client statistics: graphs per split, avg nodes/edges, classes, feature width."""
  return [dict(c.stats) for c in prepared.clients]


def format_table(rows: list[dict[str, Any]], columns: list[str]) -> str:
  """A plain-text table (for programs; the library returns the rows)."""
  cells = [[f"{r[c]:.2f}" if isinstance(r[c], float) else str(r[c]) for c in columns] for r in rows]
  widths = [max(len(c), *(len(row[i]) for row in cells)) for i, c in enumerate(columns)]
  lines = ["  ".join(c.ljust(w) for c, w in zip(columns, widths))]
  lines += ["  ".join(v.ljust(w) for v, w in zip(row, widths)) for row in cells]
  return "\n".join(lines)
