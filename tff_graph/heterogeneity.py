r"""Graph heterogeneity measurements of the GCFL paper (Xie et al., NeurIPS 2021, Section 3).

* **Graph properties vs random graphs** (its Table 1): per graph, the kurtosis of the degree
  distribution, the average shortest-path length (within the largest connected component), the share
  of nodes in the largest component and the average clustering coefficient; each compared with
  Erdős–Rényi G(n, m) graphs with the same node and edge counts, with the p-value of a two-sided
  Wilcoxon signed-rank test over the dataset's graphs (paired: each graph with its random twin).
* **Structure heterogeneity**: a graph's anonymous-walk embedding (AWE; Ivanov & Burnaev, ICML 2018)
  is the empirical distribution of the anonymous patterns of `num_walks` random walks of `length`
  steps from uniformly drawn start nodes (a pattern renames nodes by order of first visit:
  a-b-a-c -> 0-1-0-2). Two graphs' heterogeneity is the Jensen–Shannon *distance* of their AWEs.
* **Feature heterogeneity**: a graph's distribution of cosine similarities between the features of
  linked nodes, as a histogram on [-1, 1] (`bins` bins); two graphs' heterogeneity is the
  Jensen–Shannon *divergence* of their histograms.

All sampling uses an explicit `numpy.random.Generator`.
"""

from __future__ import annotations

import dataclasses
import itertools
from typing import Callable, Sequence

import networkx as nx
import numpy as np
from scipy import stats
from scipy.spatial import distance

from data_prep import cache
from data_prep import tu


DOMAINS = {
    **{d: "molecules" for d in ("MUTAG", "BZR", "COX2", "DHFR", "PTC_MR", "AIDS", "NCI1")},
    **{d: "bioinformatics" for d in ("ENZYMES", "DD", "PROTEINS")},
    **{d: "social" for d in ("COLLAB", "IMDB-BINARY", "IMDB-MULTI")},
    **{d: "vision" for d in ("Letter-low", "Letter-med", "Letter-high")},
}


def domain_summary(names: Sequence[str], matrix: np.ndarray) -> dict[str, float]:
  """GCFL Table 2 layout: mean over the diagonal (within a dataset), over pairs of different datasets
  of one domain, and over pairs across domains."""
  k = len(names)
  same = [matrix[i, j] for i in range(k) for j in range(i + 1, k) if DOMAINS[names[i]] == DOMAINS[names[j]]]
  cross = [matrix[i, j] for i in range(k) for j in range(i + 1, k) if DOMAINS[names[i]] != DOMAINS[names[j]]]
  nan = float("nan")
  return {"within_dataset": float(np.mean(np.diag(matrix))),
          "within_domain": float(np.mean(same)) if same else nan,
          "across_domains": float(np.mean(cross)) if cross else nan}


def shard_summary(matrix: np.ndarray) -> dict[str, float]:
  """For clients that are shards of one dataset (PROTEINS:10): the mean of the diagonal (a client with
  itself) and over the pairs of clients (`within_vs_all_of`'s all-client number)."""
  return {"within_client": float(np.mean(np.diag(matrix))), "between_clients": within_vs_all_of(matrix, [])[1]}


def to_networkx(data: tu.TUDataset, g: int) -> nx.Graph:
  """Graph g of a dataset as an undirected networkx graph with nodes 0..n-1."""
  lo, hi = data.node_offsets[g], data.node_offsets[g + 1]
  graph = nx.Graph()
  graph.add_nodes_from(range(hi - lo))
  graph.add_edges_from((data.edges[data.edge_offsets[g]:data.edge_offsets[g + 1]] - lo).tolist())
  return graph


# ----- graph properties ------------------------------------------------------------------------


def degree_kurtosis(graph: nx.Graph) -> float:
  degrees = np.array([d for _, d in graph.degree()], float)
  return float(stats.kurtosis(degrees)) if len(degrees) > 1 and degrees.std() > 0 else 0.0


def largest_component_share(graph: nx.Graph) -> float:
  if graph.number_of_nodes() == 0:
    return 0.0
  return max(len(c) for c in nx.connected_components(graph)) / graph.number_of_nodes()


