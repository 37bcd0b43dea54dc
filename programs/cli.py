"""What every program does with its command line before `main` (light: no TensorFlow import)."""

from __future__ import annotations

import sys

from absl import flags


def parse_flags(argv: list[str]) -> list[str]:
  """absl's flag parsing, but a bad flag value is one line on stderr and exit code 2 (a usage error),
  like every other mistake the programs refuse, instead of absl's exit 1 with help hints."""
  try:
    return flags.FLAGS(argv)
  except flags.Error as e:
    print(f"error: {e}", file=sys.stderr)
    sys.exit(2)


def stray_arguments(argv: list[str]) -> bool:
  """True (after one line on stderr) if the command line has positional arguments: no program takes any."""
  if len(argv) > 1:
    print(f"error: unexpected arguments {argv[1:]}", file=sys.stderr)
    return True
  return False
