"""Every algorithm's process on real clients: reductions, private state, GCFL's gate, splits, resume."""

from __future__ import annotations

import collections
import dataclasses

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_federated as tff

from tff_graph import checkpoints
from tff_graph import clustering
from tff_graph import program_logic
from tff_graph.federated import client_work as cw
from tests.conftest import make_process
from tests.conftest import twin_clients


def _flat(structure):
  return [np.asarray(v) for v in tf.nest.flatten(structure)]


def _assert_equal(a, b, exact=True):
  fa, fb = _flat(a), _flat(b)
  assert len(fa) == len(fb)
  for x, y in zip(fa, fb):
    if exact:
      np.testing.assert_array_equal(x, y)
    else:
      np.testing.assert_allclose(x, y, rtol=1e-5, atol=1e-6)


def _run(process, prepared, rounds, *, seed=1, **kwargs):
  return program_logic.train_process(process, prepared.clients, seed=seed, rounds=rounds,
                                     eval_every=kwargs.pop("eval_every", rounds), **kwargs)


def test_fedprox_with_mu_zero_is_exactly_fedavg(tff_context, mutag3):
  small = dict(batch_size=16)  # Several local steps per round.
  fedavg = _run(make_process(mutag3, "fedavg", seed=3, training=small), mutag3, 2, seed=3)
  fedprox = _run(make_process(mutag3, "fedprox", seed=3, proximal_mu=0.0, training=small), mutag3, 2, seed=3)
  _assert_equal(fedavg.state.server_state, fedprox.state.server_state)
  _assert_equal(fedavg.state.client_states, fedprox.state.client_states)


def _two_steps(client, mu, epochs):
  """Eager ClientWork on one client's train split: all graphs in one batch, `epochs` steps."""
  spec = cw.InputSpec(feature_dim=client.feature_dim, num_classes=client.num_classes)
  from tff_graph.models import classifiers  # pylint: disable=g-import-not-at-top
  model_spec = classifiers.ModelSpec(kind="gin", feature_dim=client.feature_dim, num_classes=client.num_classes)
  config = cw.TrainingConfig(batch_size=1000, local_epochs=epochs, proximal_mu=mu, shuffle_buffer=1)
  work = cw.ClientWork(lambda: classifiers.build_model(model_spec, seed=7), ("gnn",), config, spec)
  start = [v.numpy() for v in work.layout.shared(work.model.trainable_variables)]
  state = work.initial_state()
  inputs = program_logic.client_data(client, 0, seed=1, round_num=0)
  out = work.train(start, state, inputs)
  return work, start, out


def test_proximal_term_adds_mu_times_the_drift_to_the_gradient(mutag1):
  # Two local steps on the same batch. Step 1 is the same with and without the proximal term (the
  # weights have not moved yet); in step 2 the gradient gains mu * (w1 - w0) on the shared weights
  # only, so Adam's first moment after step 2 differs by (1 - beta_1) * mu * (w1 - w0) (an
  # independent computation: w1 from a one-step run).
  client = mutag1.clients[0]
  mu = 10.0
  work, w0, one = _two_steps(client, 0.0, 1)
  _, _, plain = _two_steps(client, 0.0, 2)
  _, _, prox = _two_steps(client, mu, 2)
  w1 = [w + u for w, u in zip(w0, _flat(one["update"]))]
  shared_index = set(work.layout.shared_index)
  beta_1 = cw.TrainingConfig().beta_1
  for i, (m_plain, m_prox) in enumerate(zip(plain["state"]["adam_m"], prox["state"]["adam_m"])):
    diff = np.asarray(m_prox) - np.asarray(m_plain)
    if i in shared_index:
      j = work.layout.shared_index.index(i)
      expected = (1 - beta_1) * mu * (w1[j] - w0[j])
      np.testing.assert_allclose(diff, expected, rtol=2e-3, atol=1e-7)
      assert np.abs(expected).max() > 1e-4
    else:
      np.testing.assert_allclose(diff, 0.0, atol=1e-7)


