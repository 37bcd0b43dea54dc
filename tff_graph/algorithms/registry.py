"""The algorithms by name: each is a builder plus the model family it trains.

| name | builder | model | shared parts | local objective |
|---|---|---|---|---|
| `local` | `build_local` | GIN | none (no communication) | CE |
| `fedavg` | `build_fedavg` | GIN | `gnn` (the conv stack, as both reference codes) | CE |
| `fedprox` | `build_fedprox` | GIN | `gnn` | CE + mu/2 ||w_gnn - w_gnn^t||^2, mu = 0.01 |
| `fedper` | `build_fedper` | GIN | `gnn` + `post` (the body) | CE |
| `fedsage` | `build_fedavg` | GIN with SAGE convs | `gnn` | CE |
| `fedstar` | `build_fedstar` | decoupled | `structure_encoder` | CE |
| `fedstar_share_none` | `build_fedstar` | decoupled | none | CE |
| `fedstar_share_feature` | `build_fedstar` | decoupled | `feature_encoder` | CE |
| `fedstar_share_all` | `build_fedstar` | decoupled | all parts but `feature_input` and `head` | CE |
| `gcfl`, `gcfl_plus`, `gcfl_plus_dws` | `build_gcfl`, `build_gcfl_plus`, `build_gcfl_plus_dws` | GIN | `gnn`, per cluster | CE |

FedPer split: the input layer (`input`, whose width is the dataset's feature width) and the classifier
(`head`) stay private. `*_share_all` cannot share `feature_input` or `head` across datasets of
different feature widths or class counts, so "everything" means all parts but those two.

A user's algorithm is an `AlgorithmSpec` (a name, a `build(context)` function returning a
`GraphProcess`, the model family): pass it to `tff_graph.experiment.run_experiment` directly, or
`register` it to make it known to the programs by name.
"""

from __future__ import annotations

import dataclasses
from typing import Callable

from tff_graph import clustering
from tff_graph.algorithms import fed_avg
from tff_graph.algorithms import fed_star
from tff_graph.algorithms import gcfl
from tff_graph.federated import client_work as cw
from tff_graph.federated import process as process_lib
from tff_graph.models import classifiers

FEDPROX_MU = fed_avg.FEDPROX_MU


@dataclasses.dataclass(frozen=True)
class BuildContext:
  """What an algorithm's builder gets from the experiment (all explicit, nothing global).

  Attributes:
    model_fn: `model_fn(seed, client)` -> the setting's (padded) Keras model.
    input_spec: the widths every client parses.
    training: local training hyper-parameters (as configured; `proximal_mu` below is separate).
    init_seed: seed of the server's initial shared weights.
    num_clients: clients of the setting.
    model_aggregator: a `tff.aggregators` factory, or None for the default.
    proximal_mu: the configured FedProx mu, or None (the algorithm's default).
    thresholds: GCFL's split thresholds for the setting.
    worker_states: where the run keeps its client states (`process.WorkerStates`), or None (they travel
      with every call). A builder that passes it on to `build_process` saves the experiment a second
      build; one that ignores it still gets worker-held states (the experiment rebuilds the process
      with `process.with_worker_states`).

  `common` holds the arguments every built-in builder and `build_process` take (for a user's builder
  too); `with_states` adds `worker_states`, which the built-in builders also take.
  """

  model_fn: process_lib.ModelFn
  input_spec: cw.InputSpec
  training: cw.TrainingConfig
  init_seed: int
  num_clients: int
  model_aggregator: process_lib.Aggregator | None = None
  proximal_mu: float | None = None
  thresholds: clustering.SplitThresholds = clustering.SplitThresholds()
  worker_states: process_lib.WorkerStates | None = None

  @property
  def common(self) -> dict:
    return dict(model_fn=self.model_fn, input_spec=self.input_spec, training=self.training,
                init_seed=self.init_seed, model_aggregator=self.model_aggregator)

  @property
  def with_states(self) -> dict:
    return dict(self.common, worker_states=self.worker_states)


@dataclasses.dataclass(frozen=True)
class AlgorithmSpec:
  """An algorithm: how to build its process, and the model family it trains.

  Attributes:
    name: the name programs and run folders use.
    build: `build(context: BuildContext) -> GraphProcess`.
    model_kind: the model family (`gin`, `decoupled`, or a kind registered with
      `tff_graph.models.register_model_kind`), used when no model_fn is given.
    backbone: the convolution of the model's (feature) encoder.
    shared_parts: the parts it shares (documentation and parameter counts; the process's own
      `shared_parts` is what counts).
    options: the algorithm-specific options it reads (`proximal_mu`, `clustering`); others are refused.
  """

  name: str
  build: Callable[[BuildContext], process_lib.GraphProcess]
  model_kind: str = classifiers.GIN_MODEL
  backbone: str = "gin"
  shared_parts: tuple[str, ...] = ()
  options: frozenset[str] = frozenset()


