"""Construction and types of every builder: TFF processes, documented signatures, what is shared.

No computation runs here: these tests read the processes' type signatures and compiled bodies.
"""

from __future__ import annotations

import re

import pytest
import tensorflow_federated as tff
from tensorflow_federated.python.core.impl.compiler import building_blocks

from tff_graph import algorithms
from tff_graph.algorithms import fed_avg
from tff_graph.algorithms import fed_star
from tff_graph.algorithms import gcfl
from tff_graph.federated import process as process_lib
from tff_graph.models import classifiers
from tests.conftest import make_process

_CONV = [f"conv_{i}/mlp_{io}/{w}" for i in range(3) for io in ("in", "out") for w in ("kernel", "bias")]
_STRUCTURE = (["structure_encoder/structure_projection/kernel", "structure_encoder/structure_projection/bias"]
              + [f"structure_encoder/structure_conv_{i}/{w}" for i in range(3) for w in ("linear/kernel", "bias")])
_FEATURE = [f"feature_encoder/feature_conv_{i}/mlp_{io}/{w}" for i in range(3) for io in ("in", "out")
            for w in ("kernel", "bias")]
_SAGE = [f"gnn/conv_{i}/{w}" for i in range(3) for w in ("neighbours/kernel", "neighbours/bias", "root/kernel")]

# The exact variables each algorithm aggregates, by part and name.
SHARED = {
    "local": [],
    "fedavg": [f"gnn/{n}" for n in _CONV],
    "fedprox": [f"gnn/{n}" for n in _CONV],
    "fedper": [f"gnn/{n}" for n in _CONV] + ["post/post/kernel", "post/post/bias"],
    "fedsage": _SAGE,
    "fedstar": _STRUCTURE,
    "fedstar_share_none": [],
    "fedstar_share_feature": _FEATURE,
    "fedstar_share_all": _STRUCTURE + _FEATURE + ["fusion/fuse/kernel", "fusion/fuse/bias", "post/post/kernel",
                                                  "post/post/bias"],
    "gcfl": [f"gnn/{n}" for n in _CONV],
    "gcfl_plus": [f"gnn/{n}" for n in _CONV],
    "gcfl_plus_dws": [f"gnn/{n}" for n in _CONV],
}


def _order(model, names):
  """`names` in the model's trainable_variables order (the process's order)."""
  every = process_lib.shared_variable_names(model, classifiers.model_parts(model))
  return [n for n in every if n in names]


@pytest.fixture(scope="module")
def processes(mutag3):
  return {name: make_process(mutag3, name) for name in SHARED}


def test_every_registered_algorithm_is_covered():
  assert sorted(SHARED) == sorted(algorithms.names())


@pytest.mark.parametrize("name", sorted(SHARED))
def test_each_algorithm_is_an_iterative_process_sharing_exactly_its_variables(processes, name):
  process = processes[name]
  assert isinstance(process, tff.templates.IterativeProcess)
  assert isinstance(process.initialize, tff.Computation) and isinstance(process.next, tff.Computation)
  model = process.model_fn(0, None)
  assert list(process.shared_variable_names) == _order(model, SHARED[name])


def _intrinsic_arguments(comp) -> list[tuple[str, object]]:
  """(intrinsic uri, argument type) of every aggregation intrinsic called in a computation body."""
  found = []

  def visit(bb):
    if isinstance(bb, building_blocks.Call) and isinstance(bb.function, building_blocks.Intrinsic):
      uri = bb.function.uri
      if any(k in uri for k in ("sum", "mean", "aggregate", "reduce")):
        found.append((uri, bb.argument.type_signature))
    for child in bb.children():
      visit(child)

  visit(comp.to_building_block())
  return found


def _tensors(type_spec):
  if isinstance(type_spec, tff.FederatedType):
    return _tensors(type_spec.member)
  if isinstance(type_spec, tff.StructType):
    return [t for _, m in tff.structure.iter_elements(type_spec) for t in _tensors(m)]
  if isinstance(type_spec, tff.TensorType):
    return [type_spec]
  return []


