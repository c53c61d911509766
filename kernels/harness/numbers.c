/* Strict parsing of the numbers of a command line (see numbers.h). */
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "numbers.h"

static const char *skip_blanks(const char *p)
{
    while (*p && isspace((unsigned char)*p)) p++;
    return p;
}

/* Decimal digits only (strtoull would take a sign, a base prefix or leading blanks). */
static enum cl_number_problem digits(const char **p, unsigned long long *value)
{
    const char *start = *p;
    unsigned long long v = 0;
    int too_large = 0;
    for (; isdigit((unsigned char)**p); (*p)++) {
        unsigned digit = (unsigned)(**p - '0');
        if (v > (ULLONG_MAX - digit) / 10) too_large = 1;
        else v = v * 10 + digit;
    }
    if (*p == start) return CL_NUMBER_MALFORMED;
    *value = v;
    return too_large ? CL_NUMBER_OUT_OF_RANGE : CL_NUMBER_OK;
}

enum cl_number_problem cl_parse_size(const char *text, size_t *value)
{
    /* Binary, as OSU, IMB and NetPIPE label message sizes (4M is 4194304 B); the same as a campaign file. */
    static const struct { const char *name; unsigned long long factor; } suffixes[] = {
        {"Ki", 1ull << 10}, {"Mi", 1ull << 20}, {"Gi", 1ull << 30},
        {"k", 1ull << 10}, {"K", 1ull << 10}, {"M", 1ull << 20}, {"G", 1ull << 30},
    };
    const char *p = skip_blanks(text);
    unsigned long long number;
    enum cl_number_problem problem = digits(&p, &number);
    if (problem == CL_NUMBER_MALFORMED) return problem;
    p = skip_blanks(p);
    unsigned long long factor = 1;
    for (size_t i = 0; i < sizeof suffixes / sizeof suffixes[0]; i++) {
        size_t len = strlen(suffixes[i].name);
        if (strncmp(p, suffixes[i].name, len) == 0) {
            factor = suffixes[i].factor;
            p += len;
            break;
        }
    }
    if (*skip_blanks(p)) return CL_NUMBER_MALFORMED;
    if (problem || number > SIZE_MAX / factor) return CL_NUMBER_OUT_OF_RANGE;
    *value = (size_t)(number * factor);
    return CL_NUMBER_OK;
}

enum cl_number_problem cl_parse_long(const char *text, long min, long max, long *value)
{
    const char *p = text;
    int negative = *p == '-';
    if (*p == '-' || *p == '+') p++;
    unsigned long long magnitude;
    enum cl_number_problem problem = digits(&p, &magnitude);
    if (problem == CL_NUMBER_MALFORMED || *p) return CL_NUMBER_MALFORMED;
    if (problem || magnitude > (unsigned long long)LONG_MAX + (unsigned)negative) return CL_NUMBER_OUT_OF_RANGE;
    /* -(magnitude - 1) - 1 reaches LONG_MIN without overflowing on the way */
    long v = !negative ? (long)magnitude : magnitude ? -(long)(magnitude - 1) - 1 : 0;
    if (v < min || v > max) return CL_NUMBER_OUT_OF_RANGE;
    *value = v;
    return CL_NUMBER_OK;
}

enum cl_number_problem cl_parse_double(const char *text, double *value)
{
    char *end;
    if (!*text || isspace((unsigned char)*text)) return CL_NUMBER_MALFORMED;
    errno = 0;
    double v = strtod(text, &end);
    if (*end || end == text) return CL_NUMBER_MALFORMED;
    if (!isfinite(v)) return isnan(v) ? CL_NUMBER_MALFORMED : CL_NUMBER_OUT_OF_RANGE;
    if (errno == ERANGE && v != 0) return CL_NUMBER_OUT_OF_RANGE;
    *value = v;
    return CL_NUMBER_OK;
}
