/* Control variables through the MPI tool information interface (MPI_T): what the library was set to.
 *
 * Each launch's rank 0 reads every control variable bound to no MPI object after MPI_Init
 * (cl_write_mpi_t_record: names and values only, a few tens of KiB); what does not change between
 * launches of a library (descriptions, datatypes, scopes, enumerations: hundreds of KiB for Open MPI) is
 * described once, at build time (cl_describe_cvars, behind the hidden --describe-cvars of program.c).
 * Values are JSON: numbers for the integer and floating-point datatypes, strings for MPI_CHAR, an
 * enumeration's item by its name, a list where a variable holds several elements. A variable that cannot
 * be read is listed with why; a library without MPI_T says so in the record's status. */
#define _GNU_SOURCE
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <mpi.h>

#include "catalogue.h"
#include "mpit.h"

#if MPI_VERSION >= 3

/* One control variable as MPI_T_cvar_get_info gives it. */
struct cl_cvar {
    char *name, *description;
    int verbosity, bind, scope;
    MPI_Datatype datatype;
    MPI_T_enum enumtype;
};

static const char *error_name(int code)
{
    switch (code) {
    case MPI_T_ERR_NOT_INITIALIZED: return "MPI_T_ERR_NOT_INITIALIZED";
    case MPI_T_ERR_CANNOT_INIT: return "MPI_T_ERR_CANNOT_INIT";
    case MPI_T_ERR_INVALID_INDEX: return "MPI_T_ERR_INVALID_INDEX";
    case MPI_T_ERR_INVALID_HANDLE: return "MPI_T_ERR_INVALID_HANDLE";
    case MPI_T_ERR_OUT_OF_HANDLES: return "MPI_T_ERR_OUT_OF_HANDLES";
    case MPI_T_ERR_MEMORY: return "MPI_T_ERR_MEMORY";
    case MPI_T_ERR_CVAR_SET_NOT_NOW: return "MPI_T_ERR_CVAR_SET_NOT_NOW";
    default: return NULL;
    }
}

static void error_text(char *out, size_t len, const char *call, int code)
{
    const char *name = error_name(code);
    if (name) snprintf(out, len, "%s failed: %s", call, name);
    else snprintf(out, len, "%s failed: error %d", call, code);
}

static const char *verbosity_name(int v)
{
    switch (v) {
    case MPI_T_VERBOSITY_USER_BASIC: return "user_basic";
    case MPI_T_VERBOSITY_USER_DETAIL: return "user_detail";
    case MPI_T_VERBOSITY_USER_ALL: return "user_all";
    case MPI_T_VERBOSITY_TUNER_BASIC: return "tuner_basic";
    case MPI_T_VERBOSITY_TUNER_DETAIL: return "tuner_detail";
    case MPI_T_VERBOSITY_TUNER_ALL: return "tuner_all";
    case MPI_T_VERBOSITY_MPIDEV_BASIC: return "mpidev_basic";
    case MPI_T_VERBOSITY_MPIDEV_DETAIL: return "mpidev_detail";
    case MPI_T_VERBOSITY_MPIDEV_ALL: return "mpidev_all";
    default: return "unknown";
    }
}

/* What a scope says: whether a value may be changed, and whether it may differ between processes. */
static const char *scope_name(int s)
{
    switch (s) {
    case MPI_T_SCOPE_CONSTANT: return "constant";
    case MPI_T_SCOPE_READONLY: return "readonly";
    case MPI_T_SCOPE_LOCAL: return "local";
    case MPI_T_SCOPE_GROUP: return "group";
    case MPI_T_SCOPE_GROUP_EQ: return "group_eq";
    case MPI_T_SCOPE_ALL: return "all";
    case MPI_T_SCOPE_ALL_EQ: return "all_eq";
    default: return "unknown";
    }
}

