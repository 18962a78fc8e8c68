/* The one reader of /proc/PID/mountinfo: a line at a time, every field
 * split and the paths unescaped, failing closed on what it cannot read. */
#ifndef BH_MOUNTINFO_H
#define BH_MOUNTINFO_H

#include <stdbool.h>
#include <stdio.h>

#include "error.h"

/* One line. The strings point into the reader's buffer: valid until the next
 * bh_mountinfo_next or bh_mountinfo_close. root, point, fstype and source are
 * unescaped (the kernel writes space, tab, newline and backslash as \ooo);
 * options and super_options stay as the kernel wrote them, because an
 * unescaped ',' there would split an item (overlay's lowerdir) in two. */
struct bh_mount_entry {
    unsigned long id, parent;
    unsigned major, minor;
    const char *root;            /* the mount's root within its filesystem */
    const char *point;           /* where it is mounted, in the reader's root */
    const char *options;         /* per-mount: "rw,nosuid,relatime" */
    const char *const *optional; /* "shared:N", "master:N", ...: n_optional of them */
    size_t n_optional;
    unsigned long shared; /* peer group id, 0: none */
    unsigned long master; /* master's peer group id, 0: none */
    const char *fstype;
    const char *source;
    const char *super_options;
};

struct bh_mountinfo {
    FILE *f;
    bool own; /* f was opened here and is closed here */
    char *line;
    size_t cap;
    const char **optional;
    size_t optional_cap;
    unsigned long line_no;
};

/* Opens /proc/self/mountinfo. */
int bh_mountinfo_open(struct bh_mountinfo *mi, struct bh_error *err);
/* Reads f (not closed by bh_mountinfo_close): tests, other processes'. */
void bh_mountinfo_from(struct bh_mountinfo *mi, FILE *f);
/* 1: *e holds the next line; 0: the end; -1: err says which line cannot be
 * read and why (a reader that skipped it could miss the mount that matters). */
int bh_mountinfo_next(struct bh_mountinfo *mi, struct bh_mount_entry *e, struct bh_error *err);
void bh_mountinfo_close(struct bh_mountinfo *mi);

/* Undoes the kernel's \ooo in place (an item of options, super_options).
 * Anything else after a backslash, and \000 (no path holds a NUL), cannot
 * come from the kernel: false. */
bool bh_mountinfo_unescape(char *s);

/* Whether a comma list as mountinfo writes it (options, super_options)
 * holds the item `name` exactly. */
bool bh_mountinfo_has_option(const char *list, const char *name);

#endif
