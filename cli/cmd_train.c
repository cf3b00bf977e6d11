/* millrace train and millrace model {inspect, dump, predict}: the trainer
 * outside a pipeline, for quick work and scripts. */
#include "cli.h"
#include "millrace/io.h"
#include "millrace/model.h"

#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

static const char train_help[] =
    "usage: millrace train DATA --label COL -o MODEL [options]\n"
    "\n"
    "Trains a model on DATA (.csv, .tsv, .jsonl or .parquet) and writes the model file.\n"
    "\n"
    "options:\n"
    "  --label COL          the column to predict (required)\n"
    "  --valid DATA         validation data: metrics per round, early stopping\n"
    "  --valid-sample N     keep a stratified subsample of N validation rows (0 = all);\n"
    "                       fast-tier metrics (fast.auc, fast.logloss, fast.rmse) per round\n"
    "  --model KIND         gbdt (default) or linear\n"
    "  -p, --param K=V      a training parameter, LightGBM names and aliases\n"
    "                       (objective, num_iterations, learning_rate, num_leaves, max_depth,\n"
    "                       max_bin, min_data_in_leaf, lambda_l1/l2, bagging_fraction,\n"
    "                       feature_fraction, early_stopping_round, metric, seed, ...)\n"
    "  --features A,B,...   use only these columns as features\n"
    "  --exclude A,B,...    never use these columns (ids, timestamps)\n"
    "  --categorical A,B    integer columns to split as categories (gbdt)\n"
    "  -j, --threads N      threads (default: all cores)\n"
    "  --smoke              a handful of rounds on at most 10,000 rows\n"
    "  -o, --output MODEL   where to write the model (required)\n"
    "  --json               print the summary as JSON\n"
    "  --ranks N            train one gbdt across N processes (data-parallel, the same model\n"
    "                       byte for byte): started with srun inside a Slurm allocation,\n"
    "                       with mpirun otherwise (MILLRACE_MPIRUN replaces the launcher)\n"
    "  --rank-timeout S     a rank that does not answer for S seconds ends the training\n"
    "                       (default 600)\n"
    "  --mpi                run as one rank of an MPI job (what --ranks starts)\n";



typedef struct progress_ctx {
    mr_progress *bar;
    const mr_train_opts *o; /* rounds_total: known when the first round reports */
    int json;
    json_t *curve;
    char last[160];
} progress_ctx;

static int on_round(void *vctx, int it, int n, const char *const *names, const double *train, const double *valid,
                    double elapsed)
{
    progress_ctx *p = vctx;
    (void)elapsed;
    if (!p->bar && !p->json) p->bar = mr_progress_begin("train", (uint64_t)p->o->rounds_total, "rounds");
    char detail[160] = "";
    size_t off = 0;
    int k;
    for (k = 0; k < n; k++) /* a training metric (is_provide_training_metric) joins the curve */
        if (!isnan(train[k]))
            json_array_append_new(p->curve, json_pack("{s:i,s:s,s:f}", "iteration", it, "metric", names[k], "train", train[k]));
    for (k = 0; k < n && off < sizeof(detail); k++) {
        if (isnan(valid[k])) continue;
        int w = snprintf(detail + off, sizeof(detail) - off, "%svalid %s %.6g", off ? ", " : "", names[k], valid[k]);
        if (w > 0) off += (size_t)w;
        json_array_append_new(p->curve, json_pack("{s:i,s:s,s:f}", "iteration", it, "metric", names[k], "valid", valid[k]));
    }
    snprintf(p->last, sizeof(p->last), "%s", detail);
    char lbl[200];
    snprintf(lbl, sizeof(lbl), "round %d/%d%s%s", it + 1, p->o->rounds_total, detail[0] ? "  " : "", detail);
    mr_progress_update(p->bar, (uint64_t)(it + 1), lbl);
    return 0;
}

static int load_data(const char *path, mr_table **t)
{
    mr_error err;
    mr_error_init(&err);
    if (mr_table_read_file(path, t, &err) != MR_OK) {
        mr_log_error(&err);
        return err.code == MR_E_INVALID_ARG ? EXIT_USAGE : EXIT_FAILED;
    }
    return EXIT_OK;
}

