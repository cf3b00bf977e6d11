/* Unit tests for dataset splits (src/ml/split.c): stratified proportions
 * exact within one row per class, group splits keep each group in one part
 * (also across tables and key types), time splits respect the cut-off,
 * determinism (same seed, any thread count), part tables, YAML specs and
 * errors. Seeds are fixed and printed on failure by the assertion text. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "mr_test.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "millrace/spec.h"
#include "millrace/split.h"

static uint64_t rng_state;
static uint64_t rng(void) /* splitmix64: fixed test data */
{
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static void add(mr_table *t, mr_column *c)
{
    assert_ok(mr_table_add_column(t, c, NULL));
}

/* n rows: id (int), cls (string; 3 classes of uneven size plus nulls),
 * user (int group id, ~n/7 users), ts (timestamp), score (float). */
static mr_table *make_table(size_t n, uint64_t seed)
{
    rng_state = seed;
    mr_table *t = NULL;
    mr_column *id, *cls, *user, *ts, *score;
    assert_ok(mr_table_new(&t, NULL));
    assert_ok(mr_column_new("id", MR_T_INT64, n, &id, NULL));
    assert_ok(mr_column_new("cls", MR_T_STRING, n, &cls, NULL));
    assert_ok(mr_column_new("user", MR_T_INT64, n, &user, NULL));
    assert_ok(mr_column_new("ts", MR_T_TIMESTAMP, n, &ts, NULL));
    assert_ok(mr_column_new("score", MR_T_FLOAT64, n, &score, NULL));
    static const char *names[] = {"churn", "stay", "stay", "stay", "stay", "stay", "rare"};
    for (size_t i = 0; i < n; i++) {
        uint64_t r = rng();
        assert_ok(mr_column_append_int64(id, (int64_t)i));
        if (r % 53 == 0) assert_ok(mr_column_append_null(cls));
        else {
            const char *s = names[(r >> 8) % 7];
            if (strcmp(s, "rare") == 0 && (r >> 20) % 3) s = "churn";
            assert_ok(mr_column_append_str(cls, s, strlen(s)));
        }
        assert_ok(mr_column_append_int64(user, (int64_t)((r >> 24) % (n / 7 + 1))));
        assert_ok(mr_column_append_int64(ts, (int64_t)1700000000000000LL + (int64_t)((r >> 32) % 1000000) * 1000000LL));
        assert_ok(mr_column_append_float64(score, (double)(r >> 11) / 9007199254740992.0));
    }
    add(t, id);
    add(t, cls);
    add(t, user);
    add(t, ts);
    add(t, score);
    return t;
}

static void three_parts(mr_split_spec *s, double a, double b, double c)
{
    assert_ok(mr_split_spec_add_part(s, "train", a));
    assert_ok(mr_split_spec_add_part(s, "valid", b));
    assert_ok(mr_split_spec_add_part(s, "test", c));
}

static void test_stratified_exact(void **state)
{
    (void)state;
    const size_t sizes[] = {10, 97, 1000, 4321};
    const double fr[][3] = {{0.7, 0.15, 0.15}, {0.5, 0.25, 0.25}, {0.8, 0.1, 0.1}, {1.0 / 3, 1.0 / 3, 1.0 / 3}};
    for (size_t si = 0; si < 4; si++) {
        for (size_t fi = 0; fi < 4; fi++) {
            for (uint64_t seed = 0; seed < 3; seed++) {
                mr_table *t = make_table(sizes[si], 1234 + si);
                mr_split_spec s;
                mr_split_spec_init(&s);
                s.method = MR_SPLIT_STRATIFIED;
                s.label = "cls";
                s.seed = seed;
                three_parts(&s, fr[fi][0], fr[fi][1], fr[fi][2]);
                uint8_t *part = mr_malloc(t->n_rows + 1);
                assert_alloc(part);
                assert_ok(mr_split_assign(&s, t, part, NULL));
                /* classes: churn, stay, rare, null */
                const char *cls[] = {"churn", "stay", "rare", NULL};
                for (size_t c = 0; c < 4; c++) {
                    size_t n_c = 0, per[3] = {0};
                    const mr_column *col = mr_table_column(t, "cls");
                    for (size_t i = 0; i < t->n_rows; i++) {
                        int is = 0;
                        if (!cls[c]) is = mr_column_is_null(col, i);
                        else if (!mr_column_is_null(col, i)) {
                            size_t len;
                            const char *v = mr_column_str(col, i, &len);
                            is = len == strlen(cls[c]) && memcmp(v, cls[c], len) == 0;
                        }
                        if (!is) continue;
                        n_c++;
                        assert_true(part[i] < 3);
                        per[part[i]]++;
                    }
                    for (size_t k = 0; k < 3; k++) {
                        double want = fr[fi][k] * (double)n_c;
                        if (fabs((double)per[k] - want) > 1.0 + 1e-9) {
                            fprintf(stderr, "n=%zu fr=%zu seed=%llu class=%s part=%zu: %zu rows, want %.3f\n", sizes[si],
                                    fi, (unsigned long long)seed, cls[c] ? cls[c] : "NULL", k, per[k], want);
                            fail();
                        }
                    }
                }
                mr_free(part);
                mr_table_free(t);
            }
        }
    }
}

static void test_stratified_float_labels(void **state)
{
    (void)state;
    mr_table *t = NULL;
    mr_column *y;
    assert_ok(mr_table_new(&t, NULL));
    assert_ok(mr_column_new("y", MR_T_FLOAT64, 0, &y, NULL));
    for (int i = 0; i < 300; i++) {
        double v = i % 3 == 0 ? 0.0 : i % 3 == 1 ? -0.0 : (i % 2 ? NAN : 1.5);
        assert_ok(mr_column_append_float64(y, v));
    }
    add(t, y);
    mr_split_spec s;
    mr_split_spec_init(&s);
    s.method = MR_SPLIT_STRATIFIED;
    s.label = "y";
    mr_split_spec_add_part(&s, "train", 0.5);
    mr_split_spec_add_part(&s, "test", 0.5);
    uint8_t part[300];
    assert_ok(mr_split_assign(&s, t, part, NULL));
    /* 0 and -0 are one class (200 rows), NaN one (50), 1.5 one (50) */
    size_t zero = 0, nan_ = 0, other = 0;
    for (int i = 0; i < 300; i++) {
        if (part[i] != 0) continue;
        if (i % 3 != 2) zero++;
        else if (i % 2) nan_++;
        else other++;
    }
    assert_int_equal(zero, 100);
    assert_int_equal(nan_, 25);
    assert_int_equal(other, 25);
    mr_table_free(t);
}

static void test_group_disjoint(void **state)
{
    (void)state;
    mr_table *t = make_table(5000, 77);
    mr_split_spec s;
    mr_split_spec_init(&s);
    s.method = MR_SPLIT_GROUP;
    s.group = "user";
    s.seed = 9;
    three_parts(&s, 0.6, 0.2, 0.2);
    uint8_t *part = mr_malloc(t->n_rows);
    assert_alloc(part);
    assert_ok(mr_split_assign(&s, t, part, NULL));
    const mr_column *u = mr_table_column(t, "user");
    size_t n_users = 5000 / 7 + 1;
    int *seen = mr_calloc(n_users, sizeof(int));
    assert_alloc(seen);
    size_t count[3] = {0};
    for (size_t i = 0; i < t->n_rows; i++) {
        int64_t g = ((const int64_t *)u->data)[i];
        if (seen[g] == 0) seen[g] = part[i] + 1;
        if (seen[g] != part[i] + 1) {
            fprintf(stderr, "user %lld in parts %d and %d\n", (long long)g, seen[g] - 1, part[i]);
            fail();
        }
        count[part[i]]++;
    }
    /* every part got some rows */
    assert_true(count[0] > 2000 && count[1] > 400 && count[2] > 400);

    /* the same group lands in the same part in another table, whatever the
     * row order and key type (the string "42" and the integer 42 agree) */
    mr_table *t2 = NULL;
    mr_column *su;
    assert_ok(mr_table_new(&t2, NULL));
    assert_ok(mr_column_new("user", MR_T_STRING, 0, &su, NULL));
    for (size_t g = n_users; g-- > 0;) {
        char buf[32];
        int len = snprintf(buf, sizeof(buf), "%zu", g);
        assert_ok(mr_column_append_str(su, buf, (size_t)len));
    }
    add(t2, su);
    uint8_t *part2 = mr_malloc(n_users);
    assert_alloc(part2);
    assert_ok(mr_split_assign(&s, t2, part2, NULL));
    for (size_t g = 0; g < n_users; g++)
        if (seen[g]) assert_int_equal(part2[n_users - 1 - g], seen[g] - 1);
    mr_free(part2);
    mr_table_free(t2);
    mr_free(seen);
    mr_free(part);
    mr_table_free(t);
}

static void test_group_float_rejected(void **state)
{
    (void)state;
    mr_table *t = make_table(50, 1);
    mr_split_spec s;
    mr_split_spec_init(&s);
    s.method = MR_SPLIT_GROUP;
    s.group = "score";
    mr_split_spec_add_part(&s, "train", 0.5);
    mr_split_spec_add_part(&s, "test", 0.5);
    uint8_t part[50];
    mr_error err;
    mr_error_init(&err);
    assert_status(mr_split_assign(&s, t, part, &err), MR_E_INVALID_ARG);
    assert_non_null(strstr(err.msg, "float64"));
    mr_table_free(t);
}

static void test_time_cutoff(void **state)
{
    (void)state;
    mr_table *t = make_table(3000, 5);
    const mr_column *ts = mr_table_column(t, "ts");
    const int64_t *v = ts->data;
    /* explicit cut-offs */
    mr_split_spec s;
    mr_split_spec_init(&s);
    s.method = MR_SPLIT_TIME;
    s.time = "ts";
    three_parts(&s, 0, 0, 0);
    s.n_cutoffs = 2;
    s.cutoffs[0] = "2023-11-16";             /* 1700092800 s */
    s.cutoffs[1] = "2023-11-20T00:00:00Z";   /* 1700438400 s */
    uint8_t *part = mr_malloc(t->n_rows);
    assert_alloc(part);
    assert_ok(mr_split_assign(&s, t, part, NULL));
    int64_t c1 = 1700092800LL * 1000000, c2 = 1700438400LL * 1000000;
    size_t cnt[3] = {0};
    for (size_t i = 0; i < t->n_rows; i++) {
        int want = v[i] < c1 ? 0 : v[i] < c2 ? 1 : 2;
        assert_int_equal(part[i], want);
        cnt[part[i]]++;
    }
    assert_true(cnt[0] && cnt[1] && cnt[2]);
    /* by fractions (row quantiles): every train time < every test time */
    mr_split_spec f;
    mr_split_spec_init(&f);
    f.method = MR_SPLIT_TIME;
    f.time = "ts";
    mr_split_spec_add_part(&f, "train", 0.8);
    mr_split_spec_add_part(&f, "test", 0.2);
    assert_ok(mr_split_assign(&f, t, part, NULL));
    int64_t max_train = INT64_MIN, min_test = INT64_MAX;
    size_t n_train = 0;
    for (size_t i = 0; i < t->n_rows; i++) {
        if (part[i] == 0) {
            n_train++;
            if (v[i] > max_train) max_train = v[i];
        } else if (v[i] < min_test) {
            min_test = v[i];
        }
    }
    assert_true(max_train < min_test);
    assert_true(n_train >= 2390 && n_train <= 2410); /* ties only shift a few rows */
    /* cut-offs out of order; a null time */
    mr_error err;
    mr_error_init(&err);
    s.cutoffs[1] = "2023-11-01";
    assert_status(mr_split_assign(&s, t, part, &err), MR_E_INVALID_ARG);
    assert_non_null(strstr(err.msg, "increase"));
    mr_error_clear(&err);
    assert_ok(mr_column_append_null(t->cols[3]));
    for (size_t j = 0; j < t->n_cols; j++)
        if (j != 3) assert_ok(mr_column_append_null(t->cols[j]));
    t->n_rows++;
    uint8_t *p2 = mr_malloc(t->n_rows);
    assert_alloc(p2);
    assert_status(mr_split_assign(&f, t, p2, &err), MR_E_INVALID_ARG);
    assert_int_equal(err.row, 3001);
    mr_free(p2);
    mr_free(part);
    mr_table_free(t);
}

static void test_determinism(void **state)
{
    (void)state;
    mr_table *t = make_table(200000, 3);
    mr_split_spec s;
    mr_split_spec_init(&s);
    three_parts(&s, 0.7, 0.2, 0.1);
    s.seed = 42;
    uint8_t *a = mr_malloc(t->n_rows), *b = mr_malloc(t->n_rows), *c = mr_malloc(t->n_rows);
    assert_alloc(a);
    assert_alloc(b);
    assert_alloc(c);
    for (int m = 0; m < 4; m++) {
        s.method = (mr_split_method)m;
        s.label = "cls";
        s.group = "user";
        s.time = "ts";
        mr_pool_shutdown();
        assert_ok(mr_split_assign(&s, t, a, NULL)); /* serial */
        assert_ok(mr_pool_init(4, NULL));
        assert_ok(mr_split_assign(&s, t, b, NULL)); /* 4 threads */
        assert_memory_equal(a, b, t->n_rows);
        s.seed = 43;
        assert_ok(mr_split_assign(&s, t, c, NULL));
        if (m != MR_SPLIT_TIME) assert_true(memcmp(a, c, t->n_rows) != 0); /* the seed matters */
        s.seed = 42;
    }
    /* random: row i's part depends only on (seed, i), so a prefix agrees */
    s.method = MR_SPLIT_RANDOM;
    assert_ok(mr_split_assign(&s, t, a, NULL));
    mr_table *half = NULL;
    assert_ok(mr_table_slice(t, 0, 1000, &half, NULL));
    assert_ok(mr_split_assign(&s, half, b, NULL));
    assert_memory_equal(a, b, 1000);
    size_t cnt[3] = {0};
    for (size_t i = 0; i < t->n_rows; i++) cnt[a[i]]++;
    assert_true(fabs((double)cnt[0] / 200000.0 - 0.7) < 0.01);
    assert_true(fabs((double)cnt[2] / 200000.0 - 0.1) < 0.01);
    mr_table_free(half);
    mr_pool_shutdown();
    mr_free(a);
    mr_free(b);
    mr_free(c);
    mr_table_free(t);
}

static void test_split_table(void **state)
{
    (void)state;
    mr_table *t = make_table(1000, 11);
    mr_split_spec s;
    mr_split_spec_init(&s);
    s.method = MR_SPLIT_STRATIFIED;
    s.label = "cls";
    three_parts(&s, 0.7, 0.15, 0.15);
    mr_table *parts[MR_SPLIT_MAX_PARTS];
    assert_ok(mr_split_table(&s, t, parts, NULL));
    uint8_t part[1000];
    assert_ok(mr_split_assign(&s, t, part, NULL));
    size_t pos[3] = {0};
    for (size_t i = 0; i < 1000; i++) {
        const mr_table *p = parts[part[i]];
        int64_t id = ((const int64_t *)p->cols[0]->data)[pos[part[i]]++];
        assert_int_equal(id, (int64_t)i); /* original order kept */
    }
    for (size_t k = 0; k < 3; k++) {
        assert_int_equal(parts[k]->n_rows, pos[k]);
        assert_int_equal(parts[k]->n_cols, t->n_cols);
        mr_table_free(parts[k]);
    }
    assert_int_equal(mr_split_part_index(&s, "test"), 2);
    assert_int_equal(mr_split_part_index(&s, "nope"), -1);
    mr_table_free(t);
}

static void test_errors(void **state)
{
    (void)state;
    mr_table *t = make_table(20, 2);
    mr_split_spec s;
    mr_split_spec_init(&s);
    three_parts(&s, 0.7, 0.1, 0.1);
    uint8_t part[20];
    mr_error err;
    mr_error_init(&err);
    assert_status(mr_split_assign(&s, t, part, &err), MR_E_INVALID_ARG);
    assert_non_null(strstr(err.msg, "sum to 0.9"));
    mr_error_clear(&err);
    s.fractions[2] = 0.2 + 2e-9;
    assert_status(mr_split_assign(&s, t, part, &err), MR_E_INVALID_ARG);
    mr_error_clear(&err);
    s.fractions[2] = 0.2 + 5e-10; /* within 1e-9 */
    assert_ok(mr_split_assign(&s, t, part, &err));
    s.method = MR_SPLIT_STRATIFIED;
    s.label = "clss";
    assert_status(mr_split_assign(&s, t, part, &err), MR_E_NOT_FOUND);
    if (!mr_test_fault_fired()) assert_string_equal(err.hint, "did you mean 'cls'?"); /* the hint is best effort */
    mr_error_clear(&err);
    s.label = NULL;
    assert_status(mr_split_assign(&s, t, part, &err), MR_E_INVALID_ARG);
    mr_error_clear(&err);
    s.names[1] = "train";
    s.label = "cls";
    assert_status(mr_split_assign(&s, t, part, &err), MR_E_INVALID_ARG);
    assert_non_null(strstr(err.msg, "twice"));
    mr_error_clear(&err);
    mr_table_free(t);
}

static void test_from_yaml(void **state)
{
    (void)state;
    const char *y = "method: stratified\nparts: {train: 0.7, valid: 0.15, test: 0.15}\nlabel: cls\nseed: 7\n";
    mr_value *v = NULL;
    assert_ok(mr_yaml_parse(y, strlen(y), "split.yaml", &v, NULL));
    mr_split_spec s;
    assert_ok(mr_split_spec_from_value(v, &s, NULL));
    assert_int_equal(s.method, MR_SPLIT_STRATIFIED);
    assert_int_equal(s.n_parts, 3);
    assert_string_equal(s.names[1], "valid");
    assert_true(s.fractions[2] == 0.15);
    assert_int_equal(s.seed, 7);
    mr_value_free(v);

    y = "method: time\ntime: ts\nparts: [train, test]\ncutoffs: [2023-11-18]\n";
    assert_ok(mr_yaml_parse(y, strlen(y), "split.yaml", &v, NULL));
    assert_ok(mr_split_spec_from_value(v, &s, NULL));
    assert_int_equal(s.n_cutoffs, 1);
    mr_table *t = make_table(100, 4);
    uint8_t part[100];
    assert_ok(mr_split_assign(&s, t, part, NULL));
    mr_table_free(t);
    mr_value_free(v);

    mr_error err;
    mr_error_init(&err);
    y = "method: stratifed\nparts: {train: 1}\n";
    assert_ok(mr_yaml_parse(y, strlen(y), "split.yaml", &v, NULL));
    assert_status(mr_split_spec_from_value(v, &s, &err), MR_E_PARSE);
    if (!mr_test_fault_fired()) assert_string_equal(err.hint, "did you mean 'stratified'?"); /* the hint is best effort */
    assert_int_equal(err.line, 1);
    mr_value_free(v);
    mr_error_clear(&err);
    y = "method: random\nparts: {train: 0.5, test: 0.5}\nlabl: x\n";
    assert_ok(mr_yaml_parse(y, strlen(y), "split.yaml", &v, NULL));
    assert_status(mr_split_spec_from_value(v, &s, &err), MR_E_PARSE);
    if (!mr_test_fault_fired()) assert_string_equal(err.hint, "did you mean 'label'?"); /* the hint is best effort */
    assert_int_equal(err.line, 3);
    mr_value_free(v);
    mr_error_clear(&err);
    y = "parts: {train: 0.5, test: 0.4}\n";
    assert_ok(mr_yaml_parse(y, strlen(y), "split.yaml", &v, NULL));
    assert_status(mr_split_spec_from_value(v, &s, &err), MR_E_INVALID_ARG);
    mr_value_free(v);
    mr_error_clear(&err);
}

/* Checks that need no table point at the YAML node at fault, so the split
 * op's validate hook can report them at load with millrace.yaml's line and
 * column. */
static void test_from_yaml_positions(void **state)
{
    (void)state;
    static const struct {
        const char *yaml;
        mr_status rc;
        long line, col;
        const char *msg;
    } cases[] = {
        {"parts: {train: 0.5, test: 0.4}\n", MR_E_INVALID_ARG, 1, 8, "fractions sum to 0.9, not 1"},
        {"parts: {train: 1, test: 0}\n", MR_E_PARSE, 1, 25, "fraction of part 'test' must be in (0, 1], got 0"},
        {"parts: {train: 1.5, test: -0.5}\n", MR_E_PARSE, 1, 16, "fraction of part 'train' must be in (0, 1], got 1.5"},
        {"method: group\nparts: {a: 0.5, b: 0.5}\n", MR_E_INVALID_ARG, 1, 9, "method group needs a 'group' column"},
        {"method: time\ntime: ts\nparts: [a, b, c]\ncutoffs: [2024-01-01, 2023-06-01]\n", MR_E_INVALID_ARG, 4, 23,
         "cut-offs must increase (\"2023-06-01\" after \"2024-01-01\")"},
        {"method: time\ntime: ts\nparts: [a, b, c]\ncutoffs: [2024-01-01]\n", MR_E_INVALID_ARG, 4, 10,
         "3 parts need 2 cut-offs, got 1"},
        {"method: time\ntime: ts\nparts: [a, b]\ncutoffs: [soon]\n", MR_E_INVALID_ARG, 4, 11,
         "cut-off \"soon\" is not a date, timestamp or number"},
        {"method: time\ntime: ts\nparts: [a, b, c]\ncutoffs: [2024-01-01, 5]\n", MR_E_INVALID_ARG, 4, 23,
         "cut-off \"5\" is a number but \"2024-01-01\" is a date or timestamp"},
        {"method: time\ntime: ts\nparts: [a, b, c]\ncutoffs: [10, 2.5]\n", MR_E_INVALID_ARG, 4, 15,
         "cut-offs must increase (\"2.5\" after \"10\")"},
        {"method: time\ntime: ts\nparts: [a, a]\ncutoffs: [3]\n", MR_E_INVALID_ARG, 3, 12, "part name 'a' appears twice"},
        {"parts: {a: 0.5, b: 0.5}\ncutoffs: [1]\n", MR_E_INVALID_ARG, 2, 10, "cut-offs apply to method time only"},
    };
    for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
        mr_value *v = NULL;
        mr_error err;
        mr_error_init(&err);
        mr_split_spec s;
        assert_ok(mr_yaml_parse(cases[k].yaml, strlen(cases[k].yaml), "split.yaml", &v, NULL));
        mr_status rc = mr_split_spec_from_value(v, &s, &err);
        if (rc != cases[k].rc || err.line != cases[k].line || err.col != cases[k].col || !strstr(err.msg, cases[k].msg))
            fail_msg("case %zu (%s): got %s at %ld:%ld \"%s\", expected %s at %ld:%ld \"%s\"", k, cases[k].yaml,
                     mr_status_name(rc), err.line, err.col, err.msg, mr_status_name(cases[k].rc), cases[k].line,
                     cases[k].col, cases[k].msg);
        mr_value_free(v);
    }
    /* Increasing cut-offs of one kind pass, and a numeric column still
     * refuses date cut-offs when the table is known. */
    const char *y = "method: time\ntime: ts\nparts: [a, b, c]\ncutoffs: [2023-11-16, 2023-11-18T06:00:00Z]\n";
    mr_value *v = NULL;
    mr_split_spec s;
    assert_ok(mr_yaml_parse(y, strlen(y), "split.yaml", &v, NULL));
    assert_ok(mr_split_spec_from_value(v, &s, NULL));
    mr_table *t = make_table(50, 2);
    assert_ok(mr_split_check(&s, t, NULL));
    s.time = "score"; /* a FLOAT64 column: the date cut-offs are not numbers */
    assert_status(mr_split_check(&s, t, NULL), MR_E_INVALID_ARG);
    mr_table_free(t);
    mr_value_free(v);
}

