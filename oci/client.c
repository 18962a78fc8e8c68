/* `bulkhead session open|run|close|list|stats` and `bulkhead describe`: a
 * shell user's client of bulkheadd's control socket. Each command sends one
 * Request frame and prints the Response as JSON (field names as in
 * proto/control.proto), so scripts can read it with jq. Exit status: 0
 * for an answer, 1 for an error answer, 125 when nothing could be asked. */
#include <errno.h>
#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "cleanup.h"
#include "cli.h"
#include "control.pb-c.h"
#include "frame.h"
#include "text.h"

#define DEFAULT_SOCKET "/run/bulkhead/bulkheadd.sock"
#define CLIENT_MAX_FRAME (64u * 1024 * 1024)

/* ---- protobuf to JSON, by descriptor ------------------------------------ */

static json_t *msg_to_json(const ProtobufCMessage *m);

static json_t *field_value(const ProtobufCFieldDescriptor *f, const void *p)
{
    switch (f->type) {
    case PROTOBUF_C_TYPE_BOOL:
        return json_boolean(*(const protobuf_c_boolean *)p);
    case PROTOBUF_C_TYPE_INT32:
    case PROTOBUF_C_TYPE_SINT32:
    case PROTOBUF_C_TYPE_SFIXED32:
        return json_integer(*(const int32_t *)p);
    case PROTOBUF_C_TYPE_UINT32:
    case PROTOBUF_C_TYPE_FIXED32:
        return json_integer(*(const uint32_t *)p);
    case PROTOBUF_C_TYPE_INT64:
    case PROTOBUF_C_TYPE_SINT64:
    case PROTOBUF_C_TYPE_SFIXED64:
        return json_integer(*(const int64_t *)p);
    case PROTOBUF_C_TYPE_UINT64:
    case PROTOBUF_C_TYPE_FIXED64:
        return json_integer((json_int_t) * (const uint64_t *)p);
    case PROTOBUF_C_TYPE_ENUM: {
        const ProtobufCEnumValue *v = protobuf_c_enum_descriptor_get_value(
            (const ProtobufCEnumDescriptor *)f->descriptor, *(const int *)p);
        if (v == NULL)
            return json_integer(*(const int *)p);
        /* lower-case names, as the design speaks of them (not_found, idle) */
        char name[64];
        size_t i = 0;
        for (; i < sizeof(name) - 1 && v->name[i]; i++)
            name[i] = (char)(v->name[i] >= 'A' && v->name[i] <= 'Z' ? v->name[i] + 32 : v->name[i]);
        name[i] = '\0';
        return json_string(name);
    }
    case PROTOBUF_C_TYPE_STRING: {
        const char *s = *(char *const *)p;
        return json_string(s ? s : "");
    }
    case PROTOBUF_C_TYPE_BYTES: {
        /* base64, so binary (PNG) survives JSON */
        const ProtobufCBinaryData *b = p;
        static const char tbl[] =
            "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
        char *out = malloc(b->len / 3 * 4 + 5);
        size_t o = 0;
        for (size_t i = 0; i < b->len; i += 3) {
            uint32_t v = (uint32_t)b->data[i] << 16;
            if (i + 1 < b->len)
                v |= (uint32_t)b->data[i + 1] << 8;
            if (i + 2 < b->len)
                v |= b->data[i + 2];
            out[o++] = tbl[(v >> 18) & 63];
            out[o++] = tbl[(v >> 12) & 63];
            out[o++] = i + 1 < b->len ? tbl[(v >> 6) & 63] : '=';
            out[o++] = i + 2 < b->len ? tbl[v & 63] : '=';
        }
        out[o] = '\0';
        json_t *j = json_string(out);
        free(out);
        return j;
    }
    case PROTOBUF_C_TYPE_MESSAGE: {
        const ProtobufCMessage *sub = *(ProtobufCMessage *const *)p;
        return sub ? msg_to_json(sub) : json_null();
    }
    default:
        return json_null();
    }
}

