// What the fuzz targets need from the C library beyond Glibc's module: strptime(3), which glibc
// declares only for _XOPEN_SOURCE (Glibc's module does not define it).
#ifndef CFUZZSUPPORT_H
#define CFUZZSUPPORT_H

#include <time.h>

/// strptime(3): reads `text` by `format` into `fields`; the first byte not read, or NULL.
char *cfuzz_strptime(const char *text, const char *format, struct tm *fields);

#endif