@pytest.mark.parametrize("name", ["fedavg", "fedper", "fedstar", "fedstar_share_feature", "local", "gcfl"])
def test_nothing_but_the_shared_part_and_scalars_is_summed(processes, name):
  process = processes[name]
  model = process.model_fn(0, None)
  expected = sorted(tuple(s) for s in _shapes(model, process.shared_parts))
  summed = []
  for uri, argument in _intrinsic_arguments(process.next):
    tensors = [tuple(t.shape) for t in _tensors(argument) if len(t.shape)]
    if uri.startswith("federated_aggregate"):
      continue  # GCFL's collection of every client's update: checked below.
    summed.extend(tensors)
  k = process.clustering.slots if process.clustering else None
  unstacked = sorted(s[1:] if k and len(s) > 1 and s[0] == k else s for s in summed if s != (k,))
  assert unstacked == expected, name


def _shapes(model, parts):
  return [tuple(v.shape) for v in classifiers.part_variables(model, parts)]


def test_gcfl_collects_exactly_the_flattened_shared_update(processes):
  process = processes["gcfl"]
  model = process.model_fn(0, None)
  flat = sum(int(_size(s)) for s in _shapes(model, ("gnn",)))
  aggregates = [a for uri, a in _intrinsic_arguments(process.next) if uri.startswith("federated_aggregate")]
  assert len(aggregates) == 1
  accumulator = _tensors(aggregates[0][1])
  assert sorted(tuple(t.shape) for t in accumulator) == sorted([(3, flat), (3,), (3,), (3,)])


def _size(shape):
  n = 1
  for d in shape:
    n *= d
  return n


def _server_tensors(type_spec, placement=None):
  if isinstance(type_spec, tff.FederatedType):
    return _server_tensors(type_spec.member, type_spec.placement)
  if isinstance(type_spec, tff.StructType):
    return [t for _, m in tff.structure.iter_elements(type_spec) for t in _server_tensors(m, placement)]
  if isinstance(type_spec, tff.TensorType):
    return [type_spec] if placement is tff.SERVER else []
  return []


@pytest.mark.parametrize("name", ["fedstar", "fedavg", "fedper", "local"])
def test_no_private_variable_is_placed_at_server(processes, name):
  process = processes[name]
  model = process.model_fn(0, None)
  shared = _shapes(model, process.shared_parts)
  state = process.initialize.type_signature.result.member
  got = sorted(tuple(t.shape) for t in _tensors(state["shared"]))
  assert got == sorted(shared)
  next_type = process.next.type_signature
  assert next_type.parameter[0].placement is tff.SERVER
  assert next_type.parameter[1].placement is tff.CLIENTS and next_type.result[1].placement is tff.CLIENTS
  n_private = len(model.trainable_variables) - len(shared)
  assert len(next_type.parameter[1].member["private"]) == n_private
  # Nothing of the client state's size reaches the server: every server tensor of `next` is a
  # shared weight, a scalar, or a small metric.
  private_only = {tuple(v.shape) for v in model.trainable_variables} - set(shared)
  assert not [t for t in _server_tensors(next_type) if tuple(t.shape) in private_only]


def _squash(text: str) -> str:
  return re.sub(r"\s+", "", text)


@pytest.mark.parametrize("builder,names", [
    (fed_avg, ["fedavg", "fedprox", "fedper", "local"]), (fed_star, ["fedstar"]), (gcfl, ["gcfl", "gcfl_plus"])])
def test_documented_type_signatures_are_the_real_ones(processes, builder, names):
  doc = _squash(builder.__doc__ if builder is not fed_star else fed_avg.__doc__)
  for name in names:
    p = processes[name]
    for label, comp in (("initialize", p.initialize), ("next", p.next), ("evaluate", p.evaluate)):
      outline = _squash(process_lib.type_outline(comp.type_signature))
      assert f"{label}:{outline}" in doc, (name, label, outline)


def test_registry_rejects_duplicates_and_unknown_names():
  with pytest.raises(ValueError, match="already registered"):
    algorithms.register(algorithms.get("fedavg"))
  with pytest.raises(algorithms.UnknownAlgorithmError, match="unknown algorithm 'fedfoo'"):
    algorithms.get("fedfoo")


def test_a_model_without_parts_is_refused(mutag3):
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from tff_graph.federated import client_work as cw  # pylint: disable=g-import-not-at-top

  def model_fn(seed, client):
    del seed, client
    return tf.keras.Sequential([tf.keras.layers.Dense(2)])

  with pytest.raises(process_lib.ProcessError, match="declares no parts"):
    fed_avg.build_fedavg(model_fn=model_fn, input_spec=cw.InputSpec(7, 2))
