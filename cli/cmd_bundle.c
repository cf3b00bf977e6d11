/* millrace bundle {inspect, verify, export-onnx}: look inside a model bundle,
 * check every section's checksum and contents, or export it to ONNX. */
#include "cli.h"
#include "millrace/bundle.h"

#include <stdlib.h>
#include <string.h>

#include <jansson.h>

static const char bundle_help[] =
    "usage: millrace bundle inspect BUNDLE [--json]\n"
    "       millrace bundle verify BUNDLE\n"
    "       millrace bundle export-onnx BUNDLE -o MODEL.onnx\n"
    "\n"
    "inspect prints the sections (offset, length, xxh3-128), the input schema, outputs,\n"
    "metrics and lineage. verify loads the bundle with every check a reader makes and\n"
    "exits 1 naming the section that failed. export-onnx writes the model and its\n"
    "features transform as ONNX: input \"input\" float [N, inputs] (and \"input_cat\" string\n"
    "[N, categorical inputs] when the model uses one; \"\" = missing), output \"score\" float\n"
    "[N, 1] ([N, K] for multiclass). A hash encoding cannot be expressed and is refused\n"
    "naming its column (docs/bundle.md).\n";


static int inspect(const mr_bundle *b, const char *path, int json)
{
    json_error_t je;
    json_t *man = json_loads(mr_bundle_manifest_json(b), 0, &je);
    if (!man) {
        fprintf(stderr, "millrace: error: %s: manifest: %s\n", cli_safe(path), cli_safe(je.text));
        return EXIT_FAILED;
    }
    if (json) {
        json_t *secs = json_array();
        for (size_t i = 0; i < mr_bundle_n_sections(b); i++) {
            mr_bundle_section_info s;
            mr_bundle_section(b, i, &s);
            json_array_append_new(secs, json_pack("{s:s,s:I,s:I,s:s}", "name", s.name, "offset", (json_int_t)s.offset,
                                                  "length", (json_int_t)s.length, "xxh3_128", s.hash));
        }
        json_object_set_new(man, "sections", secs);
        json_object_set_new(man, "version_id", json_string(mr_bundle_version_id(b)));
        char *t = json_dumps(man, JSON_INDENT(2));
        if (t) cli_puts_json(t);
        free(t);
        json_decref(man);
        return EXIT_OK;
    }
    const mr_model *m = mr_bundle_model(b);
    json_t *name = json_object_get(man, "name"), *lin = json_object_get(man, "lineage");
    /* every name, value and path below comes from the bundle: printed through cli_safe */
    printf("bundle %s (format version %u, version id %s)\n", cli_safe(path), MR_BUNDLE_VERSION, mr_bundle_version_id(b));
    printf("name: %s\nmodel: %s, objective %s, %zu features%s\n", json_is_string(name) ? cli_safe(json_string_value(name)) : "-",
           mr_model_kind_name(m), mr_model_objective_name(m), mr_model_num_features(m),
           mr_bundle_features(b) ? ", with a features transform" : "");
    printf("\n%-10s %12s %12s  %s\n", "SECTION", "OFFSET", "LENGTH", "XXH3-128");
    for (size_t i = 0; i < mr_bundle_n_sections(b); i++) {
        mr_bundle_section_info s;
        mr_bundle_section(b, i, &s);
        printf("%-10s %12llu %12llu  %s\n", s.name, (unsigned long long)s.offset, (unsigned long long)s.length, s.hash);
    }
    printf("\n%-30s %-9s %-12s %s\n", "INPUT", "TYPE", "KIND", "REQUIRED");
    for (size_t i = 0; i < mr_bundle_n_inputs(b); i++) {
        const mr_bundle_input *in = mr_bundle_input_at(b, i);
        printf("%-30s %-9s %-12s %s\n", cli_safe(in->name), mr_dtype_name(in->type), in->categorical ? "categorical" : "numeric",
               in->required ? "yes" : "no");
    }
    printf("\noutputs:");
    for (size_t k = 0; k < mr_bundle_n_outputs(b); k++) printf(" %s", cli_safe(mr_bundle_output_name(b, k)));
    printf("\nmetrics: %s\n", cli_safe(mr_bundle_metrics_json(b)));
    const mr_bundle_service *svc = mr_bundle_service_of(b);
    if (svc) { /* docs/featurestore.md, "Serving by entity" */
        printf("feature service: missing: %s\n", svc->reject_missing ? "reject" : "default");
        for (size_t i = 0; i < svc->n_stores; i++) {
            const mr_bundle_service_store *ss = &svc->stores[i];
            printf("  by");
            for (size_t k = 0; k < ss->n_keys; k++)
                printf("%s %s (%s)", k ? "," : "", cli_safe(ss->key_names[k]), mr_dtype_name(ss->key_types[k]));
            printf(" from %s\n", ss->store ? cli_safe(ss->store) : "-");
            for (size_t k = 0; k < svc->n_features; k++)
                if (svc->features[k].store == i)
                    printf("    feature %s (%s, view %s)\n", cli_safe(svc->features[k].name),
                           mr_dtype_name(svc->features[k].type), cli_safe(svc->features[k].view));
        }
    }
    json_t *rid = json_object_get(lin, "run_id"), *sk = json_object_get(lin, "stage_key");
    json_t *gc = json_object_get(lin, "git_commit"), *st = json_object_get(lin, "stage");
    printf("lineage: ");
    if (json_is_integer(rid)) printf("run %lld, ", (long long)json_integer_value(rid));
    printf("stage %s, key %s, git %s\n", json_is_string(st) ? cli_safe(json_string_value(st)) : "-",
           json_is_string(sk) ? cli_safe(json_string_value(sk)) : "-",
           json_is_string(gc) ? cli_safe(json_string_value(gc)) : "-");
    size_t q;
    json_t *a;
    json_array_foreach(json_object_get(lin, "artifacts"), q, a)
    {
        json_t *id = json_object_get(a, "id");
        printf("  input %s: %s\n", cli_safe(json_string_value(json_object_get(a, "name"))),
               json_is_string(id) ? cli_safe(json_string_value(id)) : "-");
    }
    json_decref(man);
    return EXIT_OK;
}