def test_adam_step_is_pytorch_adam_with_l2_weight_decay():
  # One variable, two steps with known gradients, against PyTorch's Adam(weight_decay=wd) formula.
  config = cw.TrainingConfig(learning_rate=0.1, weight_decay=0.5)
  w = tf.Variable([1.0, -2.0, 0.5])

  class Holder:
    pass

  holder = Holder()
  holder.config = config
  holder.step = tf.Variable(tf.constant(0, tf.int64))
  holder.m = [tf.Variable(tf.zeros(3))]
  holder.v = [tf.Variable(tf.zeros(3))]
  holder.model = Holder()
  holder.model.trainable_variables = [w]
  grads = [np.array([0.3, -0.1, 2.0], np.float32), np.array([-0.2, 0.4, 1.0], np.float32)]
  ref_w, m, v = np.array([1.0, -2.0, 0.5]), np.zeros(3), np.zeros(3)
  for t, g in enumerate(grads, start=1):
    cw.ClientWork._adam(holder, [tf.constant(g)])  # pylint: disable=protected-access
    g = g + 0.5 * ref_w
    m = 0.9 * m + 0.1 * g
    v = 0.999 * v + 0.001 * g * g
    ref_w = ref_w - 0.1 / (1 - 0.9 ** t) * m / (np.sqrt(v) / np.sqrt(1 - 0.999 ** t) + 1e-8)
  np.testing.assert_allclose(w.numpy(), ref_w, rtol=2e-5)  # float32 bias corrections vs float64.
  assert int(holder.step.numpy()) == 2


def test_zero_padded_features_and_masked_logits_equal_the_unpadded_model(chem_tiny):
  from data_prep import graph_tensor as gt  # pylint: disable=g-import-not-at-top
  from tff_graph.models import classifiers  # pylint: disable=g-import-not-at-top
  client = chem_tiny.clients[0]  # MUTAG: 7 features, 2 classes; the setting is 53 wide.
  small = classifiers.build_model(classifiers.ModelSpec(kind="gin", feature_dim=7, num_classes=2), seed=3)
  wide = classifiers.build_model(classifiers.ModelSpec(kind="gin", feature_dim=53, num_classes=4), seed=4)
  for a, b in zip(small.trainable_variables, wide.trainable_variables):
    value = b.numpy()
    value[tuple(slice(0, n) for n in a.shape)] = a.numpy()
    b.assign(value)
  examples = [r.numpy() for r in tf.data.TFRecordDataset(client.files["train"])]
  narrow = gt.parse_batch(tf.constant(examples), feature_dim=7, padded_feature_dim=7, n_rw=16, n_dg=16)
  padded = gt.parse_batch(tf.constant(examples), feature_dim=7, padded_feature_dim=53, n_rw=16, n_dg=16)
  expected = small(narrow, training=False)
  got = cw.masked_logits(wide(padded, training=False), tf.constant(2))
  np.testing.assert_allclose(got[:, :2], expected, rtol=1e-5, atol=1e-5)
  labels = narrow.context[gt.LABEL]
  np.testing.assert_allclose(
      tf.nn.sparse_softmax_cross_entropy_with_logits(labels, got).numpy(),
      tf.nn.sparse_softmax_cross_entropy_with_logits(labels, expected).numpy(), rtol=1e-5, atol=1e-6)


def test_one_client_fedavg_equals_local_training(tff_context, mutag1):
  local = make_process(mutag1, "local", seed=4)
  fedavg = make_process(mutag1, "fedavg", seed=4)
  start = program_logic.initial_state(local, mutag1.clients, seed=4, rounds=3)
  every = start.client_states[0]["private"]
  # FedAvg from the local client's own initial weights (the server's would differ).
  fed_start = program_logic.initial_state(fedavg, mutag1.clients, seed=4, rounds=3)
  work = fedavg._work()  # pylint: disable=protected-access
  fed_start.server_state["shared"] = [every[i] for i in work.layout.shared_index]
  fed_start.client_states[0]["private"] = [every[i] for i in work.layout.private_index]
  a = _run(local, mutag1, 3, seed=4, state=start)
  b = _run(fedavg, mutag1, 3, seed=4, state=fed_start)
  merged = fedavg.client_weights(b.state.server_state, b.state.client_states[0], 0)
  _assert_equal(merged, a.state.client_states[0]["private"], exact=False)
  for cid, metrics in a.final.items():
    assert metrics == pytest.approx(b.final[cid], rel=1e-4, abs=1e-5)


