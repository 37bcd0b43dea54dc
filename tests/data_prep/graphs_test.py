"""Datasets from graphs in memory: NumPy, networkx and GraphTensors give what the TU reader gives."""

from __future__ import annotations

import networkx as nx
import numpy as np
import pytest
import tensorflow as tf
import tensorflow_gnn as tfgnn

from data_prep import cache
from data_prep import graphs
from data_prep import structure
from data_prep import tu
from tests.conftest import SMALL, write_tu

# The two graphs of conftest.SMALL, 0-based, as a user would hand them over (same repeats and self-loop).
_EDGES = [np.array([[0, 1], [1, 0], [0, 1], [1, 2], [2, 1], [0, 2], [2, 0], [0, 0]]),
          np.array([[0, 1], [1, 0], [1, 2], [2, 1]])]
_NODE_LABELS = [np.array([2, 4, 2]), np.array([3, 3, 2, 2])]
_ATTRS = [np.array([[0.5, 1], [1, 2], [2, 3]], np.float32), np.array([[3, 4], [4, 5], [5, 6], [6, 7]], np.float32)]


def _same(a: tu.TUDataset, b: tu.TUDataset) -> None:
  for field in ("node_offsets", "edges", "edge_offsets", "graph_labels", "raw_label_values", "node_labels",
                "node_attributes"):
    x, y = getattr(a, field), getattr(b, field)
    assert (x is None) == (y is None), field
    if x is not None:
      np.testing.assert_array_equal(x, y, err_msg=field)
  assert a.num_self_loops == b.num_self_loops


def test_from_numpy_equals_the_tu_reader(tmp_path):
  from_file = tu.read_tu_dataset("TOY", write_tu(tmp_path, "TOY", SMALL))
  items = [{"edges": e, "node_labels": nl, "node_attributes": at, "label": lab}
           for e, nl, at, lab in zip(_EDGES, _NODE_LABELS, _ATTRS, (-1, 1))]
  items[1]["num_nodes"] = 4
  _same(graphs.from_numpy("TOY", items), from_file)
  plain = graphs.from_numpy("TOY", [(e, x, lab) for e, x, lab in zip(_EDGES, _ATTRS, (-1, 1))])
  assert plain.node_labels is None and plain.node_attributes.shape == (7, 2) and plain.source == "in memory"
  labels_only = graphs.from_numpy("TOY", [(e, x, lab) for e, x, lab in zip(_EDGES, _NODE_LABELS, (-1, 1))])
  np.testing.assert_array_equal(labels_only.node_labels[:, 0], from_file.node_labels[:, 0])


def test_from_networkx_and_from_graph_tensors_equal_from_numpy():
  rng = np.random.default_rng(0)
  nx_graphs, labels = [], []
  for i in range(12):
    g = nx.gnp_random_graph(int(rng.integers(4, 9)), 0.4, seed=i)
    for n in g.nodes:
      g.nodes[n]["x"] = rng.normal(size=2).astype(np.float32)
      g.nodes[n]["label"] = int(rng.integers(0, 3))
    nx_graphs.append(g)
    labels.append(["a", "b", "c"][i % 3])
  a = graphs.from_networkx("NX", nx_graphs, labels)
  items = [{"edges": np.array(list(g.edges()), np.int64).reshape(-1, 2), "num_nodes": g.number_of_nodes(),
            "node_labels": np.array([g.nodes[n]["label"] for n in g.nodes]),
            "node_attributes": np.array([g.nodes[n]["x"] for n in g.nodes]), "label": lab}
           for g, lab in zip(nx_graphs, labels)]
  _same(a, graphs.from_numpy("NX", items))
  assert a.raw_label_values.tolist() == ["a", "b", "c"] and a.num_classes == 3
  tensors = []
  for g, lab in zip(nx_graphs, labels):
    e = np.array(list(g.edges()), np.int32).reshape(-1, 2)
    tensors.append(tfgnn.GraphTensor.from_pieces(
        context=tfgnn.Context.from_fields(features={"label": tf.constant([labels.index(lab)])}),
        node_sets={"nodes": tfgnn.NodeSet.from_fields(sizes=[g.number_of_nodes()], features={
            "hidden_state": tf.constant(np.array([g.nodes[n]["x"] for n in g.nodes]))})},
        edge_sets={"edges": tfgnn.EdgeSet.from_fields(sizes=[len(e)], adjacency=tfgnn.Adjacency.from_indices(
            ("nodes", tf.constant(e[:, 0])), ("nodes", tf.constant(e[:, 1]))))}))
  b = graphs.from_graph_tensors("NX", tensors)
  np.testing.assert_array_equal(b.edges, a.edges)
  np.testing.assert_array_equal(b.node_attributes, a.node_attributes)
  np.testing.assert_array_equal(b.graph_labels, a.graph_labels)


