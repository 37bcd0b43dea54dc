#!/bin/bash
# Regenerates the result tables under results/ from scratch (long: about 30 hours on a 2-core machine).
#
#   bash results/reproduce.sh [piece ...]      pieces: chem biochem biochemsn biosncv molecules gcfl-biochem
#                                              gcfl-mix gcfl-proteins gcfl-imdb gcfl-nci1 gcfl-nci1-overlap
#                                              scaling ablations ablations-biochemsn ablations-biosncv
#                                              epochs-chem backbones-chem embeddings-chem embeddings-biochem
#                                              privacy-chem privacy-chem12 figures papers-code
#                                              (default: the pieces of the committed tables)
#
# Resumable: run it again after an interruption (end of a session, kill -9) and finished runs are
# reused, unfinished ones continue from their last checkpoint (programs.compare / programs.train resume).
# Each seed is its own comparison folder, so pieces can also run on different machines; the tables
# are rebuilt after every finished seed from whatever has finished so far (programs.tables).
#
# Pieces: chem, biochem, biochemsn, biosncv = FedStar's Table 1 (seeds 1-5); molecules, gcfl-biochem,
# gcfl-mix = GCFL's multi-dataset table (its seeds; same data as FedStar's CHEM / BIO-CHEM / BIO-CHEM-SN,
# GIN model, GCFL's eps for the setting); gcfl-proteins, gcfl-imdb, gcfl-nci1, gcfl-nci1-overlap = GCFL's
# one-dataset tables (PROTEINS:10, IMDB-BINARY:10, NCI1:30, NCI1:30:overlap; eps and seq_length are
# the reference's for the dataset, tff_graph/clustering.py); ablations, ablations-biochemsn,
# ablations-biosncv = FedStar's sharing-scope and embedding ablations on BIO-CHEM, BIO-CHEM-SN, BIO-SN-CV
# (beside that setting's Table 1 piece's local and fedstar runs; results/<split>/<setting>-ablations);
# epochs-chem = FedAvg, GCFL, FedStar with 2-4 local epochs on CHEM (the paper's local-epochs study;
# results/<split>/chem-epochs); backbones-chem = FedStar with GCN/SAGE as feature encoder and GIN/SAGE as
# structure encoder on CHEM (its Appendix B; results/<split>/chem-backbones); embeddings-chem, embeddings-biochem = FedStar with
# the structure embeddings beyond the paper (Laplacian PE, SPD histogram, rw_dg + Laplacian PE) beside
# the Table 1 piece's rw_dg runs (results/<split>/embeddings/<setting>); privacy-chem, privacy-chem12 =
# FedStar with client-level DP (accuracy vs epsilon) and secure aggregation on CHEM and CHEM@12 (84
# clients; NumPy split) (results/<split>/privacy/<setting>); figures = the papers' figures from the run
# folders that exist (results/<split>/figures, programs.figures; GCFL Fig. 3 from the GCFL tables' runs:
# results/<split>/heterogeneity-<name>, programs.heterogeneity); papers-code = each client beside the papers'
# own code on the same split and seeds (SPLIT=reference; the reference runs recorded by
# results/reference_code.sh; -> <table>/vs_papers_code_<method>.md, programs.reference_clients; Self-train, FedAvg
# and FedProx also round by round, vs_papers_code_<method>_by_round.md, where reference_code.sh curves-<piece> traced them); scaling = FedAvg, GCFL, FedStar on CHEM split
# into k = 1, 2, 4, 8, 12 shards per dataset (7 ... 84 clients), seeds 1-3, always on the NumPy split
# (results/<split>/scaling/chem@<k>, figures/chem_scaling.png).
#
# Environment: PY (default .venv/bin/python), RUNS (run folders, default runs/results[-<split>]),
# TFF_GRAPH_DATA (TU zips, default ../shared/data/TUDataset), WORKERS (passed as --workers if set),
# PARALLEL (passed to programs.compare as --parallel if set: algorithms of a comparison trained at once),
# SPLIT (default numpy: the split the committed tables used; SPLIT=reference: the papers' own split,
# tables under results/reference-split/), OUT (where the tables go), RECORDS (default $OUT/records).
#
# Records: the small files of every finished seed (config.json, final.json, metric CSVs;
# tff_graph/records.py) are archived to $RECORDS after every finished seed, to be committed, and restored
# into $RUNS at the start, so a new machine (whose run folders went with the last session) skips the
# seeds already finished and rebuilds the same tables.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
DATA=${TFF_GRAPH_DATA:-../shared/data/TUDataset}
EXTRA=()
[ -n "${WORKERS:-}" ] && EXTRA+=("--workers=$WORKERS")
PARALLEL_FLAG=()  # programs.compare only: algorithms trained at once (same bits as one at a time)
[ -n "${PARALLEL:-}" ] && PARALLEL_FLAG+=("--parallel=$PARALLEL")
# The committed tables were made on tff-graph's earlier NumPy split (their table.md says so); the papers'
# own split (--split=reference, the programs' default) is for the re-runs of the papers' tables.
SPLIT=${SPLIT:-numpy}
# Where the tables go: the NumPy-split tables stay where they are; the papers' split gets its own tree.
if [ "$SPLIT" = numpy ]; then OUT=${OUT:-results}; RUNS=${RUNS:-runs/results}
else OUT=${OUT:-results/$SPLIT-split}; RUNS=${RUNS:-runs/results-$SPLIT}; fi
RECORDS=${RECORDS:-$OUT/records}
COMMON=(--rounds=200 "--data_dir=$DATA" "--split=$SPLIT" "${EXTRA[@]}")
FEDSTAR_SEEDS=(1 2 3 4 5)
GCFL_SEEDS=(10 42 79 111 123)
SCALING_SEEDS=(1 2 3)

