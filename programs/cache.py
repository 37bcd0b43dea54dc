r"""Lists the prepared-data cache and prunes what can no longer be used.

  python -m programs.cache --data_dir=../shared/data/TUDataset            # list entries, mark stale ones
  python -m programs.cache --data_dir=../shared/data/TUDataset --prune    # remove the stale ones

An entry is stale when it was written by another format version, was left by an interrupted write,
fails its checksums, or (with --data_dir) was made from a source whose content has changed since.
"""

from __future__ import annotations

import sys

from absl import app
from absl import flags

from programs import cli

from data_prep import cache
from data_prep import tu

_DATA_DIR = flags.DEFINE_string("data_dir", None, "TU data folder to check the entries' sources against "
                                "(default: $TFF_GRAPH_DATA; without either, sources are not checked).")
_CACHE_DIR = flags.DEFINE_string("cache_dir", None, f"Cache folder (default: ${cache.CACHE_DIR_ENV} or "
                                 "~/.cache/tff_graph).")
_PRUNE = flags.DEFINE_bool("prune", False, "Remove the stale entries.")


def main(argv: list[str]) -> int:
  if cli.stray_arguments(argv):
    return 2
  import os  # pylint: disable=g-import-not-at-top
  data_dir = _DATA_DIR.value or os.environ.get(tu.DEFAULT_DATA_DIR_ENV)
  try:
    entries = cache.cache_entries(_CACHE_DIR.value, data_dir)
  except tu.TUFormatError as e:
    print(f"error: {e}", file=sys.stderr)
    return 2
  for e in entries:
    print(f"{'STALE' if e.stale else 'ok   '}  {e.kind:8s} {e.bytes / 2**20:9.1f} MiB  {e.path}"
          + (f"  ({e.stale})" if e.stale else ""))
  stale = [e for e in entries if e.stale]
  total = sum(e.bytes for e in stale)
  if _PRUNE.value:
    freed = cache.prune(stale)
    print(f"removed {len(stale)} stale entries, {freed / 2**20:.1f} MiB")
  else:
    print(f"{len(entries)} entries, {len(stale)} stale ({total / 2**20:.1f} MiB; --prune removes them)")
  return 0


if __name__ == "__main__":
  app.run(main, flags_parser=cli.parse_flags)
