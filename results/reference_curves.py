"""Round-by-round test accuracy of the GCFL repo's own Self-train, FedAvg and FedProx, without changing its run.

Runs the GCFL repo's main_oneDS.py (or main_multiDS.py) unmodified, with the given flags, after wrapping two
of its functions from outside:
  - Client_GC.download_from_server: the GCFL repo's run_fedavg / run_fedprox call it once per client before
    round 1 and once per client after every round's aggregation, so its k-th call for a client is "after
    round k". Every --every-th round the wrapper evaluates the client on its test set with the repo's own
    eval_gc, saving and restoring torch's global generator around it (a DataLoader iterator draws its base
    seed from that generator), so the run's random stream, and hence its final numbers, are unchanged.
  - training.run_selftrain_GC: its Self-train is one call of local_train(50 epochs) per client, whose
    train_stats already hold the test accuracy after every epoch (train_gc evaluates it): read back after
    the call, nothing added to the run ("round" = epoch there).
  - training.run_gcfl: raises to stop the program once FedProx has finished (the GCFL family is not traced).
The repo still writes its own CSVs under --outbase; compare them with the recorded seed to confirm the trace
did not change the run (results/reference_code.sh does).

    <reference venv python> results/reference_curves.py --program main_oneDS.py --trace out.csv --every 10 \
        -- <the program's flags>     (run from the GCFL repo's folder)

Output: CSV with columns algorithm (selftrain, fedavg, fedprox), round, client, test_loss, test_acc.
"""
import argparse
import csv
import os
import runpy
import sys


class _Stop(Exception):
  pass


def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument('--program', required=True, help="the GCFL repo's main_oneDS.py or main_multiDS.py")
  parser.add_argument('--trace', required=True, help='output CSV')
  parser.add_argument('--every', type=int, default=10, help='evaluate every this many rounds')
  parser.add_argument('flags', nargs=argparse.REMAINDER, help="the program's own flags, after --")
  args = parser.parse_args()
  if args.every < 1:
    parser.error('--every must be at least 1')
  if not os.path.isfile(args.program):
    parser.error(f'no program {args.program!r} in {os.getcwd()} (run from the GCFL repo folder)')
  flags = args.flags[1:] if args.flags[:1] == ['--'] else args.flags
  sys.path.insert(0, os.getcwd())

  import torch
  import client as client_module
  import training

  rows = []
  calls = {}
  current = {'algorithm': None}
  original_download = client_module.Client_GC.download_from_server

  def download_from_server(self, server):
    original_download(self, server)
    algorithm = current['algorithm']
    if algorithm is None:
      return
    key = (algorithm, self.id)
    rnd = calls.get(key, 0)
    calls[key] = rnd + 1
    if rnd % args.every == 0:
      state = torch.get_rng_state()
      loss, acc = client_module.eval_gc(self.model, self.dataLoader['test'], self.args.device)
      torch.set_rng_state(state)
      rows.append((algorithm, rnd, self.name, loss, acc))

  def traced(name, function):
    def run(*a, **k):
      current['algorithm'] = name
      try:
        return function(*a, **k)
      finally:
        current['algorithm'] = None
    return run

  original_selftrain = training.run_selftrain_GC

  def selftrain(clients, server, local_epoch):
    accuracies = original_selftrain(clients, server, local_epoch)
    for c in clients:
      for epoch, (loss, acc) in enumerate(zip(c.train_stats['testLosses'], c.train_stats['testAccs']), 1):
        if epoch % args.every == 0:
          rows.append(('selftrain', epoch, c.name, loss, acc))
    return accuracies

  def stop(*a, **k):
    raise _Stop()

  client_module.Client_GC.download_from_server = download_from_server
  training.run_fedavg = traced('fedavg', training.run_fedavg)
  training.run_fedprox = traced('fedprox', training.run_fedprox)
  training.run_selftrain_GC = selftrain
  training.run_gcfl = stop
  sys.argv = [args.program] + flags
  try:
    runpy.run_path(args.program, run_name='__main__')
  except _Stop:
    pass
  tmp = args.trace + '.tmp'
  with open(tmp, 'w', newline='') as f:
    w = csv.writer(f)
    w.writerow(['algorithm', 'round', 'client', 'test_loss', 'test_acc'])
    w.writerows(rows)
  os.replace(tmp, args.trace)


if __name__ == '__main__':
  main()
