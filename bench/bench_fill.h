/*
 * bench_fill.h: the benches' random inputs, made on the device from a
 * hash of each index and a seed (the same values every run), on the
 * default stream; each launch is checked.
 */
#pragma once

#include <stdint.h>

/* uniform in [-1, 1), as bf16 (bf16 true) or fp16 bits */
void fill_u16(uint16_t *p, long long n, uint64_t seed, bool bf16);
/* uniform in [-1, 1) with full 24-bit mantissas */
void fill_f32(float *p, long long n, uint64_t seed);
/* uniform over the int8 values */
void fill_s8(int8_t *p, long long n, uint64_t seed);
/* x 2^(phi g): x uniform in [-1, 1) with 53 random bits, g ~ N(0, 1) */
void fill_f64(double *p, long long n, uint64_t seed, double phi);
