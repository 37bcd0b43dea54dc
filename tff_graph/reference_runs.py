"""Per-client comparison with the papers' own code, run on its own split (`results/reference_code.sh`).

With `--split=reference` every client has the same train/val/test graphs on both sides, so a per-client
difference is a difference of the training, not of the data. The papers' programs write, per seed, a
CSV indexed by client name with a `test_acc` column (`accuracy_<algorithm>_GC.csv`: FedStar's
`accuracy_fedstar_rw_dg_GC.csv`, GCFL's `accuracy_<alg>_GC.csv`) and `stats_trainData.csv` with each
client's `#graphs_test` beside it. `load_reference` finds them anywhere under `<folder>/seed<s>/raw/`
(FedStar's repo writes `raw/<group>/`, GCFL's `raw/multiDS-nonOverlap/<group>/eps_<e1>_<e2>/`);
`compare_clients` sets them beside a tff-graph run (`results.load_results`) on the seeds both have;
`to_markdown` prints the table.

Which of our numbers is the counterpart: the reference's FedStar, Self-train, FedAvg and FedProx report
the final round's accuracy (`accuracy="final"`); its GCFL, GCFL+ and GCFL+dWs report each client's best
cached snapshot (the cluster model cached before each split and at the end, the maximum taken per
client), which is our GCFL family's `best_snapshot_accuracy` (`accuracy="best_snapshot"`).

The model seeds are the same numbers on both sides but not the same initial weights (PyTorch vs
TensorFlow generators), so per client the spread over seeds on either side is the scale a difference
has to exceed to mean something.
"""

from __future__ import annotations

import csv
import dataclasses
import pathlib
import re
from typing import Mapping, Sequence

import numpy as np

from tff_graph import experiment


class ReferenceError(ValueError):  # pylint: disable=redefined-builtin
  """The reference output is missing, malformed, or does not match the run (one line, names the file)."""


@dataclasses.dataclass(frozen=True)
class ReferenceRuns:
  accuracy: Mapping[int, Mapping[str, float]]  # seed -> client name -> final test accuracy (0..1)
  test_graphs: Mapping[str, int]  # client name -> test graphs


def _read_csv(path: pathlib.Path) -> list[dict[str, str]]:
  try:
    with path.open(newline="") as f:
      rows = list(csv.reader(f))
  except OSError as e:
    raise ReferenceError(f"cannot read {path}: {e.strerror}") from None
  if len(rows) < 2:
    raise ReferenceError(f"{path} has no client rows")
  header = rows[0]
  return [dict(zip(["client"] + header[1:], r)) for r in rows[1:] if r]


def _number(path: pathlib.Path, row: Mapping[str, str], column: str) -> float:
  try:
    return float(row[column])
  except (KeyError, ValueError):
    raise ReferenceError(f"{path}: client {row.get('client')!r} has no numeric {column!r}") from None


def load_reference(folder: str | pathlib.Path, algorithm: str) -> ReferenceRuns:
  """Every finished seed under `folder` (`seed<s>/raw/<group>/accuracy_<algorithm>_GC.csv`)."""
  folder = pathlib.Path(folder)
  accuracy: dict[int, dict[str, float]] = {}
  test_graphs: dict[str, int] = {}
  for seed_dir in sorted(folder.glob("seed*")):
    m = re.fullmatch(r"seed(\d+)", seed_dir.name)
    if not m:
      continue
    found = sorted(seed_dir.glob(f"raw/**/accuracy_{algorithm}_GC.csv"))
    if not found:
      continue  # Not finished (the reference writes its CSV at the end).
    if len(found) > 1:
      raise ReferenceError(f"{seed_dir} holds several {algorithm} results: {[str(p) for p in found]}")
    path = found[0]
    accuracy[int(m.group(1))] = {r["client"]: _number(path, r, "test_acc") for r in _read_csv(path)}
    stats = path.parent / "stats_trainData.csv"
    counts = {r["client"]: int(_number(stats, r, "#graphs_test")) for r in _read_csv(stats)}
    if test_graphs and counts != test_graphs:
      raise ReferenceError(f"{stats}: other test sets than the other seeds' (the reference split is fixed)")
    test_graphs = counts
  if not accuracy:
    raise ReferenceError(f"no finished seed of {algorithm!r} under {folder} "
                         f"(seed<s>/raw/.../accuracy_{algorithm}_GC.csv)")
  for seed, acc in accuracy.items():
    if set(acc) != set(test_graphs):
      raise ReferenceError(f"seed {seed}: clients {sorted(acc)} differ from stats_trainData.csv's {sorted(test_graphs)}")
  return ReferenceRuns(accuracy, test_graphs)


