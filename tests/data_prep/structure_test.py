"""RWSE and DSE against values worked out by hand."""

from __future__ import annotations

import numpy as np
import pytest

from data_prep import structure
from data_prep import tu


def _graph(n: int, edges: list[tuple[int, int]]) -> tu.TUDataset:
  lines = "".join(f"{u + 1}, {v + 1}\n{v + 1}, {u + 1}\n" for u, v in edges) or "1, 1\n"
  return tu.read_tu_dataset_from_bytes("G", {
      "A": lines.encode(), "graph_indicator": b"1\n" * n, "graph_labels": b"0\n"})


# Return probabilities of k-step random walks, k = 1..4, worked by hand.
CASES = {
    # Triangle: closed walks of length k on K3 are (2^k + 2(-1)^k)/3, each with prob (1/2)^k.
    "triangle": (3, [(0, 1), (1, 2), (0, 2)], [[0, 1 / 2, 1 / 4, 3 / 8]] * 3),
    # Path 0-1-2: bipartite, so odd k give 0; the middle node always comes back in 2 steps.
    "path": (3, [(0, 1), (1, 2)], [[0, 1 / 2, 0, 1 / 2], [0, 1, 0, 1], [0, 1 / 2, 0, 1 / 2]]),
    # Star, centre 0 and 3 leaves: a leaf returns w.p. 1/3 every 2 steps, the centre w.p. 1.
    "star": (4, [(0, 1), (0, 2), (0, 3)], [[0, 1, 0, 1]] + [[0, 1 / 3, 0, 1 / 3]] * 3),
    # Edge 0-1 plus isolated node 2: no walk, no inf/NaN, all zeros.
    "isolated": (3, [(0, 1)], [[0, 1, 0, 1], [0, 1, 0, 1], [0, 0, 0, 0]]),
}


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("paths", [dict(dense_max_nodes=600), dict(dense_max_nodes=0, dense_density=2.0)],
                         ids=["eigh", "sparse"])
def test_rwse_by_hand(case, paths):
  n, edges, expected = CASES[case]
  got = structure.rwse(_graph(n, edges), 4, **paths)
  assert np.all(np.isfinite(got))
  np.testing.assert_allclose(got, expected, atol=1e-6)


def test_rwse_matches_matrix_powers_on_random_graphs():
  rng = np.random.default_rng(0)
  n = 40
  pairs = [(u, v) for u in range(n) for v in range(u + 1, n) if rng.random() < 0.08]
  g = _graph(n, pairs)
  a = np.zeros((n, n))
  for u, v in pairs:
    a[u, v] = a[v, u] = 1
  deg = a.sum(0)
  p = a @ np.diag(np.where(deg > 0, 1 / np.maximum(deg, 1), 0))
  expected = np.stack([np.diag(np.linalg.matrix_power(p, k)) for k in range(1, 17)], axis=1)
  for paths in (dict(dense_max_nodes=600), dict(dense_max_nodes=0, dense_density=2.0)):
    np.testing.assert_allclose(structure.rwse(g, 16, **paths), expected, atol=1e-6)


def test_dse_clips_degree_to_1_ndg():
  star = _graph(6, [(0, 1), (0, 2), (0, 3), (0, 4)])  # Node 5 isolated.
  got = structure.dse(star, 3)
  # Degrees 4, 1, 1, 1, 1, 0 -> clipped 3, 1, 1, 1, 1, 1 -> slots 2, 0, 0, 0, 0, 0.
  np.testing.assert_array_equal(got.argmax(1), [2, 0, 0, 0, 0, 0])
  np.testing.assert_array_equal(got.sum(1), np.ones(6))


# ---------------------------------------------------------------------------------------------
# Laplacian eigenvector PE and shortest-path-distance histograms, hand-checked on small graphs
# ---------------------------------------------------------------------------------------------


def _dataset(graphs):
  """A TUDataset of networkx graphs (in order), via the in-memory builder."""
  from data_prep import graphs as graphs_lib  # pylint: disable=g-import-not-at-top
  return graphs_lib.from_networkx("T", graphs, [0] * len(graphs))


