"""Per dataset: seconds to parse, to compute the structure embeddings and to write TFRecords, and peak
memory. Each dataset runs in a fresh subprocess so its peak memory is its own.

  .venv/bin/python -m benchmarks.data_prep --data_dir=../shared/data/TUDataset [NAME ...]

Per setting (`--settings chem biochem ...`): the one-off `cache.prepare_setting` a run starts with, from
the raw zips into an empty cache (parse, embed, split, write every client's TFRecords), and its peak.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")


def _one(name: str, data_dir: str) -> dict:
  from benchmarks import common  # pylint: disable=g-import-not-at-top
  from data_prep import features, graph_tensor, structure, tu  # pylint: disable=g-import-not-at-top
  from data_prep.cache import PreparedDataset  # pylint: disable=g-import-not-at-top
  t0 = time.perf_counter()
  data = tu.read_tu_dataset(name, data_dir)
  t1 = time.perf_counter()
  rw = structure.rwse(data)
  dg = structure.dse(data)
  t2 = time.perf_counter()
  x, kind = features.node_features(data)
  prepared = PreparedDataset(data=data, features=x, feature_kind=kind, rwse=rw, dse=dg)
  with tempfile.TemporaryDirectory() as tmp:
    n = graph_tensor.write_tfrecord(os.path.join(tmp, "all.tfrecord"),
                                    (prepared.encode(g) for g in range(data.num_graphs)))
    size = os.path.getsize(os.path.join(tmp, "all.tfrecord"))
  t3 = time.perf_counter()
  return {"dataset": name, "graphs": n, "parse_s": t1 - t0, "embed_s": t2 - t1, "write_s": t3 - t2,
          "tfrecord_mib": size / 2**20, "peak_gib": common.peak_rss_gib()}


def _setting(setting: str, data_dir: str) -> dict:
  from benchmarks import common  # pylint: disable=g-import-not-at-top
  from data_prep import cache  # pylint: disable=g-import-not-at-top
  with tempfile.TemporaryDirectory() as tmp:
    t = time.perf_counter()
    prepared = cache.prepare_setting(setting, data_dir=data_dir, cache_dir=tmp)
    seconds = time.perf_counter() - t
    size = sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(tmp) for f in fs)
  return {"setting": setting, "clients": len(prepared.clients),
          "graphs": sum(sum(c.sizes.values()) for c in prepared.clients), "seconds": seconds,
          "cache_mib": size / 2**20, "peak_gib": common.peak_rss_gib()}


def _in_subprocess(data_dir: str, *flags: str) -> dict:
  """One measurement in a fresh process (its peak memory is its own); returns its JSON line."""
  out = subprocess.run([sys.executable, "-m", "benchmarks.data_prep", "--data_dir", data_dir, *flags],
                       capture_output=True, text=True, check=True)
  return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
  from benchmarks import common  # pylint: disable=g-import-not-at-top
  from data_prep import partition  # pylint: disable=g-import-not-at-top
  parser = argparse.ArgumentParser(description=__doc__)
  parser.add_argument("--data_dir", default=os.environ.get("TFF_GRAPH_DATA", "../shared/data/TUDataset"))
  parser.add_argument("--one", help=argparse.SUPPRESS)
  parser.add_argument("--one_setting", help=argparse.SUPPRESS)
  parser.add_argument("--settings", nargs="+", help="Measure whole settings instead of datasets.")
  parser.add_argument("names", nargs="*", default=list(partition.ALL_DATASETS))
  args = parser.parse_args()
  if args.one:
    print(json.dumps(_one(args.one, args.data_dir)))
    return
  if args.one_setting:
    print(json.dumps(_setting(args.one_setting, args.data_dir)))
    return
  print(common.machine())
  if args.settings:
    print(f"{'setting':12s} {'clients':>7s} {'graphs':>7s} {'seconds':>8s} {'cache MiB':>9s} {'peak GiB':>8s}")
    for setting in args.settings:
      r = _in_subprocess(args.data_dir, "--one_setting", setting)
      print(f"{r['setting']:12s} {r['clients']:7d} {r['graphs']:7d} {r['seconds']:8.1f} {r['cache_mib']:9.1f} "
            f"{r['peak_gib']:8.2f}", flush=True)
    return
  print(f"{'dataset':12s} {'graphs':>6s} {'parse s':>8s} {'embed s':>8s} {'write s':>8s} "
        f"{'MiB':>7s} {'peak GiB':>8s}")
  for name in args.names:
    r = _in_subprocess(args.data_dir, "--one", name)
    print(f"{r['dataset']:12s} {r['graphs']:6d} {r['parse_s']:8.2f} {r['embed_s']:8.2f} "
          f"{r['write_s']:8.2f} {r['tfrecord_mib']:7.1f} {r['peak_gib']:8.2f}", flush=True)


if __name__ == "__main__":
  main()
