/* The online store in Redis (include/millrace/online.h): the embedded
 * store's schema and record bytes under keys of a namespace, written as a
 * new generation and made current with one SET, read with one script call
 * per batch of entities (the generation and every record in one atomic
 * step), so a reader sees the old table or the new one, never a mix. The
 * key layout is docs/formats.md, "Online feature store in Redis". */
#include "data/online_int.h"

#include <hiredis.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define GEN_LEN MR_HASH_HEX_LEN
#define CHUNK 4000 /* keys per script call: Lua's unpack takes at most ~8000 values */

struct mr__online_redis {
    pthread_mutex_t mu; /* the connection and gen */
    redisContext *c;
    char *host;
    int port;
    char *ns; /* "NAMESPACE:" */
    char gen[GEN_LEN + 1];
    char sha[41];                  /* the lookup script's SHA1 once loaded (EVALSHA); "" : send it whole */
    const uint8_t *schema_section; /* the current generation's schema bytes (in the image) */
    size_t schema_len;
};

struct mr_online_hold {
    redisReply **replies;
    size_t n;
};

/* One script call: the current generation, its schema when it is not the
 * caller's (ARGV[2]), and the records of ARGV[3..] (nil: no such entity). */
static const char LOOKUP_LUA[] =
    "local g = redis.call('GET', KEYS[1]) "
    "if not g then return {false} end "
    "local s = false "
    "if g ~= ARGV[2] then s = redis.call('GET', ARGV[1] .. g .. ':schema') end "
    "if #ARGV < 3 then return {g, s, {}} end "
    "local p = ARGV[1] .. g .. ':e:' "
    "local ks = {} "
    "for i = 3, #ARGV do ks[#ks + 1] = p .. ARGV[i] end "
    "return {g, s, redis.call('MGET', unpack(ks))}";

/* redis://HOST[:PORT]/NAMESPACE: host and port (default 6379), the namespace ([A-Za-z0-9_.:-]+). */
static mr_status parse_location(const char *loc, char **host, int *port, char **ns, mr_error *err)
{
    *host = *ns = NULL;
    *port = 6379;
    const char *p = loc + strlen("redis://"), *slash = strchr(p, '/'), *colon = strchr(p, ':');
    if (strncmp(loc, "redis://", 8) || !slash || slash == p || !slash[1])
        return MR_ERR(err, MR_E_INVALID_ARG, "'%s': expected redis://HOST:PORT/NAMESPACE", loc);
    for (const char *q = slash + 1; *q; q++)
        if (!(*q == '_' || *q == '.' || *q == ':' || *q == '-' || (*q >= '0' && *q <= '9') || (*q >= 'a' && *q <= 'z') ||
              (*q >= 'A' && *q <= 'Z')))
            return MR_ERR(err, MR_E_INVALID_ARG, "'%s': a namespace is letters, digits and _ . : -", loc);
    size_t hl = (colon && colon < slash ? colon : slash) - p;
    if (colon && colon < slash) {
        char *end = NULL;
        long v = strtol(colon + 1, &end, 10);
        if (end != slash || v < 1 || v > 65535) return MR_ERR(err, MR_E_INVALID_ARG, "'%s': the port must be 1..65535", loc);
        *port = (int)v;
    }
    *host = mr_strndup(p, hl);
    *ns = mr_asprintf("%s:", slash + 1);
    if (!*host || !*ns) {
        mr_free(*host);
        mr_free(*ns);
        *host = *ns = NULL;
        return MR_ERR(err, MR_E_NOMEM, "out of memory");
    }
    return MR_OK;
}

static mr_status connect_to(const char *host, int port, redisContext **out, mr_error *err)
{
    struct timeval tv = {2, 0};
    redisContext *c = redisConnectWithTimeout(host, port, tv);
    if (!c) return MR_ERR(err, MR_E_NOMEM, "out of memory");
    if (c->err) {
        mr_status rc = MR_ERR(err, MR_E_IO, "cannot reach Redis at %s:%d: %s", host, port, c->errstr);
        mr_error_hint(err, "start one with scripts/redis-server.sh start (docs/featurestore.md)");
        redisFree(c);
        return rc;
    }
    redisSetTimeout(c, tv);
    *out = c;
    return MR_OK;
}

