#!/usr/bin/env python3
"""repo_paths.py — paths as named from a repository, so that a committed
study, report or log names no folder of the machine it was made on.

    python3 scripts/repo_paths.py [--repo DIR] FILE...

rewrites every absolute path in each text FILE (in place: a temporary file
renamed over it) relative to DIR (default: this repository); what lies
outside DIR becomes "../...". scripts/compare.sh runs it over a study's
logs and evaluation files; scripts/make_report.py uses the functions.
"""
import argparse
import os
import re
import sys
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# An absolute path: "/" not preceded by a word, dot, tilde or dash (so
# "a/b", "./x", "~/x" and "--x" are left alone), up to a space, quote,
# backquote, semicolon, comma or closing parenthesis.
ABSOLUTE = re.compile(r"(?<![\w.~-])/[^\s'\"`;,)]+")


def repo_relative(path, repo=REPO):
    """path as named from repo ("../" for what lies outside it)."""
    if not path or not os.path.isabs(path):
        return path
    return os.path.relpath(path, repo)


def repo_relative_text(text, repo=REPO):
    """text with every absolute path in it made repo_relative."""
    return ABSOLUTE.sub(lambda m: repo_relative(m.group(0), repo), text)


def rewrite(path, repo):
    with open(path, encoding="utf-8") as f:
        text = f.read()
    new = repo_relative_text(text, repo)
    if new == text:
        return False
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(os.path.abspath(path)), prefix=".repo_paths.")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(new)
        os.chmod(tmp, os.stat(path).st_mode & 0o7777)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise
    return True


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repo", default=REPO, help="the folder paths are named from (default: this repository)")
    ap.add_argument("files", nargs="+")
    args = ap.parse_args()
    repo = os.path.abspath(args.repo)
    for path in args.files:
        try:
            rewrite(path, repo)
        except (OSError, UnicodeDecodeError) as e:
            print(f"repo_paths: {path}: {e}", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
