"""Preparing settings: files per client, reuse when current, nothing half-written on errors."""

from __future__ import annotations

import os

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_gnn as tfgnn

from data_prep import cache
from data_prep import graph_tensor as gt
from data_prep import partition
from data_prep import tu
from tests.conftest import write_tu



def _read(path, spec):
  return tf.data.TFRecordDataset(str(path)).map(lambda x: tfgnn.parse_single_example(spec, x))

def _fake_mutag(folder, graphs: int = 40, broken: bool = False):
  """A TU-format dataset named MUTAG: `graphs` paths of 3 nodes, alternating labels."""
  a, ind, nl = [], [], []
  for g in range(graphs):
    base = 3 * g + 1
    a += [f"{base}, {base + 1}", f"{base + 1}, {base}", f"{base + 1}, {base + 2}", f"{base + 2}, {base + 1}"]
    ind += [str(g + 1)] * 3
    nl += ["0", "1", str(g % 3)]
  labels = [str(g % 2) for g in range(graphs)]
  if broken:
    labels = labels[:-1]
  return write_tu(folder, "MUTAG", {"A": "\n".join(a) + "\n", "graph_indicator": "\n".join(ind) + "\n",
                                    "graph_labels": "\n".join(labels) + "\n",
                                    "node_labels": "\n".join(nl) + "\n"})


def test_prepare_writes_every_split_and_reuses_it(tmp_path):
  data = _fake_mutag(tmp_path / "data")
  prepared = cache.prepare_setting("MUTAG:2", data_dir=data, cache_dir=tmp_path / "cache")
  assert [c.client_id for c in prepared.clients] == ["0-MUTAG", "1-MUTAG"]
  total = 0
  for c in prepared.clients:
    spec = gt.graph_spec(tfgnn.read_schema(c.schema_path))
    for part in cache.SPLITS:
      graphs = list(_read(c.files[part], spec))
      assert len(graphs) == c.sizes[part]
      total += len(graphs)
      for g in graphs:
        assert int(g.node_sets[gt.NODES].sizes[0]) == 3
        assert int(g.edge_sets[gt.EDGES].sizes[0]) == 4
    assert c.feature_dim == 3 and c.num_classes == 2
  assert total == 40
  manifest = prepared.root / "manifest.json"
  stamp = manifest.stat().st_mtime_ns
  again = cache.prepare_setting("MUTAG:2", data_dir=data, cache_dir=tmp_path / "cache")
  assert again.root == prepared.root and manifest.stat().st_mtime_ns == stamp
  other_seed = cache.prepare_setting("MUTAG:2", data_dir=data, cache_dir=tmp_path / "cache", seed=5)
  assert other_seed.root != prepared.root


def test_changed_source_invalidates_cache(tmp_path):
  data = _fake_mutag(tmp_path / "data")
  first = cache.prepare_setting("MUTAG:1", data_dir=data, cache_dir=tmp_path / "cache")
  _fake_mutag(tmp_path / "data", graphs=48)
  second = cache.prepare_setting("MUTAG:1", data_dir=data, cache_dir=tmp_path / "cache")
  assert second.root != first.root
  assert sum(second.clients[0].sizes.values()) == 48


def test_the_cache_key_is_the_content_not_size_and_mtime(tmp_path):
  data = _fake_mutag(tmp_path / "data")
  first = cache.prepare_setting("MUTAG:1", data_dir=data, cache_dir=tmp_path / "cache")
  f = data / "MUTAG" / "MUTAG_graph_labels.txt"
  stat = f.stat()
  text = f.read_text()
  f.write_text(text.replace("0", "1", 1))  # Same size, same time: one graph's label changed.
  os.utime(f, ns=(stat.st_atime_ns, stat.st_mtime_ns))
  assert f.stat().st_size == stat.st_size and f.stat().st_mtime_ns == stat.st_mtime_ns
  second = cache.prepare_setting("MUTAG:1", data_dir=data, cache_dir=tmp_path / "cache")
  assert second.root != first.root
  counts = lambda p: np.sum([p.clients[0].stats["train_class_counts"]], axis=0)
  labels = cache.load_dataset("MUTAG", data_dir=data, cache_dir=tmp_path / "cache").data.graph_labels
  assert np.bincount(labels).tolist() == [19, 21]
  assert counts(first).tolist() != counts(second).tolist() or first.clients[0].graph_indices != \
      second.clients[0].graph_indices