/* Loads the lookup script (its digest into sha; "" when it cannot be: EVAL then sends it whole). */
static void load_script(redisContext *c, char *sha)
{
    sha[0] = '\0';
    redisReply *rp = redisCommand(c, "SCRIPT LOAD %s", LOOKUP_LUA);
    if (rp && rp->type == REDIS_REPLY_STRING && rp->len == 40) {
        memcpy(sha, rp->str, 40);
        sha[40] = '\0';
    }
    if (rp) freeReplyObject(rp);
}

/* A reply that is an error (or none: the connection failed) as MR_E_IO. */
static mr_status reply_fail(redisContext *c, redisReply *rp, const char *what, mr_error *err)
{
    if (!rp) return MR_ERR(err, MR_E_IO, "Redis %s: %s", what, c->errstr[0] ? c->errstr : "no reply");
    return MR_ERR(err, MR_E_IO, "Redis %s: %.*s", what, (int)rp->len, rp->str ? rp->str : "");
}

/* ---- writing ---------------------------------------------------------------------- */

static uint64_t get_u64(const uint8_t *p)
{
    uint64_t v;
    memcpy(&v, p, 8); /* little-endian hosts: the layout's order */
    return v;
}

static void put_u64(uint8_t *p, uint64_t v) { memcpy(p, &v, 8); }

/* The schema of a full image as an image of no entities: the header with
 * n_entities 0 and one empty slot, the schema bytes. */
static mr_status schema_image(const mr_buf *image, mr_buf *out)
{
    const uint8_t *p = (const uint8_t *)image->data;
    uint64_t schema_off = get_u64(p + 40), slots_off = get_u64(p + 48);
    mr_status rc = mr_buf_append(out, p, HEADER_LEN);
    if (rc == MR_OK) rc = mr_buf_append(out, p + schema_off, slots_off - schema_off);
    while (rc == MR_OK && out->len % 8) rc = mr_buf_put_u8(out, 0);
    uint64_t nslots_off = out->len;
    if (rc == MR_OK) rc = mr_buf_put_u64(out, 0); /* the one slot, empty */
    if (rc != MR_OK) return rc;
    uint8_t *h = (uint8_t *)out->data;
    put_u64(h + 24, 0);
    put_u64(h + 32, 1);
    put_u64(h + 40, HEADER_LEN);
    put_u64(h + 48, nslots_off);
    put_u64(h + 56, nslots_off + 8);
    return MR_OK;
}

/* Sends the pipelined commands' replies through and checks each. */
static mr_status drain(redisContext *c, size_t n, mr_error *err)
{
    mr_status rc = MR_OK;
    for (size_t i = 0; i < n; i++) {
        redisReply *rp = NULL;
        if (redisGetReply(c, (void **)&rp) != REDIS_OK || !rp) return reply_fail(c, NULL, "SET", err);
        if (rc == MR_OK && rp->type == REDIS_REPLY_ERROR) rc = reply_fail(c, rp, "SET", err);
        freeReplyObject(rp);
    }
    return rc;
}