static size_t field_size(const ProtobufCFieldDescriptor *f)
{
    switch (f->type) {
    case PROTOBUF_C_TYPE_BOOL:
        return sizeof(protobuf_c_boolean);
    case PROTOBUF_C_TYPE_INT64:
    case PROTOBUF_C_TYPE_SINT64:
    case PROTOBUF_C_TYPE_SFIXED64:
    case PROTOBUF_C_TYPE_UINT64:
    case PROTOBUF_C_TYPE_FIXED64:
    case PROTOBUF_C_TYPE_DOUBLE:
        return 8;
    case PROTOBUF_C_TYPE_STRING:
    case PROTOBUF_C_TYPE_MESSAGE:
        return sizeof(void *);
    case PROTOBUF_C_TYPE_BYTES:
        return sizeof(ProtobufCBinaryData);
    default:
        return 4;
    }
}

static json_t *msg_to_json(const ProtobufCMessage *m)
{
    json_t *o = json_object();
    const ProtobufCMessageDescriptor *d = m->descriptor;
    for (unsigned i = 0; i < d->n_fields; i++) {
        const ProtobufCFieldDescriptor *f = &d->fields[i];
        const char *base = (const char *)m;
        if (f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) {
            uint32_t which = *(const uint32_t *)(base + f->quantifier_offset);
            if (which != f->id)
                continue;
        }
        if (f->label == PROTOBUF_C_LABEL_REPEATED) {
            size_t n = *(const size_t *)(base + f->quantifier_offset);
            const char *arr = *(char *const *)(base + f->offset);
            json_t *a = json_array();
            for (size_t k = 0; k < n; k++)
                json_array_append_new(a, field_value(f, arr + k * field_size(f)));
            json_object_set_new(o, f->name, a);
        } else {
            json_object_set_new(o, f->name, field_value(f, base + f->offset));
        }
    }
    return o;
}

/* ---- the call ------------------------------------------------------------ */

