r"""tff-graph beside the papers' own PyTorch code, side by side: the same job, alternating, one machine.

    .venv/bin/python -m benchmarks.vs_reference --jobs fedstar_chem gcfl_molecules --pairs 3 --rounds 30

For each job it runs tff-graph's command and the reference's command in turn — one unmeasured warm-up
pair, then A B A B ... (`--pairs` times) — and prints per system the median whole-process wall time,
CPU time (the process and everything it started, TFF's worker included) and peak memory (the sum of
the resident sets of the whole process tree, sampled every 0.2 s), then the ratio ours / theirs pair
by pair and its median. Both systems run with the evaluation schedule each gives a user by default
(every round: both keep the per-round accuracy curve) and the same model seed; the splits are the
same graphs (tff-graph's default split is the reference's). The machine line comes first: compare
only figures printed by one run of this script.

Jobs:
  fedstar_chem       FedStar, CHEM, `--rounds` rounds            (FedStar repo, exps/main_multiDS.py)
  gcfl_molecules     Self-train, FedAvg, FedProx, GCFL, GCFL+, GCFL+dWs on molecules, `--rounds` rounds
                     (GCFL repo, main_multiDS.py: all six in one process; tff-graph: programs.compare)
  fedstar_biochemsn  FedStar, BIO-CHEM-SN, `--rounds_sn` rounds

Needs the reference set up (`bash ../shared/reference/setup.sh`; `$REFRUN`, default
~/.cache/tff_graph_reference). Data: `--data_dir` (tff-graph) and `$REFRUN/data` (the reference, same zips).
"""

from __future__ import annotations

import argparse
import os
import pathlib
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time

import psutil

from benchmarks import common
from data_prep import cpu_kernels

REPO = pathlib.Path(__file__).resolve().parents[1]
REFRUN = pathlib.Path(os.environ.get("REFRUN", "~/.cache/tff_graph_reference")).expanduser()


def _ours(job: str, out: pathlib.Path, args) -> tuple[list[str], pathlib.Path]:
  base = [sys.executable, "-m"]
  common_flags = ["--seeds=1", f"--data_dir={args.data_dir}", f"--cache_dir={args.cache_dir}", f"--output_dir={out}"]
  if job == "fedstar_chem":
    return base + ["programs.train", "--algorithm=fedstar", "--setting=chem", f"--rounds={args.rounds}",
                   *common_flags], REPO
  if job == "fedstar_biochemsn":
    return base + ["programs.train", "--algorithm=fedstar", "--setting=biochemsn", f"--rounds={args.rounds_sn}",
                   *common_flags], REPO
  if job == "gcfl_molecules":
    return base + ["programs.compare", "--algorithms=local,fedavg,fedprox,gcfl,gcfl_plus,gcfl_plus_dws",
                   "--setting=molecules", f"--rounds={args.rounds}", f"--parallel={args.parallel}", *common_flags], REPO
  raise ValueError(job)


def _theirs(job: str, out: pathlib.Path, args) -> tuple[list[str], pathlib.Path]:
  py = str(REFRUN / "venv" / "bin" / "python")
  data = str(REFRUN / "data")
  if job in ("fedstar_chem", "fedstar_biochemsn"):
    group, rounds = ("chem", args.rounds) if job == "fedstar_chem" else ("biochemsn", args.rounds_sn)
    return [py, "exps/main_multiDS.py", "--repeat", "1", "--data_group", group, "--seed", "1", "--alg", "fedstar",
            "--type_init", "rw_dg", "--num_rounds", str(rounds), "--datapath", data, "--outbase", str(out)], \
        REFRUN / "fedstar"
  if job == "gcfl_molecules":
    return [py, "main_multiDS.py", "--repeat", "1", "--data_group", "molecules", "--seed", "1", "--epsilon1", "0.07",
            "--epsilon2", "0.28", "--seq_length", "5", "--num_rounds", str(args.rounds), "--datapath", data,
            "--outbase", str(out)], REFRUN / "gcfl"
  raise ValueError(job)


def _tree_sample(proc: psutil.Process, cpu_seen: dict[int, float]) -> int:
  """The tree's total RSS now; records each process's CPU seconds so far in `cpu_seen`."""
  total = 0
  for p in [proc, *proc.children(recursive=True)]:
    try:
      with p.oneshot():
        total += p.memory_info().rss
        t = p.cpu_times()
        cpu_seen[p.pid] = t.user + t.system
    except psutil.Error:
      pass
  return total


def measure(cmd: list[str], cwd: pathlib.Path, env: dict[str, str]) -> dict[str, float]:
  """Wall s, CPU s (the process and all its descendants: the larger of the reaped children's rusage
  and the per-process samples, which also see a worker reaped by someone else), peak tree RSS MiB."""
  before = os.times()
  start = time.perf_counter()
  proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                          start_new_session=True)
  peak = [0]
  cpu_seen: dict[int, float] = {}
  watched = psutil.Process(proc.pid)

  def sample():
    while proc.poll() is None:
      try:
        peak[0] = max(peak[0], _tree_sample(watched, cpu_seen))
      except psutil.Error:
        pass
      time.sleep(0.2)

  sampler = threading.Thread(target=sample, daemon=True)
  sampler.start()
  _, err = proc.communicate()
  wall = time.perf_counter() - start
  sampler.join()
  after = os.times()
  if proc.returncode != 0:
    raise RuntimeError(f"{' '.join(cmd[:4])} ... failed ({proc.returncode}):\n{err[-2000:]}")
  reaped = (after.children_user - before.children_user) + (after.children_system - before.children_system)
  cpu = max(reaped, sum(cpu_seen.values()))
  return {"wall": wall, "cpu": cpu, "peak_mib": peak[0] / 2**20}


