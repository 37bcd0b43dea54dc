"""The federated computations of every algorithm: one round, and evaluation.

    next:     (<shared weights, K buckets>@SERVER, {client state}@CLIENTS, {client input}@CLIENTS)
                -> (<shared weights, K buckets>@SERVER, {client state}@CLIENTS, {client report}@CLIENTS)
    evaluate: (<shared weights>@SERVER, {client state}@CLIENTS, {client input}@CLIENTS)
                -> {val/test loss and accuracy}@CLIENTS

Data flow of `next`:

    shared@SERVER --broadcast--> each client gathers its bucket's weights
    client state@CLIENTS ------> ClientWork.train (E local epochs) --> new client state@CLIENTS
                                      | update (shared part only), bucket, train size
                                      v
                          aggregator (ClusterwiseMeanFactory) --> mean update per bucket@SERVER
    shared@SERVER + mean update (buckets with clients) --> new shared@SERVER

The private part of the model, the optimizer state and the dropout stream live only in the
CLIENTS-placed state: no SERVER-placed value has their type (tested on the type signature). With no
shared part (the Local baseline) `next` has no SERVER value at all and is a plain federated map.

Every CLIENTS-placed output carries the client's `client_index` (from its input): contexts that
spread clients over several workers may return CLIENTS values in another order.

Client reports hold the training metrics and, when `report_updates` is set (GCFL), each client's
update: the values the server-side clustering needs are explicit in the signature.
"""

from __future__ import annotations

import collections
import dataclasses
from typing import Callable, Sequence

import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

from tff_graph.aggregators import ClusterwiseMeanFactory
from tff_graph.federated import client_work as cw
from tff_graph.models import classifiers


@dataclasses.dataclass(frozen=True)
class FederatedProcess:
  """The computations plus the types a driver needs to build their arguments."""

  next: tff.Computation
  evaluate: tff.Computation
  shared_parts: tuple[str, ...]
  num_buckets: int
  has_shared: bool
  # (shared before a round@SERVER, {update, bucket}@CLIENTS, train size@CLIENTS) -> shared@SERVER:
  # averages already-reported updates into (new) buckets with the same aggregator (GCFL splits).
  reaggregate: tff.Computation | None = None


def _tensor_specs(values) -> list[tf.TensorSpec]:
  return [tf.TensorSpec(v.shape, v.dtype) for v in values]