class _Paired:
  """A row of paired numbers, `ours` and `theirs` (per common seed, %), and their mean difference."""
  ours: tuple[float, ...]
  theirs: tuple[float, ...]

  @property
  def diff(self) -> float:
    return float(np.mean(self.ours) - np.mean(self.theirs))


def _pm(values: Sequence[float]) -> str:
  return f"{np.mean(values):.2f} ± {np.std(values):.2f}"


@dataclasses.dataclass(frozen=True)
class ClientComparison(_Paired):
  client: str  # tff-graph's client id
  test_graphs: int
  ours: tuple[float, ...]  # per common seed, %
  theirs: tuple[float, ...]

  @property
  def diff_graphs(self) -> float:
    """The difference in test graphs (a difference of one graph is 100 / test_graphs points)."""
    return self.diff * self.test_graphs / 100


def _their_name(client_id: str, names: Sequence[str]) -> str:
  if client_id in names:
    return client_id
  bare = client_id.split("-", 1)[1] if re.match(r"\d+-", client_id) else client_id
  if bare in names:
    return bare
  raise ReferenceError(f"client {client_id} has no counterpart in the reference output ({', '.join(names)})")


ACCURACIES = ("final", "best_snapshot")


def _ours(seed: experiment.SeedResult, cid: str, accuracy: str) -> float:
  if accuracy == "final":
    return seed.final[cid]["test_accuracy"]
  return seed.gcfl["best_snapshot_accuracy"][cid]


def compare_clients(ours: experiment.ExperimentResult, theirs: ReferenceRuns, accuracy: str = "final"
                    ) -> tuple[tuple[int, ...], list[ClientComparison]]:
  """(the common seeds, one row per client in our client order); `accuracy`: which of ours (ACCURACIES)."""
  if accuracy not in ACCURACIES:
    raise ReferenceError(f"unknown accuracy {accuracy!r} (one of {', '.join(ACCURACIES)})")
  if accuracy == "best_snapshot" and not all(s.gcfl and "best_snapshot_accuracy" in s.gcfl for s in ours.seeds):
    raise ReferenceError(f"the {ours.config.algorithm} runs have no best-snapshot accuracy (GCFL-family runs only)")
  seeds = tuple(sorted({s.seed for s in ours.seeds} & set(theirs.accuracy)))
  if not seeds:
    raise ReferenceError(f"no seed is finished on both sides (ours {[s.seed for s in ours.seeds]}, "
                         f"reference {sorted(theirs.accuracy)})")
  by_seed = {s.seed: s for s in ours.seeds}
  names = list(theirs.test_graphs)
  clients = list(ours.seeds[0].final)
  matched = {cid: _their_name(cid, names) for cid in clients}
  if len(set(matched.values())) != len(matched) or len(matched) != len(names):
    raise ReferenceError(f"clients do not pair one to one: ours {clients}, reference {names}")
  rows = []
  for cid in clients:
    name = matched[cid]
    rows.append(ClientComparison(
        cid, theirs.test_graphs[name],
        tuple(100 * _ours(by_seed[s], cid, accuracy) for s in seeds),
        tuple(100 * theirs.accuracy[s][name] for s in seeds)))
  return seeds, rows


def to_markdown(seeds: Sequence[int], rows: Sequence[ClientComparison]) -> str:
  lines = [f"| client | test graphs | tff-graph (seeds {','.join(map(str, seeds))}) | papers' code | "
           "difference | in test graphs |", "|---|---|---|---|---|---|"]
  for r in rows:
    lines.append(f"| {r.client} | {r.test_graphs} | {_pm(r.ours)} | {_pm(r.theirs)} | {round(r.diff, 2) + 0.0:+.2f} | "
                 f"{round(r.diff_graphs, 1) + 0.0:+.1f} |")  # (+ 0.0: no "-0.00" for a rounding residue)
  ours = np.mean([np.mean(r.ours) for r in rows])
  theirs = np.mean([np.mean(r.theirs) for r in rows])
  lines.append(f"| average | | {ours:.2f} | {theirs:.2f} | {ours - theirs:+.2f} | |")
  return "\n".join(lines)


# Round by round: results/reference_curves.py traces the GCFL repo's Self-train, FedAvg and FedProx without changing
# their runs (each client's test accuracy every few rounds) into `<folder>/seed<s>/curves.csv`.
CURVES_FILE = "curves.csv"


