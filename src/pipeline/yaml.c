/* YAML <-> mr_value: a reader built on libyaml's event API (one document,
 * positions from marks, duplicate keys rejected, no anchors or aliases) and
 * a block-style writer whose output reads back to an equal tree. */
#include "millrace/spec.h"

#include <math.h>
#include <stdarg.h>
#include <string.h>
#include <yaml.h>

#define MAX_DEPTH 256 /* nesting bound: the tree is freed and printed recursively */

typedef struct frame {
    mr_value *node;  /* MAP or SEQ being filled (owned by its parent or the root) */
    char *key;       /* MAP: key waiting for its value, or NULL */
    long key_line, key_col;
} frame;

typedef struct reader {
    const char *path;
    mr_value *root;
    frame stack[MAX_DEPTH];
    size_t depth;
    int n_docs;
    mr_error *err;
} reader;

static mr_status fail_at(reader *r, mr_status code, yaml_mark_t mark, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static mr_status fail_at(reader *r, mr_status code, yaml_mark_t mark, const char *fmt, ...)
{
    char msg[MR_ERR_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    MR_ERR(r->err, code, "%s", msg);
    mr_error_at(r->err, r->path, (long)mark.line + 1, (long)mark.column + 1);
    return code;
}

/* Attaches a finished or just-opened node to the current container. */
static mr_status attach(reader *r, mr_value *v, yaml_mark_t mark)
{
    mr_status st = MR_OK;
    if (!r->depth) {
        r->root = v;
        goto done;
    }
    frame *top = &r->stack[r->depth - 1];
    if (top->node->kind == MR_V_SEQ) {
        st = mr_value_seq_push(top->node, v);
        goto done;
    }
    if (!top->key) {
        mr_value_free(v);
        st = fail_at(r, MR_E_PARSE, mark, "complex mapping keys are not supported");
        goto done;
    }
    st = mr_value_map_set(top->node, top->key, v);
    if (st == MR_OK) {
        top->node->key_lines[top->node->n - 1] = top->key_line;
        top->node->key_cols[top->node->n - 1] = top->key_col;
    }
    mr_free(top->key);
    top->key = NULL;
done:
    if (st == MR_E_NOMEM) MR_ERR(r->err, st, "out of memory reading YAML");
    return st;
}

static mr_status on_key(reader *r, frame *top, const char *text, yaml_mark_t mark)
{
    mr_status st = MR_OK;
    long line = (long)mark.line + 1;
    for (size_t i = 0; i < top->node->n; i++) {
        if (!strcmp(top->node->keys[i], text)) {
            MR_ERR(r->err, MR_E_PARSE, "duplicate key '%s' at line %ld (first defined at line %ld)",
                   text, line, top->node->key_lines[i]);
            mr_error_at(r->err, r->path, line, (long)mark.column + 1);
            st = MR_E_PARSE;
            goto done;
        }
    }
    top->key = mr_strdup(text);
    if (!top->key) {
        st = MR_ERR(r->err, MR_E_NOMEM, "out of memory reading YAML");
        goto done;
    }
    top->key_line = line;
    top->key_col = (long)mark.column + 1;
done:
    return st;
}

static mr_status on_scalar(reader *r, const yaml_event_t *ev)
{
    mr_status st = MR_OK;
    const char *text = (const char *)ev->data.scalar.value;
    size_t len = ev->data.scalar.length;
    if (memchr(text, '\0', len)) {
        st = fail_at(r, MR_E_PARSE, ev->start_mark, "NUL characters in strings are not supported");
        goto done;
    }
    frame *top = r->depth ? &r->stack[r->depth - 1] : NULL;
    if (top && top->node->kind == MR_V_MAP && !top->key) {
        st = on_key(r, top, text, ev->start_mark);
        goto done;
    }
    const char *tag = (const char *)ev->data.scalar.tag;
    int quoted = ev->data.scalar.style != YAML_PLAIN_SCALAR_STYLE ||
                 (tag && !strcmp(tag, YAML_STR_TAG));
    mr_value *v = mr_value_from_scalar(text, quoted);
    if (!v) {
        st = MR_ERR(r->err, MR_E_NOMEM, "out of memory reading YAML");
        goto done;
    }
    v->line = (long)ev->start_mark.line + 1;
    v->col = (long)ev->start_mark.column + 1;
    st = attach(r, v, ev->start_mark);
done:
    return st;
}

static mr_status on_open(reader *r, const yaml_event_t *ev, mr_vkind kind)
{
    mr_status st = MR_OK;
    if (r->depth >= MAX_DEPTH) {
        st = fail_at(r, MR_E_LIMIT, ev->start_mark, "YAML nested deeper than %d levels", MAX_DEPTH);
        goto done;
    }
    mr_value *v = mr_value_new(kind);
    if (!v) {
        st = MR_ERR(r->err, MR_E_NOMEM, "out of memory reading YAML");
        goto done;
    }
    v->line = (long)ev->start_mark.line + 1;
    v->col = (long)ev->start_mark.column + 1;
    st = attach(r, v, ev->start_mark);
    if (st != MR_OK) goto done;
    r->stack[r->depth].node = v;
    r->stack[r->depth].key = NULL;
    r->depth++;
done:
    return st;
}

static mr_status on_event(reader *r, const yaml_event_t *ev, int *finished)
{
    mr_status st = MR_OK;
    const yaml_char_t *anchor = NULL;
    if (ev->type == YAML_SCALAR_EVENT) anchor = ev->data.scalar.anchor;
    if (ev->type == YAML_SEQUENCE_START_EVENT) anchor = ev->data.sequence_start.anchor;
    if (ev->type == YAML_MAPPING_START_EVENT) anchor = ev->data.mapping_start.anchor;
    if (anchor) {
        st = fail_at(r, MR_E_PARSE, ev->start_mark,
                     "YAML anchors ('&%s') and aliases are not supported", (const char *)anchor);
        goto done;
    }
    switch (ev->type) {
    case YAML_DOCUMENT_START_EVENT:
        if (++r->n_docs > 1)
            st = fail_at(r, MR_E_PARSE, ev->start_mark,
                         "multiple YAML documents in one file are not supported");
        break;
    case YAML_ALIAS_EVENT:
        st = fail_at(r, MR_E_PARSE, ev->start_mark,
                     "YAML aliases ('*%s') are not supported", (const char *)ev->data.alias.anchor);
        break;
    case YAML_SCALAR_EVENT: st = on_scalar(r, ev); break;
    case YAML_SEQUENCE_START_EVENT: st = on_open(r, ev, MR_V_SEQ); break;
    case YAML_MAPPING_START_EVENT: st = on_open(r, ev, MR_V_MAP); break;
    case YAML_SEQUENCE_END_EVENT:
    case YAML_MAPPING_END_EVENT:
        MR_ASSERT(r->depth > 0);
        r->depth--;
        break;
    case YAML_STREAM_END_EVENT: *finished = 1; break;
    default: break;
    }
done:
    return st;
}

static mr_status parser_error(reader *r, const yaml_parser_t *p)
{
    mr_status st = MR_E_PARSE;
    if (p->error == YAML_MEMORY_ERROR) {
        st = MR_ERR(r->err, MR_E_NOMEM, "out of memory reading YAML");
        goto done;
    }
    const char *problem = p->problem ? p->problem : "invalid YAML";
    if (p->error == YAML_READER_ERROR) {
        MR_ERR(r->err, st, "invalid YAML: %s (at byte %zu)", problem, p->problem_offset);
        mr_error_at(r->err, r->path, 0, 0);
        goto done;
    }
    if (p->context)
        MR_ERR(r->err, st, "invalid YAML: %s (%s at line %ld)", problem, p->context,
               (long)p->context_mark.line + 1);
    else
        MR_ERR(r->err, st, "invalid YAML: %s", problem);
    mr_error_at(r->err, r->path, (long)p->problem_mark.line + 1, (long)p->problem_mark.column + 1);
done:
    return st;
}

mr_status mr_yaml_parse(const char *text, size_t len, const char *path, mr_value **out,
                        mr_error *err)
{
    mr_status st = MR_OK;
    reader r;
    yaml_parser_t parser;
    memset(&r, 0, sizeof(r));
    r.path = path;
    r.err = err;
    *out = NULL;
    if (!yaml_parser_initialize(&parser)) {
        st = MR_ERR(err, MR_E_NOMEM, "out of memory reading YAML");
        goto done;
    }
    yaml_parser_set_input_string(&parser, (const unsigned char *)text, len);
    int finished = 0;
    while (st == MR_OK && !finished) {
        yaml_event_t ev;
        if (!yaml_parser_parse(&parser, &ev)) {
            st = parser_error(&r, &parser);
            break;
        }
        st = on_event(&r, &ev, &finished);
        yaml_event_delete(&ev);
    }
    yaml_parser_delete(&parser);
    if (st == MR_OK && !r.root) {
        r.root = mr_value_new(MR_V_NULL);
        if (!r.root) st = MR_ERR(err, MR_E_NOMEM, "out of memory reading YAML");
    }
done:
    for (size_t i = 0; i < r.depth; i++) mr_free(r.stack[i].key);
    if (st == MR_OK)
        *out = r.root;
    else
        mr_value_free(r.root);
    return st;
}

/* ---- writer ------------------------------------------------------------ */

/* NEL, LS, PS and BOM: libyaml treats them as line breaks (or drops them). */
static const char *const unicode_breaks[][2] = {
    {"\xc2\x85", "\\N"}, {"\xe2\x80\xa8", "\\L"}, {"\xe2\x80\xa9", "\\P"}, {"\xef\xbb\xbf", "\\uFEFF"}};
#define N_UNICODE_BREAKS (sizeof(unicode_breaks) / sizeof(unicode_breaks[0]))

static int has_unicode_break(const char *s)
{
    int found = 0;
    for (size_t i = 0; !found && i < N_UNICODE_BREAKS; i++) found = strstr(s, unicode_breaks[i][0]) != NULL;
    return found;
}

/* 1 if s must be quoted, 0 if not, -1 out of memory (the answer would
 * otherwise depend on memory: the same value emitted two ways). */
static int needs_quotes(const char *s)
{
    int quote = 0;
    size_t n = strlen(s);
    mr_value *back = NULL;
    if (!n || s[0] == ' ' || s[n - 1] == ' ' || strchr("-?:,[]{}#&*!|>'\"%@`", s[0]) ||
        !strncmp(s, "...", 3) || strpbrk(s, ":#,[]{}\t") || has_unicode_break(s)) {
        quote = 1;
        goto done;
    }
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p < 0x20 || *p == 0x7f) {
            quote = 1;
            goto done;
        }
    }
    back = mr_value_from_scalar(s, 0);
    quote = !back ? -1 : back->kind != MR_V_STR;
done:
    mr_value_free(back);
    return quote;
}

