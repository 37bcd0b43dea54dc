"""Tests of the TU reader on hand-written fixtures and on the 16 real datasets."""

from __future__ import annotations

import pathlib
import zipfile

import numpy as np
import pytest

from data_prep import tu
from tests.conftest import SMALL, read_real, write_tu

OFFICIAL = {  # graphs, classes, avg nodes, avg undirected edges (TU collection's tables)
    "MUTAG": (188, 2, 17.93, 19.79), "BZR": (405, 2, 35.75, 38.36), "COX2": (467, 2, 41.22, 43.45),
    "DHFR": (756, 2, 42.43, 44.54), "PTC_MR": (344, 2, 14.29, 14.69), "AIDS": (2000, 2, 15.69, 16.20),
    "NCI1": (4110, 2, 29.87, 32.30), "ENZYMES": (600, 6, 32.63, 62.14), "DD": (1178, 2, 284.32, 715.66),
    "PROTEINS": (1113, 2, 39.06, 72.82), "COLLAB": (5000, 3, 74.49, 2457.78),
    "IMDB-BINARY": (1000, 2, 19.77, 96.53), "IMDB-MULTI": (1500, 3, 13.00, 65.94),
    "Letter-low": (2250, 15, 4.68, 3.13), "Letter-med": (2250, 15, 4.67, 3.21),
    "Letter-high": (2250, 15, 4.67, 4.50),
}


def _small(tmp_path: pathlib.Path, **overrides: str) -> pathlib.Path:
  files = dict(SMALL)
  files.update(overrides)
  return write_tu(tmp_path, "TOY", files)


def test_parses_structure_labels_and_attributes(tmp_path):
  d = tu.read_tu_dataset("TOY", _small(tmp_path))
  assert d.num_graphs == 2 and d.num_nodes == 7
  np.testing.assert_array_equal(d.node_offsets, [0, 3, 7])
  # Duplicates and the self-loop are gone; each undirected edge once, u < v.
  np.testing.assert_array_equal(d.edges, [[0, 1], [0, 2], [1, 2], [3, 4], [4, 5]])
  np.testing.assert_array_equal(d.edge_offsets, [0, 3, 5])
  assert d.num_self_loops == 1
  np.testing.assert_array_equal(d.graph_labels, [0, 1])
  np.testing.assert_array_equal(d.raw_label_values, [-1, 1])
  np.testing.assert_array_equal(d.node_labels[:, 0], [2, 4, 2, 3, 3, 2, 2])
  assert d.node_attributes.shape == (7, 2) and d.node_attributes[0, 0] == 0.5
  np.testing.assert_array_equal(d.degrees(), [2, 2, 2, 1, 2, 1, 0])
  assert d.statistics() == {"graphs": 2, "classes": 2, "avg_nodes": 3.5, "avg_edges": 3.0}


def test_zip_and_folder_read_the_same(tmp_path):
  folder = _small(tmp_path / "loose")
  zdir = tmp_path / "zipped"
  zdir.mkdir()
  with zipfile.ZipFile(zdir / "TOY.zip", "w") as z:
    for f in (folder / "TOY").iterdir():
      z.write(f, f"TOY/{f.name}")
  a = tu.read_tu_dataset("TOY", folder)
  b = tu.read_tu_dataset("TOY", zdir)
  np.testing.assert_array_equal(a.edges, b.edges)
  np.testing.assert_array_equal(a.node_labels, b.node_labels)


def test_data_dir_from_environment(tmp_path, monkeypatch):
  monkeypatch.setenv(tu.DEFAULT_DATA_DIR_ENV, str(_small(tmp_path)))
  assert tu.read_tu_dataset("TOY").num_graphs == 2


def test_blank_lines_are_tolerated(tmp_path):
  d = tu.read_tu_dataset("TOY", _small(tmp_path, graph_labels="-1\n\n1\n\n"))
  np.testing.assert_array_equal(d.graph_labels, [0, 1])


