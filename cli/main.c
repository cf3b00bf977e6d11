#include "millrace/core.h"
int main(void) { return 0; }
