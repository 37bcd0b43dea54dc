"""Reader for the TU graph-classification benchmark datasets in their official raw format.

Morris et al., "TUDataset: A collection of benchmark datasets for learning with graphs", ICML GRL+ 2020.

A dataset `<NAME>` is a folder `<NAME>/` (loose, or inside the official `<NAME>.zip`) holding

* `<NAME>_A.txt`: one line `u, v` per directed edge, node ids 1..N over the whole dataset;
* `<NAME>_graph_indicator.txt`: line i gives the graph id (1..G) of node i;
* `<NAME>_graph_labels.txt`: line g gives the label of graph g;
* optionally `<NAME>_node_labels.txt` (one or more integer columns) and `<NAME>_node_attributes.txt`
  (float columns), one line per node.

The reader keeps the graph as PyTorch Geometric does (the papers' code loads TU data through PyG):
self-loops are dropped and each undirected edge is kept once, whatever the file repeats (IMDB-* and
COLLAB list every directed edge twice). The number of dropped self-loops is kept so that the official
statistics (which count them) can be reproduced. Edge labels are not read.

Large files (COLLAB_A.txt: 49M lines) are parsed in 64 MiB blocks with NumPy and reduced to unique
undirected edges block by block, so at most one block of raw pairs is held at a time.
"""

from __future__ import annotations

import dataclasses
import os
import pathlib
import re
import shutil
import tempfile
import urllib.request
import warnings
import zipfile
import zlib
from typing import BinaryIO, Iterator

import numpy as np

DEFAULT_DATA_DIR_ENV = "TFF_GRAPH_DATA"
OFFICIAL_URL = "https://www.chrsmrrs.com/graphkerneldatasets/{name}.zip"
_BLOCK_BYTES = 1 << 26
_COMMA_TO_SPACE = bytes.maketrans(b",", b" ")


class TUFormatError(ValueError):
  """A TU dataset file is missing, truncated or malformed. The message names the file and line."""


@dataclasses.dataclass(frozen=True)
class TUDataset:
  """One TU dataset with the graph structure in compact arrays.

  Attributes:
    name: dataset name, e.g. "MUTAG".
    node_offsets: int64 [G+1]; the nodes of graph g are node_offsets[g]..node_offsets[g+1]-1.
    edges: int64 [E, 2]; each undirected edge once, as (u, v) with u < v, global node ids (0-based),
      sorted; no self-loops, no duplicates.
    edge_offsets: int64 [G+1]; the edges of graph g are edges[edge_offsets[g]:edge_offsets[g+1]].
    graph_labels: int64 [G]; labels remapped to 0..C-1 (sorted order of the raw values).
    raw_label_values: the raw label value of each class index.
    node_labels: int64 [N, k] raw node labels, or None.
    node_attributes: float32 [N, d], or None.
    num_self_loops: self-loops found in the file (dropped from `edges`).
  """

  name: str
  node_offsets: np.ndarray
  edges: np.ndarray
  edge_offsets: np.ndarray
  graph_labels: np.ndarray
  raw_label_values: np.ndarray
  node_labels: np.ndarray | None
  node_attributes: np.ndarray | None
  num_self_loops: int

  @property
  def num_graphs(self) -> int:
    return len(self.graph_labels)

  @property
  def num_nodes(self) -> int:
    return int(self.node_offsets[-1])

  @property
  def num_classes(self) -> int:
    return len(self.raw_label_values)

  def graph_sizes(self) -> np.ndarray:
    return np.diff(self.node_offsets)

  def graph_edge_counts(self) -> np.ndarray:
    """Undirected edges per graph (without self-loops)."""
    return np.diff(self.edge_offsets)

  def degrees(self) -> np.ndarray:
    """Degree of every node in the simple undirected graph (self-loops and duplicates removed)."""
    return (np.bincount(self.edges[:, 0], minlength=self.num_nodes)
            + np.bincount(self.edges[:, 1], minlength=self.num_nodes)).astype(np.int64)

  def statistics(self) -> dict[str, float]:
    """The statistics the TU collection publishes: graphs, classes, average nodes and edges.

    Average edges count each undirected edge once and each self-loop once, as the official tables do.
    """
    return {
        "graphs": self.num_graphs,
        "classes": self.num_classes,
        "avg_nodes": self.num_nodes / self.num_graphs,
        "avg_edges": (len(self.edges) + self.num_self_loops) / self.num_graphs,
    }


