#!/usr/bin/env bash
# test_serve_cli.sh — `projmt serve` over loopback with curl, on a tiny
# checkpoint: every endpoint (/translate as JSON and as a form, /languages,
# /health, /metrics, /info with the model card's score rows, the page),
# translations equal to `projmt translate` on the same lines (string,
# array, multi-line, beam 1, alternatives = n-best), the cross-attention
# field (a text of several sentences: each one's in its own block), every
# error case (bad JSON, missing fields, language pair, format,
# beam and alternatives ranges, sentences and characters per request, body
# size by Content-Length and chunked, invalid UTF-8 repaired with a
# warning, 404/405, paths that would reach files), the API key, a slow
# client timed out while others are served, concurrent requests batched
# together with answers equal to `translate`, and SIGTERM answering the
# request in flight before exiting.
set -u
. "$(dirname "${BASH_SOURCE[0]}")/check.sh"
command -v curl > /dev/null || { echo "SKIPPED: curl is not installed (apt-get install curl)"; exit 77; }
source "$(dirname "$0")/serve_fixture.sh"
serve_setup serve "${1:?usage: test_serve_cli.sh BUILD_DIR}"
# expect_error STATUS "message part" METHOD PATH curl-args...
expect_error() {
    local status=$1 part=$2; shift 2
    req "$@"
    check "$1 $2 ${*:3:3}: status $CODE = $status" test "$CODE" = "$status"
    check "$1 $2: JSON error mentions '$part' ($(head -c 200 "$TMP/body"))" \
        test "$(jget "$TMP/body" "'$part' in d['error']" 2> /dev/null)" = True
}

LINES=("the cat sleeps" "she reads a book" "where is the station" "I like green tea")
printf '%s\n' "${LINES[@]}" > "$TMP/lines.txt"
"$PROJMT" translate --model "$MODEL" --threads 1 -i "$TMP/lines.txt" -o "$TMP/expected.txt" 2> /dev/null
"$PROJMT" translate --model "$MODEL" --threads 1 --beam 1 -i "$TMP/lines.txt" -o "$TMP/expected_b1.txt" 2> /dev/null
"$PROJMT" translate --model "$MODEL" --threads 1 --beam 3 --n-best 3 -i "$TMP/lines.txt" -o "$TMP/nbest.txt" 2> /dev/null
expected() { sed -n "$1p" "$TMP/expected.txt"; }
JSON=(-H 'Content-Type: application/json')

serve_start main --max-sentences 4 --max-chars 50 --max-body 2048 --timeout 2 \
    || { echo "FAIL: the server did not start"; exit 1; }
check "binds 127.0.0.1 by default" grep -q "listening on http://127.0.0.1:$PORT/" "$TMP/main.err"

# ---- GET endpoints ----
req GET /health
check "/health 200" test "$CODE" = 200
check "/health ok" test "$(jget "$TMP/body" "d['status']")" = ok
check "/health is JSON" grep -qi '^content-type: application/json' "$TMP/headers"
req GET /languages
check "/languages 200" test "$CODE" = 200
check "/languages: en -> es, LibreTranslate's shape" \
    test "$(jget "$TMP/body" "[(l['code'], l['name'], l['targets']) for l in d]")" = "[('en', 'English', ['es']), ('es', 'Spanish', [])]"
req GET /info
check "/info 200" test "$CODE" = 200
check "/info: parameters" test "$(jget "$TMP/body" "d['parameters']")" -gt 1000
check "/info: attention per site" test "$(jget "$TMP/body" "d['attention']['decoder_cross']")" = projection
check "/info: model config" test "$(jget "$TMP/body" "d['config']['d_model']")" = 16
check "/info: limits" test "$(jget "$TMP/body" "d['limits']['max_sentences']")" = 4
req GET /
check "/ 200" test "$CODE" = 200
check "/ is HTML" grep -qi '^content-type: text/html' "$TMP/headers"
check "/ forbids external assets (CSP)" grep -qi "^content-security-policy: default-src 'none'" "$TMP/headers"
check "/ has the heatmap and the text box" grep -q 'id="heatmap"' "$TMP/body"
check "/ has no external asset" test "$(grep -Ec '(src|href)="(https?:)?//' "$TMP/body")" -eq 0
req HEAD /health -I
check "HEAD /health 200" test "$CODE" = 200

