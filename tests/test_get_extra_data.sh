#!/usr/bin/env bash
# test_get_extra_data.sh — scripts/get_extra_data.sh and its converters
# (scripts/extra_corpora.py), offline and without the shared corpora:
#   - the search order and the error messages, on copies of the scripts inside
#     a throw-away "repository" (so the real ../shared/data next to this
#     checkout cannot be found by accident) and tiny made-up .tsv.gz files;
#   - each converter on tiny hand-made inputs (an HTML page pair, a pair of
#     imp exports, a .po file), all text made up here;
#   - a whole rebuild with a stand-in apt-get (serving .deb files built here
#     with dpkg-deb) and a stand-in mod2imp, and its failures.
# Usage: bash test_get_extra_data.sh <build-dir>   (the build dir is not needed)
set -uo pipefail

src=${PROJMT_SOURCE_DIR:-$(cd "$(dirname "$0")/.." && pwd)}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/projmt-extra-data-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
. "$src/tests/check.sh"   # ok, fail, finish, run_script
command -v python3 >/dev/null 2>&1 || { echo "skip: python3 missing"; exit 77; }

repo="$tmp/repo"
mkdir -p "$repo/scripts"
cp "$src/scripts/get_extra_data.sh" "$src/scripts/extra_corpora.py" "$repo/scripts/"
conv="$repo/scripts/extra_corpora.py"

# get [VAR=value...] -- ARGS...: runs the copied script with a clean
# environment plus the VAR=value words; sets $out (stdout), $err, $status.
get() { run_script "PROJMT_EXTRA_DIR PROJMT_DATA_DIR PROJMT_NO_DOWNLOAD PROJMT_MOD2IMP" "$repo/scripts/get_extra_data.sh" "$@"; }
expect_dir() {  # NAME DIR
  if [ $status -eq 0 ] && [ "$(tail -n 1 <<<"$out")" = "$2" ]; then ok
  else fail "$1: status $status, stdout '$out', stderr: $err"; fi
}
# Here-strings, not `echo | grep -q` (see tests/test_shell_lint.sh).
expect_error() {  # NAME STATUS PATTERN
  if [ $status -eq "$2" ] && grep -Eq -- "$3" <<<"$err"; then ok
  else fail "$1: status $status (want $2), stderr lacks /$3/: $err"; fi
}
expect_in_err() {  # NAME PATTERN
  if grep -Eq -- "$2" <<<"$err"; then ok; else fail "$1: stderr lacks /$2/: $err"; fi
}
# same NAME FILE.tsv.gz EXPECTED.tsv: the gzip'd file holds exactly those lines.
same() {
  if [ -f "$2" ] && diff <(gzip -cd "$2") "$3" > "$tmp/diff"; then ok
  else fail "$1: $2 differs from the expected lines: $(cat "$tmp/diff" 2>/dev/null)"; fi
}

# make_set DIR [pydocs]: tiny made-up corpora in the shared layout.
make_set() {
  mkdir -p "$1"
  printf 'Open the box.\tAbra la caja.\n' | gzip -n > "$1/lohelp.en-es.tsv.gz"
  printf 'Book 1:1\tThe lamp was lit.\tLa lámpara fue encendida.\n' | gzip -n > "$1/bible.en-es.tsv.gz"
  [ "${2:-}" != pydocs ] || printf 'Call the helper.\tLlame al ayudante.\n' | gzip -n > "$1/pydocs.en-es.tsv.gz"
}

# ------------------------------------------------------------ search order
make_set "$tmp/given" pydocs
make_set "$tmp/env" pydocs
make_set "$tmp/datadir/extra-en-es" pydocs
make_set "$tmp/partial"                      # no pydocs
mkdir -p "$tmp/empty" "$tmp/bad"
printf 'not gzip\tat all\n' > "$tmp/bad/lohelp.en-es.tsv.gz"
printf 'Book 1:1\tonly two columns\n' | gzip -n > "$tmp/bad/bible.en-es.tsv.gz"