/* Sends req, prints the answer; returns the exit status. */
static int call(const struct cli_globals *g, const char *path, Bulkhead__Control__Request *req)
{
    struct bh_error err = {0};
    req->version = 1;
    req->request_id = (uint64_t)getpid();
    cleanup_close int fd = bh_control_connect(path, " (is it running? --socket)", &err);
    if (fd < 0) {
        cli_report_error(g, "%s", err.msg);
        return CLI_EXIT_REFUSED;
    }
    size_t len = bulkhead__control__request__get_packed_size(req);
    cleanup_free uint8_t *buf = malloc(len + 1);
    bulkhead__control__request__pack(req, buf);
    if (bh_frame_write(fd, buf, len, &err) < 0) {
        cli_report_error(g, "send the request: %s", err.msg);
        return CLI_EXIT_REFUSED;
    }
    cleanup_free void *ans = NULL;
    size_t alen;
    int rc = bh_frame_read(fd, CLIENT_MAX_FRAME, -1, &ans, &alen, &err);
    if (rc <= 0) {
        cli_report_error(g, "read the answer: %s",
                         rc == 0 ? "bulkheadd closed the connection" : err.msg);
        return CLI_EXIT_REFUSED;
    }
    Bulkhead__Control__Response *resp =
        bulkhead__control__response__unpack(NULL, alen, (const uint8_t *)ans);
    if (resp == NULL) {
        cli_report_error(g, "the answer is not a Response message");
        return CLI_EXIT_REFUSED;
    }
    json_t *j = msg_to_json(&resp->base);
    json_dumpf(j, stdout, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    fputc('\n', stdout);
    json_decref(j);
    int status = resp->body_case == BULKHEAD__CONTROL__RESPONSE__BODY_ERROR ? 1 : 0;
    bulkhead__control__response__free_unpacked(resp, NULL);
    return status;
}

static char *slurp(const char *path, struct bh_error *err)
{
    FILE *f = strcmp(path, "-") == 0 ? stdin : fopen(path, "re");
    if (f == NULL)
        return bh_error_errno(err, errno, "read `%s`", path), NULL;
    size_t len = 0;
    char *buf = bh_read_stream(f, &len);
    int e = errno;
    if (f != stdin)
        fclose(f);
    if (buf == NULL)
        return bh_error_errno(err, e, "read `%s`", path), NULL;
    if (memchr(buf, '\0', len) != NULL) {
        free(buf);
        return bh_error_set(err, EINVAL, "`%s` holds a NUL byte: only text is sent", path), NULL;
    }
    return buf;
}

static const char *default_socket(void)
{
    const char *e = getenv("BULKHEADD_SOCKET");
    return e ? e : DEFAULT_SOCKET;
}

static void session_usage(FILE *out)
{
    fprintf(
        out,
        "usage: bulkhead session open  [--socket S] --owner O [--conversation C] [--min-tier T]\n"
        "                              [--lifetime MS] [--idle MS]\n"
        "       bulkhead session run   [--socket S] ID --lang python|javascript (-c CODE | FILE)\n"
        "                              [--file PATH=LOCAL]... [--timeout SECONDS]\n"
        "       bulkhead session close [--socket S] ID\n"
        "       bulkhead session list  [--socket S] --owner O\n"
        "       bulkhead session stats [--socket S]\n"
        "The socket defaults to $BULKHEADD_SOCKET, then " DEFAULT_SOCKET ".\n");
}

static int parse_u64(const char *s, uint64_t *v)
{
    char *end;
    errno = 0;
    unsigned long long n = strtoull(s, &end, 10);
    if (errno || end == s || *end || s[0] == '-')
        return -1;
    *v = n;
    return 0;
}

/* `bulkhead session SUB` with its flags parsed; rest are the operands. */
struct session_args {
    const char *sub;
    const char *sock, *owner, *conv, *tier, *lang, *code;
    uint64_t lifetime, idle;
    double timeout_s;
    char **file_args; /* --file PATH=LOCAL, in order */
    size_t n_file_args;
    char **rest;
    int n_rest;
};

/* Fills a from argv; 0 to go on, 1 when --help was answered, -1 when refused
 * (said on stderr). a->file_args is the caller's to free. */
static int session_parse_args(const struct cli_globals *g, int argc, char **argv,
                              struct session_args *a)
{
    *a = (struct session_args){.sub = argv[1], .sock = default_socket(), .conv = "", .tier = ""};
    a->file_args = calloc((size_t)argc + 1, sizeof(char *));
    if (a->file_args == NULL) {
        cli_report_error(g, "session: out of memory");
        return -1;
    }
    static const struct option opts[] = {
        {"socket", required_argument, NULL, 's'},
        {"owner", required_argument, NULL, 'o'},
        {"conversation", required_argument, NULL, 'C'},
        {"min-tier", required_argument, NULL, 'T'},
        {"lifetime", required_argument, NULL, 'L'},
        {"idle", required_argument, NULL, 'I'},
        {"lang", required_argument, NULL, 'l'},
        {"timeout", required_argument, NULL, 't'},
        {"file", required_argument, NULL, 'f'},
        {"help", no_argument, NULL, 'h'},
        {0},
    };
    optind = 2;
    opterr = 0;
    int c;
    while ((c = getopt_long(argc, argv, "c:h", opts, NULL)) != -1) {
        switch (c) {
        case 's':
            a->sock = optarg;
            break;
        case 'o':
            a->owner = optarg;
            break;
        case 'C':
            a->conv = optarg;
            break;
        case 'T':
            a->tier = optarg;
            break;
        case 'L':
        case 'I':
            if (parse_u64(optarg, c == 'L' ? &a->lifetime : &a->idle) < 0) {
                cli_report_error(g, "--%s `%s` is not a number of milliseconds",
                                 c == 'L' ? "lifetime" : "idle", optarg);
                return -1;
            }
            break;
        case 'l':
            a->lang = optarg;
            break;
        case 'c':
            a->code = optarg;
            break;
        case 't': {
            char *end;
            a->timeout_s = strtod(optarg, &end);
            if (*end || end == optarg || a->timeout_s <= 0 || a->timeout_s > 86400) {
                cli_report_error(g, "--timeout `%s` is not a number of seconds (0 to 86400)",
                                 optarg);
                return -1;
            }
            break;
        }
        case 'f':
            a->file_args[a->n_file_args++] = optarg;
            break;
        case 'h':
            session_usage(stdout);
            return 1;
        default:
            cli_report_error(g, "session %s: unknown or incomplete option `%s`", a->sub,
                             argv[optind - 1]);
            return -1;
        }
    }
    a->rest = argv + optind;
    a->n_rest = argc - optind;
    return 0;
}

static int session_open(const struct cli_globals *g, const struct session_args *a)
{
    if (a->owner == NULL) {
        cli_report_error(g, "session open: --owner is required");
        return CLI_EXIT_REFUSED;
    }
    Bulkhead__Control__Request req = BULKHEAD__CONTROL__REQUEST__INIT;
    Bulkhead__Control__OpenSession o = BULKHEAD__CONTROL__OPEN_SESSION__INIT;
    o.owner = (char *)a->owner;
    o.conversation = (char *)a->conv;
    o.minimum_isolation = (char *)a->tier;
    o.lifetime_ms = a->lifetime;
    o.idle_timeout_ms = a->idle;
    req.body_case = BULKHEAD__CONTROL__REQUEST__BODY_OPEN_SESSION;
    req.open_session = &o;
    return call(g, a->sock, &req);
}

/* The --file arguments read into files (fptrs points at each); false when
 * one is refused (said on stderr). */
static bool session_read_files(const struct cli_globals *g, const struct session_args *a,
                               Bulkhead__Control__File *files, Bulkhead__Control__File **fptrs)
{
    struct bh_error err = {0};
    for (size_t i = 0; i < a->n_file_args; i++) {
        bulkhead__control__file__init(&files[i]);
        char *eq = strchr(a->file_args[i], '=');
        if (eq == NULL) {
            cli_report_error(g, "--file `%s`: give PATH=LOCAL", a->file_args[i]);
            return false;
        }
        *eq = '\0';
        files[i].path = a->file_args[i];
        files[i].content = slurp(eq + 1, &err);
        if (files[i].content == NULL) {
            cli_report_error(g, "--file: %s", err.msg);
            return false;
        }
        fptrs[i] = &files[i];
    }
    return true;
}

static int session_run(const struct cli_globals *g, const struct session_args *a)
{
    if (a->n_rest < 1 || a->lang == NULL) {
        cli_report_error(g, "session run: give the session ID and --lang");
        return CLI_EXIT_REFUSED;
    }
    const char *id = a->rest[0];
    const char *code = a->code;
    cleanup_free char *text = NULL;
    if (code == NULL) {
        if (a->n_rest < 2) {
            cli_report_error(g, "session run: give -c CODE or a FILE (- for stdin)");
            return CLI_EXIT_REFUSED;
        }
        struct bh_error err = {0};
        text = slurp(a->rest[1], &err);
        if (text == NULL) {
            cli_report_error(g, "session run: %s", err.msg);
            return CLI_EXIT_REFUSED;
        }
        code = text;
    }
    cleanup_free Bulkhead__Control__File *files = calloc(a->n_file_args + 1, sizeof(*files));
    cleanup_free Bulkhead__Control__File **fptrs = calloc(a->n_file_args + 1, sizeof(*fptrs));
    if (files == NULL || fptrs == NULL) {
        cli_report_error(g, "session run: out of memory");
        return CLI_EXIT_REFUSED;
    }
    int status = CLI_EXIT_REFUSED;
    if (session_read_files(g, a, files, fptrs)) {
        Bulkhead__Control__Request req = BULKHEAD__CONTROL__REQUEST__INIT;
        Bulkhead__Control__RunCell r = BULKHEAD__CONTROL__RUN_CELL__INIT;
        r.session_id = (char *)id;
        r.language = (char *)a->lang;
        r.code = (char *)code;
        r.files = fptrs;
        r.n_files = a->n_file_args;
        r.timeout_ms = (uint64_t)(a->timeout_s * 1000);
        req.body_case = BULKHEAD__CONTROL__REQUEST__BODY_RUN_CELL;
        req.run_cell = &r;
        status = call(g, a->sock, &req);
    }
    for (size_t i = 0; i < a->n_file_args; i++)
        if (files[i].content != protobuf_c_empty_string)
            free(files[i].content);
    return status;
}

static int session_close(const struct cli_globals *g, const struct session_args *a)
{
    if (a->n_rest < 1) {
        cli_report_error(g, "session close: give the session ID");
        return CLI_EXIT_REFUSED;
    }
    Bulkhead__Control__Request req = BULKHEAD__CONTROL__REQUEST__INIT;
    Bulkhead__Control__CloseSession cs = BULKHEAD__CONTROL__CLOSE_SESSION__INIT;
    cs.session_id = a->rest[0];
    req.body_case = BULKHEAD__CONTROL__REQUEST__BODY_CLOSE_SESSION;
    req.close_session = &cs;
    return call(g, a->sock, &req);
}

static int session_list(const struct cli_globals *g, const struct session_args *a)
{
    if (a->owner == NULL) {
        cli_report_error(g, "session list: --owner is required");
        return CLI_EXIT_REFUSED;
    }
    Bulkhead__Control__Request req = BULKHEAD__CONTROL__REQUEST__INIT;
    Bulkhead__Control__ListSessions ls = BULKHEAD__CONTROL__LIST_SESSIONS__INIT;
    ls.owner = (char *)a->owner;
    req.body_case = BULKHEAD__CONTROL__REQUEST__BODY_LIST_SESSIONS;
    req.list_sessions = &ls;
    return call(g, a->sock, &req);
}

static int session_stats(const struct cli_globals *g, const struct session_args *a)
{
    Bulkhead__Control__Request req = BULKHEAD__CONTROL__REQUEST__INIT;
    Bulkhead__Control__Stats st = BULKHEAD__CONTROL__STATS__INIT;
    req.body_case = BULKHEAD__CONTROL__REQUEST__BODY_STATS;
    req.stats = &st;
    return call(g, a->sock, &req);
}

static const struct {
    const char *name;
    int (*run)(const struct cli_globals *g, const struct session_args *a);
} session_commands[] = {
    {"open", session_open}, {"run", session_run},     {"close", session_close},
    {"list", session_list}, {"stats", session_stats},
};

int cmd_session(const struct cli_globals *g, int argc, char **argv)
{
    if (argc < 2 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
        session_usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? CLI_EXIT_REFUSED : 0;
    }
    struct session_args a;
    int r = session_parse_args(g, argc, argv, &a);
    int status = r > 0 ? 0 : CLI_EXIT_REFUSED;
    if (r == 0) {
        size_t i = 0;
        while (i < BH_ARRAY_SIZE(session_commands) && strcmp(session_commands[i].name, a.sub) != 0)
            i++;
        if (i < BH_ARRAY_SIZE(session_commands))
            status = session_commands[i].run(g, &a);
        else
            cli_report_error(g, "session: unknown subcommand `%s` (open, run, close, list, stats)",
                             a.sub);
    }
    free(a.file_args);
    return status;
}

int cmd_describe(const struct cli_globals *g, int argc, char **argv)
{
    const char *sock = default_socket();
    static const struct option opts[] = {
        {"socket", required_argument, NULL, 's'}, {"help", no_argument, NULL, 'h'}, {0}};
    optind = 1;
    opterr = 0;
    int c;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        if (c == 's') {
            sock = optarg;
        } else if (c == 'h') {
            printf("usage: bulkhead describe [--socket S]\n"
                   "Prints bulkheadd's verified tier with every check, the languages it\n"
                   "proved at start, its limits, and whether it keeps sessions.\n");
            return 0;
        } else {
            cli_report_error(g, "describe: unknown or incomplete option `%s`", argv[optind - 1]);
            return CLI_EXIT_REFUSED;
        }
    }
    Bulkhead__Control__Request req = BULKHEAD__CONTROL__REQUEST__INIT;
    Bulkhead__Control__Describe d = BULKHEAD__CONTROL__DESCRIBE__INIT;
    req.body_case = BULKHEAD__CONTROL__REQUEST__BODY_DESCRIBE;
    req.describe = &d;
    return call(g, sock, &req);
}
