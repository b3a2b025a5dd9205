#!/usr/bin/env bash
# test_cli_args.sh — odd names and numbers on the command line get a clear
# message naming the option and a usage exit status (2), before any data or
# model is read: empty paths ("--save-dir ''" once read before a buffer),
# names with a newline or surrounding spaces, and numbers that atoi read as
# something else ("--beam 1e3" once meant beam 1).
set -u
BUILD=${1:?usage: test_cli_args.sh BUILD_DIR}
PROJMT=$(cd "$BUILD" 2>/dev/null && pwd)/projmt
[ -x "$PROJMT" ] || { echo "SKIPPED: $PROJMT not built"; exit 77; }
TMP=$(mktemp -d "${TMPDIR:-/tmp}/projmt-args-XXXXXX")
trap 'rm -rf "$TMP"' EXIT
passed=0 failed=0
# refuses STATUS PATTERN projmt-args...: exits STATUS with PATTERN on stderr.
refuses() {
    local want=$1 pattern=$2; shift 2
    (cd "$TMP" && "$PROJMT" "$@") > "$TMP/out" 2> "$TMP/err"
    local got=$?
    if [ $got -eq "$want" ] && grep -q -- "$pattern" "$TMP/err"; then
        passed=$((passed + 1))
    else
        failed=$((failed + 1))
        echo "FAIL: projmt $* -> exit $got (want $want), stderr: $(head -c 300 "$TMP/err")" >&2
    fi
}

refuses 2 "save_dir is empty" train --save-dir ""
refuses 2 "save_dir 'a" train --save-dir $'a\nb'
refuses 2 "starts or ends with a space" train --save-dir "runs/x "
refuses 2 "data_dir is empty" train --data-dir ""
refuses 2 "invalid value '1e3' for 'beam_size'" translate --model m.ckpt --beam 1e3
refuses 2 "invalid value '1e3' for 'beam_size'" translate --model m.ckpt --beam-size 1e3
refuses 2 "invalid value '4x' for --batch" translate --model m.ckpt --batch 4x
refuses 2 "invalid value '0' for --batch" translate --model m.ckpt --batch 0
refuses 2 "-o is empty" translate --model m.ckpt -o ""
refuses 2 "-i is empty" translate --model m.ckpt -i ""
refuses 2 "invalid value '' for 'beam_size'" translate --model m.ckpt --beam ""
refuses 2 "invalid value '1e3' for --steps" bench --steps 1e3
refuses 2 "invalid value '-1' for --warmup" bench --warmup -1
refuses 2 "invalid value '2.5' for --sentences" bench --decode --sentences 2.5
refuses 2 "invalid value '99999999999' for 'max_len'" train --max-len 99999999999
refuses 2 "--hyp is empty" eval --hyp "" --ref r.txt
refuses 2 "--model is empty" eval --model "" --split valid
refuses 2 "--data-dir is empty" eval --model m.ckpt --split valid --data-dir ""
refuses 1 "data_dir is empty" prepare --corpus c.tsv --data-dir ""   # prepare: 1 for every setting error
refuses 2 "control character" prepare --corpus $'c.tsv\r' --data-dir d
refuses 2 "--out is empty" attention --model m.ckpt --src hola --out ""
# Nothing was created for any of them.
check_empty=$(cd "$TMP" && ls -A | grep -v '^out$\|^err$')
if [ -z "$check_empty" ]; then passed=$((passed + 1)); else failed=$((failed + 1)); echo "FAIL: files created: $check_empty" >&2; fi

echo "$passed passed, $failed failed"
[ $failed -eq 0 ]
