"""Reader for the TU graph-classification benchmark datasets in their official raw format.

Morris et al., "TUDataset: A collection of benchmark datasets for learning with graphs", ICML GRL+ 2020.

Any dataset of the collection (or one written in its format) is read the same way: nothing here is
keyed on a list of names. A dataset `<NAME>` is `<data_dir>/<NAME>.zip` or a folder `<data_dir>/<NAME>/`
whose files may sit at any depth and in any of the layouts mirrors use (see `_Source`), holding

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
import difflib
import hashlib
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
    source: where it was read from (a folder, a zip, or "in memory"), for messages and statistics.
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
  source: str = ""

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



def _suffix_of(name: str, parts: list[str]) -> str | None:
  """The TU suffix ("A", "graph_indicator", ...) of a member path split into parts, or None."""
  if not parts or "__MACOSX" in parts[:-1] or parts[-1].startswith("._"):  # Empty and "." parts are fine.
    return None
  base = parts[-1]
  prefix = f"{name}_"
  if base.startswith(prefix) and base.endswith(".txt") and len(base) > len(prefix) + 4:
    return base[len(prefix):-4]
  return None


class _Source:
  """The files of one dataset: `<dir>/<NAME>/` (any depth below) or `<dir>/<NAME>.zip` (any layout).

  Members are found by file name wherever they sit: at the zip root, under `NAME/`, `NAME//` (an empty
  path component, as many mirrors write it), `TUDataset/NAME/`, `./NAME/`, an extracted `NAME/NAME/`;
  `__MACOSX/` and `._*` entries are ignored. A folder is used when it holds the files, else the zip;
  `where` and `note` say which.
  """

  def __init__(self, data_dir: pathlib.Path, name: str):
    self.name = name
    self.zip_path = data_dir / f"{name}.zip"
    self.folder = data_dir / name
    self._zip: zipfile.ZipFile | None = None
    self.members: dict[str, str] = {}  # suffix -> member name (zip) or path (folder)
    self.note = ""
    if self.folder.is_dir():
      self.members = self._folder_members()
    if self.members:
      self.where = str(self.folder)
      if self.zip_path.is_file():
        self.note = f"both {self.folder}/ and {self.zip_path} exist; reading the folder"
    elif self.zip_path.is_file():
      try:
        self._zip = zipfile.ZipFile(self.zip_path)
      except (zipfile.BadZipFile, OSError) as e:
        raise TUFormatError(f"{self.zip_path}: not a readable zip archive ({e})") from None
      self.where = str(self.zip_path)
      self.members = self._zip_members()
      if self.folder.is_dir():
        self.note = f"{self.folder}/ holds no {name}_*.txt files; reading {self.zip_path}"
      if not self.members:
        found = [m for m in self._zip.namelist() if not m.endswith("/")][:8]
        raise TUFormatError(f"{self.zip_path}: no member named {name}_*.txt (it holds: "
                            f"{', '.join(found) or 'nothing'}); a TU archive of {name} holds {name}_A.txt, "
                            f"{name}_graph_indicator.txt, {name}_graph_labels.txt")
    elif self.folder.is_dir():
      raise TUFormatError(f"{self.folder}/ holds no {name}_*.txt files at any depth (expected {name}_A.txt, "
                          f"{name}_graph_indicator.txt, {name}_graph_labels.txt)")
    else:
      raise TUFormatError(_not_found_message(data_dir, name))

  def _folder_members(self) -> dict[str, str]:
    found: dict[str, str] = {}
    for path in sorted(self.folder.rglob(f"{self.name}_*.txt")):
      suffix = _suffix_of(self.name, list(path.relative_to(self.folder).parts))
      if suffix is not None and path.is_file():
        self._add(found, suffix, str(path))
    return found

  def _zip_members(self) -> dict[str, str]:
    found: dict[str, str] = {}
    for member in self._zip.namelist():
      if member.endswith("/"):
        continue
      suffix = _suffix_of(self.name, member.split("/"))
      if suffix is not None:
        self._add(found, suffix, member)
    return found

  def _add(self, found: dict[str, str], suffix: str, member: str) -> None:
    if suffix in found:
      raise TUFormatError(f"{self.zip_path if self._zip else self.folder}: {self.name}_{suffix}.txt is there "
                          f"twice ({found[suffix]!r} and {member!r}); keep one copy")
    found[suffix] = member

  def has(self, suffix: str) -> bool:
    return suffix in self.members

  def label(self, suffix: str) -> str:
    return f"{self.name}_{suffix}.txt"

  def open(self, suffix: str) -> BinaryIO:
    if not self.has(suffix):
      present = ", ".join(self.label(s) for s in sorted(self.members)) or "none"
      raise TUFormatError(f"{self.where}: required file {self.label(suffix)} is missing (found: {present})")
    if self._zip is not None:
      try:
        return self._zip.open(self.members[suffix])
      except (zipfile.BadZipFile, zlib.error, OSError) as e:
        raise TUFormatError(f"{self.where}: member {self.members[suffix]} is corrupt ({e})") from None
    return open(self.members[suffix], "rb")

  def fingerprint(self) -> str:
    """Identifies the content: the zip members' CRC-32s and sizes, or a SHA-1 of the folder's files."""
    digest = hashlib.sha1()
    for suffix in sorted(self.members):
      if self._zip is not None:
        info = self._zip.getinfo(self.members[suffix])
        digest.update(f"{suffix}:{info.CRC:08x}:{info.file_size};".encode())
      else:
        digest.update(f"{suffix}:".encode())
        with open(self.members[suffix], "rb") as f:
          for chunk in iter(lambda: f.read(1 << 24), b""):
            digest.update(chunk)
    return digest.hexdigest()

  def close(self) -> None:
    if self._zip is not None:
      self._zip.close()


def _not_found_message(data_dir: pathlib.Path, name: str) -> str:
  entries = sorted({p.name[:-4] if p.name.lower().endswith(".zip") else p.name for p in data_dir.iterdir()
                    if p.is_dir() or p.name.lower().endswith(".zip")})
  same_case = [e for e in entries if e.lower() == name.lower()]
  close = same_case or difflib.get_close_matches(name, entries, n=3, cutoff=0.6)
  hint = ""
  if same_case:
    hint = (f"; found {', '.join(repr(e) for e in same_case)}, which differs only in case (names are "
            "case-sensitive: use that name or rename it)")
  elif close:
    hint = f"; similar names there: {', '.join(close)}"
  return (f"dataset {name!r} not found: looked for {data_dir / name}.zip and {data_dir / name}/{hint}. "
          f"TU datasets are at {OFFICIAL_URL.format(name=name)} (or data_prep.tu.download({name!r}, "
          f"{str(data_dir)!r}))")


def find_dataset(name: str, data_dir: str | os.PathLike[str] | None = None) -> tuple[str, str]:
  """(where the dataset is read from, a note when the choice was not obvious); raises TUFormatError."""
  src = _Source(resolve_data_dir(data_dir), name)
  src.close()
  return src.where, src.note


def source_fingerprint(name: str, data_dir: str | os.PathLike[str] | None = None) -> str:
  """A content fingerprint of the dataset's files (see `_Source.fingerprint`); raises TUFormatError."""
  src = _Source(resolve_data_dir(data_dir), name)
  try:
    return src.fingerprint()
  finally:
    src.close()


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


