r"""One client's local work: train for E epochs from the received shared weights, and evaluate.

This is the single client-update function of every algorithm; algorithms differ only by which model
parts are shared (`SharingLayout`) and by the proximal coefficient $\mu$ (FedProx, Li et al., MLSys
2020). The local objective on a batch B is

$$\ell(w) = \frac{1}{|B|}\sum_{(G, y) \in B} \mathrm{CE}(f_w(G), y)
            + \frac{\mu}{2} \lVert w_{shared} - w^{t}_{shared} \rVert^2$$

optimised by Adam (lr 1e-3, betas 0.9/0.999, eps 1e-8) with L2 weight decay 5e-4 *added to the
gradient* before the moment updates, exactly as PyTorch's `Adam(weight_decay=...)` used by the
papers' code. The Adam moments and step of **all** variables, the private weights and the dropout
random state are the client's private state and persist across rounds (the reference keeps one
optimizer per client for the whole run).

Clients of one setting share one model type: node features are zero-padded to the setting's widest
feature width and logits of classes a client does not have are masked out, which computes exactly
what the client's unpadded model computes.

Every function here is plain TensorFlow, usable eagerly (tests) and inside
`tff.tensorflow.computation` (the federated process).
"""

from __future__ import annotations

import collections
import dataclasses
from typing import Callable, Sequence

import tensorflow as tf

from data_prep import graph_tensor as gt
from tff_graph.models import classifiers

_MASKED_LOGIT = -1e9


@dataclasses.dataclass(frozen=True)
class TrainingConfig:
  """Local training hyper-parameters (the papers' defaults)."""

  local_epochs: int = 1
  batch_size: int = 128
  learning_rate: float = 1e-3
  weight_decay: float = 5e-4
  beta_1: float = 0.9
  beta_2: float = 0.999
  epsilon: float = 1e-8
  proximal_mu: float = 0.0
  shuffle_buffer: int = 10_000

  def __post_init__(self):
    if self.local_epochs < 1 or self.batch_size < 1:
      raise ValueError(f"local_epochs and batch_size must be >= 1 ({self})")
    if self.learning_rate <= 0 or self.weight_decay < 0 or self.proximal_mu < 0:
      raise ValueError(f"learning_rate must be > 0, weight_decay and proximal_mu >= 0 ({self})")


@dataclasses.dataclass(frozen=True)
class InputSpec:
  """What every client of a setting parses: the model's input widths.

  Attributes:
    feature_dim: node-feature width the model reads (clients' narrower features are zero-padded).
    num_classes: number of logits (clients with fewer classes have the others masked out).
    n_rw, n_dg: widths of the stored RWSE and DSE node features.
    n_lap, n_spd: widths of the optional Laplacian-PE / SPD-histogram node features (0: absent).
  """

  feature_dim: int
  num_classes: int
  n_rw: int = 16
  n_dg: int = 16
  n_lap: int = 0
  n_spd: int = 0


@dataclasses.dataclass(frozen=True)
class ClientSpec:
  """One client's own data widths (what a model_fn may use, e.g. for initialisation)."""

  feature_dim: int
  num_classes: int


@dataclasses.dataclass(frozen=True)
class SharingLayout:
  """Which of a model's trainable variables are shared, derived from its declared parts.

  Attributes:
    shared_parts: the parts whose variables cross the network.
    shared_index, private_index: positions in `model.trainable_variables`.
  """

  shared_parts: tuple[str, ...]
  shared_index: tuple[int, ...]
  private_index: tuple[int, ...]

  @classmethod
  def of(cls, model: tf.keras.Model, shared_parts: Sequence[str]) -> "SharingLayout":
    classifiers.check_partition(model)
    shared_ids = {id(v) for v in classifiers.part_variables(model, shared_parts)}
    tv = model.trainable_variables
    return cls(shared_parts=tuple(shared_parts),
               shared_index=tuple(i for i, v in enumerate(tv) if id(v) in shared_ids),
               private_index=tuple(i for i, v in enumerate(tv) if id(v) not in shared_ids))

  def shared(self, values: Sequence):
    return [values[i] for i in self.shared_index]

  def private(self, values: Sequence):
    return [values[i] for i in self.private_index]


def client_input_spec() -> "collections.OrderedDict[str, tf.TensorSpec]":
  """What the program sends each client every round (no data: only where its files are).

  `client_index` (the client's position in the setting) is echoed in every CLIENTS-placed output so
  the program can match outputs to clients whatever order an execution context returns them in (a
  multi-worker context regroups clients); clustered processes also use it to look up the client's
  cluster. `shuffle_seed` is this round's shuffling seed of the client's train split.
  """
  return collections.OrderedDict(
      train=tf.TensorSpec([], tf.string), val=tf.TensorSpec([], tf.string),
      test=tf.TensorSpec([], tf.string), feature_dim=tf.TensorSpec([], tf.int32),
      num_classes=tf.TensorSpec([], tf.int32), train_size=tf.TensorSpec([], tf.float32),
      shuffle_seed=tf.TensorSpec([], tf.int64), client_index=tf.TensorSpec([], tf.int32))


