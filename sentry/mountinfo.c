/* The one reader of /proc/PID/mountinfo (proc(5)):
 *   id parent major:minor root point options [optional...] - fstype source super
 * Every caller in sentry/ reads it through here, so an odd name a guest gave
 * a mount point is read the same way everywhere. A guest with CAP_SYS_ADMIN
 * in its user namespace (the container tier) names mount points as it likes:
 * lines have no length limit here (getline), and a line that does not have
 * the shape above is an error, never skipped or cut. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "mountinfo.h"

int bh_mountinfo_open(struct bh_mountinfo *mi, struct bh_error *err)
{
    memset(mi, 0, sizeof(*mi));
    mi->f = fopen("/proc/self/mountinfo", "re");
    if (mi->f == NULL)
        return bh_error_errno(err, errno, "open /proc/self/mountinfo");
    mi->own = true;
    return 0;
}

void bh_mountinfo_from(struct bh_mountinfo *mi, FILE *f)
{
    memset(mi, 0, sizeof(*mi));
    mi->f = f;
}

void bh_mountinfo_close(struct bh_mountinfo *mi)
{
    if (mi->own && mi->f != NULL)
        fclose(mi->f);
    free(mi->line);
    free(mi->optional);
    memset(mi, 0, sizeof(*mi));
}

bool bh_mountinfo_unescape(char *s)
{
    char *w = s;
    for (const char *r = s; *r; r++) {
        if (*r != '\\') {
            *w++ = *r;
            continue;
        }
        if (!(r[1] >= '0' && r[1] <= '3' && r[2] >= '0' && r[2] <= '7' && r[3] >= '0' &&
              r[3] <= '7'))
            return false;
        char c = (char)((r[1] - '0') * 64 + (r[2] - '0') * 8 + (r[3] - '0'));
        if (c == '\0')
            return false;
        *w++ = c;
        r += 3;
    }
    *w = '\0';
    return true;
}

/* Escapes must be well formed in the fields kept as written too. */
static bool well_escaped(const char *s)
{
    for (; *s; s++)
        if (*s == '\\' && !(s[1] >= '0' && s[1] <= '3' && s[2] >= '0' && s[2] <= '7' &&
                            s[3] >= '0' && s[3] <= '7'))
            return false;
    return true;
}

static bool parse_ulong(const char *s, unsigned long *out)
{
    if (*s < '0' || *s > '9')
        return false;
    char *end = NULL;
    errno = 0;
    unsigned long v = strtoul(s, &end, 10);
    if (errno != 0 || *end != '\0')
        return false;
    *out = v;
    return true;
}

static bool parse_dev(char *s, unsigned *major, unsigned *minor)
{
    char *colon = strchr(s, ':');
    unsigned long a = 0, b = 0;
    if (colon == NULL)
        return false;
    *colon = '\0';
    if (!parse_ulong(s, &a) || !parse_ulong(colon + 1, &b) || a > 0xfffffffful || b > 0xfffffffful)
        return false;
    *major = (unsigned)a;
    *minor = (unsigned)b;
    return true;
}

/* The next field ending in one space (or the line's end); NULL at the end.
 * Empty fields (two spaces) cannot come from the kernel. */
static char *field_may_be_empty(char **cur, bool *bad, bool may_be_empty)
{
    char *s = *cur;
    if (s == NULL)
        return NULL;
    char *sp = strchr(s, ' ');
    if (sp != NULL) {
        *sp = '\0';
        *cur = sp + 1;
    } else {
        *cur = NULL;
    }
    if (*s == '\0' && !may_be_empty)
        *bad = true;
    return s;
}

static char *field(char **cur, bool *bad)
{
    return field_may_be_empty(cur, bad, false);
}

static bool optional_id(const char *tag, const char *f, unsigned long *out)
{
    size_t l = strlen(tag);
    return strncmp(f, tag, l) == 0 && parse_ulong(f + l, out) && *out != 0;
}