static mr_status emit_str(const char *s, mr_buf *out)
{
    mr_status st = MR_OK;
    int q = needs_quotes(s);
    if (q < 0) return MR_E_NOMEM;
    if (!q) {
        st = mr_buf_puts(out, s);
        goto done;
    }
    st = mr_buf_puts(out, "\"");
    for (const unsigned char *p = (const unsigned char *)s; st == MR_OK && *p; p++) {
        switch (*p) {
        case '"': st = mr_buf_puts(out, "\\\""); break;
        case '\\': st = mr_buf_puts(out, "\\\\"); break;
        case '\n': st = mr_buf_puts(out, "\\n"); break;
        case '\t': st = mr_buf_puts(out, "\\t"); break;
        case '\r': st = mr_buf_puts(out, "\\r"); break;
        default:
            if (*p < 0x20 || *p == 0x7f) {
                st = mr_buf_printf(out, "\\x%02x", *p);
                break;
            }
            size_t k = 0;
            while (k < N_UNICODE_BREAKS &&
                   strncmp((const char *)p, unicode_breaks[k][0], strlen(unicode_breaks[k][0])))
                k++;
            if (k < N_UNICODE_BREAKS) {
                st = mr_buf_puts(out, unicode_breaks[k][1]);
                p += strlen(unicode_breaks[k][0]) - 1;
            } else {
                st = mr_buf_append(out, p, 1);
            }
        }
    }
    if (st == MR_OK) st = mr_buf_puts(out, "\"");
done:
    return st;
}