# ---------------------------------------------------------------------------------------------
# Locating files
# ---------------------------------------------------------------------------------------------


class _Source:
  """The files of one dataset, either in `<dir>/<NAME>.zip` or in `<dir>/<NAME>/`."""

  def __init__(self, data_dir: pathlib.Path, name: str):
    self.name = name
    self.zip_path = data_dir / f"{name}.zip"
    self.folder = data_dir / name
    self._zip: zipfile.ZipFile | None = None
    if self.folder.is_dir():
      self.where = str(self.folder)
    elif self.zip_path.is_file():
      try:
        self._zip = zipfile.ZipFile(self.zip_path)
      except zipfile.BadZipFile as e:
        raise TUFormatError(f"{self.zip_path}: not a readable zip archive ({e})") from None
      self.where = str(self.zip_path)
    else:
      raise TUFormatError(
          f"dataset {name!r} not found: neither {self.zip_path} nor {self.folder}/ exists "
          f"(use data_prep.tu.download({name!r}, data_dir) to fetch the official zip)")

  def _member(self, suffix: str) -> str:
    return f"{self.name}/{self.name}_{suffix}.txt"

  def has(self, suffix: str) -> bool:
    if self._zip is not None:
      return self._member(suffix) in self._zip.namelist()
    return (self.folder / f"{self.name}_{suffix}.txt").is_file()

  def label(self, suffix: str) -> str:
    return f"{self.name}_{suffix}.txt"

  def open(self, suffix: str) -> BinaryIO:
    if not self.has(suffix):
      raise TUFormatError(f"{self.where}: required file {self.label(suffix)} is missing")
    if self._zip is not None:
      try:
        return self._zip.open(self._member(suffix))
      except (zipfile.BadZipFile, zlib.error, OSError) as e:
        raise TUFormatError(f"{self.where}: member {self._member(suffix)} is corrupt ({e})") from None
    return open(self.folder / f"{self.name}_{suffix}.txt", "rb")

  def close(self) -> None:
    if self._zip is not None:
      self._zip.close()


def resolve_data_dir(data_dir: str | os.PathLike[str] | None) -> pathlib.Path:
  """The folder holding the datasets: `data_dir`, else $TFF_GRAPH_DATA, else an error."""
  chosen = data_dir if data_dir is not None else os.environ.get(DEFAULT_DATA_DIR_ENV)
  if chosen is None:
    raise TUFormatError(
        f"no data folder given: pass data_dir or set ${DEFAULT_DATA_DIR_ENV} "
        "(e.g. ../shared/data/TUDataset)")
  path = pathlib.Path(chosen).expanduser()
  if not path.is_dir():
    raise TUFormatError(f"data folder {path} does not exist or is not a folder")
  return path


def download(name: str, data_dir: str | os.PathLike[str], *, url_template: str = OFFICIAL_URL,
             timeout: float = 60.0) -> pathlib.Path:
  """Downloads the official `<name>.zip` into `data_dir` (explicit; never called implicitly).

  The file is written under a temporary name and renamed once complete and verified as a zip.
  """
  target = pathlib.Path(data_dir) / f"{name}.zip"
  target.parent.mkdir(parents=True, exist_ok=True)
  fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{name}.", suffix=".part")
  try:
    with os.fdopen(fd, "wb") as out, urllib.request.urlopen(
        url_template.format(name=name), timeout=timeout) as response:
      shutil.copyfileobj(response, out)
    if not zipfile.is_zipfile(tmp):
      raise TUFormatError(f"download of {name} from {url_template.format(name=name)} is not a zip")
    os.replace(tmp, target)
  finally:
    if os.path.exists(tmp):
      os.remove(tmp)
  return target


# ---------------------------------------------------------------------------------------------
# Parsing numbers fast, with line-accurate errors
# ---------------------------------------------------------------------------------------------


def _blocks(stream: BinaryIO, label: str) -> Iterator[tuple[int, bytes]]:
  """Yields (first line number, block of whole lines) from a byte stream."""
  rest = b""
  line_no = 1
  while True:
    try:
      buf = stream.read(_BLOCK_BYTES)
    except (zipfile.BadZipFile, EOFError, OSError, zlib.error) as e:
      raise TUFormatError(f"{label}: file is truncated or corrupt ({e})") from None
    if not buf:
      break
    data = rest + buf
    cut = data.rfind(b"\n")
    if cut < 0:
      rest = data
      continue
    block, rest = data[:cut + 1], data[cut + 1:]
    yield line_no, block
    line_no += block.count(b"\n")
  if rest.strip():
    yield line_no, rest + b"\n"