# ---- translations equal to `projmt translate` ----
for i in 1 2 3 4; do
    req POST /translate "${JSON[@]}" -d "{\"q\": \"${LINES[i-1]}\", \"source\": \"en\", \"target\": \"es\"}"
    check "JSON q string $i: 200" test "$CODE" = 200
    check "JSON q string $i = translate" test "$(jget "$TMP/body" "d['translatedText']")" = "$(expected $i)"
done
req POST /translate "${JSON[@]}" -d '{"q": ["the cat sleeps", "she reads a book", "", "I like green tea"], "source": "en", "target": "es", "format": "text"}'
check "JSON q array: 200" test "$CODE" = 200
check "JSON q array = translate, empty stays empty" \
    test "$(jget "$TMP/body" "'|'.join(d['translatedText'])")" = "$(expected 1)|$(expected 2)||$(expected 4)"
req POST /translate --data-urlencode "q=where is the station" -d "source=en&target=es"
check "form q: 200" test "$CODE" = 200
check "form q = translate" test "$(jget "$TMP/body" "d['translatedText']")" = "$(expected 3)"
req POST /translate -F "q=the cat sleeps" -F source=en -F target=es
check "multipart form q = translate" test "$(jget "$TMP/body" "d['translatedText']")" = "$(expected 1)"
req POST /translate -d "q=the cat sleeps&q=I like green tea&source=en&target=es"
check "form q repeated = array" test "$(jget "$TMP/body" "'|'.join(d['translatedText'])")" = "$(expected 1)|$(expected 4)"
req POST /translate "${JSON[@]}" -d '{"q": "the cat sleeps\nI like green tea", "source": "en", "target": "es"}'
check "multi-line q: line by line" test "$(jget "$TMP/body" "d['translatedText']")" = "$(expected 1)
$(expected 4)"
req POST /translate "${JSON[@]}" -d '{"q": "she reads a book", "source": "auto", "target": "es"}'
check "source auto answered as en" test "$(jget "$TMP/body" "d['detectedLanguage']['language']")" = en
req POST /translate "${JSON[@]}" -d '{"q": ["the cat sleeps", "she reads a book", "where is the station", "I like green tea"], "source": "en", "target": "es", "beam_size": 1}'
check "beam_size 1 = translate --beam 1" \
    test "$(jget "$TMP/body" "'\n'.join(d['translatedText'])")" = "$(cat "$TMP/expected_b1.txt")"
req POST /translate "${JSON[@]}" -d '{"q": ["the cat sleeps", "she reads a book", "where is the station", "I like green tea"], "source": "en", "target": "es", "beam_size": 3, "alternatives": 2}'
check "alternatives 2, beam 3: 200" test "$CODE" = 200
python3 - "$TMP/body" "$TMP/nbest.txt" > "$TMP/nbest_cmp.txt" <<'PY'
import json, sys
d = json.load(open(sys.argv[1], encoding="utf-8"))
nbest = {}
for line in open(sys.argv[2], encoding="utf-8"):
    i, hyp, _ = line.rstrip("\n").split(" ||| ")
    nbest.setdefault(int(i), []).append(hyp)
served = [[t] + a for t, a in zip(d["translatedText"], d["alternatives"])]
print("same" if served == [nbest[i] for i in range(4)] else f"differ: {served} vs {nbest}")
PY
check "translatedText + alternatives = translate --n-best 3 ($(cat "$TMP/nbest_cmp.txt"))" test "$(cat "$TMP/nbest_cmp.txt")" = same