@pytest.mark.parametrize("overrides, message", [
    ({"A": SMALL["A"].replace("5, 6\n", "5, x6\n")}, r"TOY_A.txt line 11: cannot parse '5, x6'"),
    ({"A": SMALL["A"] + "6\n"}, r"TOY_A.txt line 13: expected 2 value"),
    ({"A": SMALL["A"] + "6, 9\n"}, r"edge \(6, 9\) near line 13 has a node id outside 1..7"),
    ({"A": SMALL["A"] + "0, 1\n"}, r"edge \(0, 1\) near line 13 has a node id outside"),
    ({"A": SMALL["A"] + "3, 4\n"}, r"edge \(3, 4\) near line 13 joins graph 1 and graph 2"),
    ({"graph_indicator": "1\n1\n1\n3\n3\n3\n3\n"}, r"graph_indicator.txt line 4: .*not contiguous"),
    ({"graph_indicator": "1\n1\n2\n1\n2\n2\n2\n"}, r"graph_indicator.txt line 4: .*not contiguous"),
    ({"graph_indicator": "2\n2\n2\n3\n3\n3\n3\n"}, r"graph_indicator.txt line 1: graph ids must start at 1"),
    ({"graph_labels": "1\n"}, r"TOY_graph_labels.txt: 1 labels for 2 graphs"),
    ({"node_labels": "1\n2\n"}, r"TOY_node_labels.txt: 2 lines for 7 nodes"),
    ({"node_attributes": "1, 2\n3\n"}, r"TOY_node_attributes.txt line 2: expected 2 value"),
    ({"graph_labels": ""}, r"TOY_graph_labels.txt: file is empty"),
])
def test_malformed_files_raise_one_clear_error(tmp_path, overrides, message):
  with pytest.raises(tu.TUFormatError, match=message):
    tu.read_tu_dataset("TOY", _small(tmp_path, **overrides))


def test_missing_required_file(tmp_path):
  folder = _small(tmp_path)
  (folder / "TOY" / "TOY_graph_labels.txt").unlink()
  with pytest.raises(tu.TUFormatError, match="required file TOY_graph_labels.txt is missing"):
    tu.read_tu_dataset("TOY", folder)


def test_missing_folder_and_unknown_dataset(tmp_path):
  with pytest.raises(tu.TUFormatError, match="data folder .*nowhere does not exist"):
    tu.read_tu_dataset("TOY", tmp_path / "nowhere")
  with pytest.raises(tu.TUFormatError, match="dataset 'NOPE' not found"):
    tu.read_tu_dataset("NOPE", tmp_path)


def test_no_data_dir_given(monkeypatch):
  monkeypatch.delenv(tu.DEFAULT_DATA_DIR_ENV, raising=False)
  with pytest.raises(tu.TUFormatError, match="no data folder given"):
    tu.read_tu_dataset("MUTAG")


