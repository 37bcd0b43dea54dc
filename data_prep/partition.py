"""Client partitions of the two papers, deterministic for a given split seed (default 123).

Settings:

* **Multi-dataset groups** (one client per dataset, in the listed order):
  GCFL (Xie et al., NeurIPS 2021): `molecules`, `small`, `biochem`, `mix`, and `<group>_tiny`
  (150 graphs per dataset, a stratified sample); FedStar (Tan et al., AAAI 2023): `chem`, `biochem`,
  `biochemsn`, `biosncv`. `chem` = `molecules` and `biochemsn` = `mix` (same datasets).
  `<group>@k` splits every dataset of the group into k clients (FedStar's 7 -> 84 client scaling):
  the dataset is shuffled with the split seed and cut into k near-equal shards.
* **One dataset over N clients** (`<NAME>:<N>`; GCFL's one-dataset experiments): graphs in file order
  are cut into N contiguous blocks of `min(50, len // N)` graphs; each remaining graph goes to a
  client drawn uniformly at random. With the overlap option (`<NAME>:<N>:overlap`) each client instead
  draws `randint(50, 150)` graphs with replacement (a graph can then appear in several clients and, as
  in the reference, in more than one split of the same client).

Each client's graphs are then split 80/10/10 train/val/test, stratified by label: first 80/20, then the
20 halved, each time allocating per-class counts by largest remainder (as scikit-learn's
StratifiedShuffleSplit does) and drawing members at random.

Nothing here reseeds a global RNG: every draw comes from one `numpy.random.Generator(seed)` per setting.
"""

from __future__ import annotations

import dataclasses
import math
import re
from typing import Mapping, Sequence

import numpy as np

DEFAULT_SPLIT_SEED = 123
TINY_GRAPHS = 150
ONE_DS_BLOCK = 50

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
ALL_DATASETS: tuple[str, ...] = _MOLECULES + _BIO + _SN + _CV


class SettingError(ValueError):
  """An unknown group or dataset name, or a malformed setting string."""


@dataclasses.dataclass(frozen=True)
class Setting:
  """Which datasets feed which clients.

  Attributes:
    name: canonical string form (parseable by `parse_setting`).
    datasets: dataset names, in client order.
    clients_per_dataset: k for groups (1 = one client per dataset).
    one_dataset_clients: N for a one-dataset setting, else 0.
    overlap: one-dataset overlap option.
    tiny: sample 150 graphs per dataset first (GCFL `*_tiny`).
  """

  name: str
  datasets: tuple[str, ...]
  clients_per_dataset: int = 1
  one_dataset_clients: int = 0
  overlap: bool = False
  tiny: bool = False


_ONE_DS = re.compile(r"^(?P<ds>[A-Za-z0-9_\-]+):(?P<n>\d+)(?P<ov>:overlap)?$")
_GROUP = re.compile(r"^(?P<group>[a-z]+)(?P<tiny>_tiny)?(@(?P<k>\d+))?$")


def parse_setting(text: str) -> Setting:
  """Parses `chem`, `molecules_tiny`, `chem@4`, `PROTEINS:10` or `NCI1:30:overlap`.

  Raises:
    SettingError: naming the unknown group/dataset or the malformed part.
  """
  m = _ONE_DS.match(text)
  if m:
    ds, n = m["ds"], int(m["n"])
    if ds not in ALL_DATASETS:
      raise SettingError(f"unknown dataset {ds!r} in setting {text!r}; known: {', '.join(ALL_DATASETS)}")
    if n < 1:
      raise SettingError(f"setting {text!r}: the number of clients must be >= 1")
    return Setting(name=text, datasets=(ds,), one_dataset_clients=n, overlap=bool(m["ov"]))
  m = _GROUP.match(text)
  if m and m["group"] in GROUPS:
    k = int(m["k"]) if m["k"] else 1
    if k < 1:
      raise SettingError(f"setting {text!r}: clients per dataset must be >= 1")
    return Setting(name=text, datasets=GROUPS[m["group"]], clients_per_dataset=k, tiny=bool(m["tiny"]))
  raise SettingError(
      f"unknown setting {text!r}: use a group ({', '.join(GROUPS)}), optionally with _tiny and/or "
      "@k clients per dataset, or <DATASET>:<N>[:overlap] for one dataset over N clients")


@dataclasses.dataclass(frozen=True)
class ClientSplit:
  """One client's graphs, as indices into its dataset (in graph order of the TU files)."""

  client_id: str
  dataset: str
  train: np.ndarray
  val: np.ndarray
  test: np.ndarray


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
  """80/10/10 stratified: 20% held out, then halved into val and test."""
  train, held = stratified_split(indices, labels[indices], 0.2, rng)
  val, test = stratified_split(held, labels[held], 0.5, rng)
  return train, val, test


def one_dataset_chunks(num_graphs: int, num_clients: int, rng: np.random.Generator, *,
                       overlap: bool = False, block: int = ONE_DS_BLOCK) -> list[np.ndarray]:
  """GCFL's one-dataset rule (see module docstring): graph indices per client."""
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


def partition(setting: Setting, labels: Mapping[str, np.ndarray], *,
              seed: int = DEFAULT_SPLIT_SEED) -> list[ClientSplit]:
  """The clients of `setting`; `labels[name]` holds the class index of every graph of a dataset."""
  rng = np.random.default_rng(seed)
  clients: list[ClientSplit] = []
  for name in setting.datasets:
    y = np.asarray(labels[name])
    everything = np.arange(len(y))
    if setting.one_dataset_clients:
      chunks = one_dataset_chunks(len(y), setting.one_dataset_clients, rng, overlap=setting.overlap)
    else:
      if setting.tiny and len(y) > TINY_GRAPHS:
        _, everything = stratified_split(everything, y, 0.0, rng, n_test=TINY_GRAPHS)
        everything = np.sort(everything)
      k = setting.clients_per_dataset
      if k > len(everything):
        raise SettingError(f"{name} has {len(everything)} graphs, fewer than {k} clients")
      chunks = (np.array_split(everything[rng.permutation(len(everything))], k) if k > 1
                else [everything])
    for chunk in chunks:
      train, val, test = train_val_test(chunk, y, rng)
      clients.append(ClientSplit(f"{len(clients)}-{name}", name, train, val, test))
  return clients


def dataset_names(settings: Sequence[Setting]) -> list[str]:
  return sorted({d for s in settings for d in s.datasets})
