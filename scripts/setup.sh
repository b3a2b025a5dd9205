#!/usr/bin/env bash
# setup.sh — installs what projmt needs on Debian 12 (idempotent; fast when all is present).
#   bash scripts/setup.sh           build + run dependencies
#   bash scripts/setup.sh --all     also what the tests and the study use: MPI, matplotlib, pytest, pip,
#                                   curl and Chromium (the `projmt serve` tests),
#                                   sacreBLEU's Python dependencies (the cross-check test
#                                   loads ../shared/tools/sacrebleu through PYTHONPATH),
#                                   clang, libFuzzer and libomp (scripts/fuzz.sh, scripts/tsan.sh)
#   bash scripts/setup.sh --fuzz    build dependencies + clang, libFuzzer and libomp only
#   bash scripts/setup.sh --torch   also PyTorch, only to regenerate the reference
#                                   fixtures (tests/reference/make_fixture.py)
#   bash scripts/setup.sh --extra-data  build dependencies + mod2imp (libsword-utils) and
#                                   python3-polib, to rebuild the extra corpora
#                                   (scripts/get_extra_data.sh --rebuild)
set -euo pipefail

required=(build-essential cmake pkg-config libopenblas-dev libopenblas-openmp-dev libdnnl-dev zlib1g-dev
          libsentencepiece-dev sentencepiece libinih-dev libedit-dev libmicrohttpd-dev libjansson-dev)
fuzz=(clang-14 libclang-rt-14-dev libomp-14-dev)
sacrebleu_deps=(python3-regex python3-tabulate python3-portalocker python3-colorama python3-lxml)
extra_data=(libsword-utils python3-polib)
optional=(libopenmpi-dev openmpi-bin python3-numpy python3-matplotlib python3-pytest python3-pip python3-setuptools curl chromium "${sacrebleu_deps[@]}" "${fuzz[@]}")

want=("${required[@]}")
case "${1:-}" in
  --all) want+=("${optional[@]}") ;;
  --fuzz) want+=("${fuzz[@]}") ;;
  --torch) want+=("${optional[@]}" python3-torch) ;;
  --extra-data) want+=("${extra_data[@]}") ;;
  "") ;;
  *) echo "setup: unknown option $1 (use --all, --fuzz, --torch or --extra-data)" >&2; exit 2 ;;
esac

missing=()
for pkg in "${want[@]}"; do
  if [ "$(dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null)" != "install ok installed" ]; then
    missing+=("$pkg")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all ${#want[@]} packages present"
  exit 0
fi

echo "setup: installing ${missing[*]}"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null; then SUDO=sudo; else
    echo "setup: need root (or sudo) to install: ${missing[*]}" >&2; exit 1; fi
fi
log=$(mktemp /tmp/projmt-setup.XXXXXX.log)
if ! { $SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq \
        --no-install-recommends "${missing[@]}"; } >"$log" 2>&1; then
  tail -n 30 "$log" >&2
  echo "setup: apt-get failed (full log: $log); install these by hand: ${missing[*]}" >&2
  exit 1
fi
rm -f "$log"
echo "setup: done"