static const char *bind_name(int b)
{
    switch (b) {
    case MPI_T_BIND_NO_OBJECT: return "no_object";
    case MPI_T_BIND_MPI_COMM: return "communicator";
    case MPI_T_BIND_MPI_DATATYPE: return "datatype";
    case MPI_T_BIND_MPI_ERRHANDLER: return "errhandler";
    case MPI_T_BIND_MPI_FILE: return "file";
    case MPI_T_BIND_MPI_GROUP: return "group";
    case MPI_T_BIND_MPI_OP: return "op";
    case MPI_T_BIND_MPI_REQUEST: return "request";
    case MPI_T_BIND_MPI_WIN: return "window";
    case MPI_T_BIND_MPI_MESSAGE: return "message";
    case MPI_T_BIND_MPI_INFO: return "info";
    default: return "unknown";
    }
}

/* The datatypes MPI_T gives values in (MPI-3.1 14.3.5), and those some libraries use besides (Open MPI:
 * MPI_C_BOOL for its booleans, MPI_UINT64_T). */
enum cl_kind { CL_SIGNED, CL_UNSIGNED, CL_REAL, CL_BOOL, CL_TEXT };

struct cl_type {
    MPI_Datatype type;
    const char *name;
    size_t bytes;
    enum cl_kind kind;
};

static const struct cl_type *type_of(MPI_Datatype t)
{
    static const struct cl_type *types;
    static struct cl_type table[16];
    if (!types) {   /* handles are not constant expressions in every library */
        size_t n = 0;
        table[n++] = (struct cl_type){MPI_INT, "int", sizeof(int), CL_SIGNED};
        table[n++] = (struct cl_type){MPI_UNSIGNED, "unsigned", sizeof(unsigned), CL_UNSIGNED};
        table[n++] = (struct cl_type){MPI_LONG, "long", sizeof(long), CL_SIGNED};
        table[n++] = (struct cl_type){MPI_UNSIGNED_LONG, "unsigned long", sizeof(unsigned long), CL_UNSIGNED};
        table[n++] = (struct cl_type){MPI_LONG_LONG, "long long", sizeof(long long), CL_SIGNED};
        table[n++] = (struct cl_type){MPI_UNSIGNED_LONG_LONG, "unsigned long long", sizeof(unsigned long long),
                                      CL_UNSIGNED};
        table[n++] = (struct cl_type){MPI_COUNT, "count", sizeof(MPI_Count), CL_SIGNED};
        table[n++] = (struct cl_type){MPI_INT32_T, "int32_t", 4, CL_SIGNED};
        table[n++] = (struct cl_type){MPI_UINT32_T, "uint32_t", 4, CL_UNSIGNED};
        table[n++] = (struct cl_type){MPI_INT64_T, "int64_t", 8, CL_SIGNED};
        table[n++] = (struct cl_type){MPI_UINT64_T, "uint64_t", 8, CL_UNSIGNED};
        table[n++] = (struct cl_type){MPI_DOUBLE, "double", sizeof(double), CL_REAL};
        table[n++] = (struct cl_type){MPI_C_BOOL, "bool", sizeof(_Bool), CL_BOOL};
        table[n++] = (struct cl_type){MPI_CHAR, "char", 1, CL_TEXT};
        table[n] = (struct cl_type){MPI_DATATYPE_NULL, NULL, 0, CL_TEXT};
        types = table;
    }
    for (const struct cl_type *k = types; k->name; k++)
        if (k->type == t) return k;
    return NULL;
}

static const char *datatype_name(MPI_Datatype t)
{
    const struct cl_type *k = type_of(t);
    return k ? k->name : NULL;
}

/* A string MPI_T fills: its length asked first (name_len 0), so that no description is cut short. */
static char *fitted(int len)
{
    return calloc((size_t)(len > 0 ? len : 1) + 1, 1);
}

/* Variable `index`'s information (its strings allocated); nonzero (an MPI_T error) where it has none. */
static int cvar_info(int index, struct cl_cvar *v)
{
    int name_len = 0, desc_len = 0;
    memset(v, 0, sizeof *v);
    int err = MPI_T_cvar_get_info(index, NULL, &name_len, &v->verbosity, &v->datatype, &v->enumtype, NULL,
                                  &desc_len, &v->bind, &v->scope);
    if (err != MPI_SUCCESS) return err;
    v->name = fitted(name_len);
    v->description = fitted(desc_len);
    if (!v->name || !v->description) return MPI_T_ERR_MEMORY;
    name_len += 1;    /* room for the terminating NUL, whether or not a library counts it */
    desc_len += 1;
    return MPI_T_cvar_get_info(index, v->name, &name_len, &v->verbosity, &v->datatype, &v->enumtype,
                               v->description, &desc_len, &v->bind, &v->scope);
}