def test_embeddings_computed_with_other_blas_kernels_are_not_reused(tmp_path, monkeypatch):
  # The RWSE's eigh gives other last bits with OpenBLAS's AVX-512 kernels than with the pinned AVX2 ones
  # (data_prep.cpu_kernels): a cache entry made under other kernels must not pass for this process's.
  data = _fake_mutag(tmp_path / "data")
  first = cache.prepare_setting("MUTAG:1", data_dir=data, cache_dir=tmp_path / "cache")
  assert cache.prepare_setting("MUTAG:1", data_dir=data, cache_dir=tmp_path / "cache").root == first.root
  monkeypatch.setattr(cache.cpu_kernels, "blas_family", lambda: "cooperlake")
  second = cache.prepare_setting("MUTAG:1", data_dir=data, cache_dir=tmp_path / "cache")
  assert second.root != first.root
  assert len(list((tmp_path / "cache" / "datasets").glob("MUTAG-*.npz"))) == 2


def test_bad_dataset_leaves_no_cache_behind(tmp_path):
  data = _fake_mutag(tmp_path / "data", broken=True)
  with pytest.raises(tu.TUFormatError, match="MUTAG_graph_labels.txt: 39 labels for 40 graphs"):
    cache.prepare_setting("MUTAG:2", data_dir=data, cache_dir=tmp_path / "cache")
  left = [p for p in (tmp_path / "cache").rglob("*")] if (tmp_path / "cache").exists() else []
  assert [p for p in left if p.is_file()] == []


def test_unknown_names(tmp_path):
  with pytest.raises(tu.TUFormatError, match="dataset 'nope' not found: looked for .*nope.zip and .*nope/"):
    cache.prepare_setting("nope", data_dir=tmp_path, cache_dir=tmp_path / "c")
  with pytest.raises(tu.TUFormatError, match="dataset 'NOPE' not found"):
    cache.load_dataset("NOPE", data_dir=tmp_path, cache_dir=tmp_path / "c")
  with pytest.raises(tu.TUFormatError, match="does not exist"):
    cache.prepare_setting("chem", data_dir=tmp_path / "missing", cache_dir=tmp_path / "c")


def test_real_chem_setting(data_dir, cache_dir):
  prepared = cache.prepare_setting("chem", data_dir=data_dir, cache_dir=cache_dir)
  stats = cache.statistics_table(prepared)
  assert [s["dataset"] for s in stats] == list(partition.GROUPS["chem"])
  mutag = stats[0]
  assert (mutag["train"], mutag["val"], mutag["test"]) == (150, 19, 19)
  assert mutag["avg_nodes"] == pytest.approx(17.93, abs=0.01)
  assert mutag["feature_dim"] == 7
  nci1 = prepared.clients[6]
  spec = gt.graph_spec(tfgnn.read_schema(nci1.schema_path))
  first = next(iter(_read(nci1.files["val"], spec)))
  rwse = first.node_sets[gt.NODES][gt.RWSE].numpy()
  assert rwse.shape[1] == 16 and np.all((rwse >= 0) & (rwse <= 1))
  # Stratified: train class shares within one graph of the dataset's.
  d = cache.load_dataset("NCI1", data_dir=data_dir, cache_dir=cache_dir)
  share = np.bincount(d.data.graph_labels) / d.data.num_graphs
  assert np.all(np.abs(np.array(stats[6]["train_class_counts"]) - share * stats[6]["train"]) <= 1)