def average_shortest_path(graph: nx.Graph) -> float:
  """Average shortest-path length within the largest connected component (0 for one node)."""
  if graph.number_of_nodes() == 0:
    return 0.0
  largest = graph.subgraph(max(nx.connected_components(graph), key=len))
  return float(nx.average_shortest_path_length(largest)) if largest.number_of_nodes() > 1 else 0.0


def average_clustering(graph: nx.Graph) -> float:
  return float(nx.average_clustering(graph)) if graph.number_of_nodes() else 0.0


PROPERTIES: dict[str, Callable[[nx.Graph], float]] = {
    "degree_kurtosis": degree_kurtosis,
    "avg_shortest_path": average_shortest_path,
    "largest_component_share": largest_component_share,
    "avg_clustering": average_clustering,
}


def random_twin(graph: nx.Graph, rng: np.random.Generator) -> nx.Graph:
  """An Erdős–Rényi G(n, m) graph with the same numbers of nodes and edges."""
  return nx.gnm_random_graph(graph.number_of_nodes(), graph.number_of_edges(),
                             seed=int(rng.integers(2**31 - 1)))


@dataclasses.dataclass(frozen=True)
class PropertyComparison:
  name: str
  real: float  # Mean over graphs.
  random: float  # Mean over the random twins.
  p_value: float  # Two-sided Wilcoxon signed-rank test, paired by graph.


def compare_with_random(graphs: Sequence[nx.Graph], rng: np.random.Generator) -> list[PropertyComparison]:
  """GCFL Table 1 for one dataset: each property of real graphs vs their G(n, m) twins."""
  twins = [random_twin(g, rng) for g in graphs]
  out = []
  for name, fn in PROPERTIES.items():
    real = np.array([fn(g) for g in graphs])
    rand = np.array([fn(g) for g in twins])
    diff = real - rand
    # With tied pairs (zero differences) the exact test does not apply; choose the normal
    # approximation ourselves instead of letting scipy fall back to it with a warning.
    method = 'approx' if np.any(diff == 0) else 'auto'
    p = 1.0 if np.allclose(diff, 0) else float(stats.wilcoxon(real, rand, method=method).pvalue)
    out.append(PropertyComparison(name, float(real.mean()), float(rand.mean()), p))
  return out


# ----- structure heterogeneity: anonymous walks ---------------------------------------------------


def anonymous_patterns(length: int) -> list[tuple[int, ...]]:
  """Every anonymous walk pattern of `length` steps (length + 1 positions), in a fixed order."""
  patterns = [(0,)]
  for _ in range(length):
    patterns = [p + (k,) for p in patterns for k in range(max(p) + 2) if k != p[-1]]
  return patterns


def anonymous_walk_embedding(graph: nx.Graph, length: int, num_walks: int,
                             rng: np.random.Generator) -> np.ndarray:
  """Distribution of anonymous patterns of sampled random walks (see module docstring).

  Returns len(anonymous_patterns(length)) + 1 probabilities: one per pattern, in that order, and a
  last one for walks that start on an isolated node (they cannot move), so isolated nodes count too.
  """
  patterns = anonymous_patterns(length)
  index = {p: i for i, p in enumerate(patterns)}
  counts = np.zeros(len(patterns) + 1)  # Last slot: walks stuck on an isolated node.
  nodes = list(graph.nodes)
  if not nodes:
    return counts
  neighbours = {v: list(graph.neighbors(v)) for v in nodes}
  starts = rng.integers(0, len(nodes), size=num_walks)
  for s in starts:
    walk = [nodes[s]]
    stuck = False
    for _ in range(length):
      nbrs = neighbours[walk[-1]]
      if not nbrs:
        stuck = True
        break
      walk.append(nbrs[rng.integers(len(nbrs))])
    if stuck:
      counts[-1] += 1
      continue
    first: dict[object, int] = {}
    pattern = tuple(first.setdefault(v, len(first)) for v in walk)
    counts[index[pattern]] += 1
  return counts / counts.sum()


