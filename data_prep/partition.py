"""Client partitions: which graphs of which dataset each client holds, and its train/val/test split.

**Settings** are data, written as a string (`parse_setting`):

    setting := GROUP[_tiny][@k]            a named list of datasets (below), one client each
             | part(,part)*                 a federation of chosen datasets, clients in order
    part    := NAME[@k]                     NAME is a dataset (or a group: its datasets), 1 or k clients
             | NAME:N[:overlap]             GCFL's one-dataset rule: one dataset over N clients
             | NAME:N:dirichlet=ALPHA       label skew: Dirichlet(ALPHA) class shares over N clients

e.g. `chem`, `chem@4`, `molecules_tiny`, `MUTAG,PTC_MR,NCI1@4`, `PROTEINS:10`, `NCI1:30:overlap`,
`NCI1:30:dirichlet=0.5`, `chem,COLLAB`. Any dataset name is accepted here; whether it exists is
checked where the data is read (`data_prep.cache`). The groups are just named lists:
GCFL (Xie et al., NeurIPS 2021): `molecules`, `small`, `biochem`, `mix` (and `<group>_tiny`: a
stratified sample of 150 graphs per dataset); FedStar (Tan et al., AAAI 2023): `chem`, `biochem`,
`biochemsn`, `biosncv` (`chem` = `molecules` and `biochemsn` = `mix`: same datasets).

**Splits.** `split="reference"` (the default) is the papers' own code, call for call, so that every
client holds exactly the graphs it holds there (both repos: `setupGC.py`, `utils.split_data`):

* each client's graphs are split with scikit-learn,
  `train_test_split(idx, test_size=0.2, stratify=y, shuffle=True, random_state=seed)` (one-dataset
  chunks: `train_size=0.8, test_size=0.2`, as `prepareData_oneDS` calls it), then the held-out part
  `train_test_split(held, train_size=0.5, test_size=0.5, stratify=..., random_state=seed)` into
  val | test; every call has its own `random_state=seed` (123), no shared stream;
* `_tiny`: first `train_test_split(idx, train_size=150, stratify=y, random_state=seed)`;
* `NAME:N` (`_randChunk`): contiguous blocks of `min(50, n // N)` graphs in file order, then each
  remaining graph to client `np.random.randint(0, N, size=1)[0]` after `np.random.seed(seed)`;
  `:overlap`: sizes `np.random.randint(50, 150, size=N)`, then `random.choices(graphs, k=size)` per
  client after `random.seed(seed)` (a graph can appear in several clients and in several splits of one
  client, as in the reference). Both use private generators seeded the same way, never global state.
* `NAME@k` (not in the papers' code; FedStar's client-scaling study): the k test folds of
  `StratifiedKFold(k, shuffle=True, random_state=seed)`, each split as above.
* `dirichlet=ALPHA` (not in the papers; the usual label-skew benchmark partition): for each class its
  graphs, shuffled, are dealt to the N clients in Dirichlet(ALPHA, ..., ALPHA) shares drawn from
  `numpy.random.default_rng(seed)`, redrawn (up to 1000 times) until every client has at least
  `DIRICHLET_MIN_GRAPHS` graphs. A client's split is stratified when scikit-learn can stratify it
  (both calls succeed); otherwise it is a plain shuffled split, and `ClientSplit.stratified` says so (it is recorded in the cache manifest and the client statistics).

`split="numpy"` is tff-graph's earlier NumPy re-implementation (one `numpy.random.Generator(seed)` for
the whole setting; per-class counts by largest remainder as scikit-learn allocates them, but another
random stream, so other graphs land in each split). It is kept, bit for bit, so that tables made with
it stay reproducible.

A client needs at least one graph in each of train, val and test (6 graphs at 80/10/10); a setting that
would leave one empty is refused with `SettingError`, naming the client and the largest N that works.
"""

from __future__ import annotations

import dataclasses
import math
import random
import re
from typing import Mapping, Sequence