archive() { mkdir -p "$RUNS" && $PY -m programs.records --archive --runs="$RUNS" --records="$RECORDS" > /dev/null; }

seed_count() {  # seed_count <table.csv>: the most seeds any row of a programs.tables table has (0: no table)
  [ -e "$1" ] || { echo 0; return; }
  awk -F, 'NR > 1 { n = split($2, a, " "); if (n > m) m = n } END { print m + 0 }' "$1"
}

# programs.tables over the folders given that exist (after archiving the records of finished seeds). A
# table with fewer seeds than the one already in <output> (a piece rerunning a committed table from its
# first seed) does not replace it: it goes to $RUNS/tables-in-progress/<output> until it has caught up.
table() {  # [same_seeds=1] table <paper> <output> <folder>...  (same_seeds: rows over their common seeds)
  local paper=$1 out=$2; shift 2
  archive
  local have=()
  for f in "$@"; do
    if [ -e "$f/config.json" ] || ls "$f"/*/config.json >/dev/null 2>&1; then have+=("$f"); fi
  done
  [ ${#have[@]} -gt 0 ] || return 0
  local rel=${out#./} old new
  local tmp="$RUNS/tables-in-progress/.new.$$" pending="$RUNS/tables-in-progress/${rel#/}"
  rm -rf "$tmp" && mkdir -p "$tmp"
  if ! (IFS=,; $PY -m programs.tables ${paper:+--paper="$paper"} ${same_seeds:+--same_seeds} --runs="${have[*]}" \
          --output_dir="$tmp" "--data_dir=$DATA" > /dev/null); then
    echo "note: no table for $out yet" >&2; rm -rf "$tmp"; return 0
  fi
  old=$(seed_count "$out/table.csv") new=$(seed_count "$tmp/table.csv")
  rm -rf "$pending"
  if [ "$new" -lt "$old" ]; then
    mkdir -p "$(dirname "$pending")" && mv "$tmp" "$pending"
    echo "note: $out keeps its table of $old seeds; the new one has $new so far: $pending" >&2
  else
    mkdir -p "$out" && cp -r "$tmp"/. "$out"/ && rm -rf "$tmp"
  fi
}

train_once() {  # train_once <run folder> <programs.train flags...>: one run, skipped once finished (DONE);
  # the flags given come after the common ones, so they override them (e.g. --split)
  local out=$1; shift
  [ -e "$out/DONE" ] || $PY -m programs.train --eval_every=10 "${COMMON[@]}" "$@" --output_dir="$out"
}

fedstar_table() {  # fedstar_table <setting>: FedStar's Table 1, seeds 1-5, final-round accuracy
  local setting=$1
  for s in "${FEDSTAR_SEEDS[@]}"; do
    $PY -m programs.compare "${PARALLEL_FLAG[@]}" --algorithms=local,fedavg,fedprox,fedper,fedsage,gcfl,fedstar \
      --setting="$setting" --seeds="$s" --eval_every=10 "${COMMON[@]}" --output_dir="$RUNS/$setting/seed$s"
    table fedstar "$OUT/$setting" $(for t in "${FEDSTAR_SEEDS[@]}"; do echo "$RUNS/$setting/seed$t"; done)
  done
}

gcfl_table() {  # gcfl_table <setting> <name>: GCFL's Self-train, FedAvg, FedProx, GCFL, GCFL+, GCFL+dWs
  local setting=$1 name=$2
  for s in "${GCFL_SEEDS[@]}"; do
    $PY -m programs.compare "${PARALLEL_FLAG[@]}" --algorithms=local,fedavg,fedprox --setting="$setting" --seeds="$s" \
      --eval_every=10 "${COMMON[@]}" --output_dir="$RUNS/$name/seed$s/baselines"
    # The GCFL family is evaluated every round: its best-snapshot accuracy (the reference's number)
    # caches the accuracies of the round before each split, as the reference does.
    $PY -m programs.compare "${PARALLEL_FLAG[@]}" --algorithms=gcfl,gcfl_plus,gcfl_plus_dws --setting="$setting" --seeds="$s" \
      --eval_every=1 "${COMMON[@]}" --output_dir="$RUNS/$name/seed$s/gcfl"
    # GCFL published its one-dataset numbers (NAME:N) for other client counts only: no paper column there.
    local paper=gcfl; [[ "$setting" == *:* ]] && paper=""
    table "$paper" "$OUT/$name" $(for t in "${GCFL_SEEDS[@]}"; do echo "$RUNS/$name/seed$t/baselines $RUNS/$name/seed$t/gcfl"; done)
  done
}

scaling() {  # Accuracy as CHEM is split over more clients (k shards per dataset: 7 ... 84 clients), FedAvg,
  # GCFL and FedStar, seeds 1-3, on the NumPy split for every k (CHEM@12's MUTAG shards of 15-16 graphs
  # cannot be split by the papers' stratified calls; one split for the whole curve); k = 1 is run as
  # chem@1 (the CHEM data on the same split), not taken from the CHEM table.
  for s in "${SCALING_SEEDS[@]}"; do
    for k in 1 2 4 8 12; do
      $PY -m programs.compare "${PARALLEL_FLAG[@]}" --algorithms=fedavg,gcfl,fedstar --setting="chem@$k" --seeds="$s" \
        --eval_every=10 "${COMMON[@]}" --split=numpy --output_dir="$RUNS/scaling/seed$s/chem@$k"
      table "" "$OUT/scaling/chem@$k" $(for t in "${SCALING_SEEDS[@]}"; do echo "$RUNS/scaling/seed$t/chem@$k"; done)
    done
    scaling_figure
  done
}

scaling_figure() {  # The scaling curve from the scaling runs that exist ($OUT/figures/chem_scaling.png)
  local have
  have=$(for s in "${SCALING_SEEDS[@]}"; do for k in 1 2 4 8 12; do
           if [ -d "$RUNS/scaling/seed$s/chem@$k" ]; then echo "$RUNS/scaling/seed$s/chem@$k"; fi; done; done | paste -sd,)
  [ -n "$have" ] || return 0
  $PY -m programs.figures --kind=scaling --runs="$have" --title="CHEM split over k shards per dataset (NumPy split)" \
    --output="$OUT/figures/chem_scaling.png" > /dev/null || echo "note: no figure chem_scaling.png" >&2
}

embedding_runs() {  # embedding_runs <folder> <setting> <seed> <embedding>...: FedStar with each structure
  # embedding, one run folder each (<folder>/emb_<embedding>)
  local folder=$1 setting=$2 seed=$3; shift 3
  for emb in "$@"; do
    train_once "$folder/emb_$emb" --algorithm=fedstar --embedding_type="$emb" --setting="$setting" --seeds="$seed"
  done
}

embedding_folders() {  # embedding_folders <folder> <embedding>...: the run folders embedding_runs made
  local folder=$1; shift
  for emb in "$@"; do echo "$folder/emb_$emb"; done
}

ablations() {  # ablations <setting>: FedStar's sharing scope and structure embedding (seeds 1-5)
  local setting=$1
  for s in "${FEDSTAR_SEEDS[@]}"; do
    $PY -m programs.compare "${PARALLEL_FLAG[@]}" --algorithms=fedstar_share_none,fedstar_share_feature,fedstar_share_all \
      --setting="$setting" --seeds="$s" --eval_every=10 "${COMMON[@]}" --output_dir="$RUNS/$setting-ablations/seed$s/sharing"
    embedding_runs "$RUNS/$setting-ablations/seed$s" "$setting" "$s" rw dg ones
    # With the setting's Table 1 local (for gains) and fedstar (structure shared, rw_dg) runs.
    same_seeds=1 table fedstar "$OUT/$setting-ablations" $(for t in "${FEDSTAR_SEEDS[@]}"; do
      echo "$RUNS/$setting/seed$t/local $RUNS/$setting/seed$t/fedstar $RUNS/$setting-ablations/seed$t/sharing"
      embedding_folders "$RUNS/$setting-ablations/seed$t" rw dg ones; done)
  done
}

local_epochs() {  # FedStar paper's local-epochs study on CHEM: FedAvg, GCFL, FedStar with 2, 3, 4 local
  # epochs (1 = the CHEM table's runs), seeds 1-5
  for s in "${FEDSTAR_SEEDS[@]}"; do
    for e in 2 3 4; do
      $PY -m programs.compare "${PARALLEL_FLAG[@]}" --algorithms=fedavg,gcfl,fedstar --local_epochs="$e" --setting=chem --seeds="$s" \
        --eval_every=10 "${COMMON[@]}" --output_dir="$RUNS/chem-epochs/seed$s/e$e"
    done
    same_seeds=1 table fedstar "$OUT/chem-epochs" $(for t in "${FEDSTAR_SEEDS[@]}"; do
      echo "$RUNS/chem/seed$t/local $RUNS/chem/seed$t/fedavg $RUNS/chem/seed$t/gcfl $RUNS/chem/seed$t/fedstar"
      for e in 2 3 4; do echo "$RUNS/chem-epochs/seed$t/e$e"; done; done)
  done
}

backbones() {  # FedStar paper's Appendix B on CHEM: GIN / GCN / SAGE as FedStar's feature encoder and as its
  # structure encoder (the other one at the paper's choice: feature GIN, structure GCN), seeds 1-5
  for s in "${FEDSTAR_SEEDS[@]}"; do
    for b in gcn sage; do
      train_once "$RUNS/chem-backbones/seed$s/feature_$b" --algorithm=fedstar --backbone="$b" --setting=chem --seeds="$s"
    done
    for b in gin sage; do
      train_once "$RUNS/chem-backbones/seed$s/structure_$b" --algorithm=fedstar --structure_backbone="$b" \
        --setting=chem --seeds="$s"
    done
    same_seeds=1 table fedstar "$OUT/chem-backbones" $(for t in "${FEDSTAR_SEEDS[@]}"; do
      echo "$RUNS/chem/seed$t/local $RUNS/chem/seed$t/fedstar"
      for k in feature_gcn feature_sage structure_gin structure_sage; do echo "$RUNS/chem-backbones/seed$t/$k"; done
    done)
  done
}

embeddings() {  # embeddings <setting>: FedStar with the structure embeddings beyond the paper (lap, spd,
  # rw_dg_lap) beside its rw_dg, seeds 1-5; with the setting's Table 1 local and fedstar runs (if run).
  local setting=$1
  for s in "${FEDSTAR_SEEDS[@]}"; do
    embedding_runs "$RUNS/embeddings/$setting/seed$s" "$setting" "$s" lap spd rw_dg_lap
    same_seeds=1 table fedstar "$OUT/embeddings/$setting" $(for t in "${FEDSTAR_SEEDS[@]}"; do
      echo "$RUNS/$setting/seed$t/local $RUNS/$setting/seed$t/fedstar"
      embedding_folders "$RUNS/embeddings/$setting/seed$t" lap spd rw_dg_lap; done)
  done
}

privacy() {  # privacy <setting>: FedStar with client-level DP on the shared structure encoder (clipped at
  # 0.1, about the median client update norm of FedStar on CHEM; noise multipliers 0 = clipping only, 1, 4,
  # 16; epsilon at delta 1e-3 < 1/84) and with secure aggregation, seeds 1-5, beside plain FedStar and local.
  local setting=$1
  local split_flag=()
  # CHEM@12's MUTAG shards (15-16 graphs) cannot be split by the papers' stratified calls: NumPy split.
  [[ "$setting" == *@* ]] && split_flag=(--split=numpy)
  for s in "${FEDSTAR_SEEDS[@]}"; do
    local base="$RUNS/$setting/seed$s"
    if [ "$setting" != chem ] || [ "${split_flag[*]:-}" != "" ]; then
      base="$RUNS/privacy/$setting/seed$s/plain"
      $PY -m programs.compare "${PARALLEL_FLAG[@]}" --algorithms=local,fedstar --setting="$setting" --seeds="$s" --eval_every=10 \
        "${COMMON[@]}" "${split_flag[@]}" --output_dir="$base"
    fi
    for z in 0 1 4 16; do
      train_once "$RUNS/privacy/$setting/seed$s/dp_z$z" --algorithm=fedstar --dp_noise_multiplier="$z" \
        --dp_clip=0.1 --dp_delta=1e-3 --setting="$setting" --seeds="$s" "${split_flag[@]}"
    done
    train_once "$RUNS/privacy/$setting/seed$s/secagg" --algorithm=fedstar --secure_aggregation \
      --setting="$setting" --seeds="$s" "${split_flag[@]}"
    same_seeds=1 table "" "$OUT/privacy/$setting" $(for t in "${FEDSTAR_SEEDS[@]}"; do
      if [ "$setting" != chem ] || [ "${split_flag[*]:-}" != "" ]; then echo "$RUNS/privacy/$setting/seed$t/plain"
      else echo "$RUNS/$setting/seed$t/local $RUNS/$setting/seed$t/fedstar"; fi
      for z in 0 1 4 16; do echo "$RUNS/privacy/$setting/seed$t/dp_z$z"; done
      echo "$RUNS/privacy/$setting/seed$t/secagg"; done)
  done
}

figures() {  # The papers' figures from whatever run folders of the pieces above exist ($OUT/figures)
  local have run
  fig() { $PY -m programs.figures "$@" > /dev/null || echo "note: no figure ${*: -1}" >&2; }
  for setting in chem biochem biochemsn biosncv; do  # FedStar Fig. 3 + per-client accuracy violins
    have=$(for s in "${FEDSTAR_SEEDS[@]}"; do if [ -d "$RUNS/$setting/seed$s" ]; then echo "$RUNS/$setting/seed$s"; fi
           done | paste -sd,)
    [ -n "$have" ] || continue
    fig --kind=convergence --runs="$have" --title="FedStar Table 1 setting $setting" \
      --output="$OUT/figures/${setting}_convergence.png"
    fig --kind=violin --runs="$have" --title="$setting: clients' final test accuracy" \
      --output="$OUT/figures/${setting}_clients.png"
  done
  for name in molecules gcfl-biochem gcfl-mix gcfl-proteins gcfl-imdb gcfl-nci1 gcfl-nci1-overlap; do
    have=$(for s in "${GCFL_SEEDS[@]}"; do for k in baselines gcfl; do
             if [ -d "$RUNS/$name/seed$s/$k" ]; then echo "$RUNS/$name/seed$s/$k"; fi; done; done | paste -sd,)
    [ -n "$have" ] || continue
    fig --kind=convergence --metric=average/test_loss --runs="$have" --title="GCFL $name: test loss" \
      --output="$OUT/figures/${name}_test_loss.png"  # GCFL Fig. 4
    fig --kind=violin --runs="$have" --title="$name: clients' final test accuracy" \
      --output="$OUT/figures/${name}_clients.png"  # GCFL Appendix D
    for algorithm in gcfl gcfl_plus; do  # GCFL Fig. 1, first GCFL seed
      run="$RUNS/$name/seed${GCFL_SEEDS[0]}/gcfl/$algorithm/seed_${GCFL_SEEDS[0]}"
      if [ -e "$run/final.json" ]; then
        fig --kind=gradient_norms --runs="$run" --output="$OUT/figures/${name}_${algorithm}_gradient_norms.png" \
          --title="$algorithm on $name (seed ${GCFL_SEEDS[0]}): gradient norms, splits marked"
      fi
    done
  done
  # GCFL Fig. 3: structure and feature heterogeneity within the final clusters of every GCFL / GCFL+ run
  # vs between all clients (-> heterogeneity-<name>/, with the setting's heatmaps and property tables)
  for pair in molecules=molecules gcfl-biochem=biochem gcfl-mix=mix gcfl-proteins=PROTEINS:10 \
              gcfl-imdb=IMDB-BINARY:10 gcfl-nci1=NCI1:30 gcfl-nci1-overlap=NCI1:30:overlap; do
    name=${pair%%=*}
    have=$(for s in "${GCFL_SEEDS[@]}"; do for algorithm in gcfl gcfl_plus; do
             if [ -e "$RUNS/$name/seed$s/gcfl/$algorithm/seed_$s/final.json" ]; then
               echo "$RUNS/$name/seed$s/gcfl/$algorithm"; fi; done; done | paste -sd,)
    [ -n "$have" ] || continue
    $PY -m programs.heterogeneity --setting="${pair#*=}" --run_dir="$have" "--data_dir=$DATA" \
      --output_dir="$OUT/heterogeneity-$name" > /dev/null || echo "note: no heterogeneity-$name" >&2
  done
  scaling_figure  # FedStar's scaling figure
  run="$RUNS/chem/seed1/gcfl/seed_1"  # GCFL Fig. 1 on FedStar's CHEM table run, if there
  if [ -e "$run/final.json" ]; then
    fig --kind=gradient_norms --runs="$run" --title="gcfl on chem (seed 1): gradient norms, splits marked" \
      --output="$OUT/figures/chem_gcfl_gradient_norms.png"
  fi
}

papers_code() {  # Each client beside the papers' own code on the same split and seeds: vs_papers_code_<ours>.md
  # in the table's folder, from the reference runs results/reference_code.sh recorded
  # ($RECORDS/reference-code/<its piece>/seed<s>) and our finished seeds of the same table (common seeds only).
  local ref="$RECORDS/reference-code" table piece mine theirs accuracy name runs
  while read -r table piece mine theirs accuracy name; do
    [ -d "$ref/$piece" ] || continue
    runs=$(for d in "$RUNS/$table"/seed*/"$mine"; do
             if ls "$d"/seed_*/final.json > /dev/null 2>&1; then echo "$d"; fi; done | paste -sd,)
    [ -n "$runs" ] || continue
    $PY -m programs.reference_clients --runs="$runs" --reference="$ref/$piece" --reference_algorithm="$theirs" \
      --our_accuracy="$accuracy" --output="$OUT/$table/vs_papers_code_$name.md" > /dev/null \
      || echo "note: no $OUT/$table/vs_papers_code_$name.md" >&2
    if [[ "$name" =~ ^(local|fedavg|fedprox)$ ]] && ls "$ref/$piece"/seed*/curves.csv > /dev/null 2>&1; then
      # the GCFL repo's Self-train / FedAvg / FedProx traced round by round (reference_code.sh curves-<piece>;
      # named there selftrain, fedavg, fedprox)
      $PY -m programs.reference_clients --runs="$runs" --reference="$ref/$piece" --reference_algorithm="${theirs%%_mu*}" \
        --by_round --output="$OUT/$table/vs_papers_code_${name}_by_round.md" > /dev/null \
        || echo "note: no $OUT/$table/vs_papers_code_${name}_by_round.md" >&2
    fi
  done < <(printf '%s\n' "chem fedstar-chem fedstar fedstar_rw_dg final fedstar" \
             "chem selftrain-chem local selftrain final local" "biosncv selftrain-biosncv local selftrain final local"
           for pair in molecules=gcfl-molecules gcfl-biochem=gcfl-biochem gcfl-mix=gcfl-mix gcfl-proteins=gcfl-proteins \
                       gcfl-imdb=gcfl-imdb gcfl-nci1=gcfl-nci1; do
             # a GCFL table's six methods beside the GCFL repo's: <table> <piece> <ours> <theirs> <accuracy> <name>
             printf "${pair%%=*} ${pair#*=} %s\n" "baselines/local selftrain final local" \
               "baselines/fedavg fedavg final fedavg" "baselines/fedprox fedprox_mu0.01 final fedprox" \
               "gcfl/gcfl gcfl best_snapshot gcfl" "gcfl/gcfl_plus gcflplus best_snapshot gcfl_plus" \
               "gcfl/gcfl_plus_dws gcflplusDWs best_snapshot gcfl_plus_dws"
           done)
}

