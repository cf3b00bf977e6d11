/* Internals of the run browser (src/ui/): the page, embedded at build time
 * from src/ui/page.html (CMake writes it as a C array, ui_page.c in the
 * build directory), which ui_app.c serves at /. */
#ifndef MILLRACE_UI_INT_H
#define MILLRACE_UI_INT_H

#include "millrace/ui.h"

#include <stddef.h>

extern const char mr__ui_page[];
extern const size_t mr__ui_page_len;

#endif
