#!/bin/sh
# plot-ladder.sh CSV PNG: draws the kernel ladder from bench_ladder's (or
# `gemmctl bench`'s) CSV (kernel,rung,dtype,precision,m,n,k,ms,tflops,...):
# TFLOP/s (log scale) against the problem size, one line per kernel, one
# panel per input type (bf16 left, fp32 right), so each rung's gain shows
# as the gap to the line below it. fp32 kernels are labelled with their
# precision (auto/tf32, cublas/fp32, ...). Needs gnuplot (gnuplot-nox).
# PNG may also be a stem: "docs/ladder" writes docs/ladder-bf16.png and
# docs/ladder-fp32.png, one file per input type.
set -eu
if [ $# -ne 2 ]; then
    echo "usage: $0 CSV PNG|STEM" >&2
    exit 2
fi
csv=$1
out=$2
command -v gnuplot >/dev/null || {
    echo "plot-ladder.sh: gnuplot not found (apt-get install gnuplot-nox)" >&2
    exit 1
}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# One data file per (dtype, line): "size tflops", in size order; the line's
# label is the kernel (rung number first, for the legend's order), with the
# precision for fp32.
awk -F, -v dir="$tmp" '
NR == 1 {
    for (i = 1; i <= NF; i++) col[$i] = i
    need = "kernel rung dtype precision m n k tflops"
    nn = split(need, w, " ")
    for (i = 1; i <= nn; i++)
        if (!(w[i] in col)) { print "missing column " w[i] > "/dev/stderr"; exit 1 }
    next
}
{
    dt = $col["dtype"]; k = $col["kernel"]; r = $col["rung"]
    label = (r > 0 ? r ". " : "") k
    if (dt == "fp32") label = label " (" $col["precision"] ")"
    key = dt "\t" label
    if (!(key in seen)) {
        seen[key] = ++nlines[dt]
        order = (r > 0 ? r : (k == "cublas" ? 99 : 90))
        printf "%s\t%03d\t%03d\t%s\n", dt, order, seen[key], label >> (dir "/index")
    }
    size = $col["m"] * $col["n"] * $col["k"]
    printf "%.0f %s\n", exp(log(size) / 3), $col["tflops"] >> (dir "/" dt "-" seen[key] ".dat")
}' "$csv"

[ -s "$tmp/index" ] || { echo "plot-ladder.sh: no rows in $csv" >&2; exit 1; }
dtypes=$(cut -f1 "$tmp/index" | sort -u)
ndt=$(echo "$dtypes" | wc -l)

# plot command for one dtype, lines in rung order (auto, cuBLAS last)
plotcmd() {
    sort -t"$(printf '\t')" -k2,2n -k3,3n "$tmp/index" | awk -F'\t' -v dt="$1" -v dir="$tmp" '
    BEGIN { split("#1f77b4 #ff7f0e #2ca02c #d62728 #9467bd #8c564b #e377c2 #17becf #bcbd22 #000000", pal, " ") }
    $1 == dt {
        f = dir "/" dt "-" ($3 + 0) ".dat"
        system("sort -n -o " f " " f)
        # the ladder solid, "auto" dotted, cuBLAS dashed; 10 colours
        style = ($2 + 0 == 99) ? "dt 2 lw 2" : ($2 + 0 == 90) ? "dt 3 lw 2" : "dt 1 lw 1.5"
        n++
        printf "%s\"%s\" using 1:2 with linespoints %s lc rgb \"%s\" title \"%s\"", sep, f, style, pal[(n - 1) % 10 + 1], $4
        sep = ", "
    }'
}

common='set logscale y; set logscale x 2; set grid ytics mytics xtics;
set xlabel "M = N = K"; set ylabel "TFLOP/s"; set key outside right top;
set format y "%g"; set xrange [200:10000];
set xtics ("256" 256, "512" 512, "1024" 1024, "2048" 2048, "4096" 4096, "8192" 8192);'

case "$out" in
*.png)
    {
        echo "set terminal pngcairo size $((900 * ndt)),560 font ',10'"
        echo "set output '$out'"
        echo "$common"
        echo "set multiplot layout 1,$ndt"
        for dt in $dtypes; do
            echo "set title 'GEMM ladder, $dt inputs (H100)'"
            echo "plot $(plotcmd "$dt")"
        done
        echo "unset multiplot"
    } > "$tmp/plot.gp"
    gnuplot "$tmp/plot.gp"
    echo "$out"
    ;;
*)
    for dt in $dtypes; do
        {
            echo "set terminal pngcairo size 900,560 font ',10'"
            echo "set output '$out-$dt.png'"
            echo "$common"
            echo "set title 'GEMM ladder, $dt inputs (H100)'"
            echo "plot $(plotcmd "$dt")"
        } > "$tmp/plot-$dt.gp"
        gnuplot "$tmp/plot-$dt.gp"
        echo "$out-$dt.png"
    done
    ;;
esac
