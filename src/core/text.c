/* "Did you mean": edit distances and the closest of a set of names, for
 * every error that names something unknown (a key, a stage, a column). */
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
