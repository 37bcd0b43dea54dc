r"""GCFL's clustering math, as pure NumPy / networkx / dtaidistance functions.

Xie et al., "Federated Graph Classification over Non-IID Graphs", NeurIPS 2021.

A cluster C of clients is split when

    round > warmup_rounds  and  |C| > min_cluster_size - 1  and  mean_norm < eps1  and  max_norm > eps2

with $mean\_norm = \lVert \frac{1}{|C|}\sum_{i \in C} \Delta W_i \rVert$ and
$max\_norm = \max_{i \in C} \lVert \Delta W_i \rVert$ (the shared layers' updates of this round). It is
bi-partitioned by a Stoer-Wagner minimum cut of the complete graph over C whose edge weights are

* GCFL: $\cos(\Delta W_i, \Delta W_j) + 1$;
* GCFL+ / GCFL+dWs: $\max(D) - D_{ij}$ with D the DTW distances between the clients' last
  `seq_length` values of the shared layers' gradient norm after the last local step (GCFL+) or of
  their update norm (dWs), optionally each sequence divided by its standard deviation.
"""

from __future__ import annotations

import dataclasses
from typing import Sequence

import networkx as nx
import numpy as np
from dtaidistance import dtw

WARMUP_ROUNDS = 20
MIN_CLUSTER_SIZE = 3  # "|C| > 2"
SEQ_LENGTH = 5


@dataclasses.dataclass(frozen=True)
class SplitThresholds:
  """The split gate's parameters (defaults: the reference's molecules setting)."""

  eps1: float = 0.07
  eps2: float = 0.28
  warmup_rounds: int = WARMUP_ROUNDS
  min_cluster_size: int = MIN_CLUSTER_SIZE
  seq_length: int = SEQ_LENGTH
  standardize: bool = False


# eps1, eps2, seq_length of the reference code per setting (GCFL paper's settings).
REFERENCE_THRESHOLDS = {
    "PROTEINS": SplitThresholds(eps1=0.03, eps2=0.06, seq_length=10),
    "IMDB-BINARY": SplitThresholds(eps1=0.025, eps2=0.045, seq_length=5),
    "NCI1": SplitThresholds(eps1=0.04, eps2=0.08, seq_length=5),
    "molecules": SplitThresholds(eps1=0.07, eps2=0.28, seq_length=5),
    "biochem": SplitThresholds(eps1=0.07, eps2=0.35, seq_length=5),
    "mix": SplitThresholds(eps1=0.08, eps2=0.40, seq_length=5),
}


def thresholds_for(setting_name: str) -> SplitThresholds:
  """The reference thresholds for a setting (`molecules`, `chem`, `PROTEINS:10`, ...), else defaults."""
  base = setting_name.split(":")[0].split("@")[0].replace("_tiny", "")
  aliases = {"chem": "molecules", "biochemsn": "mix"}
  return REFERENCE_THRESHOLDS.get(aliases.get(base, base), SplitThresholds())


def flatten(update: Sequence[np.ndarray]) -> np.ndarray:
  return np.concatenate([np.ravel(np.asarray(u, np.float64)) for u in update])


def pairwise_cosine_similarity(updates: np.ndarray) -> np.ndarray:
  """[n, n] cosine similarities of the rows of `updates` ([n, d]); 0 where a row is zero."""
  u = np.asarray(updates, np.float64)
  norms = np.linalg.norm(u, axis=1)
  return (u @ u.T) / np.maximum(np.outer(norms, norms), 1e-12)


def mean_update_norm(updates: np.ndarray) -> float:
  return float(np.linalg.norm(np.mean(np.asarray(updates, np.float64), axis=0)))


def max_update_norm(updates: np.ndarray) -> float:
  return float(np.max(np.linalg.norm(np.asarray(updates, np.float64), axis=1)))


def should_split(*, round_num: int, cluster_size: int, mean_norm: float, max_norm: float,
                 thresholds: SplitThresholds) -> bool:
  """GCFL's gate (see module docstring); `round_num` counts from 1."""
  return (round_num > thresholds.warmup_rounds and cluster_size >= thresholds.min_cluster_size
          and mean_norm < thresholds.eps1 and max_norm > thresholds.eps2)


def min_cut_bipartition(weights: np.ndarray, members: Sequence[int]) -> tuple[list[int], list[int]]:
  """Stoer-Wagner minimum cut of the complete graph over `members` with edge weights `weights`.

  Args:
    weights: [m, m] symmetric non-negative weights between the members (diagonal ignored).
    members: the m client indices, in the order of `weights`.

  Returns:
    The two sides, as sorted lists of client indices (the side holding members[0] first).
  """
  w = np.asarray(weights, np.float64)
  m = len(members)
  if w.shape != (m, m) or m < 2:
    raise ValueError(f"need an [m, m] weight matrix for m >= 2 members, got {w.shape} for {m}")
  if np.any(w < 0):
    raise ValueError("min-cut weights must be non-negative")
  graph = nx.Graph()
  graph.add_nodes_from(range(m))
  graph.add_weighted_edges_from((i, j, w[i, j]) for i in range(m) for j in range(i + 1, m))
  _, (side_a, side_b) = nx.stoer_wagner(graph)
  a = sorted(members[i] for i in side_a)
  b = sorted(members[i] for i in side_b)
  return (a, b) if members[0] in a else (b, a)


def dtw_distance_matrix(sequences: np.ndarray, *, standardize: bool = False) -> np.ndarray:
  """[n, n] DTW distances between the rows of `sequences` ([n, L]).

  With `standardize`, each sequence is first divided by its standard deviation (the reference's
  option, to compare trends rather than levels); a constant sequence is left as it is.
  """
  s = np.asarray(sequences, np.float64)
  if standardize:
    std = s.std(axis=1, keepdims=True)
    s = s / np.where(std > 0, std, 1.0)
  d = dtw.distance_matrix(s, use_c=True)  # dtaidistance's C implementation (full symmetric matrix).
  return np.maximum(d, d.T)


def cosine_cut_weights(updates: np.ndarray) -> np.ndarray:
  """GCFL's edge weights: cosine similarity + 1 (in [0, 2])."""
  return pairwise_cosine_similarity(updates) + 1.0


def dtw_cut_weights(sequences: np.ndarray, *, standardize: bool = False) -> np.ndarray:
  """GCFL+'s edge weights: max(D) - D for the DTW distance matrix D."""
  d = dtw_distance_matrix(sequences, standardize=standardize)
  return d.max() - d
