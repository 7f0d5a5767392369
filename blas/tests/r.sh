#!/bin/sh
# r.sh: R (r-base-core) multiplies through libgemmblas (LD_PRELOAD,
# GEMMBLAS_MIN_FLOPS=0; R calls dgemm_ and zgemm_) against a private gemmd:
# real and complex %*% and crossprod-free products compared in the same R
# with options(matprod = "internal") (R's own loops, no BLAS), then a
# solve() whose LAPACK reaches the forwarded BLAS; gemmd's served counter
# proves the products went there. crossprod(a) is a dsyrk, which must move
# gemmd's syrk counter. Then with Debian's reference LAPACK (liblapack3)
# preloaded too, solve() (dgesv: dtrsm, dgemm) and chol() (dpotrf: dsyrk,
# dtrsm, dgemm) call libgemmblas's level-3 routines, and gemmd's trsm and
# syrk counters must move. Last, check.R again with GEMMBLAS_ZEROCOPY=1
# (some of its products must run with every operand in place), and
# parallel::mclapply's forks with it.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"
command -v Rscript >/dev/null ||
    missing Rscript r-base-core
start_gemmd
cat >"$T/check.R" <<'RS'
set.seed(11)
check <- function(name, a, b, tol) {
    options(matprod = "default"); d <- a %*% b
    options(matprod = "internal"); r <- a %*% b
    options(matprod = "default")
    err <- max(Mod(d - r)) / max(Mod(r))
    cat(sprintf("%-28s relative error %.3g\n", name, err))
    if (!(err <= tol)) stop(paste(name, "differs"))
}
a <- matrix(rnorm(300 * 200), 300); b <- matrix(rnorm(200 * 130), 200)
check("dgemm 300x200x130", a, b, 1e-12)
check("dgemm t(a) 200x300x130", t(a), a[, 1:130], 1e-12)
za <- matrix(complex(real = rnorm(120 * 90), imaginary = rnorm(120 * 90)), 120)
zb <- matrix(complex(real = rnorm(90 * 70), imaginary = rnorm(90 * 70)), 90)
check("zgemm 120x90x70", za, zb, 1e-12)
cp <- crossprod(a)
options(matprod = "internal"); cr <- t(a) %*% a; options(matprod = "default")
err <- max(abs(cp - cr)) / max(abs(cr))
cat(sprintf("%-28s relative error %.3g\n", "crossprod (dsyrk) 200x300", err))
if (!(err <= 1e-12)) stop("crossprod differs")
m <- crossprod(a) + diag(200)
x <- solve(m, rep(1, 200))
res <- max(abs(m %*% x - 1))
cat(sprintf("solve residual %.3g\n", res))
if (!(res < 1e-8)) stop("solve")
cat("R OK\n")
RS
before=$(counter requests_served)
routines_snapshot "$T/r.before"
GEMMBLAS_MIN_FLOPS=0 GEMMBLAS_VERBOSE=1 LD_PRELOAD=$(preload "$GEMMBLAS_LIB") \
    Rscript --vanilla "$T/check.R"
expect_served "$before" 5
expect_routines "$T/r.before" gemm syrk

# a reference LAPACK over libgemmblas: its solves and factorizations
lapack=/usr/lib/x86_64-linux-gnu/lapack/liblapack.so.3
need "$lapack" liblapack3
cat >"$T/lapack.R" <<'RS'
set.seed(12)
n <- 400
a <- matrix(rnorm(n * n), n) + diag(n) * n
x <- solve(a, rep(1, n))
res <- max(abs(a %*% x - 1))
cat(sprintf("solve (dgesv) residual %.3g\n", res))
if (!(res < 1e-10)) stop("solve")
s <- crossprod(a) + diag(n)
r <- chol(s)
err <- max(abs(crossprod(r) - s)) / max(abs(s))
cat(sprintf("chol (dpotrf) relative error %.3g\n", err))
if (!(err < 1e-12)) stop("chol")
cat("LAPACK OK\n")
RS
routines_snapshot "$T/l.before"
GEMMBLAS_MIN_FLOPS=0 GEMMBLAS_VERBOSE=1 \
    LD_PRELOAD="$(preload "$GEMMBLAS_LIB") $lapack" \
    Rscript --vanilla "$T/lapack.R"
expect_routines "$T/l.before" trsm syrk

# the same products with the zero-copy mode on: R's large vectors are
# regions, its %*% runs in place, equal to R's own loops; then forks
# (parallel::mclapply): each child sees the regions as they were, its
# writes stay its own, and the parent's next product is right
GEMMBLAS_MIN_FLOPS=0 LD_PRELOAD=$(preload "$GEMMBLAS_LIB") \
    zerocopy_run Rscript --vanilla "$T/check.R"
cat >"$T/fork.R" <<'RS'
library(parallel)
set.seed(3)
a <- matrix(rnorm(600 * 600), 600); b <- matrix(rnorm(600 * 600), 600)
c0 <- a %*% b
r <- mclapply(1:4, function(i) { a[1, 1] <- i; sum(a %*% b) }, mc.cores = 2)
ref <- sapply(1:4, function(i) { a2 <- a; a2[1, 1] <- i; sum(a2 %*% b) })
if (!is.numeric(unlist(r)) || length(unlist(r)) != 4) stop("a child failed")
if (!(max(abs(unlist(r) - ref)) < 1e-8)) stop("a child's product differs")
if (!(max(abs(a %*% b - c0)) == 0)) stop("the parent's a changed")
cat("R fork OK\n")
RS
GEMMBLAS_MIN_FLOPS=0 LD_PRELOAD=$(preload "$GEMMBLAS_LIB") \
    zerocopy_run Rscript --vanilla "$T/fork.R"
