"""GCFL, GCFL+ and GCFL+dWs: Xie et al., "Federated Graph Classification over Non-IID Graphs",
NeurIPS 2021 (arXiv:2106.13423).

FedAvg of the GIN layers within clusters of clients. The server state keeps K = `num_clients`
cluster slots of shared weights, every client's cluster and the split rule's state; each round, after
the clients have reported, the rule may split clusters (`tff_graph.federated.cluster_rules`), and the
round's updates are averaged within the new clusters, each from its old cluster's weights. The
clustering rule is the one swapped component:

* `build_gcfl`: cosine similarity of the updates (`CosineRule`);
* `build_gcfl_plus`: DTW of each client's last `seq_length` gradient norms of the shared layers
  after its last local step (`SequenceDTWRule(sequence="last_grad_norm")`);
* `build_gcfl_plus_dws`: DTW of the update norms (`sequence="update_norm"`).

Type signatures with the default aggregator (as in `tff_graph.algorithms.fed_avg`). GCFL:

    initialize: ( -> <round=int32,shared=<...>,aggregator=<>,clusters=<...>,rule=<>>@SERVER)
    next: (<server=<round=int32,shared=<...>,aggregator=<>,clusters=<...>,rule=<>>@SERVER,
        states={<private=<...>,adam_m=<...>,adam_v=<...>,adam_step=int64,rng=<...>>}@CLIENTS,
        inputs={<train=str,val=str,test=str,feature_dim=int32,num_classes=int32,train_size=float32,
        shuffle_seed=int64,client_index=int32>}@CLIENTS> -> <state=<round=int32,shared=<...>,
        aggregator=<>,clusters=<...>,rule=<>>@SERVER,client_states={<private=<...>,adam_m=<...>,
        adam_v=<...>,adam_step=int64,rng=<...>>}@CLIENTS,metrics=<server=<...>@SERVER,
        clients={<...>}@CLIENTS>>)
    evaluate: (<server=<round=int32,shared=<...>,aggregator=<>,clusters=<...>,rule=<>>@SERVER,
        states={<private=<...>,adam_m=<...>,adam_v=<...>,adam_step=int64,rng=<...>>}@CLIENTS,
        inputs={<train=str,val=str,test=str,feature_dim=int32,num_classes=int32,train_size=float32,
        shuffle_seed=int64,client_index=int32>}@CLIENTS> -> {<val_loss=float32,val_accuracy=float32,
        test_loss=float32,test_accuracy=float32,client_index=int32>}@CLIENTS)

GCFL+ and GCFL+dWs (the rule's state holds the sequences):

    initialize: ( -> <round=int32,shared=<...>,aggregator=<>,clusters=<...>,rule=<...>>@SERVER)
    next: (<server=<round=int32,shared=<...>,aggregator=<>,clusters=<...>,rule=<...>>@SERVER,
        states={<private=<...>,adam_m=<...>,adam_v=<...>,adam_step=int64,rng=<...>>}@CLIENTS,
        inputs={<train=str,val=str,test=str,feature_dim=int32,num_classes=int32,train_size=float32,
        shuffle_seed=int64,client_index=int32>}@CLIENTS> -> <state=<round=int32,shared=<...>,
        aggregator=<>,clusters=<...>,rule=<...>>@SERVER,client_states={<private=<...>,adam_m=<...>,
        adam_v=<...>,adam_step=int64,rng=<...>>}@CLIENTS,metrics=<server=<...>@SERVER,
        clients={<...>}@CLIENTS>>)
    evaluate: (<server=<round=int32,shared=<...>,aggregator=<>,clusters=<...>,rule=<...>>@SERVER,
        states={<private=<...>,adam_m=<...>,adam_v=<...>,adam_step=int64,rng=<...>>}@CLIENTS,
        inputs={<train=str,val=str,test=str,feature_dim=int32,num_classes=int32,train_size=float32,
        shuffle_seed=int64,client_index=int32>}@CLIENTS> -> {<val_loss=float32,val_accuracy=float32,
        test_loss=float32,test_accuracy=float32,client_index=int32>}@CLIENTS)

`shared` has shape [K, ...] (K = `num_clients` cluster slots), `clusters=<assignment=int32[N],
count=int32>`, and the server metrics add `clustering=<rule_state, assignment, count, source,
mean_norm, max_norm, split>`. The server sees every client's update (GCFL's similarity needs it).
"""