/* A data error (the file cannot be read, or its content is bad) is exit 1;
 * a mistake in the command (a column, a param) is a usage error. */
/* millrace train ... --ranks N: the same command as N ranks under the
 * cluster's launcher, each with --mpi. */
static int launch_ranks(int argc, char **argv, int ranks)
{
    char nbuf[16];
    snprintf(nbuf, sizeof(nbuf), "%d", ranks);
    const char *custom = getenv("MILLRACE_MPIRUN");
    char *words[64];
    int nw = 0;
    char *dup = NULL;
    if (custom && *custom) { /* "mpirun -np {N} --host a,b": {N} becomes the rank count */
        dup = mr_strdup(custom);
        for (char *tok = dup ? strtok(dup, " \t") : NULL; tok && nw < 48; tok = strtok(NULL, " \t"))
            words[nw++] = !strcmp(tok, "{N}") ? nbuf : tok;
    } else if (getenv("SLURM_JOB_ID")) { /* inside an allocation: its nodes */
        char *w[] = {"srun", "--kill-on-bad-exit=1", "--mpi=pmix", "-n", nbuf};
        for (size_t k = 0; k < sizeof(w) / sizeof(w[0]); k++) words[nw++] = w[k];
    } else {
        char *w[] = {"mpirun", "-np", nbuf, "--oversubscribe"};
        for (size_t k = 0; k < sizeof(w) / sizeof(w[0]); k++) words[nw++] = w[k];
        if (geteuid() == 0) words[nw++] = "--allow-run-as-root";
    }
    size_t cap = (size_t)nw + (size_t)argc + 4;
    char **av = mr_calloc(cap, sizeof(char *));
    if (!av) {
        mr_free(dup);
        return cli_usage_error("train", "out of memory");
    }
    size_t k = 0;
    av[k++] = "env";
    for (int i = 0; i < nw; i++) av[k++] = words[i];
    av[k++] = (char *)cli_self_exe;
    if (cli_log_flag()) av[k++] = (char *)cli_log_flag();
    av[k++] = "train";
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--ranks")) {
            i++;
            continue;
        }
        av[k++] = argv[i];
    }
    av[k++] = "--mpi";
    av[k] = NULL;
    mr_proc p;
    mr_proc_opts po;
    mr_proc_opts_init(&po);
    po.parent_death_sig = SIGTERM; /* the launcher killed: mpirun ends the ranks */
    mr_error err;
    mr_error_init(&err);
    int rc;
    if (mr_proc_spawn_exec(&p, &po, "/usr/bin/env", av, &err) != MR_OK) {
        mr_log_error(&err);
        rc = EXIT_FAILED;
    } else {
        mr_proc_wait(&p, 1);
        char why[64];
        rc = mr_proc_ok(&p) ? EXIT_OK : EXIT_FAILED;
        if (rc != EXIT_OK) {
            mr_proc_describe(&p, why, sizeof(why));
            mr_log(MR_LOG_ERROR, "train: %s with %d ranks %s", words[0], ranks, why);
        }
    }
    mr_free(av);
    mr_free(dup);
    return rc;
}

static int train_exit(const char *data, const char *valid, mr_status st)
{
    if (st == MR_E_NOMEM || st == MR_E_IO || st == MR_E_FAILED || st == MR_E_PARSE || st == MR_E_CORRUPT ||
        st == MR_E_LIMIT || st == MR_E_TIMEOUT || st == MR_E_INTERNAL)
        return EXIT_FAILED;
    if (st == MR_E_NOT_FOUND && (!mr_fs_exists(data) || (valid && !mr_fs_exists(valid)))) return EXIT_FAILED;
    return EXIT_USAGE;
}

