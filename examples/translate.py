#!/usr/bin/env python3
"""translate.py — libprojmt from Python: translate lines from stdin (or the arguments).

    PYTHONPATH=python python3 examples/translate.py models/en-es.int8.pmt "Where is the station?"
"""
import sys

import projmt


def main():
    if len(sys.argv) < 2:
        sys.exit("usage: translate.py MODEL [SENTENCE...]  (sentences from stdin when none)")
    sentences = sys.argv[2:] or [line.rstrip("\n") for line in sys.stdin]
    with projmt.Translator(sys.argv[1]) as translator:
        for result in translator.translate_batch(sentences, beam_size=4):
            print(result.hypotheses[0] if result.hypotheses else "")


if __name__ == "__main__":
    main()
