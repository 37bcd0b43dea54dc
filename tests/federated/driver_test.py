"""Algorithms on real clients: reductions to FedAvg, private state, aggregation, type signatures."""

from __future__ import annotations

import dataclasses
import os
import subprocess

import numpy as np
import pytest
import tensorflow_federated as tff

from tff_graph import runtime
from tff_graph.federated import client_work as cw
from tff_graph.federated import driver
from tests.conftest import twin_clients

NO_SHUFFLE = cw.TrainingConfig(shuffle_buffer=1)


def _assert_states_equal(a, b, exact=True):
  fa, fb = _flat(a), _flat(b)
  assert len(fa) == len(fb)
  for x, y in zip(fa, fb):
    if exact:
      np.testing.assert_array_equal(x, y)
    else:
      np.testing.assert_allclose(x, y, rtol=1e-5, atol=1e-6)


def _flat(structure):
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  return [np.asarray(v) for v in tf.nest.flatten(structure)]


def test_fedprox_with_mu_zero_is_exactly_fedavg(tff_context, mutag3):
  # Batches of 16: several local steps per round, so the proximal term has an effect when mu > 0.
  small = cw.TrainingConfig(batch_size=16)
  fedavg = driver.Simulation(mutag3, driver.RunConfig(algorithm="fedavg", seed=3, training=small))
  fedprox = driver.Simulation(mutag3, driver.RunConfig(algorithm="fedprox", seed=3, proximal_mu=0.0,
                                                       training=small))
  for _ in range(2):
    fedavg.step()
    fedprox.step()
  _assert_states_equal(fedavg.shared, fedprox.shared)
  _assert_states_equal(fedavg.client_states, fedprox.client_states)
  # And mu > 0 changes the result.
  prox = driver.Simulation(mutag3, driver.RunConfig(algorithm="fedprox", seed=3, proximal_mu=1.0,
                                                    training=small))
  prox.step()
  prox.step()
  assert not np.allclose(prox.shared[0], fedavg.shared[0])


def test_aggregate_is_the_weighted_mean_of_client_shared_parts(tff_context, mutag3):
  sim = driver.Simulation(mutag3, driver.RunConfig(algorithm="fedstar", seed=2), report_updates=True)
  before = [w.copy() for w in sim.shared]
  reports = sim.step()
  sizes = np.array([c.sizes["train"] for c in mutag3.clients], np.float64)
  for j, w in enumerate(sim.shared):
    client_weights = [before[j][0] + reports[cid]["update"][j] for cid in sim.client_ids]
    expected = np.tensordot(sizes / sizes.sum(), np.stack(client_weights), axes=1)
    np.testing.assert_allclose(w[0], expected, rtol=1e-5, atol=1e-6)
  assert any(not np.allclose(w, b) for w, b in zip(sim.shared, before))


def test_one_client_fedavg_equals_local_training(tff_context, mutag1):
  local = driver.Simulation(mutag1, driver.RunConfig(algorithm="local", seed=4))
  fedavg = driver.Simulation(mutag1, driver.RunConfig(algorithm="fedavg", seed=4))
  cid = local.client_ids[0]
  # Start FedAvg from the local client's own initial weights (the server's would differ).
  every = local.client_states[cid]["private"]
  fedavg.shared = [w[None] for w in fedavg.layout.shared(every)]
  fedavg.client_states[cid]["private"] = fedavg.layout.private(every)
  for _ in range(3):
    local.step()
    fedavg.step()
  merged = [None] * len(every)
  for i, w in zip(fedavg.layout.shared_index, fedavg.shared):
    merged[i] = w[0]
  for i, w in zip(fedavg.layout.private_index, fedavg.client_states[cid]["private"]):
    merged[i] = w
  _assert_states_equal(merged, local.client_states[cid]["private"], exact=False)
  np.testing.assert_array_equal(local.client_states[cid]["adam_step"], fedavg.client_states[cid]["adam_step"])


def test_fedstar_sharing_everything_on_identical_clients_is_fedavg_of_one(tff_context, mutag3):
  twins = twin_clients(mutag3)
  one = dataclasses.replace(mutag3, clients=mutag3.clients[:1])
  config = driver.RunConfig(algorithm="fedstar_share_all", seed=5, training=NO_SHUFFLE)
  pair = driver.Simulation(twins, config)
  single = driver.Simulation(one, config)
  a, b = pair.client_ids
  pair.client_states[b] = pair.client_states[a]  # Identical clients: same data, same init.
  for _ in range(3):
    pair.step()
    single.step()
  _assert_states_equal(pair.client_states[a], pair.client_states[b])
  _assert_states_equal(pair.shared, single.shared, exact=False)
  _assert_states_equal(pair.client_states[a], single.client_states[single.client_ids[0]], exact=False)