get -- "$tmp/given";                             expect_dir "dir argument" "$tmp/given"
get PROJMT_EXTRA_DIR="$tmp/env" --;              expect_dir "PROJMT_EXTRA_DIR" "$tmp/env"
get PROJMT_EXTRA_DIR="$tmp/env" -- "$tmp/given"; expect_dir "argument before PROJMT_EXTRA_DIR" "$tmp/given"
get PROJMT_DATA_DIR="$tmp/datadir" --;           expect_dir "PROJMT_DATA_DIR" "$tmp/datadir/extra-en-es"
get PROJMT_EXTRA_DIR="$tmp/env" PROJMT_DATA_DIR="$tmp/datadir" --
expect_dir "PROJMT_EXTRA_DIR before PROJMT_DATA_DIR" "$tmp/env"
get -- "$tmp/partial";                           expect_dir "pydocs missing is not an error" "$tmp/partial"
expect_in_err "pydocs missing is said, with the way to get it" "no pydocs.en-es.tsv.gz.*|--pydocs-po"
get -- "$tmp/empty";                             expect_error "dir without the files" 1 "empty.*lacks.*lohelp.*bible"
expect_in_err "how to fix" "to fix"
get -- "$tmp/bad";                               expect_error "not gzip / too few columns" 1 "lacks.*lohelp.en-es.tsv.gz.*bible.en-es.tsv.gz"
get -- "$tmp/nowhere";                           expect_error "missing dir argument" 1 "nowhere.*not a directory"
get PROJMT_EXTRA_DIR="$tmp/empty" --;            expect_error "PROJMT_EXTRA_DIR without files" 1 "PROJMT_EXTRA_DIR"
get PROJMT_DATA_DIR="$tmp/empty" --;             expect_error "PROJMT_DATA_DIR without extra-en-es" 1 "extra-en-es.*PROJMT_DATA_DIR"
get -- --no-rebuild;                             expect_error "nothing found, no rebuild" 1 "rebuilding is disabled"
expect_in_err "names where it looked" "looked in:.*shared/data/extra-en-es.*data/raw/extra-en-es"
get PROJMT_NO_DOWNLOAD=1 --;                     expect_error "PROJMT_NO_DOWNLOAD" 1 "rebuilding is disabled"
get -- --bogus;                                  expect_error "unknown option" 2 "unknown option"
get -- "$tmp/given" "$tmp/env";                  expect_error "two dirs" 2 "at most one DIR"
get -- --rebuild "$tmp/given";                   expect_error "--rebuild with a DIR" 2 "take no DIR"
get -- --pydocs-po;                              expect_error "--pydocs-po without DIR" 2 "needs a directory"
get -- --pydocs-po "$tmp/nowhere";               expect_error "--pydocs-po not a dir" 1 "nowhere.*not a directory"
get -- --pydocs-po "$tmp/empty";                 expect_error "--pydocs-po without .po" 1 "holds no .po files"
get -- --help
if [ $status -eq 0 ] && grep -q "Exit status" <<<"$out"; then ok; else fail "--help: $status $out"; fi

# implicit places: an incomplete one is skipped, shared before data/raw
make_set "$repo/data/raw/extra-en-es" pydocs
get -- --no-rebuild;                             expect_dir "earlier rebuild" "$repo/data/raw/extra-en-es"
mkdir -p "$tmp/shared/data/extra-en-es"
get -- --no-rebuild;                             expect_dir "incomplete shared skipped" "$repo/data/raw/extra-en-es"
expect_in_err "incomplete shared is named" "skipping .*shared/data/extra-en-es"
make_set "$tmp/shared/data/extra-en-es" pydocs
get -- --no-rebuild;                             expect_dir "shared before data/raw" "$tmp/shared/data/extra-en-es"
rm -rf "$tmp/shared" "$repo/data"