static int export_onnx(const mr_bundle *b, const char *out_path)
{
    mr_error err;
    mr_error_init(&err);
    mr_buf buf;
    mr_buf_init(&buf);
    int rc = EXIT_OK;
    if (mr_bundle_export_onnx(b, &buf, &err) != MR_OK ||
        mr_fs_write_atomic(out_path, buf.data, buf.len, &err) != MR_OK) {
        mr_log_error(&err);
        rc = EXIT_FAILED;
        goto cleanup;
    }
    printf("wrote %s (%zu bytes, ONNX ir_version 8, opsets ai.onnx 17 + ai.onnx.ml 3)\n", out_path, buf.len);
cleanup:
    mr_buf_free(&buf);
    return rc;
}

int cmd_bundle(int argc, char **argv)
{
    if (cli_wants_help(argc, argv) || argc < 3) {
        int help = cli_wants_help(argc, argv);
        fputs(bundle_help, help ? stdout : stderr);
        return help ? EXIT_OK : EXIT_USAGE;
    }
    const char *sub = argv[1], *path = argv[2], *onnx_out = NULL;
    int json = 0, onnx = !strcmp(sub, "export-onnx");
    if (strcmp(sub, "inspect") && strcmp(sub, "verify") && !onnx)
        return cli_usage_error("bundle", "unknown subcommand '%s' (inspect, verify, export-onnx)", sub);
    if (path[0] == '-') return cli_usage_error("bundle", "expected a bundle file before the options, got '%s'", path);
    for (int i = 3; i < argc; i++) {
        if (!onnx && !strcmp(argv[i], "--json")) json = 1;
        else if (onnx && (!strcmp(argv[i], "-o") || !strcmp(argv[i], "--output")) && i + 1 < argc) onnx_out = argv[++i];
        else return cli_usage_error("bundle", "unexpected argument '%s'", argv[i]);
    }
    if (onnx && !onnx_out) return cli_usage_error("bundle", "export-onnx needs -o MODEL.onnx");
    mr_error err;
    mr_error_init(&err);
    mr_bundle *b = NULL;
    char *file = NULL;
    int rc = cli_resolve_bundle(path, &file);
    if (rc != EXIT_OK) return rc;
    if (mr_bundle_load(file, &b, &err) != MR_OK) {
        mr_log_error(&err);
        mr_free(file);
        return EXIT_FAILED;
    }
    mr_free(file);
    if (!strcmp(sub, "inspect")) rc = inspect(b, path, json);
    else if (onnx) rc = export_onnx(b, onnx_out);
    else
        printf("ok: %s: %zu sections verified (checksums, contents, compiled predictor), version %s\n", path,
               mr_bundle_n_sections(b), mr_bundle_version_id(b));
    mr_bundle_free(b);
    return rc;
}