def test_fedstar_sharing_everything_on_identical_clients_is_fedavg_of_one(tff_context, mutag3):
  twins = twin_clients(mutag3)
  one = dataclasses.replace(mutag3, clients=mutag3.clients[:1])
  no_shuffle = dict(shuffle_buffer=1)
  pair_process = make_process(twins, "fedstar_share_all", seed=5, training=no_shuffle)
  single_process = make_process(one, "fedstar_share_all", seed=5, training=no_shuffle)
  pair_state = program_logic.initial_state(pair_process, twins.clients, seed=5, rounds=3)
  pair_state.client_states[1] = pair_state.client_states[0]  # Identical clients: same data, same init.
  pair = _run(pair_process, twins, 3, seed=5, state=pair_state)
  single = _run(single_process, one, 3, seed=5)
  _assert_equal(pair.state.client_states[0], pair.state.client_states[1])
  _assert_equal(pair.state.server_state["shared"], single.state.server_state["shared"], exact=False)
  _assert_equal(pair.state.client_states[0], single.state.client_states[0], exact=False)


def test_private_weights_differ_between_clients_and_persist(tff_context, mutag3):
  process = make_process(mutag3, "fedstar", seed=6)
  initial = program_logic.initial_state(process, mutag3.clients, seed=6, rounds=2)
  result = _run(process, mutag3, 2, seed=6)
  for i, c in enumerate(mutag3.clients):
    assert any(not np.array_equal(x, y) for x, y in zip(_flat(initial.client_states[i]["private"]),
                                                        _flat(result.state.client_states[i]["private"])))
    steps_per_round = int(np.ceil(c.sizes["train"] / 128))
    assert int(result.state.client_states[i]["adam_step"]) == 2 * steps_per_round  # Carried over.
  p0, p1 = (_flat(result.state.client_states[i]["private"]) for i in range(2))
  assert any(not np.allclose(x, y) for x, y in zip(p0, p1))
  assert int(result.state.server_state["round"]) == 2


def test_heterogeneous_clients_train_in_one_computation(tff_context, chem_tiny):
  process = make_process(chem_tiny, "fedstar")
  assert process.input_spec.feature_dim == max(c.feature_dim for c in chem_tiny.clients) == 53
  state = program_logic.initial_state(process, chem_tiny.clients, seed=1, rounds=5)
  data = lambda r: [program_logic.client_data(c, i, seed=1, round_num=r) for i, c in enumerate(chem_tiny.clients)]
  server, states = state.server_state, state.client_states
  losses = []
  for r in range(5):
    out = process.next(server, states, data(r))
    server, states = out["state"], list(out["client_states"])
    losses.append(float(out["metrics"]["server"]["train"]["train_loss"]))
    per_client = [float(m["train_loss"]) for m in out["metrics"]["clients"]]
    assert losses[-1] == pytest.approx(np.mean(per_client), rel=1e-5)  # Released at SERVER too.
  assert losses[-1] < losses[0]


# ----- partial participation -------------------------------------------------------------------------


def test_sampling_is_seeded_and_depends_on_the_round():
  picks = [program_logic.sample_clients(10, 0.3, seed=9, round_num=r) for r in range(6)]
  assert all(len(p) == 3 and p == sorted(p) for p in picks)
  assert len({tuple(p) for p in picks}) > 1
  assert picks == [program_logic.sample_clients(10, 0.3, seed=9, round_num=r) for r in range(6)]
  assert program_logic.sample_clients(10, 1.0, seed=9, round_num=0) == list(range(10))


def test_only_sampled_clients_change(tff_context, mutag3):
  process = make_process(mutag3, "fedstar", seed=2)
  start = program_logic.initial_state(process, mutag3.clients, seed=2, rounds=1)
  result = _run(process, mutag3, 1, seed=2, client_fraction=0.5, state=start)
  chosen = program_logic.sample_clients(3, 0.5, seed=2, round_num=0)
  assert len(chosen) == 1
  for i in range(3):
    same = all(np.array_equal(x, y) for x, y in zip(_flat(start.client_states[i]), _flat(result.state.client_states[i])))
    assert same == (i not in chosen)