import numpy as np

DEFAULT_SPLIT_SEED = 123
DEFAULT_SPLIT = "reference"
SPLIT_KINDS = ("reference", "numpy")
TINY_GRAPHS = 150
ONE_DS_BLOCK = 50
MIN_CLIENT_GRAPHS = 6  # ceil(0.2 * 6) = 2 held out -> 1 val, 1 test.
DIRICHLET_MIN_GRAPHS = 10
_DIRICHLET_DRAWS = 1000

_MOLECULES = ("MUTAG", "BZR", "COX2", "DHFR", "PTC_MR", "AIDS", "NCI1")
_BIO = ("ENZYMES", "DD", "PROTEINS")
_SN = ("COLLAB", "IMDB-BINARY", "IMDB-MULTI")
_CV = ("Letter-high", "Letter-low", "Letter-med")

GROUPS: Mapping[str, tuple[str, ...]] = {
    # GCFL
    "molecules": _MOLECULES,
    "small": ("MUTAG", "BZR", "COX2", "DHFR", "PTC_MR") + _BIO,
    "biochem": _MOLECULES + _BIO,
    "mix": _MOLECULES + _BIO + _SN,
    # FedStar
    "chem": _MOLECULES,
    "biochemsn": _MOLECULES + _BIO + _SN,
    "biosncv": _BIO + _SN + _CV,
}
# The 16 datasets of the two papers (any other TU dataset works as well; see data_prep.tu).
PAPER_DATASETS: tuple[str, ...] = _MOLECULES + _BIO + _SN + _CV

GRAMMAR = ("GROUP[_tiny][@k] with GROUP one of " + ", ".join(GROUPS) + "; or a comma list of parts, each "
           "NAME[@k] (a dataset or group, 1 or k clients), NAME:N[:overlap] (one dataset over N clients, "
           "GCFL's rule) or NAME:N:dirichlet=ALPHA (label-skewed over N clients); e.g. MUTAG,PTC_MR,NCI1@4")


class SettingError(ValueError):
  """An unknown group or dataset name, a malformed setting string, or a setting that cannot be split."""


@dataclasses.dataclass(frozen=True)
class Part:
  """One dataset's clients in a setting.

  Attributes:
    dataset: dataset name.
    mode: "whole" (1 client), "shards" (@k), "chunks" (:N, GCFL's rule), "overlap" (:N:overlap) or
      "dirichlet" (:N:dirichlet=alpha).
    clients: number of clients made from this dataset.
    alpha: Dirichlet concentration (mode "dirichlet" only).
  """

  dataset: str
  mode: str = "whole"
  clients: int = 1
  alpha: float | None = None


@dataclasses.dataclass(frozen=True)
class Setting:
  """Which datasets feed which clients: a name (parseable by `parse_setting`) and its parts."""

  name: str
  parts: tuple[Part, ...]
  tiny: bool = False

  @property
  def datasets(self) -> tuple[str, ...]:
    return tuple(p.dataset for p in self.parts)

  @property
  def num_clients(self) -> int:
    return sum(p.clients for p in self.parts)

  @property
  def one_client_per_dataset(self) -> bool:
    return all(p.clients == 1 for p in self.parts)


_NAME = r"[A-Za-z0-9][A-Za-z0-9_\-.]*"
_GROUP_FORM = re.compile(rf"^(?P<group>[a-z]+?)(?P<tiny>_tiny)?(@(?P<k>-?\d+))?$")
_PART_FORM = re.compile(rf"^(?P<name>{_NAME}?)(@(?P<k>-?\d+)|:(?P<n>-?\d+)(?P<opt>:.*)?)?$")


def _positive(value: str, what: str, text: str) -> int:
  n = int(value)
  if n < 1:
    raise SettingError(f"setting {text!r}: {what} must be >= 1, got {n}")
  return n