static void free_cvar(struct cl_cvar *v)
{
    free(v->name);
    free(v->description);
}

/* The name of `enumtype`'s item whose value is `value`, or NULL (*name must be freed). */
static char *enum_item(MPI_T_enum enumtype, int value)
{
    int items = 0, len = 0;
    if (MPI_T_enum_get_info(enumtype, &items, NULL, &len) != MPI_SUCCESS) return NULL;
    for (int i = 0; i < items; i++) {
        int item_value, item_len = 0;
        if (MPI_T_enum_get_item(enumtype, i, &item_value, NULL, &item_len) != MPI_SUCCESS) continue;
        if (item_value != value) continue;
        char *name = fitted(item_len);
        item_len += 1;
        if (name && MPI_T_enum_get_item(enumtype, i, &item_value, name, &item_len) == MPI_SUCCESS) return name;
        free(name);
        return NULL;
    }
    return NULL;
}

/* One element of `kind`, `bytes` long, at `at`, as a JSON number (or true/false); *as_int set to it where it
 * fits an int (an enumeration's item is looked up by it). */
static void write_number(FILE *out, const struct cl_type *k, const unsigned char *at, long long *as_int)
{
    if (k->kind == CL_REAL) {
        double x;
        memcpy(&x, at, sizeof x);
        if (isfinite(x)) fprintf(out, "%.17g", x);
        else fputs("null", out);    /* JSON has no NaN or infinity */
        return;
    }
    if (k->kind == CL_BOOL) {
        _Bool x;
        memcpy(&x, at, sizeof x);
        fputs(x ? "true" : "false", out);
        *as_int = x;
        return;
    }
    if (k->kind == CL_UNSIGNED) {
        unsigned long long x = 0;
        if (k->bytes == 4) { unsigned int y; memcpy(&y, at, 4); x = y; }
        else memcpy(&x, at, sizeof x);
        fprintf(out, "%llu", x);
        *as_int = (long long)x;
        return;
    }
    long long x = 0;
    if (k->bytes == 4) { int y; memcpy(&y, at, 4); x = y; }
    else memcpy(&x, at, sizeof x);
    fprintf(out, "%lld", x);
    *as_int = x;
}

/* Reads variable `index` (bound to no object) and writes its value as JSON into `value` (a memory
 * stream); NULL on success, else why it could not be read (into `why`). */
static const char *read_value(int index, const struct cl_cvar *v, FILE *value, char *why, size_t why_len)
{
    if (v->bind != MPI_T_BIND_NO_OBJECT) {
        snprintf(why, why_len, "bound to each %s: not read", bind_name(v->bind));
        return why;
    }
    const struct cl_type *k = type_of(v->datatype);
    if (!k) {
        char type[MPI_MAX_OBJECT_NAME] = "unnamed";
        int len;
        MPI_Type_get_name(v->datatype, type, &len);
        snprintf(why, why_len, "its datatype (%s) is none MPI_T gives values in", type);
        return why;
    }
    size_t bytes = k->bytes;
    MPI_T_cvar_handle handle;
    int count = 0;
    int err = MPI_T_cvar_handle_alloc(index, NULL, &handle, &count);
    if (err != MPI_SUCCESS) {
        error_text(why, why_len, "MPI_T_cvar_handle_alloc", err);
        return why;
    }
    size_t room = (size_t)(count > 0 ? count : 1) * bytes + 16;
    unsigned char *buffer = calloc(room, 1);
    if (!buffer) {
        MPI_T_cvar_handle_free(&handle);
        snprintf(why, why_len, "no memory for %zu bytes", room);
        return why;
    }
    err = MPI_T_cvar_read(handle, buffer);
    MPI_T_cvar_handle_free(&handle);
    if (err != MPI_SUCCESS) {
        free(buffer);
        error_text(why, why_len, "MPI_T_cvar_read", err);
        return why;
    }
    if (k->kind == CL_TEXT) {
        buffer[room - 1] = '\0';
        cl_json_string(value, (const char *)buffer);
    } else {
        int elements = count > 0 ? count : 1;
        if (elements > 1) fputc('[', value);
        for (int i = 0; i < elements; i++) {
            if (i) fputc(',', value);
            const unsigned char *at = buffer + (size_t)i * bytes;
            /* An enumeration's value is written as its item's name: the number alone means nothing. */
            char *text = NULL, *item = NULL;
            size_t text_len = 0;
            long long as_int = 0;
            FILE *number = open_memstream(&text, &text_len);
            if (number) {
                write_number(number, k, at, &as_int);
                fclose(number);
            }
            if (v->enumtype != MPI_T_ENUM_NULL && k->kind != CL_REAL && as_int >= INT_MIN && as_int <= INT_MAX)
                item = enum_item(v->enumtype, (int)as_int);
            if (item) cl_json_string(value, item);
            else fputs(text ? text : "null", value);
            free(text);
            free(item);
        }
        if (elements > 1) fputc(']', value);
    }
    free(buffer);
    return NULL;
}

