/* Progress output: a live bar on a terminal, sparse plain lines elsewhere. */
#include "millrace/core.h"

#include <string.h>

struct mr_progress {
    char label[64];
    char unit[16];
    uint64_t total, done;
    double t0, last_draw, last_plain;
};

static int progress_tty;
static int line_active; /* a live line is on screen */

void mr_progress_set_tty(int on) { progress_tty = on; }
int mr_progress_tty(void) { return progress_tty; }

void mr_progress_clear(void)
{
    if (line_active) {
        fputs("\r\033[K", stderr);
        line_active = 0;
    }
}

static void human(double v, char *buf, size_t n)
{
    if (v >= 1e9) snprintf(buf, n, "%.1fG", v / 1e9);
    else if (v >= 1e6) snprintf(buf, n, "%.1fM", v / 1e6);
    else if (v >= 1e3) snprintf(buf, n, "%.1fk", v / 1e3);
    else snprintf(buf, n, "%.0f", v);
}

static void draw(mr_progress *p, const char *detail, int final)
{
    double now = mr_now(), el = now - p->t0;
    char rate[48] = "", eta[32] = "", bar[32] = "", pct[16] = "";
    if (el > 0 && p->unit[0]) {
        char h[16];
        human((double)p->done / el, h, sizeof(h));
        snprintf(rate, sizeof(rate), "  %s %s/s", h, p->unit);
    }
    if (p->total) {
        double f = (double)p->done / (double)p->total;
        if (f > 1) f = 1;
        int w = 20, fill = (int)(f * w);
        bar[0] = '[';
        for (int i = 0; i < w; i++) bar[1 + i] = i < fill ? '=' : (i == fill ? '>' : ' ');
        bar[w + 1] = ']';
        bar[w + 2] = '\0';
        snprintf(pct, sizeof(pct), " %3d%%", (int)(f * 100));
        if (!final && f > 0 && el > 0.5) snprintf(eta, sizeof(eta), "  ETA %.0fs", el * (1 - f) / f);
    }
    if (progress_tty) {
        fprintf(stderr, "\r\033[K%s %s%s%s%s  %.1fs%s%s", p->label, bar, pct, rate, eta, el, detail ? "  " : "",
                detail ? detail : "");
        if (final) {
            fputc('\n', stderr);
            line_active = 0;
        } else {
            line_active = 1;
        }
    } else {
        fprintf(stderr, "%s:%s%s%s  %.1fs%s%s\n", p->label, pct, rate, eta, el, detail ? "  " : "", detail ? detail : "");
    }
    fflush(stderr);
}

mr_progress *mr_progress_begin(const char *label, uint64_t total, const char *unit)
{
    mr_progress *p = mr_calloc(1, sizeof(*p));
    if (!p) return NULL;
    snprintf(p->label, sizeof(p->label), "%s", label);
    snprintf(p->unit, sizeof(p->unit), "%s", unit ? unit : "");
    p->total = total;
    p->t0 = p->last_draw = p->last_plain = mr_now();
    return p;
}

void mr_progress_update(mr_progress *p, uint64_t done, const char *detail)
{
    if (!p || mr_log_get_level() > MR_LOG_INFO) return;
    p->done = done;
    double now = mr_now();
    if (progress_tty) {
        if (now - p->last_draw < 0.1) return;
        p->last_draw = now;
        draw(p, detail, 0);
    } else if (now - p->last_plain >= 10.0) {
        p->last_plain = now;
        draw(p, detail, 0);
    }
}

void mr_progress_end(mr_progress *p, const char *final_detail)
{
    if (!p) return;
    if (mr_log_get_level() <= MR_LOG_INFO && (progress_tty || final_detail)) draw(p, final_detail, 1);
    mr_free(p);
}
