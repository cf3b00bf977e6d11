/* Text helpers: "did you mean" (edit distances and the closest of a set of
 * names, for every error that names something unknown: a key, a stage, a
 * column), UTF-8 validation for text that comes from data, and the one
 * escaping of data text for terminals and JSON. */
#include "millrace/core.h"

#include <ctype.h>
#include <stdint.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Levenshtein distance; with `transpose`, swapping two adjacent characters
 * costs 1 (optimal string alignment), which ranks typos like "dpes" better. */
static size_t distance(const char *a, const char *b, int transpose)
{
    size_t la = strlen(a), lb = strlen(b);
    size_t result = SIZE_MAX;
    size_t w = lb + 1;
    /* rows i-2, i-1, i; on the stack for names of up to 127 bytes (all but
     * odd ones), so a did-you-mean survives running out of memory */
    size_t small[3 * 128];
    size_t *rows = w <= 128 ? small : mr_calloc(3 * w, sizeof(*rows));
    if (!rows) goto done;
    if (rows == small) memset(small, 0, 3 * w * sizeof(*rows));
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
    if (rows != small) mr_free(rows);
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

/* ---- text for terminals and JSON ----------------------------------------
 * What a terminal acts on instead of showing: the C0 controls (ESC starts
 * every escape sequence; BEL, BS, CR and LF move or sound), DEL, the C1
 * controls U+0080..U+009F (U+009B is a one-character CSI for terminals
 * that decode C1 from UTF-8), and bytes that are not UTF-8 (a terminal may
 * take them as 8-bit C1). Also escaped, because they reorder or break what
 * is shown: the bidirectional embeddings, overrides and isolates
 * (U+202A..U+202E, U+2066..U+2069) and the line/paragraph separators
 * (U+2028, U+2029). Everything else, including the backslash, is copied,
 * so ordinary text is unchanged and escaping twice equals escaping once. */

/* What to do with the character at s (n bytes left): *len gets its length
 * (1 for an invalid byte), *cp its code point; returns 1 if it is unsafe. */
static int unsafe_at(const unsigned char *s, size_t n, size_t *len, uint32_t *cp, int *invalid)
{
    unsigned char c = s[0];
    *invalid = 0;
    if (c < 0x80) {
        *len = 1;
        *cp = c;
        return c < 0x20 || c == 0x7f;
    }
    size_t k = utf8_seq(s, n);
    if (!k) {
        *len = 1;
        *cp = c;
        *invalid = 1;
        return 1;
    }
    *len = k;
    uint32_t v = k == 2 ? (uint32_t)(c & 0x1f) : k == 3 ? (uint32_t)(c & 0x0f) : (uint32_t)(c & 0x07);
    for (size_t q = 1; q < k; q++) v = v << 6 | (uint32_t)(s[q] & 0x3f);
    *cp = v;
    return (v >= 0x80 && v <= 0x9f) || (v >= 0x202a && v <= 0x202e) || (v >= 0x2066 && v <= 0x2069) || v == 0x2028 ||
           v == 0x2029;
}

int mr_term_safe(const char *s, size_t len)
{
    const unsigned char *p = (const unsigned char *)s;
    for (size_t i = 0; i < len;) {
        size_t k;
        uint32_t cp;
        int inv;
        if (p[i] >= 0x20 && p[i] < 0x7f) { /* the common case */
            i++;
            continue;
        }
        if (unsafe_at(p + i, len - i, &k, &cp, &inv)) return 0;
        i += k;
    }
    return 1;
}

mr_status mr_buf_term_escape(mr_buf *out, const char *s, size_t len)
{
    const unsigned char *p = (const unsigned char *)s;
    size_t run = 0; /* start of the pending safe run */
    mr_status st = MR_OK;
    for (size_t i = 0; i < len && st == MR_OK;) {
        size_t k;
        uint32_t cp;
        int inv;
        if (p[i] >= 0x20 && p[i] < 0x7f) {
            i++;
            continue;
        }
        if (!unsafe_at(p + i, len - i, &k, &cp, &inv)) {
            i += k;
            continue;
        }
        st = mr_buf_append(out, s + run, i - run);
        if (st != MR_OK) break;
        if (cp == '\n' && !inv) st = mr_buf_puts(out, "\\n");
        else if (cp == '\t' && !inv) st = mr_buf_puts(out, "\\t");
        else if (cp == '\r' && !inv) st = mr_buf_puts(out, "\\r");
        else if (cp < 0x80 || inv) st = mr_buf_printf(out, "\\x%02x", (unsigned)cp);
        else st = mr_buf_printf(out, "\\u%04x", (unsigned)cp);
        i += k;
        run = i;
    }
    if (st == MR_OK) st = mr_buf_append(out, s + run, len - run);
    return st;
}

size_t mr_term_escape(const char *s, char *buf, size_t buf_len)
{
    if (!buf_len) return 0;
    mr_buf b;
    mr_buf_init(&b);
    size_t n = 0;
    if (mr_buf_term_escape(&b, s ? s : "", s ? strlen(s) : 0) == MR_OK && b.data) {
        n = b.len < buf_len - 1 ? b.len : buf_len - 1;
        while (n > 0 && n < b.len && ((unsigned char)b.data[n] & 0xc0) == 0x80) n--; /* never cut a character */
        memcpy(buf, b.data, n);
    } else if (s) { /* no memory: keep the safe prefix */
        const unsigned char *p = (const unsigned char *)s;
        while (n + 1 < buf_len && p[n] >= 0x20 && p[n] < 0x7f) n++;
        memcpy(buf, s, n);
    }
    buf[n] = '\0';
    mr_buf_free(&b);
    return n;
}

static mr_status json_escape_into(mr_buf *out, const char *s, size_t len, int quote)
{
    const unsigned char *p = (const unsigned char *)s;
    size_t run = 0;
    mr_status st = quote ? mr_buf_append(out, "\"", 1) : MR_OK;
    for (size_t i = 0; i < len && st == MR_OK;) {
        size_t k;
        uint32_t cp;
        int inv;
        unsigned char c = p[i];
        if (c >= 0x20 && c < 0x7f && (!quote || (c != '"' && c != '\\'))) {
            i++;
            continue;
        }
        int bad = unsafe_at(p + i, len - i, &k, &cp, &inv);
        if (!quote && (c == '\n' || c == '\t' || c == '\r')) bad = 0; /* whitespace between tokens */
        if (!bad && !(quote && (c == '"' || c == '\\'))) {
            i += k;
            continue;
        }
        st = mr_buf_append(out, s + run, i - run);
        if (st != MR_OK) break;
        if (inv) st = mr_buf_puts(out, "\\ufffd");
        else if (c == '"') st = mr_buf_puts(out, "\\\"");
        else if (c == '\\') st = mr_buf_puts(out, "\\\\");
        else if (c == '\n') st = mr_buf_puts(out, "\\n");
        else if (c == '\t') st = mr_buf_puts(out, "\\t");
        else if (c == '\r') st = mr_buf_puts(out, "\\r");
        else st = mr_buf_printf(out, "\\u%04x", (unsigned)cp);
        i += k;
        run = i;
    }
    if (st == MR_OK) st = mr_buf_append(out, s + run, len - run);
    if (st == MR_OK && quote) st = mr_buf_append(out, "\"", 1);
    return st;
}

mr_status mr_buf_json_text(mr_buf *out, const char *s, size_t len) { return json_escape_into(out, s, len, 1); }

mr_status mr_buf_json_safe(mr_buf *out, const char *json, size_t len) { return json_escape_into(out, json, len, 0); }

void mr_fmt_shortest(double d, char *buf, size_t buf_len)
{
    if (isnan(d) || isinf(d)) {
        snprintf(buf, buf_len, "%s", isnan(d) ? "nan" : d < 0 ? "-inf" : "inf");
        return;
    }
    if (d == floor(d) && fabs(d) < 1e15) { /* an integral value as an integer: 300, not 3e+02 */
        snprintf(buf, buf_len, "%.0f", d);
        return;
    }
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(buf, buf_len, "%.*g", prec, d);
        if (strtod(buf, NULL) == d) break;
    }
}
