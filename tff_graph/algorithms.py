"""The algorithms, as data: which model, which parts are shared, which local objective.

One client-update function and one round computation serve them all (`tff_graph.federated`); an
algorithm only chooses:

| name | model | shared parts | local objective |
|---|---|---|---|
| `local` | GIN | none (no communication) | CE |
| `fedavg` (McMahan et al., AISTATS 2017) | GIN | `gnn` (the conv stack, as both reference codes) | CE |
| `fedprox` (Li et al., MLSys 2020) | GIN | `gnn` | CE + mu/2 ||w_gnn - w_gnn^t||^2, mu = 0.01 |
| `fedper` (Arivazhagan et al., 2019) | GIN | `gnn` + `post` (the body) | CE |
| `fedsage` | GIN with SAGE convs | `gnn` | CE |
| `fedstar` (Tan et al., AAAI 2023) | decoupled | `structure_encoder` | CE |
| `fedstar_share_none` | decoupled | none | CE |
| `fedstar_share_feature` | decoupled | `feature_encoder` | CE |
| `fedstar_share_all` | decoupled | everything whose shape is the same on every client | CE |
| `gcfl`, `gcfl_plus`, `gcfl_plus_dws` (Xie et al., NeurIPS 2021) | GIN | `gnn`, per cluster | CE |

FedPer split: the input layer (`input`, whose width is the dataset's feature width) and the classifier
(`head`) stay private; the GIN layers and the post-pooling layer are shared. `*_share_all` cannot
share `input`/`feature_input` or `head` across datasets of different feature widths or class counts,
so "everything" means all parts but those two.
"""

from __future__ import annotations

import dataclasses

from tff_graph.models import classifiers

FEDPROX_MU = 0.01


@dataclasses.dataclass(frozen=True)
class Algorithm:
  name: str
  model_kind: str
  shared_parts: tuple[str, ...]
  proximal_mu: float = 0.0
  backbone: str = "gin"
  clustering: str | None = None  # None, "cosine" (GCFL), "dtw_grad" (GCFL+), "dtw_update" (GCFL+dWs)


_GIN, _DEC = classifiers.GIN_MODEL, classifiers.DECOUPLED_MODEL
ALGORITHMS: dict[str, Algorithm] = {a.name: a for a in [
    Algorithm("local", _GIN, ()),
    Algorithm("fedavg", _GIN, ("gnn",)),
    Algorithm("fedprox", _GIN, ("gnn",), proximal_mu=FEDPROX_MU),
    Algorithm("fedper", _GIN, ("gnn", "post")),
    Algorithm("fedsage", _GIN, ("gnn",), backbone="sage"),
    Algorithm("fedstar", _DEC, ("structure_encoder",)),
    Algorithm("fedstar_share_none", _DEC, ()),
    Algorithm("fedstar_share_feature", _DEC, ("feature_encoder",)),
    Algorithm("fedstar_share_all", _DEC, ("structure_encoder", "feature_encoder", "fusion", "post")),
    Algorithm("gcfl", _GIN, ("gnn",), clustering="cosine"),
    Algorithm("gcfl_plus", _GIN, ("gnn",), clustering="dtw_grad"),
    Algorithm("gcfl_plus_dws", _GIN, ("gnn",), clustering="dtw_update"),
]}


def get_algorithm(name: str) -> Algorithm:
  if name not in ALGORITHMS:
    raise ValueError(f"unknown algorithm {name!r}; choose one of {', '.join(ALGORITHMS)}")
  return ALGORITHMS[name]
