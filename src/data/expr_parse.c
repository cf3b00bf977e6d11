/* Expression text <-> tree: the lexer, a recursive-descent parser with SQL
 * precedence, the canonical printer, and the list of columns an expression
 * reads. Typing lives in expr_bind.c, evaluation in expr_eval.c.
 *
 * Grammar (lowest precedence first):
 *   or      := and (OR and)*
 *   and     := not (AND not)*
 *   not     := NOT not | pred
 *   pred    := sum [ cmpop sum | IS [NOT] NULL | [NOT] IN '(' or (',' or)* ')'
 *                  | [NOT] BETWEEN sum AND sum ]
 *   sum     := prod (('+' | '-') prod)*
 *   prod    := unary (('*' | '/' | '%') unary)*
 *   unary   := '-' unary | '+' unary | primary
 *   primary := number | string | TRUE | FALSE | NULL | DATE string
 *            | TIMESTAMP string | ident '(' [or (',' or)*] ')' | ident
 *            | "quoted ident" | '(' or ')'
 *            | CASE (WHEN or THEN or)+ [ELSE or] END
 * CASE WHEN THEN ELSE END are contextual: CASE only when WHEN follows it, the
 * others only where the CASE grammar expects them, so columns may keep those
 * names (the printer quotes them, which keeps the canonical text unambiguous). */
#include "expr_int.h"
#include "millrace/value.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- functions ------------------------------------------------------------ */

static const struct {
    const char *name;
    int min_args, max_args; /* max -1: unbounded */
} fn_table[FN__COUNT] = {
    [FN_ABS] = {"abs", 1, 1},           [FN_LOG] = {"log", 1, 1},       [FN_EXP] = {"exp", 1, 1},
    [FN_SQRT] = {"sqrt", 1, 1},         [FN_LOWER] = {"lower", 1, 1},   [FN_UPPER] = {"upper", 1, 1},
    [FN_LENGTH] = {"length", 1, 1},     [FN_CONTAINS] = {"contains", 2, 2},
    [FN_COALESCE] = {"coalesce", 1, -1}, [FN_YEAR] = {"year", 1, 1},    [FN_MONTH] = {"month", 1, 1},
    [FN_DAY] = {"day", 1, 1},           [FN_IF] = {"if", 3, 3},         [FN_CLIP] = {"clip", 3, 3},
    [FN_DAYS_BETWEEN] = {"days_between", 2, 2}, [FN_HASH] = {"hash", 1, 1},
    [FN_DAYOFWEEK] = {"dayofweek", 1, 1}, [FN_HOUR] = {"hour", 1, 1},   [FN_MINUTE] = {"minute", 1, 1},
    [FN_SECOND] = {"second", 1, 1},
};

const char *mr__expr_fn_name(int fn) { return fn >= 0 && fn < FN__COUNT ? fn_table[fn].name : "?"; }

static int ieq_n(const char *a, size_t a_len, const char *b)
{
    size_t b_len = strlen(b);
    if (a_len != b_len) return 0;
    for (size_t i = 0; i < a_len; i++) {
        char x = a[i], y = b[i];
        if (x >= 'A' && x <= 'Z') x = (char)(x - 'A' + 'a');
        if (y >= 'A' && y <= 'Z') y = (char)(y - 'A' + 'a');
        if (x != y) return 0;
    }
    return 1;
}

int mr__expr_fn_lookup(const char *name, size_t len)
{
    for (int i = 0; i < FN__COUNT; i++)
        if (ieq_n(name, len, fn_table[i].name)) return i;
    return -1;
}

/* ---- lexer ---------------------------------------------------------------- */

typedef enum tok_kind {
    T_EOF = 0, T_INT, T_FLOAT, T_STR, T_IDENT, T_QIDENT,
    T_LPAREN, T_RPAREN, T_COMMA, T_PLUS, T_MINUS, T_STAR, T_SLASH, T_PERCENT,
    T_EQ, T_NE, T_LT, T_LE, T_GT, T_GE,
    T_AND, T_OR, T_NOT, T_IN, T_IS, T_NULL, T_TRUE, T_FALSE, T_BETWEEN,
} tok_kind;

static const char *const keywords[] = {"AND", "OR", "NOT", "IN", "IS", "NULL", "TRUE", "FALSE", "BETWEEN"};
static const tok_kind keyword_toks[] = {T_AND, T_OR, T_NOT, T_IN, T_IS, T_NULL, T_TRUE, T_FALSE, T_BETWEEN};
#define N_KEYWORDS (sizeof(keywords) / sizeof(keywords[0]))

typedef struct tok {
    tok_kind kind;
    size_t start, end; /* byte range in the text */
    uint64_t u;        /* T_INT magnitude (<= 2^63; larger sets big) */
    int big;           /* T_INT above 2^63 */
    double f;          /* T_FLOAT */
} tok;

typedef struct parser {
    const char *text;
    size_t len;
    const char *label;
    tok tok;     /* current token */
    int rec;     /* recursion depth */
    mr_error *err;
} parser;

static int is_ident_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
static int is_ident_char(char c) { return is_ident_start(c) || (c >= '0' && c <= '9'); }
static int is_digit(char c) { return c >= '0' && c <= '9'; }

/* Short human description of a token for "got ..." (buf always terminated). */
static void describe_tok(const parser *p, const tok *t, char *buf, size_t buf_len)
{
    size_t n = t->end - t->start;
    int shown = n > 40 ? 40 : (int)n;
    const char *more = n > 40 ? "..." : "";
    const char *s = p->text + t->start;
    switch (t->kind) {
    case T_EOF: snprintf(buf, buf_len, "end of input"); break;
    case T_INT:
    case T_FLOAT: snprintf(buf, buf_len, "number %.*s%s", shown, s, more); break;
    case T_STR: snprintf(buf, buf_len, "string %.*s%s", shown, s, more); break;
    case T_IDENT:
    case T_QIDENT: snprintf(buf, buf_len, "identifier %.*s%s", shown, s, more); break;
    default: snprintf(buf, buf_len, "'%.*s'", shown, s); break;
    }
}

static mr_status perr(parser *p, size_t at, mr_status code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static mr_status perr(parser *p, size_t at, mr_status code, const char *fmt, ...)
{
    char what[300];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof(what), fmt, ap);
    va_end(ap);
    if (p->err && !mr_error_is_set(p->err)) {
        MR_ERR(p->err, code, "%s: column %zu: %s", p->label, at + 1, what);
        p->err->col = (long)at + 1;
    }
    return code;
}

