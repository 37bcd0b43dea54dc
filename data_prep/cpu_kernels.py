"""Pins the CPU kernels TensorFlow and NumPy use, so that a run gives the same bits on every x86 machine with AVX2.

Two switches decide TensorFlow's CPU kernels, both by the CPU found at run time:

* TensorFlow 2.14 turns its oneDNN graph rewrites (`_MklMatMul` and friends) on by default only on CPUs
  with AVX512_VNNI, AVX512_BF16 or AMX, off elsewhere; a rewritten matmul sums in another order.
  `TF_ENABLE_ONEDNN_OPTS=0` turns them off everywhere. TensorFlow reads it when `import tensorflow`
  runs (a value set later is ignored).
* Even with the rewrites off, TensorFlow's Eigen matmuls call oneDNN's sgemm, whose JIT kernels follow
  the instruction set (`ONEDNN_MAX_CPU_ISA=AVX` changes the bits on an AVX2 machine). Capped at AVX2,
  every machine with AVX2 or more runs the same kernels. oneDNN reads the cap at its first kernel.

And one decides NumPy's and SciPy's: their OpenBLAS picks its kernels by CPU when it loads (at
`import numpy`), and `np.linalg.eigh` — behind the RWSE of small graphs and the Laplacian eigenvectors —
gives other last bits with the AVX-512 kernels than with the AVX2 ones. `OPENBLAS_CORETYPE=Haswell`
(x86-64 only) gives every machine the AVX2 kernels; `check_blas` warns where the process's NumPy loaded
before the pin with other kernels.

Measured (BUILD_NOTES, "Same bits on every machine"): with all three pinned, an AVX-512/VNNI machine
prints the state hashes of an AVX2-only machine; without them it does not.

This module imports nothing but the standard library, and `data_prep/__init__.py` calls `pin()` before
any module of this project imports TensorFlow (`tff_graph` imports `data_prep` first): `import tff_graph`
or `import data_prep` pins the process, a user's own values win. Workers get the same values in their
environment (`tff_graph.runtime.worker_environment`), so their bits do not depend on import order.
"""

from __future__ import annotations

import functools
import os
import platform
import sys
import warnings

CPU_ISA = "AVX2"
CPU_KERNELS = {"TF_ENABLE_ONEDNN_OPTS": "0", "ONEDNN_MAX_CPU_ISA": CPU_ISA}
_X86 = platform.machine().lower() in ("x86_64", "amd64")
if _X86:
  CPU_KERNELS["OPENBLAS_CORETYPE"] = "Haswell"
# OpenBLAS kernel families that compute as the pinned one (Zen runs OpenBLAS's Haswell kernels:
# OPENBLAS_CORETYPE=Zen gave FedStar's Haswell state hash, measured on an AVX-512 AMD EPYC).
_SAME_AS_PINNED = {"haswell", "zen"}
# The variables `pin()` set in this process's os.environ itself (not set by the user).
_SET_HERE: set[str] = set()


def pin(environ=None) -> dict[str, str]:
  """Sets each variable of `CPU_KERNELS` that `environ` (default: `os.environ`) lacks; returns the values
  in force. Warns if this process imported TensorFlow before its `TF_ENABLE_ONEDNN_OPTS` was set (its
  own TensorFlow work then runs TensorFlow's default kernels; its workers are pinned all the same)."""
  own = environ is None
  environ = os.environ if own else environ
  missing = [name for name in CPU_KERNELS if name not in environ]
  for name in missing:
    environ[name] = CPU_KERNELS[name]
  if own:
    _SET_HERE.update(missing)
  if own and "TF_ENABLE_ONEDNN_OPTS" in missing and "tensorflow" in sys.modules:
    warnings.warn(
        "tensorflow was imported before tff_graph pinned its CPU kernels (TF_ENABLE_ONEDNN_OPTS=0): this "
        "process's own TensorFlow work runs TensorFlow's default kernels and may give other bits on "
        "another machine (workers are pinned regardless); import tff_graph or data_prep before "
        "tensorflow, or set TF_ENABLE_ONEDNN_OPTS=0 before Python starts", RuntimeWarning, stacklevel=2)
  return {name: environ[name] for name in CPU_KERNELS}


def unpinned(environ=None) -> dict[str, str]:
  """`environ` (default os.environ) without the variables `pin()` set in os.environ itself (a user's own
  values stay): the environment to start another program in, e.g. the papers' PyTorch code beside
  ours, which should run with the CPU kernels it gets on its own."""
  return {k: v for k, v in (os.environ if environ is None else environ).items() if k not in _SET_HERE}


@functools.lru_cache(maxsize=None)  # Chosen once, when OpenBLAS loads.
def blas_core() -> str | None:
  """The kernel family NumPy's OpenBLAS runs in this process ("Haswell", "SkylakeX", ...), None if
  unknown (no OpenBLAS, or threadpoolctl cannot tell)."""
  try:
    import numpy  # noqa: F401  pylint: disable=g-import-not-at-top,unused-import
    import threadpoolctl  # pylint: disable=g-import-not-at-top
    for info in threadpoolctl.threadpool_info():
      if info.get("internal_api") == "openblas" and "numpy" in str(info.get("filepath", "")):
        return info.get("architecture")
  except Exception:  # noqa: BLE001  pylint: disable=broad-except
    return None
  return None


def blas_family() -> str:
  """A name for the bits NumPy's `eigh` gives in this process: "avx2" for OpenBLAS's Haswell kernels and
  those that compute as they do, else the kernel family's own name. Part of the data cache's keys, so
  that an embedding computed with other kernels (e.g. before the pins) is never reused as this one."""
  core = (blas_core() or "unknown").lower()
  return "avx2" if core in _SAME_AS_PINNED else core


def check_blas(what: str) -> None:
  """Warns if NumPy's OpenBLAS runs other kernels than the pinned ones while `what` is computed with it
  (NumPy was imported before `pin` and no OPENBLAS_CORETYPE was set), unless the user chose a core."""
  if not _X86 or os.environ.get("OPENBLAS_CORETYPE", "").lower() != CPU_KERNELS["OPENBLAS_CORETYPE"].lower():
    return
  core = blas_core()
  if core is not None and core.lower() not in _SAME_AS_PINNED:
    warnings.warn(
        f"{what}: NumPy's OpenBLAS runs its {core} kernels (numpy was imported before tff_graph pinned "
        "OPENBLAS_CORETYPE=Haswell), so the result may differ in its last bits from another machine's; "
        "import tff_graph or data_prep before numpy, or set OPENBLAS_CORETYPE=Haswell before Python starts",
        RuntimeWarning, stacklevel=3)
