"""Client-level DP and secure aggregation of the shared part, configured, run, released and accounted."""

from __future__ import annotations

import csv
import json
import math

import dp_accounting
from dp_accounting.rdp import rdp_privacy_accountant
import numpy as np
import pytest

from tff_graph import experiment
from tff_graph import privacy
from tff_graph import program_logic
from tests.conftest import experiment_config


def test_epsilon_is_dp_accountings_for_the_sampling_the_loop_does():
  spec = privacy.PrivacySpec(noise_multiplier=1.1, clip=1.0, delta=1e-5)
  got = privacy.epsilon(spec, num_clients=84, clients_per_round=21, rounds=50)
  accountant = rdp_privacy_accountant.RdpAccountant(neighboring_relation=dp_accounting.NeighboringRelation.REPLACE_ONE)
  accountant.compose(dp_accounting.SelfComposedDpEvent(dp_accounting.SampledWithoutReplacementDpEvent(
      84, 21, dp_accounting.GaussianDpEvent(1.1 / 2)), 50))  # Replace-one: sensitivity 2C.
  assert got == pytest.approx(accountant.get_epsilon(1e-5), rel=1e-12)
  every = privacy.epsilon(spec, num_clients=84, clients_per_round=84, rounds=50)
  direct = rdp_privacy_accountant.RdpAccountant(neighboring_relation=dp_accounting.NeighboringRelation.REPLACE_ONE)
  direct.compose(dp_accounting.SelfComposedDpEvent(dp_accounting.GaussianDpEvent(1.1 / 2), 50))
  assert every == pytest.approx(direct.get_epsilon(1e-5))
  assert got < every  # Sampling amplifies privacy.
  assert privacy.epsilon(spec, num_clients=84, clients_per_round=21, rounds=100) > got  # Composition spends it.
  assert math.isinf(privacy.epsilon(privacy.PrivacySpec(noise_multiplier=0.0), num_clients=7, clients_per_round=7,
                                    rounds=1))


def _run(prepared, tmp_path, name, **privacy_options):
  config = experiment_config("fedstar", rounds=2, data=dict(setting="MUTAG:3"), privacy=privacy_options)
  folder = tmp_path / name
  result = experiment.run_experiment(config, prepared, folder)
  process = experiment.build_process(config, prepared, 1)
  return result, folder, process


def test_dp_fedstar_releases_epsilon_and_the_aggregators_measurements(tff_context, mutag3, tmp_path):
  result, folder, _ = _run(mutag3, tmp_path, "dp", dp_noise_multiplier=1.0, dp_clip=0.5)
  with open(folder / "seed_1" / "train_metrics.csv") as f:
    rows = list(csv.DictReader(f))
  expected = [privacy.epsilon(privacy.PrivacySpec(noise_multiplier=1.0, clip=0.5), num_clients=3,
                              clients_per_round=3, rounds=r) for r in (1, 2)]
  np.testing.assert_allclose([float(r["server/privacy/epsilon"]) for r in rows], expected, rtol=1e-6)
  assert {float(r["server/privacy/clip"]) for r in rows} == {0.5}
  assert {float(r["server/privacy/noise_stddev"]) for r in rows} == {0.5}
  assert {float(r["server/aggregator/participants"]) for r in rows} == {3.0}  # The mechanism's own measurements.
  assert all(0 <= float(r["server/aggregator/clipped_count"]) <= 3 for r in rows)
  final = json.loads((folder / "seed_1" / "final.json").read_text())["privacy"]
  assert final["epsilon"] == pytest.approx(expected[-1]) and final["noise_multiplier"] == 1.0
  assert json.loads((folder / "config.json").read_text())["privacy"]["dp_clip"] == 0.5


