"""FedAvg and the algorithms that differ from it by one component.

* FedAvg: McMahan et al., "Communication-Efficient Learning of Deep Networks from Decentralized
  Data", AISTATS 2017 (arXiv:1602.05629). Here with stateful clients: the part of the model that is
  not shared stays on each client (as in both papers' code, which shares only the GIN layers).
* FedProx: Li et al., "Federated Optimization in Heterogeneous Networks", MLSys 2020
  (arXiv:1812.06127): FedAvg with the local objective CE + mu/2 ||w_shared - w_shared^t||^2.
* FedPer: Arivazhagan et al., "Federated Learning with Personalization Layers", 2019
  (arXiv:1912.00818): FedAvg sharing the body (here the GIN layers and the post-pooling layer).
* Local (Self-train): nothing is shared.

Every builder returns a `tff_graph.federated.process.GraphProcess` (a `tff.templates.IterativeProcess`).
Type signatures with the default aggregator (`<...>` abbreviates a structure, as
`tff_graph.federated.process.type_outline` prints it; `tests/algorithms/builders_test.py` checks
them against the real ones). FedAvg, FedProx, FedPer (and FedStar):

    initialize: ( -> <round=int32,shared=<...>,aggregator=<...>,clusters=<>,rule=<>>@SERVER)
    next: (<server=<round=int32,shared=<...>,aggregator=<...>,clusters=<>,rule=<>>@SERVER,
        states={<private=<...>,adam_m=<...>,adam_v=<...>,adam_step=int64,rng=<...>>}@CLIENTS,
        inputs={<train=str,val=str,test=str,feature_dim=int32,num_classes=int32,train_size=float32,
        shuffle_seed=int64,client_index=int32>}@CLIENTS> -> <state=<round=int32,shared=<...>,
        aggregator=<...>,clusters=<>,rule=<>>@SERVER,client_states={<private=<...>,adam_m=<...>,
        adam_v=<...>,adam_step=int64,rng=<...>>}@CLIENTS,metrics=<server=<...>@SERVER,
        clients={<...>}@CLIENTS>>)
    evaluate: (<server=<round=int32,shared=<...>,aggregator=<...>,clusters=<>,rule=<>>@SERVER,
        states={<private=<...>,adam_m=<...>,adam_v=<...>,adam_step=int64,rng=<...>>}@CLIENTS,
        inputs={<train=str,val=str,test=str,feature_dim=int32,num_classes=int32,train_size=float32,
        shuffle_seed=int64,client_index=int32>}@CLIENTS> -> {<val_loss=float32,val_accuracy=float32,
        test_loss=float32,test_accuracy=float32,client_index=int32>}@CLIENTS)

Local:

    initialize: ( -> <round=int32,shared=<>,aggregator=<>,clusters=<>,rule=<>>@SERVER)
    next: (<server=<round=int32,shared=<>,aggregator=<>,clusters=<>,rule=<>>@SERVER,
        states={<private=<...>,adam_m=<...>,adam_v=<...>,adam_step=int64,rng=<...>>}@CLIENTS,
        inputs={<train=str,val=str,test=str,feature_dim=int32,num_classes=int32,train_size=float32,
        shuffle_seed=int64,client_index=int32>}@CLIENTS> -> <state=<round=int32,shared=<>,aggregator=<>,
        clusters=<>,rule=<>>@SERVER,client_states={<private=<...>,adam_m=<...>,adam_v=<...>,
        adam_step=int64,rng=<...>>}@CLIENTS,metrics=<server=<...>@SERVER,clients={<...>}@CLIENTS>>)
    evaluate: (<server=<round=int32,shared=<>,aggregator=<>,clusters=<>,rule=<>>@SERVER,
        states={<private=<...>,adam_m=<...>,adam_v=<...>,adam_step=int64,rng=<...>>}@CLIENTS,
        inputs={<train=str,val=str,test=str,feature_dim=int32,num_classes=int32,train_size=float32,
        shuffle_seed=int64,client_index=int32>}@CLIENTS> -> {<val_loss=float32,val_accuracy=float32,
        test_loss=float32,test_accuracy=float32,client_index=int32>}@CLIENTS)

The client state is `<private, adam_m, adam_v, adam_step, rng>` (the private weights, the Adam
moments and step of all variables, the dropout generator states); the client data is
`tff_graph.federated.client_work.client_input_spec()`; the server metrics are
`<train=<mean train metrics>, aggregator=<the aggregator's measurements>>` and the client metrics
`<train_loss, train_accuracy, update_norm, last_grad_norm, client_index>`.
"""

