r"""The one federated process of tff-graph: stateful clients, a shared part, pluggable aggregation.

Every algorithm is this process with other components (`tff_graph.algorithms` builds them):

    initialize: ( -> S@SERVER)
    next:       (<S@SERVER, {C}@CLIENTS, {D}@CLIENTS> -> <state=S@SERVER, client_states={C}@CLIENTS,
                  metrics=<server=M@SERVER, clients={R}@CLIENTS>>)
    evaluate:   (<S@SERVER, {C}@CLIENTS, {D}@CLIENTS> -> {E}@CLIENTS)

with the server state S = `<round, shared, aggregator, clusters, rule>`:

* `round` (int32): rounds completed;
* `shared`: the shared part's weights (the model's declared `shared_parts`), as a list in
  `model.trainable_variables` order; clustered processes keep one slot per cluster (leading axis K);
* `aggregator`: the state of the aggregation process (`model_aggregator`, any `tff.aggregators`
  factory: weighted or unweighted; default `tff.aggregators.MeanFactory()` weighted by train size);
* `clusters` / `rule` (clustered processes only, `()` otherwise): every client's cluster
  (`assignment` int32 [N], `count`) and the split rule's state (`tff_graph.federated.cluster_rules`).

A client state C holds the private weights (every trainable variable outside the shared part), the
torch-style Adam moments and step of all variables, and the dropout generator states; it never
leaves CLIENTS (no SERVER-placed value has its type). D is `client_work.client_input_spec()`: where
the client's TFRecords are, its widths, train size, this round's shuffling seed and its index.

Data flow of `next`:

    shared@SERVER --broadcast--> client gathers its cluster's weights (index 0 when unclustered)
    C@CLIENTS -----------------> ClientWork.train (E local epochs) --> new C@CLIENTS, report R@CLIENTS
                                      | update (shared part only), weight (train size)
       clustered only:                v
       updates, norms --federated_aggregate--> split rule @SERVER --> new assignment --broadcast--+
                                      |                                                          |
                                      v  (update, cluster)  <-------------------------------------+
                          model_aggregator (per cluster: ClusterwiseFactory) --> mean update@SERVER
    shared (each slot from its source cluster) + mean update (slots with clients) --> new shared@SERVER

Server metrics M: the mean over the round's clients of their train metrics, the aggregator's
measurements and, clustered, the split step's record (assignment, count, source, split, norms).
Clustered processes send each client's whole update to the server (GCFL's similarities need it):
nothing in them is hidden from the server, whatever the aggregator.

With no shared part (Local) `shared` is empty and nothing is aggregated; the signature is the same.
Every CLIENTS-placed output carries the client's `client_index`.

Client states that stay where the client runs (`WorkerStates`, `with_worker_states`): the same
process, with C replaced by a reference `<client, slot, version, keep>` (four int32). The client's
computation reads its state from `<directory>/client_<client>_slot<slot>.state` on the machine that
runs it, trains, writes the new state to another slot and returns the new reference, so only the
reference crosses between the driver and a worker; `install` writes the initial states once and
`fetch` reads them back (for export). See `WorkerStates` for the slots, checks and resume.
"""

from __future__ import annotations

import collections
import collections.abc
import dataclasses
from typing import Any, Callable, Sequence

import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

from tff_graph.aggregators import ClusterwiseFactory
from tff_graph.federated import client_work as cw
from tff_graph.federated import cluster_rules
from tff_graph.models import classifiers

ModelFn = Callable[[int, "cw.ClientSpec | None"], tf.keras.Model]
Aggregator = tff.aggregators.WeightedAggregationFactory | tff.aggregators.UnweightedAggregationFactory


class ProcessError(ValueError):
  """A process cannot be built from the given components."""