/* The value read (JSON text, to be freed) or NULL with why. */
static char *value_of(int index, const struct cl_cvar *v, char *why, size_t why_len)
{
    char *text = NULL;
    size_t len = 0;
    FILE *value = open_memstream(&text, &len);
    if (!value) {
        snprintf(why, why_len, "no memory");
        return NULL;
    }
    const char *problem = read_value(index, v, value, why, why_len);
    fclose(value);
    if (problem) {
        free(text);
        return NULL;
    }
    return text;
}

/* MPI_T started; NULL, or why not (into `why`). */
static const char *start(int *total, char *why, size_t why_len)
{
    int provided;
    int err = MPI_T_init_thread(MPI_THREAD_SINGLE, &provided);
    if (err != MPI_SUCCESS) {
        error_text(why, why_len, "MPI_T_init_thread", err);
        return why;
    }
    err = MPI_T_cvar_get_num(total);
    if (err != MPI_SUCCESS) {
        error_text(why, why_len, "MPI_T_cvar_get_num", err);
        MPI_T_finalize();
        return why;
    }
    return NULL;
}

void cl_write_mpi_t_record(FILE *out)
{
    char why[256];
    int total = 0;
    fputs("{\"record\":\"mpi_t\",", out);
    if (start(&total, why, sizeof why)) {
        fputs("\"status\":\"unsupported\",\"reason\":", out);
        cl_json_string(out, why);
        fputs("}\n", out);
        fflush(out);
        return;
    }
    /* Values first, then what could not be read: the record's two maps, built side by side. */
    char *unreadable = NULL;
    size_t unreadable_len = 0;
    FILE *missed = open_memstream(&unreadable, &unreadable_len);
    int read = 0, not_read = 0, invalid = 0;
    fprintf(out, "\"status\":\"ok\",\"mpi_t_version\":\"%d.%d\",\"cvars\":{", MPI_VERSION, MPI_SUBVERSION);
    for (int i = 0; i < total; i++) {
        struct cl_cvar v;
        int err = cvar_info(i, &v);
        if (err != MPI_SUCCESS) {   /* an index a library has retired (Open MPI leaves gaps) */
            invalid++;
            free_cvar(&v);
            continue;
        }
        char *value = value_of(i, &v, why, sizeof why);
        if (value) {
            if (read++) fputc(',', out);
            cl_json_string(out, v.name);
            fputc(':', out);
            fputs(value, out);
        } else if (missed) {
            if (not_read++) fputc(',', missed);
            cl_json_string(missed, v.name);
            fputc(':', missed);
            cl_json_string(missed, why);
        }
        free(value);
        free_cvar(&v);
    }
    if (missed) fclose(missed);
    fprintf(out, "},\"unreadable\":{%s},\"count\":%d,\"read\":%d,\"invalid_indices\":%d}\n",
            unreadable ? unreadable : "", total, read, invalid);
    free(unreadable);
    fflush(out);
    MPI_T_finalize();
}

