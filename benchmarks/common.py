"""Helpers shared by the benchmarks: machine description, peak memory, one measurement per subprocess."""

from __future__ import annotations

import json
import os
import platform
import resource
import subprocess


def machine() -> str:
  cpu = "unknown cpu"
  try:
    with open("/proc/cpuinfo") as f:
      cpu = next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
  except (OSError, StopIteration):
    pass
  mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
  return (f"{platform.node()}: {os.cpu_count()} cores, {cpu}, {mem:.1f} GiB, Python {platform.python_version()}, "
          f"{instruction_sets()}")


def instruction_sets() -> str:
  """The CPU's vector instruction sets, the kernel pins in force (data_prep.cpu_kernels) and the kernels
  NumPy's OpenBLAS runs: the facts that decide whether two machines compute the same bits."""
  from data_prep import cpu_kernels  # pylint: disable=g-import-not-at-top
  flags: set[str] = set()
  try:
    with open("/proc/cpuinfo") as f:
      flags = set(next(line.split(":", 1)[1].split() for line in f if line.startswith("flags")))
  except (OSError, StopIteration):
    pass
  have = [x for x in ("avx", "avx2", "fma", "avx512f", "avx512_vnni", "amx_tile") if x in flags]
  pins = " ".join(f"{k}={os.environ.get(k, '(unset)')}" for k in cpu_kernels.CPU_KERNELS)
  return f"cpu {'/'.join(have) or 'unknown'}, {pins}, OpenBLAS {cpu_kernels.blas_core() or 'unknown'}"


def peak_rss_gib() -> float:
  """Peak resident memory of this process so far (Linux ru_maxrss is in KiB)."""
  return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20


def run_json(cmd: list[str]) -> dict:
  """Runs `cmd` (a benchmark's `--one` mode) in a fresh process; its last stdout line as JSON."""
  out = subprocess.run(cmd, capture_output=True, text=True, check=False)
  if out.returncode != 0:
    raise RuntimeError(f"{' '.join(cmd)} failed:\n{out.stderr[-3000:]}")
  return json.loads(out.stdout.strip().splitlines()[-1])
