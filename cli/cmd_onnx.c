/* millrace bundle export-onnx: placeholder until the exporter lands. */
#include "cli.h"
#include "millrace/bundle.h"

int cmd_onnx_export(const mr_bundle *b, const char *out_path);
int cmd_onnx_export(const mr_bundle *b, const char *out_path)
{
    (void)b;
    fprintf(stderr, "millrace: error: %s: ONNX export is not available in this build\n", out_path);
    return EXIT_FAILED;
}
