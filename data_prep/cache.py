"""Prepares a setting once: each client's train/val/test graphs as TFRecords of GraphTensors.

Two cache levels under `cache_dir` (argument, else $TFF_GRAPH_CACHE, else ~/.cache/tff_graph):

* `datasets/<NAME>-<key>.npz`: the parsed dataset plus its RWSE (parsing COLLAB and the RWSE of DD
  take seconds; they are done once per dataset, not once per setting).
* `settings/<setting>-seed<seed>-<key>/`: `manifest.json`, `<NAME>.schema.pbtxt` per dataset and
  `<client_id>/{train,val,test}.tfrecord` (uncompressed: every client re-reads its files every round, and
  inflating them cost ~5 % of a FedStar CHEM round; the page cache keeps them in memory).

A key hashes what the files depend on: the source's content fingerprint (the zip members' CRC-32s, a
SHA-1 of a folder's files, or of an in-memory dataset's arrays), n_rw, n_dg, the split kind and seed,
the feature options, the family of NumPy's `eigh` kernels (`cpu_kernels.blas_family`: the RWSE's and
Laplacian eigenvectors' last bits follow it) and `FORMAT_VERSION` (datasets) / `SETTING_FORMAT_VERSION`
(settings). A current cache is reused; anything is first written under a
temporary name in the same folder and renamed into place only when complete, so an error or a kill
never leaves a half-written cache that looks current.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import pathlib
import re
import shutil
import tempfile
import zipfile
from typing import Any, Mapping

from absl import logging
import numpy as np

from data_prep import cpu_kernels
from data_prep import features as features_lib
from data_prep import graph_tensor
from data_prep import partition
from data_prep import structure
from data_prep import tu

FORMAT_VERSION = 2
SETTING_FORMAT_VERSION = 3  # 3: uncompressed TFRecords (2: GZIP).
CACHE_DIR_ENV = "TFF_GRAPH_CACHE"
SPLITS = ("train", "val", "test")


def resolve_cache_dir(cache_dir: str | os.PathLike[str] | None) -> pathlib.Path:
  chosen = cache_dir or os.environ.get(CACHE_DIR_ENV) or "~/.cache/tff_graph"
  return pathlib.Path(chosen).expanduser()


def _array_fingerprint(data: tu.TUDataset) -> str:
  """Content fingerprint of an in-memory dataset."""
  digest = hashlib.sha1(data.name.encode())
  for f in dataclasses.fields(data):
    value = getattr(data, f.name)
    if isinstance(value, np.ndarray):
      digest.update(f"{f.name}:{value.dtype}:{value.shape};".encode())
      digest.update(np.ascontiguousarray(value).tobytes())
  return digest.hexdigest()


def _file_digest(path: pathlib.Path) -> str:
  digest = hashlib.sha1()
  with open(path, "rb") as f:
    for chunk in iter(lambda: f.read(1 << 24), b""):
      digest.update(chunk)
  return digest.hexdigest()


def _verify(root: pathlib.Path) -> str | None:
  """None if the setting entry under `root` is complete and intact, else what is wrong with it."""
  try:
    info = json.loads((root / "manifest.json").read_text())
  except (OSError, ValueError) as e:
    return f"manifest.json unreadable ({e})"
  if info.get("format_version") != SETTING_FORMAT_VERSION or "checksums" not in info:
    return "written by another version"
  for rel, (size, digest) in info["checksums"].items():
    path = root / rel
    try:
      if path.stat().st_size != size:
        return f"{rel} has {path.stat().st_size} bytes, {size} were written"
      if _file_digest(path) != digest:
        return f"{rel} does not match its checksum"
    except OSError as e:
      return f"{rel} cannot be read ({e.strerror or e})"
  return None


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
  lap: np.ndarray | None = None  # Laplacian PE [N, n_lap], when the setting asks for it.
  spd: np.ndarray | None = None  # Shortest-path-distance histogram [N, n_spd], likewise.

  @property
  def name(self) -> str:
    return self.data.name

  @property
  def attribute_columns(self) -> slice | None:
    return features_lib.attribute_columns(self.data, self.feature_kind, self.features.shape[1])

  def node_indices(self, graphs: np.ndarray) -> np.ndarray:
    """The (global) node ids of the given graphs."""
    d = self.data
    return np.concatenate([np.arange(d.node_offsets[g], d.node_offsets[g + 1]) for g in graphs] or
                          [np.zeros(0, np.int64)])

  def encode(self, g: int, scale: tuple[slice, np.ndarray, np.ndarray] | None = None) -> bytes:
    """Serialized tf.train.Example of graph g; `scale` = (columns, mean, std) standardises attributes."""
    d = self.data
    lo, hi = d.node_offsets[g], d.node_offsets[g + 1]
    edges = d.edges[d.edge_offsets[g]:d.edge_offsets[g + 1]] - lo
    x = self.features[lo:hi]
    if scale is not None:
      columns, mean, std = scale
      x = x.copy()
      x[:, columns] = ((x[:, columns] - mean) / std).astype(np.float32)
    return graph_tensor.encode_graph(features=x, rwse=self.rwse[lo:hi], dse=self.dse[lo:hi], edges=edges,
                                     label=int(d.graph_labels[g]),
                                     lap=None if self.lap is None else self.lap[lo:hi],
                                     spd=None if self.spd is None else self.spd[lo:hi])


def _atomic_save(path: pathlib.Path, save, suffix: str) -> None:
  """`save(file)` into a temporary file beside `path`, renamed into place once complete."""
  path.parent.mkdir(parents=True, exist_ok=True)
  fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.stem}.", suffix=suffix)
  try:
    with os.fdopen(fd, "wb") as f:
      save(f)
    os.replace(tmp, path)
  finally:
    if os.path.exists(tmp):
      os.remove(tmp)


def _atomic_write_npz(path: pathlib.Path, arrays: dict[str, np.ndarray]) -> None:
  _atomic_save(path, lambda f: np.savez(f, **arrays), ".npz")


def _fingerprint(name: str, source: pathlib.Path | None, given: tu.TUDataset | None) -> str:
  if given is not None:
    return "memory:" + _array_fingerprint(given)
  return tu.source_fingerprint(name, source)


def load_dataset(name: str | tu.TUDataset, *, data_dir: str | os.PathLike[str] | None = None,
                 cache_dir: str | os.PathLike[str] | None = None, n_rw: int = structure.N_RW,
                 n_dg: int = structure.N_DG, node_features: str = "auto", n_lap: int = 0,
                 n_spd: int = 0) -> PreparedDataset:
  """Reads (or loads from cache) a dataset with its node features and structure embeddings.

  `name` is a TU dataset name (read from `data_dir`, any layout; see `data_prep.tu`) or an in-memory
  `TUDataset` (e.g. from `data_prep.graphs`); either way the RWSE is computed once and cached.
  """
  given = name if isinstance(name, tu.TUDataset) else None
  name = given.name if given is not None else name
  source = None if given is not None else tu.resolve_data_dir(data_dir)
  key = _key(FORMAT_VERSION, _fingerprint(name, source, given), n_rw, cpu_kernels.blas_family())
  path = resolve_cache_dir(cache_dir) / "datasets" / f"{name}-{key}.npz"
  data = None
  if path.is_file():
    try:
      data, rwse = _load_npz(path, name)
    except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile) as e:
      logging.warning("cache entry %s is corrupt (%s); rebuilt", path, e)
      path.unlink(missing_ok=True)
  if data is None:
    data = given if given is not None else tu.read_tu_dataset(name, source)
    rwse = structure.rwse(data, n_rw)
    arrays = {f.name: getattr(data, f.name) for f in dataclasses.fields(data)
              if isinstance(getattr(data, f.name), np.ndarray)}
    arrays["num_self_loops"] = np.asarray(data.num_self_loops)
    arrays["source"] = np.asarray(data.source)
    arrays["fingerprint"] = np.asarray(_fingerprint(name, source, given))
    arrays["rwse"] = rwse
    _atomic_write_npz(path, arrays)
  feats, kind = features_lib.node_features(data, node_features)
  extra = {}
  for name, width, compute in (("lap", n_lap, structure.laplacian_pe), ("spd", n_spd, structure.spd_histogram)):
    if width:  # Cached beside the dataset's entry, once per width.
      extra[name] = _cached_array(path.with_name(f"{path.stem}-{name}{width}.npy"), lambda: compute(data, width),
                                  (data.num_nodes, width))
  return PreparedDataset(data=data, features=feats, feature_kind=kind, rwse=rwse,
                         dse=structure.dse(data, n_dg), **extra)


def _cached_array(path: pathlib.Path, compute, shape: tuple[int, ...]) -> np.ndarray:
  """`compute()`, cached at `path` (rebuilt, with a warning, when unreadable or of the wrong shape)."""
  if path.is_file():
    try:
      value = np.load(path)
      if value.shape == shape:
        return value
      problem = f"shape {value.shape}, not {shape}"
    except (OSError, ValueError) as e:
      problem = str(e)
    logging.warning("cache entry %s is corrupt (%s); rebuilt", path, problem)
  value = compute()
  _atomic_save(path, lambda f: np.save(f, value), ".npy")
  return value


def _load_npz(path: pathlib.Path, name: str) -> tuple[tu.TUDataset, np.ndarray]:
  with np.load(path) as z:
    data = tu.TUDataset(
        name=name, node_offsets=z["node_offsets"], edges=z["edges"],
        edge_offsets=z["edge_offsets"], graph_labels=z["graph_labels"],
        raw_label_values=z["raw_label_values"],
        node_labels=z["node_labels"] if "node_labels" in z else None,
        node_attributes=z["node_attributes"] if "node_attributes" in z else None,
        num_self_loops=int(z["num_self_loops"]), source=str(z["source"]) if "source" in z else "")
    rwse = z["rwse"]
  if len(rwse) != data.num_nodes or len(data.node_offsets) != data.num_graphs + 1:
    raise ValueError("arrays of inconsistent lengths")
  return data, rwse


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
  """A partitioned, written setting: its clients and how it was made (`options`, recorded in config.json)."""

  setting: partition.Setting
  seed: int
  n_rw: int
  n_dg: int
  root: pathlib.Path
  clients: tuple[ClientData, ...]
  split: str = partition.DEFAULT_SPLIT
  node_features: str = "auto"
  standardize_attributes: bool = False
  sources: dict[str, str] = dataclasses.field(default_factory=dict)  # dataset -> where it was read from
  fingerprints: dict[str, str] = dataclasses.field(default_factory=dict)  # dataset -> content fingerprint
  n_lap: int = 0
  n_spd: int = 0

  def data_fingerprint(self) -> dict[str, Any]:
    """What a run's results depend on in the data: each dataset's content and every client's graphs."""
    digest = hashlib.sha1(json.dumps(self.options, sort_keys=True).encode())
    for c in self.clients:
      digest.update(json.dumps([c.client_id, c.graph_indices]).encode())
    return {"datasets": dict(self.fingerprints), "clients": digest.hexdigest()}

  @property
  def options(self) -> dict[str, Any]:
    return {"setting": self.setting.name, "split": self.split, "split_seed": self.seed, "n_rw": self.n_rw,
            "n_dg": self.n_dg, "node_features": self.node_features,
            "standardize_attributes": self.standardize_attributes,
            **{k: v for k, v in (("n_lap", self.n_lap), ("n_spd", self.n_spd)) if v}}


