#!/bin/bash
# Runs the papers' own PyTorch code (../shared/reference/, set up by its setup.sh) on its own split for
# the seeds of our tables, so that its per-client test accuracy can be set beside ours (issue 24 item 5).
#
#   bash results/reference_code.sh [piece ...]    pieces: fedstar-chem, selftrain-chem (FedStar repo,
#                                                 FedStar / Self-train on CHEM, seeds 1-5; the repo runs
#                                                 only these two), selftrain-biosncv (its Self-train on
#                                                 BIO-SN-CV, seeds 1-5), gcfl-molecules (GCFL repo, its six
#                                                 algorithms on molecules = CHEM's 7 datasets, GCFL's
#                                                 seeds 10, 42, 79, 111, 123 as in results/reproduce.sh),
#                                                 gcfl-biochem, gcfl-mix (the same on its biochem group, 10
#                                                 clients, and its mix group, 13 clients with COLLAB and
#                                                 the IMDBs; its runnerfile's eps 0.07/0.35 and 0.08/0.40),
#                                                 gcfl-proteins, gcfl-imdb, gcfl-nci1 (GCFL repo's
#                                                 main_oneDS.py: PROTEINS over 10 clients, IMDB-BINARY
#                                                 over 10, NCI1 over 30, its eps and seq_length, its seeds),
#                                                 curves-<gcfl piece> (each recorded seed of a GCFL-repo piece
#                                                 again, traced by results/reference_curves.py: its Self-
#                                                 train's, FedAvg's and FedProx's per-client test accuracy
#                                                 every 10 epochs / rounds into the record's curves.csv,
#                                                 kept only if the traced run wrote the same accuracy CSVs
#                                                 as the recorded one; run on gcfl-proteins)
#
# Resumable per seed: a seed whose output CSV exists is not run again (the reference code cannot resume
# a seed; an interrupted seed starts over). Both use the reference's split (seed_dataSplit = 123), which
# is tff-graph's default split index for index, so every client has the same test graphs on both sides.
# Output: $OUT (default runs/reference-code)/<piece>/seed<s>/ (the reference's own CSV layout), log in
# the same folder. Environment: REFRUN (default ~/.cache/tff_graph_reference), ROUNDS (default 200),
# RECORDS (default results/reference-split/records/reference-code): each finished seed's raw/ CSVs are
# copied there (to be committed; a new machine's $OUT is empty), with the GCFL repo's split log lines
# (splits.txt), and a seed recorded there is not run again.
set -euo pipefail
cd "$(dirname "$0")/.."
# Every piece named is checked before anything runs (an unknown one: one error, exit 2, nothing run)
KNOWN_PIECES="fedstar-chem selftrain-chem selftrain-biosncv gcfl-molecules gcfl-biochem gcfl-mix gcfl-proteins gcfl-imdb gcfl-nci1"
for piece in "$@"; do
  base=${piece#curves-}
  if [[ " $KNOWN_PIECES " != *" $base "* ]] || { [ "$base" != "$piece" ] && [[ $base != gcfl-* ]]; }; then
    echo "error: unknown piece '$piece' (${KNOWN_PIECES// /, }, curves-<gcfl piece>)" >&2; exit 2
  fi
done
ROOT=$PWD
REFRUN=${REFRUN:-$HOME/.cache/tff_graph_reference}
OUT=${OUT:-runs/reference-code}
ROUNDS=${ROUNDS:-200}
PY="$REFRUN/venv/bin/python"
[ -x "$PY" ] || { echo "error: the reference code is not set up at $REFRUN (bash ../shared/reference/setup.sh)" >&2; exit 2; }
RECORDS=${RECORDS:-results/reference-split/records/reference-code}
OUT=$(mkdir -p "$OUT" && cd "$OUT" && pwd)
RECORDS=$(mkdir -p "$RECORDS" && cd "$RECORDS" && pwd)

keep() {  # keep <piece> <seed>: the seed's raw CSVs into the records (copied, then moved into place)
  local from="$OUT/$1/seed$2" to="$RECORDS/$1/seed$2"
  rm -rf "$to.tmp" && mkdir -p "$to.tmp" && (cd "$from" && find raw -name '*.csv' -exec cp --parents {} "$to.tmp/" \;)
  [ -e "$from/DONE" ] && cp "$from/DONE" "$to.tmp/"
  # The GCFL repo's cluster splits (its patched training.py prints one CLUSTERSPLIT line per split)
  if grep -q CLUSTERSPLIT "$from/log.txt" 2> /dev/null; then grep CLUSTERSPLIT "$from/log.txt" > "$to.tmp/splits.txt"; fi
  rm -rf "$to" && mv "$to.tmp" "$to"
}
declare -A GROUP_DATASETS=(  # the datasets each group reads; a missing one would make PyG try a download
  [chem]="MUTAG BZR COX2 DHFR PTC_MR AIDS NCI1" [molecules]="MUTAG BZR COX2 DHFR PTC_MR AIDS NCI1"
  [biochem]="MUTAG BZR COX2 DHFR PTC_MR AIDS NCI1 ENZYMES DD PROTEINS"
  [mix]="MUTAG BZR COX2 DHFR PTC_MR AIDS NCI1 ENZYMES DD PROTEINS COLLAB IMDB-BINARY IMDB-MULTI"
  [biosncv]="ENZYMES DD PROTEINS COLLAB IMDB-BINARY IMDB-MULTI Letter-high Letter-low Letter-med"
  [PROTEINS]="PROTEINS" [IMDB-BINARY]="IMDB-BINARY" [NCI1]="NCI1")
need_data() {  # need_data <group>: every dataset of the group laid out by setup.sh, or one error, exit 2
  local name missing=()
  for name in ${GROUP_DATASETS[$1]}; do
    ls "$REFRUN/data/TUDataset/$name/raw/${name}_A.txt" > /dev/null 2>&1 || missing+=("$name")
  done
  [ ${#missing[@]} -eq 0 ] || { echo "error: $REFRUN/data lacks ${missing[*]} for --data_group $1" \
    "(DATASETS=\"${missing[*]}\" bash ../shared/reference/setup.sh)" >&2; exit 2; }
}
SEEDS=(1 2 3 4 5)  # FedStar's table seeds
GCFL_SEEDS=(10 42 79 111 123)  # GCFL's (reproduce.sh's molecules table)

fedstar_repo() {  # fedstar_repo <piece> <alg> <result csv> <group>: the FedStar repo's --alg on --data_group
  local piece=$1 alg=$2 csv=$3 group=$4  # <group> (chem, biosncv, ...), seeds 1-5
  need_data "$group"
  for s in "${SEEDS[@]}"; do
    local out="$OUT/$piece/seed$s"
    if ls "$RECORDS/$piece/seed$s"/raw/"$group"/"$csv" > /dev/null 2>&1; then continue; fi
    if ! ls "$out"/raw/"$group"/"$csv" > /dev/null 2>&1; then
      mkdir -p "$out"
      (cd "$REFRUN/fedstar" && "$PY" exps/main_multiDS.py --data_group "$group" --seed "$s" --alg "$alg" --type_init rw_dg \
        --num_rounds "$ROUNDS" --datapath "$REFRUN/data" --outbase "$out") > "$out/log.txt" 2>&1
    fi
    keep "$piece" "$s"
  done
}

gcfl_repo() {  # gcfl_repo <piece> <data group> <program> <flags...>: the GCFL repo's <program> with its
  # runnerfile's flags for GCFL's seeds; an interrupted seed starts over
  local piece=$1 group=$2 program=$3; shift 3
  need_data "$group"
  for s in "${GCFL_SEEDS[@]}"; do
    if [ "$CURVES" = 1 ]; then trace_seed "$piece" "$s" "$program" "$@"; continue; fi
    local out="$OUT/$piece/seed$s"
    if [ -e "$RECORDS/$piece/seed$s/DONE" ]; then continue; fi
    if [ ! -e "$out/DONE" ]; then
      rm -rf "$out" && mkdir -p "$out"
      (cd "$REFRUN/gcfl" && "$PY" "$program" "$@" --seed "$s" --num_rounds "$ROUNDS" --datapath "$REFRUN/data" \
        --outbase "$out/raw") > "$out/log.txt" 2>&1
      touch "$out/DONE"
    fi
    keep "$piece" "$s"
  done
}
trace_seed() {  # trace_seed <piece> <seed> <program> <flags...>: a recorded seed run again with its
  # Self-train, FedAvg and FedProx traced (results/reference_curves.py, which stops the program before
  # GCFL); the trace is kept in the record only if every accuracy CSV the traced run wrote equals the
  # recorded one
  local piece=$1 s=$2 program=$3; shift 3
  local rec="$RECORDS/$piece/seed$s" out="$OUT/curves-$piece/seed$s" f n=0
  [ -e "$rec/DONE" ] || return 0  # not recorded yet: nothing to check the trace against
  [ -e "$rec/curves.csv" ] && return 0
  rm -rf "$out" && mkdir -p "$out"
  (cd "$REFRUN/gcfl" && "$PY" "$ROOT/results/reference_curves.py" --program "$program" --trace "$out/curves.csv" \
    --every 10 -- "$@" --seed "$s" --num_rounds "$ROUNDS" --datapath "$REFRUN/data" --outbase "$out/raw") > "$out/log.txt" 2>&1
  for f in $(cd "$out" && find raw -name 'accuracy_*.csv'); do
    cmp -s "$out/$f" "$rec/$f" || { echo "error: the traced seed $s of $piece wrote another $f than the record" >&2; exit 1; }
    n=$((n + 1))
  done
  [ "$n" -ge 3 ] || { echo "error: the traced seed $s of $piece wrote $n accuracy CSVs (log: $out/log.txt)" >&2; exit 1; }
  cp "$out/curves.csv" "$rec/curves.csv.tmp" && mv "$rec/curves.csv.tmp" "$rec/curves.csv"
}
oneds() {  # oneds <piece> <dataset> <clients> <eps1> <eps2> <seq_length>: main_oneDS.py, without --repeat
  # (so the CSVs keep their plain names)
  gcfl_repo "$1" "$2" main_oneDS.py --data_group "$2" --num_clients "$3" --epsilon1 "$4" --epsilon2 "$5" --seq_length "$6"
}

pieces=("$@")
[ ${#pieces[@]} -gt 0 ] || pieces=(fedstar-chem gcfl-molecules)
for piece in "${pieces[@]}"; do
  CURVES=0
  case $piece in curves-gcfl-*) CURVES=1; piece=${piece#curves-} ;; esac
  case $piece in
    fedstar-chem) fedstar_repo fedstar-chem fedstar accuracy_fedstar_rw_dg_GC.csv chem ;;
    selftrain-chem) fedstar_repo selftrain-chem selftrain accuracy_selftrain_GC.csv chem ;;
    selftrain-biosncv) fedstar_repo selftrain-biosncv selftrain accuracy_selftrain_GC.csv biosncv ;;
    gcfl-molecules) gcfl_repo gcfl-molecules molecules main_multiDS.py --data_group molecules --epsilon1 0.07 \
                      --epsilon2 0.28 --seq_length 5 ;;  # tff_graph/clustering.py REFERENCE_THRESHOLDS
    gcfl-biochem) gcfl_repo gcfl-biochem biochem main_multiDS.py --data_group biochem --epsilon1 0.07 \
                    --epsilon2 0.35 --seq_length 5 ;;  # GCFL's runnerfile
    gcfl-mix) gcfl_repo gcfl-mix mix main_multiDS.py --data_group mix --epsilon1 0.08 --epsilon2 0.4 --seq_length 5 ;;
    gcfl-proteins) oneds gcfl-proteins PROTEINS 10 0.03 0.06 10 ;;  # GCFL's runnerfile
    gcfl-imdb) oneds gcfl-imdb IMDB-BINARY 10 0.025 0.045 5 ;;
    gcfl-nci1) oneds gcfl-nci1 NCI1 30 0.04 0.08 5 ;;
    *) echo "error: piece '$piece' is in KNOWN_PIECES but has no rule here" >&2; exit 1 ;;  # names: checked above
  esac
done