# ------------------------------------------------------------ converters
# lohelp: a made-up page pair. A switch shows its default variant (hidden,
# no class) or else its first; <br> is a space; an id used twice for two
# texts is told apart by the unit before it (the Spanish page orders the
# sections differently) or left out; same text both sides is untranslated.
mkdir -p "$tmp/lo/en/text" "$tmp/lo/es/text" "$tmp/lo/en/only"
cat > "$tmp/lo/en/text/page.html" <<'EOF'
<html><head><title>Page</title><script>var x = "<p id='s1'>no</p>";</script></head><body>
<h1 id="hd_1">Making &amp; Breaking</h1>
<p id="par_1" class="paragraph">Choose <span id="sw1" class="switchinline"><span hidden="true" id="MAC1" class="MAC">Fruit - Settings</span><span hidden="true" id="default1">Tools - Settings</span></span> - Colors.</p>
<p id="par_2">Line one<br>line two</p>
<p id="par_3">Press <span id="sw2" class="switch"><span hidden="true" id="WR2" class="WRITER">Key A</span><span hidden="true" id="CA2" class="CALC">Key B</span></span> now.</p>
<p id="par_4">Widget</p>
<div><p id="par_5" class="x">Red is warm.</p><p id="par_6" class="x">The table ends.</p></div>
<p id="par_7" class="x">Blue is cold.</p><p id="par_6" class="x">The sky is big.</p>
<table><tr><td><p id="par_8">Cell text</p></td></tr></table>
<p id="par_9">Not in Spanish</p>
</body></html>
EOF
cat > "$tmp/lo/es/text/page.html" <<'EOF'
<html><body>
<h1 id="hd_1">Hacer y romper</h1>
<p id="par_1" class="paragraph">Vaya a <span id="sw1" class="switchinline"><span hidden="true" id="MAC1" class="MAC">Fruta ▸ Ajustes</span><span hidden="true" id="default1">Herramientas ▸ Ajustes</span></span> ▸ Colores.</p>
<p id="par_2">Línea uno<br>línea dos</p>
<p id="par_3">Pulse <span id="sw2" class="switch"><span hidden="true" id="WR2" class="WRITER">Tecla A</span><span hidden="true" id="CA2" class="CALC">Tecla B</span></span> ahora.</p>
<p id="par_4">Widget</p>
<p id="par_7" class="x">El azul es frío.</p><p id="par_6" class="x">El cielo es grande.</p>
<div><p id="par_5" class="x">El rojo es cálido.</p><p id="par_6" class="x">La tabla termina.</p></div>
<table><tr><td><p id="par_8">Texto de celda</p></td></tr></table>
</body></html>
EOF
printf '<p id="par_1">Only English page</p>\n' > "$tmp/lo/en/only/page.html"
cp "$tmp/lo/en/text/page.html" "$tmp/lo/en/text/copy.html"   # the same pairs again: dropped as duplicates
cp "$tmp/lo/es/text/page.html" "$tmp/lo/es/text/copy.html"
cat > "$tmp/lo/want.tsv" <<'EOF'
Making & Breaking	Hacer y romper
Choose Tools - Settings - Colors.	Vaya a Herramientas ▸ Ajustes ▸ Colores.
Line one line two	Línea uno línea dos
Press Key A now.	Pulse Tecla A ahora.
Red is warm.	El rojo es cálido.
The table ends.	La tabla termina.
The sky is big.	El cielo es grande.
Blue is cold.	El azul es frío.
Cell text	Texto de celda
EOF
if python3 "$conv" lohelp "$tmp/lo/en" "$tmp/lo/es" "$tmp/lo.tsv.gz" 2> "$tmp/lo.log"; then ok; else fail "lohelp converter: $(cat "$tmp/lo.log")"; fi
same "lohelp converter" "$tmp/lo.tsv.gz" "$tmp/lo/want.tsv"
grep -q "untranslated 2, duplicate 9" "$tmp/lo.log" && ok || fail "lohelp summary: $(cat "$tmp/lo.log")"
python3 "$conv" lohelp "$tmp/lo/en" "$tmp/lo/es" "$tmp/lo2.tsv.gz" 2> /dev/null
cmp -s "$tmp/lo2.tsv.gz" "$tmp/lo.tsv.gz" && ok || fail "lohelp output not byte-identical on a second run"

