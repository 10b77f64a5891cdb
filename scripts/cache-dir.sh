#!/usr/bin/env bash
# Prints (and creates) the folder where builds that outlive a clone are kept: the previous version's executable
# (scripts/build-previous.sh) and the fuzz targets' build (scripts/fuzz.sh). IAP_CACHE_DIR names it; by default
# ${XDG_CACHE_HOME:-~/.cache}/iap-worker. Deleting it is always safe: what is missing is built again.
set -euo pipefail
cache=${IAP_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/iap-worker}
mkdir -p "$cache"
cd "$cache" && pwd