static mr_status expected(parser *p, const char *what)
{
    char got[96];
    describe_tok(p, &p->tok, got, sizeof(got));
    return perr(p, p->tok.start, MR_E_PARSE, "expected %s, got %s", what, got);
}

/* Lexes the token starting at or after byte `at` into *t. */
static mr_status lex_at(parser *p, size_t at, tok *t)
{
    const char *s = p->text;
    size_t n = p->len, i = at;
    while (i < n && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r')) i++;
    memset(t, 0, sizeof(*t));
    t->start = i;
    if (i >= n) {
        t->kind = T_EOF;
        t->end = i;
        return MR_OK;
    }
    char c = s[i];
    if (is_digit(c) || (c == '.' && i + 1 < n && is_digit(s[i + 1]))) {
        int is_float = 0;
        while (i < n && is_digit(s[i])) i++;
        if (i < n && s[i] == '.') {
            is_float = 1;
            i++;
            while (i < n && is_digit(s[i])) i++;
        }
        if (i < n && (s[i] == 'e' || s[i] == 'E')) {
            is_float = 1;
            i++;
            if (i < n && (s[i] == '+' || s[i] == '-')) i++;
            if (i >= n || !is_digit(s[i])) return perr(p, t->start, MR_E_PARSE, "invalid number: exponent needs digits");
            while (i < n && is_digit(s[i])) i++;
        }
        if (i < n && (is_ident_char(s[i]) || s[i] == '.'))
            return perr(p, t->start, MR_E_PARSE, "invalid number: unexpected '%c' after digits", s[i]);
        t->end = i;
        if (is_float) {
            char buf[512];
            if (i - t->start >= sizeof(buf)) return perr(p, t->start, MR_E_PARSE, "number too long");
            memcpy(buf, s + t->start, i - t->start);
            buf[i - t->start] = '\0';
            t->kind = T_FLOAT;
            t->f = strtod(buf, NULL);
            if (isinf(t->f)) return perr(p, t->start, MR_E_PARSE, "float literal %s out of range", buf);
        } else {
            const uint64_t lim = (uint64_t)1 << 63;
            t->kind = T_INT;
            for (size_t k = t->start; k < i && !t->big; k++) {
                uint64_t d = (uint64_t)(s[k] - '0');
                if (t->u > (lim - d) / 10) t->big = 1;
                else t->u = t->u * 10 + d;
            }
        }
        return MR_OK;
    }
    if (is_ident_start(c)) {
        while (i < n && is_ident_char(s[i])) i++;
        t->end = i;
        t->kind = T_IDENT;
        for (size_t k = 0; k < N_KEYWORDS; k++)
            if (ieq_n(s + t->start, i - t->start, keywords[k])) t->kind = keyword_toks[k];
        return MR_OK;
    }
    if (c == '\'' || c == '"') {
        i++;
        for (;;) {
            if (i >= n)
                return perr(p, t->start, MR_E_PARSE, "unterminated %s",
                            c == '\'' ? "string literal" : "quoted identifier");
            if (s[i] == c) {
                if (i + 1 < n && s[i + 1] == c) {
                    i += 2;
                    continue;
                }
                i++;
                break;
            }
            i++;
        }
        t->end = i;
        t->kind = c == '\'' ? T_STR : T_QIDENT;
        return MR_OK;
    }
    t->end = i + 1;
    char d = i + 1 < n ? s[i + 1] : '\0';
    switch (c) {
    case '(': t->kind = T_LPAREN; return MR_OK;
    case ')': t->kind = T_RPAREN; return MR_OK;
    case ',': t->kind = T_COMMA; return MR_OK;
    case '+': t->kind = T_PLUS; return MR_OK;
    case '-': t->kind = T_MINUS; return MR_OK;
    case '*': t->kind = T_STAR; return MR_OK;
    case '/': t->kind = T_SLASH; return MR_OK;
    case '%': t->kind = T_PERCENT; return MR_OK;
    case '=':
        t->kind = T_EQ;
        if (d == '=') t->end++;
        return MR_OK;
    case '!':
        if (d == '=') {
            t->kind = T_NE;
            t->end++;
            return MR_OK;
        }
        break;
    case '<':
        t->kind = T_LT;
        if (d == '=') t->kind = T_LE;
        if (d == '>') t->kind = T_NE;
        if (t->kind != T_LT) t->end++;
        return MR_OK;
    case '>':
        t->kind = T_GT;
        if (d == '=') {
            t->kind = T_GE;
            t->end++;
        }
        return MR_OK;
    default: break;
    }
    if ((unsigned char)c >= 0x20 && (unsigned char)c < 0x7f)
        return perr(p, i, MR_E_PARSE, "unexpected character '%c'", c);
    return perr(p, i, MR_E_PARSE, "unexpected byte 0x%02x", (unsigned)(unsigned char)c);
}

static mr_status advance(parser *p) { return lex_at(p, p->tok.end, &p->tok); }

/* ---- nodes ---------------------------------------------------------------- */

static void node_free(enode *n)
{
    if (!n) return;
    for (size_t i = 0; i < n->n_kids; i++) node_free(n->kids[i]);
    mr_free(n->kids);
    mr_free(n->str);
    mr_free(n);
}

static enode *node_new(parser *p, enode_kind kind, size_t at)
{
    enode *n = mr_calloc(1, sizeof(*n));
    if (!n) {
        perr(p, at, MR_E_NOMEM, "out of memory");
        return NULL;
    }
    n->kind = kind;
    n->pos = (long)at + 1;
    n->depth = 1;
    n->col = -1;
    n->dict_col = DICT_NONE;
    return n;
}

/* Appends kid to n; takes ownership of kid (freed on failure). */
static mr_status add_kid(parser *p, enode *n, enode *kid)
{
    enode **k = mr_realloc(n->kids, (n->n_kids + 1) * sizeof(*k));
    if (!k) {
        node_free(kid);
        return perr(p, (size_t)n->pos - 1, MR_E_NOMEM, "out of memory");
    }
    n->kids = k;
    n->kids[n->n_kids++] = kid;
    if (kid->depth + 1 > n->depth) n->depth = kid->depth + 1;
    if (n->depth > MR_EXPR_MAX_DEPTH)
        return perr(p, (size_t)n->pos - 1, MR_E_LIMIT, "expression nested too deeply (more than %d levels)",
                    MR_EXPR_MAX_DEPTH);
    return MR_OK;
}

/* Builds kind(a, b); takes ownership of a and b (freed on failure). */
static mr_status binary(parser *p, enode_kind kind, int op, enode *a, enode *b, enode **out)
{
    enode *n = node_new(p, kind, (size_t)a->pos - 1);
    if (!n) {
        node_free(a);
        node_free(b);
        return MR_E_NOMEM;
    }
    n->op = op;
    mr_status rc = add_kid(p, n, a);
    if (rc != MR_OK) {
        node_free(b);
        node_free(n);
        return rc;
    }
    rc = add_kid(p, n, b);
    if (rc != MR_OK) {
        node_free(n);
        return rc;
    }
    *out = n;
    return MR_OK;
}

/* Copies a quoted token's body, undoubling the quote character. */
static char *unquote(const parser *p, const tok *t, size_t *len_out)
{
    const char *s = p->text + t->start + 1;
    size_t raw = t->end - t->start - 2;
    char q = p->text[t->start];
    char *d = mr_malloc(raw + 1);
    if (!d) return NULL;
    size_t o = 0;
    for (size_t i = 0; i < raw; i++) {
        d[o++] = s[i];
        if (s[i] == q) i++;
    }
    d[o] = '\0';
    *len_out = o;
    return d;
}

/* ---- parser --------------------------------------------------------------- */

static mr_status parse_or(parser *p, enode **out);
static mr_status parse_sum(parser *p, enode **out);

static mr_status enter(parser *p)
{
    if (++p->rec > MR_EXPR_MAX_DEPTH)
        return perr(p, p->tok.start, MR_E_LIMIT, "expression nested too deeply (more than %d levels)",
                    MR_EXPR_MAX_DEPTH);
    return MR_OK;
}

/* Parses '(' or (',' or)* ')' appending each item to n; ctx names the list. */
static mr_status parse_list(parser *p, enode *n, const char *ctx, int allow_empty)
{
    mr_status rc;
    char what[64];
    if (p->tok.kind != T_LPAREN) {
        snprintf(what, sizeof(what), "'(' to start %s", ctx);
        return expected(p, what);
    }
    rc = advance(p);
    if (rc != MR_OK) return rc;
    if (allow_empty && p->tok.kind == T_RPAREN) return advance(p);
    for (;;) {
        enode *item = NULL;
        rc = parse_or(p, &item);
        if (rc != MR_OK) return rc;
        rc = add_kid(p, n, item);
        if (rc != MR_OK) return rc;
        if (p->tok.kind == T_COMMA) {
            rc = advance(p);
            if (rc != MR_OK) return rc;
            continue;
        }
        if (p->tok.kind != T_RPAREN) {
            snprintf(what, sizeof(what), "',' or ')' after %s", ctx);
            if (p->tok.kind == T_EOF) snprintf(what, sizeof(what), "')' after %s", ctx);
            return expected(p, what);
        }
        return advance(p);
    }
}

static int tok_is_word(const parser *p, const tok *t, const char *w)
{
    return t->kind == T_IDENT && ieq_n(p->text + t->start, t->end - t->start, w);
}

/* CASE WHEN c THEN v [WHEN c THEN v]... [ELSE e] END; p->tok is the first
 * WHEN, at is the byte offset of CASE. Consumes the END. */
static mr_status parse_case(parser *p, size_t at, enode **out)
{
    enode *n = NULL, *kid = NULL;
    mr_status rc = enter(p);
    if (rc != MR_OK) return rc;
    n = node_new(p, E_CASE, at);
    if (!n) return MR_E_NOMEM;
    while (tok_is_word(p, &p->tok, "when")) {
        rc = advance(p);
        if (rc == MR_OK) rc = parse_or(p, &kid);
        if (rc != MR_OK) goto fail;
        rc = add_kid(p, n, kid);
        if (rc != MR_OK) goto fail;
        if (!tok_is_word(p, &p->tok, "then")) {
            rc = expected(p, "THEN after the WHEN condition");
            goto fail;
        }
        rc = advance(p);
        if (rc == MR_OK) rc = parse_or(p, &kid);
        if (rc != MR_OK) goto fail;
        rc = add_kid(p, n, kid);
        if (rc != MR_OK) goto fail;
    }
    if (tok_is_word(p, &p->tok, "else")) {
        rc = advance(p);
        if (rc == MR_OK) rc = parse_or(p, &kid);
        if (rc != MR_OK) goto fail;
        rc = add_kid(p, n, kid);
        if (rc != MR_OK) goto fail;
        if (!tok_is_word(p, &p->tok, "end")) {
            rc = expected(p, "END after the ELSE value");
            goto fail;
        }
    } else if (!tok_is_word(p, &p->tok, "end")) {
        rc = expected(p, "WHEN, ELSE or END in CASE");
        goto fail;
    }
    rc = advance(p);
    if (rc != MR_OK) goto fail;
    p->rec--;
    *out = n;
    return MR_OK;
fail:
    node_free(n);
    return rc;
}

/* DATE 'YYYY-MM-DD' or TIMESTAMP '...': t is the keyword, str the string
 * token after it. */
static mr_status parse_typed_literal(parser *p, const tok *t, const tok *str, int is_date, enode **out)
{
    enode *n = node_new(p, E_LIT, t->start);
    if (!n) return MR_E_NOMEM;
    size_t sl;
    char *body = unquote(p, str, &sl);
    if (!body) {
        node_free(n);
        return perr(p, t->start, MR_E_NOMEM, "out of memory");
    }
    int bad;
    if (is_date) {
        int32_t days = 0;
        n->lit_type = MR_T_DATE;
        bad = mr_date_parse(body, sl, &days) != 0;
        n->i = days;
    } else {
        n->lit_type = MR_T_TIMESTAMP;
        bad = mr_timestamp_parse(body, sl, &n->i) != 0;
        /* canonical form prints 4-digit UTC years; keep the range printable */
        const int64_t lo = mr__days_to_us(mr_date_from_civil(0, 1, 1));
        const int64_t hi = mr__days_to_us(mr_date_from_civil(10000, 1, 1));
        if (!bad && (n->i < lo || n->i >= hi)) bad = 1;
    }
    mr_free(body);
    if (bad) {
        node_free(n);
        return perr(p, str->start, MR_E_PARSE, "invalid %s literal %.*s (expected '%s')", is_date ? "DATE" : "TIMESTAMP",
                    (int)(str->end - str->start > 40 ? 40 : str->end - str->start), p->text + str->start,
                    is_date ? "YYYY-MM-DD" : "YYYY-MM-DD HH:MM:SS[.ffffff]");
    }
    *out = n;
    return MR_OK;
}

/* name(args): t is the name, lparen the '(' after it. Checks the function
 * exists (with a did-you-mean) and its argument count; the parser is left
 * after the ')'. */
static mr_status parse_call(parser *p, const tok *t, const tok *lparen, enode **out)
{
    size_t len = t->end - t->start;
    const char *s = p->text + t->start;
    int fn = mr__expr_fn_lookup(s, len);
    if (fn < 0) {
        char name[64];
        snprintf(name, sizeof(name), "%.*s", (int)(len > 60 ? 60 : len), s);
        const char *cands[FN__COUNT];
        for (int k = 0; k < FN__COUNT; k++) cands[k] = fn_table[k].name;
        const char *near = mr_closest(name, cands, FN__COUNT);
        mr_status rc = perr(p, t->start, MR_E_NOT_FOUND, "unknown function '%s'", name);
        if (near) mr_error_hint(p->err, "did you mean '%s'?", near);
        return rc;
    }
    enode *n = node_new(p, E_CALL, t->start);
    if (!n) return MR_E_NOMEM;
    n->op = fn;
    p->tok = *lparen;
    char ctx[64];
    snprintf(ctx, sizeof(ctx), "arguments of %s()", fn_table[fn].name);
    mr_status rc = parse_list(p, n, ctx, 1);
    if (rc != MR_OK) goto fail;
    int lo = fn_table[fn].min_args, hi = fn_table[fn].max_args;
    if ((int)n->n_kids < lo || (hi >= 0 && (int)n->n_kids > hi)) {
        if (lo == hi)
            rc = perr(p, t->start, MR_E_PARSE, "%s() takes %d argument%s, got %zu", fn_table[fn].name, lo,
                      lo == 1 ? "" : "s", n->n_kids);
        else
            rc = perr(p, t->start, MR_E_PARSE, "%s() takes at least %d argument%s, got %zu", fn_table[fn].name, lo,
                      lo == 1 ? "" : "s", n->n_kids);
        goto fail;
    }
    *out = n;
    return MR_OK; /* parse_list consumed the ')' */
fail:
    node_free(n);
    return rc;
}

static mr_status parse_primary(parser *p, enode **out)
{
    mr_status rc = MR_OK;
    enode *n = NULL;
    tok t = p->tok;
    switch (t.kind) {
    case T_INT:
        if (t.big || t.u > (uint64_t)INT64_MAX)
            return perr(p, t.start, MR_E_PARSE, "integer literal %.*s out of range for int64",
                        (int)(t.end - t.start > 40 ? 40 : t.end - t.start), p->text + t.start);
        n = node_new(p, E_LIT, t.start);
        if (!n) return MR_E_NOMEM;
        n->lit_type = MR_T_INT64;
        n->i = (int64_t)t.u;
        break;
    case T_FLOAT:
        n = node_new(p, E_LIT, t.start);
        if (!n) return MR_E_NOMEM;
        n->lit_type = MR_T_FLOAT64;
        n->f = t.f;
        break;
    case T_STR:
        n = node_new(p, E_LIT, t.start);
        if (!n) return MR_E_NOMEM;
        n->lit_type = MR_T_STRING;
        n->str = unquote(p, &t, &n->str_len);
        if (!n->str) goto nomem;
        break;
    case T_TRUE:
    case T_FALSE:
        n = node_new(p, E_LIT, t.start);
        if (!n) return MR_E_NOMEM;
        n->lit_type = MR_T_BOOL;
        n->i = t.kind == T_TRUE;
        break;
    case T_NULL:
        n = node_new(p, E_LIT, t.start);
        if (!n) return MR_E_NOMEM;
        n->lit_type = MR_T_NULL;
        break;
    case T_LPAREN:
        rc = advance(p);
        if (rc != MR_OK) return rc;
        rc = parse_or(p, &n);
        if (rc != MR_OK) return rc;
        if (p->tok.kind != T_RPAREN) {
            node_free(n);
            return expected(p, "')'");
        }
        break;
    case T_QIDENT: {
        n = node_new(p, E_COL, t.start);
        if (!n) return MR_E_NOMEM;
        size_t len;
        n->str = unquote(p, &t, &len);
        if (!n->str) goto nomem;
        if (len == 0 || memchr(n->str, '\0', len)) {
            node_free(n);
            return perr(p, t.start, MR_E_PARSE, "a quoted column name must be non-empty and contain no NUL byte");
        }
        break;
    }
    case T_IDENT: {
        tok next;
        rc = lex_at(p, t.end, &next);
        if (rc != MR_OK) return rc;
        size_t len = t.end - t.start;
        const char *s = p->text + t.start;
        if (ieq_n(s, len, "case") && tok_is_word(p, &next, "when")) {
            p->tok = next;
            return parse_case(p, t.start, out);
        }
        int is_date = ieq_n(s, len, "date"), is_ts = ieq_n(s, len, "timestamp");
        if ((is_date || is_ts) && next.kind == T_STR) {
            rc = parse_typed_literal(p, &t, &next, is_date, &n);
            if (rc != MR_OK) return rc;
            p->tok = next;
            break;
        }
        if (next.kind == T_LPAREN) return parse_call(p, &t, &next, out);
        n = node_new(p, E_COL, t.start);
        if (!n) return MR_E_NOMEM;
        n->str = mr_strndup(s, len);
        if (!n->str) goto nomem;
        break;
    }
    default: return expected(p, "an expression");
    }
    rc = advance(p);
    if (rc != MR_OK) goto fail;
    *out = n;
    return MR_OK;
nomem:
    rc = perr(p, t.start, MR_E_NOMEM, "out of memory");
fail:
    node_free(n);
    return rc;
}

static mr_status parse_unary(parser *p, enode **out)
{
    mr_status rc;
    if (p->tok.kind != T_MINUS && p->tok.kind != T_PLUS) return parse_primary(p, out);
    rc = enter(p);
    if (rc != MR_OK) return rc;
    size_t at = p->tok.start;
    int minus = p->tok.kind == T_MINUS;
    rc = advance(p);
    if (rc != MR_OK) return rc;
    /* -9223372036854775808 is the one literal only reachable through '-' */
    if (minus && p->tok.kind == T_INT && !p->tok.big && p->tok.u == (uint64_t)1 << 63) {
        enode *n = node_new(p, E_LIT, at);
        if (!n) return MR_E_NOMEM;
        n->lit_type = MR_T_INT64;
        n->i = INT64_MIN;
        rc = advance(p);
        if (rc != MR_OK) {
            node_free(n);
            return rc;
        }
        p->rec--;
        *out = n;
        return MR_OK;
    }
    enode *kid = NULL;
    rc = parse_unary(p, &kid);
    if (rc != MR_OK) return rc;
    p->rec--;
    if (!minus) {
        *out = kid;
        return MR_OK;
    }
    /* fold the sign into numeric literals so "-5" is one literal */
    if (kid->kind == E_LIT && kid->lit_type == MR_T_INT64 && kid->i != INT64_MIN) {
        kid->i = -kid->i;
        kid->pos = (long)at + 1;
        *out = kid;
        return MR_OK;
    }
    if (kid->kind == E_LIT && kid->lit_type == MR_T_FLOAT64) {
        kid->f = -kid->f;
        kid->pos = (long)at + 1;
        *out = kid;
        return MR_OK;
    }
    enode *n = node_new(p, E_NEG, at);
    if (!n) {
        node_free(kid);
        return MR_E_NOMEM;
    }
    rc = add_kid(p, n, kid);
    if (rc != MR_OK) {
        node_free(n);
        return rc;
    }
    *out = n;
    return MR_OK;
}

static mr_status parse_prod(parser *p, enode **out)
{
    enode *a = NULL;
    mr_status rc = parse_unary(p, &a);
    while (rc == MR_OK && (p->tok.kind == T_STAR || p->tok.kind == T_SLASH || p->tok.kind == T_PERCENT)) {
        int op = p->tok.kind == T_STAR ? OP_MUL : p->tok.kind == T_SLASH ? OP_DIV : OP_MOD;
        enode *b = NULL;
        rc = advance(p);
        if (rc == MR_OK) rc = parse_unary(p, &b);
        if (rc != MR_OK) break;
        rc = binary(p, E_ARITH, op, a, b, &a);
        if (rc != MR_OK) return rc; /* binary freed a and b */
    }
    if (rc != MR_OK) {
        node_free(a);
        return rc;
    }
    *out = a;
    return MR_OK;
}

static mr_status parse_sum(parser *p, enode **out)
{
    enode *a = NULL;
    mr_status rc = parse_prod(p, &a);
    while (rc == MR_OK && (p->tok.kind == T_PLUS || p->tok.kind == T_MINUS)) {
        int op = p->tok.kind == T_PLUS ? OP_ADD : OP_SUB;
        enode *b = NULL;
        rc = advance(p);
        if (rc == MR_OK) rc = parse_prod(p, &b);
        if (rc != MR_OK) break;
        rc = binary(p, E_ARITH, op, a, b, &a);
        if (rc != MR_OK) return rc;
    }
    if (rc != MR_OK) {
        node_free(a);
        return rc;
    }
    *out = a;
    return MR_OK;
}

static int cmp_op(tok_kind k)
{
    switch (k) {
    case T_EQ: return CMP_EQ;
    case T_NE: return CMP_NE;
    case T_LT: return CMP_LT;
    case T_LE: return CMP_LE;
    case T_GT: return CMP_GT;
    case T_GE: return CMP_GE;
    default: return -1;
    }
}

static mr_status parse_pred(parser *p, enode **out)
{
    enode *a = NULL, *n = NULL, *b = NULL;
    mr_status rc = parse_sum(p, &a);
    if (rc != MR_OK) return rc;
    int op = cmp_op(p->tok.kind);
    if (op >= 0) {
        rc = advance(p);
        if (rc == MR_OK) rc = parse_sum(p, &b);
        if (rc != MR_OK) goto fail;
        return binary(p, E_CMP, op, a, b, out);
    }
    if (p->tok.kind == T_IS) {
        n = node_new(p, E_ISNULL, (size_t)a->pos - 1);
        if (!n) {
            rc = MR_E_NOMEM;
            goto fail;
        }
        rc = advance(p);
        if (rc != MR_OK) goto fail;
        if (p->tok.kind == T_NOT) {
            n->negated = 1;
            rc = advance(p);
            if (rc != MR_OK) goto fail;
        }
        if (p->tok.kind != T_NULL) {
            rc = expected(p, n->negated ? "NULL after IS NOT" : "NULL or NOT NULL after IS");
            goto fail;
        }
        rc = advance(p);
        if (rc != MR_OK) goto fail;
        rc = add_kid(p, n, a);
        a = NULL;
        if (rc != MR_OK) goto fail;
        *out = n;
        return MR_OK;
    }
    int negated = 0;
    if (p->tok.kind == T_NOT) {
        negated = 1;
        rc = advance(p);
        if (rc != MR_OK) goto fail;
        if (p->tok.kind != T_IN && p->tok.kind != T_BETWEEN) {
            rc = expected(p, "IN or BETWEEN after NOT");
            goto fail;
        }
    }
    if (p->tok.kind == T_IN || p->tok.kind == T_BETWEEN) {
        int is_in = p->tok.kind == T_IN;
        n = node_new(p, is_in ? E_IN : E_BETWEEN, (size_t)a->pos - 1);
        if (!n) {
            rc = MR_E_NOMEM;
            goto fail;
        }
        n->negated = negated;
        rc = add_kid(p, n, a);
        a = NULL;
        if (rc == MR_OK) rc = advance(p);
        if (rc != MR_OK) goto fail;
        if (is_in) {
            rc = parse_list(p, n, "IN list", 0);
            if (rc != MR_OK) goto fail;
        } else {
            rc = parse_sum(p, &b);
            if (rc != MR_OK) goto fail;
            rc = add_kid(p, n, b);
            b = NULL;
            if (rc != MR_OK) goto fail;
            if (p->tok.kind != T_AND) {
                rc = expected(p, "AND in BETWEEN");
                goto fail;
            }
            rc = advance(p);
            if (rc == MR_OK) rc = parse_sum(p, &b);
            if (rc != MR_OK) goto fail;
            rc = add_kid(p, n, b);
            b = NULL;
            if (rc != MR_OK) goto fail;
        }
        *out = n;
        return MR_OK;
    }
    *out = a;
    return MR_OK;
fail:
    node_free(a);
    node_free(b);
    node_free(n);
    return rc;
}

static mr_status parse_not(parser *p, enode **out)
{
    if (p->tok.kind != T_NOT) return parse_pred(p, out);
    mr_status rc = enter(p);
    if (rc != MR_OK) return rc;
    enode *n = node_new(p, E_NOT, p->tok.start), *kid = NULL;
    if (!n) return MR_E_NOMEM;
    rc = advance(p);
    if (rc == MR_OK) rc = parse_not(p, &kid);
    if (rc != MR_OK) {
        node_free(n);
        return rc;
    }
    p->rec--;
    rc = add_kid(p, n, kid);
    if (rc != MR_OK) {
        node_free(n);
        return rc;
    }
    *out = n;
    return MR_OK;
}

/* Appends b to the n-ary AND/OR node a, splicing b's kids if b is the same
 * kind (so chains and parenthesised groups flatten). Owns b. */
static mr_status join(parser *p, enode *a, enode *b)
{
    if (b->kind != a->kind) return add_kid(p, a, b);
    mr_status rc = MR_OK;
    for (size_t i = 0; i < b->n_kids; i++) {
        if (rc == MR_OK) {
            rc = add_kid(p, a, b->kids[i]);
        } else {
            node_free(b->kids[i]);
        }
        b->kids[i] = NULL;
    }
    b->n_kids = 0;
    node_free(b);
    return rc;
}

static mr_status parse_chain(parser *p, enode_kind kind, tok_kind sep, mr_status (*sub)(parser *, enode **),
                             enode **out)
{
    enode *a = NULL, *n = NULL;
    mr_status rc = sub(p, &a);
    if (rc != MR_OK) return rc;
    if (p->tok.kind != sep) {
        *out = a;
        return MR_OK;
    }
    n = node_new(p, kind, (size_t)a->pos - 1);
    if (!n) {
        node_free(a);
        return MR_E_NOMEM;
    }
    rc = join(p, n, a);
    if (rc != MR_OK) goto fail;
    while (p->tok.kind == sep) {
        enode *b = NULL;
        rc = advance(p);
        if (rc == MR_OK) rc = sub(p, &b);
        if (rc != MR_OK) goto fail;
        rc = join(p, n, b);
        if (rc != MR_OK) goto fail;
    }
    *out = n;
    return MR_OK;
fail:
    node_free(n);
    return rc;
}

static mr_status parse_and(parser *p, enode **out) { return parse_chain(p, E_AND, T_AND, parse_not, out); }

static mr_status parse_or(parser *p, enode **out)
{
    mr_status rc = enter(p);
    if (rc != MR_OK) return rc;
    rc = parse_chain(p, E_OR, T_OR, parse_and, out);
    if (rc == MR_OK) p->rec--;
    return rc;
}

/* ---- column list ------------------------------------------------------------
 * Distinct names in first-appearance order, deduplicated with a small
 * open-addressing hash set (expressions may be machine-generated and long). */

typedef struct colset {
    size_t *slots; /* index + 1 into e->cols; 0 = empty */
    size_t cap;    /* power of two */
} colset;

static size_t count_cols(const enode *n)
{
    size_t c = n->kind == E_COL;
    for (size_t i = 0; i < n->n_kids; i++) c += count_cols(n->kids[i]);
    return c;
}

static mr_status collect_cols(mr_expr *e, colset *set, const enode *n)
{
    if (n->kind == E_COL) {
        mr_hash128 h = mr_hash_bytes(n->str, strlen(n->str));
        size_t k = (size_t)h.lo & (set->cap - 1);
        while (set->slots[k]) {
            if (!strcmp(e->cols[set->slots[k] - 1], n->str)) return MR_OK;
            k = (k + 1) & (set->cap - 1);
        }
        char *name = mr_strdup(n->str);
        if (!name) return MR_E_NOMEM;
        e->cols[e->n_cols++] = name;
        set->slots[k] = e->n_cols;
    }
    for (size_t i = 0; i < n->n_kids; i++) {
        mr_status rc = collect_cols(e, set, n->kids[i]);
        if (rc != MR_OK) return rc;
    }
    return MR_OK;
}

/* ---- public: parse / free / columns ---------------------------------------- */

void mr_expr_free(mr_expr *e)
{
    if (!e) return;
    node_free(e->root);
    mr_free(e->label);
    for (size_t i = 0; i < e->n_cols; i++) mr_free(e->cols[i]);
    mr_free(e->cols);
    for (size_t i = 0; i < e->n_schema; i++) mr_free(e->schema_names[i]);
    mr_free(e->schema_names);
    mr_free(e->schema_types);
    mr_free(e);
}

mr_status mr_expr_parse(const char *text, size_t len, const char *label, mr_expr **out, mr_error *err)
{
    mr_status rc = MR_OK;
    colset set = {NULL, 0};
    parser p = {.text = text ? text : "", .len = text ? len : 0, .label = label ? label : "expression", .err = err};
    *out = NULL;
    if (p.len > MR_EXPR_MAX_TEXT)
        return MR_ERR(err, MR_E_LIMIT, "%s: text is %zu bytes, more than the %zu allowed", p.label, p.len,
                      (size_t)MR_EXPR_MAX_TEXT);
    mr_expr *e = mr_calloc(1, sizeof(*e));
    if (e) e->label = mr_strdup(p.label);
    if (!e || !e->label) {
        rc = MR_ERR(err, MR_E_NOMEM, "%s: out of memory", p.label);
        goto fail;
    }
    rc = lex_at(&p, 0, &p.tok);
    if (rc != MR_OK) goto fail;
    if (p.tok.kind == T_EOF) {
        rc = perr(&p, 0, MR_E_PARSE, "empty expression");
        goto fail;
    }
    rc = parse_or(&p, &e->root);
    if (rc != MR_OK) goto fail;
    if (p.tok.kind != T_EOF) {
        rc = expected(&p, "an operator or end of input");
        goto fail;
    }
    size_t n_refs = count_cols(e->root);
    if (n_refs) {
        set.cap = 8;
        while (set.cap < 2 * n_refs) set.cap *= 2;
        set.slots = mr_calloc(set.cap, sizeof(size_t));
        e->cols = mr_calloc(n_refs, sizeof(char *));
        if (!set.slots || !e->cols || collect_cols(e, &set, e->root) != MR_OK) {
            rc = MR_ERR(err, MR_E_NOMEM, "%s: out of memory", p.label);
            goto fail;
        }
    }
    mr_free(set.slots);
    *out = e;
    return MR_OK;
fail:
    mr_free(set.slots);
    mr_expr_free(e);
    return rc;
}

const char *const *mr_expr_columns(const mr_expr *e, size_t *n_out)
{
    *n_out = e ? e->n_cols : 0;
    return e ? (const char *const *)e->cols : NULL;
}

/* ---- printer ----------------------------------------------------------------
 * Precedence levels, loosest first; a child prints in parentheses when its
 * level is below the minimum its parent asks for. Left-associative operators
 * ask one level more of their right operand; predicates are non-associative
 * and ask for sums on both sides. */
enum { P_OR = 1, P_AND, P_NOT, P_PRED, P_SUM, P_PROD, P_NEG, P_PRIMARY };

static int prec(const enode *n)
{
    switch (n->kind) {
    case E_OR: return P_OR;
    case E_AND: return P_AND;
    case E_NOT: return P_NOT;
    case E_CMP:
    case E_IN:
    case E_ISNULL:
    case E_BETWEEN: return P_PRED;
    case E_ARITH: return n->op == OP_ADD || n->op == OP_SUB ? P_SUM : P_PROD;
    case E_NEG: return P_NEG;
    default: return P_PRIMARY;
    }
}

static int is_reserved(const char *s, size_t len)
{
    for (size_t k = 0; k < N_KEYWORDS; k++)
        if (ieq_n(s, len, keywords[k])) return 1;
    return 0;
}

static mr_status print_quoted(mr_buf *out, const char *s, size_t len, char q)
{
    mr_status rc = mr_buf_append(out, &q, 1);
    size_t from = 0;
    for (size_t i = 0; i < len && rc == MR_OK; i++) {
        if (s[i] != q) continue;
        rc = mr_buf_append(out, s + from, i + 1 - from); /* includes the quote */
        if (rc == MR_OK) rc = mr_buf_append(out, &q, 1);
        from = i + 1;
    }
    if (rc == MR_OK) rc = mr_buf_append(out, s + from, len - from);
    if (rc == MR_OK) rc = mr_buf_append(out, &q, 1);
    return rc;
}

/* Contextual CASE words: a column so named prints quoted, so that
 * "CASE WHEN a THEN "case" WHEN ..." cannot re-parse as a nested CASE. */
static int is_case_word(const char *s, size_t len)
{
    static const char *const words[] = {"case", "when", "then", "else", "end"};
    for (size_t k = 0; k < sizeof(words) / sizeof(words[0]); k++)
        if (ieq_n(s, len, words[k])) return 1;
    return 0;
}

static mr_status print_ident(mr_buf *out, const char *s)
{
    size_t len = strlen(s);
    int bare = len > 0 && is_ident_start(s[0]) && !is_reserved(s, len) && !is_case_word(s, len);
    for (size_t i = 1; i < len && bare; i++) bare = is_ident_char(s[i]);
    return bare ? mr_buf_append(out, s, len) : print_quoted(out, s, len, '"');
}

static int64_t floor_div(int64_t a, int64_t b) { return a / b - ((a % b != 0) && ((a < 0) != (b < 0))); }

void mr__expr_format_date(int64_t days, char *buf, size_t buf_len)
{
    int64_t y;
    unsigned m, d;
    mr_date_to_civil((int32_t)days, &y, &m, &d);
    snprintf(buf, buf_len, "%04lld-%02u-%02u", (long long)y, m, d);
}

void mr__expr_format_ts(int64_t us, char *buf, size_t buf_len)
{
    int64_t secs = floor_div(us, 1000000), frac = us - secs * 1000000;
    int64_t days = floor_div(secs, 86400), sod = secs - days * 86400;
    char date[32];
    mr__expr_format_date(days, date, sizeof(date));
    int k = snprintf(buf, buf_len, "%s %02lld:%02lld:%02lld", date, (long long)(sod / 3600), (long long)(sod / 60 % 60),
                     (long long)(sod % 60));
    if (frac && k > 0 && (size_t)k < buf_len) snprintf(buf + k, buf_len - (size_t)k, ".%06lld", (long long)frac);
}

static mr_status print_float(mr_buf *out, double v)
{
    char buf[48];
    for (int prec_digits = 15; prec_digits <= 17; prec_digits++) {
        snprintf(buf, sizeof(buf), "%.*g", prec_digits, v);
        if (strtod(buf, NULL) == v) break;
    }
    mr_status rc = mr_buf_puts(out, buf);
    if (rc == MR_OK && !strpbrk(buf, ".en")) rc = mr_buf_puts(out, ".0");
    return rc;
}

static mr_status print_lit(const enode *n, mr_buf *out)
{
    char buf[64];
    switch (n->lit_type) {
    case MR_T_NULL: return mr_buf_puts(out, "NULL");
    case MR_T_BOOL: return mr_buf_puts(out, n->i ? "TRUE" : "FALSE");
    case MR_T_INT64: return mr_buf_printf(out, "%lld", (long long)n->i);
    case MR_T_FLOAT64: return print_float(out, n->f);
    case MR_T_STRING: return print_quoted(out, n->str, n->str_len, '\'');
    case MR_T_DATE:
        mr__expr_format_date(n->i, buf, sizeof(buf));
        return mr_buf_printf(out, "DATE '%s'", buf);
    case MR_T_TIMESTAMP:
        mr__expr_format_ts(n->i, buf, sizeof(buf));
        return mr_buf_printf(out, "TIMESTAMP '%s'", buf);
    default: return mr_buf_puts(out, "NULL");
    }
}

static int starts_negative(const enode *n)
{
    if (n->kind == E_NEG) return 1;
    if (n->kind != E_LIT) return 0;
    return (n->lit_type == MR_T_INT64 && n->i < 0) || (n->lit_type == MR_T_FLOAT64 && signbit(n->f));
}

static mr_status print_at(const enode *n, int min_prec, mr_buf *out);

static mr_status print_list(const enode *n, size_t from, mr_buf *out)
{
    mr_status rc = mr_buf_puts(out, "(");
    for (size_t i = from; i < n->n_kids && rc == MR_OK; i++) {
        if (i > from) rc = mr_buf_puts(out, ", ");
        if (rc == MR_OK) rc = print_at(n->kids[i], P_OR, out);
    }
    if (rc == MR_OK) rc = mr_buf_puts(out, ")");
    return rc;
}

static mr_status print_at(const enode *n, int min_prec, mr_buf *out)
{
    static const char *const arith_ops[] = {" + ", " - ", " * ", " / ", " % "};
    static const char *const cmp_ops[] = {" = ", " != ", " < ", " <= ", " > ", " >= "};
    int paren = prec(n) < min_prec;
    mr_status rc = paren ? mr_buf_puts(out, "(") : MR_OK;
    if (rc != MR_OK) return rc;
    switch (n->kind) {
    case E_LIT: rc = print_lit(n, out); break;
    case E_COL: rc = print_ident(out, n->str); break;
    case E_NEG:
        /* "- -x", not "-(-x)": parentheses would cost the re-parse an extra
         * nesting level per sign, so long sign chains would stop round-tripping */
        rc = mr_buf_puts(out, starts_negative(n->kids[0]) ? "- " : "-");
        if (rc == MR_OK) rc = print_at(n->kids[0], P_NEG, out);
        break;
    case E_NOT:
        rc = mr_buf_puts(out, "NOT ");
        if (rc == MR_OK) rc = print_at(n->kids[0], P_NOT, out);
        break;
    case E_ARITH:
        rc = print_at(n->kids[0], prec(n), out);
        if (rc == MR_OK) rc = mr_buf_puts(out, arith_ops[n->op]);
        if (rc == MR_OK) rc = print_at(n->kids[1], prec(n) + 1, out);
        break;
    case E_CMP:
        rc = print_at(n->kids[0], P_SUM, out);
        if (rc == MR_OK) rc = mr_buf_puts(out, cmp_ops[n->op]);
        if (rc == MR_OK) rc = print_at(n->kids[1], P_SUM, out);
        break;
    case E_AND:
    case E_OR:
        for (size_t i = 0; i < n->n_kids && rc == MR_OK; i++) {
            if (i) rc = mr_buf_puts(out, n->kind == E_AND ? " AND " : " OR ");
            if (rc == MR_OK) rc = print_at(n->kids[i], prec(n) + 1, out);
        }
        break;
    case E_IN:
        rc = print_at(n->kids[0], P_SUM, out);
        if (rc == MR_OK) rc = mr_buf_puts(out, n->negated ? " NOT IN " : " IN ");
        if (rc == MR_OK) rc = print_list(n, 1, out);
        break;
    case E_ISNULL:
        rc = print_at(n->kids[0], P_SUM, out);
        if (rc == MR_OK) rc = mr_buf_puts(out, n->negated ? " IS NOT NULL" : " IS NULL");
        break;
    case E_BETWEEN:
        rc = print_at(n->kids[0], P_SUM, out);
        if (rc == MR_OK) rc = mr_buf_puts(out, n->negated ? " NOT BETWEEN " : " BETWEEN ");
        if (rc == MR_OK) rc = print_at(n->kids[1], P_SUM, out);
        if (rc == MR_OK) rc = mr_buf_puts(out, " AND ");
        if (rc == MR_OK) rc = print_at(n->kids[2], P_SUM, out);
        break;
    case E_CALL:
        rc = mr_buf_puts(out, fn_table[n->op].name);
        if (rc == MR_OK) rc = print_list(n, 0, out);
        break;
    case E_CASE:
        rc = mr_buf_puts(out, "CASE");
        for (size_t i = 0; i + 1 < n->n_kids && rc == MR_OK; i += 2) {
            rc = mr_buf_puts(out, " WHEN ");
            if (rc == MR_OK) rc = print_at(n->kids[i], P_OR, out);
            if (rc == MR_OK) rc = mr_buf_puts(out, " THEN ");
            if (rc == MR_OK) rc = print_at(n->kids[i + 1], P_OR, out);
        }
        if (rc == MR_OK && n->n_kids % 2) {
            rc = mr_buf_puts(out, " ELSE ");
            if (rc == MR_OK) rc = print_at(n->kids[n->n_kids - 1], P_OR, out);
        }
        if (rc == MR_OK) rc = mr_buf_puts(out, " END");
        break;
    }
    if (rc == MR_OK && paren) rc = mr_buf_puts(out, ")");
    return rc;
}

mr_status mr__expr_print_node(const enode *n, mr_buf *out) { return print_at(n, P_OR, out); }

mr_status mr_expr_print(const mr_expr *e, mr_buf *out)
{
    if (!e || !e->root) return MR_E_INVALID_ARG;
    return mr__expr_print_node(e->root, out);
}

void mr__expr_describe(const enode *n, char *buf, size_t buf_len)
{
    const char *tname = n->kind == E_COL ? mr_dtype_name(n->col_type) : mr_dtype_name(n->type);
    if (n->kind == E_LIT && n->lit_type == MR_T_NULL) {
        snprintf(buf, buf_len, "NULL");
        return;
    }
    mr_buf b;
    mr_buf_init(&b);
    b.limit = 4096;
    mr_status rc = n->kind == E_COL ? mr_buf_puts(&b, n->str) : mr__expr_print_node(n, &b);
    const char *text = rc == MR_OK && b.data ? b.data : "?";
    int shown = (int)strlen(text) > 60 ? 60 : (int)strlen(text);
    const char *more = (int)strlen(text) > 60 ? "..." : "";
    if (n->kind == E_COL) snprintf(buf, buf_len, "%s column '%.*s%s'", tname, shown, text, more);
    else if (n->kind == E_LIT) snprintf(buf, buf_len, "%s literal %.*s%s", tname, shown, text, more);
    else snprintf(buf, buf_len, "%s expression '%.*s%s'", tname, shown, text, more);
    mr_buf_free(&b);
}