# ----- GCFL --------------------------------------------------------------------------------------------

NEVER = clustering.SplitThresholds(eps1=0.0, eps2=1e9)
ALWAYS = clustering.SplitThresholds(eps1=10.0, eps2=0.0)


@pytest.fixture(scope="module")
def gcfl_runs(tff_context, mutag3):
  """FedAvg, GCFL with a gate that never fires, and one that fires as soon as it may (round 21)."""
  out = {}
  for name, algorithm, thresholds in (("fedavg", "fedavg", None), ("never", "gcfl", NEVER),
                                      ("always", "gcfl", ALWAYS)):
    process = make_process(mutag3, algorithm, seed=8, thresholds=thresholds)
    before = _run(process, mutag3, 20, seed=8, eval_every=100)
    after = _run(process, mutag3, 21, seed=8, eval_every=100, state=dataclasses.replace(
        before.state, history=program_logic._empty_history(21, 3, process.clustering and 3)))  # pylint: disable=protected-access
    out[name] = (process, before, after)
  return out


def test_gcfl_with_a_gate_that_never_fires_is_exactly_fedavg_past_round_20(gcfl_runs):
  _, _, fedavg = gcfl_runs["fedavg"]
  _, _, never = gcfl_runs["never"]
  _assert_equal(fedavg.state.client_states, never.state.client_states)
  for a, b in zip(fedavg.state.server_state["shared"], never.state.server_state["shared"]):
    np.testing.assert_array_equal(a, b[0])
  assert fedavg.final == never.final
  assert int(never.state.server_state["clusters"]["count"]) == 1


def test_gcfl_gate_waits_for_round_20_then_fires(gcfl_runs):
  _, before, after = gcfl_runs["always"]
  _, fed_before, _ = gcfl_runs["fedavg"]
  assert int(before.state.server_state["clusters"]["count"]) == 1  # Rounds 1-20: the gate may not fire.
  _assert_equal(before.state.client_states, fed_before.state.client_states)
  assert int(after.state.server_state["clusters"]["count"]) == 2  # Round 21: it does.
  report = after.clustering_report()
  assert [s["round"] for s in report["splits"]] == [21]
  assert report["cluster_counts"][-1] == 2


def test_gcfl_reaverages_each_new_cluster_from_the_old_weights(tff_context, gcfl_runs, mutag3):
  # The split round's new clusters hold: old cluster weights + the weighted mean of their members'
  # updates. Independently: a FedAvg round over only those members from the same state.
  process, before, after = gcfl_runs["always"]
  fedavg = make_process(mutag3, "fedavg", seed=8)
  assignment = np.asarray(after.state.server_state["clusters"]["assignment"])
  old = [w[0] for w in before.state.server_state["shared"]]
  for k in range(2):
    members = [i for i in range(3) if assignment[i] == k]
    server = collections.OrderedDict(before.state.server_state)
    state = program_logic.initial_state(fedavg, mutag3.clients, seed=8, rounds=1)
    state.server_state["shared"] = old
    out = fedavg.next(state.server_state, [before.state.client_states[i] for i in members],
                      [program_logic.client_data(mutag3.clients[i], i, seed=8, round_num=20) for i in members])
    for got, expected in zip(after.state.server_state["shared"], out["state"]["shared"]):
      np.testing.assert_array_equal(got[k], expected)
    del server
  # Splits only produce non-empty sides.
  assert sorted(set(assignment.tolist())) == [0, 1]


@pytest.mark.parametrize("algorithm,sequence", [("gcfl_plus", "last_grad_norm"), ("gcfl_plus_dws", "update_norm")])
def test_gcfl_plus_keeps_the_named_sequence_of_each_client(tff_context, mutag3, algorithm, sequence):
  process = make_process(mutag3, algorithm, seed=2)
  state = program_logic.initial_state(process, mutag3.clients, seed=2, rounds=2)
  server, states = state.server_state, state.client_states
  reported = []
  for r in range(2):
    out = process.next(server, states, [program_logic.client_data(c, i, seed=2, round_num=r)
                                        for i, c in enumerate(mutag3.clients)])
    server, states = out["state"], list(out["client_states"])
    by_index = {int(m["client_index"]): m for m in out["metrics"]["clients"]}
    reported.append([float(by_index[i][sequence]) for i in range(3)])
  values = np.asarray(server["rule"]["values"])
  np.testing.assert_array_equal(values[:, -2:], np.array(reported, np.float32).T)
  assert np.asarray(server["rule"]["length"]).tolist() == [2, 2, 2]


