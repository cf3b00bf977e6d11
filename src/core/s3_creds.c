/* AWS credentials and region, found as the AWS CLI and SDKs find them
 * (include/millrace/s3.h): the environment, then the shared credentials and
 * config files' profile. */
#define _GNU_SOURCE
#include "millrace/s3.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *env(const char *name)
{
    const char *v = getenv(name);
    return v && *v ? v : NULL;
}

static void put(char *dst, size_t n, const char *src) { snprintf(dst, n, "%s", src ? src : ""); }

/* Reads `key = value` lines of section want ("[default]", "[profile x]")
 * of file path into the fields of out that are still empty. *found: the
 * section exists. MR_E_PARSE naming the line of one that is neither a
 * section, a comment nor key = value. A missing file is no error. */
static mr_status read_ini(const char *path, const char *want, mr_s3_credentials *out, int *found, mr_error *err)
{
    *found = 0;
    FILE *f = fopen(path, "r");
    if (!f) return MR_OK;
    char line[8192];
    long ln = 0;
    int in = 0;
    mr_status rc = MR_OK;
    while (rc == MR_OK && fgets(line, sizeof(line), f)) {
        ln++;
        char *s = line;
        while (isspace((unsigned char)*s)) s++;
        size_t l = strlen(s);
        while (l && isspace((unsigned char)s[l - 1])) s[--l] = 0;
        if (!*s || *s == '#' || *s == ';') continue;
        if (*s == '[') {
            char *close = strchr(s, ']');
            if (!close) {
                rc = mr_error_set_at(err, path, ln, 1, MR_E_PARSE, "expected a section name in [brackets]");
                break;
            }
            close[1] = 0;
            /* "[ profile x ]" and "[profile  x]" read as "[profile x]" */
            char norm[512];
            size_t o = 0;
            for (const char *p = s; *p && o + 1 < sizeof(norm); p++) {
                if (isspace((unsigned char)*p) && (o == 0 || norm[o - 1] == ' ' || norm[o - 1] == '[' || p[1] == ']'))
                    continue;
                norm[o++] = isspace((unsigned char)*p) ? ' ' : *p;
            }
            norm[o] = 0;
            in = !strcmp(norm, want);
            *found |= in;
            continue;
        }
        char *eq = strchr(s, '=');
        if (!eq) {
            rc = mr_error_set_at(err, path, ln, 1, MR_E_PARSE, "expected key = value");
            break;
        }
        if (!in) continue;
        char *k = s, *v = eq + 1;
        *eq = 0;
        size_t kl = strlen(k);
        while (kl && isspace((unsigned char)k[kl - 1])) k[--kl] = 0;
        while (isspace((unsigned char)*v)) v++;
        if (!strcmp(k, "aws_access_key_id") && !out->access_key[0]) put(out->access_key, sizeof(out->access_key), v);
        else if (!strcmp(k, "aws_secret_access_key") && !out->secret_key[0]) put(out->secret_key, sizeof(out->secret_key), v);
        else if (!strcmp(k, "aws_session_token") && !out->session_token[0]) put(out->session_token, sizeof(out->session_token), v);
        else if (!strcmp(k, "region") && !out->region[0]) put(out->region, sizeof(out->region), v);
    }
    fclose(f);
    return rc;
}

/* The file named by variable var, else ~/.aws/name. Caller frees. */
static char *aws_file(const char *var, const char *name)
{
    if (env(var)) return mr_strdup(env(var));
    const char *home = env("HOME");
    return home ? mr_asprintf("%s/.aws/%s", home, name) : NULL;
}

mr_status mr_s3_credentials_load(const char *profile, mr_s3_credentials *out, mr_error *err)
{
    memset(out, 0, sizeof(*out));
    if (!profile) profile = env("AWS_PROFILE") ? env("AWS_PROFILE") : "default";
    mr_status rc = MR_OK;
    if (env("AWS_ACCESS_KEY_ID") && env("AWS_SECRET_ACCESS_KEY")) {
        put(out->access_key, sizeof(out->access_key), env("AWS_ACCESS_KEY_ID"));
        put(out->secret_key, sizeof(out->secret_key), env("AWS_SECRET_ACCESS_KEY"));
        put(out->session_token, sizeof(out->session_token), env("AWS_SESSION_TOKEN"));
        put(out->source, sizeof(out->source), "the environment");
    }
    if (env("AWS_REGION")) put(out->region, sizeof(out->region), env("AWS_REGION"));
    else if (env("AWS_DEFAULT_REGION")) put(out->region, sizeof(out->region), env("AWS_DEFAULT_REGION"));
    char *cred = aws_file("AWS_SHARED_CREDENTIALS_FILE", "credentials"), *conf = aws_file("AWS_CONFIG_FILE", "config");
    int want_cred = env("HOME") || env("AWS_SHARED_CREDENTIALS_FILE"), want_conf = env("HOME") || env("AWS_CONFIG_FILE");
    if ((want_cred && !cred) || (want_conf && !conf)) {
        mr_free(cred);
        mr_free(conf);
        memset(out, 0, sizeof(*out));
        return MR_ERR(err, MR_E_NOMEM, "out of memory");
    }
    char sec[300], psec[320];
    snprintf(sec, sizeof(sec), "[%s]", profile);
    snprintf(psec, sizeof(psec), strcmp(profile, "default") ? "[profile %s]" : "[%s]", profile);
    int found_cred = 0, found_conf = 0, had = out->access_key[0] != 0;
    if (cred) rc = read_ini(cred, sec, out, &found_cred, err);
    if (rc == MR_OK && !had && out->access_key[0])
        snprintf(out->source, sizeof(out->source), "%s [%s]", cred, profile);
    /* the config file may hold keys too (as the CLI allows), and the region */
    had = out->access_key[0] != 0;
    if (rc == MR_OK && conf) rc = read_ini(conf, psec, out, &found_conf, err);
    if (rc == MR_OK && !had && out->access_key[0])
        snprintf(out->source, sizeof(out->source), "%s [%s]", conf, profile);
    if (rc == MR_OK && (!out->access_key[0] || !out->secret_key[0])) {
        rc = MR_ERR(err, MR_E_NOT_FOUND, "no AWS credentials for profile '%s'", profile);
        mr_error_hint(err, "set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or add the profile to %s",
                      cred ? cred : "~/.aws/credentials");
    }
    if (rc == MR_OK && !out->region[0]) put(out->region, sizeof(out->region), "us-east-1");
    mr_free(cred);
    mr_free(conf);
    if (rc != MR_OK) memset(out, 0, sizeof(*out)); /* no half-found secret lingers */
    return rc;
}