def build_federated_process(model_fn: Callable[[int], classifiers.PartitionedModel],
                            shared_parts: Sequence[str], config: cw.TrainingConfig, *,
                            num_buckets: int = 1, report_updates: bool = False) -> FederatedProcess:
  """Builds the round and evaluation computations.

  Args:
    model_fn: builds the (padded) model of the setting from an integer seed.
    shared_parts: names of the model parts that are averaged; empty for no communication.
    config: local training hyper-parameters (FedProx: `proximal_mu` > 0).
    num_buckets: K, the number of clusters the shared weights are kept for (1 = plain FedAvg).
    report_updates: also return each client's update at CLIENTS (GCFL's similarity needs it).
  """
  shared_parts = tuple(shared_parts)
  # Types, from a throw-away instance in its own graph.
  with tf.Graph().as_default():
    probe = cw.ClientWork(lambda: model_fn(0), shared_parts, config)
    shared_specs = _tensor_specs(probe.layout.shared(probe.model.trainable_variables))
    state_specs = tf.nest.map_structure(lambda t: tf.TensorSpec(t.shape, t.dtype), probe.initial_state())
  has_shared = bool(shared_specs)
  stacked_type = [tff.TensorType(s.dtype.as_numpy_dtype, [num_buckets, *s.shape]) for s in shared_specs]
  state_type = tff.types.tensorflow_to_type(state_specs)
  input_type = tff.types.tensorflow_to_type(cw.client_input_spec())

  def select(stacked, bucket):
    return [tf.gather(w, bucket) for w in stacked]

  @tff.tensorflow.computation(stacked_type, state_type, input_type)
  def client_train(stacked, state, inputs):
    work = cw.ClientWork(lambda: model_fn(0), shared_parts, config)
    out = work.train(select(stacked, inputs["bucket"]), state, inputs)
    report = collections.OrderedDict(out["metrics"])
    report["client_index"] = inputs["client_index"]
    if report_updates:
      report["update"] = out["update"]
    return collections.OrderedDict(
        contribution=collections.OrderedDict(update=out["update"], bucket=inputs["bucket"]),
        weight=out["weight"], state=out["state"], report=report)

  @tff.tensorflow.computation(stacked_type, state_type, input_type)
  def client_evaluate(stacked, state, inputs):
    work = cw.ClientWork(lambda: model_fn(0), shared_parts, config)
    metrics = work.evaluate(select(stacked, inputs["bucket"]), state, inputs)
    metrics["client_index"] = inputs["client_index"]
    return metrics

  if not has_shared:
    @tff.federated_computation(tff.FederatedType(state_type, tff.CLIENTS),
                               tff.FederatedType(input_type, tff.CLIENTS))
    def next_local(states, inputs):
      out = tff.federated_map(client_train, (tff.federated_value([], tff.CLIENTS), states, inputs))
      return out.state, out.report

    @tff.federated_computation(tff.FederatedType(state_type, tff.CLIENTS),
                               tff.FederatedType(input_type, tff.CLIENTS))
    def evaluate_local(states, inputs):
      return tff.federated_map(client_evaluate, (tff.federated_value([], tff.CLIENTS), states, inputs))

    return FederatedProcess(next=next_local, evaluate=evaluate_local, shared_parts=shared_parts, num_buckets=num_buckets, has_shared=False)

  contribution_type = client_train.type_signature.result.contribution
  aggregation = ClusterwiseMeanFactory(num_buckets).create(contribution_type, tff.TensorType(np.float32))

  @tff.tensorflow.computation(stacked_type, aggregation.next.type_signature.result.result.member,
                              aggregation.next.type_signature.result.measurements.member)
  def apply_update(stacked, mean_update, bucket_weights):
    has = bucket_weights > 0
    return [tf.where(has[(slice(None),) + (None,) * (len(w.shape) - 1)], w + u, w)
            for w, u in zip(stacked, mean_update)]

  @tff.federated_computation(tff.FederatedType(stacked_type, tff.SERVER),
                             tff.FederatedType(state_type, tff.CLIENTS),
                             tff.FederatedType(input_type, tff.CLIENTS))
  def next_fn(shared, states, inputs):
    out = tff.federated_map(client_train, (tff.federated_broadcast(shared), states, inputs))
    aggregated = aggregation.next(aggregation.initialize(), out.contribution, out.weight)
    new_shared = tff.federated_map(
        apply_update, (shared, aggregated.result, aggregated.measurements))
    return new_shared, out.state, out.report

  @tff.federated_computation(tff.FederatedType(stacked_type, tff.SERVER),
                             tff.FederatedType(state_type, tff.CLIENTS),
                             tff.FederatedType(input_type, tff.CLIENTS))
  def evaluate_fn(shared, states, inputs):
    return tff.federated_map(client_evaluate, (tff.federated_broadcast(shared), states, inputs))

  @tff.federated_computation(tff.FederatedType(stacked_type, tff.SERVER),
                             tff.FederatedType(contribution_type, tff.CLIENTS),
                             tff.FederatedType(np.float32, tff.CLIENTS))
  def reaggregate_fn(shared, contributions, weights):
    aggregated = aggregation.next(aggregation.initialize(), contributions, weights)
    return tff.federated_map(apply_update, (shared, aggregated.result, aggregated.measurements))

  return FederatedProcess(next=next_fn, evaluate=evaluate_fn, reaggregate=reaggregate_fn,
                          shared_parts=shared_parts,
                          num_buckets=num_buckets, has_shared=True)