mr_status mr_online_build_redis(const char *location, const char *const *keys, size_t n_keys, const mr_pit_view *views,
                                size_t n_views, int threads, char *gen_out, mr_error *err)
{
    char *host = NULL, *ns = NULL;
    int port = 0;
    mr_status rc = parse_location(location, &host, &port, &ns, err);
    if (rc != MR_OK) return rc;
    mr_buf image, schema, key;
    mr_buf_init(&image);
    mr_buf_init(&schema);
    mr_buf_init(&key);
    redisContext *c = NULL;
    mr_online s;
    memset(&s, 0, sizeof(s));
    char gen[GEN_LEN + 1];
    rc = mr__online_build_image(keys, n_keys, views, n_views, threads, &image, err);
    if (rc == MR_OK) {
        mr_hash_hex(mr_hash_bytes(image.data, image.len), gen); /* the same table, the same generation */
        s.map = (const uint8_t *)image.data;
        s.len = image.len;
        rc = mr__online_parse(&s, location, err);
    }
    if (rc == MR_OK && schema_image(&image, &schema) != MR_OK) rc = MR_ERR(err, MR_E_NOMEM, "out of memory");
    if (rc == MR_OK) rc = connect_to(host, port, &c, err);
    /* the records of the new generation, pipelined */
    size_t pending = 0, at = s.records_off;
    char *prefix = rc == MR_OK ? mr_asprintf("%s%s:e:", ns, gen) : NULL;
    if (rc == MR_OK && !prefix) rc = MR_ERR(err, MR_E_NOMEM, "out of memory");
    for (uint64_t e = 0; rc == MR_OK && e < s.n_entities; e++) {
        const uint8_t *rec = s.map + at;
        size_t rl = mr__online_record_len(&s, rec, s.len - at);
        uint32_t kl;
        memcpy(&kl, rec, 4);
        key.len = 0;
        if (!rl || mr_buf_puts(&key, prefix) != MR_OK || mr_buf_append(&key, rec + 4, kl) != MR_OK) {
            rc = rl ? MR_ERR(err, MR_E_NOMEM, "out of memory") : MR_ERR(err, MR_E_INTERNAL, "a record is cut short");
            break;
        }
        const char *argv[3] = {"SET", key.data, (const char *)rec};
        size_t argl[3] = {3, key.len, rl};
        if (redisAppendCommandArgv(c, 3, argv, argl) != REDIS_OK) rc = reply_fail(c, NULL, "SET", err);
        at += rl;
        if (rc == MR_OK && ++pending == 1000) {
            rc = drain(c, pending, err);
            pending = 0;
        }
    }
    if (rc == MR_OK && pending) rc = drain(c, pending, err);
    /* the schema and the entity count, then the switch: one SET makes the generation current */
    if (rc == MR_OK) {
        char count[32];
        snprintf(count, sizeof(count), "%llu", (unsigned long long)s.n_entities);
        redisAppendCommand(c, "SET %s%s:schema %b", ns, gen, schema.data, schema.len);
        redisAppendCommand(c, "SET %s%s:count %s", ns, gen, count);
        rc = drain(c, 2, err);
    }
    if (rc == MR_OK) {
        redisAppendCommand(c, "SET %scurrent %s", ns, gen);
        rc = drain(c, 1, err);
    }
    /* then the other generations go (older ones, and what a killed run left half-written) */
    for (char cursor[32] = "0"; rc == MR_OK;) {
        redisReply *rp = redisCommand(c, "SCAN %s MATCH %s* COUNT 1000", cursor, ns);
        if (!rp || rp->type != REDIS_REPLY_ARRAY || rp->elements != 2) {
            rc = reply_fail(c, rp && rp->type == REDIS_REPLY_ERROR ? rp : NULL, "SCAN", err);
            if (rp) freeReplyObject(rp);
            break;
        }
        snprintf(cursor, sizeof(cursor), "%.*s", (int)rp->element[0]->len, rp->element[0]->str);
        size_t nl = strlen(ns), n_del = 0;
        for (size_t i = 0; i < rp->element[1]->elements; i++) {
            const redisReply *k = rp->element[1]->element[i];
            if (k->len >= nl + GEN_LEN && !memcmp(k->str + nl, gen, GEN_LEN)) continue;
            if (k->len == nl + 7 && !memcmp(k->str + nl, "current", 7)) continue;
            redisAppendCommand(c, "UNLINK %b", k->str, (size_t)k->len);
            n_del++;
        }
        freeReplyObject(rp);
        rc = drain(c, n_del, err);
        if (!strcmp(cursor, "0")) break;
    }
    if (rc == MR_OK && gen_out) memcpy(gen_out, gen, GEN_LEN + 1);
    mr_free(prefix);
    if (c) redisFree(c);
    mr__online_schema_free(&s); /* its image is the buffer's */
    mr_buf_free(&image);
    mr_buf_free(&schema);
    mr_buf_free(&key);
    mr_free(host);
    mr_free(ns);
    return rc;
}

/* ---- reading ---------------------------------------------------------------------- */

void mr__online_redis_close(mr__online_redis *r)
{
    if (!r) return;
    if (r->c) redisFree(r->c);
    pthread_mutex_destroy(&r->mu);
    mr_free(r->host);
    mr_free(r->ns);
    mr_free(r);
}

