"""FedStar: Tan et al., "Federated Learning on Non-IID Graphs via Structural Knowledge Sharing",
AAAI 2023 (arXiv:2211.13009).

Clients train the feature-structure decoupled GNN (`tff_graph.models.DecoupledClassifier`): a GCN
structure encoder on structure embeddings (RWSE + one-hot degree), a GIN feature encoder, a fusion
layer and a head. Only the structure encoder is averaged; everything else, and every Adam moment,
stays on its client. The signatures are those of `tff_graph.algorithms.fed_avg`.
"""

from __future__ import annotations

from typing import Sequence

from tff_graph.federated import client_work as cw
from tff_graph.federated import process as process_lib


def build_fedstar(*, model_fn: process_lib.ModelFn, input_spec: cw.InputSpec,
                  shared_parts: Sequence[str] = ("structure_encoder",),
                  training: cw.TrainingConfig = cw.TrainingConfig(), init_seed: int = 0,
                  model_aggregator: process_lib.Aggregator | None = None,
                  worker_states: process_lib.WorkerStates | None = None) -> process_lib.GraphProcess:
  """FedStar: averages `shared_parts` (default the structure encoder) of a decoupled model.

  Args:
    model_fn: `model_fn(seed, client)` -> a model with a `structure_encoder` part (or whatever
      `shared_parts` names).
    input_spec: the widths every client parses.
    shared_parts: the parts that are averaged (the ablations share `feature_encoder`, or all).
    training: local training hyper-parameters.
    init_seed: seed of the server's initial shared weights.
    model_aggregator: any `tff.aggregators` factory for the shared update (default weighted mean).
    worker_states: keep the client states where the clients run (as `build_fedavg`).
  """
  return process_lib.build_process(model_fn=model_fn, input_spec=input_spec, shared_parts=shared_parts,
                                   training=training, init_seed=init_seed, model_aggregator=model_aggregator,
                                   worker_states=worker_states)