# ---- the heatmap's cross-attention ----
req POST /translate "${JSON[@]}" -d '{"q": "where is the station", "source": "en", "target": "es", "attention": true}'
check "attention: 200" test "$CODE" = 200
check "attention: translation unchanged" test "$(jget "$TMP/body" "d['translatedText']")" = "$(expected 3)"
A="d['attention']['sentences'][0]"
check "attention: one block for one sentence" test "$(jget "$TMP/body" "len(d['attention']['sentences'])")" = 1
shape=$(jget "$TMP/body" "(len($A['weights']), len($A['target']), len($A['source']), $A['source'][-1], $A['target'][-1])")
check "attention: 2 heads x (output + </s>) x (source + </s>) ($shape)" \
    test "$(jget "$TMP/body" "all(len(h) == len($A['target']) and all(len(r) == len($A['source']) for r in h) for h in $A['weights']) and len($A['weights']) == 2")" = True
check "attention: rows end in </s>" test "$(jget "$TMP/body" "$A['source'][-1] + $A['target'][-1]")" = "</s></s>"
check "attention: every row sums to 1" \
    test "$(jget "$TMP/body" "all(abs(sum(r) - 1) < 2e-3 for h in $A['weights'] for r in h)")" = True
check "attention: weights rounded to 4 decimals" \
    test "$(jget "$TMP/body" "all(round(w, 4) == w for h in $A['weights'] for r in h for w in r)")" = True
# A text of two sentences (cut by the server): each one's attention in a
# block of its own, equal to the block of that sentence sent alone (it was
# translated by itself), never one matrix of the whole text.
req POST /translate "${JSON[@]}" -d '{"q": "Where is the station? The cat sleeps.", "source": "en", "target": "es", "attention": true}'
cp "$TMP/body" "$TMP/att_both.json"
req POST /translate "${JSON[@]}" -d '{"q": "Where is the station?", "source": "en", "target": "es", "attention": true}'
cp "$TMP/body" "$TMP/att_one.json"
req POST /translate "${JSON[@]}" -d '{"q": "The cat sleeps.", "source": "en", "target": "es", "attention": true}'
cp "$TMP/body" "$TMP/att_two.json"
blocks=$(python3 - "$TMP/att_both.json" "$TMP/att_one.json" "$TMP/att_two.json" <<'PY'
import json, sys
both, one, two = (json.load(open(f, encoding="utf-8"))["attention"] for f in sys.argv[1:])
bad = []
if set(both) != {"layer", "site", "sentences"}: bad.append(f"fields {sorted(both)}")
if len(both["sentences"]) != 2: bad.append(f"{len(both['sentences'])} blocks")
for k, alone in enumerate((one, two)):
    if k < len(both["sentences"]) and both["sentences"][k] != alone["sentences"][0]: bad.append(f"block {k}")
print("same" if not bad else ", ".join(bad[:4]))
PY
)
check "attention of two sentences: each one's, in a block of its own ($blocks)" test "$blocks" = same
# An empty line between them has no attention and adds no block.
req POST /translate "${JSON[@]}" -d '{"q": "Where is the station?\n\nThe cat sleeps.", "source": "en", "target": "es", "attention": true}'
check "attention across an empty line: the same blocks" \
    test "$(jget "$TMP/body" "d['attention']")" = "$(jget "$TMP/att_both.json" "d['attention']")"

# ---- invalid UTF-8 is repaired with a warning ----
printf '{"q": "where \xff\xfe is the station", "source": "en", "target": "es"}' > "$TMP/bad_utf8.json"
printf 'where \xff\xfe is the station\n' > "$TMP/bad_utf8.txt"
req POST /translate "${JSON[@]}" --data-binary @"$TMP/bad_utf8.json"
check "invalid UTF-8 (JSON): 200" test "$CODE" = 200
check "invalid UTF-8 (JSON): warning" test "$(jget "$TMP/body" "d['warning']")" = "2 invalid UTF-8 byte(s) replaced by U+FFFD"
check "invalid UTF-8 (JSON): same as translate" \
    test "$(jget "$TMP/body" "d['translatedText']")" = "$("$PROJMT" translate --model "$MODEL" --threads 1 < "$TMP/bad_utf8.txt" 2> /dev/null)"
