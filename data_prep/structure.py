r"""FedStar's structure embeddings (Tan et al., "Federated Learning on Non-IID Graphs via Structural
Knowledge Sharing", AAAI 2023).

* RWSE (random-walk structure embedding): node i gets $[(AD^{-1})^k_{ii}]_{k=1..n_{rw}}$, the
  probability that a k-step random walk from i lands back on i. Degree-0 nodes have no walk: their
  column of $AD^{-1}$ is zero (the $1/0$ is never formed), so their RWSE is 0.
* DSE (degree structure embedding): one-hot of the degree clipped to $[1, n_{dg}]$ (index deg - 1;
  an isolated node falls in the first slot, as in the reference).

Computation: with $S = D^{-1/2} A D^{-1/2}$ (zero rows/columns for isolated nodes),
$(AD^{-1})^k = D^{1/2} S^k D^{-1/2}$ has the same diagonal as $S^k$, and for the eigendecomposition
$S = U \Lambda U^T$, $\mathrm{diag}(S^k) = (U \circ U) \lambda^k$. Graphs up to `dense_max_nodes` nodes
are batched by size through `numpy.linalg.eigh`; larger (sparse) graphs use k sparse-dense products
$M_k = S M_{k-1}$, $M_0 = I$ (cost $k \cdot nnz \cdot n$).
"""

from __future__ import annotations

import enum

import numpy as np
import scipy.sparse as sp

from data_prep import tu

N_RW = 16
N_DG = 16


class EmbeddingType(str, enum.Enum):
  """Which structure embedding the model reads (FedStar's `type_init` ablation)."""
  RW = "rw"
  DG = "dg"
  RW_DG = "rw_dg"
  ONES = "ones"


def _graph_adjacency(edges: np.ndarray, n: int) -> np.ndarray:
  a = np.zeros((n, n), dtype=np.float64)
  a[edges[:, 0], edges[:, 1]] = 1.0
  a[edges[:, 1], edges[:, 0]] = 1.0
  return a


def _inv_sqrt(deg: np.ndarray) -> np.ndarray:
  out = np.zeros_like(deg, dtype=np.float64)
  np.divide(1.0, np.sqrt(deg), out=out, where=deg > 0)
  return out


def rwse(dataset: tu.TUDataset, n_rw: int = N_RW, *, dense_max_nodes: int = 64,
         dense_density: float = 0.1) -> np.ndarray:
  """float32 [N, n_rw]: diag((A D^-1)^k), k = 1..n_rw, for every node of every graph."""
  if n_rw < 1:
    raise ValueError(f"n_rw must be >= 1, got {n_rw}")
  out = np.zeros((dataset.num_nodes, n_rw), dtype=np.float32)
  sizes = dataset.graph_sizes()
  powers = np.arange(1, n_rw + 1)
  density = 2.0 * dataset.graph_edge_counts() / np.maximum(sizes * sizes, 1)
  use_dense = (sizes <= dense_max_nodes) | (density >= dense_density)
  small = np.flatnonzero(use_dense)
  for n in np.unique(sizes[small]):
    group = small[sizes[small] == n]
    mats = np.zeros((len(group), n, n), dtype=np.float64)
    for j, g in enumerate(group):
      local = dataset.edges[dataset.edge_offsets[g]:dataset.edge_offsets[g + 1]] - dataset.node_offsets[g]
      mats[j, local[:, 0], local[:, 1]] = 1.0
      mats[j, local[:, 1], local[:, 0]] = 1.0
    scale = _inv_sqrt(mats.sum(axis=2))
    mats *= scale[:, :, None] * scale[:, None, :]
    lam, vecs = np.linalg.eigh(mats)
    diag = np.einsum("bij,bjk->bik", vecs ** 2, lam[:, :, None] ** powers[None, None, :])
    for j, g in enumerate(group):
      out[dataset.node_offsets[g]:dataset.node_offsets[g + 1]] = diag[j]
  for g in np.flatnonzero(~use_dense):
    n = int(sizes[g])
    local = dataset.edges[dataset.edge_offsets[g]:dataset.edge_offsets[g + 1]] - dataset.node_offsets[g]
    rows = np.concatenate([local[:, 0], local[:, 1]])
    cols = np.concatenate([local[:, 1], local[:, 0]])
    deg = np.bincount(rows, minlength=n).astype(np.float64)
    scale = _inv_sqrt(deg)
    s = sp.csr_matrix((scale[rows] * scale[cols], (rows, cols)), shape=(n, n))
    m = np.eye(n)
    for k in range(n_rw):
      m = s @ m
      out[dataset.node_offsets[g]:dataset.node_offsets[g + 1], k] = np.diagonal(m)
  # Landing probabilities lie in [0, 1]; remove the eigensolver's round-off (|err| ~ 1e-14).
  out[np.abs(out) < 1e-9] = 0.0
  return np.clip(out, 0.0, 1.0, out=out)


def dse(dataset: tu.TUDataset, n_dg: int = N_DG) -> np.ndarray:
  """float32 [N, n_dg]: one-hot of clip(degree, 1, n_dg) - 1."""
  if n_dg < 1:
    raise ValueError(f"n_dg must be >= 1, got {n_dg}")
  idx = np.clip(dataset.degrees(), 1, n_dg) - 1
  out = np.zeros((dataset.num_nodes, n_dg), dtype=np.float32)
  out[np.arange(dataset.num_nodes), idx] = 1.0
  return out


def embedding_width(kind: EmbeddingType | str, n_rw: int = N_RW, n_dg: int = N_DG) -> int:
  kind = EmbeddingType(kind)
  return {EmbeddingType.RW: n_rw, EmbeddingType.DG: n_dg}.get(kind, n_rw + n_dg)
