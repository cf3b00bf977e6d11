/* The seeded generator: xoshiro256** (Blackman and Vigna), seeded by
 * splitmix64 (core.h). A pure function of its seed; no global state. */
#include "millrace/core.h"

#include <math.h>

void mr_rng_seed(mr_rng *r, uint64_t seed)
{
    uint64_t x = seed;
    for (int k = 0; k < 4; k++) r->s[k] = mr_splitmix64(&x);
}

static inline uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

uint64_t mr_rng_next(mr_rng *r)
{
    uint64_t *s = r->s;
    uint64_t result = rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
}

uint64_t mr_rng_below(mr_rng *r, uint64_t n)
{
    uint64_t threshold = (0 - n) % n, x;
    do x = mr_rng_next(r);
    while (x < threshold);
    return x % n;
}

double mr_rng_uniform(mr_rng *r) { return mr_u01(mr_rng_next(r)); }

double mr_rng_normal(mr_rng *r)
{
    double u1 = mr_rng_uniform(r), u2 = mr_rng_uniform(r);
    if (u1 < 1e-300) u1 = 1e-300;
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}
