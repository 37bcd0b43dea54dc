"""GCFL clustering functions against cases worked by hand."""

from __future__ import annotations

import numpy as np
import pytest

from tff_graph import clustering as cl


def test_cosine_similarity_by_hand():
  u = np.array([[1.0, 0.0], [0.0, 2.0], [-3.0, 0.0], [0.0, 0.0]])
  s = cl.pairwise_cosine_similarity(u)
  np.testing.assert_allclose(s[:3, :3], [[1, 0, -1], [0, 1, 0], [-1, 0, 1]], atol=1e-12)
  assert s[3, 0] == 0.0 and s[3, 3] == 0.0  # A zero update is similar to nothing.
  np.testing.assert_allclose(cl.cosine_cut_weights(u[:3]), [[2, 1, 0], [1, 2, 1], [0, 1, 2]], atol=1e-12)


def test_update_norms_by_hand():
  u = np.array([[3.0, 4.0], [-3.0, -4.0], [0.0, 1.0]])
  assert cl.max_update_norm(u) == 5.0
  assert cl.mean_update_norm(u) == pytest.approx(1.0 / 3.0)  # mean = (0, 1/3)
  assert cl.flatten([np.ones((2, 2)), np.zeros(3)]).shape == (7,)


THRESHOLDS = cl.SplitThresholds(eps1=0.1, eps2=0.5)


@pytest.mark.parametrize("round_num, size, mean, max_, expected", [
    (21, 3, 0.05, 0.6, True),    # Every condition holds.
    (20, 3, 0.05, 0.6, False),   # Still warming up (round > 20 needed).
    (21, 2, 0.05, 0.6, False),   # Cluster too small (> 2 needed).
    (21, 3, 0.10, 0.6, False),   # Mean update not small enough (< eps1).
    (21, 3, 0.05, 0.5, False),   # No client moving enough (> eps2).
])
def test_split_gate(round_num, size, mean, max_, expected):
  assert cl.should_split(round_num=round_num, cluster_size=size, mean_norm=mean, max_norm=max_,
                         thresholds=THRESHOLDS) is expected


def test_min_cut_finds_the_obvious_partition():
  # Clients 10, 11, 12 strongly tied, 13, 14 strongly tied, weak ties across.
  w = np.full((5, 5), 0.1)
  w[:3, :3] = 2.0
  w[3:, 3:] = 2.0
  a, b = cl.min_cut_bipartition(w, [10, 11, 12, 13, 14])
  assert (a, b) == ([10, 11, 12], [13, 14])


def test_min_cut_rejects_bad_weights():
  with pytest.raises(ValueError, match="non-negative"):
    cl.min_cut_bipartition(-np.ones((2, 2)), [0, 1])
  with pytest.raises(ValueError, match="m >= 2"):
    cl.min_cut_bipartition(np.ones((1, 1)), [0])


def test_dtw_of_short_known_sequences():
  # DTW (dtaidistance: sqrt of summed squared differences on the best warping path):
  # [0, 1, 2] vs [1, 2, 3]: path (0,0) (1,0) (2,1) (2,2) costs 1 + 0 + 0 + 1 -> sqrt(2).
  d = cl.dtw_distance_matrix(np.array([[0.0, 1, 2], [1, 2, 3], [0, 1, 2]]))
  np.testing.assert_allclose(d, [[0, np.sqrt(2), 0], [np.sqrt(2), 0, np.sqrt(2)], [0, np.sqrt(2), 0]])
  w = cl.dtw_cut_weights(np.array([[0.0, 1, 2], [1, 2, 3], [0, 1, 2]]))
  np.testing.assert_allclose(w, np.sqrt(2) - d)


def test_dtw_standardisation_compares_trends():
  # Same shape at different scales: distance 0 once each is divided by its std.
  seqs = np.array([[1.0, 2, 3, 2], [10.0, 20, 30, 20]])
  assert cl.dtw_distance_matrix(seqs)[0, 1] > 1
  assert cl.dtw_distance_matrix(seqs, standardize=True)[0, 1] == pytest.approx(0.0, abs=1e-12)


def test_reference_thresholds_per_setting():
  assert cl.thresholds_for("molecules") == cl.SplitThresholds(eps1=0.07, eps2=0.28, seq_length=5)
  assert cl.thresholds_for("chem").eps2 == 0.28
  assert cl.thresholds_for("biochem").eps2 == 0.35
  assert cl.thresholds_for("mix_tiny").eps1 == 0.08
  assert cl.thresholds_for("PROTEINS:10").seq_length == 10