int cmd_train(int argc, char **argv)
{
    if (cli_wants_help(argc, argv)) {
        fputs(train_help, stdout);
        return EXIT_OK;
    }
    mr_train_opts o;
    mr_train_opts_init(&o);
    const char *data = NULL, *valid_path = NULL, *output = NULL;
    mr_value *params = mr_value_new(MR_V_MAP); /* -p KEY=VALUE, typed as YAML scalars */
    char **features = NULL, **exclude = NULL, **categorical = NULL;
    int json = 0, rc = EXIT_OK, ranks = 0, mpi = 0;
    double rank_timeout = 0;
    mr_model *model = NULL;
    progress_ctx pc = {0};
    for (int i = 1; i < argc && rc == EXIT_OK; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        int takes = 1;
        if (!strcmp(a, "--label")) o.label = v;
        else if (!strcmp(a, "--valid")) valid_path = v;
        else if (!strcmp(a, "--valid-sample")) {
            char *end = NULL;
            long long n = v ? strtoll(v, &end, 10) : 0;
            if (v && (*end || n < 0)) rc = cli_usage_error("train", "--valid-sample expects a row count >= 0, got '%s'", v);
            else o.valid_sample = (size_t)n;
        } else if (!strcmp(a, "--model")) o.kind = v;
        else if (!strcmp(a, "-o") || !strcmp(a, "--output")) output = v;
        else if (!strcmp(a, "-p") || !strcmp(a, "--param")) {
            const char *eq = v ? strchr(v, '=') : NULL;
            if (v && (!eq || eq == v)) {
                rc = cli_usage_error("train", "-p expects KEY=VALUE (a LightGBM parameter), got '%s'", v);
            } else if (v) {
                char *key = mr_strndup(v, (size_t)(eq - v));
                if (!params || !key || mr_value_map_set(params, key, mr_value_from_scalar(eq + 1, 0)) != MR_OK)
                    rc = cli_usage_error("train", "out of memory");
                mr_free(key);
            }
        } else if (!strcmp(a, "--features")) features = v ? cli_split_list(v, &o.n_features) : NULL;
        else if (!strcmp(a, "--exclude")) exclude = v ? cli_split_list(v, &o.n_exclude) : NULL;
        else if (!strcmp(a, "--categorical")) categorical = v ? cli_split_list(v, &o.n_categorical) : NULL;
        else if (!strcmp(a, "-j") || !strcmp(a, "--threads")) o.num_threads = v ? (int)strtol(v, NULL, 10) : 0;
        else if (!strcmp(a, "--ranks")) {
            char *end = NULL;
            long n = v ? strtol(v, &end, 10) : 0;
            if (v && (*end || n < 1 || n > 65536)) rc = cli_usage_error("train", "--ranks expects 1..65536, got '%s'", v);
            else ranks = (int)n;
        } else if (!strcmp(a, "--rank-timeout")) {
            char *end = NULL;
            double t = v ? strtod(v, &end) : 0;
            if (v && (*end || !(t > 0))) rc = cli_usage_error("train", "--rank-timeout expects seconds > 0, got '%s'", v);
            else rank_timeout = t;
        } else {
            takes = 0;
            if (!strcmp(a, "--json")) json = 1;
            else if (!strcmp(a, "--mpi")) mpi = 1;
            else if (!strcmp(a, "--smoke")) o.smoke = 1;
            else if (a[0] == '-') rc = cli_usage_error("train", "unknown option '%s'", a);
            else if (!data) data = a;
            else rc = cli_usage_error("train", "unexpected argument '%s'", a);
        }
        if (takes) {
            if (!v) rc = cli_usage_error("train", "option '%s' needs a value", a);
            i++;
        }
    }
    if (rc == EXIT_OK && (!data || !o.label || !output))
        rc = cli_usage_error("train", "expected DATA, --label COL and -o MODEL");
    if (rc == EXIT_OK && ranks && mpi) rc = cli_usage_error("train", "--ranks starts the ranks; --mpi is what each rank runs");
    if (rc == EXIT_OK && ranks > 1) {
        mr_value_free(params);
        cli_free_list(features);
        cli_free_list(exclude);
        cli_free_list(categorical);
        return launch_ranks(argc, argv, ranks);
    }
    mr_gbdt_comm comm;
    int rank = 0;
    if (rc == EXIT_OK && mpi) {
        cli_mpi_sanitizer_setup(argc, argv);
        if (cli_mpi_init(&argc, &argv, &comm) != 0) {
            mr_log(MR_LOG_ERROR, "train: MPI did not start (run the ranks with mpirun or srun, or use --ranks N)");
            rc = EXIT_FAILED;
        } else {
            comm.timeout_s = rank_timeout;
            o.comm = &comm;
            rank = comm.rank;
        }
    }
    o.params = params;
    o.features = (const char *const *)features;
    o.exclude = (const char *const *)exclude;
    o.categorical = (const char *const *)categorical;
    if (rc == EXIT_OK) {
        mr_error err;
        mr_error_init(&err);
        mr_pool_init(o.num_threads, NULL);
        pc.curve = json_array();
        pc.json = json;
        pc.o = &o; /* the trainer sets o.rounds_total before the first round */
        o.on_round = rank == 0 ? on_round : NULL; /* one rank reports */
        o.on_round_ctx = &pc;
        double t0 = mr_now();
        mr_status st = mr_model_train_file(data, valid_path, &o, &model, &err);
        double secs = mr_now() - t0;
        mr_progress_end(pc.bar, NULL);
        pc.bar = NULL;
        if (st != MR_OK && mpi) {
            if (!strstr(err.msg, "rank ")) { /* a data error: say whose share */
                char msg[sizeof(err.msg)];
                int w = snprintf(msg, sizeof(msg), "rank %d of %d: ", comm.rank, comm.size);
                if (w > 0 && (size_t)w < sizeof(msg)) {
                    memcpy(msg + w, err.msg, sizeof(msg) - (size_t)w - 1);
                    msg[sizeof(msg) - 1] = '\0';
                    memcpy(err.msg, msg, sizeof(msg));
                }
            }
            mr_log_error(&err);
            cli_mpi_fail_exit(train_exit(data, valid_path, st));
        }
        if (st == MR_OK && rank == 0) st = mr_model_save(model, output, &err);
        if (st != MR_OK) {
            mr_log_error(&err);
            rc = train_exit(data, valid_path, st);
        } else if (rank != 0) {
            /* rank 0 writes the model and the summary */
        } else if (json) {
            json_t *j = json_pack("{s:s,s:s,s:s,s:I,s:I,s:f,s:O}", "model", output, "kind", mr_model_kind_name(model),
                                  "objective", mr_model_objective_name(model), "rows", (json_int_t)o.train_rows, "features",
                                  (json_int_t)mr_model_num_features(model), "seconds", secs, "curve", pc.curve);
            json_object_set_new(j, "binned_while_reading", json_boolean(o.streamed));
            if (mpi) {
                json_object_set_new(j, "ranks", json_integer(comm.size));
                json_object_set_new(j, "rank0_rows", json_integer((json_int_t)o.share_rows));
                json_object_set_new(j, "rank0_bytes_sent", json_integer((json_int_t)cli_mpi_bytes_sent()));
                json_object_set_new(j, "rank0_exchanges", json_integer((json_int_t)cli_mpi_exchanges()));
                json_object_set_new(j, "rank0_exchange_seconds", json_real(cli_mpi_exchange_seconds()));
            }
            if (valid_path && mr_model_kind_of(model) == MR_MODEL_GBDT) {
                json_object_set_new(j, "fast_tier_seconds", json_real(o.fast_tier_seconds));
                json_object_set_new(j, "valid_rows", json_integer((json_int_t)o.valid_rows_used));
            }
            char *t = json_dumps(j, JSON_INDENT(2) | JSON_REAL_PRECISION(17)); /* metrics exactly: a stage records them */
            if (t) printf("%s\n", t);
            free(t);
            json_decref(j);
        } else {
            printf("trained %s (%s) on %zu rows x %zu features in %.2fs%s%s -> %s\n", mr_model_kind_name(model),
                   mr_model_objective_name(model), o.train_rows, mr_model_num_features(model), secs,
                   pc.last[0] ? "; " : "", pc.last, output);
        }
    }
    json_decref(pc.curve);
    mr_model_free(model);
    mr_value_free(params);
    cli_free_list(features);
    cli_free_list(exclude);
    cli_free_list(categorical);
    if (mpi && o.comm) cli_mpi_finalize();
    return rc;
}