static mr_status emit_scalar(const mr_value *v, mr_buf *out)
{
    mr_status st = MR_OK;
    if (v->kind == MR_V_STR)
        st = emit_str(v->str ? v->str : "", out);
    else if (v->kind == MR_V_FLOAT && isnan(v->u.f))
        st = mr_buf_puts(out, ".nan");
    else if (v->kind == MR_V_FLOAT && isinf(v->u.f))
        st = mr_buf_puts(out, v->u.f < 0 ? "-.inf" : ".inf");
    else if (v->kind == MR_V_MAP)
        st = mr_buf_puts(out, "{}");
    else if (v->kind == MR_V_SEQ)
        st = mr_buf_puts(out, "[]");
    else
        st = mr_value_scalar_text(v, out);
    return st;
}

/* Emitted length above which a mapping key is written explicitly ("? key"):
 * under libyaml's 1024-character limit on implicit keys, counted in bytes. */
#define MAX_IMPLICIT_KEY 1000

static int is_block(const mr_value *v) { return (v->kind == MR_V_MAP || v->kind == MR_V_SEQ) && v->n; }

static mr_status indent_to(mr_buf *out, int indent)
{
    mr_status st = MR_OK;
    for (int i = 0; st == MR_OK && i < indent; i++) st = mr_buf_append(out, " ", 1);
    return st;
}