def _client_stats(ds: PreparedDataset, split: partition.ClientSplit) -> dict[str, Any]:
  sizes = ds.data.graph_sizes()
  edges = ds.data.graph_edge_counts()
  every = np.concatenate([split.train, split.val, split.test])
  return {
      "client": split.client_id, "dataset": ds.name,
      "train": len(split.train), "val": len(split.val), "test": len(split.test),
      "avg_nodes": float(sizes[every].mean()), "avg_edges": float(edges[every].mean()),
      "classes": ds.data.num_classes, "feature_dim": int(ds.features.shape[1]),
      "feature_kind": ds.feature_kind.value, "stratified": split.stratified,
      "train_class_counts": np.bincount(ds.data.graph_labels[split.train],
                                        minlength=ds.data.num_classes).tolist(),
  }


def prepare_setting(setting: partition.Setting | str, *,
                    data_dir: str | os.PathLike[str] | None = None,
                    cache_dir: str | os.PathLike[str] | None = None,
                    seed: int = partition.DEFAULT_SPLIT_SEED, n_rw: int = structure.N_RW,
                    n_dg: int = structure.N_DG, split: str = partition.DEFAULT_SPLIT,
                    node_features: str = "auto", standardize_attributes: bool = False,
                    datasets: Mapping[str, tu.TUDataset] | None = None, n_lap: int = 0,
                    n_spd: int = 0) -> PreparedSetting:
  """Partitions `setting` and writes every client's splits once; reuses a current cache.

  Args:
    setting: a `Setting` or its string (`data_prep.partition` grammar), e.g. "MUTAG,PTC_MR,NCI1@4".
    data_dir: folder with the TU datasets (else $TFF_GRAPH_DATA); not needed when every dataset of the
      setting is given in `datasets`.
    split: "reference" (the papers' scikit-learn split) or "numpy" (see `data_prep.partition`).
    node_features: "auto" (the papers' rule), "labels", "attributes", "both" or "degree".
    standardize_attributes: standardise attribute columns per client with its training graphs' statistics.
    datasets: in-memory datasets by name (`data_prep.graphs`), used before `data_dir`.
    n_lap, n_spd: widths of the Laplacian PE / SPD histogram node features (0: not stored).

  Raises:
    partition.SettingError: malformed setting, or a client with an empty split.
    tu.TUFormatError: missing data folder or dataset, or a bad dataset file (nothing is left in the cache).
    features_lib.FeatureError: a feature mode the dataset cannot provide.
  """
  if isinstance(setting, str):
    setting = partition.parse_setting(setting)
  if split not in partition.SPLIT_KINDS:
    raise partition.SettingError(f"unknown split {split!r}; choose one of {', '.join(partition.SPLIT_KINDS)}")
  if node_features not in features_lib.MODES:
    raise features_lib.FeatureError(f"unknown node feature mode {node_features!r}; choose one of "
                                    f"{', '.join(features_lib.MODES)}")
  given = dict(datasets or {})
  for name, ds in given.items():
    if not isinstance(ds, tu.TUDataset) or ds.name != name:
      raise partition.SettingError(f"datasets[{name!r}] must be a TUDataset named {name!r} (data_prep.graphs)")
  needs_dir = [n for n in setting.datasets if n not in given]
  source = tu.resolve_data_dir(data_dir) if needs_dir or data_dir is not None else None
  fingerprints = {n: _fingerprint(n, source, given.get(n)) for n in setting.datasets}
  key = _key(SETTING_FORMAT_VERSION, setting.name, dataclasses.asdict(setting), seed, n_rw, n_dg, split, node_features,
             standardize_attributes, fingerprints, *([n_lap, n_spd] if n_lap or n_spd else []),
             cpu_kernels.blas_family())
  safe = re.sub(r"[^A-Za-z0-9_\-.]+", "_", setting.name.replace("@", "_k"))[:80]
  root = resolve_cache_dir(cache_dir) / "settings" / f"{safe}-seed{seed}-{key}"
  manifest = root / "manifest.json"
  if root.exists():
    problem = _verify(root)
    if problem is not None:  # Never trained on: rebuilt from the source, and said so.
      logging.warning("cache entry %s is corrupt (%s); rebuilt", root, problem)
      shutil.rmtree(root, ignore_errors=True)
  if not manifest.is_file():
    _write_setting(setting, root, source=source, given=given, cache_dir=cache_dir, seed=seed, n_rw=n_rw,
                   n_dg=n_dg, split=split, node_features=node_features,
                   standardize_attributes=standardize_attributes, fingerprints=fingerprints, n_lap=n_lap,
                   n_spd=n_spd)
  info = json.loads(manifest.read_text())
  clients = tuple(
      ClientData(client_id=c["client_id"], dataset=c["dataset"], num_classes=c["num_classes"],
                 feature_dim=c["feature_dim"],
                 files={s: str(root / p) for s, p in c["files"].items()}, sizes=c["sizes"],
                 schema_path=str(root / c["schema"]), stats=c["stats"],
                 graph_indices=c["graph_indices"])
      for c in info["clients"])
  return PreparedSetting(setting=setting, seed=seed, n_rw=n_rw, n_dg=n_dg, root=root, clients=clients,
                         split=split, node_features=node_features,
                         standardize_attributes=standardize_attributes, sources=info.get("sources", {}),
                         fingerprints=fingerprints, n_lap=n_lap, n_spd=n_spd)


