#!/usr/bin/env python3
"""Prints gradwire, Open MPI and gloo side by side from gradwire-perf and
gloo_perf.py JSON files, with busbw ratios (gradwire / other).

    benchmarks/compare.py results/*.json
"""
import json
import sys
from collections import defaultdict


def main() -> int:
    cells = defaultdict(dict)  # (coll, provider-of-gradwire, bytes) -> impl -> row
    for path in sys.argv[1:]:
        with open(path) as f:
            for row in json.load(f)["rows"]:
                if row.get("available", True) and row["time_us"] > 0:
                    cells[(row["coll"], row["ranks"], row["bytes"])][
                        row["impl"] + ("" if row["impl"] != "gradwire" else f' ({row["provider"]})')
                    ] = row
    if not cells:
        print("compare.py: no rows", file=sys.stderr)
        return 1
    impls = sorted({i for c in cells.values() for i in c})
    ours = [i for i in impls if i.startswith("gradwire")]
    others = [i for i in impls if not i.startswith("gradwire")]
    head = f'{"collective":>15} {"ranks":>5} {"bytes":>11} ' + " ".join(f"{i[:22]:>22}" for i in impls)
    # "shm/mpi": gradwire on shm divided by Open MPI.
    head += "".join(f' {g.split("(")[-1][:-1][:10] + "/" + o[:6]:>18}' for g in ours for o in others)
    print("# busbw in GB/s; ratio columns: gradwire busbw / other busbw (higher is better for gradwire)")
    print(head)
    for key in sorted(cells):
        coll, ranks, nbytes = key
        row = cells[key]
        line = f"{coll:>15} {ranks:>5} {nbytes:>11} "
        line += " ".join(f'{row[i]["busbw_gbs"]:>22.3f}' if i in row else f'{"-":>22}' for i in impls)
        for g in ours:
            for o in others:
                if g in row and o in row and row[o]["busbw_gbs"] > 0:
                    line += f' {row[g]["busbw_gbs"] / row[o]["busbw_gbs"]:>17.2f}x'
                else:
                    line += f'{"-":>19}'
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
