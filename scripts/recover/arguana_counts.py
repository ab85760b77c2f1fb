"""Explore which ArguAna original-corpus subsets give the published counts (8567 documents).

Extracts nothing into the repo: pass the directory where the tar.gz was unpacked (default /tmp/wwref_arguana).
Run:  ../../.venv/bin/python arguana_counts.py [/tmp/wwref_arguana]
"""

import glob
import os
import sys
import unicodedata


def norm(t):
    return " ".join(unicodedata.normalize("NFKC", t).casefold().split())


def load(root):
    base = os.path.join(root, "arguana-counterargs-corpus", "02-extracted-arguments")
    items = []
    for path in sorted(glob.glob(os.path.join(base, "*", "*", "*", "*", "*.txt"))):
        rel = os.path.relpath(path, base)
        split, theme, debate, stance, fname = rel.split(os.sep)
        kind = "point" if fname.endswith("-point.txt") else "counter" if fname.endswith("-counter.txt") else "other"
        with open(path, encoding="utf-8", newline="") as fh:
            text = fh.read()
        items.append(dict(split=split, theme=theme, debate=debate, stance=stance, fname=fname, kind=kind, text=text, rel=rel))
    return items


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else "/tmp/wwref_arguana"
    items = load(root)
    print("files", len(items))
    import itertools

    splits = ["training", "validation", "test"]
    for r in range(1, 4):
        for ss in itertools.combinations(splits, r):
            for kinds in [("point",), ("counter",), ("point", "counter")]:
                sel = [i for i in items if i["split"] in ss and i["kind"] in kinds]
                u1 = len({i["text"] for i in sel})
                u2 = len({norm(i["text"]) for i in sel})
                u3 = len({i["text"].strip() for i in sel})
                flag = " <==" if 8567 in (len(sel), u1, u2, u3) else ""
                print(ss, kinds, len(sel), "unique raw", u1, "unique strip", u3, "unique norm", u2, flag)


if __name__ == "__main__":
    main()