_BLANK = np.zeros(256, dtype=bool)
_BLANK[[ord(" "), ord("\t"), ord("\r"), ord("\n")]] = True


def _every_line_has(spaced: bytes, ncols: int) -> bool:
  """Whether every line of a block (commas already turned into spaces) holds exactly `ncols` tokens.

  A total count that fits is not enough: a 3-value line next to a 1-value line would otherwise be
  re-paired silently into wrong rows.
  """
  chars = np.frombuffer(spaced, dtype=np.uint8)
  blank = _BLANK[chars]
  starts = ~blank
  starts[1:] &= blank[:-1]
  line_of = np.cumsum(chars == ord("\n")) - (chars == ord("\n"))
  counts = np.bincount(line_of[starts], minlength=int(line_of[-1]) + 1 if len(line_of) else 0)
  return bool(np.all(counts == ncols))


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
    spaced = block.translate(_COMMA_TO_SPACE)
    with warnings.catch_warnings():  # np.fromstring warns (and stops) at unparsable text.
      warnings.simplefilter("ignore")
      values = np.fromstring(spaced, dtype=np_dtype, sep=" ")
    if (values.size == nlines * ncols and (dtype is not int or b"." not in block)
        and _every_line_has(spaced, ncols)):
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
    return dataclasses.replace(_read(src), source=src.where)
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
