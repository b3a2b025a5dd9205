#!/usr/bin/env bash
# test_translate_prompt.sh — `projmt translate`'s interactive prompt (stdin
# and stdout a terminal: a pseudo-terminal here, python3's pty): the banner
# and the en> prompt, :help listing the commands, a sentence translated as
# the pipe translates it, :beam N and :nbest N (numbered hypotheses with
# scores, the best the pipe's), a bad :beam refused with the state kept,
# :shortlist K on a model with a shortlist (the translation still there) and
# refused on one without, an unknown command, and :quit ending with status 0.
# The model: the tiny checkpoint of test_translator --make-checkpoint, and
# its export with a vocabulary shortlist from a made-up corpus.
# Usage: bash test_translate_prompt.sh <build-dir>
set -uo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/check.sh"
. "$(dirname "${BASH_SOURCE[0]}")/made_up_model.sh"

build=$(cd "${1:?usage: test_translate_prompt.sh <build-dir>}" && pwd)
projmt="$build/projmt"
[ -x "$projmt" ] || { echo "FAIL: $projmt not built"; exit 1; }
cd "${PROJMT_SOURCE_DIR:-$(dirname "$0")/..}" || exit 1
tmp=$(mktemp -d "${TMPDIR:-/tmp}/projmt-prompt-XXXXXX")
trap 'rm -rf "$tmp"' EXIT

made_up_model "$projmt" "$tmp"
"$projmt" export --model "$tmp/run/last.ckpt" --out "$tmp/listed.pmt" --shortlist "$tmp/data" --shortlist-size 8 \
  --shortlist-frequent 10 > "$tmp/export.log" 2>&1
[ -s "$tmp/listed.pmt" ] || { echo "FAIL: making the model ($(tail -n 3 "$tmp"/*.log | tr '\n' ' '))"; exit 1; }
sentence=$(head -n 1 "$tmp/data/test.en")
want=$(printf '%s\n' "$sentence" | "$projmt" translate --model "$tmp/listed.pmt" --threads 1 2> /dev/null)
# The prompt's n-best lines ("1. text   (score)") as the pipe's n-best gives them.
nbest_lines() {
  printf '%s\n' "$sentence" | "$projmt" translate --model "$tmp/listed.pmt" --threads 1 --beam-size 2 --n-best 2 "$@" \
    2> /dev/null | awk -F' \\|\\|\\| ' '{ printf "%d. %s   (%.3f)\n", NR, $2, $3 }'
}
full=$(nbest_lines)
listed=$(nbest_lines --shortlist 4)

# Runs the prompt on model $1 with the commands of stdin, one a line, each
# sent after the previous prompt; prints the session and the exit status.
cat > "$tmp/prompt.py" <<'PY'
import os, pty, select, sys, time
projmt, model = sys.argv[1:3]
lines = sys.stdin.read().splitlines()
pid, fd = pty.fork()
if pid == 0:
    os.execv(projmt, [projmt, "translate", "--model", model, "--threads", "1"])
out = b""
def until_prompt(deadline):
    global out
    while not out.endswith(b"en> "):
        if time.monotonic() > deadline or not select.select([fd], [], [], 1)[0]:
            if time.monotonic() > deadline: return False
            continue
        try:
            chunk = os.read(fd, 4096)
        except OSError:
            return False
        if not chunk: return False
        out += chunk
    return True
deadline = time.monotonic() + 120   # a bound against a hang, not a timing check
until_prompt(deadline)
for line in lines:
    out += b"\n"
    os.write(fd, line.encode() + b"\n")
    if line == ":quit": break
    until_prompt(deadline)
try:
    while time.monotonic() < deadline:
        if not select.select([fd], [], [], 1)[0]: continue
        chunk = os.read(fd, 4096)
        if not chunk: break
        out += chunk
except OSError:
    pass   # the terminal closed: the program ended
if time.monotonic() >= deadline: os.kill(pid, 9)
_, status = os.waitpid(pid, 0)
sys.stdout.write(out.decode("utf-8", "replace").replace("\r", ""))
print("EXIT %d" % os.waitstatus_to_exitcode(status))
PY
session() { /usr/bin/python3 "$tmp/prompt.py" "$projmt" "$1"; }

printf ':help\n%s\n:beam 2\n:nbest 2\n%s\n:beam 0\n:shortlist 4\n%s\n:shortlist 0\n:frob\n:quit\n' \
  "$sentence" "$sentence" "$sentence" | session "$tmp/listed.pmt" > "$tmp/listed.txt"
has() { grep -qF -- "$1" "$tmp/listed.txt"; }
check "banner" has "projmt translate — English to Spanish (:help for commands)"
check ":help lists :shortlist" has ":shortlist K  decode over the model's vocabulary shortlist"
check "the sentence translates as the pipe does ($want)" has "$want"
check ":beam 2" has "beam size 2"
check ":nbest 2" has "n-best 2"
nbest_seen=$(grep -E '^[0-9]+\. ' "$tmp/listed.txt")
check "n-best 2: the pipe's n-best lines, then with --shortlist 4 those of the pipe with it ($(head -n 1 <<< "$full"))" \
  [ "$nbest_seen" = "$full"$'\n'"$listed" ]
check "...which the shortlist changed (the scores are normalised over it)" [ "$full" != "$listed" ]
check ":beam 0 refused" has "cannot set beam 0"
check ":shortlist 4" has "shortlist 4"
check ":shortlist 0" has "the whole vocabulary"
check "unknown command" has "unknown command ':frob' (:help lists them)"
check ":quit exits 0" has "EXIT 0"
check "a translation after :shortlist 4 (timed)" [ "$(grep -c '^   \[[0-9]* ms\]$' "$tmp/listed.txt")" -eq 3 ]

"$projmt" export --model "$tmp/run/last.ckpt" --out "$tmp/plain.pmt" > /dev/null 2>&1
printf ':shortlist 4\n:quit\n' | session "$tmp/plain.pmt" > "$tmp/plain.txt"
check ":shortlist on a model without one says why" grep -qF "carries no vocabulary shortlist" "$tmp/plain.txt"
check "...and the prompt goes on to :quit" grep -qF "EXIT 0" "$tmp/plain.txt"
finish
