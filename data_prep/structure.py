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

from data_prep import cpu_kernels
from data_prep import tu

N_RW = 16
N_DG = 16


class EmbeddingType(str, enum.Enum):
  """Which structure embedding the model reads (FedStar's `type_init` ablation, plus the Laplacian PE
  and shortest-path-distance embeddings FedStar names as future work, alone or after rw_dg)."""
  RW = "rw"
  DG = "dg"
  RW_DG = "rw_dg"
  ONES = "ones"
  LAP = "lap"
  SPD = "spd"
  RW_DG_LAP = "rw_dg_lap"
  RW_DG_SPD = "rw_dg_spd"

  @property
  def parts(self) -> tuple[str, ...]:
    """The stored embeddings it concatenates, in order ("ones": the rw_dg width of ones)."""
    return {"rw": ("rw",), "dg": ("dg",), "rw_dg": ("rw", "dg"), "ones": ("rw", "dg"), "lap": ("lap",),
            "spd": ("spd",), "rw_dg_lap": ("rw", "dg", "lap"), "rw_dg_spd": ("rw", "dg", "spd")}[self.value]


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
  if small.size:
    cpu_kernels.check_blas("RWSE (np.linalg.eigh)")
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


N_LAP = 8
N_SPD = 8
_ZERO_EIGENVALUE = 1e-8


def _graph_edges(dataset: tu.TUDataset, g: int) -> np.ndarray:
  return dataset.edges[dataset.edge_offsets[g]:dataset.edge_offsets[g + 1]] - dataset.node_offsets[g]


def _canonical_signs(vecs: np.ndarray) -> np.ndarray:
  """Each eigenvector (column) with its entry of largest magnitude made positive (first such entry on
  ties): a deterministic representative of the +-v pair; training can still flip signs at random."""
  if vecs.size == 0:
    return vecs
  rows = np.argmax(np.abs(np.round(vecs, 9)), axis=0)
  signs = np.sign(vecs[rows, np.arange(vecs.shape[1])])
  return vecs * np.where(signs == 0, 1.0, signs)


def laplacian_pe(dataset: tu.TUDataset, k: int = N_LAP) -> np.ndarray:
  """float32 [N, k]: Laplacian-eigenvector positional encodings (Dwivedi et al. 2020), per graph.

  With the normalised Laplacian L = I - D^-1/2 A D^-1/2 (as `networkx.normalized_laplacian_matrix`: an
  isolated node's row is all zero), node i gets the i-th entries of the eigenvectors of the k smallest
  *non-trivial* eigenvalues (the kernel, one eigenvector per connected component, is skipped: its basis
  is arbitrary), in ascending eigenvalue order; a graph with fewer than k non-trivial eigenvectors is
  zero-padded. Signs are canonical (`_canonical_signs`); a repeated eigenvalue still leaves a basis
  choice (numpy's), which is why models should treat these features as sign- and basis-ambiguous.
  Graphs of one size are batched through `numpy.linalg.eigh`.
  """
  if k < 1:
    raise ValueError(f"k must be >= 1, got {k}")
  out = np.zeros((dataset.num_nodes, k), dtype=np.float32)
  sizes = dataset.graph_sizes()
  cpu_kernels.check_blas("Laplacian eigenvectors (np.linalg.eigh)")
  for n in np.unique(sizes):
    group = np.flatnonzero(sizes == n)
    for start in range(0, len(group), max(1, 2**26 // max(n * n, 1))):  # Bounded memory per batch.
      batch = group[start:start + max(1, 2**26 // max(n * n, 1))]
      mats = np.zeros((len(batch), n, n), dtype=np.float64)
      for j, g in enumerate(batch):
        local = _graph_edges(dataset, g)
        mats[j, local[:, 0], local[:, 1]] = 1.0
        mats[j, local[:, 1], local[:, 0]] = 1.0
      deg = mats.sum(axis=2)
      scale = _inv_sqrt(deg)
      lap = -mats * scale[:, :, None] * scale[:, None, :]
      lap[:, np.arange(n), np.arange(n)] += (deg > 0)
      lam, vecs = np.linalg.eigh(lap)
      for j, g in enumerate(batch):
        keep = np.flatnonzero(lam[j] > _ZERO_EIGENVALUE)[:k]
        v = _canonical_signs(vecs[j][:, keep])
        out[dataset.node_offsets[g]:dataset.node_offsets[g + 1], :len(keep)] = v
  return out


def spd_histogram(dataset: tu.TUDataset, n_spd: int = N_SPD) -> np.ndarray:
  """float32 [N, n_spd]: for node i, the share of the other nodes of its graph at shortest-path
  distance d, d = 1..n_spd (nodes farther away or unreachable are in no column; a one-node graph gets
  zeros). Breadth-first search up to depth n_spd on sparse adjacency, graph by graph."""
  if n_spd < 1:
    raise ValueError(f"n_spd must be >= 1, got {n_spd}")
  out = np.zeros((dataset.num_nodes, n_spd), dtype=np.float32)
  sizes = dataset.graph_sizes()
  for g in range(dataset.num_graphs):
    n = int(sizes[g])
    if n < 2:
      continue
    local = _graph_edges(dataset, g)
    rows = np.concatenate([local[:, 0], local[:, 1]])
    cols = np.concatenate([local[:, 1], local[:, 0]])
    adj = sp.csr_matrix((np.ones(len(rows), dtype=np.float32), (rows, cols)), shape=(n, n))
    seen = sp.identity(n, dtype=np.float32, format="csr")
    frontier = seen
    block = out[dataset.node_offsets[g]:dataset.node_offsets[g + 1]]
    for d in range(n_spd):
      reach = (frontier @ adj).astype(bool).astype(np.float32)
      new = reach - reach.multiply(seen.astype(bool))
      new.eliminate_zeros()
      if new.nnz == 0:
        break
      block[:, d] = np.asarray(new.sum(axis=1)).ravel() / (n - 1)
      seen = (seen + new).astype(bool).astype(np.float32)
      frontier = new
  return out


def embedding_width(kind: EmbeddingType | str, n_rw: int = N_RW, n_dg: int = N_DG, n_lap: int = N_LAP,
                    n_spd: int = N_SPD) -> int:
  widths = {"rw": n_rw, "dg": n_dg, "lap": n_lap, "spd": n_spd}
  return sum(widths[p] for p in EmbeddingType(kind).parts)