def _parse_block_slow(block: bytes, first_line: int, ncols: int | None, dtype: type,
                      label: str) -> np.ndarray:
  """Line-by-line parse of one block, to name the offending line."""
  rows = []
  for offset, raw in enumerate(block.split(b"\n")[:-1]):
    text = raw.decode("utf-8", errors="replace").strip()
    if not text:
      continue
    parts = [p for p in re.split(r"[,\s]+", text) if p]
    try:
      values = [dtype(p) if dtype is int else float(p) for p in parts]
    except ValueError:
      raise TUFormatError(f"{label} line {first_line + offset}: cannot parse {text!r}") from None
    if ncols is not None and len(values) != ncols:
      raise TUFormatError(f"{label} line {first_line + offset}: expected {ncols} value(s), "
                          f"found {len(values)} in {text!r}")
    if ncols is None:
      ncols = len(values)
    rows.append(values)
  return np.asarray(rows, dtype=np.int64 if dtype is int else np.float64).reshape(-1, ncols or 1)


def _iter_matrix_blocks(stream: BinaryIO, label: str, ncols: int | None,
                        dtype: type) -> Iterator[tuple[int, np.ndarray]]:
  """Yields (first line number, [rows, ncols] array) per block; errors name file and line."""
  np_dtype = np.int64 if dtype is int else np.float64
  for first_line, block in _blocks(stream, label):
    if ncols is None:
      first = block.split(b"\n", 1)[0].decode("utf-8", errors="replace")
      ncols = len([p for p in re.split(r"[,\s]+", first.strip()) if p]) or 1
    nlines = block.count(b"\n")
    with warnings.catch_warnings():  # np.fromstring warns (and stops) at unparsable text.
      warnings.simplefilter("ignore")
      values = np.fromstring(block.translate(_COMMA_TO_SPACE), dtype=np_dtype, sep=" ")
    if values.size == nlines * ncols and (dtype is not int or b"." not in block):
      yield first_line, values.reshape(nlines, ncols)
    else:  # Blank lines or a malformed line: the slow path finds which.
      yield first_line, _parse_block_slow(block, first_line, ncols, dtype, label)


def _read_matrix(src: _Source, suffix: str, dtype: type, ncols: int | None = None) -> np.ndarray:
  label = f"{src.where}:{src.label(suffix)}"
  with src.open(suffix) as stream:
    parts = [block for _, block in _iter_matrix_blocks(stream, label, ncols, dtype)]
  if not parts:
    raise TUFormatError(f"{label}: file is empty")
  return np.concatenate(parts)


# ---------------------------------------------------------------------------------------------
# The reader
# ---------------------------------------------------------------------------------------------


def read_tu_dataset(name: str, data_dir: str | os.PathLike[str] | None = None) -> TUDataset:
  """Reads dataset `name` from `data_dir` (or $TFF_GRAPH_DATA), validating every file.

  Raises:
    TUFormatError: a missing folder/file, a truncated archive, an unparsable line, node ids out of
      range, a graph_indicator that is not contiguous, an edge joining two graphs, or line counts
      that do not agree. The message names the file and, where it applies, the line.
  """
  src = _Source(resolve_data_dir(data_dir), name)
  try:
    return _read(src)
  finally:
    src.close()


