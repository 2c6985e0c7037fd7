#!/bin/bash
# Submit the 8 shards of one evalkit plan as a Slurm array, and the merge to run after all of them.
#
#   bash examples/slurm/submit.sh [config.yaml] [shards folder]
#
# Run it from the folder the config's relative paths are meant from. The shards folder (default
# runs/sharded-<date>) must be on a filesystem every node sees. When it is done:
# <shards folder>/merged holds the results, records and report.html.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
export EVALKIT_CONFIG=${1:-${EVALKIT_CONFIG:-config.yaml}}
export EVALKIT_SHARDS_DIR=${2:-${EVALKIT_SHARDS_DIR:-runs/sharded-$(date +%Y%m%d-%H%M%S)}}
export EVALKIT_SHARDS=${EVALKIT_SHARDS:-8}
mkdir -p "$EVALKIT_SHARDS_DIR"
EVALKIT_SHARDS_DIR=$(cd "$EVALKIT_SHARDS_DIR" && pwd)  # absolute: the jobs may start elsewhere
export EVALKIT_SHARDS_DIR

array=$(sbatch --parsable --array="0-$((EVALKIT_SHARDS - 1))" --export=ALL "$here/shards.sbatch")
array=${array%%;*}  # "jobid;cluster" on federated clusters
merge=$(sbatch --parsable --dependency="afterany:$array" --export=ALL "$here/merge.sbatch")
merge=${merge%%;*}
echo "shards: array job $array ($EVALKIT_SHARDS tasks); merge: job $merge"
echo "results: $EVALKIT_SHARDS_DIR/merged (when job $merge is done)"