def test_private_weights_differ_between_clients_and_persist(tff_context, mutag3):
  sim = driver.Simulation(mutag3, driver.RunConfig(algorithm="fedstar", seed=6))
  initial = {cid: _flat(s["private"]) for cid, s in sim.client_states.items()}
  sim.step()
  after_one = {cid: _flat(s["private"]) for cid, s in sim.client_states.items()}
  sim.step()
  ids = sim.client_ids
  for cid in ids:
    assert any(not np.array_equal(x, y) for x, y in zip(initial[cid], after_one[cid]))
    steps_per_round = int(np.ceil(mutag3.clients[ids.index(cid)].sizes["train"] / 128))
    # The optimizer state was carried over: two rounds of steps, not one.
    assert int(sim.client_states[cid]["adam_step"]) == 2 * steps_per_round
  p0, p1 = (_flat(sim.client_states[c]["private"]) for c in ids[:2])
  assert any(not np.allclose(x, y) for x, y in zip(p0, p1))


def _server_tensors(type_spec, placement=None):
  """Every tensor type that sits at SERVER in a TFF type."""
  if isinstance(type_spec, tff.FederatedType):
    return _server_tensors(type_spec.member, type_spec.placement)
  if isinstance(type_spec, tff.StructType):
    return [t for _, member in tff.structure.iter_elements(type_spec) for t in _server_tensors(member, placement)]
  if isinstance(type_spec, tff.FunctionType):
    return _server_tensors(type_spec.parameter, placement) + _server_tensors(type_spec.result, placement)
  if isinstance(type_spec, tff.TensorType):
    return [type_spec] if placement is tff.SERVER else []
  return []


@pytest.mark.parametrize("algorithm", ["fedstar", "fedavg", "fedper"])
def test_no_private_variable_is_placed_at_server(mutag3, algorithm):
  sim = driver.Simulation(mutag3, driver.RunConfig(algorithm=algorithm))
  model = sim.model_fn(0)
  shared = model.part_variables(sim.shared_parts)
  expected = sorted([(1, *v.shape) for v in shared] * 2)  # Server input and server output.
  got = sorted(tuple(t.shape) for t in _server_tensors(sim.process.next.type_signature))
  assert got == expected
  # The private state is placed at CLIENTS only, in both directions.
  next_type = sim.process.next.type_signature
  assert next_type.parameter[1].placement is tff.CLIENTS and next_type.result[1].placement is tff.CLIENTS
  assert next_type.parameter[0].placement is tff.SERVER
  n_private = len(model.trainable_variables) - len(shared)
  assert len(next_type.parameter[1].member["private"]) == n_private


def test_local_has_nothing_at_server(mutag3):
  sim = driver.Simulation(mutag3, driver.RunConfig(algorithm="local"))
  assert _server_tensors(sim.process.next.type_signature) == []


def test_heterogeneous_clients_train_in_one_computation(tff_context, chem_tiny):
  sim = driver.Simulation(chem_tiny, driver.RunConfig(algorithm="fedstar", seed=1))
  assert sim.spec.feature_dim == max(c.feature_dim for c in chem_tiny.clients) == 53
  first = sim.step()
  for _ in range(4):
    last = sim.step()
  losses = [(first[c]["train_loss"], last[c]["train_loss"]) for c in sim.client_ids]
  assert np.mean([b for _, b in losses]) < np.mean([a for a, _ in losses])
  evaluation = sim.evaluate()
  assert set(evaluation) == set(sim.client_ids)
  assert all(0.0 <= m["test_accuracy"] <= 1.0 for m in evaluation.values())


def test_client_sampling_is_seeded(mutag3):
  sim = driver.Simulation(mutag3, driver.RunConfig(algorithm="fedavg", seed=9, client_fraction=0.5))
  picks = [sim.sample() for _ in range(1)]
  again = driver.Simulation(mutag3, driver.RunConfig(algorithm="fedavg", seed=9, client_fraction=0.5))
  assert picks[0] == again.sample() and len(picks[0]) == 1


def test_bad_run_configs():
  with pytest.raises(ValueError, match="unknown algorithm 'fedfoo'"):
    driver.RunConfig(algorithm="fedfoo")
  with pytest.raises(ValueError, match="client_fraction must be in"):
    driver.RunConfig(algorithm="fedavg", client_fraction=0.0)


def _workers() -> set[str]:
  return set(subprocess.run(["pgrep", "-P", str(os.getpid()), "-f", "worker_binary"],
                            capture_output=True, text=True).stdout.split())


def test_worker_is_gone_after_the_context():
  before = _workers()
  with runtime.local_execution_context():
    inside = _workers()
    assert len(inside - before) == 1
  assert _workers() == before
  with pytest.raises(RuntimeError, match="boom"):
    with runtime.local_execution_context():
      raise RuntimeError("boom")
  assert _workers() == before