from __future__ import annotations

import dataclasses
from typing import Sequence

from tff_graph.federated import client_work as cw
from tff_graph.federated import process as process_lib

FEDPROX_MU = 0.01


def build_fedavg(*, model_fn: process_lib.ModelFn, input_spec: cw.InputSpec,
                 shared_parts: Sequence[str] = ("gnn",), training: cw.TrainingConfig = cw.TrainingConfig(),
                 init_seed: int = 0, model_aggregator: process_lib.Aggregator | None = None,
                 worker_states: process_lib.WorkerStates | None = None) -> process_lib.GraphProcess:
  """FedAvg of the model's `shared_parts` (default: the GIN layers, `gnn`).

  Args:
    model_fn: `model_fn(seed, client)` -> a Keras model that declares its parts (`parts()`).
    input_spec: the widths every client parses.
    shared_parts: the parts that are averaged.
    training: local training hyper-parameters.
    init_seed: seed of the server's initial shared weights.
    model_aggregator: any `tff.aggregators` factory for the shared update (default
      `tff.aggregators.MeanFactory()`, weighted by train size).
    worker_states: keep the client states in files where the clients run (`process.WorkerStates`;
      default: the states travel with every call).

  Returns:
    A `GraphProcess` with the signatures of the module docstring.
  """
  return process_lib.build_process(model_fn=model_fn, input_spec=input_spec, shared_parts=shared_parts,
                                   training=training, init_seed=init_seed, model_aggregator=model_aggregator,
                                   worker_states=worker_states)


def build_fedprox(*, model_fn: process_lib.ModelFn, input_spec: cw.InputSpec, proximal_mu: float = FEDPROX_MU,
                  shared_parts: Sequence[str] = ("gnn",), training: cw.TrainingConfig = cw.TrainingConfig(),
                  init_seed: int = 0, model_aggregator: process_lib.Aggregator | None = None,
                  worker_states: process_lib.WorkerStates | None = None) -> process_lib.GraphProcess:
  """FedProx: `build_fedavg` with the proximal term `proximal_mu` (default 0.01) in the local loss."""
  return build_fedavg(model_fn=model_fn, input_spec=input_spec, shared_parts=shared_parts,
                      training=dataclasses.replace(training, proximal_mu=proximal_mu), init_seed=init_seed,
                      model_aggregator=model_aggregator, worker_states=worker_states)


def build_fedper(*, model_fn: process_lib.ModelFn, input_spec: cw.InputSpec,
                 shared_parts: Sequence[str] = ("gnn", "post"), training: cw.TrainingConfig = cw.TrainingConfig(),
                 init_seed: int = 0, model_aggregator: process_lib.Aggregator | None = None,
                 worker_states: process_lib.WorkerStates | None = None) -> process_lib.GraphProcess:
  """FedPer: `build_fedavg` sharing the body (`gnn` + `post`); input layer and head stay private."""
  return build_fedavg(model_fn=model_fn, input_spec=input_spec, shared_parts=shared_parts, training=training,
                      init_seed=init_seed, model_aggregator=model_aggregator, worker_states=worker_states)


def build_local(*, model_fn: process_lib.ModelFn, input_spec: cw.InputSpec,
                training: cw.TrainingConfig = cw.TrainingConfig(), init_seed: int = 0,
                model_aggregator: process_lib.Aggregator | None = None,
                worker_states: process_lib.WorkerStates | None = None) -> process_lib.GraphProcess:
  """Local training (Self-train): the same process with nothing shared (`shared` is empty)."""
  if model_aggregator is not None:
    raise process_lib.ProcessError("local shares nothing: a model_aggregator has nothing to aggregate")
  return process_lib.build_process(model_fn=model_fn, input_spec=input_spec, shared_parts=(), training=training,
                                   init_seed=init_seed, worker_states=worker_states)