def parse_setting(text: str) -> Setting:
  """Parses a setting string (grammar in the module docstring).

  Raises:
    SettingError: naming the malformed part, an unknown option or a duplicated dataset.
  """
  text = text.strip()
  m = _GROUP_FORM.match(text)
  if m and m["group"] in GROUPS:
    k = _positive(m["k"], "clients per dataset", text) if m["k"] else 1
    mode = "shards" if k > 1 else "whole"
    return Setting(name=text, parts=tuple(Part(d, mode, k) for d in GROUPS[m["group"]]), tiny=bool(m["tiny"]))
  if not text:
    raise SettingError(f"empty setting; use {GRAMMAR}")
  parts: list[Part] = []
  for piece in text.split(","):
    piece = piece.strip()
    m = _PART_FORM.match(piece)
    if not piece or not m:
      raise SettingError(f"setting {text!r}: cannot read part {piece!r}; use {GRAMMAR}")
    name = m["name"]
    if m["n"] is not None:
      n = _positive(m["n"], "the number of clients", text)
      opt = m["opt"]
      if opt is None:
        parts.append(Part(name, "chunks", n))
      elif opt == ":overlap":
        parts.append(Part(name, "overlap", n))
      elif opt.startswith(":dirichlet="):
        try:
          alpha = float(opt[len(":dirichlet="):])
        except ValueError:
          alpha = float("nan")
        if not (alpha > 0 and math.isfinite(alpha)):
          raise SettingError(f"setting {text!r}: dirichlet=ALPHA needs a finite ALPHA > 0, got {opt[11:]!r}")
        parts.append(Part(name, "dirichlet", n, alpha))
      else:
        raise SettingError(f"setting {text!r}: unknown option {opt[1:]!r} in {piece!r} (use :overlap or "
                           ":dirichlet=ALPHA)")
      continue
    k = _positive(m["k"], "clients per dataset", text) if m["k"] else 1
    names = GROUPS.get(name, (name,))
    parts.extend(Part(d, "shards" if k > 1 else "whole", k) for d in names)
  seen = [p.dataset for p in parts]
  twice = sorted({d for d in seen if seen.count(d) > 1})
  if twice:
    raise SettingError(f"setting {text!r} names {', '.join(twice)} more than once; give each dataset once "
                       "(use @k or :N for several clients of one dataset)")
  return Setting(name=text, parts=tuple(parts))


@dataclasses.dataclass(frozen=True)
class ClientSplit:
  """One client's graphs, as indices into its dataset (in graph order of the TU files).

  `stratified` is False only for a Dirichlet client whose classes are too small to stratify.
  """

  client_id: str
  dataset: str
  train: np.ndarray
  val: np.ndarray
  test: np.ndarray
  stratified: bool = True


# ---------------------------------------------------------------------------------------------
# The reference split (scikit-learn, call for call as in the papers' code)
# ---------------------------------------------------------------------------------------------


def _sk_split(indices: np.ndarray, y: np.ndarray, *, train_size, test_size, seed: int,
              stratify: bool = True) -> tuple[np.ndarray, np.ndarray]:
  from sklearn.model_selection import train_test_split  # pylint: disable=g-import-not-at-top
  indices = np.asarray(indices, dtype=np.int64)
  a, b = train_test_split(indices, train_size=train_size, test_size=test_size,
                          stratify=y[indices] if stratify else None, shuffle=True, random_state=seed)
  return np.asarray(a, np.int64), np.asarray(b, np.int64)


def reference_train_val_test(indices: np.ndarray, y: np.ndarray, seed: int, *, chunk: bool = False,
                             stratify: bool = True) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
  """`utils.split_data` twice, as `prepareData_multiDS` (chunk=False) or `prepareData_oneDS` calls it."""
  train, held = _sk_split(indices, y, train_size=0.8 if chunk else None, test_size=0.2, seed=seed,
                          stratify=stratify)
  val, test = _sk_split(held, y, train_size=0.5, test_size=0.5, seed=seed, stratify=stratify)
  return train, val, test


