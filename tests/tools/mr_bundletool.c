/* Test helper (not installed): writes a bundle whose metadata is whatever
 * the arguments say, as a hostile or careless producer could (the package
 * op refuses control characters in a name; the format does not), for
 * tests/e2e/test_terminal_escapes.sh.
 *
 *   mr_bundletool MODEL OUT.mrb NAME STAGE METRICS_JSON
 */
#include "millrace/bundle.h"
#include "millrace/model.h"

#include <stdio.h>

int main(int argc, char **argv)
{
    if (argc != 6) {
        fprintf(stderr, "usage: mr_bundletool MODEL OUT.mrb NAME STAGE METRICS_JSON\n");
        return 2;
    }
    mr_error err;
    mr_error_init(&err);
    mr_model *m = NULL;
    if (mr_model_load(argv[1], &m, &err) != MR_OK) {
        mr_log_error(&err);
        return 1;
    }
    mr_bundle_build bb;
    mr_bundle_build_init(&bb);
    bb.model = m;
    bb.name = argv[3];
    bb.stage = argv[4];
    bb.metrics_json = argv[5];
    const char *art_names[] = {argv[3]}, *art_ids[] = {argv[4]};
    bb.artifact_names = art_names;
    bb.artifact_ids = art_ids;
    bb.n_artifacts = 1;
    int rc = mr_bundle_save(&bb, argv[2], &err) == MR_OK ? 0 : 1;
    if (rc) mr_log_error(&err);
    mr_model_free(m);
    return rc;
}