void mr__online_redis_hold_free(mr_online_hold *h)
{
    if (!h) return;
    for (size_t i = 0; i < h->n; i++) freeReplyObject(h->replies[i]);
    mr_free(h->replies);
    mr_free(h);
}

/* The schema section of an image (what must not change for a reader to keep its schema). */
static void schema_bytes(const uint8_t *img, size_t len, const uint8_t **p, size_t *n)
{
    *p = NULL;
    *n = 0;
    if (len < HEADER_LEN) return;
    uint64_t so = get_u64(img + 40), sl = get_u64(img + 48);
    if (so > len || sl > len || sl < so) return;
    *p = img + so;
    *n = sl - so;
}

mr_status mr__online_redis_open(const char *location, mr_online **out, mr_error *err)
{
    *out = NULL;
    mr_online *s = mr_calloc(1, sizeof(*s));
    mr__online_redis *r = s ? mr_calloc(1, sizeof(*r)) : NULL;
    if (!r) {
        mr_free(s);
        return MR_ERR(err, MR_E_NOMEM, "out of memory");
    }
    pthread_mutex_init(&r->mu, NULL);
    s->redis = r;
    mr_status rc = parse_location(location, &r->host, &r->port, &r->ns, err);
    if (rc == MR_OK) rc = connect_to(r->host, r->port, &r->c, err);
    if (rc == MR_OK) load_script(r->c, r->sha);
    redisReply *cur = NULL, *sch = NULL, *cnt = NULL;
    if (rc == MR_OK) {
        cur = redisCommand(r->c, "GET %scurrent", r->ns);
        if (!cur || cur->type == REDIS_REPLY_ERROR) rc = reply_fail(r->c, cur, "GET", err);
        else if (cur->type != REDIS_REPLY_STRING || cur->len != GEN_LEN)
            rc = MR_ERR(err, MR_E_NOT_FOUND, "no online store at %s", location);
    }
    if (rc == MR_OK) {
        memcpy(r->gen, cur->str, GEN_LEN);
        sch = redisCommand(r->c, "GET %s%s:schema", r->ns, r->gen);
        cnt = sch ? redisCommand(r->c, "GET %s%s:count", r->ns, r->gen) : NULL;
        if (!sch || !cnt || sch->type != REDIS_REPLY_STRING || cnt->type != REDIS_REPLY_STRING)
            rc = MR_ERR(err, MR_E_CORRUPT, "%s: generation %s has no schema", location, r->gen);
    }
    if (rc == MR_OK) {
        uint8_t *img = mr_malloc(sch->len ? sch->len : 1);
        if (!img) rc = MR_ERR(err, MR_E_NOMEM, "out of memory");
        else {
            memcpy(img, sch->str, sch->len);
            s->map = img;
            s->len = sch->len;
            s->owned = 1;
            rc = mr__online_parse(s, location, err);
        }
    }
    if (rc == MR_OK) {
        s->n_entities = strtoull(cnt->str, NULL, 10);
        schema_bytes(s->map, s->len, &r->schema_section, &r->schema_len);
    }
    if (cur) freeReplyObject(cur);
    if (sch) freeReplyObject(sch);
    if (cnt) freeReplyObject(cnt);
    if (rc != MR_OK) {
        mr_online_close(s);
        return rc;
    }
    *out = s;
    return MR_OK;
}

static void push_arg(const char **argv, size_t *argl, size_t *n, const char *p, size_t len)
{
    argv[*n] = p;
    argl[(*n)++] = len;
}