# bible: made-up imp exports. Headings and ":0" intros are left out, notes
# dropped (a space where one sat between two words), tags removed, entities
# decoded; only references in both are joined.
cat > "$tmp/en.imp" <<'EOF'
$$$[ Module Heading ]

$$$Book 0:0
<title>Front matter</title>
$$$Book 1:0
<chapter n="1"/>
$$$Book 1:1
<w lemma="x">The</w> <w>lamp</w><note placement="foot">a made-up note</note><w>was</w> lit&#8230;
$$$Book 1:2
<l sID="a"/>The door<l eID="a"/><l sID="b"/>opened,<note type="x">n</note> slowly.<l eID="b"/>
$$$Book 1:3
Only English.
$$$Other Book 2:10
<q who="x">“Go,”</q> <transChange>he</transChange> said.
EOF
cat > "$tmp/es.imp" <<'EOF'
$$$[ Module Heading ]
$$$Book 1:1
<w lemma="x">La</w> lámpara &amp; la luz
se encendió.
$$$Book 1:2
La puerta se abrió.
$$$Other Book 2:10
“Vete,” dijo.
EOF
printf '%s\t%s\t%s\n' \
  "Book 1:1" "The lamp was lit…" "La lámpara & la luz se encendió." \
  "Book 1:2" "The door opened, slowly." "La puerta se abrió." \
  "Other Book 2:10" "“Go,” he said." "“Vete,” dijo." > "$tmp/bible.want"
if python3 "$conv" bible "$tmp/en.imp" "$tmp/es.imp" "$tmp/bible.tsv.gz" 2> "$tmp/bible.log"; then ok; else fail "bible converter: $(cat "$tmp/bible.log")"; fi
same "bible converter" "$tmp/bible.tsv.gz" "$tmp/bible.want"

# pydocs: a made-up .po file. The header, fuzzy, obsolete, plural and
# untranslated entries are left out; continued strings joined, escapes
# decoded, tabs and newlines made spaces.
mkdir -p "$tmp/po/library" "$tmp/po/.git"
cat > "$tmp/po/library/made.po" <<'EOF'
# A made-up translation file.
msgid ""
msgstr ""
"Content-Type: text/plain; charset=UTF-8\n"
"Language: es\n"

#: ../Doc/library/made.rst:1
msgid "Use :func:`spin` to turn the wheel."
msgstr "Use :func:`spin` para girar la rueda."

#: ../Doc/library/made.rst:5
msgid ""
"A long paragraph that goes on "
"over two lines."
msgstr ""
"Un párrafo largo que sigue "
"en dos líneas."

#, fuzzy
msgid "A guess."
msgstr "Una suposición."

#, python-format
msgid "Say \"%s\"\tnow\\n"
msgstr "Diga \"%s\"\tahora\\n"

msgid "Not yet translated."
msgstr ""

msgctxt "menu"
msgid "File"
msgstr "Archivo"

msgid "one egg"
msgid_plural "%d eggs"
msgstr[0] "un huevo"
msgstr[1] "%d huevos"

msgid "Two\nlines."
msgstr "Dos\nlíneas."
#, fuzzy
msgid "Right after, no blank line."
msgstr "Justo después."

#~ msgid "Gone."
#~ msgstr "Ido."
EOF
printf 'msgid "Hidden"\nmsgstr "Oculto"\n' > "$tmp/po/.git/skip.po"   # dot-dirs are not read
printf '%s\t%s\n' \
  'Use :func:`spin` to turn the wheel.' 'Use :func:`spin` para girar la rueda.' \
  'A long paragraph that goes on over two lines.' 'Un párrafo largo que sigue en dos líneas.' \
  'Say "%s" now\n' 'Diga "%s" ahora\n' \
  'File' 'Archivo' \
  'Two lines.' 'Dos líneas.' > "$tmp/po.want"