def to_numpy(structure: Any) -> Any:
  """A structure returned by a TFF context as canonical Python values: OrderedDicts, lists, NumPy.

  Contexts return containers of different kinds (a multi-worker context other ones than a single
  worker); loop states are always this form, so a checkpoint saved under one loads under any.
  """
  if isinstance(structure, tff.structure.Struct):
    items = tff.structure.to_elements(structure)
    if items and all(name is not None for name, _ in items):
      return collections.OrderedDict((name, to_numpy(v)) for name, v in items)
    return [to_numpy(v) for _, v in items]
  if isinstance(structure, collections.abc.Mapping):
    return collections.OrderedDict((k, to_numpy(v)) for k, v in structure.items())
  if isinstance(structure, (list, tuple)) and not hasattr(structure, "_fields"):
    return [to_numpy(v) for v in structure]
  if hasattr(structure, "_asdict"):
    return collections.OrderedDict((k, to_numpy(v)) for k, v in structure._asdict().items())
  return np.asarray(structure)


def _odict_type(items) -> tff.StructWithPythonType:
  """A named struct type whose values reach TensorFlow code as OrderedDicts."""
  return tff.StructWithPythonType(list(items), collections.OrderedDict)


def _specs(values) -> list[tf.TensorSpec]:
  return [tf.TensorSpec(v.shape, v.dtype) for v in values]


@dataclasses.dataclass(frozen=True)
class Clustering:
  """Clustered aggregation: K cluster slots over `num_clients` clients, split by `rule`."""

  rule: cluster_rules.SplitRule
  num_clients: int
  capacity: int | None = None  # Default: num_clients (clusters are never empty).

  @property
  def slots(self) -> int:
    return self.capacity or self.num_clients


@dataclasses.dataclass(frozen=True)
class WorkerStates:
  """Client states kept in files on the machine that runs the client (only references travel).

  A reference is `<client, slot, version, keep>`: the client's index, the slot its current state is
  in, how many times it has been written (0: the initial state) and the slot the newest checkpoint
  refers to (-1: none). The initial state is in slot `INITIAL_SLOT` (written by `install`, the same
  bytes every time, so installing again on a resume is harmless); each training writes the new state
  to the lowest of slots 0..2 that is neither the current one nor `keep`, so the state a checkpoint
  refers to is never overwritten until the next checkpoint (`GraphProcess.after_checkpoint`). Each
  file starts with `<client, version, number of arrays>` and every read checks it against the
  reference: a missing, stale or foreign file is an error naming it, never another client's state.

  Every machine that runs clients must see `directory` at the same path (as the prepared data); with
  several workers on several machines and client sampling, a client can run on another machine than
  last round, so the directory must then be shared storage.
  """

  directory: str
  SLOTS = 3
  INITIAL_SLOT = 3

  def __post_init__(self):
    if not self.directory:
      raise ProcessError("WorkerStates needs a directory")


def _state_path(directory: str, client, slot):
  return tf.strings.join([directory.rstrip("/"), "/client_", tf.strings.as_string(client), "_slot",
                          tf.strings.as_string(slot), ".state"])


def _state_header(ref, num_arrays: int):
  return tf.stack([tf.cast(ref["client"], tf.int64), tf.cast(ref["version"], tf.int64), tf.constant(num_arrays, tf.int64)])


def _write_state(directory: str, ref, state):
  """Writes `state` (a structure of tensors) to `ref`'s slot; returns `ref` once it is written."""
  leaves = tf.nest.flatten(state)
  parts = [tf.io.serialize_tensor(_state_header(ref, len(leaves)))] + [tf.io.serialize_tensor(x) for x in leaves]
  write = tf.io.write_file(_state_path(directory, ref["client"], ref["slot"]), tf.io.serialize_tensor(tf.stack(parts)))
  with tf.control_dependencies([write]):
    return collections.OrderedDict((k, tf.identity(v)) for k, v in ref.items())


