#!/usr/bin/env python3
"""extra_corpora.py — converters behind scripts/get_extra_data.sh: turn the
raw sources of the extra English–Spanish corpora into gzip'd TSV, one pair a
line, in the column layout of ../shared/data/extra-en-es/:

  lohelp EN_DIR ES_DIR OUT   LibreOffice help HTML (libreoffice-help-en-us and
                             libreoffice-help-es, .../help/en-US and .../help/es):
                             paragraphs and headings joined on their shared id
                             (par_id..., hd_id...), tag and class in the file of
                             the same relative path -> English<TAB>Spanish
  bible EN_IMP ES_IMP OUT    two SWORD modules exported by mod2imp (imp format:
                             "$$$Book C:V" lines, each followed by the verse's
                             OSIS text), verses joined on the reference
                             -> reference<TAB>English<TAB>Spanish
  pydocs PO_DIR OUT          gettext .po files under PO_DIR (a checkout of
                             python-docs-es): msgid/msgstr of every entry that
                             is translated, not fuzzy and not obsolete
                             -> English<TAB>Spanish

Python 3 standard library only (html.parser, gzip); pydocs uses polib when it
can be imported (--polib auto, the default, or --polib DIR holding polib.py),
else a small .po reader here that gives the same entries. Tabs and line breaks
inside a text become spaces. The output is written under OUT.tmp and renamed
when complete; gzip's header carries no name and no time, so equal input gives
byte-identical output. A summary goes to stderr. Exit status: 0 done, 1 input
unreadable or nothing to write, 2 usage.
"""
import argparse
import gzip
import html
import importlib.util
import os
import re
import sys
from html.parser import HTMLParser

WS = re.compile(r"\s+")


def log(msg):
    print(f"extra_corpora: {msg}", file=sys.stderr)


def die(msg):
    log(f"error: {msg}")
    raise SystemExit(1)


def one_line(text):
    """Tabs and line breaks (which would break the TSV) become spaces."""
    return text.replace("\t", " ").replace("\r", " ").replace("\n", " ")


def write_tsv_gz(path, rows):
    """Writes rows (tuples of str) as gzip'd TSV under path.tmp, then renames."""
    tmp = path + ".tmp"
    n = 0
    with open(tmp, "wb") as raw:
        # filename='' and mtime=0: no name or date in the header, so the
        # same pairs always give the same bytes.
        with gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0) as gz:
            for row in rows:
                gz.write(("\t".join(one_line(c) for c in row) + "\n").encode("utf-8"))
                n += 1
    os.replace(tmp, path)
    return n


# ---------------------------------------------------------------- lohelp

# Elements whose id names a translatable unit (the help's par_id / hd_id).
UNIT_TAGS = {"p", "h1", "h2", "h3", "h4", "h5", "h6", "td"}
VOID_TAGS = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link",
             "meta", "param", "source", "track", "wbr"}
SKIP_TAGS = {"script", "style", "noscript"}


class Node:
    __slots__ = ("tag", "attrs", "children")

    def __init__(self, tag, attrs):
        self.tag = tag
        self.attrs = attrs
        self.children = []  # str or Node