/* Splits line (no newline) into e; false for a line of another shape. */
static bool parse_line(struct bh_mountinfo *mi, char *line, struct bh_mount_entry *e,
                       struct bh_error *err, bool *oom)
{
    memset(e, 0, sizeof(*e));
    bool bad = false;
    char *cur = line;
    char *id = field(&cur, &bad), *parent = field(&cur, &bad), *dev = field(&cur, &bad);
    char *root = field(&cur, &bad), *point = field(&cur, &bad), *opts = field(&cur, &bad);
    if (bad || opts == NULL || !parse_ulong(id, &e->id) || !parse_ulong(parent, &e->parent) ||
        !parse_dev(dev, &e->major, &e->minor))
        return false;
    size_t n = 0;
    char *f;
    while ((f = field(&cur, &bad)) != NULL && strcmp(f, "-") != 0) {
        if (n == mi->optional_cap) {
            size_t want = mi->optional_cap ? 2 * mi->optional_cap : 4;
            const char **grown = realloc(mi->optional, want * sizeof(*grown));
            if (grown == NULL) {
                *oom = true;
                bh_error_errno(err, ENOMEM, "read /proc/self/mountinfo");
                return false;
            }
            mi->optional = grown;
            mi->optional_cap = want;
        }
        mi->optional[n++] = f;
        unsigned long v = 0;
        if (optional_id("shared:", f, &v))
            e->shared = v;
        else if (optional_id("master:", f, &v))
            e->master = v;
        else if (strncmp(f, "shared:", 7) == 0 || strncmp(f, "master:", 7) == 0)
            return false;
    }
    if (f == NULL || bad)
        return false;
    /* The source may be empty: mount(2) with "" as its device name. */
    char *fstype = field(&cur, &bad);
    char *source = field_may_be_empty(&cur, &bad, true);
    char *super = field(&cur, &bad);
    if (bad || super == NULL || cur != NULL)
        return false;
    if (!bh_mountinfo_unescape(root) || !bh_mountinfo_unescape(point) ||
        !bh_mountinfo_unescape(fstype) || !bh_mountinfo_unescape(source) || !well_escaped(opts) ||
        !well_escaped(super) || point[0] != '/')
        return false;
    for (size_t i = 0; i < n; i++)
        if (!well_escaped(mi->optional[i]))
            return false;
    e->root = root;
    e->point = point;
    e->options = opts;
    e->optional = mi->optional;
    e->n_optional = n;
    e->fstype = fstype;
    e->source = source;
    e->super_options = super;
    return true;
}

int bh_mountinfo_next(struct bh_mountinfo *mi, struct bh_mount_entry *e, struct bh_error *err)
{
    errno = 0;
    ssize_t len = getline(&mi->line, &mi->cap, mi->f);
    if (len < 0) {
        if (ferror(mi->f) || (errno != 0 && errno != EINVAL))
            return bh_error_errno(err, errno ? errno : EIO, "read /proc/self/mountinfo");
        return 0;
    }
    mi->line_no++;
    if ((size_t)len != strlen(mi->line))
        return bh_error_set(err, EPROTO, "line %lu of /proc/self/mountinfo holds a NUL byte",
                            mi->line_no);
    if (len == 0 || mi->line[len - 1] != '\n')
        return bh_error_set(err, EPROTO,
                            "line %lu of /proc/self/mountinfo ends without a newline (cut short)",
                            mi->line_no);
    mi->line[len - 1] = '\0';
    bool oom = false;
    if (!parse_line(mi, mi->line, e, err, &oom))
        return oom ? -1
                   : bh_error_set(err, EPROTO,
                                  "line %lu of /proc/self/mountinfo does not have the shape "
                                  "proc(5) gives it; refused rather than skipped",
                                  mi->line_no);
    return 1;
}

bool bh_mountinfo_has_option(const char *list, const char *name)
{
    size_t l = strlen(name);
    for (const char *p = list; p != NULL && *p;) {
        const char *comma = strchr(p, ',');
        size_t n = comma ? (size_t)(comma - p) : strlen(p);
        if (n == l && strncmp(p, name, l) == 0)
            return true;
        p = comma ? comma + 1 : NULL;
    }
    return false;
}