def _read_state(directory: str, ref, spec):
  """The state `ref` refers to (structure and types of `spec`), checked against the file's header."""
  specs = tf.nest.flatten(spec)
  path = _state_path(directory, ref["client"], ref["slot"])
  parts = tf.io.parse_tensor(tf.io.read_file(path), tf.string)
  header = tf.io.parse_tensor(parts[0], tf.int64)
  expected = _state_header(ref, len(specs))
  check = tf.debugging.Assert(
      tf.logical_and(tf.equal(tf.size(parts), len(specs) + 1), tf.reduce_all(tf.equal(header, expected))),
      ["client state file", path, "holds <client, version, arrays>", header, "but the reference is", expected,
       "(overwritten, from another run, or the client ran on a machine that does not see this directory)"])
  with tf.control_dependencies([check]):
    leaves = [tf.ensure_shape(tf.io.parse_tensor(parts[i + 1], s.dtype), s.shape) for i, s in enumerate(specs)]
  return tf.nest.pack_sequence_as(spec, leaves)


def _next_slot(ref):
  candidates = tf.range(WorkerStates.SLOTS, dtype=tf.int32)
  free = tf.logical_and(tf.not_equal(candidates, ref["slot"]), tf.not_equal(candidates, ref["keep"]))
  return tf.reduce_min(tf.where(free, candidates, WorkerStates.SLOTS))


class GraphProcess(tff.templates.IterativeProcess):
  """A `tff.templates.IterativeProcess` with stateful clients (see module docstring).

  Besides `initialize` and `next`: `evaluate` (a computation), `initial_client_state(seed, client)`
  (a client's first state), `client_model(server_state, client_state, client_index)` (a Keras model
  holding a client's current weights) and the facts a program needs (`shared_parts`,
  `shared_variable_names`, `clustering`, `input_spec`).
  """

  def __init__(self, initialize_fn, next_fn, *, evaluate_fn, model_fn: ModelFn, input_spec: cw.InputSpec,
               shared_parts: tuple[str, ...], training: cw.TrainingConfig, clustering: Clustering | None,
               shared_variable_names: tuple[str, ...], aggregator: Aggregator,
               worker_states: WorkerStates | None = None, install_fn=None, fetch_fn=None,
               build_arguments: dict[str, Any] | None = None):
    super().__init__(initialize_fn, next_fn, next_is_multi_arg=True)
    self._evaluate = evaluate_fn
    self.worker_states = worker_states
    self._install = install_fn
    self._fetch = fetch_fn
    self.build_arguments = build_arguments
    self.model_fn = model_fn
    self.input_spec = input_spec
    self.shared_parts = shared_parts
    self.training = training
    self.clustering = clustering
    self.shared_variable_names = shared_variable_names
    self.aggregator = aggregator

  @property
  def evaluate(self) -> tff.Computation:
    return self._evaluate

  def _work(self, seed: int = 0, client: cw.ClientSpec | None = None) -> cw.ClientWork:
    return cw.ClientWork(lambda: self.model_fn(seed, client), self.shared_parts, self.training, self.input_spec)

  def place_client_states(self, states: Sequence[Any]) -> list[Any]:
    """What the loop keeps for clients 0..n-1 given their initial states: the states themselves, or
    (`worker_states`) references to the copies `install` writes where the clients run."""
    if self.worker_states is None:
      return list(states)
    refs = [collections.OrderedDict(client=np.int32(i), slot=np.int32(WorkerStates.INITIAL_SLOT),
                                    version=np.int32(0), keep=np.int32(-1)) for i in range(len(states))]
    # Several workers may return a call's CLIENTS values regrouped: put them in client order.
    return sorted((to_numpy(r) for r in self._install(list(states), refs)), key=lambda r: int(r["client"]))

  def after_checkpoint(self, client_states: Sequence[Any]) -> list[Any]:
    """The client states to continue with once `client_states` are saved in (or loaded from) a
    checkpoint: references then protect their slot (`keep`) until the next checkpoint."""
    if self.worker_states is None:
      return list(client_states)
    return [collections.OrderedDict(client=r["client"], slot=r["slot"], version=r["version"], keep=r["slot"])
            for r in client_states]

  def fetch_client_states(self, client_states: Sequence[Any]) -> list[Any]:
    """The full client states (private weights, optimizer) behind what the loop keeps."""
    if self.worker_states is None:
      return list(client_states)
    fetched = {int(out["client"]): out["state"] for out in map(to_numpy, self._fetch(list(client_states)))}
    return [fetched[int(r["client"])] for r in client_states]

  def initial_client_state(self, seed: int, client: cw.ClientSpec) -> Any:
    """The state a client starts from: its model built from `seed` (its private weights), zero Adam
    moments, its dropout generators. Plain NumPy values (the program keeps them by client)."""
    return to_numpy(self._work(seed, client).initial_state())

  def client_weights(self, server_state: Any, client_state: Any, client_index: int,
                     work: cw.ClientWork | None = None) -> list[np.ndarray]:
    """The client's current trainable weights: its cluster's shared weights + its private weights."""
    work = work or self._work()
    shared = [np.asarray(w) for w in server_state["shared"]]
    if self.clustering is not None:
      cluster = int(np.asarray(server_state["clusters"]["assignment"])[client_index])
      shared = [w[cluster] for w in shared]
    values: list[Any] = [None] * len(work.model.trainable_variables)
    for i, w in zip(work.layout.shared_index, shared):
      values[i] = w
    for i, w in zip(work.layout.private_index, client_state["private"]):
      values[i] = np.asarray(w)
    return values

  def client_model(self, server_state: Any, client_state: Any, client_index: int,
                   client: cw.ClientSpec | None = None) -> tf.keras.Model:
    """A Keras model holding one client's current weights (for export or inspection)."""
    work = self._work(0, client)
    for v, x in zip(work.model.trainable_variables,
                    self.client_weights(server_state, client_state, client_index, work)):
      v.assign(x)
    return work.model


