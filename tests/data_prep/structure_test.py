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