def test_dp_noise_changes_the_shared_part_and_only_it(tff_context, mutag3):
  def final(**options):
    config = experiment_config("fedstar", rounds=1, data=dict(setting="MUTAG:3"), privacy=options)
    process = experiment.build_process(config, mutag3, 1)
    return program_logic.train_process(process, mutag3.clients, seed=1, rounds=1).state

  plain, noisy = final(), final(dp_noise_multiplier=5.0, dp_clip=0.1)
  deltas = [np.abs(a - b).max() for a, b in zip(plain.server_state["shared"], noisy.server_state["shared"])]
  assert max(deltas) > 1e-3  # Clipped and noised: another shared part ...
  again = final(dp_noise_multiplier=5.0, dp_clip=0.1)  # ... and the same noise again (seeded): exact resume.
  for a, b in zip(noisy.server_state["shared"], again.server_state["shared"]):
    np.testing.assert_array_equal(a, b)
  for a, b in zip(plain.client_states, noisy.client_states):  # Private parts: trained on, never noised.
    assert a.keys() == b.keys()


def test_the_gaussian_mean_clips_averages_participants_and_adds_seeded_noise():
  import tensorflow_federated as tff  # pylint: disable=g-import-not-at-top
  from tff_graph.aggregators import GaussianMeanFactory  # pylint: disable=g-import-not-at-top
  from tff_graph import runtime  # pylint: disable=g-import-not-at-top
  value_type = tff.TensorType(np.float32, [2])
  with runtime.local_execution_context():
    exact = GaussianMeanFactory(clip=1.0, noise_multiplier=0.0).create(value_type, tff.TensorType(np.float32))
    out = exact.next(exact.initialize(), [np.array([3.0, 4.0], np.float32), np.array([0.3, 0.4], np.float32),
                                          np.array([9.0, 9.0], np.float32)], [10.0, 1.0, 0.0])
    # Client 1 clipped to norm 1 ([0.6, 0.8]), client 2 as is, client 3 not taking part (weight 0).
    np.testing.assert_allclose(out.result, [(0.6 + 0.3) / 2, (0.8 + 0.4) / 2], rtol=1e-6)
    assert (out.measurements["clipped_count"], out.measurements["participants"]) == (1.0, 2.0)
    noisy = GaussianMeanFactory(clip=1.0, noise_multiplier=2.0, seed=7).create(value_type, tff.TensorType(np.float32))
    values = [np.zeros(2, np.float32)] * 4
    first = noisy.next(noisy.initialize(), values, [1.0] * 4)
    second = noisy.next(first.state, values, [1.0] * 4)
    again = noisy.next(noisy.initialize(), values, [1.0] * 4)
    np.testing.assert_array_equal(first.result, again.result)  # Seeded ...
    assert not np.array_equal(first.result, second.result)  # ... and fresh each round.


def test_secure_aggregation_equals_the_plain_mean_within_quantisation(tff_context, mutag3):
  def final(**options):
    config = experiment_config("fedstar", rounds=2, data=dict(setting="MUTAG:3"), privacy=options)
    process = experiment.build_process(config, mutag3, 1)
    return program_logic.train_process(process, mutag3.clients, seed=1, rounds=2).state.server_state["shared"]

  plain, secure = final(), final(secure_aggregation=True, secure_bound=1000.0)
  for a, b in zip(plain, secure):  # 32-bit quantisation of +-1000 per summed (train-size weighted) value.
    np.testing.assert_allclose(a, b, atol=1e-4)
  clipped = final(secure_aggregation=True, secure_bound=1e-4)  # The secure sum really is in the path:
  assert max(np.abs(a - b).max() for a, b in zip(plain, clipped)) > 1e-3  # its clipping shows.


def test_privacy_options_are_refused_where_nothing_is_shared():
  config = experiment_config("local", privacy=dict(dp_noise_multiplier=1.0))
  with pytest.raises(ValueError, match=r"local does not use the privacy options \(it shares nothing\)"):
    experiment.check_options(config)
  with pytest.raises(ValueError, match="dp_noise_multiplier must be a finite number >= 0"):
    experiment_config("fedstar", privacy=dict(dp_noise_multiplier=float("nan")))