req POST /translate -d "q=where%FF%FE is the station&source=en&target=es"
check "invalid UTF-8 (form): warning" test "$(jget "$TMP/body" "d['warning']")" = "2 invalid UTF-8 byte(s) replaced by U+FFFD"

# ---- errors: JSON answers with the right status ----
expect_error 400 "bad JSON" POST /translate "${JSON[@]}" -d '{"q": "the cat", '
expect_error 400 "JSON object" POST /translate "${JSON[@]}" -d '["the cat"]'
expect_error 400 "missing q" POST /translate "${JSON[@]}" -d '{"source": "en", "target": "es"}'
expect_error 400 "q must be" POST /translate "${JSON[@]}" -d '{"q": 7, "source": "en", "target": "es"}'
expect_error 400 "q[1] is not a string" POST /translate "${JSON[@]}" -d '{"q": ["a", 2], "source": "en", "target": "es"}'
expect_error 400 "missing target" POST /translate "${JSON[@]}" -d '{"q": "a", "source": "en"}'
expect_error 400 "not supported" POST /translate "${JSON[@]}" -d '{"q": "a", "source": "en", "target": "fr"}'
expect_error 400 "not supported" POST /translate "${JSON[@]}" -d '{"q": "a", "source": "es", "target": "en"}'
expect_error 400 "format" POST /translate "${JSON[@]}" -d '{"q": "a", "source": "en", "target": "es", "format": "html"}'
expect_error 400 "beam_size" POST /translate "${JSON[@]}" -d '{"q": "a", "source": "en", "target": "es", "beam_size": 0}'
expect_error 400 "beam_size" POST /translate "${JSON[@]}" -d '{"q": "a", "source": "en", "target": "es", "beam_size": 99}'
expect_error 400 "alternatives" POST /translate "${JSON[@]}" -d '{"q": "a", "source": "en", "target": "es", "alternatives": 8}'
expect_error 400 "alternatives" POST /translate -d "q=a&source=en&target=es&alternatives=two"
expect_error 400 "attention needs" POST /translate "${JSON[@]}" -d '{"q": ["a"], "source": "en", "target": "es", "attention": true}'
expect_error 400 "sentences" POST /translate "${JSON[@]}" -d '{"q": ["a", "b", "c", "d", "e"], "source": "en", "target": "es"}'
expect_error 400 "sentences" POST /translate "${JSON[@]}" -d '{"q": "a\nb\nc\nd\ne", "source": "en", "target": "es"}'
long=$(printf 'x%.0s' $(seq 51))
expect_error 400 "51 characters" POST /translate "${JSON[@]}" -d "{\"q\": \"$long\", \"source\": \"en\", \"target\": \"es\"}"
fifty=$(printf '\xc3\xb1%.0s' $(seq 50))   # 50 characters in 100 bytes: characters, not bytes, count
req POST /translate "${JSON[@]}" -d "{\"q\": \"$fifty\", \"source\": \"en\", \"target\": \"es\"}"
check "50 two-byte characters are within the limit" test "$CODE" = 200
big=$(printf 'the cat sleeps %.0s' $(seq 200))
expect_error 413 "exceeds the limit of 2048 bytes" POST /translate "${JSON[@]}" -d "{\"q\": \"$big\", \"source\": \"en\", \"target\": \"es\"}"
# A chunked body declares no length: it is cut once it passes the limit
# (libmicrohttpd 0.9 cannot answer in the middle of a body), and counted.
req POST /translate "${JSON[@]}" -H 'Transfer-Encoding: chunked' -d "{\"q\": \"$big\", \"source\": \"en\", \"target\": \"es\"}"
check "chunked body over the limit: cut without an answer (status '$CODE')" test "$CODE" = 000
expect_error 404 "Not found" GET /nope
expect_error 404 "Not found" GET /../../etc/passwd
expect_error 404 "Not found" GET /README.md
expect_error 404 "Not found" GET /translate/../CMakeLists.txt
expect_error 405 "Method not allowed" GET /translate
check "405 names the allowed method" grep -qi '^allow: POST' "$TMP/headers"
expect_error 405 "Method not allowed" POST /health "${JSON[@]}" -d '{}'
req GET /health
check "still healthy after the errors" test "$CODE" = 200