from __future__ import annotations

from typing import Sequence

from tff_graph import clustering
from tff_graph.federated import client_work as cw
from tff_graph.federated import cluster_rules
from tff_graph.federated import process as process_lib


def build_clustered(*, model_fn: process_lib.ModelFn, input_spec: cw.InputSpec, num_clients: int,
                    rule: cluster_rules.SplitRule, shared_parts: Sequence[str] = ("gnn",),
                    training: cw.TrainingConfig = cw.TrainingConfig(), init_seed: int = 0,
                    model_aggregator: process_lib.Aggregator | None = None,
                    capacity: int | None = None,
                    worker_states: process_lib.WorkerStates | None = None) -> process_lib.GraphProcess:
  """Cluster-wise FedAvg with any `SplitRule` (GCFL's builders are this with their rule).

  Args:
    model_fn, input_spec, shared_parts, training, init_seed: as `build_fedavg`.
    num_clients: N, the clients of the setting (client data carries `client_index` in [0, N)).
    rule: the split rule (its `thresholds` hold eps1, eps2, warm-up, minimum size, seq_length).
    model_aggregator: a `tff.aggregators` factory applied per cluster (default: exact weighted mean).
    capacity: cluster slots (default N, which a split never exceeds; fewer saves memory, and a split
      beyond them stops the run with an error).
    worker_states: keep the client states where the clients run (as `build_fedavg`).
  """
  return process_lib.build_process(
      model_fn=model_fn, input_spec=input_spec, shared_parts=shared_parts, training=training,
      init_seed=init_seed, model_aggregator=model_aggregator,
      clustering=process_lib.Clustering(rule=rule, num_clients=num_clients, capacity=capacity),
      worker_states=worker_states)


def build_gcfl(*, model_fn: process_lib.ModelFn, input_spec: cw.InputSpec, num_clients: int,
               thresholds: clustering.SplitThresholds = clustering.SplitThresholds(),
               shared_parts: Sequence[str] = ("gnn",), training: cw.TrainingConfig = cw.TrainingConfig(),
               init_seed: int = 0, model_aggregator: process_lib.Aggregator | None = None,
               capacity: int | None = None,
               worker_states: process_lib.WorkerStates | None = None) -> process_lib.GraphProcess:
  """GCFL: splits on cosine similarity of the updates (see module docstring)."""
  return build_clustered(model_fn=model_fn, input_spec=input_spec, num_clients=num_clients,
                         rule=cluster_rules.CosineRule(thresholds), shared_parts=shared_parts, training=training,
                         init_seed=init_seed, model_aggregator=model_aggregator, capacity=capacity,
                         worker_states=worker_states)


def build_gcfl_plus(*, model_fn: process_lib.ModelFn, input_spec: cw.InputSpec, num_clients: int,
                    thresholds: clustering.SplitThresholds = clustering.SplitThresholds(),
                    sequence: str = "last_grad_norm", shared_parts: Sequence[str] = ("gnn",),
                    training: cw.TrainingConfig = cw.TrainingConfig(), init_seed: int = 0,
                    model_aggregator: process_lib.Aggregator | None = None,
                    capacity: int | None = None,
                    worker_states: process_lib.WorkerStates | None = None) -> process_lib.GraphProcess:
  """GCFL+: splits on DTW distances of per-client `sequence` values (see module docstring)."""
  return build_clustered(model_fn=model_fn, input_spec=input_spec, num_clients=num_clients,
                         rule=cluster_rules.SequenceDTWRule(thresholds, sequence=sequence),
                         shared_parts=shared_parts, training=training, init_seed=init_seed,
                         model_aggregator=model_aggregator, capacity=capacity, worker_states=worker_states)


def build_gcfl_plus_dws(**kwargs) -> process_lib.GraphProcess:
  """GCFL+dWs: `build_gcfl_plus` on the update norms (`sequence="update_norm"`)."""
  return build_gcfl_plus(sequence="update_norm", **kwargs)