static const char model_help[] =
    "usage: millrace model inspect MODEL [--json]\n"
    "       millrace model dump MODEL                     (everything, trees included, as JSON)\n"
    "       millrace model predict MODEL DATA -o OUT [--raw] [--id COL,...] [--json]\n"
    "       millrace model register|alias|list|show|diff ...  (the model registry: millrace model list --help)\n"
    "\n"
    "predict scores DATA (.csv, .tsv, .jsonl, .parquet) and writes OUT (.csv, .tsv or\n"
    ".parquet) with one `prediction` column per model output (prediction_0.. for\n"
    "multiclass), in input row order, after the --id columns copied from DATA.\n"
    "--raw writes margins instead of probabilities.\n";

static int model_predict(int argc, char **argv, mr_model *m)
{
    const char *data = NULL, *out_path = NULL;
    char **ids = NULL;
    size_t n_ids = 0;
    int raw = 0, json = 0, rc = EXIT_OK;
    for (int i = 3; i < argc && rc == EXIT_OK; i++) {
        if ((!strcmp(argv[i], "-o") || !strcmp(argv[i], "--output")) && i + 1 < argc) out_path = argv[++i];
        else if (!strcmp(argv[i], "--id") && i + 1 < argc) ids = cli_split_list(argv[++i], &n_ids);
        else if (!strcmp(argv[i], "--raw")) raw = 1;
        else if (!strcmp(argv[i], "--json")) json = 1;
        else if (argv[i][0] != '-' && !data) data = argv[i];
        else rc = cli_usage_error("model predict", "unexpected argument '%s'", argv[i]);
    }
    if (rc == EXIT_OK && (!data || !out_path)) rc = cli_usage_error("model predict", "expected MODEL DATA -o OUT");
    mr_table *t = NULL, *res = NULL;
    double *pred = NULL;
    size_t k = 0;
    mr_error err;
    mr_error_init(&err);
    if (rc == EXIT_OK) rc = load_data(data, &t);
    double t0 = mr_now();
    if (rc == EXIT_OK) {
        mr_pool_init(0, NULL);
        mr_status st = mr_model_predict_table(m, t, raw, &pred, &k, &err);
        if (st == MR_OK) st = mr_table_new(&res, &err);
        for (size_t q = 0; st == MR_OK && q < n_ids; q++) {
            const mr_column *c = mr_table_column(t, ids[q]);
            mr_column *copy = NULL;
            if (!c) {
                st = MR_ERR(&err, MR_E_NOT_FOUND, "--id column '%s' is not in %s", ids[q], data);
                break;
            }
            st = mr_column_slice(c, 0, c->n, &copy, &err);
            if (st == MR_OK) st = mr_table_add_column(res, copy, &err);
        }
        for (size_t q = 0; st == MR_OK && q < k; q++) {
            char name[32];
            if (k == 1) snprintf(name, sizeof(name), "prediction");
            else snprintf(name, sizeof(name), "prediction_%zu", q);
            mr_column *c = NULL;
            st = mr_column_new(name, MR_T_FLOAT64, t->n_rows, &c, &err);
            for (size_t r = 0; st == MR_OK && r < t->n_rows; r++) st = mr_column_append_float64(c, pred[r * k + q]);
            if (st == MR_OK) st = mr_table_add_column(res, c, &err);
            else mr_column_free(c);
        }
        if (st == MR_OK) st = mr_table_write_file(out_path, res, &err);
        if (st != MR_OK) {
            mr_log_error(&err);
            rc = st == MR_E_IO || st == MR_E_NOMEM ? EXIT_FAILED : EXIT_USAGE;
        } else if (json) {
            printf("{\"rows\": %zu, \"outputs\": %zu, \"output\": \"%s\", \"seconds\": %.6f}\n", t->n_rows, k, out_path,
                   mr_now() - t0);
        } else {
            printf("scored %zu rows with %s (%zu output%s) in %.3fs -> %s\n", t->n_rows, mr_model_kind_name(m), k,
                   k == 1 ? "" : "s", mr_now() - t0, out_path);
        }
    }
    mr_free(pred);
    mr_table_free(t);
    mr_table_free(res);
    cli_free_list(ids);
    return rc;
}