# ---- a slow client is timed out; others are served meanwhile ----
exec 3<> "/dev/tcp/127.0.0.1/$PORT"
printf 'POST /translate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{"q": ' >&3
req POST /translate "${JSON[@]}" -d '{"q": "the cat sleeps", "source": "en", "target": "es"}'
check "served while a slow client waits" test "$(jget "$TMP/body" "d['translatedText']")" = "$(expected 1)"
timeout 60 cat <&3 > /dev/null   # EOF once the server closes the idle connection (--timeout 2)
check "the slow client's connection was closed by the server" test $? -eq 0
exec 3<&-

# ---- metrics count what happened ----
req GET /metrics
check "/metrics 200" test "$CODE" = 200
check "/metrics is Prometheus text" grep -qi '^content-type: text/plain; version=0.0.4' "$TMP/headers"
metric() { awk -v k="$1" '$1 == k { print $2 }' "$TMP/body"; }
check "requests counted by endpoint and code" test "$(metric 'projmt_requests_total{endpoint="/health",code="200"}')" = 3
check "400s counted" test "$(metric 'projmt_requests_total{endpoint="/translate",code="400"}')" = 17
check "413s counted" test "$(metric 'projmt_requests_total{endpoint="/translate",code="413"}')" = 1
check "the cut chunked body counted" test "$(metric 'projmt_connections_closed_total{reason="body_too_large"}')" = 1
check "errors by endpoint (400s, a 413, one 405)" test "$(metric 'projmt_errors_total{endpoint="/translate"}')" = 19
check "latency histogram +Inf = count" \
    test "$(metric 'projmt_request_duration_seconds_bucket{le="+Inf"}')" = "$(metric projmt_request_duration_seconds_count)"
translate_requests=$(awk '$1 ~ /^projmt_requests_total\{endpoint="\/translate"/ { n += $2 } END { print n }' "$TMP/body")
check "every /translate response is in the latency histogram" \
    test "$(metric projmt_request_duration_seconds_count)" = "$translate_requests"
check "batch sizes add up to the sentences" test "$(metric projmt_batch_size_sum)" = "$(metric projmt_sentences_total)"
check "sentences counted (every line of the 200s above)" test "$(metric projmt_sentences_total)" = 35
# ---- sentence splitting (after the counts above) ----
# A text is cut into sentences, as `projmt translate --split-sentences`
# cuts a line: the same joined translation, lines kept apart by '\n'.
printf 'The cat sleeps. She reads a book?\nI like green tea.\n' > "$TMP/para.txt"
"$PROJMT" translate --model "$MODEL" --threads 1 --split-sentences -i "$TMP/para.txt" -o "$TMP/para_split.txt" 2> /dev/null
printf 'The cat sleeps.\nShe reads a book?\nI like green tea.\n' > "$TMP/para_one.txt"
"$PROJMT" translate --model "$MODEL" --threads 1 -i "$TMP/para_one.txt" -o "$TMP/para_one_out.txt" 2> /dev/null
"$PROJMT" translate --model "$MODEL" --threads 1 --split-sentences --batch 1 -i "$TMP/para.txt" \
    -o "$TMP/para_split_b1.txt" 2> /dev/null
