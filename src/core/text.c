/* Text helpers: "did you mean" (edit distances and the closest of a set of
 * names, for every error that names something unknown: a key, a stage, a
 * column) and UTF-8 validation for text that comes from data. */
#include "millrace/core.h"

#include <ctype.h>
#include <stdint.h>
#include <string.h>

/* Levenshtein distance; with `transpose`, swapping two adjacent characters
 * costs 1 (optimal string alignment), which ranks typos like "dpes" better. */
static size_t distance(const char *a, const char *b, int transpose)
{
    size_t la = strlen(a), lb = strlen(b);
    size_t result = SIZE_MAX;
    size_t w = lb + 1;
    size_t *rows = mr_calloc(3 * w, sizeof(*rows)); /* rows i-2, i-1, i */
    if (!rows) goto done;
    for (size_t j = 0; j <= lb; j++) rows[j] = j;
    for (size_t i = 1; i <= la; i++) {
        size_t *prev2 = rows + ((i + 1) % 3) * w;
        size_t *prev = rows + ((i + 2) % 3) * w;
        size_t *cur = rows + (i % 3) * w;
        cur[0] = i;
        for (size_t j = 1; j <= lb; j++) {
            size_t best = prev[j - 1] + (a[i - 1] != b[j - 1]);
            if (prev[j] + 1 < best) best = prev[j] + 1;
            if (cur[j - 1] + 1 < best) best = cur[j - 1] + 1;
            if (transpose && i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] &&
                prev2[j - 2] + 1 < best)
                best = prev2[j - 2] + 1;
            cur[j] = best;
        }
    }
    result = rows[(la % 3) * w + lb];
done:
    mr_free(rows);
    return result;
}

size_t mr_edit_distance(const char *a, const char *b) { return distance(a, b, 0); }

static int ieq(const char *a, const char *b)
{
    while (*a && *b && tolower((unsigned char)*a) == tolower((unsigned char)*b)) {
        a++;
        b++;
    }
    return *a == *b;
}

const char *mr_closest(const char *word, const char *const *candidates, size_t n)
{
    const char *best = NULL;
    size_t best_d = SIZE_MAX;
    if (!word || !candidates) goto done;
    for (size_t i = 0; i < n; i++) {
        if (candidates[i] && ieq(word, candidates[i])) {
            best = candidates[i];
            goto done;
        }
    }
    size_t max_d = strlen(word) / 3;
    if (max_d < 2) max_d = 2;
    for (size_t i = 0; i < n; i++) {
        if (!candidates[i]) continue;
        size_t d = distance(word, candidates[i], 1);
        if (d <= max_d && d < best_d) {
            best_d = d;
            best = candidates[i];
        }
    }
done:
    return best;
}

/* Length of the valid UTF-8 sequence at s (n bytes left), 0 if invalid. */
static size_t utf8_seq(const unsigned char *s, size_t n)
{
    unsigned char c = s[0];
    if (c < 0x80) return 1;
    size_t len = c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : c >= 0xc2 ? 2 : 0;
    if (!len || len > n || c > 0xf4) return 0;
    for (size_t k = 1; k < len; k++)
        if ((s[k] & 0xc0) != 0x80) return 0;
    if (len == 3 && c == 0xe0 && s[1] < 0xa0) return 0; /* overlong */
    if (len == 3 && c == 0xed && s[1] >= 0xa0) return 0; /* surrogates */
    if (len == 4 && c == 0xf0 && s[1] < 0x90) return 0; /* overlong */
    if (len == 4 && c == 0xf4 && s[1] >= 0x90) return 0; /* above U+10FFFF */
    return len;
}

int mr_utf8_valid(const char *s, size_t len)
{
    const unsigned char *p = (const unsigned char *)s;
    for (size_t i = 0; i < len;) {
        size_t k = utf8_seq(p + i, len - i);
        if (!k) return 0;
        i += k;
    }
    return 1;
}

mr_status mr_buf_utf8_scrub(mr_buf *out, const char *s, size_t len)
{
    const unsigned char *p = (const unsigned char *)s;
    size_t run = 0; /* start of the pending valid run */
    mr_status st = MR_OK;
    for (size_t i = 0; i < len && st == MR_OK;) {
        size_t k = utf8_seq(p + i, len - i);
        if (k) {
            i += k;
            continue;
        }
        st = mr_buf_append(out, s + run, i - run);
        if (st == MR_OK) st = mr_buf_append(out, "\xEF\xBF\xBD", 3);
        i++;
        run = i;
    }
    if (st == MR_OK) st = mr_buf_append(out, s + run, len - run);
    return st;
}
