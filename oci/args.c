/* Owns subcommand flag parsing for the runc-compatible commands: long flags
 * as "--name value" or "--name=value", short ones as "-n value", booleans
 * with an optional "=true|false", flags stopping at the first positional
 * argument (as urfave/cli, which runc uses, does). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "oci-internal.h"

void oci_list_free(struct oci_list *l)
{
    free(l->items);
    l->items = NULL;
    l->n = 0;
}

static const struct oci_opt *find_opt(const struct oci_opt *opts, size_t n, const char *name,
                                      size_t len, char short_name)
{
    for (size_t i = 0; i < n; i++) {
        if (short_name && opts[i].short_name == short_name)
            return &opts[i];
        if (!short_name && strlen(opts[i].name) == len && strncmp(opts[i].name, name, len) == 0)
            return &opts[i];
    }
    return NULL;
}

int oci_parse_args(int argc, char **argv, const struct oci_opt *opts, size_t n_opts, bool *help,
                   struct bh_error *err)
{
    *help = false;
    int i = 1;
    for (; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--") == 0)
            return i + 1;
        if (a[0] != '-' || a[1] == '\0')
            return i;
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            *help = true;
            continue;
        }
        const struct oci_opt *o;
        const char *value = NULL;
        if (a[1] == '-') {
            const char *name = a + 2;
            const char *eq = strchr(name, '=');
            size_t len = eq ? (size_t)(eq - name) : strlen(name);
            value = eq ? eq + 1 : NULL;
            o = find_opt(opts, n_opts, name, len, 0);
        } else {
            /* urfave/cli also takes single-dash long names ("-bundle"). */
            o = a[2] == '\0' ? find_opt(opts, n_opts, NULL, 0, a[1]) : NULL;
            if (o == NULL) {
                const char *name = a + 1;
                const char *eq = strchr(name, '=');
                size_t len = eq ? (size_t)(eq - name) : strlen(name);
                value = eq ? eq + 1 : NULL;
                o = find_opt(opts, n_opts, name, len, 0);
            }
        }
        if (o == NULL)
            return bh_error_set(err, EINVAL, "unknown flag `%s`", a);
        if (o->kind == OCI_OPT_BOOL) {
            bool v = true;
            if (value != NULL) {
                if (strcmp(value, "true") == 0)
                    v = true;
                else if (strcmp(value, "false") == 0)
                    v = false;
                else
                    return bh_error_set(err, EINVAL, "flag `%s` takes true or false", a);
            }
            *(bool *)o->value = v;
            continue;
        }
        if (value == NULL) {
            if (i + 1 >= argc)
                return bh_error_set(err, EINVAL, "flag `%s` needs a value", a);
            value = argv[++i];
        }
        if (o->kind == OCI_OPT_STRING) {
            *(const char **)o->value = value;
        } else {
            struct oci_list *l = o->value;
            const char **items = realloc(l->items, (l->n + 1) * sizeof(char *));
            if (items == NULL)
                return bh_error_errno(err, ENOMEM, "flag `%s`", a);
            l->items = items;
            l->items[l->n++] = value;
        }
    }
    return i;
}