check "translate --split-sentences --batch 1: more sentences than the batch, the same text" \
    cmp -s "$TMP/para_split.txt" "$TMP/para_split_b1.txt"
check "translate --split-sentences = its sentences translated alone, joined by a space" \
    test "$(sed -n 1p "$TMP/para_split.txt")" = "$(sed -n 1p "$TMP/para_one_out.txt") $(sed -n 2p "$TMP/para_one_out.txt")"
req POST /translate "${JSON[@]}" -d '{"q": "The cat sleeps. She reads a book?\nI like green tea.", "source": "en", "target": "es"}'
check "a paragraph: 200" test "$CODE" = 200
check "a paragraph: sentence by sentence, = translate --split-sentences" \
    test "$(jget "$TMP/body" "d['translatedText']")" = "$(cat "$TMP/para_split.txt")"
# The character limit is per sentence: three sentences of under 50 in a
# line of 66 pass; the sentence limit counts them (4 here).
req POST /translate "${JSON[@]}" -d '{"q": "The cat sleeps in the sun. She reads a good book. I like tea.", "source": "en", "target": "es"}'
check "a line over --max-chars made of shorter sentences: 200" test "$CODE" = 200
expect_error 400 "sentences" POST /translate "${JSON[@]}" -d '{"q": "A b. C d. E f.\nG h. I j.", "source": "en", "target": "es"}'
serve_stop
check "SIGTERM: exit 0" test $? -eq 0
check "SIGTERM: stopped message" grep -q "projmt serve: stopped" "$TMP/main.err"

# ---- --split-sentences 0: a line is one sentence ----
serve_start nosplit --split-sentences 0 || { echo "FAIL: the server with --split-sentences 0 did not start"; exit 1; }
printf 'The cat sleeps. She reads a book?\n' > "$TMP/para_line.txt"
"$PROJMT" translate --model "$MODEL" --threads 1 -i "$TMP/para_line.txt" -o "$TMP/para_line_out.txt" 2> /dev/null
req POST /translate "${JSON[@]}" -d '{"q": "The cat sleeps. She reads a book?", "source": "en", "target": "es"}'
check "--split-sentences 0: the line whole, = translate" test "$(jget "$TMP/body" "d['translatedText']")" = "$(cat "$TMP/para_line_out.txt")"
serve_stop

# ---- API key ----
serve_start key --api-key s3cret-key || { echo "FAIL: the keyed server did not start"; exit 1; }
BODY='"q": "the cat sleeps", "source": "en", "target": "es"'
expect_error 403 "Invalid API key" POST /translate "${JSON[@]}" -d "{$BODY}"
expect_error 403 "Invalid API key" POST /translate "${JSON[@]}" -d "{$BODY, \"api_key\": \"s3cret-kez\"}"
expect_error 403 "Invalid API key" POST /translate "${JSON[@]}" -d "{$BODY, \"api_key\": \"s3cret-key-and-more\"}"
req POST /translate "${JSON[@]}" -d "{$BODY, \"api_key\": \"s3cret-key\"}"
check "api_key field accepted" test "$(jget "$TMP/body" "d['translatedText']")" = "$(expected 1)"
req POST /translate "${JSON[@]}" -H 'Authorization: Bearer s3cret-key' -d "{$BODY}"
check "Bearer header accepted" test "$(jget "$TMP/body" "d['translatedText']")" = "$(expected 1)"
req GET /info
check "/info says a key is required" test "$(jget "$TMP/body" "d['api_key_required']")" = True
serve_stop

# ---- the model card's score lines in /info ----
cat > "$TMP/card.md" <<'CARD'
# A card

Scored with sacreBLEU-exact BLEU and chrF (this prose line has no number list mark).

| | fp32 | int8 |
|---|---|---|
| test BLEU (2,000 sentences) | 44.55 | 44.62 |
| test chrF | 63.85 | 63.96 |
| file size | 28 MB | 7.5 MB |