def _read(src: _Source) -> TUDataset:
  gi_label = f"{src.where}:{src.label('graph_indicator')}"
  indicator = _read_matrix(src, "graph_indicator", int, 1)[:, 0]
  num_nodes = len(indicator)
  if indicator[0] != 1:
    raise TUFormatError(f"{gi_label} line 1: graph ids must start at 1, found {indicator[0]}")
  steps = np.diff(indicator)
  bad = np.flatnonzero((steps != 0) & (steps != 1))
  if bad.size:
    line = int(bad[0]) + 2
    raise TUFormatError(
        f"{gi_label} line {line}: graph_indicator is not contiguous (graph {indicator[line - 2]} "
        f"followed by {indicator[line - 1]}); nodes of each graph must be consecutive and graph "
        "ids must run 1..G without gaps")
  num_graphs = int(indicator[-1])
  node_offsets = np.zeros(num_graphs + 1, dtype=np.int64)
  node_offsets[1:] = np.cumsum(np.bincount(indicator - 1, minlength=num_graphs))

  gl_label = f"{src.where}:{src.label('graph_labels')}"
  raw_labels = _read_matrix(src, "graph_labels", int, 1)[:, 0]
  if len(raw_labels) != num_graphs:
    raise TUFormatError(f"{gl_label}: {len(raw_labels)} labels for {num_graphs} graphs "
                        f"(graph_indicator names graphs 1..{num_graphs})")
  raw_values, graph_labels = np.unique(raw_labels, return_inverse=True)

  node_labels = None
  if src.has("node_labels"):
    node_labels = _read_matrix(src, "node_labels", int)
    if len(node_labels) != num_nodes:
      raise TUFormatError(f"{src.where}:{src.label('node_labels')}: {len(node_labels)} lines for "
                          f"{num_nodes} nodes")
  node_attributes = None
  if src.has("node_attributes"):
    node_attributes = _read_matrix(src, "node_attributes", float).astype(np.float32)
    if len(node_attributes) != num_nodes:
      raise TUFormatError(f"{src.where}:{src.label('node_attributes')}: {len(node_attributes)} "
                          f"lines for {num_nodes} nodes")

  edges, num_self_loops = _read_edges(src, indicator)
  edge_offsets = np.searchsorted(edges[:, 0], node_offsets).astype(np.int64)
  return TUDataset(
      name=src.name, node_offsets=node_offsets, edges=edges, edge_offsets=edge_offsets,
      graph_labels=graph_labels.astype(np.int64), raw_label_values=raw_values,
      node_labels=node_labels, node_attributes=node_attributes, num_self_loops=num_self_loops)


def _read_edges(src: _Source, indicator: np.ndarray) -> tuple[np.ndarray, int]:
  """Unique undirected edges (u < v, 0-based) and the number of distinct self-loops."""
  label = f"{src.where}:{src.label('A')}"
  num_nodes = len(indicator)
  keys = []
  loops = []
  with src.open("A") as stream:
    for first_line, pairs in _iter_matrix_blocks(stream, label, 2, int):
      if pairs.size == 0:
        continue
      lo = pairs.min(axis=1)
      hi = pairs.max(axis=1)
      out = np.flatnonzero((lo < 1) | (hi > num_nodes))
      if out.size:
        row = pairs[out[0]]
        raise TUFormatError(f"{label}: edge ({row[0]}, {row[1]}) near line {first_line + out[0]} "
                            f"has a node id outside 1..{num_nodes}")
      lo -= 1
      hi -= 1
      cross = np.flatnonzero(indicator[lo] != indicator[hi])
      if cross.size:
        row = pairs[cross[0]]
        raise TUFormatError(
            f"{label}: edge ({row[0]}, {row[1]}) near line {first_line + cross[0]} joins graph "
            f"{indicator[lo[cross[0]]]} and graph {indicator[hi[cross[0]]]}")
      is_loop = lo == hi
      loops.append(np.unique(lo[is_loop]))
      keys.append(np.unique(lo[~is_loop] * num_nodes + hi[~is_loop]))
      del pairs, lo, hi
  if not keys:
    raise TUFormatError(f"{label}: file is empty")
  unique = np.unique(np.concatenate(keys))
  del keys
  edges = np.stack([unique // num_nodes, unique % num_nodes], axis=1)
  return edges, int(np.unique(np.concatenate(loops)).size)


def read_tu_dataset_from_bytes(name: str, files: dict[str, bytes]) -> TUDataset:
  """Reads a dataset from in-memory file contents keyed by suffix ("A", "graph_indicator", ...).

  Used for tests and small generated datasets; validation is identical to `read_tu_dataset`.
  """
  with tempfile.TemporaryDirectory() as tmp:
    folder = pathlib.Path(tmp) / name
    folder.mkdir()
    for suffix, content in files.items():
      (folder / f"{name}_{suffix}.txt").write_bytes(content)
    return read_tu_dataset(name, tmp)


__all__ = ["TUDataset", "TUFormatError", "read_tu_dataset", "read_tu_dataset_from_bytes",
           "download", "resolve_data_dir", "DEFAULT_DATA_DIR_ENV"]
