#!/usr/bin/env bash
# Draws a benchmark results file's newest table as PNGs next to it (gnuplot, Debian's gnuplot-nox):
#   agent workload tables (bench/serve.sh):   NAME-throughput.png  aggregate and per-stream tok/s
#                                             against concurrency; NAME-ttft.png  TTFT p50 / p99
#   decode tables with a split (h200_a3b.sh): NAME-split.png  ms per step of each kernel group, per bucket
#   bash bench/plot.sh RESULTS.md
set -euo pipefail
results=${1:?usage: bash bench/plot.sh RESULTS.md}
command -v gnuplot >/dev/null || { echo "plot: gnuplot is missing (Debian: gnuplot-nox)" >&2; exit 1; }
stem=${results%.md}
data=$(mktemp -d)
trap 'rm -rf "$data"' EXIT
# The newest table of the file (under the '## ' heading with the latest UTC time; the last such table
# where times tie or are absent): its rows as whitespace-separated columns.
kind=$(python3 - "$results" "$data" <<'PY'
import re, sys
lines = open(sys.argv[1]).read().splitlines()
tables, cur, stamp = [], None, ""
for l in lines:
    if l.startswith("## "):
        m = re.search(r"\d{4}-\d\d-\d\dT\d\d:\d\dZ", l)
        stamp = m.group(0) if m else stamp
    if l.startswith("|"):
        cells = [c.strip() for c in l.strip("|").split("|")]
        if cur is None: cur = []
        if not all(re.fullmatch(r"-*:?-+:?", c) for c in cells): cur.append(cells)
    elif cur is not None:
        tables.append((stamp, cur)); cur = None
if cur is not None: tables.append((stamp, cur))
for _, t in sorted(enumerate(tables), key=lambda it: (it[1][0], it[0]), reverse=True):
    t = t[1]
    head = t[0]
    num = lambda s: re.match(r"-?[0-9.]+", s).group(0)
    if head[0] == "clients" and "TTFT p50 / p99 ms" in head:
        with open(f"{sys.argv[2]}/rows", "w") as f:
            for r in t[1:]:
                ttft = r[head.index("TTFT p50 / p99 ms")].split("/")
                f.write(f"{r[0]} {num(r[head.index('agg tok/s')])} {num(r[head.index('per-stream tok/s')])} "
                        f"{num(ttft[0].strip())} {num(ttft[1].strip())}\n")
        print("serve"); break
    if head[0] == "bucket" and "GDN" in head:
        groups = [g for g in ["GDN", "attention", "MoE", "dense", "LM head", "sampling", "norm+embed"] if g in head]
        with open(f"{sys.argv[2]}/rows", "w") as f:
            f.write("bucket " + " ".join(g.replace(" ", "_") for g in groups) + "\n")
            for r in t[1:]:
                f.write(r[0] + " " + " ".join(num(r[head.index(g)]) for g in groups) + "\n")
        print(f"split {len(groups)}"); break
PY
)
title=$(basename "$stem")
case $kind in
  serve)
    gnuplot <<GP
set terminal pngcairo size 900,540 font ",11" noenhanced
set datafile separator whitespace
set logscale x 2
set xlabel "concurrent clients"
set grid
set key top left
set output "$stem-throughput.png"
set title "$title: throughput against concurrency"
set ylabel "tokens/s"
set y2label "tokens/s per stream"
set y2tics
set ytics nomirror
plot "$data/rows" using 1:2 with linespoints lw 2 pt 7 title "aggregate", \
     "" using 1:3 axes x1y2 with linespoints lw 2 pt 5 title "per stream (right axis)"
unset y2tics; unset y2label; set ytics mirror
set output "$stem-ttft.png"
set title "$title: time to first token"
set ylabel "ms"
set logscale y 10
plot "$data/rows" using 1:4 with linespoints lw 2 pt 7 title "TTFT p50", \
     "" using 1:5 with linespoints lw 2 pt 5 title "TTFT p99"
GP
    echo "wrote $stem-throughput.png $stem-ttft.png";;
  split*)
    n=${kind#split }
    gnuplot <<GP
set terminal pngcairo size 900,540 font ",11" noenhanced
set output "$stem-split.png"
set title "$title: decode step split by kernel group"
set style data histograms
set style histogram rowstacked
set style fill solid 0.85 border -1
set boxwidth 0.7
set key outside right top
set xlabel "bucket (streams per step)"
set ylabel "ms per step"
set grid ytics
plot for [i=2:$((n + 1))] "$data/rows" using i:xtic(1) title columnheader(i)
GP
    echo "wrote $stem-split.png";;
  *) echo "plot: no agent-workload or split table in $results" >&2; exit 1;;
esac
