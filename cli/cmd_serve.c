/* placeholder */
#include "cli.h"
int cmd_serve(int argc, char **argv) { (void)argc; (void)argv; return EXIT_FAILED; }
int cmd_bench_serve(int argc, char **argv) { (void)argc; (void)argv; return EXIT_FAILED; }
