r"""Draws the papers' figures from finished run folders (`tff_graph.figures`).

  # FedStar Fig. 3: average test accuracy per round, mean ± std over seeds, per algorithm
  python -m programs.figures --kind=convergence --runs=runs/results-reference/chem/seed1,... \
      --output=results/reference-split/figures/chem_convergence.png
  # GCFL Fig. 4 (test loss): --kind=convergence --metric=average/test_loss
  # GCFL Fig. 1: per-client gradient-norm sequences of one GCFL run, split rounds marked
  python -m programs.figures --kind=gradient_norms --runs=runs/.../gcfl/seed_10 --output=...png
  # GCFL Appendix D: per-client accuracy distribution per algorithm
  python -m programs.figures --kind=violin --runs=... --output=...png
  # FedStar's scaling figure: average final test accuracy against the number of clients (CHEM@k runs)
  python -m programs.figures --kind=scaling --runs=runs/.../scaling/seed1/chem@1,... --output=...png

Prints what it drew (per algorithm: seeds and the last value; or the split rounds) and writes the PNG
through a temporary file (never half a file); bad runs or flags: one line on stderr, exit code 2.
"""

from __future__ import annotations

import os
import pathlib
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

from absl import app  # noqa: E402
from absl import flags  # noqa: E402

from programs import cli  # noqa: E402
from tff_graph import figures  # noqa: E402

_KIND = flags.DEFINE_enum("kind", None, ["convergence", "gradient_norms", "violin", "scaling"], "Which figure.", required=True)
_RUNS = flags.DEFINE_list("runs", None, "Run folders or comparison folders (gradient_norms: one seed_<s> folder "
                          "of a GCFL-family run).", required=True)
_OUTPUT = flags.DEFINE_string("output", None, "The PNG to write.", required=True)
_METRIC = flags.DEFINE_string("metric", None, "convergence: a column of eval_metrics.csv (default "
                              "average/test_accuracy); gradient_norms: a per-client train metric (default "
                              "last_grad_norm; update_norm for GCFL+dWs).")
_TITLE = flags.DEFINE_string("title", None, "Figure title.")


def main(argv: list[str]) -> int:
  if cli.stray_arguments(argv):
    return 2
  out = pathlib.Path(_OUTPUT.value)
  if out.suffix != ".png":
    print(f"error: --output must be a .png file, got {out}", file=sys.stderr)
    return 2
  out.parent.mkdir(parents=True, exist_ok=True)
  tmp = out.with_name(f".{out.stem}.tmp.png")
  try:
    if _KIND.value == "convergence":
      series = figures.convergence(_RUNS.value, tmp, metric=_METRIC.value or "average/test_accuracy",
                                   title=_TITLE.value)
      for label, s in series.items():
        print(f"{label}: seeds {','.join(map(str, s['seeds']))}, round {s['round'][-1]}: "
              f"{s['mean'][-1]:.4f} ± {s['std'][-1]:.4f}")
    elif _KIND.value == "gradient_norms":
      if len(_RUNS.value) != 1:
        raise figures.FigureError("gradient_norms draws one run: pass one seed_<s> folder")
      drawn = figures.gradient_norms(_RUNS.value[0], tmp, metric=_METRIC.value or "last_grad_norm",
                                     title=_TITLE.value)
      print(f"{len(drawn['norms'])} clients, {len(drawn['round'])} rounds, splits at rounds "
            f"{[r for r, _ in drawn['splits']] or 'none'}")
    elif _KIND.value == "scaling":
      for label, s in figures.scaling(_RUNS.value, tmp, title=_TITLE.value).items():
        print(f"{label}: " + ", ".join(f"{n} clients {m:.2f} ± {d:.2f} ({k} seeds)" for n, m, d, k in
                                        zip(s["clients"], s["mean"], s["std"], s["seeds"])))
    else:
      data = figures.violins(_RUNS.value, tmp, title=_TITLE.value)
      for label, v in data.items():
        print(f"{label}: {len(v)} clients, median {float(sorted(v)[len(v) // 2]):.2f}")
  except (figures.FigureError, OSError, ValueError, KeyError) as e:
    tmp.unlink(missing_ok=True)
    print(f"error: {e}", file=sys.stderr)
    return 2
  os.replace(tmp, out)
  return 0


if __name__ == "__main__":
  app.run(main, flags_parser=cli.parse_flags)