static void describe_enumeration(FILE *out, MPI_T_enum enumtype)
{
    int items = 0, len = 0;
    if (MPI_T_enum_get_info(enumtype, &items, NULL, &len) != MPI_SUCCESS) return;
    char *name = fitted(len);
    len += 1;
    fputs(",\"enumeration\":", out);
    if (name && MPI_T_enum_get_info(enumtype, &items, name, &len) == MPI_SUCCESS) cl_json_string(out, name);
    else fputs("null", out);
    free(name);
    fputs(",\"items\":{", out);
    for (int i = 0, written = 0; i < items; i++) {
        int value, item_len = 0;
        if (MPI_T_enum_get_item(enumtype, i, &value, NULL, &item_len) != MPI_SUCCESS) continue;
        char *item = fitted(item_len);
        item_len += 1;
        if (item && MPI_T_enum_get_item(enumtype, i, &value, item, &item_len) == MPI_SUCCESS) {
            if (written++) fputc(',', out);
            cl_json_string(out, item);
            fprintf(out, ":%d", value);
        }
        free(item);
    }
    fputc('}', out);
}

void cl_describe_cvars(FILE *out)
{
    char why[256], version[MPI_MAX_LIBRARY_VERSION_STRING];
    int total = 0, version_len;
    MPI_Get_library_version(version, &version_len);
    fputs("{\"record\":\"mpi_t_cvars\",\"library_version\":", out);
    cl_json_string(out, version);
    fprintf(out, ",\"mpi_version\":\"%d.%d\",", MPI_VERSION, MPI_SUBVERSION);
    if (start(&total, why, sizeof why)) {
        fputs("\"status\":\"unsupported\",\"reason\":", out);
        cl_json_string(out, why);
        fputs(",\"cvars\":[]}\n", out);
        fflush(out);
        return;
    }
    fprintf(out, "\"status\":\"ok\",\"count\":%d,\"cvars\":[", total);
    for (int i = 0, written = 0; i < total; i++) {
        struct cl_cvar v;
        if (cvar_info(i, &v) != MPI_SUCCESS) {
            free_cvar(&v);
            continue;
        }
        const char *type = datatype_name(v.datatype);
        if (written++) fputc(',', out);
        fputs("\n{\"name\":", out);
        cl_json_string(out, v.name);
        fprintf(out, ",\"index\":%d,\"datatype\":", i);
        if (type) cl_json_string(out, type);
        else fputs("null", out);
        fprintf(out, ",\"verbosity\":\"%s\",\"scope\":\"%s\",\"bind\":\"%s\",\"description\":",
                verbosity_name(v.verbosity), scope_name(v.scope), bind_name(v.bind));
        cl_json_string(out, v.description);
        if (v.enumtype != MPI_T_ENUM_NULL) describe_enumeration(out, v.enumtype);
        char *value = value_of(i, &v, why, sizeof why);
        if (value) fprintf(out, ",\"value\":%s", value);
        else {
            fputs(",\"unreadable\":", out);
            cl_json_string(out, why);
        }
        fputc('}', out);
        free(value);
        free_cvar(&v);
    }
    fputs("]}\n", out);
    fflush(out);
    MPI_T_finalize();
}

#else   /* a library older than MPI-3 has no tool interface */

void cl_write_mpi_t_record(FILE *out)
{
    fprintf(out, "{\"record\":\"mpi_t\",\"status\":\"unsupported\",\"reason\":\"the library's mpi.h is MPI %d.%d; "
                 "MPI_T is MPI-3\"}\n", MPI_VERSION, MPI_SUBVERSION);
    fflush(out);
}

void cl_describe_cvars(FILE *out)
{
    fprintf(out, "{\"record\":\"mpi_t_cvars\",\"status\":\"unsupported\",\"reason\":\"the library's mpi.h is MPI "
                 "%d.%d; MPI_T is MPI-3\",\"cvars\":[]}\n", MPI_VERSION, MPI_SUBVERSION);
    fflush(out);
}

#endif