if python3 "$conv" pydocs "$tmp/po" "$tmp/po.tsv.gz" --polib none 2> "$tmp/po.log"; then ok; else fail "pydocs converter: $(cat "$tmp/po.log")"; fi
same "pydocs converter (stdlib reader)" "$tmp/po.tsv.gz" "$tmp/po.want"
polib_dir=""
if python3 -c 'import polib' >/dev/null 2>&1; then polib_dir=auto
elif [ -f /usr/lib/python3/dist-packages/polib.py ]; then polib_dir=/usr/lib/python3/dist-packages; fi
if [ -n "$polib_dir" ]; then
  if python3 "$conv" pydocs "$tmp/po" "$tmp/po-polib.tsv.gz" --polib "$polib_dir" 2> "$tmp/po.log"; then ok; else fail "pydocs with polib: $(cat "$tmp/po.log")"; fi
  same "pydocs converter (polib) agrees" "$tmp/po-polib.tsv.gz" "$tmp/po.want"
else
  echo "note: polib not available, only the stdlib .po reader checked"
fi
# a malformed line drops its entry, not the file
mkdir -p "$tmp/po2"
printf 'msgid "Good."\nmsgstr "Bueno."\n\nmsgid "Bad."\nmsgstr Malo."\n\nmsgid "Also good."\nmsgstr "También."\n' > "$tmp/po2/x.po"
printf 'Good.\tBueno.\nAlso good.\tTambién.\n' > "$tmp/po2.want"
python3 "$conv" pydocs "$tmp/po2" "$tmp/po2.tsv.gz" --polib none 2> "$tmp/po2.log"
same "malformed .po entry dropped" "$tmp/po2.tsv.gz" "$tmp/po2.want"
grep -q "x.po:5: not a .po line" "$tmp/po2.log" && ok || fail "malformed line not reported: $(cat "$tmp/po2.log")"
python3 "$conv" pydocs "$tmp/empty" "$tmp/none.tsv.gz" 2> "$tmp/none.log"
[ $? -eq 1 ] && grep -q "no .po files" "$tmp/none.log" && [ ! -e "$tmp/none.tsv.gz" ] && ok || fail "pydocs on an empty dir: $(cat "$tmp/none.log")"

# ------------------------------------------------------------ a whole rebuild, offline
if command -v dpkg-deb >/dev/null 2>&1; then
  debs="$tmp/debs" stub="$tmp/stub"
  mkdir -p "$debs" "$stub"
  # deb PACKAGE DIR: a .deb of DIR's tree.
  deb() {
    mkdir -p "$2/DEBIAN"
    printf 'Package: %s\nVersion: 1.0-test\nArchitecture: all\nMaintainer: Test <t@example.org>\nDescription: made-up\n' "$1" > "$2/DEBIAN/control"
    dpkg-deb --root-owner-group -Zgzip --build "$2" "$debs/${1}_1.0-test_all.deb" > /dev/null || fail "dpkg-deb --build $1"
  }
  h=usr/share/libreoffice/help
  mkdir -p "$tmp/t-en/$h/en-US" "$tmp/t-es/$h/es"
  cp -r "$tmp/lo/en/text" "$tmp/t-en/$h/en-US/"
  cp -r "$tmp/lo/es/text" "$tmp/t-es/$h/es/"
  deb libreoffice-help-en-us "$tmp/t-en"
  deb libreoffice-help-es "$tmp/t-es"
  for m in web:MadeUpEn sparv:MadeUpEs; do
    mkdir -p "$tmp/t-${m%%:*}/usr/share/sword/mods.d"
    printf '# made up\n[%s]\nDataPath=./modules/texts/ztext/x/\n' "${m#*:}" > "$tmp/t-${m%%:*}/usr/share/sword/mods.d/x.conf"
    deb "sword-text-${m%%:*}" "$tmp/t-${m%%:*}"
  done
  cp "$tmp/en.imp" "$tmp/MadeUpEn.imp"
  cp "$tmp/es.imp" "$tmp/MadeUpEs.imp"
  # apt-get stand-in: `[-o X]... download PKG...` copies the made-up .debs
  # into the current directory; an unknown package fails as apt does.
  cat > "$stub/apt-get" <<EOF