def shared_variable_names(model: tf.keras.Model, shared_parts: Sequence[str]) -> tuple[str, ...]:
  """`<part>/<variable path inside the model>` of every shared variable, in `trainable_variables` order."""
  part_of = {}
  for part, layer_list in classifiers.model_parts(model).items():
    for layer in layer_list:
      for v in layer.trainable_variables:
        part_of[id(v)] = part
  prefix = model.name + "/"
  out = []
  for v in model.trainable_variables:
    if part_of.get(id(v)) in shared_parts:
      name = v.name[len(prefix):] if v.name.startswith(prefix) else v.name
      out.append(f"{part_of[id(v)]}/{name.rsplit(':', 1)[0]}")
  return tuple(out)


def _aggregate(process, state, value, weight, weighted: bool):
  return process.next(state, value, weight) if weighted else process.next(state, value)


def build_process(*, model_fn: ModelFn, input_spec: cw.InputSpec, shared_parts: Sequence[str],
                  training: cw.TrainingConfig = cw.TrainingConfig(), init_seed: int = 0,
                  model_aggregator: Aggregator | None = None,
                  clustering: Clustering | None = None,
                  worker_states: WorkerStates | None = None) -> GraphProcess:
  """Composes the process of the module docstring.

  Args:
    model_fn: `model_fn(seed, client)` builds the (padded) Keras model from an integer seed; `client`
      is a `ClientSpec` (the client's own widths) when a client's initial model is built, else None.
      The model declares its parts (`parts()`, see `tff_graph.models.PartitionedModel`).
    input_spec: the widths every client parses (`InputSpec`).
    shared_parts: names of the model parts that are aggregated; empty for no communication.
    training: local training hyper-parameters (FedProx: `proximal_mu` > 0).
    init_seed: seed of the server's initial shared weights (`model_fn(init_seed, None)`).
    model_aggregator: a `tff.aggregators` factory for the shared update (weighted: by train size);
      default `tff.aggregators.MeanFactory()`. Clustered processes apply it per cluster
      (`ClusterwiseFactory`; default: the exact weighted mean in one sum).
    clustering: `Clustering` for cluster-wise aggregation with dynamic splits (GCFL); None for one
      shared model.
    worker_states: keep the client states in files where the clients run (`WorkerStates`): `next`
      and `evaluate` then take and return references instead of states. None: states travel.

  Returns:
    A `GraphProcess`.

  Raises:
    ProcessError: if the model's parts do not cover its variables, a part is unknown, or the
      aggregator is not a `tff.aggregators` factory.
  """
  shared_parts = tuple(shared_parts)
  build_arguments = dict(model_fn=model_fn, input_spec=input_spec, shared_parts=shared_parts, training=training,
                         init_seed=init_seed, model_aggregator=model_aggregator, clustering=clustering)
  if model_aggregator is not None and not isinstance(model_aggregator, (
      tff.aggregators.WeightedAggregationFactory, tff.aggregators.UnweightedAggregationFactory)):
    raise ProcessError(f"model_aggregator must be a tff.aggregators factory, got {type(model_aggregator).__name__}")
  with tf.Graph().as_default():
    try:
      probe = cw.ClientWork(lambda: model_fn(0, None), shared_parts, training, input_spec)
    except ValueError as e:  # PartitionError included.
      raise ProcessError(str(e)) from e
    tv = probe.model.trainable_variables
    shared_specs = _specs(probe.layout.shared(tv))
    names = shared_variable_names(probe.model, shared_parts)
    state_spec = tf.nest.map_structure(lambda t: tf.TensorSpec(t.shape, t.dtype), probe.initial_state())
    full_state_type = tff.types.tensorflow_to_type(state_spec)
  if worker_states is None:
    state_type = full_state_type
  else:
    state_type = _odict_type([(n, tff.TensorType(np.int32)) for n in ("client", "slot", "version", "keep")])
  has_shared = bool(shared_specs)
  k = clustering.slots if clustering is not None else None
  num_clients = clustering.num_clients if clustering is not None else None
  if clustering is not None and not has_shared:
    raise ProcessError("a clustered process needs a shared part")
  if clustering is not None and clustering.slots > clustering.num_clients:
    raise ProcessError(f"capacity {clustering.slots} > num_clients {clustering.num_clients}")

  shared_type = [tff.TensorType(s.dtype.as_numpy_dtype, ([k] if k else []) + list(s.shape)) for s in shared_specs]
  input_type = tff.types.tensorflow_to_type(cw.client_input_spec())
  if clustering is not None:
    clusters_type = _odict_type([("assignment", tff.TensorType(np.int32, [num_clients])),
                                    ("count", tff.TensorType(np.int32))])
    rule_init = clustering.rule.initial_state(num_clients)
    rule_type = tff.types.tensorflow_to_type(tf.nest.map_structure(lambda a: tf.TensorSpec(a.shape, a.dtype), rule_init))
  broadcast_type = _odict_type([("shared", shared_type),
                                   ("assignment", clusters_type.assignment if clustering else tff.StructType([]))])

  def model_fn0():
    return model_fn(0, None)

  def client_weights(broadcast, inputs):
    if clustering is None:
      return list(broadcast["shared"])
    cluster = tf.gather(broadcast["assignment"], inputs["client_index"])
    return [tf.gather(w, cluster) for w in broadcast["shared"]]

  def state_of(state, inputs):
    """The client's state (read from its file when it stays on the worker) and its reference."""
    if worker_states is None:
      return state, None
    ref = state
    same = tf.debugging.assert_equal(ref["client"], inputs["client_index"],
                                     message="a client state reference was passed with another client's data")
    with tf.control_dependencies([same]):
      return _read_state(worker_states.directory, ref, state_spec), ref

  @tff.tensorflow.computation(broadcast_type, state_type, input_type)
  def client_train(broadcast, state, inputs):
    work = cw.ClientWork(model_fn0, shared_parts, training, input_spec)
    state, ref = state_of(state, inputs)
    out = work.train(client_weights(broadcast, inputs), state, inputs)
    new_state = out["state"]
    if worker_states is not None:
      new_ref = collections.OrderedDict(client=ref["client"], slot=_next_slot(ref), version=ref["version"] + 1,
                                        keep=ref["keep"])
      new_state = _write_state(worker_states.directory, new_ref, new_state)
    report = collections.OrderedDict(out["metrics"])
    report["client_index"] = inputs["client_index"]
    return collections.OrderedDict(update=out["update"], weight=out["weight"], state=new_state,
                                   report=report)

  @tff.tensorflow.computation(broadcast_type, state_type, input_type)
  def client_evaluate(broadcast, state, inputs):
    work = cw.ClientWork(model_fn0, shared_parts, training, input_spec)
    state, _ = state_of(state, inputs)
    metrics = work.evaluate(client_weights(broadcast, inputs), state, inputs)
    metrics["client_index"] = inputs["client_index"]
    return metrics

  update_type = client_train.type_signature.result.update
  report_type = client_train.type_signature.result.report
  weight_type = tff.TensorType(np.float32)
  metric_names = [n for n, _ in tff.structure.iter_elements(report_type) if n != "client_index"]

  if has_shared:
    if clustering is not None:
      factory = ClusterwiseFactory(k, inner=model_aggregator)
      contribution_type = _odict_type([("update", update_type), ("cluster", tff.TensorType(np.int32))])
      aggregation = factory.create(contribution_type, weight_type)
      weighted = True
    else:
      factory = model_aggregator or tff.aggregators.MeanFactory()
      weighted = isinstance(factory, tff.aggregators.WeightedAggregationFactory)
      aggregation = factory.create(update_type, weight_type) if weighted else factory.create(update_type)
    aggregator_state_type = aggregation.initialize.type_signature.result.member
  else:
    factory = model_aggregator
    aggregation = None
    aggregator_state_type = tff.StructType([])

  server_type = _odict_type([
      ("round", tff.TensorType(np.int32)), ("shared", shared_type), ("aggregator", aggregator_state_type),
      ("clusters", clusters_type if clustering else tff.StructType([])),
      ("rule", rule_type if clustering else tff.StructType([]))])

  # ----- initialize --------------------------------------------------------------------------------

  @tff.tensorflow.computation
  def initial_shared():
    model = model_fn(init_seed, None)
    layout = cw.SharingLayout.of(model, shared_parts)
    one = [tf.identity(v) for v in layout.shared(model.trainable_variables)]
    return [tf.repeat(w[None], k, axis=0) for w in one] if k else one

  @tff.tensorflow.computation
  def initial_extras():
    if clustering is None:
      return collections.OrderedDict(clusters=(), rule=())
    return collections.OrderedDict(
        clusters=collections.OrderedDict(assignment=tf.zeros([num_clients], tf.int32), count=tf.constant(1)),
        rule=tf.nest.map_structure(tf.constant, rule_init))

  @tff.tensorflow.computation(tff.TensorType(np.int32), shared_type, aggregator_state_type,
                              initial_extras.type_signature.result)
  def pack_state(round_num, shared, aggregator, extras):
    return collections.OrderedDict(round=round_num, shared=shared, aggregator=aggregator,
                                   clusters=extras["clusters"], rule=extras["rule"])

  @tff.federated_computation()
  def initialize_fn():
    aggregator_state = aggregation.initialize() if aggregation is not None else tff.federated_value((), tff.SERVER)
    return tff.federated_map(pack_state, tff.federated_zip((
        tff.federated_value(np.int32(0), tff.SERVER), tff.federated_eval(initial_shared, tff.SERVER),
        aggregator_state, tff.federated_eval(initial_extras, tff.SERVER))))

  # ----- next ------------------------------------------------------------------------------------

  @tff.tensorflow.computation(server_type)
  def to_broadcast(server):
    assignment = server["clusters"]["assignment"] if clustering else ()
    return collections.OrderedDict(shared=server["shared"], assignment=assignment)

  @tff.tensorflow.computation(report_type)
  def train_metrics(report):
    return collections.OrderedDict((n, report[n]) for n in metric_names)

  if clustering is not None:
    flat_dim = int(sum(np.prod(s.shape) for s in shared_specs))
    seq_names = ("update_norm", "last_grad_norm")
    collected_type = _odict_type([("updates", tff.TensorType(np.float32, [num_clients, flat_dim])),
                                     ("present", tff.TensorType(np.float32, [num_clients]))]
                                    + [(n, tff.TensorType(np.float32, [num_clients])) for n in seq_names])
    item_type = _odict_type([("update", update_type), ("report", report_type)])

    @tff.tensorflow.computation
    def collect_zero():
      return collections.OrderedDict(
          updates=tf.zeros([num_clients, flat_dim]), present=tf.zeros([num_clients]),
          **{n: tf.zeros([num_clients]) for n in seq_names})

    @tff.tensorflow.computation(collected_type, item_type)
    def collect_one(acc, item):
      i = [[item["report"]["client_index"]]]
      flat = tf.concat([tf.reshape(u, [-1]) for u in item["update"]], axis=0)
      out = collections.OrderedDict(updates=tf.tensor_scatter_nd_update(acc["updates"], i, flat[None]),
                                    present=tf.tensor_scatter_nd_update(acc["present"], i, [1.0]))
      for n in seq_names:
        out[n] = tf.tensor_scatter_nd_update(acc[n], i, [item["report"][n]])
      return out

    @tff.tensorflow.computation(collected_type, collected_type)
    def collect_merge(a, b):
      return tf.nest.map_structure(tf.add, a, b)

    @tff.tensorflow.computation(collected_type)
    def collect_report(acc):
      return acc

    @tff.tensorflow.computation(server_type, collected_type)
    def split_step(server, collected):
      out = cluster_rules.split_clusters(
          clustering.rule, server["rule"], server["clusters"]["assignment"], server["clusters"]["count"],
          server["round"] + 1, collected["present"] > 0, collected["updates"],
          collections.OrderedDict((n, collected[n]) for n in seq_names), k)
      return out

    split_type = split_step.type_signature.result

    @tff.tensorflow.computation(tff.TensorType(np.int32, [num_clients]), item_type)
    def contribution(assignment, item):
      return collections.OrderedDict(update=item["update"],
                                     cluster=tf.gather(assignment, item["report"]["client_index"]))

  empty = tff.StructType([])
  out_type = aggregation.next.type_signature.result if aggregation else None
  mean_type, new_aggregator_type, measurements_type = (
      (out_type.result.member, out_type.state.member, out_type.measurements.member) if out_type else (empty,) * 3)

  @tff.tensorflow.computation(server_type, mean_type, new_aggregator_type, measurements_type,
                              split_type if clustering else empty)
  def apply(server, mean_update, aggregator_state, measurements, split):
    if aggregation is None:
      shared = list(server["shared"])
    elif clustering is None:
      shared = [w + u for w, u in zip(server["shared"], mean_update)]
    else:
      has = measurements["cluster_weights"] > 0
      shared = []
      for w, u in zip(server["shared"], mean_update):
        base = tf.gather(w, split["source"])
        shared.append(tf.where(has[(slice(None),) + (None,) * (len(w.shape) - 1)], base + u, base))
    state = collections.OrderedDict(round=server["round"] + 1, shared=shared, aggregator=aggregator_state,
                                    clusters=server["clusters"], rule=server["rule"])
    if clustering is not None:
      state["clusters"] = collections.OrderedDict(assignment=split["assignment"], count=split["count"])
      state["rule"] = split["rule_state"]
    return state

  @tff.federated_computation(tff.FederatedType(server_type, tff.SERVER),
                             tff.FederatedType(state_type, tff.CLIENTS),
                             tff.FederatedType(input_type, tff.CLIENTS))
  def next_fn(server, states, inputs):
    broadcast = tff.federated_broadcast(tff.federated_map(to_broadcast, server))
    out = tff.federated_map(client_train, (broadcast, states, inputs))
    server_metrics = collections.OrderedDict(train=tff.federated_mean(tff.federated_map(train_metrics, out.report)))
    split = tff.federated_value((), tff.SERVER)
    if aggregation is None:
      aggregated_result = tff.federated_value((), tff.SERVER)
      aggregator_state = tff.federated_value((), tff.SERVER)
      measurements = tff.federated_value((), tff.SERVER)
    else:
      if clustering is None:
        value = out.update
      else:
        items = tff.federated_zip(collections.OrderedDict(update=out.update, report=out.report))
        collected = tff.federated_aggregate(items, collect_zero(), collect_one, collect_merge, collect_report)
        split = tff.federated_map(split_step, (server, collected))
        assignment = tff.federated_broadcast(split.assignment)
        value = tff.federated_map(contribution, (assignment, items))
        server_metrics["clustering"] = split
      output = _aggregate(aggregation, server.aggregator, value, out.weight, weighted)
      aggregated_result, aggregator_state, measurements = output.result, output.state, output.measurements
      server_metrics["aggregator"] = measurements
    new_server = tff.federated_map(apply, (server, aggregated_result, aggregator_state, measurements, split))
    metrics = collections.OrderedDict(server=tff.federated_zip(server_metrics), clients=out.report)
    return collections.OrderedDict(state=new_server, client_states=out.state, metrics=metrics)

  @tff.federated_computation(tff.FederatedType(server_type, tff.SERVER),
                             tff.FederatedType(state_type, tff.CLIENTS),
                             tff.FederatedType(input_type, tff.CLIENTS))
  def evaluate_fn(server, states, inputs):
    broadcast = tff.federated_broadcast(tff.federated_map(to_broadcast, server))
    return tff.federated_map(client_evaluate, (broadcast, states, inputs))

  install_fn = fetch_fn = None
  if worker_states is not None:
    @tff.tensorflow.computation(full_state_type, state_type)
    def install_one(state, ref):
      return _write_state(worker_states.directory, ref, state)

    @tff.tensorflow.computation(state_type)
    def fetch_one(ref):
      return collections.OrderedDict(client=ref["client"], state=_read_state(worker_states.directory, ref, state_spec))

    @tff.federated_computation(tff.FederatedType(full_state_type, tff.CLIENTS), tff.FederatedType(state_type, tff.CLIENTS))
    def install_fn(states, refs):
      return tff.federated_map(install_one, (states, refs))

    @tff.federated_computation(tff.FederatedType(state_type, tff.CLIENTS))
    def fetch_fn(refs):
      return tff.federated_map(fetch_one, refs)

  return GraphProcess(initialize_fn, next_fn, evaluate_fn=evaluate_fn, model_fn=model_fn, input_spec=input_spec,
                      shared_parts=shared_parts, training=training, clustering=clustering,
                      shared_variable_names=names, aggregator=factory, worker_states=worker_states,
                      install_fn=install_fn, fetch_fn=fetch_fn, build_arguments=build_arguments)