def main() -> int:
  p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
  p.add_argument("--jobs", nargs="+", default=["fedstar_chem", "gcfl_molecules"],
                 choices=["fedstar_chem", "gcfl_molecules", "fedstar_biochemsn"])
  p.add_argument("--pairs", type=int, default=3, help="Measured A/B pairs per job (after one warm-up pair).")
  p.add_argument("--rounds", type=int, default=30)
  p.add_argument("--rounds_sn", type=int, default=3)
  p.add_argument("--warmup_rounds", type=int, default=None,
                 help="Rounds of the warm-up pair (default: --rounds / --rounds_sn). It only warms the caches "
                      "(data, PyG's processed/, the page cache) and is not measured, so a few rounds suffice.")
  p.add_argument("--data_dir", default=os.environ.get("TFF_GRAPH_DATA", str(REPO.parent / "shared/data/TUDataset")))
  p.add_argument("--cache_dir", default=None, help="tff-graph's prepared-data cache (default: a warm one in /tmp).")
  p.add_argument("--parallel", type=int, default=1,
                 help="gcfl_molecules: tff-graph's programs.compare --parallel (algorithms run at once, each its own "
                      "process and worker; the reference runs its six one after another on all cores).")
  p.add_argument("--threads", type=int, default=None, help="OMP/TF intra-op threads for both (default: theirs).")
  args = p.parse_args()
  if not (REFRUN / "venv" / "bin" / "python").exists():
    print(f"error: the reference is not set up at {REFRUN} (bash ../shared/reference/setup.sh)", file=sys.stderr)
    return 2
  if (args.pairs < 1 or args.rounds < 1 or args.rounds_sn < 1 or args.parallel < 1
      or (args.warmup_rounds is not None and args.warmup_rounds < 1)):
    print("error: --pairs, --rounds, --rounds_sn, --parallel and --warmup_rounds must be >= 1", file=sys.stderr)
    return 2
  args.cache_dir = args.cache_dir or str(pathlib.Path(tempfile.gettempdir()) / "tff_graph_vs_reference_cache")
  env = {**os.environ, "PYTHONPATH": str(REPO), "REFRUN_SELFTRAIN_EPOCHS": os.environ.get("REFRUN_SELFTRAIN_EPOCHS", "")}
  if not env["REFRUN_SELFTRAIN_EPOCHS"]:
    env.pop("REFRUN_SELFTRAIN_EPOCHS")
  if args.threads:
    env.update(OMP_NUM_THREADS=str(args.threads), TF_NUM_INTRAOP_THREADS=str(args.threads))
  print(common.machine())
  print(f"the papers' code runs without tff-graph's kernel pins: "
        f"{' '.join(sorted(set(env) - set(cpu_kernels.unpinned(env)))) or '(none were set by tff-graph)'} unset for it")
  print(f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; rounds {args.rounds} (SN {args.rounds_sn}); "
        f"{args.pairs} pairs after 1 warm-up pair ({args.warmup_rounds or 'same'} rounds); "
        f"ours: compare --parallel={args.parallel}; load average {os.getloadavg()[0]:.2f}")
  for job in args.jobs:
    runs = {"ours": [], "theirs": []}
    for i in range(args.pairs + 1):
      for system, make in (("ours", _ours), ("theirs", _theirs)):
        out = pathlib.Path(tempfile.mkdtemp(prefix=f"vsref-{system}-"))
        try:
          run_args = args
          if i == 0 and args.warmup_rounds:
            run_args = argparse.Namespace(**{**vars(args), "rounds": args.warmup_rounds, "rounds_sn": args.warmup_rounds})
          cmd, cwd = make(job, out / "run", run_args)
          # The papers' code runs with the CPU kernels it would get on its own, not with our pins.
          m = measure(cmd, cwd, env if system == "ours" else cpu_kernels.unpinned(env))
        finally:
          shutil.rmtree(out, ignore_errors=True)
        if i > 0:  # Pair 0 warms caches (data, PyG's processed/, the page cache) for both.
          runs[system].append(m)
    print(f"\n{job}")
    print("| system | wall s (median) | CPU s | peak MiB (process tree) |\n|---|---|---|---|")
    for system in ("ours", "theirs"):
      r = runs[system]
      print(f"| {system} | {statistics.median(x['wall'] for x in r):.1f} | "
            f"{statistics.median(x['cpu'] for x in r):.1f} | {statistics.median(x['peak_mib'] for x in r):.0f} |")
    ratios = [a["wall"] / b["wall"] for a, b in zip(runs["ours"], runs["theirs"])]
    print(f"wall ours/theirs per pair: {', '.join(f'{x:.2f}' for x in ratios)}; median {statistics.median(ratios):.2f}")
    for key, label in (("cpu", "CPU"), ("peak_mib", "peak memory")):
      r = [a[key] / b[key] for a, b in zip(runs["ours"], runs["theirs"])]
      print(f"{label} ours/theirs per pair: {', '.join(f'{x:.2f}' for x in r)}; median {statistics.median(r):.2f}")
    print(f"load average after the job: {os.getloadavg()[0]:.2f}", flush=True)
  return 0


if __name__ == "__main__":
  sys.exit(main())