def test_truncated_zip(tmp_path, data_dir):
  raw = (data_dir / "MUTAG.zip").read_bytes()
  (tmp_path / "MUTAG.zip").write_bytes(raw[: len(raw) // 2])
  with pytest.raises(tu.TUFormatError, match="MUTAG.zip"):
    tu.read_tu_dataset("MUTAG", tmp_path)


def test_corrupt_member_in_zip(tmp_path, data_dir):
  raw = bytearray((data_dir / "MUTAG.zip").read_bytes())
  raw[2000:2400] = b"\x00" * 400  # Inside the deflated data of the first members.
  (tmp_path / "MUTAG.zip").write_bytes(bytes(raw))
  with pytest.raises(tu.TUFormatError, match="MUTAG"):
    tu.read_tu_dataset("MUTAG", tmp_path)


def _members_of_real_zip(data_dir, name="MUTAG"):
  with zipfile.ZipFile(data_dir / f"{name}.zip") as z:
    return {pathlib.PurePosixPath(m).name: z.read(m) for m in z.namelist()
            if m.endswith(".txt") and pathlib.PurePosixPath(m).name.startswith(f"{name}_")}


@pytest.mark.parametrize("layout", ["NAME/", "NAME//", "", "TUDataset/NAME/", "./NAME/", "NAME/NAME/", "a/b/c/"])
@pytest.mark.parametrize("container", ["zip", "folder"])
def test_every_archive_layout_reads_like_the_official_zip(data_dir, tmp_path, layout, container):
  official = tu.read_tu_dataset("MUTAG", data_dir)
  members = _members_of_real_zip(data_dir)
  root = tmp_path / "data"
  root.mkdir()
  prefix = layout.replace("NAME", "MUTAG")
  if container == "zip":
    with zipfile.ZipFile(root / "MUTAG.zip", "w", zipfile.ZIP_DEFLATED) as z:
      z.writestr("__MACOSX/MUTAG/._MUTAG_A.txt", b"\x00\x05junk")  # Finder's resource forks are ignored.
      for base, content in members.items():
        z.writestr(prefix + base, content)
  else:
    rest = prefix[len("MUTAG/"):] if prefix.startswith("MUTAG/") else prefix  # Inside the folder MUTAG/.
    inner = root.joinpath("MUTAG", *[c for c in rest.split("/") if c])
    inner.mkdir(parents=True, exist_ok=True)
    for base, content in members.items():
      (inner / base).write_bytes(content)
  got = tu.read_tu_dataset("MUTAG", root)
  for field in ("node_offsets", "edges", "graph_labels", "node_labels"):
    np.testing.assert_array_equal(getattr(got, field), getattr(official, field))
  assert got.source.endswith("MUTAG.zip" if container == "zip" else "MUTAG")


def test_a_missing_member_lists_what_was_found(data_dir, tmp_path):
  members = _members_of_real_zip(data_dir)
  with zipfile.ZipFile(tmp_path / "MUTAG.zip", "w") as z:
    for base, content in members.items():
      if base != "MUTAG_graph_indicator.txt":
        z.writestr("MUTAG//" + base, content)
  with pytest.raises(tu.TUFormatError, match=r"required file MUTAG_graph_indicator.txt is missing \(found: "
                     r"MUTAG_A.txt, .*MUTAG_graph_labels.txt"):
    tu.read_tu_dataset("MUTAG", tmp_path)


def test_a_zip_without_the_dataset_says_what_it_holds(tmp_path):
  with zipfile.ZipFile(tmp_path / "TOY.zip", "w") as z:
    z.writestr("other/README.txt", b"hello")
  with pytest.raises(tu.TUFormatError, match=r"TOY.zip: no member named TOY_\*.txt \(it holds: other/README.txt\)"):
    tu.read_tu_dataset("TOY", tmp_path)


def test_folder_and_zip_both_present_reads_the_folder_and_says_so(tmp_path):
  folder = _small(tmp_path)
  with zipfile.ZipFile(tmp_path / "TOY.zip", "w") as z:
    z.writestr("TOY/TOY_A.txt", b"1, 2\n")
  assert tu.find_dataset("TOY", folder) == (str(folder / "TOY"), f"both {folder / 'TOY'}/ and {folder / 'TOY.zip'} "
                                            "exist; reading the folder")
  assert tu.read_tu_dataset("TOY", folder).num_graphs == 2


def test_a_name_differing_in_case_or_a_near_miss_is_named(tmp_path):
  _small(tmp_path)
  with pytest.raises(tu.TUFormatError, match=r"dataset 'toy' not found: looked for .*toy.zip and .*toy/; found "
                     r"'TOY', which differs only in case"):
    tu.read_tu_dataset("toy", tmp_path)
  with pytest.raises(tu.TUFormatError, match=r"dataset 'TOYS' not found.*similar names there: TOY\..*"
                     r"graphkerneldatasets/TOYS.zip"):
    tu.read_tu_dataset("TOYS", tmp_path)


@pytest.mark.parametrize("text, line", [
    ("1, 2\n2, 1\n1, 2, 3\n3\n", 3),   # 3 values next to 1: the total fits 2 columns, the lines do not.
    ("1, 2\n2\n1\n3, 2\n", 2),
])
def test_a_line_with_another_column_count_is_an_error_not_a_re_pairing(tmp_path, text, line):
  a = text + SMALL["A"].split("\n", 4)[-1]
  with pytest.raises(tu.TUFormatError, match=rf"TOY_A.txt line {line}: expected 2 value"):
    tu.read_tu_dataset("TOY", _small(tmp_path, A=a))
  with pytest.raises(tu.TUFormatError, match=r"TOY_node_attributes.txt line 3: expected 2 value"):
    tu.read_tu_dataset("TOY", _small(tmp_path / "b", node_attributes="0.5, 1\n1, 2\n2, 3, 3\n4\n4, 5\n5, 6\n6, 7\n"))


@pytest.mark.parametrize("name", sorted(OFFICIAL))
def test_real_datasets_match_official_statistics(data_dir, name):
  d = read_real(data_dir, name)
  graphs, classes, avg_nodes, avg_edges = OFFICIAL[name]
  stats = d.statistics()
  assert stats["graphs"] == graphs
  assert stats["classes"] == classes
  assert round(stats["avg_nodes"], 2) == pytest.approx(avg_nodes, abs=0.006)
  assert round(stats["avg_edges"], 2) == pytest.approx(avg_edges, abs=0.006)
  assert d.graph_labels.min() == 0 and d.graph_labels.max() == classes - 1
  # Simple undirected graph: u < v, unique, each inside one graph.
  assert np.all(d.edges[:, 0] < d.edges[:, 1])
  assert len(np.unique(d.edges, axis=0)) == len(d.edges)
  graph_of = np.repeat(np.arange(d.num_graphs), d.graph_sizes())
  np.testing.assert_array_equal(graph_of[d.edges[:, 0]], graph_of[d.edges[:, 1]])
