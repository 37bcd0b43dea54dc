r"""Sets each client's final test accuracy beside the papers' own code's on the same split and seeds.

  # FedStar on CHEM: our reference-split runs vs the FedStar repo's (results/reference_code.sh)
  python -m programs.reference_clients --runs=runs/results-reference/chem/seed1/fedstar,... \
      --reference=runs/reference-code/fedstar-chem --reference_algorithm=fedstar_rw_dg \
      --output=results/reference-split/chem/vs_papers_code_fedstar.md
  # GCFL on molecules: the GCFL repo reports each client's best snapshot, so compare ours with that
  python -m programs.reference_clients --runs=runs/results-reference/molecules/seed10/gcfl/gcfl,... \
      --reference=runs/reference-code/gcfl-molecules --reference_algorithm=gcfl --our_accuracy=best_snapshot
  # FedAvg on PROTEINS:10 round by round (the GCFL repo's run traced: results/reference_code.sh
  # curves-gcfl-proteins writes seed<s>/curves.csv beside its records)
  python -m programs.reference_clients --runs=runs/results-reference/gcfl-proteins/seed10/baselines/fedavg,... \
      --reference=results/reference-split/records/reference-code/gcfl-proteins --reference_algorithm=fedavg --by_round

`--runs` must be runs of one algorithm and configuration (merged over seeds as `programs.tables` does);
only the seeds finished on both sides are compared (`tff_graph.reference_runs`). Prints the table and,
with `--output`, writes it (through a temporary file). Bad input: one line on stderr, exit code 2.
"""

from __future__ import annotations

import os
import pathlib
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

from absl import app  # noqa: E402
from absl import flags  # noqa: E402

from programs import cli  # noqa: E402
from tff_graph import reference_runs  # noqa: E402
from tff_graph import results  # noqa: E402

_RUNS = flags.DEFINE_list("runs", None, "Run folders (or comparison folders) of one algorithm.", required=True)
_REFERENCE = flags.DEFINE_string("reference", None, "The papers' code output: a folder of seed<s>/ folders "
                                 "(results/reference_code.sh's <piece> folder).", required=True)
_ALGORITHM = flags.DEFINE_string("reference_algorithm", None, "The name in the reference's "
                                 "accuracy_<name>_GC.csv (fedstar_rw_dg, fedavg, gcfl, ...).", required=True)
_OUR_ACCURACY = flags.DEFINE_enum("our_accuracy", "final", list(reference_runs.ACCURACIES),
                                  "Which of our accuracies is the reference's number: final (FedStar, "
                                  "Self-train, FedAvg, FedProx) or best_snapshot (the GCFL repo's GCFL, GCFL+, "
                                  "GCFL+dWs report each client's best cached cluster model).")
_BY_ROUND = flags.DEFINE_bool("by_round", False, "Compare the clients' average test accuracy round by round "
                               "instead of each client's final one: the reference's seed<s>/curves.csv, traced "
                               "by results/reference_code.sh curves-<piece> (its selftrain, fedavg, fedprox).")
_OUTPUT = flags.DEFINE_string("output", None, "Markdown file to write the table to.")


def main(argv: list[str]) -> int:
  if cli.stray_arguments(argv):
    return 2
  try:
    loaded = results.load_results(_RUNS.value)
    if len(loaded) != 1:
      raise results.ResultsError(f"--runs holds {len(loaded)} algorithms/configurations "
                                 f"({', '.join(results.row_label(r.config) for r in loaded)}); pass one")
    split = results.split_of(loaded)
    if split != "reference":
      raise results.ResultsError(f"the runs use the {split} split: only --split=reference runs have the "
                                 "papers' code's test graphs")
    if _BY_ROUND.value:
      if _OUR_ACCURACY.value != "final":
        raise results.ResultsError("--by_round compares the running model round by round: it takes no "
                                   "--our_accuracy=best_snapshot")
      seeds, rounds = reference_runs.compare_curves(
          loaded[0], reference_runs.load_reference_curves(_REFERENCE.value, _ALGORITHM.value))
    else:
      theirs = reference_runs.load_reference(_REFERENCE.value, _ALGORITHM.value)
      seeds, rows = reference_runs.compare_clients(loaded[0], theirs, _OUR_ACCURACY.value)
  except (results.ResultsError, reference_runs.ReferenceError) as e:
    print(f"error: {e}", file=sys.stderr)
    return 2
  if _BY_ROUND.value:
    what, source, table = ("the clients' average test accuracy (%) by round", f"{_ALGORITHM.value}, traced",
                           reference_runs.curves_to_markdown(seeds, rounds))
  else:
    which = "final-round" if _OUR_ACCURACY.value == "final" else "best-snapshot"
    what, source, table = (f"{which} test accuracy (%) per client", _ALGORITHM.value,
                           reference_runs.to_markdown(seeds, rows))
  text = (f"{results.row_label(loaded[0].config)} on {loaded[0].config.setting}, {what}, mean ± std over seeds "
          f"{','.join(map(str, seeds))}; papers' code: {_REFERENCE.value} ({source})\n\n" + table)
  if _OUTPUT.value:
    out = pathlib.Path(_OUTPUT.value)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.tmp")
    tmp.write_text(text + "\n")
    os.replace(tmp, out)
  print(text)
  return 0


if __name__ == "__main__":
  app.run(main, flags_parser=cli.parse_flags)
