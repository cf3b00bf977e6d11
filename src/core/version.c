/* The library version. */
#include "millrace/core.h"

const char *mr_version(void) { return MILLRACE_VERSION; }
