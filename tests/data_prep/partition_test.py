"""Partitions: deterministic, disjoint, complete, stratified; the papers' chunk and group rules."""

from __future__ import annotations

import numpy as np
import pytest

from data_prep import partition


def _labels(n: int, classes: int = 2, seed: int = 0) -> np.ndarray:
  return np.random.default_rng(seed).integers(0, classes, size=n)


def test_groups_of_both_papers():
  assert partition.GROUPS["chem"] == ("MUTAG", "BZR", "COX2", "DHFR", "PTC_MR", "AIDS", "NCI1")
  assert partition.GROUPS["molecules"] == partition.GROUPS["chem"]
  assert partition.GROUPS["biochem"] == partition.GROUPS["chem"] + ("ENZYMES", "DD", "PROTEINS")
  assert partition.GROUPS["biochemsn"] == partition.GROUPS["biochem"] + ("COLLAB", "IMDB-BINARY", "IMDB-MULTI")
  assert partition.GROUPS["mix"] == partition.GROUPS["biochemsn"]
  assert len(partition.GROUPS["small"]) == 8 and len(partition.GROUPS["biosncv"]) == 9
  assert set(partition.ALL_DATASETS) == {d for g in partition.GROUPS.values() for d in g}
  assert len(partition.ALL_DATASETS) == 16


@pytest.mark.parametrize("text, datasets, k, n, overlap, tiny", [
    ("chem", 7, 1, 0, False, False),
    ("molecules_tiny", 7, 1, 0, False, True),
    ("chem@4", 7, 4, 0, False, False),
    ("PROTEINS:10", 1, 1, 10, False, False),
    ("NCI1:30:overlap", 1, 1, 30, True, False),
])
def test_parse_setting(text, datasets, k, n, overlap, tiny):
  s = partition.parse_setting(text)
  assert (len(s.datasets), s.clients_per_dataset, s.one_dataset_clients, s.overlap, s.tiny) == (
      datasets, k, n, overlap, tiny)


@pytest.mark.parametrize("text, message", [
    ("chemistry", "unknown setting 'chemistry'"),
    ("FOO:3", "unknown dataset 'FOO'"),
    ("MUTAG:0", "number of clients must be >= 1"),
    ("chem@0", "clients per dataset must be >= 1"),
])
def test_bad_setting_names(text, message):
  with pytest.raises(partition.SettingError, match=message):
    partition.parse_setting(text)


def _check_client(c: partition.ClientSplit, y: np.ndarray) -> None:
  parts = [c.train, c.val, c.test]
  every = np.concatenate(parts)
  assert len(set(every.tolist())) == len(every), "splits overlap"
  n = len(every)
  assert len(c.test) == len(c.val) or len(c.test) == len(c.val) + 1
  assert abs(len(c.train) - 0.8 * n) <= 1
  for part in (c.train,):  # Stratified: class shares of train within one graph of the client's.
    for cls in np.unique(y[every]):
      share = np.mean(y[every] == cls)
      assert abs(np.sum(y[part] == cls) - share * len(part)) <= 1.0 + 1e-9


def test_group_partition_is_deterministic_disjoint_complete_and_stratified():
  setting = partition.parse_setting("chem")
  labels = {name: _labels(100 + 37 * i, seed=i) for i, name in enumerate(setting.datasets)}
  a = partition.partition(setting, labels, seed=123)
  b = partition.partition(setting, labels, seed=123)
  c = partition.partition(setting, labels, seed=7)
  assert [x.client_id for x in a] == [f"{i}-{n}" for i, n in enumerate(setting.datasets)]
  for x, y in zip(a, b):
    for part in ("train", "val", "test"):
      np.testing.assert_array_equal(getattr(x, part), getattr(y, part))
  assert any(not np.array_equal(x.train, z.train) for x, z in zip(a, c))
  for client in a:
    y = labels[client.dataset]
    _check_client(client, y)
    np.testing.assert_array_equal(
        np.sort(np.concatenate([client.train, client.val, client.test])), np.arange(len(y)))


def test_split_sizes_match_scikit_learn_convention():
  # 188 graphs (MUTAG): test = ceil(0.2 * 188) = 38, halved into 19 / 19.
  client = partition.partition(partition.parse_setting("MUTAG:1"), {"MUTAG": _labels(188)})[0]
  assert (len(client.train), len(client.val), len(client.test)) == (150, 19, 19)


def test_one_dataset_chunk_rule():
  rng = np.random.default_rng(1)
  chunks = partition.one_dataset_chunks(130, 2, rng)
  # Block size min(50, 130 // 2) = 50: graphs 0..49 and 50..99 in order, the 30 others at random.
  np.testing.assert_array_equal(chunks[0][:50], np.arange(50))
  np.testing.assert_array_equal(chunks[1][:50], np.arange(50, 100))
  rest = np.sort(np.concatenate([chunks[0][50:], chunks[1][50:]]))
  np.testing.assert_array_equal(rest, np.arange(100, 130))
  small = partition.one_dataset_chunks(30, 4, np.random.default_rng(1))  # min(50, 7) = 7
  np.testing.assert_array_equal(small[3][:7], np.arange(21, 28))
  assert sum(len(c) for c in small) == 30


def test_one_dataset_overlap_option():
  chunks = partition.one_dataset_chunks(500, 5, np.random.default_rng(2), overlap=True)
  assert len(chunks) == 5
  assert all(50 <= len(c) < 150 for c in chunks)
  assert all(c.min() >= 0 and c.max() < 500 for c in chunks)


def test_one_dataset_setting_is_complete_and_disjoint():
  y = _labels(1113)
  clients = partition.partition(partition.parse_setting("PROTEINS:10"), {"PROTEINS": y})
  every = np.concatenate([np.concatenate([c.train, c.val, c.test]) for c in clients])
  np.testing.assert_array_equal(np.sort(every), np.arange(1113))
  assert [c.client_id for c in clients][:2] == ["0-PROTEINS", "1-PROTEINS"]


def test_k_clients_per_dataset_and_tiny():
  setting = partition.parse_setting("chem@3")
  labels = {name: _labels(200, seed=i) for i, name in enumerate(setting.datasets)}
  clients = partition.partition(setting, labels)
  assert len(clients) == 21
  for name in setting.datasets:
    mine = [c for c in clients if c.dataset == name]
    every = np.concatenate([np.concatenate([c.train, c.val, c.test]) for c in mine])
    np.testing.assert_array_equal(np.sort(every), np.arange(200))
  tiny = partition.partition(partition.parse_setting("chem_tiny"), labels)
  for c in tiny:
    assert len(c.train) + len(c.val) + len(c.test) == partition.TINY_GRAPHS


def test_too_many_clients():
  with pytest.raises(partition.SettingError, match="cannot split 10 graphs over 11 clients"):
    partition.partition(partition.parse_setting("MUTAG:11"), {"MUTAG": _labels(10)})