int cmd_model(int argc, char **argv)
{
    if (argc >= 2 && cli_model_is_registry(argv[1])) return cli_model_registry(argc, argv);
    if (cli_wants_help(argc, argv) || argc < 3) {
        fputs(model_help, argc < 3 && !cli_wants_help(argc, argv) ? stderr : stdout);
        return argc < 3 && !cli_wants_help(argc, argv) ? EXIT_USAGE : EXIT_OK;
    }
    const char *sub = argv[1];
    if (strcmp(sub, "inspect") && strcmp(sub, "dump") && strcmp(sub, "predict"))
        return cli_usage_error("model", "unknown subcommand '%s' (inspect, dump, predict, register, alias, list, show, diff)", sub);
    if (argv[2][0] == '-') return cli_usage_error("model", "expected a model file before the options, got '%s'", argv[2]);
    mr_error err;
    mr_error_init(&err);
    mr_model *m = NULL;
    if (mr_model_load(argv[2], &m, &err) != MR_OK) {
        mr_log_error(&err);
        return EXIT_FAILED;
    }
    int rc = EXIT_OK;
    mr_buf out;
    mr_buf_init(&out);
    if (!strcmp(sub, "predict")) {
        rc = model_predict(argc, argv, m);
    } else {
        int json = 0;
        for (int i = 3; i < argc; i++) {
            if (!strcmp(argv[i], "--json")) json = 1;
            else rc = cli_usage_error("model", "unexpected argument '%s'", argv[i]);
        }
        mr_status st = MR_OK;
        if (rc == EXIT_OK && !strcmp(sub, "dump")) st = mr_model_dump_json(m, &out, &err);
        else if (rc == EXIT_OK && json) st = mr_model_info_json(m, &out, &err);
        else if (rc == EXIT_OK) {
            mr_buf_printf(&out, "%s model, objective %s, %zu output%s, %zu features\n", mr_model_kind_name(m),
                          mr_model_objective_name(m), mr_model_num_outputs(m), mr_model_num_outputs(m) == 1 ? "" : "s",
                          mr_model_num_features(m));
            mr_buf info;
            mr_buf_init(&info);
            if (mr_model_info_json(m, &info, &err) == MR_OK) {
                json_t *j = json_loads(info.data, 0, NULL);
                json_t *it = json_object_get(j, "iterations");
                if (json_is_integer(it)) mr_buf_printf(&out, "iterations: %lld\n", (long long)json_integer_value(it));
                size_t q;
                json_t *f;
                mr_buf_printf(&out, "%-30s %12s %14s\n", "FEATURE", mr_model_kind_of(m) == MR_MODEL_GBDT ? "SPLITS" : "",
                              mr_model_kind_of(m) == MR_MODEL_GBDT ? "GAIN" : "WEIGHT");
                json_array_foreach(json_object_get(j, "features"), q, f)
                {
                    json_t *g = json_object_get(f, mr_model_kind_of(m) == MR_MODEL_GBDT ? "gain" : "weight");
                    json_t *s = json_object_get(f, "split_count");
                    char sc[32] = "";
                    if (s) snprintf(sc, sizeof(sc), "%lld", (long long)json_integer_value(s));
                    mr_buf_printf(&out, "%-30s %12s %14.6g\n", cli_safe(json_string_value(json_object_get(f, "name"))), sc,
                                  json_number_value(g));
                }
                json_decref(j);
            }
            mr_buf_free(&info);
        }
        if (st != MR_OK) {
            mr_log_error(&err);
            rc = EXIT_FAILED;
        }
        if (json || !strcmp(sub, "dump")) cli_print_json(&out); /* feature names come from data */
        else cli_print(&out);
    }
    mr_buf_free(&out);
    mr_model_free(m);
    return rc;
}
