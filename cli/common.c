/* Option helpers shared by the verbs. */
#include "cli.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int cli_common_opt(cli_common *c, int argc, char **argv, int *i)
{
    const char *a = argv[*i];
    const char *val = NULL;
    if (!strcmp(a, "-S") || !strcmp(a, "--set")) {
        if (*i + 1 >= argc) return -1;
        val = argv[++*i];
    } else if (!strncmp(a, "--set=", 6)) {
        val = a + 6;
    } else if (!strncmp(a, "-S", 2) && a[2]) {
        val = a + 2;
    }
    if (val) {
        const char **n = mr_realloc(c->overrides, (c->n_overrides + 1) * sizeof(*n));
        if (!n) return -1;
        c->overrides = n;
        c->overrides[c->n_overrides++] = val;
        return 1;
    }
    if (!strcmp(a, "--json")) {
        c->json = 1;
        return 1;
    }
    if (!strcmp(a, "-q") || !strcmp(a, "--quiet")) { /* also accepted before the verb */
        mr_log_set_level(MR_LOG_WARN);
        return 1;
    }
    if (!strcmp(a, "--smoke")) {
        c->smoke = 1;
        return 1;
    }
    if (!strcmp(a, "-C")) {
        if (*i + 1 >= argc) return -1;
        c->dir = argv[++*i];
        return 1;
    }
    return 0;
}

void cli_common_free(cli_common *c) { mr_free(c->overrides); }

int cli_status_exit(mr_status st)
{
    switch (st) {
    case MR_OK: return EXIT_OK;
    case MR_E_FAILED:
    case MR_E_INTERRUPTED:
    case MR_E_IO:
    case MR_E_CORRUPT:
    case MR_E_NOMEM: return EXIT_FAILED;
    default: return EXIT_USAGE;
    }
}

int cli_load(const cli_common *c, mr_workspace **ws, mr_spec **spec)
{
    mr_error err;
    mr_error_init(&err);
    *ws = NULL;
    *spec = NULL;
    mr_status st = mr_workspace_open(c->dir ? c->dir : ".", 1, 0, ws, &err);
    if (st == MR_OK) {
        if (!mr_fs_exists((*ws)->spec_path)) {
            st = MR_ERR(&err, MR_E_NOT_FOUND, "%s: no millrace.yaml", (*ws)->root);
            mr_error_hint(&err, "run `millrace init` to start a pipeline here");
        } else {
            st = mr_spec_load((*ws)->spec_path, c->overrides, c->n_overrides, spec, &err);
        }
    }
    if (st != MR_OK) {
        mr_log_error(&err);
        mr_workspace_close(*ws);
        *ws = NULL;
        return st == MR_E_IO ? EXIT_FAILED : EXIT_USAGE;
    }
    /* Relative paths in the spec are workspace-relative. */
    if (chdir((*ws)->root) != 0) {
        fprintf(stderr, "millrace: error: cannot enter %s\n", (*ws)->root);
        mr_spec_free(*spec);
        mr_workspace_close(*ws);
        return EXIT_FAILED;
    }
    return EXIT_OK;
}

int cli_open_workspace(const cli_common *c, mr_workspace **ws)
{
    mr_error err;
    mr_error_init(&err);
    *ws = NULL;
    mr_status st = mr_workspace_open(c->dir ? c->dir : ".", 1, 0, ws, &err);
    if (st == MR_OK && chdir((*ws)->root) != 0) st = MR_ERR_SYS(&err, MR_E_IO, errno, "cannot enter %s", (*ws)->root);
    if (st != MR_OK) {
        mr_log_error(&err);
        mr_workspace_close(*ws);
        *ws = NULL;
        return st == MR_E_IO ? EXIT_FAILED : EXIT_USAGE;
    }
    return EXIT_OK;
}

int cli_usage_error(const char *verb, const char *fmt, ...)
{
    char msg[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    fprintf(stderr, "millrace %s: error: %s\nhint: see `millrace %s --help`\n", verb, cli_safe(msg), verb); /* it quotes arguments */
    return EXIT_USAGE;
}

int cli_wants_help(int argc, char **argv)
{
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) return 1;
    return 0;
}

void cli_print(const mr_buf *b)
{
    if (b->data) fwrite(b->data, 1, b->len, stdout);
}

/* Escaped copies handed out by cli_safe: a ring, so that one printf may
 * take several; each slot is reused (freed) 32 calls later. */
#define SAFE_RING 32
static char *safe_ring[SAFE_RING];
static size_t safe_next;

const char *cli_safe_n(const char *s, size_t len)
{
    mr_buf b;
    mr_buf_init(&b);
    if (mr_buf_term_escape(&b, s ? s : "", s ? len : 0) != MR_OK || !b.data) {
        mr_buf_free(&b);
        return "?"; /* out of memory: nothing unescaped goes out */
    }
    size_t k = safe_next++ % SAFE_RING;
    mr_free(safe_ring[k]);
    safe_ring[k] = b.data; /* mr_buf_init/mr_buf_free use mr_malloc/mr_free */
    return b.data;
}

const char *cli_safe(const char *s)
{
    if (!s) return "";
    size_t len = strlen(s);
    return mr_term_safe(s, len) ? s : cli_safe_n(s, len);
}

size_t cli_cell(mr_buf *out, const char *s, size_t len, size_t width, int cut)
{
    mr_buf b;
    mr_buf_init(&b);
    size_t full = 0;
    if (mr_buf_term_escape(&b, s ? s : "", s ? len : 0) == MR_OK) {
        full = b.len;
        size_t n = b.len;
        if (cut && n > width) {
            n = width;
            while (n > 0 && ((unsigned char)b.data[n] & 0xc0) == 0x80) n--; /* never cut a character */
        }
        if (n) mr_buf_append(out, b.data, n);
        for (; n < width; n++) mr_buf_append(out, " ", 1);
    }
    mr_buf_free(&b);
    return full;
}

size_t cli_safe_len(const char *s, size_t len)
{
    if (mr_term_safe(s, len)) return len;
    mr_buf b;
    mr_buf_init(&b);
    size_t n = mr_buf_term_escape(&b, s, len) == MR_OK ? b.len : len;
    mr_buf_free(&b);
    return n;
}

void cli_puts_json(const char *json)
{
    mr_buf b;
    mr_buf_init(&b);
    if (json && mr_buf_json_safe(&b, json, strlen(json)) == MR_OK && b.data) printf("%s\n", b.data);
    mr_buf_free(&b);
}

void cli_print_json(const mr_buf *in)
{
    mr_buf b;
    mr_buf_init(&b);
    if (in->data && mr_buf_json_safe(&b, in->data, in->len) == MR_OK && b.data) fwrite(b.data, 1, b.len, stdout);
    mr_buf_free(&b);
}

char **cli_split_list(const char *s, size_t *n_out)
{
    size_t n = 1;
    for (const char *p = s; *p; p++) n += *p == ',';
    char **arr = mr_calloc(n + 1, sizeof(char *));
    char *copy = mr_strdup(s);
    if (!arr || !copy) {
        mr_free(arr);
        mr_free(copy);
        return NULL;
    }
    size_t k = 0;
    arr[k++] = copy;
    for (char *p = copy; *p; p++)
        if (*p == ',') {
            *p = '\0';
            arr[k++] = p + 1;
        }
    *n_out = k;
    return arr;
}

void cli_free_list(char **arr)
{
    if (arr) mr_free(arr[0]);
    mr_free(arr);
}
