#define _XOPEN_SOURCE 700
#include <time.h>

#include "CFuzzSupport.h"

char *cfuzz_strptime(const char *text, const char *format, struct tm *fields) {
    return strptime(text, format, fields);
}