def test_gcfl_checkpoint_and_resume_is_exact(tff_context, mutag3, tmp_path):
  thresholds = clustering.SplitThresholds(eps1=10.0, eps2=0.0, warmup_rounds=2, seq_length=2)
  process = make_process(mutag3, "gcfl_plus", seed=3, thresholds=thresholds)
  straight = _run(process, mutag3, 6, seed=3, eval_every=1)
  manager = checkpoints.NpzProgramStateManager(tmp_path / "ckpt", keep_total=2)
  first = _run(process, mutag3, 6, seed=3, eval_every=1, checkpoint_every=3, state_manager=manager)
  _assert_equal(first.state.to_structure(), straight.state.to_structure())
  assert straight.clustering_report()["splits"], "the test needs a split"
  # A new loop on the same state manager resumes from round 3 (as after a kill) and ends identically.
  versions = program_logic.run_sync(manager.get_versions())
  assert versions == [3]
  resumed = _run(process, mutag3, 6, seed=3, eval_every=1, checkpoint_every=3,
                 state_manager=checkpoints.NpzProgramStateManager(tmp_path / "ckpt", keep_total=2))
  _assert_equal(resumed.state.to_structure(), straight.state.to_structure())
  assert resumed.final == straight.final
  assert resumed.clustering_report() == straight.clustering_report()
  assert resumed.curve == straight.curve


@pytest.fixture(scope="module")
def opposed(tmp_path_factory, data_dir, cache_dir):
  """Three clients holding MUTAG as it is and three holding MUTAG with every label flipped."""
  import zipfile  # pylint: disable=g-import-not-at-top
  from data_prep import cache  # pylint: disable=g-import-not-at-top
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
  clients = tuple(dataclasses.replace(c, client_id=f"{i}-{tag}") for tag, c in (("A", a), ("B", b.clients[0]))
                  for i in range(3))
  return dataclasses.replace(b, clients=clients)


@pytest.mark.parametrize("algorithm", ["gcfl", "gcfl_plus", "gcfl_plus_dws"])
def test_opposed_populations_are_split_apart(tff_context, opposed, algorithm):
  thresholds = clustering.SplitThresholds(eps1=10.0, eps2=0.0, warmup_rounds=3, seq_length=3)
  # Deterministic clients (no shuffling, no dropout, no weight decay, whose common pull would mask the
  # opposition), so that the members of a population move alike; and private layers (input, post,
  # head) equal everywhere, since a random private head could absorb the label flip.
  process = make_process(opposed, algorithm, seed=1, thresholds=thresholds, model=dict(dropout=0.0),
                         training=dict(shuffle_buffer=1, weight_decay=0.0))
  state = program_logic.initial_state(process, opposed.clients, seed=1, rounds=8)
  state.client_states = [state.client_states[0]] * 6
  result = _run(process, opposed, 8, seed=1, eval_every=1, state=state)
  report = result.clustering_report()
  assert report["splits"], "no split within 8 rounds"
  first = report["splits"][0]
  assert first["round"] <= 6
  ids = [c.client_id for c in opposed.clients]
  population_a = frozenset(c for c in ids if c.endswith("A"))
  population_b = frozenset(c for c in ids if c.endswith("B"))
  assert {frozenset(first["into"][0]), frozenset(first["into"][1])} == {population_a, population_b}
  # Later splits (the gate still fires on 3-member clusters) never mix the populations again.
  for members in report["clusters"]:
    assert set(members) <= population_a or set(members) <= population_b
  assignment = np.asarray(result.state.server_state["clusters"]["assignment"])
  a, b = assignment[ids.index("0-A")], assignment[ids.index("0-B")]
  assert not np.allclose(result.state.server_state["shared"][0][a], result.state.server_state["shared"][0][b])
  assert set(report["best_snapshot_accuracy"]) == set(ids)
