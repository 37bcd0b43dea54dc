"""Datasets from your own graphs, in memory: NumPy arrays, networkx graphs or TF-GNN GraphTensors.

Each builder returns a `data_prep.tu.TUDataset` holding the graphs exactly as the TU reader holds a file
dataset (each undirected edge once as u < v, self-loops dropped and counted, labels remapped to
0..C-1 in sorted order), so everything downstream is the same: pass it to
`data_prep.cache.prepare_setting(setting, datasets={name: dataset})` (or
`tff_graph.experiment.prepare_data(config, datasets=...)`) and any setting form works on it
(`"mine"`, `"mine@4"`, `"mine:10"`, `"mine:10:dirichlet=0.5"`, `"mine,MUTAG"`), with the structure
embeddings, the cache and every output of a run. The cache key is a hash of the arrays' content.

Node features: integer arrays are node labels (one-hot encoded as the papers do), float arrays are
node attributes; `node_features=` of `prepare_setting` chooses between them when a dataset has both.

    from data_prep import graphs
    ds = graphs.from_numpy("mine", [(edges, x, label), ...])   # edges [E, 2] 0-based, x [n, d] or None
    ds = graphs.from_networkx("mine", nx_graphs, labels)        # node attribute "x" and/or "label"
    ds = graphs.from_graph_tensors("mine", graph_tensors, labels)
"""

from __future__ import annotations

from typing import Any, Callable, Iterable, Sequence

import numpy as np

from data_prep import tu

IN_MEMORY = "in memory"


class GraphInputError(ValueError):
  """A graph given in memory is malformed; the message names the graph (0-based) and the problem."""


def _as_graph(i: int, item: Any) -> tuple[np.ndarray, int, np.ndarray | None, np.ndarray | None, Any]:
  """(edges, num_nodes, node_labels, node_attributes, label) of one (edges, x, label) or dict item."""
  if isinstance(item, dict):
    edges, label = item.get("edges"), item.get("label")
    labels, attrs = item.get("node_labels"), item.get("node_attributes")
    num_nodes = item.get("num_nodes")
    if "x" in item:
      x = np.asarray(item["x"])
      labels, attrs = (x, attrs) if np.issubdtype(x.dtype, np.integer) else (labels, x)
  else:
    try:
      edges, x, label = item
    except (TypeError, ValueError):
      raise GraphInputError(f"graph {i}: expected (edges, node_features, label) or a dict, got "
                            f"{type(item).__name__}") from None
    labels = attrs = None
    num_nodes = None
    if x is not None:
      x = np.asarray(x)
      if np.issubdtype(x.dtype, np.integer):
        labels = x
      elif np.issubdtype(x.dtype, np.floating):
        attrs = x
      else:
        raise GraphInputError(f"graph {i}: node features must be integer (labels) or float (attributes), "
                              f"got dtype {x.dtype}")
  edges = np.asarray(edges if edges is not None else np.zeros((0, 2)), dtype=np.float64)
  if edges.size and (edges.ndim != 2 or edges.shape[1] != 2):
    raise GraphInputError(f"graph {i}: edges must have shape [E, 2], got {edges.shape}")
  edges = edges.reshape(-1, 2)
  if edges.size and (np.any(edges != np.round(edges)) or edges.min() < 0):
    raise GraphInputError(f"graph {i}: edge endpoints must be non-negative integers (0-based node ids)")
  edges = edges.astype(np.int64)
  sizes = [len(a) for a in (labels, attrs) if a is not None]
  if num_nodes is None:
    num_nodes = sizes[0] if sizes else (int(edges.max()) + 1 if edges.size else 0)
  num_nodes = int(num_nodes)
  if any(s != num_nodes for s in sizes):
    raise GraphInputError(f"graph {i}: node feature rows ({sizes}) differ from its {num_nodes} nodes")
  if num_nodes < 1:
    raise GraphInputError(f"graph {i}: a graph needs at least one node")
  if edges.size and edges.max() >= num_nodes:
    raise GraphInputError(f"graph {i}: edge endpoint {int(edges.max())} is not a node (it has {num_nodes})")
  if label is None:
    raise GraphInputError(f"graph {i}: no label")
  for name, a in (("node_labels", labels), ("node_attributes", attrs)):
    if a is not None and np.asarray(a).ndim not in (1, 2):
      raise GraphInputError(f"graph {i}: {name} must be [n] or [n, d]")
  to2d = lambda a: None if a is None else np.asarray(a).reshape(num_nodes, -1)
  return edges, num_nodes, to2d(labels), to2d(attrs), label


def _stack(what: str, parts: list[np.ndarray | None], dtype) -> np.ndarray | None:
  present = [p is not None for p in parts]
  if not any(present):
    return None
  if not all(present):
    raise GraphInputError(f"graph {present.index(False)} has no {what} but graph {present.index(True)} has")
  widths = {p.shape[1] for p in parts}
  if len(widths) > 1:
    raise GraphInputError(f"{what} widths differ between graphs: {sorted(widths)}")
  return np.concatenate(parts).astype(dtype)


