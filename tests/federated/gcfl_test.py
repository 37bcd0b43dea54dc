"""GCFL family on real graphs: reduction to FedAvg, and recovery of two opposed populations."""

from __future__ import annotations

import dataclasses
import zipfile

import numpy as np
import pytest
import tensorflow as tf

from data_prep import cache
from tff_graph import clustering
from tff_graph import gcfl
from tff_graph.federated import client_work as cw
from tff_graph.federated import driver

NEVER = clustering.SplitThresholds(eps1=0.0, eps2=1e9)


def test_gcfl_with_a_gate_that_never_fires_is_exactly_fedavg(tff_context, mutag3):
  fedavg = driver.Simulation(mutag3, driver.RunConfig(algorithm="fedavg", seed=8))
  sim = driver.Simulation(mutag3, driver.RunConfig(algorithm="gcfl", seed=8))
  result, report = gcfl.run_gcfl(sim, 3, NEVER)
  fed_result = driver.run(fedavg, 3)
  for a, b in zip(tf.nest.flatten(sim.shared), tf.nest.flatten(fedavg.shared)):
    np.testing.assert_array_equal(a, b)
  for a, b in zip(tf.nest.flatten(sim.client_states), tf.nest.flatten(fedavg.client_states)):
    np.testing.assert_array_equal(a, b)
  assert result.final == fed_result.final
  assert report.splits == [] and report.cluster_counts == [1, 1, 1]


@pytest.fixture(scope="module")
def opposed(tmp_path_factory, data_dir, cache_dir) -> cache.PreparedSetting:
  """Three clients holding MUTAG as it is and three holding MUTAG with every label flipped."""
  root = tmp_path_factory.mktemp("opposed")
  with zipfile.ZipFile(data_dir / "MUTAG.zip") as z:
    z.extractall(root / "a")
    files = {n.split("/")[-1]: z.read(n) for n in z.namelist() if n.endswith(".txt")}
  flipped = root / "b" / "PTC_MR"
  flipped.mkdir(parents=True)
  for name, content in files.items():
    if not name.startswith("MUTAG_"):
      continue
    if name == "MUTAG_graph_labels.txt":
      content = b"\n".join(b"1" if line.strip() == b"-1" else b"-1"
                           for line in content.splitlines() if line.strip()) + b"\n"
    (flipped / name.replace("MUTAG", "PTC_MR")).write_bytes(content)
  a = cache.prepare_setting("MUTAG:1", data_dir=root / "a", cache_dir=cache_dir).clients[0]
  b = cache.prepare_setting("PTC_MR:1", data_dir=root / "b", cache_dir=cache_dir)
  b_client = b.clients[0]
  clients = tuple(dataclasses.replace(c, client_id=f"{i}-{tag}") for tag, c in (("A", a), ("B", b_client))
                  for i in range(3))
  return dataclasses.replace(b, clients=clients)


@pytest.mark.parametrize("algorithm", ["gcfl", "gcfl_plus", "gcfl_plus_dws"])
def test_opposed_populations_are_split_apart(tff_context, opposed, algorithm):
  thresholds = clustering.SplitThresholds(eps1=10.0, eps2=0.0, warmup_rounds=3, seq_length=3)
  # Deterministic clients (no shuffling, no dropout, no weight decay, whose common pull would mask the
  # opposition), so that the members of a population move alike; and private layers (input, post,
  # head) equal everywhere, since a random private head could absorb the label flip.
  config = driver.RunConfig(algorithm=algorithm, seed=1, dropout=0.0,
                            training=cw.TrainingConfig(shuffle_buffer=1, weight_decay=0.0))
  sim = driver.Simulation(opposed, config)
  for cid in sim.client_ids:
    sim.client_states[cid] = sim.client_states[sim.client_ids[0]]
  _, report = gcfl.run_gcfl(sim, 8, thresholds)
  assert report.splits, "no split within 8 rounds"
  first = report.splits[0]
  assert first.round <= 6
  sides = {frozenset(first.into[0]), frozenset(first.into[1])}
  population_a = frozenset(c for c in sim.client_ids if c.endswith("A"))
  population_b = frozenset(c for c in sim.client_ids if c.endswith("B"))
  assert sides == {population_a, population_b}
  # Later splits (the gate still fires on 3-member clusters) never mix the populations again.
  for members in report.clusters:
    assert set(members) <= population_a or set(members) <= population_b
  # Members of one cluster train from one bucket of weights; A's and B's buckets differ.
  for members in report.clusters:
    assert len({sim.bucket_of[c] for c in members}) == 1
  bucket_a, bucket_b = sim.bucket_of["0-A"], sim.bucket_of["0-B"]
  assert not np.allclose(sim.shared[0][bucket_a], sim.shared[0][bucket_b])
  best = report.best_snapshot_accuracy()
  assert set(best) == set(sim.client_ids)