def test_laplacian_pe_of_a_path_cycle_star_and_a_disconnected_graph():
  import networkx as nx  # pylint: disable=g-import-not-at-top
  graphs = [nx.path_graph(4), nx.cycle_graph(5), nx.star_graph(3), nx.disjoint_union(nx.path_graph(2), nx.path_graph(3))]
  ds = _dataset(graphs)
  pe = structure.laplacian_pe(ds, k=6)
  for g, graph in enumerate(graphs):
    block = pe[ds.node_offsets[g]:ds.node_offsets[g + 1]].astype(np.float64)
    lap = nx.normalized_laplacian_matrix(graph, nodelist=sorted(graph.nodes)).toarray()
    lam = np.linalg.eigvalsh(lap)
    nontrivial = lam[lam > 1e-8]
    used = min(6, len(nontrivial))
    assert np.all(block[:, used:] == 0)  # Zero padding beyond the graph's non-trivial eigenvectors.
    v = block[:, :used]
    np.testing.assert_allclose(v.T @ v, np.eye(used), atol=1e-5)  # Orthonormal ...
    np.testing.assert_allclose(lap @ v, v * nontrivial[:used], atol=1e-5)  # ... eigenvectors, ascending.
  # Path of 4: first non-trivial eigenvector is antisymmetric about the middle (sign: largest entry +).
  path = pe[:4, 0]
  np.testing.assert_allclose(path, -path[::-1], atol=1e-6)
  assert np.abs(path).argmax() in (0, 3) and path[np.abs(path).argmax()] > 0
  # Star K1,3: eigenvalues 0, 1, 1, 2 -> two eigenvectors for 1 and one for 2 (all non-trivial).
  assert np.count_nonzero(np.abs(pe[9:13]).sum(axis=0) > 0) == 3
  # Two components (2 + 3 nodes): 2 zero eigenvalues skipped, 3 non-trivial left.
  assert np.count_nonzero(np.abs(pe[13:18]).sum(axis=0) > 0) == 3


def test_spd_histogram_of_a_path_cycle_star_and_a_disconnected_graph():
  import networkx as nx  # pylint: disable=g-import-not-at-top
  graphs = [nx.path_graph(4), nx.cycle_graph(5), nx.star_graph(3), nx.disjoint_union(nx.path_graph(2), nx.path_graph(3)),
            nx.empty_graph(1)]
  ds = _dataset(graphs)
  h = structure.spd_histogram(ds, n_spd=3)
  # Path 0-1-2-3: node 0 sees one node at each distance 1, 2, 3 (of 3 others).
  np.testing.assert_allclose(h[0], [1 / 3, 1 / 3, 1 / 3])
  np.testing.assert_allclose(h[1], [2 / 3, 1 / 3, 0])
  np.testing.assert_allclose(h[4:9], np.tile([2 / 4, 2 / 4, 0], (5, 1)))  # Cycle of 5: 2 at 1, 2 at 2.
  np.testing.assert_allclose(h[9], [1, 0, 0])  # Star centre.
  np.testing.assert_allclose(h[10], [1 / 3, 2 / 3, 0])  # A leaf: centre at 1, the other leaves at 2.
  # Disconnected 2 + 3 nodes: unreachable nodes count in no column.
  np.testing.assert_allclose(h[13], [1 / 4, 0, 0])
  np.testing.assert_allclose(h[15], [1 / 4, 1 / 4, 0])
  np.testing.assert_allclose(h[18], [0, 0, 0])  # One node alone.
  for g, graph in enumerate(graphs):  # Against networkx's BFS distances, every node.
    lengths = dict(nx.all_pairs_shortest_path_length(graph))
    n = graph.number_of_nodes()
    for i in range(n):
      counts = np.bincount([d for d in lengths[i].values() if 1 <= d <= 3], minlength=4)[1:4]
      np.testing.assert_allclose(h[ds.node_offsets[g] + i], counts / max(n - 1, 1), atol=1e-7)


def test_new_embeddings_on_real_molecules_are_finite_and_fast(data_dir):
  from tests.conftest import read_real  # pylint: disable=g-import-not-at-top
  ds = read_real(data_dir, "MUTAG")
  pe, spd = structure.laplacian_pe(ds), structure.spd_histogram(ds)
  assert pe.shape == (ds.num_nodes, structure.N_LAP) and spd.shape == (ds.num_nodes, structure.N_SPD)
  assert np.isfinite(pe).all() and np.all((spd >= 0) & (spd <= 1))
  np.testing.assert_allclose(spd.sum(axis=1) <= 1 + 1e-6, True)
