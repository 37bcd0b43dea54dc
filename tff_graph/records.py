"""Run records: the few small files of finished seeds that tables and figures are made from.

A run folder (see `tff_graph.experiment`) holds large files (checkpoints, SavedModels, TensorBoard
events, worker-held client states) and small ones. The small ones of every *finished* seed are its
record: `config.json` of the run, and per finished seed `final.json` (which marks the seed as done),
`eval_metrics.csv` and `train_metrics.csv` (the curves and gradient norms the figures read), plus the
run's `per_client.csv`, `summary.csv` and `DONE` when present.

`archive` copies the records of a tree of run folders into a records tree with the same layout (for
committing: a machine that ends its session takes its run folders with it); `restore` copies them back
into an empty or partial run tree, never over an existing file, so that `programs.compare` /
`programs.train` load the finished seeds instead of training them again, and `programs.tables` /
`programs.figures` rebuild the same tables and figures. Unfinished seeds are never archived: their
metric CSVs without their checkpoints would describe a run that no longer exists.
"""

from __future__ import annotations

import dataclasses
import filecmp
import os
import pathlib
import shutil

# In copying order: a copy killed midway leaves a seed without final.json (unfinished, ignored) and a run
# without DONE, never a record that claims more than it holds.
SEED_FILES = ("eval_metrics.csv", "train_metrics.csv", "final.json")
RUN_FILES = ("config.json", "per_client.csv", "summary.csv", "DONE")


class RecordsError(ValueError):
  """A records or runs tree that cannot be archived or restored (named in the message)."""


@dataclasses.dataclass(frozen=True)
class Copied:
  copied: tuple[pathlib.Path, ...]  # Relative paths written.
  unchanged: int  # Files already there with the same content (archive) or already there (restore).


def _run_folders(root: pathlib.Path):
  for config in sorted(root.rglob("config.json")):
    yield config.parent


def record_files(run: pathlib.Path) -> list[pathlib.Path]:
  """The record files of one run folder (absolute); empty if no seed of it has finished."""
  seeds = sorted(p.parent for p in run.glob("seed_*/final.json") if p.is_file())
  if not seeds:
    return []
  files = [seed / f for seed in seeds for f in SEED_FILES if (seed / f).is_file()]
  return files + [run / f for f in RUN_FILES if (run / f).is_file()]


def _copy(src: pathlib.Path, dst: pathlib.Path) -> None:
  """Copies under a temporary name, then renames: a kill while copying leaves the old file (or none).
  The name is this process's own, so two jobs archiving into the same records at once (two pieces of
  reproduce.sh) never write or rename each other's half-copied file."""
  dst.parent.mkdir(parents=True, exist_ok=True)
  tmp = dst.with_name(f"{dst.name}.{os.getpid()}.tmp")
  shutil.copyfile(src, tmp)
  os.replace(tmp, dst)


def _check_tree(path: pathlib.Path, what: str) -> None:
  if path.exists() and not path.is_dir():
    raise RecordsError(f"{what} {path} is a file; a folder is needed")


def archive(runs: str | os.PathLike[str], records: str | os.PathLike[str]) -> Copied:
  """Copies the records of every run folder under `runs` to the same relative place under `records`."""
  runs, records = pathlib.Path(runs), pathlib.Path(records)
  if not runs.is_dir():
    raise RecordsError(f"runs folder {runs} does not exist")
  _check_tree(records, "records folder")
  if records.resolve().is_relative_to(runs.resolve()) or runs.resolve().is_relative_to(records.resolve()):
    raise RecordsError(f"records folder {records} and runs folder {runs} overlap; give two separate folders")
  copied, unchanged = [], 0
  for run in _run_folders(runs):
    for src in record_files(run):
      rel = src.relative_to(runs)
      dst = records / rel
      if dst.is_file() and filecmp.cmp(src, dst, shallow=False):
        unchanged += 1
        continue
      _copy(src, dst)
      copied.append(rel)
  return Copied(tuple(copied), unchanged)


def restore(records: str | os.PathLike[str], runs: str | os.PathLike[str]) -> Copied:
  """Copies records back into `runs` where they are missing.

  A seed finished under `runs` (its `final.json` there) is left as it is; a seed unfinished there gets the
  archived seed's files whole (the finished record replaces the partial metric CSVs, and the seed then
  loads as done). Run-level files are copied only where missing. A run folder under `runs` with another
  `config.json` is refused (RecordsError): its seeds were run with another configuration, and mixing the
  two would mislabel results.
  """
  records, runs = pathlib.Path(records), pathlib.Path(runs)
  if not records.is_dir():
    return Copied((), 0)  # Nothing archived yet.
  _check_tree(runs, "runs folder")
  plan = []
  for run in _run_folders(records):
    target = runs / run.relative_to(records)
    if (target / "config.json").is_file() and not filecmp.cmp(run / "config.json", target / "config.json",
                                                              shallow=False):
      raise RecordsError(f"{target}/config.json differs from the archived {run}/config.json; move one of them "
                         "away before restoring")
    for src in record_files(run):
      dst = runs / src.relative_to(records)
      if src.parent == run:  # Run-level file.
        plan.append((src, dst, not dst.exists()))
      else:
        plan.append((src, dst, not (dst.parent / "final.json").is_file()))
  copied, present = [], 0
  for src, dst, needed in plan:
    if not needed:
      present += 1
      continue
    _copy(src, dst)
    copied.append(src.relative_to(records))
  return Copied(tuple(copied), present)
