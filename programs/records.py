r"""Archives the records of finished seeds (to commit them) or restores them into a run tree.

A machine's run folders go with its session; the records (config.json, each finished seed's final.json
and metric CSVs: `tff_graph.records`) are small enough to commit, and enough to rebuild every table and
figure and to let a resumed `results/reproduce.sh` skip the seeds they hold.

  python -m programs.records --archive --runs=runs/results-reference --records=results/reference-split/records
  python -m programs.records --restore --records=results/reference-split/records --runs=runs/results-reference

Prints how many files it copied; bad folders or flags: one line on stderr, exit code 2.
"""

from __future__ import annotations

import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")  # tff_graph's package imports TensorFlow.

from absl import app  # noqa: E402
from absl import flags  # noqa: E402

from programs import cli  # noqa: E402
from tff_graph import records  # noqa: E402

_ARCHIVE = flags.DEFINE_bool("archive", False, "Copy the records of finished seeds from --runs to --records.")
_RESTORE = flags.DEFINE_bool("restore", False, "Copy archived records from --records into --runs where missing.")
_RUNS = flags.DEFINE_string("runs", None, "The tree of run folders.", required=True)
_RECORDS = flags.DEFINE_string("records", None, "The records tree (same layout as --runs).", required=True)


def main(argv: list[str]) -> int:
  if cli.stray_arguments(argv):
    return 2
  if _ARCHIVE.value == _RESTORE.value:
    print("error: give exactly one of --archive and --restore", file=sys.stderr)
    return 2
  try:
    if _ARCHIVE.value:
      done = records.archive(_RUNS.value, _RECORDS.value)
      print(f"archived {len(done.copied)} files ({done.unchanged} unchanged) to {_RECORDS.value}")
    else:
      done = records.restore(_RECORDS.value, _RUNS.value)
      print(f"restored {len(done.copied)} files ({done.unchanged} already there) into {_RUNS.value}")
  except (records.RecordsError, OSError) as e:
    print(f"error: {e}", file=sys.stderr)
    return 2
  return 0


if __name__ == "__main__":
  app.run(main, flags_parser=cli.parse_flags)