class TreeBuilder(HTMLParser):
    """A forgiving tree: void elements never open, an end tag closes up to
    the nearest open element of its name, a stray end tag is ignored."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.root = Node("#root", {})
        self.stack = [self.root]

    def handle_starttag(self, tag, attrs):
        node = Node(tag, dict(attrs))
        self.stack[-1].children.append(node)
        if tag not in VOID_TAGS:
            self.stack.append(node)

    def handle_startendtag(self, tag, attrs):
        self.stack[-1].children.append(Node(tag, dict(attrs)))

    def handle_endtag(self, tag):
        for i in range(len(self.stack) - 1, 0, -1):
            if self.stack[i].tag == tag:
                del self.stack[i:]
                return

    def handle_data(self, data):
        self.stack[-1].children.append(data)


def is_switch(node):
    return node.attrs.get("class") in ("switch", "switchinline")


def render(node, out):
    """Appends node's visible text to out. A switch (the help's per-platform
    or per-application variants, all hidden but one chosen by help.js) shows
    its default variant (hidden, no class), else its first variant."""
    if node.tag in SKIP_TAGS:
        return
    if node.tag == "br":
        out.append(" ")
        return
    kids = node.children
    if is_switch(node):
        variants = [k for k in kids if isinstance(k, Node) and "hidden" in k.attrs]
        if variants:
            default = [v for v in variants if not v.attrs.get("class")]
            keep = default[0] if default else variants[0]
            kids = [k for k in kids if not (isinstance(k, Node) and "hidden" in k.attrs) or k is keep]
    for k in kids:
        if isinstance(k, str):
            out.append(k)
        else:
            render(k, out)


def units(path):
    """[(id, tag, class, id of the unit before, text)] of a help page's
    paragraphs and headings with an id, in page order."""
    with open(path, encoding="utf-8") as f:
        src = f.read()
    tb = TreeBuilder()
    tb.feed(src)
    tb.close()
    found = []
    prev = [""]

    def walk(node):
        for k in node.children:
            if isinstance(k, str):
                continue
            if k.tag in UNIT_TAGS and k.attrs.get("id"):
                out = []
                render(k, out)
                text = WS.sub(" ", "".join(out)).strip()
                if text:
                    found.append((k.attrs["id"], k.tag, k.attrs.get("class") or "", prev[0], text))
                prev[0] = k.attrs["id"]
            walk(k)

    walk(tb.root)
    return found


def group(items, fine):
    """{key: [distinct texts]}; the key is (id, tag, class), with the id
    before too when fine."""
    out = {}
    for uid, tag, cls, before, text in items:
        texts = out.setdefault((uid, tag, cls, before) if fine else (uid, tag, cls), [])
        if text not in texts:
            texts.append(text)
    return out


def join_units(en_items, es_items, stats):
    """[(English, Spanish)] of the units one key names unambiguously. The
    help reuses an id where a section is embedded more than once, sometimes
    for another paragraph, and the two languages' pages may order sections
    differently (so n-th occurrences need not match). A key is the id, tag
    and class; where that holds several texts, the id of the unit before is
    added; a key that still holds several texts is left out."""
    pairs = []
    en, es = group(en_items, False), group(es_items, False)
    en_fine = es_fine = None
    for key, en_texts in en.items():
        es_texts = es.get(key)
        if es_texts is None:
            continue
        stats["joined"] += 1
        if len(en_texts) == 1 and len(es_texts) == 1:
            pairs.append((en_texts[0], es_texts[0]))
            continue
        if en_fine is None:
            en_fine, es_fine = group(en_items, True), group(es_items, True)
        for fkey, en_t in en_fine.items():
            if fkey[:3] != key:
                continue
            es_t = es_fine.get(fkey)
            if es_t is not None and len(en_t) == 1 and len(es_t) == 1:
                pairs.append((en_t[0], es_t[0]))
                stats["disambiguated"] += 1
            else:
                stats["ambiguous"] += 1
    return pairs


def lohelp(en_dir, es_dir):
    pages = []
    for root, dirs, files in os.walk(en_dir):
        dirs.sort()
        for fn in sorted(files):
            if fn.endswith(".html"):
                rel = os.path.relpath(os.path.join(root, fn), en_dir)
                pages.append(rel)
    if not pages:
        die(f"no .html pages under {en_dir}")
    stats = {"pages": len(pages), "paired_pages": 0, "joined": 0, "disambiguated": 0, "ambiguous": 0,
             "untranslated": 0, "duplicate": 0}
    seen = set()
    rows = []
    for rel in pages:
        es_path = os.path.join(es_dir, rel)
        if not os.path.isfile(es_path):
            continue
        stats["paired_pages"] += 1
        for en_text, es_text in join_units(units(os.path.join(en_dir, rel)), units(es_path), stats):
            if en_text == es_text:
                stats["untranslated"] += 1
                continue
            if (en_text, es_text) in seen:
                stats["duplicate"] += 1
                continue
            seen.add((en_text, es_text))
            rows.append((en_text, es_text))
    return rows, stats


# ---------------------------------------------------------------- bible

REF = re.compile(r"^.+ \d+:\d+$")
NOTE = re.compile(r"<note\b.*?</note>", re.S)
# Elements that end a line or block: their tags become a space.
BLOCK_TAG = re.compile(r"</?(?:l|lg|lb|div|p|title|item|list|speaker|chapter|milestone)\b[^>]*>")
TAG = re.compile(r"<[^>]*>")
NOTE_MARK = "\x00"


def read_imp(path):
    """{reference: raw text} of an imp file, in file order."""
    verses = {}
    key, buf = None, []
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.startswith("$$$"):
                if key is not None:
                    verses[key] = " ".join(buf)
                key, buf = line[3:].strip(), []
            else:
                buf.append(line.strip())
    if key is not None:
        verses[key] = " ".join(buf)
    return verses


def verse_text(raw):
    """The reading text of a verse's OSIS: notes dropped, tags removed,
    entities decoded. A note sits between two words without a space in the
    modules ("God<note>…</note><w>created"): where one is dropped between a
    non-space and a word, a space takes its place."""
    t = NOTE.sub(NOTE_MARK, raw)
    t = BLOCK_TAG.sub(" ", t)
    t = TAG.sub("", t)
    t = re.sub(NOTE_MARK + r"+(?=[\w“‘(¿¡])", lambda m: " " if m.start() > 0 and not t[m.start() - 1].isspace() else "", t)
    t = t.replace(NOTE_MARK, "")
    return WS.sub(" ", html.unescape(t)).strip()


def load_verses(path):
    out = {}
    for key, raw in read_imp(path).items():
        # headings ("[ Module Heading ]") and book/chapter intros (":0")
        if not REF.match(key) or key.endswith(":0"):
            continue
        text = verse_text(raw)
        if text:
            out[key] = text
    return out


def bible(en_imp, es_imp):
    en, es = load_verses(en_imp), load_verses(es_imp)
    rows = [(k, en[k], es[k]) for k in en if k in es]
    stats = {"verses_en": len(en), "verses_es": len(es), "joined": len(rows)}
    return rows, stats


# ---------------------------------------------------------------- pydocs

PO_KEYWORD = re.compile(r'^(msgctxt|msgid_plural|msgid|msgstr(?:\[\d+\])?)\s+"(.*)"\s*$')
PO_STRING = re.compile(r'^"(.*)"\s*$')
PO_ESCAPE = re.compile(r'\\(\\|n|t|r|")')
PO_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "\\": "\\", '"': '"'}


def po_unescape(s):
    return PO_ESCAPE.sub(lambda m: PO_ESCAPES[m.group(1)], s)


class PoEntry:
    __slots__ = ("msgid", "msgstr", "plural", "flags", "bad")

    def __init__(self):
        self.bad = False
        self.msgid = None
        self.msgstr = None
        self.plural = False
        self.flags = set()


def read_po_stdlib(path):
    """The entries of a .po file (not the obsolete "#~" ones, nor one with a
    malformed line, which is reported on stderr).
    Enough of gettext's format for translation files: comments, "#," flags,
    msgctxt, msgid, msgid_plural, msgstr[N] and continued strings."""
    entries = []
    cur, field = PoEntry(), None

    def finish():
        nonlocal cur, field
        if cur.msgid is not None and not cur.bad:
            entries.append(cur)
        cur, field = PoEntry(), None

    with open(path, encoding="utf-8-sig") as f:
        for lineno, line in enumerate(f, 1):
            s = line.strip()
            if s.startswith("#~"):
                continue
            if not s:
                finish()
                continue
            if s.startswith("#"):
                if field is not None and field.startswith("msgstr"):
                    finish()
                if s.startswith("#,"):
                    cur.flags.update(x.strip() for x in s[2:].split(",") if x.strip())
                continue
            m = PO_KEYWORD.match(s)
            if m:
                kw, val = m.group(1), po_unescape(m.group(2))
                if kw in ("msgctxt", "msgid") and field is not None and field != "msgctxt" \
                        and cur.msgid is not None:
                    finish()
                field = kw
                if kw == "msgid":
                    cur.msgid = val
                elif kw == "msgid_plural":
                    cur.plural = True
                elif kw == "msgstr":
                    cur.msgstr = val
                continue
            m = PO_STRING.match(s)
            if m and field is not None:
                val = po_unescape(m.group(1))
                if field == "msgid":
                    cur.msgid += val
                elif field == "msgstr":
                    cur.msgstr += val
                continue
            # A line gettext would refuse (seen: a msgstr missing its opening
            # quote): the entry is dropped, the rest of the file still read.
            log(f"warning: {path}:{lineno}: not a .po line, entry dropped: {s[:60]!r}")
            cur.bad, field = True, "bad"
    finish()
    return entries


def load_polib(where):
    """polib from the import path (where='auto') or from DIR/polib.py."""
    if where == "none":
        return None
    if where == "auto":
        try:
            import polib  # noqa: F401
            return polib
        except ImportError:
            return None
    spec = importlib.util.spec_from_file_location("polib", os.path.join(where, "polib.py"))
    if spec is None or not os.path.isfile(os.path.join(where, "polib.py")):
        die(f"no polib.py in {where}")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def pydocs(po_dir, polib_where):
    polib = load_polib(polib_where)
    files = []
    for root, dirs, names in os.walk(po_dir):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        files += [os.path.join(root, n) for n in sorted(names) if n.endswith(".po")]
    if not files:
        die(f"no .po files under {po_dir}")
    stats = {"reader": "polib " + polib.__version__ if polib else "stdlib", "po_files": len(files),
             "unreadable": 0, "entries": 0, "fuzzy": 0, "untranslated": 0, "pairs": 0}
    rows = []
    for path in files:
        try:
            if polib:
                entries = [e for e in polib.pofile(path) if not e.obsolete]
                get = lambda e: (e.msgid, e.msgstr, set(e.flags))  # noqa: E731
            else:
                entries = read_po_stdlib(path)
                get = lambda e: (e.msgid, "" if e.plural else (e.msgstr or ""), e.flags)  # noqa: E731
        except (OSError, ValueError, UnicodeDecodeError) as exc:
            log(f"warning: skipping {path}: {exc}")
            stats["unreadable"] += 1
            continue
        for e in entries:
            msgid, msgstr, flags = get(e)
            if not msgid:
                continue
            stats["entries"] += 1
            if "fuzzy" in flags:
                stats["fuzzy"] += 1
                continue
            if not msgstr.strip():
                stats["untranslated"] += 1
                continue
            rows.append((msgid, msgstr))
    stats["pairs"] = len(rows)
    return rows, stats


# ---------------------------------------------------------------- main

def main(argv):
    ap = argparse.ArgumentParser(prog="extra_corpora.py", description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("lohelp", help="LibreOffice help HTML -> English, Spanish")
    p.add_argument("en_dir"), p.add_argument("es_dir"), p.add_argument("out")
    p = sub.add_parser("bible", help="two mod2imp exports -> reference, English, Spanish")
    p.add_argument("en_imp"), p.add_argument("es_imp"), p.add_argument("out")
    p = sub.add_parser("pydocs", help=".po files -> English, Spanish")
    p.add_argument("po_dir"), p.add_argument("out")
    p.add_argument("--polib", default="auto", metavar="auto|none|DIR",
                   help="where polib comes from: the import path, nowhere (the stdlib reader), DIR/polib.py")
    a = ap.parse_args(argv)

    for d in [getattr(a, x) for x in ("en_dir", "es_dir", "po_dir") if hasattr(a, x)]:
        if not os.path.isdir(d):
            log(f"error: {d} is not a directory")
            return 1
    for f in [getattr(a, x) for x in ("en_imp", "es_imp") if hasattr(a, x)]:
        if not os.path.isfile(f):
            log(f"error: {f} is not a file")
            return 1
    if a.cmd == "lohelp":
        rows, stats = lohelp(a.en_dir, a.es_dir)
    elif a.cmd == "bible":
        rows, stats = bible(a.en_imp, a.es_imp)
    else:
        rows, stats = pydocs(a.po_dir, a.polib)
    if not rows:
        log(f"error: {a.cmd}: no pairs ({stats}); nothing written to {a.out}")
        return 1
    n = write_tsv_gz(a.out, rows)
    log(f"{a.cmd}: {n} pairs -> {a.out} (" + ", ".join(f"{k} {v}" for k, v in stats.items()) + ")")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