def from_numpy(name: str, graphs: Iterable[Any]) -> tu.TUDataset:
  """A dataset from (edges, node_features, label) tuples or dicts.

  Each item is `(edges, x, label)`: `edges` int [E, 2] with 0-based node ids (either direction, repeats
  and self-loops allowed: they are normalised as the TU reader does), `x` [n] or [n, d] (integer = node
  labels, float = node attributes) or None (featureless: degree features), `label` a graph label (any
  sortable value). Or a dict with keys `edges`, `label` and any of `num_nodes`, `node_labels`,
  `node_attributes`, `x`.

  Raises:
    GraphInputError: naming the first malformed graph.
  """
  if not name or "," in name or ":" in name or "@" in name:
    raise GraphInputError(f"dataset name {name!r} must be non-empty without ',', ':' or '@'")
  items = [_as_graph(i, g) for i, g in enumerate(graphs)]
  if not items:
    raise GraphInputError(f"dataset {name!r}: no graphs")
  offsets = np.zeros(len(items) + 1, np.int64)
  offsets[1:] = np.cumsum([n for _, n, *_ in items])
  keys, loops = [], 0
  total = int(offsets[-1])
  for (edges, _, *_rest), lo in zip(items, offsets[:-1]):
    u, v = np.minimum(edges[:, 0], edges[:, 1]) + lo, np.maximum(edges[:, 0], edges[:, 1]) + lo
    loops += int(np.unique(u[u == v]).size)
    keys.append(np.unique(u[u != v] * total + v[u != v]))
  unique = np.unique(np.concatenate(keys)) if keys else np.zeros(0, np.int64)
  edges = np.stack([unique // total, unique % total], axis=1).astype(np.int64).reshape(-1, 2)
  edge_offsets = np.searchsorted(edges[:, 0], offsets).astype(np.int64)
  raw = [it[4] for it in items]
  try:
    raw_values, labels = np.unique(np.asarray(raw), return_inverse=True)
  except TypeError:
    raise GraphInputError(f"dataset {name!r}: graph labels must be comparable values") from None
  node_labels = _stack("node labels", [it[2] for it in items], np.int64)
  node_attrs = _stack("node attributes", [it[3] for it in items], np.float32)
  return tu.TUDataset(name=name, node_offsets=offsets, edges=edges, edge_offsets=edge_offsets,
                      graph_labels=labels.astype(np.int64), raw_label_values=raw_values,
                      node_labels=node_labels, node_attributes=node_attrs, num_self_loops=loops,
                      source=IN_MEMORY)


def _label(i: int, labels: Sequence[Any] | None, own: Callable[[], Any] | None, hint: str) -> Any:
  """Graph i's label: `labels[i]` if labels are given, else the graph's own (`own()`), else an error."""
  if labels is not None:
    return labels[i] if i < len(labels) else None
  if own is None:
    raise GraphInputError(f"graph {i}: no label (pass labels= or {hint})")
  return own()


def _from_items(name: str, items: list[dict[str, Any]], labels: Sequence[Any] | None) -> tu.TUDataset:
  if labels is not None and len(labels) != len(items):
    raise GraphInputError(f"{len(labels)} labels for {len(items)} graphs")
  return from_numpy(name, items)


def from_networkx(name: str, graphs: Sequence[Any], labels: Sequence[Any] | None = None, *,
                  node_label: str = "label", node_attributes: str = "x", graph_label: str = "label") -> tu.TUDataset:
  """A dataset from networkx graphs (directed graphs are read as undirected).

  Node order is `list(G.nodes)`. A node attribute `node_label` (int) becomes a node label, `node_attributes`
  (a number or vector) a node attribute; the graph label is `labels[i]`, else `G.graph[graph_label]`.
  """
  items = []
  for i, g in enumerate(graphs):
    nodes = list(g.nodes)
    index = {n: k for k, n in enumerate(nodes)}
    edges = np.asarray([(index[a], index[b]) for a, b in g.edges()], np.int64).reshape(-1, 2)
    item: dict[str, Any] = {"edges": edges, "num_nodes": len(nodes)}
    data = [g.nodes[n] for n in nodes]
    if nodes and all(node_label in d for d in data):
      item["node_labels"] = np.asarray([d[node_label] for d in data], np.int64)
    if nodes and all(node_attributes in d for d in data):
      item["node_attributes"] = np.asarray([np.ravel(d[node_attributes]) for d in data], np.float32)
    own = (lambda g=g: g.graph[graph_label]) if graph_label in g.graph else None
    item["label"] = _label(i, labels, own, f"set G.graph[{graph_label!r}]")
    items.append(item)
  return _from_items(name, items, labels)


def from_graph_tensors(name: str, graph_tensors: Sequence[Any], labels: Sequence[Any] | None = None, *,
                       node_set: str = "nodes", edge_set: str = "edges", feature: str | None = "hidden_state",
                       label_feature: str = "label") -> tu.TUDataset:
  """A dataset from scalar (unbatched) `tfgnn.GraphTensor`s with one node set and one edge set.

  Node features: `node_sets[node_set][feature]` (integer = labels, float = attributes; None or absent:
  featureless); label: `labels[i]`, else `context[label_feature]`.
  """
  items = []
  for i, gt in enumerate(graph_tensors):
    if gt.rank != 0:
      raise GraphInputError(f"graph {i}: expected a scalar GraphTensor (rank 0), got rank {gt.rank}")
    if node_set not in gt.node_sets or edge_set not in gt.edge_sets:
      raise GraphInputError(f"graph {i}: needs node set {node_set!r} and edge set {edge_set!r}, has "
                            f"{sorted(gt.node_sets)} / {sorted(gt.edge_sets)}")
    es = gt.edge_sets[edge_set]
    edges = np.stack([es.adjacency.source.numpy(), es.adjacency.target.numpy()], axis=1)
    item: dict[str, Any] = {"edges": edges, "num_nodes": int(np.sum(gt.node_sets[node_set].sizes.numpy()))}
    feats = gt.node_sets[node_set].features
    if feature is not None and feature in feats:
      item["x"] = feats[feature].numpy()
    own = ((lambda gt=gt: np.ravel(gt.context.features[label_feature].numpy())[0].item())
           if label_feature in gt.context.features else None)
    item["label"] = _label(i, labels, own, f"a context feature {label_feature!r}")
    items.append(item)
  return _from_items(name, items, labels)