def masked_logits(logits: tf.Tensor, num_classes: tf.Tensor) -> tf.Tensor:
  """Logits of classes >= num_classes pushed to -1e9 (the client's model has only num_classes)."""
  valid = tf.sequence_mask(num_classes, tf.shape(logits)[-1])
  return tf.where(valid[None, :], logits, tf.cast(_MASKED_LOGIT, logits.dtype))


class ClientWork:
  """Builds a client's model and runs training/evaluation on explicit state (no hidden state).

  Create inside the graph that runs it (a `tff.tensorflow.computation`, or eagerly in tests): the
  constructor creates the model's variables and the optimizer slots.
  """

  def __init__(self, model_fn: Callable[[], tf.keras.Model], shared_parts: Sequence[str],
               config: TrainingConfig, input_spec: InputSpec):
    self.model = model_fn()
    self.layout = SharingLayout.of(self.model, shared_parts)
    self.config = config
    self.spec = input_spec
    self.random_states = classifiers.random_states(self.model)
    tv = self.model.trainable_variables
    self.m = [tf.Variable(tf.zeros_like(v), trainable=False, name="adam_m") for v in tv]
    self.v = [tf.Variable(tf.zeros_like(v), trainable=False, name="adam_v") for v in tv]
    self.step = tf.Variable(tf.constant(0, tf.int64), trainable=False, name="adam_step")

  # ----- state <-> variables -------------------------------------------------------------------

  def initial_state(self) -> "collections.OrderedDict[str, object]":
    """The current variables as a client state (call right after building with the client's seed)."""
    tv = self.model.trainable_variables
    return collections.OrderedDict(
        private=[tf.identity(v) for v in self.layout.private(tv)],
        adam_m=[tf.zeros_like(v) for v in tv], adam_v=[tf.zeros_like(v) for v in tv],
        adam_step=tf.constant(0, tf.int64), rng=[tf.identity(r) for r in self.random_states])

  def shared_values(self) -> list[tf.Tensor]:
    return [tf.identity(v) for v in self.layout.shared(self.model.trainable_variables)]

  def _load(self, shared, state) -> None:
    tv = self.model.trainable_variables
    for v, x in zip(self.layout.shared(tv), shared):
      v.assign(x)
    for v, x in zip(self.layout.private(tv), state["private"]):
      v.assign(x)
    for v, x in zip(self.m, state["adam_m"]):
      v.assign(x)
    for v, x in zip(self.v, state["adam_v"]):
      v.assign(x)
    self.step.assign(state["adam_step"])
    for r, x in zip(self.random_states, state["rng"]):
      r.assign(x)

  def _state(self) -> "collections.OrderedDict[str, object]":
    tv = self.model.trainable_variables
    return collections.OrderedDict(
        private=[tf.identity(v) for v in self.layout.private(tv)],
        adam_m=[tf.identity(v) for v in self.m], adam_v=[tf.identity(v) for v in self.v],
        adam_step=tf.identity(self.step), rng=[tf.identity(r) for r in self.random_states])

  def _batches(self, path, shuffle_seed=None) -> tf.data.Dataset:
    """Serialized batches; `_parse` each inside the loop body (no per-call function instantiation).

    The loops iterate `iter(dataset)`, not the dataset: AutoGraph turns `for x in dataset` into
    `dataset.reduce(...)`, whose body (the whole training step) is a tf.data function that tf.data
    instantiates and optimises anew every time the loop starts, i.e. in every client call (~150 ms
    per call, measured; most of an evaluation). Over an iterator the body is a `tf.while_loop` of the
    traced function, instantiated once. tf.data ran its reduce body on one intra-op thread; the
    worker runs every op on one (`runtime.worker_environment`), so the results are bit-identical.
    """
    return gt.read_serialized_batches(path, batch_size=self.config.batch_size, shuffle_seed=shuffle_seed,
                                      shuffle_buffer=self.config.shuffle_buffer)

  def _parse(self, serialized, inputs):
    return gt.parse_batch(serialized, feature_dim=inputs["feature_dim"], padded_feature_dim=self.spec.feature_dim,
                          n_rw=self.spec.n_rw, n_dg=self.spec.n_dg, n_lap=self.spec.n_lap, n_spd=self.spec.n_spd)

  # ----- training ------------------------------------------------------------------------------

  def _adam(self, grads: Sequence[tf.Tensor]) -> None:
    c = self.config
    self.step.assign_add(1)
    t = tf.cast(self.step, tf.float32)
    correction_1 = 1.0 - tf.pow(c.beta_1, t)
    correction_2 = 1.0 - tf.pow(c.beta_2, t)
    for w, g, m, v in zip(self.model.trainable_variables, grads, self.m, self.v):
      g = g + c.weight_decay * w
      m.assign(c.beta_1 * m + (1.0 - c.beta_1) * g)
      v.assign(c.beta_2 * v + (1.0 - c.beta_2) * tf.square(g))
      denom = tf.sqrt(v) / tf.sqrt(correction_2) + c.epsilon
      w.assign_sub((c.learning_rate / correction_1) * m / denom)

  @tf.function
  def train(self, shared, state, inputs):
    """Trains from (shared, state) on the client's train split.

    Returns:
      OrderedDict(update, state, weight, metrics): `update` = shared weights after - before,
      `state` the new private state, `weight` the train size, `metrics` the last epoch's mean
      train loss and accuracy, the update norm and the shared layers' gradient norm after the last
      local step (GCFL+'s sequence value).
    """
    self._load(shared, state)
    tv = self.model.trainable_variables
    shared_vars = self.layout.shared(tv)
    start = [tf.identity(v) for v in shared_vars]
    loss_sum = tf.constant(0.0)
    correct = tf.constant(0.0)
    count = tf.constant(0.0)
    grad_norm = tf.constant(0.0)
    data = self._batches(inputs["train"], shuffle_seed=inputs["shuffle_seed"])
    for _ in tf.range(self.config.local_epochs):
      loss_sum = tf.constant(0.0)
      correct = tf.constant(0.0)
      count = tf.constant(0.0)
      for serialized in iter(data):
        graph = self._parse(serialized, inputs)
        labels = graph.context[gt.LABEL]
        with tf.GradientTape() as tape:
          logits = masked_logits(self.model(graph, training=True), inputs["num_classes"])
          ce = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels, logits))
          loss = ce
          if self.config.proximal_mu > 0.0 and shared_vars:
            loss += 0.5 * self.config.proximal_mu * tf.add_n(
                [tf.reduce_sum(tf.square(w - w0)) for w, w0 in zip(shared_vars, start)])
        grads = tape.gradient(loss, tv)
        grads = [tf.zeros_like(w) if g is None else g for w, g in zip(tv, grads)]
        if shared_vars:
          grad_norm = tf.linalg.global_norm(self.layout.shared(grads))
        self._adam(grads)
        n = tf.cast(tf.size(labels), tf.float32)
        loss_sum += ce * n
        correct += tf.reduce_sum(tf.cast(tf.equal(tf.argmax(logits, -1), labels), tf.float32))
        count += n
    update = [w - w0 for w, w0 in zip(shared_vars, start)]
    count = tf.maximum(count, 1.0)
    return collections.OrderedDict(
        update=update, state=self._state(), weight=inputs["train_size"],
        metrics=collections.OrderedDict(
            train_loss=loss_sum / count, train_accuracy=correct / count,
            update_norm=tf.linalg.global_norm(update) if update else tf.constant(0.0),
            last_grad_norm=grad_norm))

  # ----- evaluation ----------------------------------------------------------------------------

  def _evaluate_split(self, path, inputs):
    loss_sum = tf.constant(0.0)
    correct = tf.constant(0.0)
    count = tf.constant(0.0)
    for serialized in iter(self._batches(path)):
      graph = self._parse(serialized, inputs)
      labels = graph.context[gt.LABEL]
      logits = masked_logits(self.model(graph, training=False), inputs["num_classes"])
      n = tf.cast(tf.size(labels), tf.float32)
      loss_sum += tf.reduce_sum(tf.nn.sparse_softmax_cross_entropy_with_logits(labels, logits))
      correct += tf.reduce_sum(tf.cast(tf.equal(tf.argmax(logits, -1), labels), tf.float32))
      count += n
    count = tf.maximum(count, 1.0)
    return loss_sum / count, correct / count

  @tf.function
  def evaluate(self, shared, state, inputs):
    """Loss and accuracy on the val and test splits (no training, dropout off)."""
    self._load(shared, state)
    val_loss, val_acc = self._evaluate_split(inputs["val"], inputs)
    test_loss, test_acc = self._evaluate_split(inputs["test"], inputs)
    return collections.OrderedDict(val_loss=val_loss, val_accuracy=val_acc, test_loss=test_loss,
                                   test_accuracy=test_acc)