def load_reference_curves(folder: str | pathlib.Path, algorithm: str) -> dict[int, dict[int, float]]:
  """seed -> round -> the clients' average test accuracy (0..1) of `algorithm`, from every traced seed."""
  folder = pathlib.Path(folder)
  curves: dict[int, dict[int, float]] = {}
  for seed_dir in sorted(folder.glob("seed*")):
    m = re.fullmatch(r"seed(\d+)", seed_dir.name)
    path = seed_dir / CURVES_FILE
    if not m or not path.is_file():
      continue
    per_round: dict[int, dict[str, float]] = {}
    with path.open(newline="") as f:
      for row in csv.DictReader(f):
        if row.get("algorithm") != algorithm:
          continue
        try:
          per_round.setdefault(int(row["round"]), {})[row["client"]] = float(row["test_acc"])
        except (KeyError, TypeError, ValueError):
          raise ReferenceError(f"{path}: a row without numeric round/test_acc or a client: {row}") from None
    if not per_round:
      continue
    clients = set(next(iter(per_round.values())))
    for rnd, accs in per_round.items():
      if set(accs) != clients:
        raise ReferenceError(f"{path}: round {rnd} has clients {sorted(accs)}, other rounds {sorted(clients)}")
    curves[int(m.group(1))] = {rnd: float(np.mean(list(accs.values()))) for rnd, accs in sorted(per_round.items())}
  if not curves:
    raise ReferenceError(f"no traced seed of {algorithm!r} under {folder} (seed<s>/{CURVES_FILE}, "
                         "results/reference_code.sh curves-<piece>)")
  return curves


@dataclasses.dataclass(frozen=True)
class RoundComparison(_Paired):
  round: int
  ours: tuple[float, ...]  # the clients' average test accuracy per common seed, %
  theirs: tuple[float, ...]

  @property
  def seeds_below(self) -> int:
    """On how many seeds ours is below theirs (paired by seed number, not by weights)."""
    return sum(o < t for o, t in zip(self.ours, self.theirs))


def compare_curves(ours: experiment.ExperimentResult, theirs: Mapping[int, Mapping[int, float]]
                   ) -> tuple[tuple[int, ...], list[RoundComparison]]:
  """(the common seeds, one row per round evaluated on both sides and on every common seed)."""
  by_seed = {s.seed: dict(s.curve) for s in ours.seeds}
  seeds = tuple(sorted(set(by_seed) & set(theirs)))
  if not seeds:
    raise ReferenceError(f"no seed is finished on both sides (ours {sorted(by_seed)}, traced {sorted(theirs)})")
  rounds = sorted(set.intersection(*(set(by_seed[s]) & set(theirs[s]) for s in seeds)))
  if not rounds:
    raise ReferenceError(f"no round is evaluated on both sides (ours every {sorted(by_seed[seeds[0]])[:2]}..., "
                         f"theirs {sorted(theirs[seeds[0]])[:2]}...)")
  return seeds, [RoundComparison(r, tuple(100 * by_seed[s][r] for s in seeds), tuple(100 * theirs[s][r] for s in seeds))
                 for r in rounds]


def curves_to_markdown(seeds: Sequence[int], rows: Sequence[RoundComparison]) -> str:
  lines = [f"| round | tff-graph (seeds {','.join(map(str, seeds))}) | papers' code | difference | "
           "seeds where ours is lower |", "|---|---|---|---|---|"]
  for r in rows:
    lines.append(f"| {r.round} | {_pm(r.ours)} | {_pm(r.theirs)} | {round(r.diff, 2) + 0.0:+.2f} | "
                 f"{r.seeds_below} of {len(seeds)} |")
  # One round's average moves by points between evaluations: the later half's mean per seed is the steadier figure.
  late = rows[len(rows) // 2:]
  ours = [np.mean([r.ours[i] for r in late]) for i in range(len(seeds))]
  theirs = [np.mean([r.theirs[i] for r in late]) for i in range(len(seeds))]
  below = sum(o < t for o, t in zip(ours, theirs))
  lines.append(f"| mean of rounds {late[0].round}-{late[-1].round} | {_pm(ours)} | {_pm(theirs)} | "
               f"{round(float(np.mean(ours) - np.mean(theirs)), 2) + 0.0:+.2f} | {below} of {len(seeds)} |")
  return "\n".join(lines)
