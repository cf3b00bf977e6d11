/* Shared pieces of the CLI verbs: option parsing helpers, workspace + spec
 * loading, output. Only include/millrace/ is used here. */
#ifndef MILLRACE_CLI_H
#define MILLRACE_CLI_H

#include "millrace/millrace.h"

#define EXIT_OK 0
#define EXIT_FAILED 1
#define EXIT_USAGE 2

typedef struct cli_common {
    const char **overrides; /* -S key=value */
    size_t n_overrides;
    int json;
    int smoke;
    const char *dir;        /* -C DIR */
} cli_common;

/* run --sweep: what the sweep's runs are given besides their -S, -j, --name and --tag. */
typedef struct cli_sweep {
    const char *name; /* --name: the sweep's id (its runs are NAME-1, NAME-2, ...) */
    int jobs;         /* -j: the core budget of the whole sweep (0: all cores) */
    const char **pass; /* the other options and stages, passed to every run */
    size_t n_pass;
} cli_sweep;
/* Runs the grid of c's -S lists (KEY=A,B,...) as separate runs named s->name-1, ...
 * tagged sweep=NAME; exit 0 when all succeeded, 1 when one failed, 2 usage. */
int cli_run_sweep(const cli_common *c, const cli_sweep *s);

/* Consumes a common option at argv[*i] (advancing *i past its value).
 * Returns 1 if consumed, 0 if not a common option, -1 on a usage error. */
int cli_common_opt(cli_common *c, int argc, char **argv, int *i);
void cli_common_free(cli_common *c);
/* Opens the workspace and loads the spec with the overrides; prints the
 * error and returns the exit code on failure (0 on success). */
int cli_load(const cli_common *c, mr_workspace **ws, mr_spec **spec);
/* The workspace alone (no millrace.yaml read), entered. */
int cli_open_workspace(const cli_common *c, mr_workspace **ws);
int cli_status_exit(mr_status st); /* maps a status to an exit code */
int cli_usage_error(const char *verb, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int cli_wants_help(int argc, char **argv);
void cli_print(const mr_buf *b);
/* Text from data (a name, a value, a tag) for printing on a terminal
 * (mr_buf_term_escape): s itself when it holds nothing unsafe, else an
 * escaped copy that stays valid for the next 32 calls. NULL gives "". */
const char *cli_safe(const char *s);
/* The same for s[0..len) (not NUL-terminated); always a copy from the ring. */
const char *cli_safe_n(const char *s, size_t len);
/* Appends s[0..len) escaped as cli_safe does to out, cut to at most width
 * bytes (at a character boundary) when cut is set, then padded with blanks
 * to width bytes. Returns the bytes the escaped text takes before cutting. */
size_t cli_cell(mr_buf *out, const char *s, size_t len, size_t width, int cut);
/* The bytes s[0..len) takes once escaped. */
size_t cli_safe_len(const char *s, size_t len);
/* Prints a JSON document made safe for a terminal (mr_buf_json_safe). */
void cli_print_json(const mr_buf *b);
void cli_puts_json(const char *json); /* the same for a NUL-terminated text, plus a newline */
/* "a,b,c" -> a NULL-terminated array of pointers into one copy; free with
 * cli_free_list. NULL on OOM. */
char **cli_split_list(const char *s, size_t *n_out);
void cli_free_list(char **arr);
extern const char *cli_self_exe;

/* Training across ranks (mpi_comm.c): MPI started, comm filled (0), or -1. */
void cli_mpi_sanitizer_setup(int argc, char **argv); /* ASan builds: may re-exec `millrace train ARGS` */
const char *cli_log_flag(void); /* "-v" / "-q" as given before the verb, or NULL: for a millrace started again */
int cli_mpi_init(int *argc, char ***argv, mr_gbdt_comm *comm);
uint64_t cli_mpi_bytes_sent(void);  /* bytes this rank sent */
uint64_t cli_mpi_exchanges(void);
double cli_mpi_exchange_seconds(void); /* inside exchanges: transfers and waiting */
void cli_mpi_finalize(void);
void cli_mpi_fail_exit(int code) __attribute__((noreturn));
extern const char *cli_argv_joined;

int cmd_init(int argc, char **argv);
int cmd_run(int argc, char **argv);
int cmd_stage(int argc, char **argv);
int cmd_status(int argc, char **argv);
int cmd_dag(int argc, char **argv);
int cmd_params(int argc, char **argv);
int cmd_runs(int argc, char **argv);
int cmd_show(int argc, char **argv);
int cmd_compare(int argc, char **argv);
int cmd_report(int argc, char **argv);
int cmd_verify(int argc, char **argv);
int cmd_gc(int argc, char **argv);
int cmd_remote(int argc, char **argv);
int cmd_push(int argc, char **argv);
int cmd_pull(int argc, char **argv);
int cmd_ops(int argc, char **argv);
int cmd_features(int argc, char **argv);
int cmd_train(int argc, char **argv);
int cmd_model(int argc, char **argv);
/* The registry's `model` subcommands (cmd_registry.c). */
int cli_model_is_registry(const char *sub);
int cli_model_registry(int argc, char **argv);
/* A bundle argument: a path, or models:/NAME@ALIAS, models:/NAME/VERSION or
 * models:/NAME resolved in the workspace at or above the current directory.
 * *path_out (mr_free) gets the file; on failure the error is printed and
 * the exit code returned. */
int cli_resolve_bundle(const char *arg, char **path_out);
int cmd_data(int argc, char **argv);
int cmd_tune(int argc, char **argv);
int cmd_bundle(int argc, char **argv);
int cmd_predict(int argc, char **argv);
int cmd_serve(int argc, char **argv);
int cmd_ui(int argc, char **argv);
int cmd_bench_serve(int argc, char **argv);

#endif