_REGISTRY: dict[str, AlgorithmSpec] = {}


class UnknownAlgorithmError(ValueError):
  """No algorithm is registered under that name."""


def register(spec: AlgorithmSpec, *, replace: bool = False) -> AlgorithmSpec:
  """Makes `spec` known by its name (to `get`, `names` and the programs' `--algorithm`)."""
  if not isinstance(spec, AlgorithmSpec):
    raise TypeError(f"register takes an AlgorithmSpec, got {type(spec).__name__}")
  if spec.name in _REGISTRY and not replace:
    raise ValueError(f"an algorithm named {spec.name!r} is already registered (pass replace=True)")
  _REGISTRY[spec.name] = spec
  return spec


def get(name: str | AlgorithmSpec) -> AlgorithmSpec:
  if isinstance(name, AlgorithmSpec):
    return name
  if name not in _REGISTRY:
    raise UnknownAlgorithmError(f"unknown algorithm {name!r}; choose one of {', '.join(_REGISTRY)}")
  return _REGISTRY[name]


def names() -> list[str]:
  """The registered algorithms, in registration order (read at call time)."""
  return list(_REGISTRY)


def _mu(c: BuildContext) -> float:
  return FEDPROX_MU if c.proximal_mu is None else c.proximal_mu


def _shared(parts):
  return lambda build: (lambda c: build(shared_parts=parts, **c.with_states))


_GIN, _DEC = classifiers.GIN_MODEL, classifiers.DECOUPLED_MODEL
_ALL = ("structure_encoder", "feature_encoder", "fusion", "post")
for _spec in [
    AlgorithmSpec("local", lambda c: fed_avg.build_local(model_fn=c.model_fn, input_spec=c.input_spec,
                                                         training=c.training, init_seed=c.init_seed,
                                                         model_aggregator=c.model_aggregator,
                                                         worker_states=c.worker_states)),
    AlgorithmSpec("fedavg", _shared(("gnn",))(fed_avg.build_fedavg), shared_parts=("gnn",)),
    AlgorithmSpec("fedprox", lambda c: fed_avg.build_fedprox(proximal_mu=_mu(c), **c.with_states),
                  shared_parts=("gnn",), options=frozenset({"proximal_mu"})),
    AlgorithmSpec("fedper", _shared(("gnn", "post"))(fed_avg.build_fedper), shared_parts=("gnn", "post")),
    AlgorithmSpec("fedsage", _shared(("gnn",))(fed_avg.build_fedavg), backbone="sage", shared_parts=("gnn",)),
    AlgorithmSpec("fedstar", _shared(("structure_encoder",))(fed_star.build_fedstar), model_kind=_DEC,
                  shared_parts=("structure_encoder",)),
    AlgorithmSpec("fedstar_share_none", _shared(())(fed_star.build_fedstar), model_kind=_DEC),
    AlgorithmSpec("fedstar_share_feature", _shared(("feature_encoder",))(fed_star.build_fedstar), model_kind=_DEC,
                  shared_parts=("feature_encoder",)),
    AlgorithmSpec("fedstar_share_all", _shared(_ALL)(fed_star.build_fedstar), model_kind=_DEC, shared_parts=_ALL),
    AlgorithmSpec("gcfl", lambda c: gcfl.build_gcfl(num_clients=c.num_clients, thresholds=c.thresholds, **c.with_states),
                  shared_parts=("gnn",), options=frozenset({"clustering"})),
    AlgorithmSpec("gcfl_plus", lambda c: gcfl.build_gcfl_plus(num_clients=c.num_clients, thresholds=c.thresholds,
                                                              **c.with_states),
                  shared_parts=("gnn",), options=frozenset({"clustering", "sequence"})),
    AlgorithmSpec("gcfl_plus_dws", lambda c: gcfl.build_gcfl_plus_dws(num_clients=c.num_clients,
                                                                      thresholds=c.thresholds, **c.with_states),
                  shared_parts=("gnn",), options=frozenset({"clustering", "sequence"})),
]:
  register(_spec)