pieces=("$@")
[ ${#pieces[@]} -gt 0 ] || pieces=(chem biochem molecules gcfl-biochem scaling ablations)
KNOWN=" chem biochem biosncv biochemsn molecules gcfl-biochem gcfl-mix gcfl-proteins gcfl-imdb gcfl-nci1 gcfl-nci1-overlap scaling ablations ablations-biochemsn ablations-biosncv epochs-chem backbones-chem embeddings-chem embeddings-biochem privacy-chem privacy-chem12 figures papers-code "
unknown_piece() { echo "error: unknown piece '$1' ($(echo $KNOWN | sed 's/ /, /g'))" >&2; exit 2; }
for piece in "${pieces[@]}"; do  # Every piece checked before anything is written.
  [[ "$KNOWN" == *" $piece "* ]] || unknown_piece "$piece"
  if [ "$piece" = papers-code ] && [ "$SPLIT" != reference ]; then
    echo "error: papers-code compares runs on the papers' split with the papers' code: set SPLIT=reference" >&2; exit 2
  fi
done
mkdir -p "$RUNS"
$PY -m programs.records --restore --records="$RECORDS" --runs="$RUNS"
for piece in "${pieces[@]}"; do
  case $piece in
    chem|biochem|biochemsn|biosncv) fedstar_table "$piece" ;;
    molecules) gcfl_table molecules molecules ;;
    gcfl-biochem) gcfl_table biochem gcfl-biochem ;;
    gcfl-mix) gcfl_table mix gcfl-mix ;;
    gcfl-proteins) gcfl_table PROTEINS:10 gcfl-proteins ;;
    gcfl-imdb) gcfl_table IMDB-BINARY:10 gcfl-imdb ;;
    gcfl-nci1) gcfl_table NCI1:30 gcfl-nci1 ;;
    gcfl-nci1-overlap) gcfl_table NCI1:30:overlap gcfl-nci1-overlap ;;
    scaling) scaling ;;
    ablations) ablations biochem ;;
    ablations-biochemsn) ablations biochemsn ;;
    ablations-biosncv) ablations biosncv ;;
    epochs-chem) local_epochs ;;
    backbones-chem) backbones ;;
    embeddings-chem) embeddings chem ;;
    embeddings-biochem) embeddings biochem ;;
    privacy-chem) privacy chem ;;
    privacy-chem12) privacy chem@12 ;;
    figures) figures ;;
    papers-code) papers_code ;;
    *) unknown_piece "$piece" ;;
  esac
done
