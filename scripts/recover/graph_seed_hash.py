"""Try to find how the per-graph split seeds were derived (hash of some name string -> 32-bit int).
If found, the same keying convention likely drives the SciFact "hash-first" cohort.

Run:  nice -n 10 ../../.venv/bin/python graph_seed_hash.py
"""

import hashlib
import zlib

SEEDS = {"lesmis": 369610197, "adjnoun": 445279631, "football": 1356401253, "dolphins": 3335237670}
TITLES = {
    "lesmis": ["Les Miserables character coappearance", "Les Misérables co-appearance", "lesmis.gml", "lesmis.zip"],
    "adjnoun": ["adjnoun.gml", "adjnoun.zip"],
    "football": ["football.gml", "football.zip"],
    "dolphins": ["dolphins.gml", "dolphins.zip"],
}
TARGET = {v: k for k, v in SEEDS.items()}


def names(g):
    base = [
        g,
        f"graph_{g}",
        f"graph_{g}__d6",
        f"{g}__d6",
        f"graph-{g}",
        f"graph:{g}",
        f"newman_{g}",
        f"newman:{g}",
        f"netdata/{g}",
        f"mejn/{g}",
        g.upper(),
        g.capitalize(),
    ] + TITLES[g]
    out = set(base)
    for b in base:
        for s in ["20260907", "17", "0", "42"]:
            for fmt in [
                "{s}:{b}",
                "{b}:{s}",
                "{s}{b}",
                "{b}{s}",
                "{s}/{b}",
                "{s}-{b}",
                "{b}-{s}",
                "{s}_{b}",
                "{b}_{s}",
                "{s}|{b}",
                "{b}|{s}",
                "{s} {b}",
                "{b} {s}",
                "{b}:split:{s}",
                "{s}:split:{b}",
                "split:{b}:{s}",
                "{b}:split",
                "split:{b}",
                "{b}/split",
                "whatworked:{b}",
                "WhatWorkedBench:{b}",
                "{b}:{s}:split",
                "graph_link_prediction:{b}",
                "graph_link_prediction:{b}:{s}",
                "{s}:graph_link_prediction:{b}",
                "link_prediction:{b}",
                "{b}:link_prediction",
                "{b}:edges",
                "{b}:{s}:edges",
                '[{s}, "{b}"]',
                '["{b}", {s}]',
                '[{s},"{b}"]',
                '["{b}",{s}]',
                '"{b}"',
            ]:
                out.add(fmt.format(s=s, b=b))
    return out


def extracts(d):
    h = d.hex()
    n = int(h, 16)
    return {
        "hex[:8]": int(h[:8], 16),
        "hex[-8:]": int(h[-8:], 16),
        "mod2^32": n % 2**32,
        "le4": int.from_bytes(d[:4], "little"),
        "be4": int.from_bytes(d[:4], "big"),
        "le8mod": int.from_bytes(d[:8], "little") % 2**32,
        "be8mod": int.from_bytes(d[:8], "big") % 2**32,
        "mod2^32-1": n % (2**32 - 1),
        "mod(2^31-1)": n % (2**31 - 1),
        "mod1e10": n % 10**10,
        "mod2^32+": n % 4294967291,
        "hex[:16]mod": int(h[:16], 16) % 2**32,
    }


def main():
    found = 0
    for g in SEEDS:
        for s in names(g):
            b = s.encode()
            digs = {
                a: hashlib.new(a, b).digest()
                for a in ["sha256", "md5", "sha1", "blake2b", "blake2s", "sha512", "sha3_256", "sha224", "sha384"]
            }
            for a, d in digs.items():
                for k, v in extracts(d).items():
                    if v == SEEDS[g]:
                        print("FOUND", g, repr(s), a, k)
                        found += 1
            for a, v in [("crc32", zlib.crc32(b)), ("adler32", zlib.adler32(b))]:
                if v == SEEDS[g]:
                    print("FOUND", g, repr(s), a)
                    found += 1
    print("found", found)


if __name__ == "__main__":
    main()