def js_distance(p: np.ndarray, q: np.ndarray) -> float:
  """Jensen–Shannon distance (base 2, in [0, 1])."""
  return float(distance.jensenshannon(p, q, base=2)) if p.sum() and q.sum() else 0.0


def js_divergence(p: np.ndarray, q: np.ndarray) -> float:
  """Jensen–Shannon divergence (base 2, in [0, 1]): the squared distance."""
  return js_distance(p, q) ** 2


# ----- feature heterogeneity --------------------------------------------------------------------


def linked_feature_similarity(features: np.ndarray, edges: np.ndarray, bins: int = 20) -> np.ndarray:
  """Histogram on [-1, 1] of the cosine similarity of the features of linked nodes (normalised)."""
  if len(edges) == 0:
    return np.zeros(bins)
  a, b = features[edges[:, 0]], features[edges[:, 1]]
  norms = np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1)
  cos = np.sum(a * b, axis=1) / np.maximum(norms, 1e-12)
  hist, _ = np.histogram(np.clip(cos, -1, 1), bins=bins, range=(-1.0, 1.0))
  return hist / max(hist.sum(), 1)


@dataclasses.dataclass(frozen=True)
class GraphProfile:
  """What heterogeneity needs of one graph: its AWE and its linked-feature similarity histogram."""

  dataset: str
  awe: np.ndarray
  feature_hist: np.ndarray


def profile_graphs(ds: cache.PreparedDataset, indices: Sequence[int], *, length: int, num_walks: int,
                   bins: int, rng: np.random.Generator) -> list[GraphProfile]:
  d = ds.data
  out = []
  for g in indices:
    lo, hi = d.node_offsets[g], d.node_offsets[g + 1]
    edges = d.edges[d.edge_offsets[g]:d.edge_offsets[g + 1]] - lo
    out.append(GraphProfile(ds.name, anonymous_walk_embedding(to_networkx(d, g), length, num_walks, rng),
                            linked_feature_similarity(ds.features[lo:hi], edges, bins)))
  return out


def mean_pairwise(a: Sequence[GraphProfile], b: Sequence[GraphProfile] | None,
                  measure: Callable[[GraphProfile, GraphProfile], float]) -> float:
  """Mean of `measure` over pairs within `a` (b None: distinct pairs) or across a x b."""
  pairs = itertools.combinations(a, 2) if b is None else itertools.product(a, b)
  values = [measure(x, y) for x, y in pairs]
  return float(np.mean(values)) if values else 0.0


def structure_measure(x: GraphProfile, y: GraphProfile) -> float:
  return js_distance(x.awe, y.awe)


def feature_measure(x: GraphProfile, y: GraphProfile) -> float:
  return js_divergence(x.feature_hist, y.feature_hist)


def pairwise_matrix(groups: Sequence[Sequence[GraphProfile]],
                    measure: Callable[[GraphProfile, GraphProfile], float]) -> np.ndarray:
  """[k, k]: mean heterogeneity within (diagonal, distinct pairs) and between groups."""
  k = len(groups)
  out = np.zeros((k, k))
  for i in range(k):
    for j in range(i, k):
      out[i, j] = out[j, i] = mean_pairwise(groups[i], None if i == j else groups[j], measure)
  return out


def within_vs_all(groups: Sequence[Sequence[GraphProfile]], clusters: Sequence[Sequence[int]],
                  measure: Callable[[GraphProfile, GraphProfile], float]) -> tuple[float, float]:
  """(mean heterogeneity between clients of the same cluster, between any two clients).

  Computed on the client-level matrix's off-diagonal entries (GCFL Figure 3's comparison).
  """
  return within_vs_all_of(pairwise_matrix(groups, measure), clusters)


def within_vs_all_of(m: np.ndarray, clusters: Sequence[Sequence[int]]) -> tuple[float, float]:
  """`within_vs_all` from an already computed client x client matrix (`pairwise_matrix`)."""
  k = len(m)
  all_pairs = [m[i, j] for i in range(k) for j in range(i + 1, k)]
  within = [m[i, j] for c in clusters for i, j in itertools.combinations(sorted(c), 2)]
  return (float(np.mean(within)) if within else float("nan"), float(np.mean(all_pairs)))