/* Sends the script for entities [a, b) of the encoded keys (entity i at keys[key_off[i], key_off[i + 1])). */
static int append_lookup(mr__online_redis *r, const char **argv, size_t *argl, const mr_buf *keys, const size_t *key_off,
                         size_t a, size_t b)
{
    size_t n = 0;
    char *cur = mr_asprintf("%scurrent", r->ns);
    if (!cur) return -1;
    if (r->sha[0]) { /* the script by its digest: Redis neither receives nor hashes it again */
        push_arg(argv, argl, &n, "EVALSHA", 7);
        push_arg(argv, argl, &n, r->sha, 40);
    } else {
        push_arg(argv, argl, &n, "EVAL", 4);
        push_arg(argv, argl, &n, LOOKUP_LUA, sizeof(LOOKUP_LUA) - 1);
    }
    push_arg(argv, argl, &n, "1", 1);
    push_arg(argv, argl, &n, cur, strlen(cur));
    push_arg(argv, argl, &n, r->ns, strlen(r->ns));
    push_arg(argv, argl, &n, r->gen, GEN_LEN);
    for (size_t i = a; i < b; i++) push_arg(argv, argl, &n, keys->data + key_off[i], key_off[i + 1] - key_off[i]);
    int st = redisAppendCommandArgv(r->c, (int)n, argv, argl);
    mr_free(cur);
    return st == REDIS_OK ? 0 : -1;
}

/* One pass of a lookup: every chunk's script pipelined, their replies kept
 * in *hold. *stale: the generation changed under us (chunks of different
 * generations, or a new schema): the caller retries or reopens. */
static mr_status lookup_pass(const mr_online *s, size_t n, const mr_buf *keys, const size_t *key_off,
                             const int64_t *now_us, mr_online_value *vals, int *found, mr_online_hold *hold,
                             int *stale, mr_error *err)
{
    mr__online_redis *r = s->redis;
    size_t chunks = n ? (n + CHUNK - 1) / CHUNK : 1, width = (n < CHUNK ? n : CHUNK) + 6;
    const char **argv = mr_malloc(width * sizeof(*argv));
    size_t *argl = mr_malloc(width * sizeof(*argl));
    hold->replies = mr_calloc(chunks, sizeof(*hold->replies));
    mr_status rc = argv && argl && hold->replies ? MR_OK : MR_ERR(err, MR_E_NOMEM, "out of memory");
    for (size_t k = 0; rc == MR_OK && k < chunks; k++)
        if (append_lookup(r, argv, argl, keys, key_off, k * CHUNK, k * CHUNK + CHUNK < n ? k * CHUNK + CHUNK : n))
            rc = reply_fail(r->c, NULL, "EVAL", err);
    for (size_t k = 0; rc == MR_OK && k < chunks; k++) {
        redisReply *rp = NULL;
        if (redisGetReply(r->c, (void **)&rp) != REDIS_OK || !rp) {
            rc = reply_fail(r->c, NULL, "EVAL", err);
            break;
        }
        hold->replies[hold->n++] = rp;
        if (rp->type == REDIS_REPLY_ERROR && rp->str && !strncmp(rp->str, "NOSCRIPT", 8)) {
            r->sha[0] = '\0'; /* the server lost its scripts (a restart, SCRIPT FLUSH): send it whole again */
            *stale = 1;
        } else if (rp->type == REDIS_REPLY_ERROR) rc = reply_fail(r->c, rp, "EVAL", err);
        else if (rp->type != REDIS_REPLY_ARRAY || rp->elements < 1 || rp->element[0]->type != REDIS_REPLY_STRING)
            rc = MR_ERR(err, MR_E_NOT_FOUND, "the online store in Redis (%s) has no current generation", r->ns);
        else if (rp->elements != 3 || rp->element[0]->len != GEN_LEN)
            rc = MR_ERR(err, MR_E_CORRUPT, "Redis answered the lookup with an unexpected reply");
        else if (memcmp(rp->element[0]->str, r->gen, GEN_LEN)) {
            /* a new generation: the same schema reads on; another one needs a reopen */
            const redisReply *sch = rp->element[1];
            const uint8_t *sp = NULL;
            size_t sl = 0;
            if (sch->type == REDIS_REPLY_STRING) schema_bytes((const uint8_t *)sch->str, sch->len, &sp, &sl);
            if (k == 0 && sp && sl == r->schema_len && !memcmp(sp, r->schema_section, sl))
                memcpy(r->gen, rp->element[0]->str, GEN_LEN);
            else *stale = k == 0 ? 2 : 1; /* 2: another schema; 1: the generation moved between chunks */
        }
    }
    for (size_t k = 0; rc == MR_OK && !*stale && k < chunks; k++) {
        const redisReply *recs = hold->replies[k]->element[2];
        size_t a = k * CHUNK, b = a + CHUNK < n ? a + CHUNK : n;
        if (recs->type != REDIS_REPLY_ARRAY || recs->elements != b - a) {
            rc = MR_ERR(err, MR_E_CORRUPT, "Redis answered the lookup with an unexpected reply");
            break;
        }
        if (memcmp(hold->replies[k]->element[0]->str, r->gen, GEN_LEN)) { /* chunks of two generations */
            *stale = 1;
            break;
        }
        for (size_t i = a; rc == MR_OK && i < b; i++) {
            const redisReply *x = recs->element[i - a];
            if (x->type != REDIS_REPLY_STRING) continue; /* nil: not in the store */
            rc = mr__online_decode(s, (const uint8_t *)x->str, x->len, now_us[i], vals + i * s->n_features, err);
            if (found) found[i] = 1;
        }
    }
    mr_free(argv);
    mr_free(argl);
    return rc;
}