def _write_setting(setting: partition.Setting, root: pathlib.Path, *, source: pathlib.Path | None,
                   given: Mapping[str, tu.TUDataset], cache_dir: str | os.PathLike[str] | None, seed: int,
                   n_rw: int, n_dg: int, split: str, node_features: str, standardize_attributes: bool,
                   fingerprints: Mapping[str, str], n_lap: int = 0, n_spd: int = 0) -> None:
  root.parent.mkdir(parents=True, exist_ok=True)
  tmp = pathlib.Path(tempfile.mkdtemp(dir=root.parent, prefix=f".{root.name}.tmp-"))
  try:
    prepared = {n: load_dataset(given.get(n, n), data_dir=source, cache_dir=cache_dir, n_rw=n_rw, n_dg=n_dg,
                                node_features=node_features, n_lap=n_lap, n_spd=n_spd)
                for n in setting.datasets}
    splits = partition.partition(
        setting, {n: d.data.graph_labels for n, d in prepared.items()}, seed=seed, split=split)
    for name, ds in prepared.items():
      schema = graph_tensor.graph_schema(ds.features.shape[1], n_rw, n_dg, n_lap, n_spd)
      (tmp / f"{name}.schema.pbtxt").write_text(graph_tensor.schema_to_text(schema))
    clients = []
    checksums: dict[str, list] = {}
    for client in splits:
      ds = prepared[client.dataset]
      scale, scaling = None, None
      columns = ds.attribute_columns
      if standardize_attributes and columns is not None:
        mean, std = features_lib.standardizer(ds.features, ds.node_indices(client.train), columns)
        scale = (columns, mean, std)
        scaling = {"columns": [columns.start, columns.stop], "mean": mean.tolist(), "std": std.tolist()}
      (tmp / client.client_id).mkdir()
      files, sizes = {}, {}
      for part in SPLITS:
        rel = f"{client.client_id}/{part}.tfrecord"
        idx = getattr(client, part)
        sizes[part] = graph_tensor.write_tfrecord(tmp / rel, (ds.encode(int(g), scale) for g in idx))
        files[part] = rel
        checksums[rel] = [(tmp / rel).stat().st_size, _file_digest(tmp / rel)]
      stats = _client_stats(ds, client)
      if scaling is not None:
        stats["attribute_scaling"] = "train-split mean/std"
      clients.append({
          "client_id": client.client_id, "dataset": client.dataset,
          "num_classes": ds.data.num_classes, "feature_dim": int(ds.features.shape[1]),
          "files": files, "sizes": sizes, "schema": f"{client.dataset}.schema.pbtxt",
          "stats": stats, "scaling": scaling,
          "graph_indices": {p: getattr(client, p).tolist() for p in SPLITS},
      })
    (tmp / "manifest.json").write_text(json.dumps({
        "format_version": SETTING_FORMAT_VERSION, "setting": setting.name, "parts": dataclasses.asdict(setting)["parts"],
        "tiny": setting.tiny, "split": split, "seed": seed, "n_rw": n_rw, "n_dg": n_dg, "n_lap": n_lap,
        "n_spd": n_spd,
        "node_features": node_features, "standardize_attributes": standardize_attributes,
        "sources": {n: d.data.source for n, d in prepared.items()}, "fingerprints": dict(fingerprints),
        "clients": clients,
        "checksums": checksums}, indent=1))
    if root.exists():  # A concurrent writer finished first: keep its copy.
      shutil.rmtree(tmp)
    else:
      os.replace(tmp, root)
  except BaseException:
    shutil.rmtree(tmp, ignore_errors=True)
    raise