/* Writes a non-empty MAP or SEQ at column `indent`; the first line's
 * indentation is already written when `inline_first` (after "- "). */
static mr_status emit_block(const mr_value *v, int indent, int inline_first, mr_buf *out)
{
    mr_status st = MR_OK;
    for (size_t i = 0; st == MR_OK && i < v->n; i++) {
        const mr_value *item = v->items[i];
        if (i || !inline_first) st = indent_to(out, indent);
        if (st != MR_OK) break;
        if (v->kind == MR_V_SEQ) {
            st = mr_buf_puts(out, "- ");
            if (st == MR_OK && is_block(item))
                st = emit_block(item, indent + 2, 1, out);
            else if (st == MR_OK) {
                st = emit_scalar(item, out);
                if (st == MR_OK) st = mr_buf_puts(out, "\n");
            }
            continue;
        }
        /* An implicit key is at most 1024 characters (YAML 1.2, 7.4.2; libyaml
         * enforces it): a longer one is written as an explicit "? key" line,
         * its value after a ":" on the next. */
        mr_buf key;
        mr_buf_init(&key);
        st = emit_str(v->keys[i], &key);
        if (st == MR_OK && key.len > MAX_IMPLICIT_KEY) {
            st = mr_buf_puts(out, "? ");
            if (st == MR_OK) st = mr_buf_append(out, key.data, key.len);
            if (st == MR_OK) st = mr_buf_puts(out, "\n");
            if (st == MR_OK) st = indent_to(out, indent);
        } else if (st == MR_OK) {
            st = mr_buf_append(out, key.data ? key.data : "", key.len);
        }
        mr_buf_free(&key);
        if (st == MR_OK && is_block(item)) {
            st = mr_buf_puts(out, ":\n");
            if (st == MR_OK) st = emit_block(item, indent + 2, 0, out);
        } else if (st == MR_OK) {
            st = mr_buf_puts(out, ": ");
            if (st == MR_OK) st = emit_scalar(item, out);
            if (st == MR_OK) st = mr_buf_puts(out, "\n");
        }
    }
    return st;
}

mr_status mr_yaml_emit(const mr_value *v, mr_buf *out)
{
    mr_status st = MR_OK;
    if (!v)
        st = mr_buf_puts(out, "null\n");
    else if (is_block(v))
        st = emit_block(v, 0, 0, out);
    else {
        st = emit_scalar(v, out);
        if (st == MR_OK) st = mr_buf_puts(out, "\n");
    }
    return st;
}
