#!/usr/bin/env bash
# train_mpi.sh — data-parallel `projmt train` over MPI ranks on one machine or
# several (see scripts/MPI.md).
#
#   scripts/train_mpi.sh [-n RANKS] [-H HOSTFILE] [--] [projmt train options]
#
#   -n RANKS     processes in the job (default: 2, or the hostfile's slots)
#   -H HOSTFILE  machines to run on (scripts/hostfile.example); without it
#                every rank runs here
#   environment: PROJMT (default build/projmt), MPIRUN (default mpirun),
#                MPIRUN_ARGS (extra mpirun options, e.g. "--mca btl_tcp_if_include eth0"),
#                PROJMT_STOP_GRACE (seconds ranks get to save after Ctrl-C; 10)
#
# Each rank loads --data-dir itself (same path and same files on every
# machine); only rank 0 writes --save-dir. Threads per rank default to this
# machine's cores / its ranks; --threads overrides. Resuming works with any
# rank count: run the same command again, with -n changed if you like.
set -euo pipefail
cd "$(dirname "$0")/.."

ranks=""
hostfile=""
while [ $# -gt 0 ]; do
    case $1 in
        -n) ranks=${2:?-n needs a number}; shift 2 ;;
        -H|--hostfile) hostfile=${2:?-H needs a file}; shift 2 ;;
        -h|--help) sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        --) shift; break ;;
        *) break ;;
    esac
done

projmt=${PROJMT:-build/projmt}
mpirun=${MPIRUN:-mpirun}
die() { echo "train_mpi.sh: $*" >&2; exit 2; }
command -v "$mpirun" >/dev/null 2>&1 || die "'$mpirun' not found: install Open MPI (apt-get install openmpi-bin libopenmpi-dev)"
[ -x "$projmt" ] || die "'$projmt' not found: build first (cmake -B build -S . && cmake --build build -j)"
# (not `ldd | grep -q`: with pipefail, grep's early exit can fail the pipe)
case "$(ldd "$projmt" 2>/dev/null)" in
    *libmpi*) ;;
    *) die "'$projmt' was built without MPI: install libopenmpi-dev and rebuild" ;;
esac
[ -z "$hostfile" ] || [ -r "$hostfile" ] || die "cannot read hostfile '$hostfile'"

args=()
[ "$(id -u)" -eq 0 ] && args+=(--allow-run-as-root)
[ -n "$ranks" ] && args+=(-np "$ranks")
[ -z "$ranks" ] && [ -z "$hostfile" ] && args+=(-np 2)
if [ -n "$hostfile" ]; then
    args+=(--hostfile "$hostfile")
else
    # One machine: allow more ranks than cores (each then gets 1 thread).
    args+=(--oversubscribe)
fi
# Ranks set their own thread counts (dist.h); mpirun's default binding of
# 1-2 ranks to single cores would squeeze a rank's threads onto one core.
args+=(--bind-to none)
# Ctrl-C / SIGTERM on mpirun reach every rank as SIGTERM: each finishes its
# step, rank 0 saves last.ckpt, all exit. mpirun's default grace before
# SIGKILL is 1 s, shorter than a step; PROJMT_STOP_GRACE seconds (default
# 10) leave time for the step and the save.
args+=(--mca odls_base_sigkill_timeout "${PROJMT_STOP_GRACE:-10}")
# Every rank, remote ones included, sees the same library settings.
for var in OPENBLAS_CORETYPE OMP_WAIT_POLICY LD_LIBRARY_PATH; do
    [ -n "${!var:-}" ] && args+=(-x "$var")
done
# shellcheck disable=SC2086  # MPIRUN_ARGS is a list of options
exec "$mpirun" "${args[@]}" ${MPIRUN_ARGS:-} "$projmt" train "$@"