#!/usr/bin/env bash
while [ "\$1" = -o ]; do shift 2; done
[ "\$1" = download ] || { echo "stub apt-get: only download" >&2; exit 100; }
shift
[ -z "\${STUB_APT_FAIL:-}" ] || { echo "E: Failed to fetch (stub)" >&2; exit 100; }
for p in "\$@"; do
  cp "$debs/\${p}"_*.deb . 2>/dev/null || { echo "E: Unable to locate package \$p" >&2; exit 100; }
done
EOF
  # mod2imp stand-in: exports MODULE only when SWORD_PATH's mods.d names it.
  cat > "$stub/mod2imp" <<EOF
#!/usr/bin/env bash
grep -qx "\\[\$1\\]" "\$SWORD_PATH"/mods.d/*.conf 2>/dev/null || { echo "mod2imp: Couldn't find module: \$1" >&2; exit 255; }
cat "$tmp/\$1.imp"
EOF
  chmod +x "$stub/apt-get" "$stub/mod2imp"
  raw="$repo/data/raw/extra-en-es"
  P="PATH=$stub:$PATH"

  get "$P" PROJMT_MOD2IMP="$stub/mod2imp" -- --rebuild
  expect_dir "rebuild" "$raw"
  same "rebuilt lohelp" "$raw/lohelp.en-es.tsv.gz" "$tmp/lo/want.tsv"
  same "rebuilt bible" "$raw/bible.en-es.tsv.gz" "$tmp/bible.want"
  expect_in_err "rebuild without --pydocs-po says pydocs is skipped" "no pydocs.en-es.tsv.gz"
  grep -q "sword-text-web Version: 1.0-test" "$raw/BUILD-INFO.txt" 2>/dev/null && ok || fail "BUILD-INFO.txt lacks the package versions"
  [ -z "$(find "$raw" -mindepth 1 ! -name '*.tsv.gz' ! -name BUILD-INFO.txt)" ] && ok || fail "rebuild left work files: $(ls -A "$raw")"
  get "$P" PROJMT_MOD2IMP="$stub/mod2imp" -- --no-rebuild
  expect_dir "rebuild found again" "$raw"

  get "$P" PROJMT_MOD2IMP="$stub/mod2imp" -- --pydocs-po "$tmp/po"
  expect_dir "pydocs added" "$raw"
  same "rebuilt pydocs" "$raw/pydocs.en-es.tsv.gz" "$tmp/po.want"
  expect_in_err "pydocs alone keeps lohelp and bible" "rebuilt pydocs in"

  rm -rf "$repo/data"
  get "$P" PROJMT_MOD2IMP="$stub/mod2imp" --
  expect_dir "rebuild when nothing found" "$raw"
  expect_in_err "says why it rebuilds" "no extra corpora found"

  rm -rf "$repo/data"
  get "$P" PROJMT_MOD2IMP="$tmp/no-such-mod2imp" -- --rebuild
  expect_error "mod2imp missing" 3 "sudo apt-get install libsword-utils"
  [ ! -e "$raw/lohelp.en-es.tsv.gz" ] && ok || fail "a missing tool should stop before any download"
  get "$P" PROJMT_MOD2IMP="$stub/mod2imp" STUB_APT_FAIL=1 -- --rebuild
  expect_error "apt-get download fails" 3 "apt-get download .* failed.*apt-get update"
  : > "$tmp/MadeUpEs.imp"
  get "$P" PROJMT_MOD2IMP="$stub/mod2imp" -- --rebuild
  expect_error "empty export" 3 "could not export module MadeUpEs of sword-text-sparv"
  [ -z "$(ls -A "$raw" 2>/dev/null)" ] && ok || fail "failed rebuilds left files: $(ls -A "$raw")"
else
  echo "note: dpkg-deb missing, the offline rebuild not exercised"
fi

finish
