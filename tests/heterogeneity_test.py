"""Heterogeneity measures on graphs whose answers are known."""

from __future__ import annotations

import networkx as nx
import numpy as np
import pytest

from tff_graph import heterogeneity as het


def _rng(seed=0):
  return np.random.default_rng(seed)


def test_anonymous_patterns_by_hand():
  assert het.anonymous_patterns(1) == [(0, 1)]
  assert het.anonymous_patterns(2) == [(0, 1, 0), (0, 1, 2)]
  assert len(het.anonymous_patterns(3)) == 5  # 0101 0102 0120 0121 0123


def test_awe_of_a_triangle_at_length_two():
  # From any node: step 1 goes to a new node; step 2 returns (1/2) or goes to the third node (1/2).
  awe = het.anonymous_walk_embedding(nx.complete_graph(3), 2, 4000, _rng())
  np.testing.assert_allclose(awe, [0.5, 0.5, 0.0], atol=0.03)  # Last slot: isolated starts.
  # A single edge can only go back and forth.
  np.testing.assert_array_equal(het.anonymous_walk_embedding(nx.path_graph(2), 2, 100, _rng()), [1.0, 0.0, 0.0])
  lonely = nx.Graph([(0, 1)])
  lonely.add_node(2)
  awe = het.anonymous_walk_embedding(lonely, 2, 3000, _rng())
  assert awe[-1] == pytest.approx(1 / 3, abs=0.03)


def test_awe_sampling_is_seeded():
  g = nx.karate_club_graph()
  a = het.anonymous_walk_embedding(g, 4, 500, _rng(3))
  b = het.anonymous_walk_embedding(g, 4, 500, _rng(3))
  np.testing.assert_array_equal(a, b)


def test_js_between_identical_and_very_different_graphs():
  path, complete = nx.path_graph(8), nx.complete_graph(8)
  p = het.anonymous_walk_embedding(path, 3, 3000, _rng(1))
  assert het.js_distance(p, p) == 0.0
  q = het.anonymous_walk_embedding(complete, 3, 3000, _rng(2))
  assert het.js_distance(p, q) > 0.5
  assert het.js_divergence(p, q) == pytest.approx(het.js_distance(p, q) ** 2)


def test_graph_properties_by_hand():
  triangle = nx.complete_graph(3)
  assert het.average_clustering(triangle) == 1.0
  assert het.average_shortest_path(triangle) == 1.0
  assert het.average_clustering(nx.path_graph(4)) == 0.0
  two_parts = nx.Graph([(0, 1), (1, 2), (3, 4)])
  assert het.largest_component_share(two_parts) == pytest.approx(3 / 5)
  assert het.average_shortest_path(two_parts) == pytest.approx(4 / 3)  # 1, 1, 2 in the path 0-1-2.
  assert het.degree_kurtosis(nx.cycle_graph(5)) == 0.0  # All degrees equal.


def test_random_twin_has_the_requested_sizes():
  g = nx.karate_club_graph()
  twin = het.random_twin(g, _rng())
  assert twin.number_of_nodes() == g.number_of_nodes() and twin.number_of_edges() == g.number_of_edges()


# Tied pairs must not make scipy fall back (with a warning) from the exact test behind our back.
@pytest.mark.filterwarnings("error::UserWarning")
def test_compare_with_random_flags_clustered_graphs():
  # Disjoint triangles glued in a ring: very clustered, unlike G(n, m).
  graphs = []
  for k in range(4, 16):
    g = nx.Graph()
    for t in range(k):
      a, b, c = 3 * t, 3 * t + 1, 3 * t + 2
      g.add_edges_from([(a, b), (b, c), (a, c), (c, (3 * t + 3) % (3 * k))])
    graphs.append(g)
  rows = {r.name: r for r in het.compare_with_random(graphs, _rng())}
  assert rows["avg_clustering"].real > rows["avg_clustering"].random
  assert rows["avg_clustering"].p_value < 0.01


def test_linked_feature_similarity():
  features = np.array([[1.0, 0.0], [1.0, 0.0], [0.0, 1.0]])
  hist = het.linked_feature_similarity(features, np.array([[0, 1], [1, 2]]), bins=4)
  # cos = 1 (last bin) and cos = 0 (bin [0, 0.5)).
  np.testing.assert_allclose(hist, [0.0, 0.0, 0.5, 0.5])
  assert het.js_divergence(hist, hist) == 0.0


def test_within_cluster_vs_all():
  def prof(v):
    return het.GraphProfile("x", np.array(v, float), np.array(v, float))
  groups = [[prof([1, 0])], [prof([1, 0])], [prof([0, 1])], [prof([0, 1])]]
  within, overall = het.within_vs_all(groups, [[0, 1], [2, 3]], het.structure_measure)
  assert within == 0.0
  assert overall == pytest.approx(4 / 6)  # 4 of 6 pairs are at distance 1.