| candidate | valid BLEU |
|---|---|
| avg | 46.22 |

- FLORES-200 dev scores 3.1 BLEU: out of domain.
- no score named here 12
CARD
serve_start card --card "$TMP/card.md" || { echo "FAIL: the server with a card did not start"; exit 1; }
req GET /info
check "/info: the card's file" test "$(jget "$TMP/body" "d['card']['file']")" = card.md
check "/info: the card's score rows, each value after its column" \
  test "$(jget "$TMP/body" "' | '.join(d['card']['scores'])")" = \
  "test BLEU (2,000 sentences): fp32 44.55 · int8 44.62 | test chrF: fp32 63.85 · int8 63.96 | FLORES-200 dev scores 3.1 BLEU: out of domain."
serve_stop

# ---- concurrent requests share a batch; SIGTERM answers the one in flight ----
serve_start batch --max-batch 8 --max-wait-ms 3000 || { echo "FAIL: the batching server did not start"; exit 1; }
clients=()
for k in $(seq 0 7); do
    i=$((k % 4 + 1))
    curl -s -o "$TMP/c$k.json" -H 'Content-Type: application/json' \
        -d "{\"q\": \"${LINES[i-1]}\", \"source\": \"en\", \"target\": \"es\"}" "http://127.0.0.1:$PORT/translate" &
    clients+=($!)
done
wait "${clients[@]}"
same=0
for k in $(seq 0 7); do
    [ "$(jget "$TMP/c$k.json" "d['translatedText']")" = "$(expected $((k % 4 + 1)))" ] && same=$((same + 1))
done
check "8 concurrent requests answered, all equal to translate ($same)" test "$same" -eq 8
req GET /metrics
check "the 8 sentences were decoded in one batch" test "$(metric 'projmt_batch_size_bucket{le="4"}') $(metric projmt_batch_size_count)" = "0 1"
curl -s -o "$TMP/inflight.json" -H 'Content-Type: application/json' \
    -d '{"q": "she reads a book", "source": "en", "target": "es"}' "http://127.0.0.1:$PORT/translate" &
client=$!
for _ in $(seq 600); do   # until the request is in flight (the /metrics request counts itself too)
    req GET /metrics
    [ "$(metric projmt_in_flight_requests)" = 2 ] && break
    sleep 0.05
done
kill -TERM "$SERVE_PID"
wait "$client"
check "SIGTERM: the request in flight was answered" test "$(jget "$TMP/inflight.json" "d['translatedText']")" = "$(expected 2)"
wait "$SERVE_PID"
check "SIGTERM with a request in flight: exit 0" test $? -eq 0
SERVE_PID=""
curl -s -o /dev/null "http://127.0.0.1:$PORT/health"
check "nothing listens after the exit" test $? -ne 0

# ---- startup failures: each must exit with its status, not start serving
# (timeout ends a server that wrongly started: status 124, a failure) ----
timeout 60 "$PROJMT" serve --model "$TMP/none.ckpt" --port 0 --threads 1 2> "$TMP/e1.txt"
check "missing model: exit 1 (got $?)" test $? -eq 1
check "missing model fails naming it" grep -q "none.ckpt" "$TMP/e1.txt"
timeout 60 "$PROJMT" serve --port 0 2> /dev/null
check "no --model is a usage error (got $?)" test $? -eq 2
timeout 60 "$PROJMT" serve --model "$MODEL" --port 0 --threads 1 --max-beam 2 2> "$TMP/e2.txt"
check "default beam above --max-beam is refused (got $?)" test $? -eq 1
timeout 60 "$PROJMT" serve --model "$MODEL" --port 0 --threads 1 --card "$TMP/no-card.md" 2> "$TMP/e3.txt"
check "missing --card: exit 1 (got $?)" test $? -eq 1
check "missing --card fails naming it" grep -q "no-card.md" "$TMP/e3.txt"

finish