mr_status mr__online_redis_lookup(const mr_online *s, size_t n, const char *const *key_text, const size_t *key_len,
                                  const int64_t *now_us, mr_online_value *vals, int *found, mr_online_hold **hold,
                                  mr_error *err)
{
    mr__online_redis *r = s->redis;
    if (!hold) return MR_ERR(err, MR_E_INVALID_ARG, "a Redis store's values need a hold");
    /* the encoded keys, end to end */
    mr_buf keys, one;
    mr_buf_init(&keys);
    mr_buf_init(&one);
    size_t *key_off = mr_malloc((n + 1) * sizeof(*key_off));
    mr_status rc = key_off ? MR_OK : MR_ERR(err, MR_E_NOMEM, "out of memory");
    for (size_t i = 0; rc == MR_OK && i < n; i++) {
        key_off[i] = keys.len;
        rc = mr__online_encode_key(s, key_text + i * s->n_keys, key_len ? key_len + i * s->n_keys : NULL, &one, err);
        if (rc == MR_OK && mr_buf_append(&keys, one.data, one.len) != MR_OK) rc = MR_ERR(err, MR_E_NOMEM, "out of memory");
    }
    if (rc == MR_OK) key_off[n] = keys.len;
    mr_online_hold *h = rc == MR_OK ? mr_calloc(1, sizeof(*h)) : NULL;
    if (rc == MR_OK && !h) rc = MR_ERR(err, MR_E_NOMEM, "out of memory");
    int stale = 0;
    pthread_mutex_lock(&r->mu);
    for (int attempt = 0; rc == MR_OK && attempt < 3; attempt++) {
        if (!r->c || r->c->err) { /* a connection that failed: once more */
            if (r->c) redisFree(r->c);
            r->c = NULL;
            rc = connect_to(r->host, r->port, &r->c, err);
            if (rc != MR_OK) break;
            load_script(r->c, r->sha);
        }
        stale = 0;
        rc = lookup_pass(s, n, &keys, key_off, now_us, vals, found, h, &stale, err);
        if (rc == MR_OK && !stale) break;
        /* start over: another generation answered part of it, or the connection broke */
        int broken = rc == MR_E_IO && r->c && r->c->err;
        for (size_t i = 0; i < h->n; i++) freeReplyObject(h->replies[i]);
        mr_free(h->replies);
        h->replies = NULL;
        h->n = 0;
        for (size_t i = 0; i < n; i++) {
            mr__online_clear(s, vals + i * s->n_features);
            if (found) found[i] = 0;
        }
        if (broken && attempt == 0) {
            mr_error_clear(err);
            rc = MR_OK;
            continue;
        }
        if (rc != MR_OK) break;
        if (stale == 2 || attempt == 2)
            rc = MR_ERR(err, MR_E_SCHEMA, "the online store in Redis (%s) was rematerialised with another schema: reopen it",
                        r->ns);
    }
    pthread_mutex_unlock(&r->mu);
    mr_buf_free(&keys);
    mr_buf_free(&one);
    mr_free(key_off);
    if (rc != MR_OK) {
        mr__online_redis_hold_free(h);
        return rc;
    }
    *hold = h;
    return MR_OK;
}