@pytest.mark.parametrize("items, message", [
    ([], "no graphs"),
    ([(np.array([[0, 5]]), np.zeros((3, 1), np.float32), 0)], "graph 0: edge endpoint 5 is not a node"),
    ([(np.array([[0, 1, 2]]), None, 0)], r"graph 0: edges must have shape \[E, 2\]"),
    ([(np.array([[0, -1]]), None, 0)], "non-negative integers"),
    ([(np.array([[0, 1]]), np.zeros((2, 1), np.float32), None)], "graph 0: no label"),
    ([(np.array([[0, 1]]), np.zeros((2, 1), np.float32), 0), (np.array([[0, 1]]), None, 1)],
     "graph 1 has no node attributes but graph 0 has"),
    ([(np.array([[0, 1]]), np.zeros((2, 1), np.float32), 0), (np.array([[0, 1]]), np.zeros((2, 2), np.float32), 1)],
     r"node attributes widths differ between graphs: \[1, 2\]"),
    ([(np.array([[0, 1]]), np.array(["a", "b"]), 0)], "integer \\(labels\\) or float \\(attributes\\)"),
    (["nonsense"], "graph 0: expected \\(edges, node_features, label\\)"),
])
def test_malformed_graphs_are_named(items, message):
  with pytest.raises(graphs.GraphInputError, match=message):
    graphs.from_numpy("X", items)


def test_an_in_memory_dataset_is_prepared_and_cached_like_a_file_dataset(tmp_path, data_dir):
  rng = np.random.default_rng(1)
  items = []
  for i in range(60):
    n = int(rng.integers(5, 12))
    g = nx.cycle_graph(n) if i % 2 else nx.path_graph(n)
    items.append((np.array(list(g.edges())), None, i % 2))
  mine = graphs.from_numpy("mine", items)
  prepared = cache.prepare_setting("mine:3,MUTAG", data_dir=data_dir, cache_dir=tmp_path, datasets={"mine": mine})
  assert [c.client_id for c in prepared.clients] == ["0-mine", "1-mine", "2-mine", "3-MUTAG"]
  assert prepared.sources["mine"] == "in memory" and prepared.sources["MUTAG"].endswith("MUTAG.zip")
  assert prepared.clients[0].stats["feature_kind"] == "one_hot_degree"
  assert prepared.clients[0].feature_dim == 3 and prepared.clients[3].feature_dim == 7  # Degrees 0..2 vs labels.
  again = cache.prepare_setting("mine:3,MUTAG", data_dir=data_dir, cache_dir=tmp_path, datasets={"mine": mine})
  assert again.root == prepared.root  # Cached by content ...
  items[0] = (np.array([[0, 1]]), None, 0)
  changed = cache.prepare_setting("mine:3,MUTAG", data_dir=data_dir, cache_dir=tmp_path,
                                  datasets={"mine": graphs.from_numpy("mine", items)})
  assert changed.root != prepared.root  # ... so changed graphs are prepared again.
  loaded = cache.load_dataset(mine, cache_dir=tmp_path)
  np.testing.assert_allclose(loaded.rwse, structure.rwse(mine, 16))
  only_memory = cache.prepare_setting("mine@2", cache_dir=tmp_path, datasets={"mine": mine})  # No data_dir needed.
  assert len(only_memory.clients) == 2
