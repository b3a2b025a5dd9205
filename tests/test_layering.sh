#!/usr/bin/env bash
# test_layering.sh — includes run one way down the layers of src/:
#   cli → tools, serve, api → train → eval → translate → model → data, nn → core
# A file in src/X/ may include "Y/..." only when Y is X or a lower layer;
# data and nn are siblings and include neither each other. Fails naming every
# include that climbs back up.
set -u
cd "${PROJMT_SOURCE_DIR:-$(dirname "$0")/..}" || exit 1
declare -A rank=([core]=0 [nn]=1 [data]=1 [model]=2 [translate]=3 [eval]=4 [train]=5 [tools]=6 [cli]=7 [serve]=6 [api]=6)
bad=0 checked=0
while IFS= read -r line; do
  file=${line%%:*}
  inc=$(sed -n 's/.*#include "\([^"]*\)".*/\1/p' <<<"${line#*:}")
  from=$(cut -d/ -f2 <<<"$file")
  to=${inc%%/*}
  [ "$to" = "$inc" ] && { echo "FAIL: $file includes \"$inc\" without its subsystem folder"; bad=1; continue; }
  if [ -z "${rank[$from]+x}" ] || [ -z "${rank[$to]+x}" ]; then
    echo "FAIL: $file: unknown subsystem in \"$inc\" (add it to the table in $0)"; bad=1; continue
  fi
  checked=$((checked + 1))
  if [ "$from" != "$to" ] && [ "${rank[$to]}" -ge "${rank[$from]}" ]; then
    echo "FAIL: $file (layer $from) includes \"$inc\" (layer $to): includes must run down the layers"
    bad=1
  fi
done < <(grep -H '#include "' src/*/*.c src/*/*.cc src/*/*.h)
[ "$checked" -gt 50 ] || { echo "FAIL: only $checked includes checked: is src/ laid out by subsystem?"; exit 1; }
[ $bad -eq 0 ] && echo "ok: $checked includes run down the layers"
exit $bad