@dataclasses.dataclass(frozen=True)
class CacheEntry:
  """One entry of the cache: a prepared setting or dataset, its size, and whether it is stale."""

  path: pathlib.Path
  kind: str  # "setting", "dataset" or "partial"
  bytes: int
  stale: str | None  # Why it can no longer be used (None: current, or not checkable here).


def _size(path: pathlib.Path) -> int:
  if path.is_file():
    return path.stat().st_size
  return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def cache_entries(cache_dir: str | os.PathLike[str] | None = None,
                  data_dir: str | os.PathLike[str] | None = None) -> list[CacheEntry]:
  """Every entry under the cache, with why it is stale: another format version, a leftover of an
  interrupted write, or (when `data_dir` is given) a source whose content changed since it was made."""
  root = resolve_cache_dir(cache_dir)
  source = tu.resolve_data_dir(data_dir) if data_dir is not None else None
  current: dict[str, str | None] = {}

  def now(name: str) -> str | None:
    if source is None:
      return None
    if name not in current:
      try:
        current[name] = tu.source_fingerprint(name, source)
      except tu.TUFormatError:
        current[name] = None
    return current[name]

  entries = []
  for path in sorted((root / "settings").glob("*")) if (root / "settings").is_dir() else []:
    if path.name.startswith("."):
      entries.append(CacheEntry(path, "partial", _size(path), "left by an interrupted write"))
      continue
    stale = _verify(path)
    if stale is None:
      info = json.loads((path / "manifest.json").read_text())
      changed = [n for n, f in info.get("fingerprints", {}).items()
                 if not f.startswith("memory:") and now(n) is not None and now(n) != f]
      stale = f"source changed: {', '.join(changed)}" if changed else None
    entries.append(CacheEntry(path, "setting", _size(path), stale))
  for path in sorted((root / "datasets").glob("*")) if (root / "datasets").is_dir() else []:
    if path.name.startswith("."):
      entries.append(CacheEntry(path, "partial", _size(path), "left by an interrupted write"))
      continue
    stale = None
    try:
      with np.load(path) as z:
        recorded = str(z["fingerprint"]) if "fingerprint" in z else None
      name = path.name.rsplit("-", 1)[0]
      if recorded is None:
        stale = "written by another version"
      elif not recorded.startswith("memory:") and now(name) is not None and now(name) != recorded:
        stale = f"source changed: {name}"
    except (OSError, ValueError, zipfile.BadZipFile) as e:
      stale = f"unreadable ({e})"
    entries.append(CacheEntry(path, "dataset", _size(path), stale))
  return entries


def prune(entries: list[CacheEntry]) -> int:
  """Removes the stale entries; returns the bytes freed."""
  freed = 0
  for e in entries:
    if e.stale is not None:
      shutil.rmtree(e.path, ignore_errors=True) if e.path.is_dir() else e.path.unlink(missing_ok=True)
      freed += e.bytes
  return freed


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