def with_worker_states(process: GraphProcess, directory: str) -> GraphProcess:
  """`process` with its client states kept in `directory` where the clients run (`WorkerStates`).

  The process is composed again from the arguments it was built with, so any builder that returns
  `build_process(...)` gets this for free; the results are the same bit for bit (states are written
  and read back exactly). Building it that way costs a second build: the built-in builders take
  `worker_states=` directly (and `experiment.build_process` passes it), which this is the fallback for.
  """
  if process.build_arguments is None:
    raise ProcessError(f"{type(process).__name__} was not composed by build_process: cannot keep its client "
                       "states on the workers")
  if process.worker_states is not None:
    raise ProcessError(f"the process already keeps its client states in {process.worker_states.directory}")
  return build_process(**process.build_arguments, worker_states=WorkerStates(str(directory)))


def type_outline(type_spec, depth: int = 0) -> str:
  """A TFF type with structures below depth 2 shown as `<...>` (the form the builders' docstrings use)."""
  if isinstance(type_spec, tff.FunctionType):
    if type_spec.parameter is None:
      return f"( -> {type_outline(type_spec.result, depth + 1)})"
    return f"({type_outline(type_spec.parameter, depth)} -> {type_outline(type_spec.result, depth)})"
  if isinstance(type_spec, tff.FederatedType):
    member = type_outline(type_spec.member, depth)
    return f"{member}@SERVER" if type_spec.placement is tff.SERVER else f"{{{member}}}@CLIENTS"
  if isinstance(type_spec, tff.StructType):
    items = list(tff.structure.iter_elements(type_spec))
    if not items:
      return "<>"
    if depth >= 2:
      return "<...>"
    return "<" + ",".join(f"{n}={type_outline(t, depth + 1)}" if n else type_outline(t, depth + 1)
                          for n, t in items) + ">"
  return str(type_spec)