static void test_oom(void **state)
{
    (void)state;
    mr_table *t = make_table(500, 8);
    for (int m = 0; m < 4; m++) {
        mr_split_spec s;
        mr_split_spec_init(&s);
        s.method = (mr_split_method)m;
        s.label = "cls";
        s.group = "user";
        s.time = "ts";
        three_parts(&s, 0.6, 0.2, 0.2);
        int done = 0;
        for (long k = 1; !done && k < 10000; k++) {
            mr_table *parts[MR_SPLIT_MAX_PARTS];
            mr_alloc_fail_after(k);
            mr_status rc = mr_split_table(&s, t, parts, NULL);
            mr_alloc_fail_after(0);
            if (rc == MR_OK) {
                done = 1;
                for (size_t p = 0; p < 3; p++) mr_table_free(parts[p]);
            } else {
                assert_status(rc, MR_E_NOMEM);
                for (size_t p = 0; p < 3; p++) assert_null(parts[p]);
            }
        }
        assert_true(done);
    }
    mr_table_free(t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_stratified_exact),
        cmocka_unit_test(test_stratified_float_labels),
        cmocka_unit_test(test_group_disjoint),
        cmocka_unit_test(test_group_float_rejected),
        cmocka_unit_test(test_time_cutoff),
        cmocka_unit_test(test_determinism),
        cmocka_unit_test(test_split_table),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_from_yaml),
        cmocka_unit_test(test_from_yaml_positions),
        cmocka_unit_test(test_oom),
    };
    return mr_test_run(tests, NULL, NULL);
}