def reference_chunks(num_graphs: int, num_clients: int, seed: int, *, overlap: bool = False,
                     block: int = ONE_DS_BLOCK) -> list[np.ndarray]:
  """`setupGC._randChunk` with private generators seeded as the reference seeds the global ones."""
  if num_clients > num_graphs:
    raise SettingError(f"cannot split {num_graphs} graphs over {num_clients} clients")
  np_rng = np.random.RandomState(seed)
  if overlap:
    py_rng = random.Random(seed)
    sizes = np_rng.randint(low=50, high=150, size=num_clients)
    return [np.asarray(py_rng.choices(range(num_graphs), k=int(s)), np.int64) for s in sizes]
  size = min(block, int(num_graphs / num_clients))
  chunks = [list(range(i * size, (i + 1) * size)) for i in range(num_clients)]
  for g in range(num_clients * size, num_graphs):
    chunks[int(np_rng.randint(low=0, high=num_clients, size=1)[0])].append(g)
  return [np.asarray(c, dtype=np.int64) for c in chunks]


def reference_shards(indices: np.ndarray, y: np.ndarray, k: int, seed: int) -> list[np.ndarray]:
  """The k test folds of `StratifiedKFold(k, shuffle=True, random_state=seed)` over `indices`."""
  from sklearn.model_selection import StratifiedKFold  # pylint: disable=g-import-not-at-top
  import warnings  # pylint: disable=g-import-not-at-top
  with warnings.catch_warnings():  # "The least populated class has only m members": still a valid split.
    warnings.simplefilter("ignore", UserWarning)
    folds = StratifiedKFold(n_splits=k, shuffle=True, random_state=seed).split(indices, y[indices])
    return [indices[test] for _, test in folds]


def dirichlet_chunks(y: np.ndarray, num_clients: int, alpha: float, rng: np.random.Generator, *,
                     min_graphs: int = DIRICHLET_MIN_GRAPHS) -> list[np.ndarray]:
  """Label skew: each class dealt to the clients in Dirichlet(alpha) shares (module docstring)."""
  y = np.asarray(y)
  if num_clients * min_graphs > len(y):
    raise SettingError(f"cannot deal {len(y)} graphs to {num_clients} clients with at least {min_graphs} each")
  classes = np.unique(y)
  for _ in range(_DIRICHLET_DRAWS):
    chunks: list[list[int]] = [[] for _ in range(num_clients)]
    for c in classes:
      members = np.flatnonzero(y == c)
      members = members[rng.permutation(len(members))]
      shares = rng.dirichlet(np.full(num_clients, alpha))
      cuts = (np.cumsum(shares) * len(members)).astype(np.int64)[:-1]
      for client, part in enumerate(np.split(members, cuts)):
        chunks[client].extend(part.tolist())
    if min(len(c) for c in chunks) >= min_graphs:
      return [np.sort(np.asarray(c, np.int64)) for c in chunks]
  raise SettingError(f"no Dirichlet({alpha}) draw in {_DIRICHLET_DRAWS} gave every one of {num_clients} clients "
                     f"at least {min_graphs} of the {len(y)} graphs; use fewer clients or a larger alpha")


# ---------------------------------------------------------------------------------------------
# The NumPy split (tff-graph's earlier re-implementation; kept bit for bit)
# ---------------------------------------------------------------------------------------------


def _allocate(class_counts: np.ndarray, total: int, rng: np.random.Generator) -> np.ndarray:
  """Per-class counts summing to `total`, proportional to `class_counts` (largest remainder)."""
  n = class_counts.sum()
  exact = class_counts * total / n
  counts = np.floor(exact).astype(np.int64)
  left = total - counts.sum()
  if left:
    remainder = exact - counts
    # Ties broken at random, as scikit-learn's _approximate_mode does.
    order = np.lexsort((rng.random(len(remainder)), -remainder))
    counts[order[:left]] += 1
  return counts


