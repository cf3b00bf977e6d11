/* churn_gen: writes the churn example's raw data, users.csv and events.csv, a
 * clickstream over the 90 days ending 2024-04-01 00:00:00 UTC with a planted,
 * learnable churn signal. Deterministic: the bytes depend only on the flags.
 * It does not model anything real; it is test data with a known answer.
 *
 *   churn_gen --users N [--events-per-user K | --events N] [--seed S] --out DIR
 *
 * The signal: each user has a latent engagement and a churn risk from plan,
 * tenure and age band. Churners' activity fades over the last 30 days (fewer,
 * shorter sessions, and often none in the last weeks), so the features of the
 * last 30 days plus plan and tenure predict churn well but not perfectly. */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define DAYS 90                      /* length of the clickstream window */
#define END_DAY 19814                /* 2024-04-01 as days since 1970-01-01 */
#define RECENT_DAYS 30               /* the window where churners fade */
#define OUT_BUF (1u << 20)           /* output buffer per file, bytes */

/* xoshiro256** seeded through splitmix64 (both public domain, Vigna). */
typedef struct rng {
    uint64_t s[4];
} rng;

static uint64_t splitmix64(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

static uint64_t rng_next(rng *r)
{
    uint64_t *s = r->s;
    uint64_t out = rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return out;
}

static void rng_seed(rng *r, uint64_t seed)
{
    for (int i = 0; i < 4; i++) r->s[i] = splitmix64(&seed);
}

/* Uniform in [0, 1). */
static double unif(rng *r) { return (double)(rng_next(r) >> 11) * 0x1.0p-53; }

/* Uniform integer in [0, n). */
static uint32_t below(rng *r, uint32_t n) { return (uint32_t)(unif(r) * n); }

/* Index drawn from cumulative weights cum[0..n-1] (cum[n-1] == 1). */
static int pick(rng *r, const double *cum, int n)
{
    double u = unif(r);
    for (int i = 0; i < n - 1; i++)
        if (u < cum[i]) return i;
    return n - 1;
}

/* Poisson(lambda) by inversion for small lambda, normal approximation above. */
static uint32_t poisson(rng *r, double lambda)
{
    if (lambda <= 0) return 0;
    if (lambda > 30) {
        double u1 = unif(r), u2 = unif(r);
        double z = sqrt(-2.0 * log(u1 + 1e-300)) * cos(6.283185307179586 * u2);
        double v = floor(lambda + sqrt(lambda) * z + 0.5);
        return v < 0 ? 0 : (uint32_t)v;
    }
    double l = exp(-lambda), p = 1.0;
    uint32_t k = 0;
    do {
        k++;
        p *= unif(r);
    } while (p > l);
    return k - 1;
}

/* A buffered output file that remembers its first write error. */
typedef struct out {
    FILE *f;
    char *buf;
    size_t len;
    int failed;
} out;

static void out_flush(out *o)
{
    if (o->len && fwrite(o->buf, 1, o->len, o->f) != o->len) o->failed = 1;
    o->len = 0;
}

static void out_str(out *o, const char *s, size_t n)
{
    if (o->len + n > OUT_BUF) out_flush(o);
    memcpy(o->buf + o->len, s, n);
    o->len += n;
}

#define OUT_LIT(o, s) out_str((o), (s), sizeof(s) - 1)

static void out_u64(out *o, uint64_t v)
{
    char tmp[24];
    int n = 0;
    do {
        tmp[sizeof tmp - 1 - n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    out_str(o, tmp + sizeof tmp - n, (size_t)n);
}

/* Two digits, zero-padded, into p. */
static void put2(char *p, int v)
{
    p[0] = (char)('0' + v / 10);
    p[1] = (char)('0' + v % 10);
}

/* "YYYY-MM-DDTHH:MM:SSZ" for a day number (since 1970-01-01) and a second of
 * that day. civil_from_days is Howard Hinnant's algorithm. */
static void out_ts(out *o, int64_t day, int sec)
{
    int64_t z = day + 719468;
    int64_t era = (z >= 0 ? z : z - 146096) / 146097;
    int64_t doe = z - era * 146097;
    int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    int64_t mp = (5 * doy + 2) / 153;
    int d = (int)(doy - (153 * mp + 2) / 5 + 1);
    int m = (int)(mp < 10 ? mp + 3 : mp - 9);
    int y = (int)(yoe + era * 400 + (m <= 2));
    char s[20];
    put2(s, y / 100);
    put2(s + 2, y % 100);
    s[4] = '-';
    put2(s + 5, m);
    s[7] = '-';
    put2(s + 8, d);
    s[10] = 'T';
    put2(s + 11, sec / 3600);
    s[13] = ':';
    put2(s + 14, sec / 60 % 60);
    s[16] = ':';
    put2(s + 17, sec % 60);
    s[19] = 'Z';
    out_str(o, s, sizeof s);
}

static const char *const PLANS[] = {"free", "basic", "pro", "team"};
static const double PLAN_CUM[] = {0.35, 0.70, 0.92, 1.0};
static const double PLAN_RISK[] = {0.9, 0.3, -0.4, -0.9};      /* logit shift */
static const double PLAN_USE[] = {0.7, 1.0, 1.3, 1.6};         /* activity scale */
static const char *const AGES[] = {"18-24", "25-34", "35-44", "45-54", "55-64", "65+"};
static const double AGE_CUM[] = {0.15, 0.40, 0.65, 0.83, 0.94, 1.0};
static const double AGE_RISK[] = {0.35, 0.15, 0.0, -0.1, -0.15, 0.1};
static const char *const REGIONS[] = {"NAM", "EU", "APAC", "LATAM"}; /* not "NA": a CSV null token */
static const double REGION_CUM[] = {0.35, 0.65, 0.88, 1.0};
static const char *const COUNTRIES[4][3] = {
    {"US", "CA", "MX"}, {"DE", "FR", "GB"}, {"JP", "IN", "AU"}, {"BR", "AR", "CL"}};
static const double COUNTRY_CUM[] = {0.7, 0.9, 1.0};
static const char *const DEVICES[] = {"desktop", "mobile", "tablet"};
static const double DEVICE_CUM[] = {0.5, 0.9, 1.0};

static int usage(const char *msg)
{
    if (msg) fprintf(stderr, "churn_gen: %s\n", msg);
    fprintf(stderr, "usage: churn_gen --users N [--events-per-user K | --events N] [--seed S] --out DIR\n");
    return 2;
}

static int parse_num(const char *s, double *v)
{
    char *end;
    errno = 0;
    *v = strtod(s, &end);
    return errno || end == s || *end || !(*v >= 0);
}

static int open_out(out *o, const char *dir, const char *name)
{
    char path[4096];
    if (snprintf(path, sizeof path, "%s/%s", dir, name) >= (int)sizeof path) return -1;
    o->f = fopen(path, "wb");
    o->buf = malloc(OUT_BUF);
    o->len = 0;
    o->failed = 0;
    if (!o->f || !o->buf) {
        fprintf(stderr, "churn_gen: cannot open %s: %s\n", path, strerror(errno));
        return -1;
    }
    return 0;
}

static int close_out(out *o)
{
    out_flush(o);
    int bad = o->failed;
    if (o->f && fclose(o->f) != 0) bad = 1;
    free(o->buf);
    return bad ? -1 : 0;
}

int main(int argc, char **argv)
{
    double users = -1, per_user = 50, events = -1, seed = 1;
    const char *dir = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (i + 1 >= argc) return usage("missing value after the last flag");
        const char *v = argv[++i];
        double *dst = !strcmp(a, "--users")             ? &users
                      : !strcmp(a, "--events-per-user") ? &per_user
                      : !strcmp(a, "--events")          ? &events
                      : !strcmp(a, "--seed")            ? &seed
                                                        : NULL;
        if (!strcmp(a, "--out")) {
            dir = v;
            continue;
        }
        if (!dst) return usage("unknown flag");
        if (parse_num(v, dst)) return usage("expected a non-negative number");
    }
    if (users < 1 || users > 1e9 || !dir) return usage(NULL);
    if (events >= 0) per_user = events / users;
    if (mkdir(dir, 0777) != 0 && errno != EEXIST) {
        fprintf(stderr, "churn_gen: cannot create %s: %s\n", dir, strerror(errno));
        return 1;
    }
    out fu, fe;
    if (open_out(&fu, dir, "users.csv") || open_out(&fe, dir, "events.csv")) return 1;
    OUT_LIT(&fu, "user_id,plan,tenure_months,age_band,region,churned\n");
    OUT_LIT(&fe, "user_id,session_id,ts,device,country,pages,minutes\n");

    rng r;
    rng_seed(&r, (uint64_t)seed);
    uint64_t n_users = (uint64_t)users, session_id = 0, n_events = 0;
    /* Mean events per session is 1 + 3 = 4 (below), and engagement x plan
     * use averages about 1.055, less churners' fade: 1.02 overall. */
    double sessions_mean = per_user / (4.0 * 1.02);
    for (uint64_t uid = 1; uid <= n_users; uid++) {
        int plan = pick(&r, PLAN_CUM, 4);
        int age = pick(&r, AGE_CUM, 6);
        int region = pick(&r, REGION_CUM, 4);
        int tenure = 1 + (int)fmin(71.0, -18.0 * log(1.0 - unif(&r)));
        double engagement = exp(0.6 * (unif(&r) + unif(&r) + unif(&r) - 1.5)); /* ~lognormal, mean ~1 */
        double z = -1.6 + PLAN_RISK[plan] + AGE_RISK[age] - 0.035 * (tenure - 12) - 0.8 * (engagement - 1.0);
        int churned = unif(&r) < 1.0 / (1.0 + exp(-z));
        /* Churners fade over the last 30 days: a fade start inside the window
         * after which they are (almost) gone. */
        int fade_from = churned ? DAYS - RECENT_DAYS + (int)below(&r, RECENT_DAYS - 5) : DAYS;
        const char *home = COUNTRIES[region][pick(&r, COUNTRY_CUM, 3)];
        int main_device = pick(&r, DEVICE_CUM, 3);

        out_u64(&fu, uid);
        out_str(&fu, ",", 1);
        out_str(&fu, PLANS[plan], strlen(PLANS[plan]));
        out_str(&fu, ",", 1);
        out_u64(&fu, (uint64_t)tenure);
        out_str(&fu, ",", 1);
        out_str(&fu, AGES[age], strlen(AGES[age]));
        out_str(&fu, ",", 1);
        out_str(&fu, REGIONS[region], strlen(REGIONS[region]));
        out_str(&fu, churned ? ",1\n" : ",0\n", 3);

        /* Sessions: day d in [0, DAYS) has weight 1 before fade_from and 0.08
         * after; the count is Poisson around the user's expected total. */
        double w_total = fade_from + 0.08 * (DAYS - fade_from);
        uint32_t n_sessions = poisson(&r, sessions_mean * engagement * PLAN_USE[plan] * w_total / DAYS);
        for (uint32_t s = 0; s < n_sessions; s++) {
            double u = unif(&r) * w_total;
            int d = u < fade_from ? (int)u : fade_from + (int)((u - fade_from) / 0.08);
            if (d >= DAYS) d = DAYS - 1;
            int64_t day = END_DAY - DAYS + d;
            int sec = (int)below(&r, 86400 - 3600 * 3);
            int device = unif(&r) < 0.8 ? main_device : (int)below(&r, 3);
            const char *country = unif(&r) < 0.97 ? home : COUNTRIES[below(&r, 4)][below(&r, 3)];
            uint32_t hits = 1 + poisson(&r, 3.0 * (churned && d >= fade_from ? 0.5 : 1.0));
            session_id++;
            for (uint32_t h = 0; h < hits; h++) {
                uint32_t pages = 1 + poisson(&r, 2.0 * PLAN_USE[plan]);
                uint32_t centi = (uint32_t)(-100.0 * (1.5 + 2.5 * engagement) * log(1.0 - unif(&r)));
                out_u64(&fe, uid);
                out_str(&fe, ",", 1);
                out_u64(&fe, session_id);
                out_str(&fe, ",", 1);
                out_ts(&fe, day, sec);
                out_str(&fe, ",", 1);
                out_str(&fe, DEVICES[device], strlen(DEVICES[device]));
                out_str(&fe, ",", 1);
                out_str(&fe, country, 2);
                out_str(&fe, ",", 1);
                out_u64(&fe, pages);
                out_str(&fe, ",", 1);
                out_u64(&fe, centi / 100);
                char frac[4] = {'.', 0, 0, '\n'};
                put2(frac + 1, (int)(centi % 100));
                out_str(&fe, frac, 4);
                sec += 10 + (int)below(&r, 170);
                if (sec >= 86400) sec = 86399;
                n_events++;
            }
        }
    }
    int bad = close_out(&fu) | close_out(&fe);
    if (bad) {
        fprintf(stderr, "churn_gen: write error in %s\n", dir);
        return 1;
    }
    fprintf(stderr, "churn_gen: %llu users, %llu sessions, %llu events in %s\n", (unsigned long long)n_users,
            (unsigned long long)session_id, (unsigned long long)n_events, dir);
    return 0;
}