def stratified_split(indices: np.ndarray, labels: np.ndarray, test_fraction: float,
                     rng: np.random.Generator, *,
                     n_test: int | None = None) -> tuple[np.ndarray, np.ndarray]:
  """Splits `indices` into (rest, test), stratified by label.

  The test part has `n_test` items if given, else ceil(test_fraction * n) (none for a single item).
  """
  n = len(indices)
  if n_test is None:
    n_test = math.ceil(round(test_fraction * n, 9)) if n > 1 else 0
  classes, inverse = np.unique(labels, return_inverse=True)
  per_class = _allocate(np.bincount(inverse), n_test, rng) if n_test else np.zeros(len(classes), int)
  rest, test = [], []
  for c in range(len(classes)):
    members = indices[inverse == c]
    members = members[rng.permutation(len(members))]
    test.append(members[:per_class[c]])
    rest.append(members[per_class[c]:])
  return (rng.permutation(np.concatenate(rest)), rng.permutation(np.concatenate(test)))


def train_val_test(indices: np.ndarray, labels: np.ndarray,
                   rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
  """80/10/10 stratified: 20% held out, then halved into val and test (NumPy split)."""
  train, held = stratified_split(indices, labels[indices], 0.2, rng)
  val, test = stratified_split(held, labels[held], 0.5, rng)
  return train, val, test


def one_dataset_chunks(num_graphs: int, num_clients: int, rng: np.random.Generator, *,
                       overlap: bool = False, block: int = ONE_DS_BLOCK) -> list[np.ndarray]:
  """GCFL's one-dataset rule with a NumPy Generator (NumPy split)."""
  if num_clients < 1 or num_clients > num_graphs:
    raise SettingError(f"cannot split {num_graphs} graphs over {num_clients} clients")
  if overlap:
    sizes = rng.integers(50, 150, size=num_clients)
    return [rng.integers(0, num_graphs, size=s) for s in sizes]
  size = min(block, num_graphs // num_clients)
  chunks = [list(range(i * size, (i + 1) * size)) for i in range(num_clients)]
  for g in range(num_clients * size, num_graphs):
    chunks[int(rng.integers(0, num_clients))].append(g)
  return [np.asarray(c, dtype=np.int64) for c in chunks]


# ---------------------------------------------------------------------------------------------
# Partitioning a setting
# ---------------------------------------------------------------------------------------------


def max_clients(part: Part, num_graphs: int) -> int:
  """The largest number of clients this part's rule can give a non-empty val and test split."""
  if part.mode == "dirichlet":
    return num_graphs // DIRICHLET_MIN_GRAPHS
  return max(num_graphs // MIN_CLIENT_GRAPHS, 1)


def _chunks(part: Part, y: np.ndarray, everything: np.ndarray, split: str, seed: int,
            rng: np.random.Generator) -> list[np.ndarray]:
  if part.mode in ("chunks", "overlap"):
    if split == "reference":
      return reference_chunks(len(y), part.clients, seed, overlap=part.mode == "overlap")
    return one_dataset_chunks(len(y), part.clients, rng, overlap=part.mode == "overlap")
  if part.mode == "dirichlet":
    return dirichlet_chunks(y, part.clients, part.alpha, np.random.default_rng(seed) if split == "reference" else rng)
  k = part.clients
  if k > len(everything):
    raise SettingError(f"{part.dataset} has {len(everything)} graphs, fewer than {k} clients")
  if k == 1:
    return [everything]
  if split == "reference":
    return reference_shards(everything, y, k, seed)
  return np.array_split(everything[rng.permutation(len(everything))], k)


def _largest_working(part: Part, y: np.ndarray, split: str, seed: int, tiny: bool) -> int | None:
  """The largest number of clients (<= this part's) for which the part's rule gives every client a split."""
  top = min(part.clients - 1, max_clients(part, len(y)))
  for n in range(top, max(top - 64, 0), -1):
    mode = "whole" if part.mode == "shards" and n == 1 else part.mode
    trial = Setting(name="", parts=(dataclasses.replace(part, clients=n, mode=mode),), tiny=tiny)
    try:
      partition(trial, {part.dataset: y}, seed=seed, split=split, _suggest=False)
      return n
    except SettingError:
      continue
  return None


def _advice(part: Part, y: np.ndarray, split: str, seed: int, tiny: bool) -> str:
  if part.clients == 1:
    return f"{part.dataset} ({len(y)} graphs) is too small for a stratified 80/10/10 split"
  n = _largest_working(part, y, split, seed, tiny)
  if n is None:
    return f"use fewer clients for {part.dataset} ({len(y)} graphs)"
  return f"{part.dataset} has {len(y)} graphs: with this rule and split at most {n} clients work"


def _too_small(setting: Setting, client_id: str, chunk: np.ndarray, advice: str) -> SettingError:
  return SettingError(
      f"setting {setting.name!r}: client {client_id} would hold {len(chunk)} graph(s), too few for a train, "
      f"a validation and a test graph (80/10/10 needs at least {MIN_CLIENT_GRAPHS} per client); {advice}")


def partition(setting: Setting, labels: Mapping[str, np.ndarray], *, seed: int = DEFAULT_SPLIT_SEED,
              split: str = DEFAULT_SPLIT, _suggest: bool = True) -> list[ClientSplit]:
  """The clients of `setting`; `labels[name]` holds the class index of every graph of a dataset.

  Raises:
    SettingError: an unknown split kind, or a client that would get an empty train, val or test split
      (naming the client and the largest number of clients that works).
  """
  if split not in SPLIT_KINDS:
    raise SettingError(f"unknown split {split!r}; choose one of {', '.join(SPLIT_KINDS)}")
  if seed < 0 or seed >= 2**32:
    raise SettingError(f"the split seed must be in 0..2**32-1, got {seed}")
  rng = np.random.default_rng(seed)  # The NumPy split's one stream for the whole setting.
  clients: list[ClientSplit] = []
  for part in setting.parts:
    y = np.asarray(labels[part.dataset])
    everything = np.arange(len(y))
    if setting.tiny and len(y) > TINY_GRAPHS:
      if split == "reference":
        everything, _ = _sk_split(everything, y, train_size=TINY_GRAPHS, test_size=None, seed=seed)
      else:
        _, everything = stratified_split(everything, y, 0.0, rng, n_test=TINY_GRAPHS)
        everything = np.sort(everything)
    chunks = _chunks(part, y, everything, split, seed, rng)
    advice = lambda: _advice(part, y, split, seed, setting.tiny) if _suggest else ""
    for chunk in chunks:
      client_id = f"{len(clients)}-{part.dataset}"
      if len(chunk) < MIN_CLIENT_GRAPHS:
        raise _too_small(setting, client_id, chunk, advice())
      stratified = True
      if split == "numpy":
        train, val, test = train_val_test(chunk, y, rng)
      else:
        is_chunk = part.mode in ("chunks", "overlap")
        try:
          train, val, test = reference_train_val_test(chunk, y, seed, chunk=is_chunk)
        except ValueError as e:
          if part.mode != "dirichlet":
            counts = dict(zip(*np.unique(y[chunk], return_counts=True)))
            raise SettingError(
                f"setting {setting.name!r}: client {client_id} ({len(chunk)} graphs, graphs per class "
                f"{ {int(k): int(v) for k, v in counts.items()} }) cannot be split 80/10/10 stratified by "
                f"label: {e}; {advice()}") from None
          stratified = False  # A skewed client whose rare classes are too small to stratify.
          train, val, test = reference_train_val_test(chunk, y, seed, stratify=False)
      if not (len(train) and len(val) and len(test)):
        raise _too_small(setting, client_id, chunk, advice())
      clients.append(ClientSplit(client_id, part.dataset, train, val, test, stratified))
  return clients


def dataset_names(settings: Sequence[Setting]) -> list[str]:
  return sorted({d for s in settings for d in s.datasets})
