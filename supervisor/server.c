/* Sessions and the control protocol: one thread per connection reads frames,
 * checks the version before anything else, dispatches, and answers. Sessions
 * live in one table under one lock; a call holds its session with a ticket
 * (one call at a time, in arrival order) and runs without the lock. A
 * maintenance thread ends idle and expired sessions, keeps the warm pool
 * full and reaps keepers. Session ids are capabilities: they are compared,
 * never logged; ended sessions are remembered by fingerprint only. */
#include <errno.h>
#include <jansson.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <fcntl.h>
#include <dirent.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "alloc.h"
#include "bulkheadd.h"
#include "cleanup.h"
#include "frame.h"
#include "sha256.h"

#define MAX_TOMBSTONES 4096
#define MAX_FILES 200
#define MAX_FILES_BYTES (4u * 1024 * 1024)
#define MAX_PATH_BYTES 4096
#define MAX_OWNER_BYTES 256

struct session {
    char id[33];
    char fp[BH_SHA256_HEX];
    char owner[MAX_OWNER_BYTES + 1];
    char owner_fp[BH_SHA256_HEX];
    char *conversation;
    uid_t uid;
    struct bhd_box *box;
    enum bh_tier tier;
    int64_t opened_unix, opened_ms, last_used_ms, expires_ms, idle_ms;
    uint64_t calls;
    char last_digest[BH_SHA256_HEX];
    bool fresh_sandbox_pending;
    /* in-order, one-at-a-time calls */
    uint64_t ticket_next, ticket_serving;
    int in_flight; /* holders and waiters */
    int refs;
    bool ended;
    int ended_reason;
    bool handover_cut; /* its cell was cut by a hand-over: it may have run */
    struct session *next;
};

struct tombstone {
    char fp[BH_SHA256_HEX];
    uid_t uid;
    int reason;
};

struct warm {
    struct bhd_box *box;
    struct warm *next;
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cond = PTHREAD_COND_INITIALIZER;
static struct session *sessions;
static struct warm *warm_pool;
static int warm_count, warm_creating;
static struct tombstone tombs[MAX_TOMBSTONES];
static size_t tomb_next;
static struct {
    uint64_t calls, opened, closed, evicted, timed_out, errors;
} stats;
static int64_t started_ms;
static FILE *audit;
static bool shutting_down;
/* A hand-over is under way: no new call starts; see bhd_handover_sessions. */
static bool handing_over;
static atomic_int active_requests;
/* The connections being served (lock held), so that the end of a hand-over
 * can stop what they read: see connections_stop_reading. */
/* Registered connections: whose, and since when each waits for a request
 * (0: a request is being read or answered). */
struct live_conn {
    int fd;
    uid_t uid;
    int64_t idle_since;
    bool evicted; /* its reading side was shut to make room for another uid */
};
static struct live_conn *live_conns;
static size_t n_live_conns, cap_live_conns;
static long n_evicted_conns; /* evicted, not yet closed */
static bool conns_stopped;
static int state_fd = -1;
static uint32_t n_adopted, n_adopted_fresh;
static int n_owner_calls_max = 64;
struct owner_calls {
    char fp[BH_SHA256_HEX];
    uid_t uid;
    int n;
};
static struct owner_calls owner_calls[1024];

static void audit_line(json_t *obj)
{
    char *text = json_dumps(obj, JSON_COMPACT);
    json_decref(obj);
    if (text == NULL)
        return;
    pthread_mutex_lock(&bhd_output_lock);
    fprintf(audit, "%s\n", text);
    fflush(audit);
    pthread_mutex_unlock(&bhd_output_lock);
    free(text);
}

int bhd_server_init(struct bh_error *err)
{
    started_ms = bh_now_ms();
    if (bhd_cfg.audit_path == NULL || strcmp(bhd_cfg.audit_path, "-") == 0) {
        audit = stderr;
    } else {
        audit = fopen(bhd_cfg.audit_path, "ae");
        if (audit == NULL)
            return bh_error_errno(err, errno, "open the audit log `%s`", bhd_cfg.audit_path);
    }
    n_owner_calls_max = (int)bhd_cfg.owner_calls;
    return 0;
}

/* ---- responses ----------------------------------------------------------- */

static const char *const ended_names[] = {
    [BULKHEAD__CONTROL__ERROR__ENDED__IDLE] = "idle",
    [BULKHEAD__CONTROL__ERROR__ENDED__LIFETIME] = "lifetime",
    [BULKHEAD__CONTROL__ERROR__ENDED__CLOSED] = "closed",
    [BULKHEAD__CONTROL__ERROR__ENDED__EVICTED] = "evicted",
    [BULKHEAD__CONTROL__ERROR__ENDED__DISK_BUDGET] = "disk_budget",
    [BULKHEAD__CONTROL__ERROR__ENDED__SANDBOX_DIED] = "sandbox_died",
    [BULKHEAD__CONTROL__ERROR__ENDED__SHUTDOWN] = "shutdown",
};

static const char *ended_name(int reason)
{
    if (reason <= 0 || (size_t)reason >= BH_ARRAY_SIZE(ended_names) || !ended_names[reason])
        return "unknown";
    return ended_names[reason];
}

/* An error response; message is copied. */
static void set_error(Bulkhead__Control__Response *resp, Bulkhead__Control__Error__Code code,
                      bool not_dispatched, int reason, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
static void set_error(Bulkhead__Control__Response *resp, Bulkhead__Control__Error__Code code,
                      bool not_dispatched, int reason, const char *fmt, ...)
{
    Bulkhead__Control__Error *e = bhd_xcalloc(1, sizeof(*e));
    bulkhead__control__error__init(e);
    e->code = code;
    e->retryable = code == BULKHEAD__CONTROL__ERROR__CODE__AT_CAPACITY;
    e->not_dispatched = not_dispatched;
    e->ended_reason = reason;
    va_list ap;
    va_start(ap, fmt);
    char *msg = NULL;
    if (vasprintf(&msg, fmt, ap) < 0)
        msg = NULL;
    va_end(ap);
    e->message = msg ? bhd_utf8_sanitize(msg, strlen(msg), NULL) : bhd_xstrdup("error");
    free(msg);
    resp->body_case = BULKHEAD__CONTROL__RESPONSE__BODY_ERROR;
    resp->error = e;
    pthread_mutex_lock(&lock);
    stats.errors++;
    pthread_mutex_unlock(&lock);
}

/* Frees what the dispatcher allocated in a response (every string we set is
 * malloc'd; protobuf_c_empty_string is not). */
static void free_str(char *s)
{
    if (s != NULL && s != protobuf_c_empty_string)
        free(s);
}

static void response_free(Bulkhead__Control__Response *r)
{
    switch (r->body_case) {
    case BULKHEAD__CONTROL__RESPONSE__BODY_ERROR:
        free_str(r->error->message);
        free(r->error);
        break;
    case BULKHEAD__CONTROL__RESPONSE__BODY_OPEN_SESSION:
        free_str(r->open_session->session_id);
        free_str(r->open_session->fingerprint);
        free_str(r->open_session->tier);
        free_str(r->open_session->last_record_digest);
        free(r->open_session);
        break;
    case BULKHEAD__CONTROL__RESPONSE__BODY_RUN_CELL: {
        Bulkhead__Control__CellResult *c = r->run_cell;
        free_str(c->stdout);
        free_str(c->stderr);
        free_str(c->value);
        free_str(c->tier);
        for (size_t i = 0; i < c->n_limits_hit; i++)
            free(c->limits_hit[i]);
        free(c->limits_hit);
        if (c->record) {
            free_str(c->record->language);
            free_str(c->record->previous_digest);
            free_str(c->record->digest);
            free(c->record);
        }
        for (size_t i = 0; i < c->n_images; i++) {
            free(c->images[i]->data.data);
            free(c->images[i]);
        }
        free(c->images);
        free(c);
        break;
    }
    case BULKHEAD__CONTROL__RESPONSE__BODY_CLOSE_SESSION:
        free_str(r->close_session->last_record_digest);
        free(r->close_session);
        break;
    case BULKHEAD__CONTROL__RESPONSE__BODY_LIST_SESSIONS:
        for (size_t i = 0; i < r->list_sessions->n_sessions; i++) {
            free_str(r->list_sessions->sessions[i]->fingerprint);
            free_str(r->list_sessions->sessions[i]->conversation);
            free(r->list_sessions->sessions[i]);
        }
        free(r->list_sessions->sessions);
        free(r->list_sessions);
        break;
    case BULKHEAD__CONTROL__RESPONSE__BODY_STATS:
        free(r->stats);
        break;
    case BULKHEAD__CONTROL__RESPONSE__BODY_DESCRIBE:
        /* the describe result is shared and static */
        break;
    default:
        break;
    }
}

/* ---- sessions ------------------------------------------------------------ */

static void owner_digest(const char *owner, uid_t uid, char out[BH_SHA256_HEX])
{
    char buf[MAX_OWNER_BYTES + 32];
    int n = snprintf(buf, sizeof(buf), "%u:%s", (unsigned)uid, owner);
    bh_sha256_hex(buf, (size_t)n, out);
}

static void tomb_add(const struct session *s, int reason)
{
    struct tombstone *t = &tombs[tomb_next++ % MAX_TOMBSTONES];
    memcpy(t->fp, s->fp, sizeof(t->fp));
    t->uid = s->uid;
    t->reason = reason;
}

static int tomb_find(const char *fp, uid_t uid)
{
    for (size_t i = 0; i < MAX_TOMBSTONES; i++)
        if (tombs[i].reason != 0 && tombs[i].uid == uid && strcmp(tombs[i].fp, fp) == 0)
            return tombs[i].reason;
    return 0;
}

/* Answers a call on a session not in the table: ended (saying why, between
 * ended and then) or never there. Called with lock held; releases it. */
static void refuse_missing_unlock(const char *id, uid_t uid, const char *ended, const char *then,
                                  Bulkhead__Control__Response *resp)
{
    char fp[BH_SHA256_HEX];
    bh_sha256_hex(id, strlen(id), fp);
    int reason = tomb_find(fp, uid);
    pthread_mutex_unlock(&lock);
    if (reason)
        set_error(resp, BULKHEAD__CONTROL__ERROR__CODE__SESSION_ENDED, true, reason, "%s (%s)%s",
                  ended, ended_name(reason), then);
    else
        set_error(resp, BULKHEAD__CONTROL__ERROR__CODE__NOT_FOUND, true, 0, "no such session");
}

/* Unlinks s and remembers why (lock held). The box is destroyed by the
 * caller outside the lock, when the last reference goes. */
static void session_end_locked(struct session *s, int reason)
{
    if (s->ended)
        return;
    s->ended = true;
    s->ended_reason = reason;
    for (struct session **p = &sessions; *p; p = &(*p)->next) {
        if (*p == s) {
            *p = s->next;
            break;
        }
    }
    tomb_add(s, reason);
    if (reason == BULKHEAD__CONTROL__ERROR__ENDED__EVICTED)
        stats.evicted++;
    stats.closed++;
    audit_line(json_pack("{s:s, s:s, s:s, s:s, s:I}", "event", "session_end", "owner", s->owner_fp,
                         "session", s->fp, "why", ended_name(reason), "calls",
                         (json_int_t)s->calls));
}

static void unlink_record(const char *fp);

static void session_put(struct session *s)
{
    pthread_mutex_lock(&lock);
    bool last = --s->refs == 0;
    pthread_mutex_unlock(&lock);
    if (!last)
        return;
    bool had_box = s->box != NULL;
    pthread_mutex_lock(&lock);
    bool leave = handing_over && !s->ended;
    pthread_mutex_unlock(&lock);
    if (leave) {
        /* a live session in a hand-over: its sandbox stays with its keeper */
        bhd_box_release(s->box);
        free(s->conversation);
        explicit_bzero(s->id, sizeof(s->id));
        free(s);
        return;
    }
    bhd_box_destroy(s->box);
    /* its keeper has gone: a record it could not remove (it was killed)
     * must not bring the ended session back in the next daemon */
    if (state_fd >= 0 && had_box)
        unlink_record(s->fp);
    free(s->conversation);
    explicit_bzero(s->id, sizeof(s->id));
    free(s);
}

/* Finds a live session by id for uid (lock held); takes a reference. By
 * fingerprint: an adopted session's id is known only by its hash. */
static struct session *session_get_locked(const char *id, uid_t uid)
{
    if (strlen(id) != 32)
        return NULL;
    char fp[BH_SHA256_HEX];
    bh_sha256_hex(id, 32, fp);
    for (struct session *s = sessions; s; s = s->next) {
        if (s->uid == uid && strcmp(s->fp, fp) == 0) {
            s->refs++;
            return s;
        }
    }
    return NULL;
}

/* What the keeper holds for the next daemon (lock held): everything but the
 * id, which is a capability and never leaves this process. */
static json_t *session_record_locked(const struct session *s, bool busy)
{
    return json_pack("{s:s, s:s, s:s, s:I, s:s, s:I, s:I, s:I, s:I, s:I, s:I, s:s, s:b, s:b, s:s}",
                     "fp", s->fp, "owner", s->owner, "owner_fp", s->owner_fp, "uid",
                     (json_int_t)s->uid, "conversation", s->conversation, "opened_unix",
                     (json_int_t)s->opened_unix, "opened_ms", (json_int_t)s->opened_ms,
                     "last_used_ms", (json_int_t)s->last_used_ms, "expires_ms",
                     (json_int_t)s->expires_ms, "idle_ms", (json_int_t)s->idle_ms, "calls",
                     (json_int_t)s->calls, "last_digest", s->last_digest, "fresh_pending",
                     s->fresh_sandbox_pending, "busy", busy, "tier", bh_tier_name(s->tier));
}

static void session_tell(struct session *s, bool busy)
{
    pthread_mutex_lock(&lock);
    json_t *rec = session_record_locked(s, busy);
    pthread_mutex_unlock(&lock);
    if (rec != NULL)
        bhd_box_tell(s->box, 'S', rec);
    json_decref(rec);
}

static struct bhd_box *take_warm_locked(void)
{
    struct warm *w = warm_pool;
    if (w == NULL)
        return NULL;
    warm_pool = w->next;
    warm_count--;
    struct bhd_box *b = w->box;
    free(w);
    pthread_cond_broadcast(&cond);
    return b;
}

/* Interpreters every new box starts before its first cell. */
static const char *bhd_prestart(void)
{
    return bhd_cfg.prestart != NULL ? bhd_cfg.prestart : "python";
}

static bool lang_ok(const char *l)
{
    return strcmp(l, "python") == 0 || strcmp(l, "javascript") == 0;
}

/* ---- procedures ---------------------------------------------------------- */

Bulkhead__Control__DescribeResult bhd_describe;

/* The live session uid's owner holds for conversation, the most recently
 * used one when an old client opened several (lock held); NULL if none. */
static struct session *session_by_key_locked(const char *owner, const char *conversation, uid_t uid)
{
    struct session *best = NULL;
    int64_t now = bh_now_ms();
    /* one the maintenance thread is about to end is not handed out */
    for (struct session *s = sessions; s; s = s->next)
        if (!s->ended && now - s->last_used_ms < s->idle_ms && now < s->expires_ms &&
            s->uid == uid && strcmp(s->owner, owner) == 0 &&
            strcmp(s->conversation, conversation) == 0 &&
            (best == NULL || s->last_used_ms > best->last_used_ms))
            best = s;
    return best;
}

/* Answers OpenSession with s (lock held): reopening a key is a use, so it
 * moves s to the front of the owner's LRU. */
static void answer_reused_locked(struct session *s, int64_t t0, Bulkhead__Control__Response *resp)
{
    s->last_used_ms = bh_now_ms();
    Bulkhead__Control__OpenSessionResult *r = bhd_xcalloc(1, sizeof(*r));
    bulkhead__control__open_session_result__init(r);
    r->session_id = bhd_xstrdup(s->id);
    r->fingerprint = bhd_xstrdup(s->fp);
    r->tier = bhd_xstrdup(bh_tier_name(s->tier));
    r->expires_at_unix_ms = (uint64_t)(s->opened_unix + (s->expires_ms - s->opened_ms));
    r->idle_timeout_ms = (uint64_t)s->idle_ms;
    r->reused = true;
    r->last_record_digest = bhd_xstrdup(s->last_digest);
    r->open_ms = (uint64_t)(bh_now_ms() - t0);
    resp->body_case = BULKHEAD__CONTROL__RESPONSE__BODY_OPEN_SESSION;
    resp->open_session = r;
    audit_line(json_pack("{s:s, s:s, s:s}", "event", "session_reuse", "owner", s->owner_fp,
                         "session", s->fp));
}

/* Why crowding found no session to evict: filled by crowding_victim_locked. */
struct crowding {
    uid_t top;  /* the uid holding the most */
    int most;   /* how many it holds */
    int recent; /* of those, how many had a call within --evict-min-idle */
};

/* At the global cap, the session that makes room for uid (lock held): the
 * least recently used idle session of the uid holding the most, when that
 * uid holds at least two more than uid does. Owners are names a client
 * chooses, so without this one uid naming --max-sessions owners kept every
 * other uid of the socket's group out until its sessions went idle. Only
 * another uid's surplus is taken: one uid's own sessions are never evicted
 * here, and a uid at its fair share keeps all it has. */
static struct session *crowding_victim_locked(uid_t uid, struct crowding *why)
{
    /* counted per uid in one pass: the sessions of uids past the first 64
     * others are not counted, which can only refuse (as before) */
    struct {
        uid_t uid;
        int n;
    } other[64];
    size_t n_other = 0;
    int mine = 0, most = 0;
    uid_t top = uid;
    for (struct session *s = sessions; s; s = s->next) {
        if (s->uid == uid) {
            mine++;
            continue;
        }
        size_t i = 0;
        while (i < n_other && other[i].uid != s->uid)
            i++;
        if (i == n_other) {
            if (n_other == sizeof(other) / sizeof(other[0]))
                continue;
            other[n_other++] = (typeof(other[0])){.uid = s->uid, .n = 0};
        }
        if (++other[i].n > most) {
            most = other[i].n;
            top = s->uid;
        }
    }
    if (top == uid || most < mine + 2)
        return NULL;
    /* A session used a moment ago is someone's work in progress: only one
     * idle for --evict-min-idle may go, so a crowding caller cannot end a
     * session between two calls of its owner. */
    int64_t now = bh_now_ms();
    struct session *victim = NULL;
    for (struct session *s = sessions; s; s = s->next) {
        if (s->uid != top || s->in_flight != 0)
            continue;
        if (now - s->last_used_ms < bhd_cfg.evict_min_idle_ms) {
            why->recent++;
            continue;
        }
        if (victim == NULL || s->last_used_ms < victim->last_used_ms)
            victim = s;
    }
    why->top = top;
    why->most = most;
    /* the list's reference passes to the caller with session_end_locked */
    return victim;
}

static void do_open(Bulkhead__Control__OpenSession *req, uid_t uid,
                    Bulkhead__Control__Response *resp)
{
    int64_t t0 = bh_now_ms();
    size_t olen = strlen(req->owner);
    if (olen == 0 || olen > MAX_OWNER_BYTES || !bhd_utf8_valid(req->owner, olen)) {
        set_error(resp, BULKHEAD__CONTROL__ERROR__CODE__INVALID_REQUEST, true, 0,
                  "owner must be 1 to %d bytes of UTF-8", MAX_OWNER_BYTES);
        return;
    }
    if (strlen(req->conversation) > 1024 ||
        !bhd_utf8_valid(req->conversation, strlen(req->conversation))) {
        set_error(resp, BULKHEAD__CONTROL__ERROR__CODE__INVALID_REQUEST, true, 0,
                  "conversation must be at most 1024 bytes of UTF-8");
        return;
    }
    enum bh_tier floor = BH_TIER_NONE;
    if (req->minimum_isolation[0] != '\0') {
        struct bh_error err = {0};
        if (bh_tier_parse(req->minimum_isolation, &floor, &err) < 0) {
            set_error(resp, BULKHEAD__CONTROL__ERROR__CODE__INVALID_REQUEST, true, 0, "%s",
                      err.msg);
            return;
        }
    }
    if (floor > bhd_cfg.tier) {
        set_error(resp, BULKHEAD__CONTROL__ERROR__CODE__FLOOR_NOT_MET, true, 0,
                  "minimum_isolation `%s` is above this host's verified tier `%s`: nothing ran; "
                  "use a host that verifies `%s` or lower the floor",
                  req->minimum_isolation, bh_tier_name(bhd_cfg.tier), req->minimum_isolation);
        return;
    }
    if (req->reuse && req->conversation[0] == '\0') {
        set_error(resp, BULKHEAD__CONTROL__ERROR__CODE__INVALID_REQUEST, true, 0,
                  "reuse needs a conversation: the session is found by owner + conversation");
        return;
    }
    char ofp[BH_SHA256_HEX];
    owner_digest(req->owner, uid, ofp);

    /* caps: evict this owner's least recently used idle session if needed */
    struct session *victim = NULL;
    pthread_mutex_lock(&lock);
    if (shutting_down) {
        pthread_mutex_unlock(&lock);
        set_error(resp, BULKHEAD__CONTROL__ERROR__CODE__DISABLED, true, 0,
                  "bulkheadd is shutting down");
        return;
    }
    if (handing_over) {
        pthread_mutex_unlock(&lock);
        set_error(resp, BULKHEAD__CONTROL__ERROR__CODE__AT_CAPACITY, true, 0,
                  "bulkheadd is handing its sessions to a new process: nothing was opened; "
                  "retry in a moment");
        return;
    }
    struct session *held =
        req->reuse ? session_by_key_locked(req->owner, req->conversation, uid) : NULL;
    if (held != NULL) {
        answer_reused_locked(held, t0, resp);
        pthread_mutex_unlock(&lock);
        return;
    }
    int mine = 0, all = 0;
    for (struct session *s = sessions; s; s = s->next) {
        all++;
        if (s->uid == uid && strcmp(s->owner, req->owner) == 0) {
            mine++;
            if (s->in_flight == 0 && (victim == NULL || s->last_used_ms < victim->last_used_ms))
                victim = s;
        }
    }
    if (mine >= bhd_cfg.per_owner) {
        if (victim == NULL) {
            pthread_mutex_unlock(&lock);
            set_error(resp, BULKHEAD__CONTROL__ERROR__CODE__AT_CAPACITY, true, 0,
                      "owner has %d sessions, all busy (limit %lld): retry later", mine,
                      (long long)bhd_cfg.per_owner);
            return;
        }
        session_end_locked(victim, BULKHEAD__CONTROL__ERROR__ENDED__EVICTED);
        all--;
    } else {
        victim = NULL;
    }
    struct session *crowd = NULL;
    struct crowding why = {0};
    if (all >= bhd_cfg.max_sessions && victim == NULL) {
        crowd = crowding_victim_locked(uid, &why);
        if (crowd != NULL) {
            session_end_locked(crowd, BULKHEAD__CONTROL__ERROR__ENDED__EVICTED);
            all--;
        }
    }
    if (all >= bhd_cfg.max_sessions) {
        pthread_mutex_unlock(&lock);
        if (victim)
            session_put(victim);
        if (why.recent > 0) {
            /* the caller learns the counts, not who holds them; the log names the uid */
            bhd_log("crowding: uid %u refused at --max-sessions; uid %u holds %d, %d used "
                    "within --evict-min-idle",
                    (unsigned)uid, (unsigned)why.top, why.most, why.recent);
            set_error(resp, BULKHEAD__CONTROL__ERROR__CODE__AT_CAPACITY, true, 0,
                      "bulkheadd has %d sessions (limit --max-sessions %lld); another uid holds "
                      "%d of them, more than its share, but %d of those had a call within the "
                      "last %lld ms (--evict-min-idle) and the rest are busy, so none is "
                      "evicted for you: retry later",
                      all, (long long)bhd_cfg.max_sessions, why.most, why.recent,
                      (long long)bhd_cfg.evict_min_idle_ms);
        } else
            set_error(resp, BULKHEAD__CONTROL__ERROR__CODE__AT_CAPACITY, true, 0,
                      "bulkheadd has %d sessions (limit --max-sessions %lld): retry later", all,
                      (long long)bhd_cfg.max_sessions);
        return;
    }
    struct bhd_box *box = take_warm_locked();
    pthread_mutex_unlock(&lock);
    if (victim)
        session_put(victim);
    if (crowd)
        session_put(crowd);

    bool warm = box != NULL;
    if (box == NULL) {
        struct bh_error err = {0};
        if (bhd_box_create(bhd_prestart(), &box, &err) < 0) {
            set_error(resp, BULKHEAD__CONTROL__ERROR__CODE__INTERNAL, true, 0, "%s", err.msg);
            return;
        }
    }
    Bulkhead__Control__TierReport rep;
    enum bh_tier tier = bhd_box_verify(box, &rep);
    bhd_tier_report_free(&rep);
    if (tier < floor || tier < bhd_cfg.tier) {
        bhd_box_destroy(box);
        set_error(resp, BULKHEAD__CONTROL__ERROR__CODE__FLOOR_NOT_MET, true, 0,
                  "the session sandbox verified as `%s`, below `%s`: nothing ran",
                  bh_tier_name(tier), bh_tier_name(floor > bhd_cfg.tier ? floor : bhd_cfg.tier));
        return;
    }

    struct session *s = bhd_xcalloc(1, sizeof(*s));
    uint8_t rnd[16];
    if (getrandom(rnd, sizeof(rnd), 0) != sizeof(rnd)) {
        bhd_box_destroy(box);
        free(s);
        set_error(resp, BULKHEAD__CONTROL__ERROR__CODE__INTERNAL, true, 0, "getrandom failed: %s",
                  strerror(errno));
        return;
    }
    bh_hex(rnd, sizeof(rnd), s->id);
    explicit_bzero(rnd, sizeof(rnd));
    bh_sha256_hex(s->id, 32, s->fp);
    snprintf(s->owner, sizeof(s->owner), "%s", req->owner);
    memcpy(s->owner_fp, ofp, sizeof(ofp));
    s->conversation = bhd_xstrdup(req->conversation);
    s->uid = uid;
    s->box = box;
    s->tier = tier;
    s->refs = 1;
    s->opened_unix = bhd_unix_ms();
    s->opened_ms = s->last_used_ms = bh_now_ms();
    int64_t life = bhd_cfg.lifetime_ms;
    if (req->lifetime_ms > 0 && (int64_t)req->lifetime_ms < life)
        life = (int64_t)req->lifetime_ms;
    s->idle_ms = bhd_cfg.idle_ms;
    if (req->idle_timeout_ms > 0 && (int64_t)req->idle_timeout_ms < s->idle_ms)
        s->idle_ms = (int64_t)req->idle_timeout_ms;
    s->expires_ms = s->opened_ms + life;
    s->fresh_sandbox_pending = true;

    Bulkhead__Control__OpenSessionResult *r = bhd_xcalloc(1, sizeof(*r));
    bulkhead__control__open_session_result__init(r);
    r->session_id = bhd_xstrdup(s->id);
    r->fingerprint = bhd_xstrdup(s->fp);
    r->tier = bhd_xstrdup(bh_tier_name(tier));
    r->expires_at_unix_ms = (uint64_t)(s->opened_unix + life);
    r->idle_timeout_ms = (uint64_t)s->idle_ms;
    r->warm = warm;
    r->open_ms = (uint64_t)(bh_now_ms() - t0);
    resp->body_case = BULKHEAD__CONTROL__RESPONSE__BODY_OPEN_SESSION;
    resp->open_session = r;

    pthread_mutex_lock(&lock);
    /* another client may have opened the key while this box was made */
    held = req->reuse ? session_by_key_locked(req->owner, req->conversation, uid) : NULL;
    if (held != NULL) {
        response_free(resp);
        answer_reused_locked(held, t0, resp);
        pthread_mutex_unlock(&lock);
        session_put(s);
        return;
    }
    s->next = sessions;
    sessions = s;
    stats.opened++;
    pthread_mutex_unlock(&lock);
    session_tell(s, false); /* binds the keeper: the session can now be handed over */
    audit_line(json_pack("{s:s, s:s, s:s, s:s, s:b, s:I}", "event", "session_open", "owner", ofp,
                         "session", s->fp, "tier", bh_tier_name(tier), "warm", warm, "open_ms",
                         (json_int_t)r->open_ms));
}

/* Why a RunCell is refused before it reaches the sandbox, or NULL. */
static const char *check_cell(Bulkhead__Control__RunCell *req, char *why, size_t whylen)
{
    if (!lang_ok(req->language)) {
        snprintf(why, whylen, "language `%.40s` is not served: use python or javascript",
                 req->language);
        return why;
    }
    size_t clen = strlen(req->code);
    if (!bhd_utf8_valid(req->code, clen))
        return "code is not valid UTF-8";
    if (req->n_files > MAX_FILES) {
        snprintf(why, whylen, "%zu files: at most %d per cell", req->n_files, MAX_FILES);
        return why;
    }
    size_t total = 0;
    for (size_t i = 0; i < req->n_files; i++) {
        const char *p = req->files[i]->path;
        size_t pl = strlen(p);
        size_t cl = strlen(req->files[i]->content);
        total += cl;
        if (pl == 0 || pl > MAX_PATH_BYTES || !bhd_utf8_valid(p, pl)) {
            snprintf(why, whylen, "file %zu: path must be 1 to %d bytes of UTF-8", i,
                     MAX_PATH_BYTES);
            return why;
        }
        if (p[0] == '/') {
            snprintf(why, whylen,
                     "file path `%.200s` is absolute: give a path relative to the "
                     "working directory",
                     p);
            return why;
        }
        /* components: no "", ".", ".." (and no NUL: strings end at the first) */
        const char *c = p;
        while (*c) {
            const char *e = strchr(c, '/');
            size_t n = e ? (size_t)(e - c) : strlen(c);
            if (n == 0 || (n == 1 && c[0] == '.') || (n == 2 && c[0] == '.' && c[1] == '.')) {
                snprintf(why, whylen,
                         "file path `%.200s` has an empty, `.` or `..` component: refused", p);
                return why;
            }
            c += n;
            if (*c == '/')
                c++;
            if (e && *c == '\0') {
                snprintf(why, whylen, "file path `%.200s` ends with `/`", p);
                return why;
            }
        }
        if (!bhd_utf8_valid(req->files[i]->content, cl)) {
            snprintf(why, whylen, "file `%.200s` is not valid UTF-8 text", p);
            return why;
        }
    }
    if (total > MAX_FILES_BYTES) {
        snprintf(why, whylen, "files hold %zu bytes together: at most %u", total, MAX_FILES_BYTES);
        return why;
    }
    return NULL;
}

static bool owner_calls_enter(const char *ofp, uid_t uid)
{
    struct owner_calls *freeslot = NULL;
    for (size_t i = 0; i < BH_ARRAY_SIZE(owner_calls); i++) {
        struct owner_calls *o = &owner_calls[i];
        if (o->n > 0 && o->uid == uid && strcmp(o->fp, ofp) == 0) {
            if (o->n >= n_owner_calls_max)
                return false;
            o->n++;
            return true;
        }
        if (o->n == 0 && freeslot == NULL)
            freeslot = o;
    }
    if (freeslot == NULL)
        return false;
    memcpy(freeslot->fp, ofp, BH_SHA256_HEX);
    freeslot->uid = uid;
    freeslot->n = 1;
    return true;
}

static void owner_calls_leave(const char *ofp, uid_t uid)
{
    for (size_t i = 0; i < BH_ARRAY_SIZE(owner_calls); i++) {
        struct owner_calls *o = &owner_calls[i];
        if (o->n > 0 && o->uid == uid && strcmp(o->fp, ofp) == 0) {
            o->n--;
            return;
        }
    }
}

static void record_digest(Bulkhead__Control__RunRecord *r, char out[BH_SHA256_HEX])
{
    char buf[1024];
    int n = snprintf(buf, sizeof(buf),
                     "bulkhead-record-v1\ncell=%llu\nlanguage=%s\nstarted=%llu\nqueue=%llu\n"
                     "run=%llu\ntotal=%llu\ntimeout=%llu\nmemory=%llu\npids=%llu\noutput=%llu\n"
                     "disk=%llu\ndisk_used=%llu\nexit=%d\nprevious=%s\n",
                     (unsigned long long)r->cell, r->language,
                     (unsigned long long)r->started_at_unix_ms, (unsigned long long)r->queue_ms,
                     (unsigned long long)r->run_ms, (unsigned long long)r->total_ms,
                     (unsigned long long)r->timeout_ms, (unsigned long long)r->memory_bytes,
                     (unsigned long long)r->pids, (unsigned long long)r->output_bytes,
                     (unsigned long long)r->disk_bytes, (unsigned long long)r->disk_used_bytes,
                     r->exit_code, r->previous_digest);
    bh_sha256_hex(buf, (size_t)n, out);
}

/* One RunCell call on its way through do_run's steps. */
struct cell_call {
    Bulkhead__Control__RunCell *req;
    uid_t uid;
    struct session *s; /* a reference held while the call has its turn */
    uint64_t timeout;
    int64_t t0, t0_unix, t_start, t_end;
    bool ended; /* the session had ended when the call's turn came */
    int ended_reason;
    bool fresh_sandbox;
    uint64_t cell_no;
    /* what running it gave */
    struct bhd_cell_out out;
    struct bh_error err;
    int rc;
    bool oom, pids_hit;
    bool cut; /* a hand-over ended the sandbox under the call */
    int end_reason;
    int64_t disk_used;
};

/* The request alone, before any session is touched. */
static bool cell_call_check(struct cell_call *c, Bulkhead__Control__Response *resp)
{
    char why[512];
    const char *bad = check_cell(c->req, why, sizeof(why));
    if (bad != NULL) {
        set_error(resp,
                  lang_ok(c->req->language) ? BULKHEAD__CONTROL__ERROR__CODE__INVALID_REQUEST
                                            : BULKHEAD__CONTROL__ERROR__CODE__UNSUPPORTED,
                  true, 0, "%s", bad);
        return false;
    }
    c->timeout = c->req->timeout_ms ? c->req->timeout_ms : (uint64_t)bhd_cfg.default_timeout_ms;
    if (c->timeout > (uint64_t)bhd_cfg.max_timeout_ms) {
        set_error(resp, BULKHEAD__CONTROL__ERROR__CODE__INVALID_REQUEST, true, 0,
                  "timeout_ms %llu is above this host's maximum of %lld ms",
                  (unsigned long long)c->req->timeout_ms, (long long)bhd_cfg.max_timeout_ms);
        return false;
    }
    return true;
}

/* Gives the turn to the next call of the session and drops the call's
 * reference. */
static void cell_call_release_turn(struct cell_call *c)
{
    pthread_mutex_lock(&lock);
    c->s->ticket_serving++;
    c->s->in_flight--;
    owner_calls_leave(c->s->owner_fp, c->uid);
    pthread_cond_broadcast(&cond);
    pthread_mutex_unlock(&lock);
    session_put(c->s);
}

/* Finds the session and waits for the call's turn (calls of a session run
 * one at a time, in order); false with resp filled when the call goes no
 * further. */
static bool cell_call_take_turn(struct cell_call *c, Bulkhead__Control__Response *resp)
{
    pthread_mutex_lock(&lock);
    struct session *s = session_get_locked(c->req->session_id, c->uid);
    if (s == NULL) {
        refuse_missing_unlock(c->req->session_id, c->uid, "the session ended", ": open a new one",
                              resp);
        return false;
    }
    if (!owner_calls_enter(s->owner_fp, c->uid)) {
        pthread_mutex_unlock(&lock);
        session_put(s);
        set_error(resp, BULKHEAD__CONTROL__ERROR__CODE__AT_CAPACITY, true, 0,
                  "this owner has %d calls in flight (limit): retry later", n_owner_calls_max);
        return false;
    }
    c->s = s;
    uint64_t ticket = s->ticket_next++;
    s->in_flight++;
    while (s->ticket_serving != ticket && !s->ended)
        pthread_cond_wait(&cond, &lock);
    c->t_start = bh_now_ms();
    c->ended = s->ended;
    c->ended_reason = s->ended_reason;
    /* nothing starts once a hand-over began: the next daemon runs it */
    bool held_back = !c->ended && handing_over;
    c->fresh_sandbox = s->fresh_sandbox_pending;
    c->cell_no = s->calls;
    if (!held_back) {
        s->fresh_sandbox_pending = false;
        c->cell_no = ++s->calls;
    }
    json_t *busy_rec = !c->ended && !held_back ? session_record_locked(s, true) : NULL;
    pthread_mutex_unlock(&lock);
    if (held_back) {
        set_error(resp, BULKHEAD__CONTROL__ERROR__CODE__AT_CAPACITY, true, 0,
                  "bulkheadd is handing its sessions to a new process: nothing ran; retry in a "
                  "moment (the session is kept)");
        cell_call_release_turn(c);
        return false;
    }
    /* the keeper knows a cell is out: a daemon that adopts the session after
     * a crash now cannot trust the channel, and starts it fresh */
    if (busy_rec != NULL)
        bhd_box_tell(s->box, 'S', busy_rec);
    json_decref(busy_rec);
    return true;
}

/* Runs the cell in the session's sandbox and measures what it ran into. */
static void cell_call_run(struct cell_call *c)
{
    struct session *s = c->s;
    struct bhd_box_counters before, after;
    bool counted = !c->ended && bhd_box_counters(s->box, &before) == 0;
    if (!c->ended)
        c->rc = bhd_box_run(s->box, c->req, c->timeout, &c->out, &c->err);
    c->t_end = bh_now_ms();
    counted = counted && bhd_box_counters(s->box, &after) == 0;
    c->oom = counted && after.oom_kills > before.oom_kills;
    c->pids_hit = counted && after.pids_max_hits > before.pids_max_hits;

    c->disk_used = -1;
    if (!c->ended && c->rc == 0 && c->out.files_error == NULL) {
        c->disk_used = bhd_box_disk_used(s->box);
        if (c->disk_used < 0 && c->out.disk_known && s->box->tier != BH_TIER_NONE)
            c->disk_used = (int64_t)c->out.disk_used;
        if (c->disk_used > bhd_cfg.disk_bytes)
            c->end_reason = BULKHEAD__CONTROL__ERROR__ENDED__DISK_BUDGET;
    }
    pthread_mutex_lock(&lock);
    c->cut = s->handover_cut;
    pthread_mutex_unlock(&lock);
    if (!c->ended && c->rc < 0 && !c->cut)
        c->end_reason = BULKHEAD__CONTROL__ERROR__ENDED__SANDBOX_DIED;
}

/* The result of a cell that ran (or died with its sandbox): output, value,
 * images and the limits it hit. */
static Bulkhead__Control__CellResult *cell_result(struct cell_call *c)
{
    struct bhd_cell_out *out = &c->out;
    Bulkhead__Control__CellResult *cr = bhd_xcalloc(1, sizeof(*cr));
    bulkhead__control__cell_result__init(cr);
    if (c->rc < 0) {
        bhd_log("session %.12s: the sandbox ended during a call: %s", c->s->fp, c->err.msg);
        cr->exit_code = BH_EXIT_SIGNAL_BASE + SIGKILL;
        cr->stderr = bhd_xstrdup("bulkhead: the session sandbox ended during this call; "
                                 "the session is closed\n");
        cr->stdout = bhd_xstrdup("");
        cr->value = bhd_xstrdup("");
    } else {
        cr->stdout = out->out ? steal_pointer(&out->out) : bhd_xstrdup("");
        cr->stderr = out->err ? steal_pointer(&out->err) : bhd_xstrdup("");
        cr->stdout_bytes = out->out_total;
        cr->stderr_bytes = out->err_total;
        cr->stdout_truncated = out->out_total > out->out_len;
        cr->stderr_truncated = out->err_total > out->err_len;
        cr->exit_code = out->exit_code;
        cr->timed_out = out->timed_out;
        cr->value = out->value ? steal_pointer(&out->value) : bhd_xstrdup("");
        cr->has_value = out->has_value;
        cr->state_kept = out->state_kept;
        cr->files_persist = c->end_reason == 0;
        cr->fresh_interpreter = out->fresh_interpreter;
        if (c->oom) {
            /* say so where a reader of the output looks */
            char *more = NULL;
            if (asprintf(&more,
                         "%sbulkhead: the sandbox ran out of memory (limit %lld MiB): the "
                         "process that used the most was killed%s\n",
                         cr->stderr, (long long)(bhd_cfg.memory_bytes >> 20),
                         out->state_kept ? "" : "; the next cell starts a fresh interpreter") >=
                0) {
                free_str(cr->stderr);
                cr->stderr = more;
            }
        }
        cr->images = bhd_xcalloc(out->n_images + 1, sizeof(*cr->images));
        for (size_t i = 0; i < out->n_images; i++) {
            Bulkhead__Control__Image *im = bhd_xcalloc(1, sizeof(*im));
            bulkhead__control__image__init(im);
            im->mime = "image/png";
            im->data.data = steal_pointer(&out->images[i]);
            im->data.len = out->image_lens[i];
            cr->images[cr->n_images++] = im;
        }
    }
    cr->fresh_sandbox = c->fresh_sandbox;
    cr->tier = bhd_xstrdup(bh_tier_name(c->s->tier));
    const char *hit[5];
    size_t n_hit = 0;
    if (c->oom)
        hit[n_hit++] = "memory";
    if (c->pids_hit)
        hit[n_hit++] = "pids";
    if (cr->timed_out)
        hit[n_hit++] = "deadline";
    if (cr->stdout_truncated || cr->stderr_truncated)
        hit[n_hit++] = "output";
    if (c->end_reason == BULKHEAD__CONTROL__ERROR__ENDED__DISK_BUDGET)
        hit[n_hit++] = "disk_budget";
    cr->limits_hit = bhd_xcalloc(n_hit + 1, sizeof(char *));
    for (size_t i = 0; i < n_hit; i++)
        cr->limits_hit[cr->n_limits_hit++] = bhd_xstrdup(hit[i]);
    return cr;
}

/* The call's run record, chained to the session's previous one. */
static Bulkhead__Control__RunRecord *cell_record(struct cell_call *c,
                                                 const Bulkhead__Control__CellResult *cr)
{
    Bulkhead__Control__RunRecord *r = bhd_xcalloc(1, sizeof(*r));
    bulkhead__control__run_record__init(r);
    r->cell = c->cell_no;
    r->language = bhd_xstrdup(c->req->language);
    r->started_at_unix_ms = (uint64_t)c->t0_unix;
    r->queue_ms = (uint64_t)(c->t_start - c->t0);
    r->run_ms = c->out.run_ms;
    r->total_ms = (uint64_t)(c->t_end - c->t0);
    r->timeout_ms = c->timeout;
    r->memory_bytes = (uint64_t)bhd_cfg.memory_bytes;
    r->pids = (uint64_t)bhd_cfg.pids;
    r->output_bytes = (uint64_t)bhd_cfg.output_bytes;
    r->disk_bytes = (uint64_t)bhd_cfg.disk_bytes;
    r->disk_used_bytes = c->disk_used > 0 ? (uint64_t)c->disk_used : 0;
    r->exit_code = cr->exit_code;
    pthread_mutex_lock(&lock);
    r->previous_digest = bhd_xstrdup(c->s->last_digest);
    char d[BH_SHA256_HEX];
    record_digest(r, d);
    memcpy(c->s->last_digest, d, sizeof(d));
    if (cr->timed_out)
        stats.timed_out++;
    stats.calls++;
    pthread_mutex_unlock(&lock);
    r->digest = bhd_xstrdup(d);
    return r;
}

static void cell_audit(const struct cell_call *c, const Bulkhead__Control__CellResult *cr)
{
    const Bulkhead__Control__RunRecord *r = cr->record;
    json_t *limits = json_array();
    for (size_t i = 0; i < cr->n_limits_hit; i++)
        json_array_append_new(limits, json_string(cr->limits_hit[i]));
    audit_line(json_pack(
        "{s:s, s:s, s:s, s:I, s:s, s:I, s:I, s:I, s:i, s:b, s:I, s:I, s:s, s:b, s:o}", "event",
        "cell", "owner", c->s->owner_fp, "session", c->s->fp, "cell", (json_int_t)c->cell_no,
        "language", c->req->language, "queue_ms", (json_int_t)r->queue_ms, "run_ms",
        (json_int_t)r->run_ms, "total_ms", (json_int_t)r->total_ms, "exit", cr->exit_code,
        "timed_out", cr->timed_out, "stdout_bytes", (json_int_t)cr->stdout_bytes, "stderr_bytes",
        (json_int_t)cr->stderr_bytes, "tier", bh_tier_name(c->s->tier), "fresh_interpreter",
        cr->fresh_interpreter, "limits_hit", limits));
}

/* The answer: a refusal that says whether anything ran, or the result with
 * its run record (audited). */
static void cell_call_answer(struct cell_call *c, Bulkhead__Control__Response *resp)
{
    if (c->cut && c->rc < 0) {
        /* the hand-over ended the sandbox under this cell: whether it ran
         * (all, some or none of it) cannot be known */
        set_error(resp, BULKHEAD__CONTROL__ERROR__CODE__SESSION_ENDED, false,
                  BULKHEAD__CONTROL__ERROR__ENDED__SHUTDOWN,
                  "bulkheadd handed its sessions to a new process while this cell ran: the cell "
                  "may have run, in whole or in part; the session goes on with a fresh sandbox "
                  "(its next call says fresh_sandbox)");
    } else if (c->ended) {
        set_error(resp, BULKHEAD__CONTROL__ERROR__CODE__SESSION_ENDED, true, c->ended_reason,
                  "the session ended (%s): open a new one", ended_name(c->ended_reason));
    } else if (c->out.files_error != NULL) {
        set_error(resp, BULKHEAD__CONTROL__ERROR__CODE__INVALID_REQUEST, true, 0, "%s: nothing ran",
                  c->out.files_error);
    } else if (c->rc < 0 && c->out.not_dispatched) {
        /* the sandbox died between calls: no cell result for a cell that never ran */
        bhd_log("session %.12s: the sandbox had ended before a call: %s", c->s->fp, c->err.msg);
        set_error(resp, BULKHEAD__CONTROL__ERROR__CODE__SESSION_ENDED, true,
                  BULKHEAD__CONTROL__ERROR__ENDED__SANDBOX_DIED,
                  "the session ended (%s): its sandbox had ended before this call, nothing ran; "
                  "open a new one",
                  ended_name(BULKHEAD__CONTROL__ERROR__ENDED__SANDBOX_DIED));
    } else {
        Bulkhead__Control__CellResult *cr = cell_result(c);
        cr->record = cell_record(c, cr);
        resp->body_case = BULKHEAD__CONTROL__RESPONSE__BODY_RUN_CELL;
        resp->run_cell = cr;
        cell_audit(c, cr);
    }
}

/* Ends the session when the call used up its disk budget, its sandbox or
 * its lifetime; otherwise hands the keeper the new chain head. */
static void cell_call_leave(struct cell_call *c)
{
    struct session *s = c->s;
    pthread_mutex_lock(&lock);
    s->last_used_ms = bh_now_ms();
    bool was_ended = s->ended;
    if (c->end_reason)
        session_end_locked(s, c->end_reason);
    if (!s->ended && s->last_used_ms >= s->expires_ms)
        session_end_locked(s, BULKHEAD__CONTROL__ERROR__ENDED__LIFETIME);
    bool drop_table_ref = !was_ended && s->ended;
    json_t *rec = !s->ended && !c->cut ? session_record_locked(s, false) : NULL;
    pthread_mutex_unlock(&lock);
    /* before the ticket goes: a hand-over waits for it, so the keeper has the
     * chain head and LRU stamp of every answered call */
    if (rec != NULL)
        bhd_box_tell(s->box, 'S', rec);
    json_decref(rec);
    if (drop_table_ref)
        session_put(s);
    cell_call_release_turn(c);
}

static void do_run(Bulkhead__Control__RunCell *req, uid_t uid, Bulkhead__Control__Response *resp)
{
    struct cell_call c = {.req = req, .uid = uid, .t0 = bh_now_ms(), .t0_unix = bhd_unix_ms()};
    if (!cell_call_check(&c, resp) || !cell_call_take_turn(&c, resp))
        return;
    cell_call_run(&c);
    cell_call_answer(&c, resp);
    bhd_cell_out_free(&c.out);
    cell_call_leave(&c);
}

static void do_close(Bulkhead__Control__CloseSession *req, uid_t uid,
                     Bulkhead__Control__Response *resp)
{
    pthread_mutex_lock(&lock);
    struct session *s = session_get_locked(req->session_id, uid);
    if (s == NULL) {
        refuse_missing_unlock(req->session_id, uid, "the session already ended", "", resp);
        return;
    }
    if (handing_over) {
        /* its box is about to be left to its keeper, not destroyed here */
        s->refs--;
        pthread_mutex_unlock(&lock);
        set_error(resp, BULKHEAD__CONTROL__ERROR__CODE__AT_CAPACITY, true, 0,
                  "bulkheadd is handing its sessions to a new process: the session is still "
                  "open; retry in a moment");
        return;
    }
    /* wait for calls in flight: close is ordered after them */
    uint64_t ticket = s->ticket_next++;
    s->in_flight++;
    while (s->ticket_serving != ticket && !s->ended)
        pthread_cond_wait(&cond, &lock);
    Bulkhead__Control__CloseSessionResult *r = bhd_xcalloc(1, sizeof(*r));
    bulkhead__control__close_session_result__init(r);
    r->calls = s->calls;
    r->last_record_digest = bhd_xstrdup(s->last_digest);
    session_end_locked(s, BULKHEAD__CONTROL__ERROR__ENDED__CLOSED);
    s->ticket_serving++;
    s->in_flight--;
    s->refs--; /* the table's reference */
    pthread_cond_broadcast(&cond);
    pthread_mutex_unlock(&lock);
    session_put(s); /* ours: the last one destroys the sandbox before we answer */
    resp->body_case = BULKHEAD__CONTROL__RESPONSE__BODY_CLOSE_SESSION;
    resp->close_session = r;
}

static void do_list(Bulkhead__Control__ListSessions *req, uid_t uid,
                    Bulkhead__Control__Response *resp)
{
    Bulkhead__Control__ListSessionsResult *r = bhd_xcalloc(1, sizeof(*r));
    bulkhead__control__list_sessions_result__init(r);
    pthread_mutex_lock(&lock);
    size_t n = 0;
    for (struct session *s = sessions; s; s = s->next)
        n++;
    r->sessions = bhd_xcalloc(n + 1, sizeof(*r->sessions));
    int64_t now = bh_now_ms(), now_unix = bhd_unix_ms();
    for (struct session *s = sessions; s; s = s->next) {
        if (s->uid != uid || strcmp(s->owner, req->owner) != 0)
            continue;
        Bulkhead__Control__SessionInfo *i = bhd_xcalloc(1, sizeof(*i));
        bulkhead__control__session_info__init(i);
        i->fingerprint = bhd_xstrdup(s->fp);
        i->conversation = bhd_xstrdup(s->conversation);
        i->calls = s->calls;
        i->opened_at_unix_ms = (uint64_t)s->opened_unix;
        i->last_used_unix_ms = (uint64_t)(now_unix - (now - s->last_used_ms));
        i->expires_at_unix_ms = (uint64_t)(now_unix + (s->expires_ms - now));
        i->busy = s->in_flight > 0;
        r->sessions[r->n_sessions++] = i;
    }
    pthread_mutex_unlock(&lock);
    resp->body_case = BULKHEAD__CONTROL__RESPONSE__BODY_LIST_SESSIONS;
    resp->list_sessions = r;
}

static void do_stats(Bulkhead__Control__Response *resp)
{
    Bulkhead__Control__StatsResult *r = bhd_xcalloc(1, sizeof(*r));
    bulkhead__control__stats_result__init(r);
    pthread_mutex_lock(&lock);
    for (struct session *s = sessions; s; s = s->next)
        r->sessions++;
    r->warm_ready = (uint32_t)warm_count;
    r->calls = stats.calls;
    r->opened = stats.opened;
    r->closed = stats.closed;
    r->evicted = stats.evicted;
    r->timed_out = stats.timed_out;
    r->errors = stats.errors;
    r->uptime_ms = (uint64_t)(bh_now_ms() - started_ms);
    r->adopted_sessions = n_adopted;
    r->adopted_fresh = n_adopted_fresh;
    pthread_mutex_unlock(&lock);
    resp->body_case = BULKHEAD__CONTROL__RESPONSE__BODY_STATS;
    resp->stats = r;
}

/* ---- connections --------------------------------------------------------- */

static int send_response(int fd, Bulkhead__Control__Response *resp)
{
    size_t len = bulkhead__control__response__get_packed_size(resp);
    uint8_t *buf = malloc(len ? len : 1);
    if (buf == NULL)
        return -1;
    bulkhead__control__response__pack(resp, buf);
    int rc = bh_frame_write(fd, buf, len, NULL);
    free(buf);
    return rc;
}

/* protobuf-c hands strings over NUL-terminated, so a string field holding a
 * NUL byte would be read cut short ("notes.txt\0../x" as "notes.txt") and
 * the caller's input silently changed. The raw bytes are walked with the
 * message's own descriptors before unpacking: any string field (at any
 * depth) with a NUL byte refuses the request. Malformed wire data is left to
 * the unpacker, which refuses it. */
static bool pb_varint(const uint8_t **p, const uint8_t *end, uint64_t *v)
{
    *v = 0;
    for (int shift = 0; shift < 64 && *p < end; shift += 7) {
        uint8_t b = *(*p)++;
        *v |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80))
            return true;
    }
    return false;
}

static bool pb_strings_have_nul(const ProtobufCMessageDescriptor *d, const uint8_t *p, size_t len,
                                int depth)
{
    const uint8_t *end = p + len;
    if (depth > 16)
        return false;
    while (p < end) {
        uint64_t key, n;
        if (!pb_varint(&p, end, &key))
            return false;
        switch (key & 7) {
        case 0:
            if (!pb_varint(&p, end, &n))
                return false;
            break;
        case 1:
            if ((size_t)(end - p) < 8)
                return false;
            p += 8;
            break;
        case 5:
            if ((size_t)(end - p) < 4)
                return false;
            p += 4;
            break;
        case 2: {
            if (!pb_varint(&p, end, &n) || n > (uint64_t)(end - p))
                return false;
            const ProtobufCFieldDescriptor *f =
                key >> 3 <= UINT32_MAX
                    ? protobuf_c_message_descriptor_get_field(d, (unsigned)(key >> 3))
                    : NULL;
            if (f != NULL && f->type == PROTOBUF_C_TYPE_STRING && memchr(p, 0, (size_t)n))
                return true;
            if (f != NULL && f->type == PROTOBUF_C_TYPE_MESSAGE &&
                pb_strings_have_nul(f->descriptor, p, (size_t)n, depth + 1))
                return true;
            p += n;
            break;
        }
        default:
            return false;
        }
    }
    return false;
}

void bhd_refuse_connection(int fd)
{
    Bulkhead__Control__Response resp = BULKHEAD__CONTROL__RESPONSE__INIT;
    set_error(&resp, BULKHEAD__CONTROL__ERROR__CODE__AT_CAPACITY, true, 0,
              "too many connections at once (--max-connections %lld): retry later",
              (long long)bhd_cfg.max_connections);
    send_response(fd, &resp);
    response_free(&resp);
    close(fd);
}

static void serve_registered(int fd);

/* False when the connection cannot be tracked (out of memory): it is not
 * served, its client sees the close at once. */
static bool conn_register(int fd)
{
    struct ucred cred = {.uid = (uid_t)-1};
    socklen_t cl = sizeof(cred);
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &cl) < 0)
        return false;
    pthread_mutex_lock(&lock);
    bool ok = true;
    if (n_live_conns == cap_live_conns) {
        size_t cap = cap_live_conns ? cap_live_conns * 2 : 64;
        struct live_conn *more = realloc(live_conns, cap * sizeof(*more));
        if (more == NULL) {
            ok = false;
        } else {
            live_conns = more;
            cap_live_conns = cap;
        }
    }
    if (ok) {
        live_conns[n_live_conns++] =
            (struct live_conn){.fd = fd, .uid = cred.uid, .idle_since = bh_now_ms()};
        if (conns_stopped)
            shutdown(fd, SHUT_RD);
    }
    pthread_mutex_unlock(&lock);
    return ok;
}

static void conn_unregister(int fd)
{
    pthread_mutex_lock(&lock);
    for (size_t i = 0; i < n_live_conns; i++) {
        if (live_conns[i].fd == fd) {
            if (live_conns[i].evicted)
                n_evicted_conns--;
            live_conns[i] = live_conns[--n_live_conns];
            break;
        }
    }
    pthread_mutex_unlock(&lock);
}

/* Whether the connection waits for a request (idle) or is in a call. */
static void conn_set_idle(int fd, bool idle)
{
    pthread_mutex_lock(&lock);
    for (size_t i = 0; i < n_live_conns; i++)
        if (live_conns[i].fd == fd)
            live_conns[i].idle_since = idle ? bh_now_ms() : 0;
    pthread_mutex_unlock(&lock);
}

/* At --max-connections, the connection that makes room for uid (lock held):
 * the longest idle one of the uid holding the most, when that uid holds at
 * least two more than uid does. A connection costs its client nothing to
 * keep, so without this one uid of the socket's group holding them all kept
 * every other uid out for as long as it liked; the session cap has the same
 * rule (crowding_victim_locked). NULL: uid is at its share. */
static struct live_conn *conn_crowding_victim_locked(uid_t uid)
{
    uid_t top = uid;
    size_t most = 0, mine = 0;
    for (size_t i = 0; i < n_live_conns; i++) {
        if (live_conns[i].evicted)
            continue;
        size_t n = 0;
        for (size_t k = 0; k < n_live_conns; k++)
            n += !live_conns[k].evicted && live_conns[k].uid == live_conns[i].uid;
        if (live_conns[i].uid == uid)
            mine = n;
        else if (n > most) {
            most = n;
            top = live_conns[i].uid;
        }
    }
    if (top == uid || most < mine + 2)
        return NULL;
    struct live_conn *victim = NULL;
    for (size_t i = 0; i < n_live_conns; i++) {
        struct live_conn *c = &live_conns[i];
        if (c->uid == top && !c->evicted && c->idle_since > 0 &&
            (victim == NULL || c->idle_since < victim->idle_since))
            victim = c;
    }
    return victim;
}

bool bhd_admit_connection(int fd)
{
    struct ucred cred;
    socklen_t cl = sizeof(cred);
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &cl) < 0)
        return false;
    pthread_mutex_lock(&lock);
    bool ok = atomic_load(&bhd_open_connections) - n_evicted_conns < bhd_cfg.max_connections;
    if (!ok) {
        struct live_conn *victim = conn_crowding_victim_locked(cred.uid);
        if (victim != NULL) {
            /* As at a hand-over: a request its client already sent is still
             * read and answered; its next send fails (nothing ran: retry). */
            shutdown(victim->fd, SHUT_RD);
            victim->evicted = true;
            n_evicted_conns++;
            bhd_log("crowding: uid %u holds the most connections at --max-connections; its "
                    "longest idle one is closed to admit uid %u",
                    (unsigned)victim->uid, (unsigned)cred.uid);
            ok = true;
        }
    }
    if (ok)
        atomic_fetch_add(&bhd_open_connections, 1);
    pthread_mutex_unlock(&lock);
    return ok;
}

/* The end of a hand-over: a connection kept open between calls must not
 * take a request nobody will read (its client would see a reset and not
 * know whether the call ran). Shutting our reading side makes every later
 * send of its client fail (EPIPE: nothing was sent, so nothing ran); what was
 * sent before is still read and answered (held back: retry). Waits, bounded,
 * until each connection has been answered and closed. */
static void connections_stop_reading(void)
{
    pthread_mutex_lock(&lock);
    conns_stopped = true;
    for (size_t i = 0; i < n_live_conns; i++)
        shutdown(live_conns[i].fd, SHUT_RD);
    pthread_mutex_unlock(&lock);
    for (int i = 0; i < 3000; i++) {
        pthread_mutex_lock(&lock);
        size_t left = n_live_conns;
        pthread_mutex_unlock(&lock);
        /* Also those accepted whose thread has not registered yet: each
         * may hold a request its client already sent. */
        if (left == 0 && atomic_load(&bhd_open_connections) == 0)
            break;
        usleep(10000);
    }
}

void bhd_serve_connection(int fd)
{
    if (!conn_register(fd)) {
        close(fd);
        return;
    }
    serve_registered(fd);
    conn_unregister(fd);
    close(fd);
}

static void serve_registered(int fd)
{
    struct ucred cred;
    socklen_t cl = sizeof(cred);
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &cl) < 0)
        return;
    if (cred.uid != 0 && cred.uid != geteuid() && bhd_cfg.socket_group == NULL) {
        Bulkhead__Control__Response resp = BULKHEAD__CONTROL__RESPONSE__INIT;
        set_error(&resp, BULKHEAD__CONTROL__ERROR__CODE__DISABLED, true, 0,
                  "uid %u may not use this socket", (unsigned)cred.uid);
        send_response(fd, &resp);
        response_free(&resp);
        return;
    }
    for (;;) {
        void *buf = NULL;
        size_t len = 0;
        struct bh_error err = {0};
        /* Waiting for a request has no limit (a client may keep its
         * connection between calls); once a frame begins it must arrive
         * whole in time, so a stalled client cannot hold this thread. */
        struct pollfd pfd = {.fd = fd, .events = POLLIN};
        conn_set_idle(fd, true);
        while (poll(&pfd, 1, -1) < 0 && errno == EINTR)
            ;
        conn_set_idle(fd, false);
        int64_t deadline =
            bhd_cfg.frame_timeout_ms > 0 ? bh_now_ms() + bhd_cfg.frame_timeout_ms : -1;
        int rc = bh_frame_read(fd, (size_t)bhd_cfg.max_frame, deadline, &buf, &len, &err);
        if (rc == 0)
            break;
        Bulkhead__Control__Response resp = BULKHEAD__CONTROL__RESPONSE__INIT;
        if (rc < 0) {
            if (err.code == ETIMEDOUT)
                bhd_log("closing a connection whose frame did not arrive within %lld ms",
                        (long long)bhd_cfg.frame_timeout_ms);
            if (err.code == EMSGSIZE) {
                set_error(&resp, BULKHEAD__CONTROL__ERROR__CODE__INVALID_REQUEST, true, 0,
                          "%s: closing the connection", err.msg);
                send_response(fd, &resp);
                response_free(&resp);
            }
            break;
        }
        Bulkhead__Control__Request *req =
            bulkhead__control__request__unpack(NULL, len, (const uint8_t *)buf);
        bool has_nul = req != NULL &&
                       pb_strings_have_nul(&bulkhead__control__request__descriptor, buf, len, 0);
        free(buf);
        if (req == NULL) {
            set_error(&resp, BULKHEAD__CONTROL__ERROR__CODE__INVALID_REQUEST, true, 0,
                      "the frame is not a Request message: closing the connection");
            send_response(fd, &resp);
            response_free(&resp);
            break;
        }
        resp.request_id = req->request_id;
        atomic_fetch_add(&active_requests, 1);
        if (req->version < 1 || req->version > BHD_PROTOCOL) {
            set_error(&resp, BULKHEAD__CONTROL__ERROR__CODE__INVALID_REQUEST, true, 0,
                      "protocol version %u is not served: this bulkheadd speaks versions 1 to %d",
                      req->version, BHD_PROTOCOL);
        } else if (req->version < 2 &&
                   req->body_case == BULKHEAD__CONTROL__REQUEST__BODY_OPEN_SESSION &&
                   req->open_session->reuse) {
            set_error(&resp, BULKHEAD__CONTROL__ERROR__CODE__INVALID_REQUEST, true, 0,
                      "OpenSession.reuse is a version 2 field: send version 2");
        } else if (has_nul) {
            set_error(&resp, BULKHEAD__CONTROL__ERROR__CODE__INVALID_REQUEST, true, 0,
                      "a text field (a file path or content, code, an id) holds a NUL byte: "
                      "refused, nothing ran; send text without NUL bytes");
        } else {
            switch (req->body_case) {
            case BULKHEAD__CONTROL__REQUEST__BODY_DESCRIBE:
                resp.body_case = BULKHEAD__CONTROL__RESPONSE__BODY_DESCRIBE;
                resp.describe = &bhd_describe;
                break;
            case BULKHEAD__CONTROL__REQUEST__BODY_OPEN_SESSION:
                do_open(req->open_session, cred.uid, &resp);
                break;
            case BULKHEAD__CONTROL__REQUEST__BODY_RUN_CELL:
                do_run(req->run_cell, cred.uid, &resp);
                break;
            case BULKHEAD__CONTROL__REQUEST__BODY_CLOSE_SESSION:
                do_close(req->close_session, cred.uid, &resp);
                break;
            case BULKHEAD__CONTROL__REQUEST__BODY_LIST_SESSIONS:
                do_list(req->list_sessions, cred.uid, &resp);
                break;
            case BULKHEAD__CONTROL__REQUEST__BODY_STATS:
                do_stats(&resp);
                break;
            default:
                set_error(&resp, BULKHEAD__CONTROL__ERROR__CODE__INVALID_REQUEST, true, 0,
                          "the request names no procedure this bulkheadd knows");
                break;
            }
        }
        bulkhead__control__request__free_unpacked(req, NULL);
        rc = send_response(fd, &resp);
        response_free(&resp);
        atomic_fetch_sub(&active_requests, 1);
        if (rc < 0)
            break;
        /* during a hand-over: the client's next request goes to the next
         * daemon, never into a socket nobody will read. Its sends fail from
         * now on; one it sent before is still read and answered, then the
         * end of stream closes the connection. */
        pthread_mutex_lock(&lock);
        bool leaving = handing_over;
        pthread_mutex_unlock(&lock);
        if (leaving)
            shutdown(fd, SHUT_RD);
    }
}

/* ---- maintenance --------------------------------------------------------- */

static void reap_keepers(void)
{
    /* keepers of destroyed boxes are waited for by bhd_box_destroy; this only
     * collects any that ended on their own in between */
}

void *bhd_maintenance_thread(void *arg)
{
    (void)arg;
    for (;;) {
        struct session *ended[64];
        size_t n_ended = 0;
        pthread_mutex_lock(&lock);
        if (shutting_down) {
            pthread_mutex_unlock(&lock);
            return NULL;
        }
        int64_t now = bh_now_ms();
        for (struct session *s = sessions, *next; s && n_ended < 64; s = next) {
            next = s->next;
            if (s->in_flight > 0)
                continue;
            int reason = 0;
            if (now >= s->expires_ms)
                reason = BULKHEAD__CONTROL__ERROR__ENDED__LIFETIME;
            else if (now - s->last_used_ms >= s->idle_ms)
                reason = BULKHEAD__CONTROL__ERROR__ENDED__IDLE;
            else {
                struct pollfd p = {.fd = s->box->keeper_fd, .events = POLLIN};
                if (poll(&p, 1, 0) > 0)
                    reason = BULKHEAD__CONTROL__ERROR__ENDED__SANDBOX_DIED;
            }
            if (reason) {
                session_end_locked(s, reason);
                ended[n_ended++] = s;
            }
        }
        bool refill = warm_count + warm_creating < bhd_cfg.warm;
        if (refill)
            warm_creating++;
        pthread_mutex_unlock(&lock);
        for (size_t i = 0; i < n_ended; i++)
            session_put(ended[i]);
        reap_keepers();
        if (refill) {
            struct bhd_box *box = NULL;
            struct bh_error err = {0};
            int rc = bhd_box_create(bhd_prestart(), &box, &err);
            if (rc == 0) {
                /* Verified here, off the open path: the sentry's costly
                 * check (sentry_mm, a fork) is then known for its process,
                 * and the open's own verification only confirms it. */
                Bulkhead__Control__TierReport rep;
                enum bh_tier tier = bhd_box_verify(box, &rep);
                bhd_tier_report_free(&rep);
                if (tier < bhd_cfg.tier) {
                    bh_error_set(&err, EPERM, "a new sandbox verified as `%s`, below `%s`",
                                 bh_tier_name(tier), bh_tier_name(bhd_cfg.tier));
                    rc = -1;
                }
            }
            pthread_mutex_lock(&lock);
            warm_creating--;
            if (rc == 0 && !shutting_down) {
                struct warm *w = bhd_xcalloc(1, sizeof(*w));
                w->box = box;
                w->next = warm_pool;
                warm_pool = w;
                warm_count++;
                box = NULL;
            }
            pthread_mutex_unlock(&lock);
            if (rc < 0) {
                bhd_log("warm pool: %s", err.msg);
                sleep(1);
            }
            bhd_box_destroy(box);
            continue; /* fill the pool before sleeping */
        }
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += 200 * 1000000;
        if (ts.tv_nsec >= 1000000000) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000;
        }
        pthread_mutex_lock(&lock);
        if (!shutting_down)
            pthread_cond_timedwait(&cond, &lock, &ts);
        pthread_mutex_unlock(&lock);
    }
}

/* The table's sessions at the end (their keepers told what to do): frees
 * ours of them; one a call still holds is that call's to drop. */
static void sessions_free(struct session *all)
{
    for (struct session *s = all, *next; s; s = next) {
        next = s->next;
        pthread_mutex_lock(&lock);
        bool last = --s->refs == 0;
        pthread_mutex_unlock(&lock);
        if (!last)
            continue;
        bhd_box_release(s->box);
        free(s->conversation);
        explicit_bzero(s->id, sizeof(s->id));
        free(s);
    }
}

/* Takes the session table and the warm pool out of service (lock held):
 * from here no call finds a session and no open takes a warm sandbox. */
static struct session *sessions_take_locked(struct warm **warm)
{
    shutting_down = true;
    struct session *all = sessions;
    sessions = NULL;
    *warm = warm_pool;
    warm_pool = NULL;
    warm_count = 0;
    return all;
}

static void warm_pool_destroy(struct warm *w)
{
    while (w) {
        struct warm *n = w->next;
        bhd_box_destroy(w->box);
        free(w);
        w = n;
    }
}

void bhd_shutdown_sessions(void)
{
    pthread_mutex_lock(&lock);
    struct warm *w = NULL;
    struct session *all = sessions_take_locked(&w);
    for (struct session *s = all; s; s = s->next) {
        s->ended = true;
        s->ended_reason = BULKHEAD__CONTROL__ERROR__ENDED__SHUTDOWN;
    }
    pthread_cond_broadcast(&cond);
    pthread_mutex_unlock(&lock);
    /* Boxes go now even if a call holds a reference: closing the channel and
     * the keeper socket ends the sandbox; the caller's thread sees EOF. */
    for (struct session *s = all; s; s = s->next)
        bhd_box_end_keeper(s->box, 'X');
    warm_pool_destroy(w);
    for (struct session *s = all; s; s = s->next)
        bhd_box_wait_keeper(s->box, 500);
    sessions_free(all);
    /* a directory named after the socket goes with the daemon, when empty */
    if (bhd_cfg.state_dir_default)
        rmdir(bhd_cfg.state_dir);
}

/* ---- hand-over and adoption ---------------------------------------------- */

void bhd_handover_begin(void)
{
    pthread_mutex_lock(&lock);
    handing_over = true;
    pthread_cond_broadcast(&cond);
    pthread_mutex_unlock(&lock);
}

void bhd_handover_sessions(void)
{
    pthread_mutex_lock(&lock);
    int64_t deadline = bh_now_ms() + bhd_cfg.handover_wait_ms;
    for (;;) {
        bool busy = false;
        for (struct session *s = sessions; s && !busy; s = s->next)
            busy = s->in_flight > 0;
        if (!busy || bh_now_ms() >= deadline)
            break;
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += 50 * 1000000;
        if (ts.tv_nsec >= 1000000000) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000;
        }
        pthread_cond_timedwait(&cond, &lock, &ts);
    }
    /* Cells still running: their sandbox ends under them ('R': the keeper
     * keeps the record), their callers hear "may have run", and the next
     * daemon rebuilds the session fresh. Never run twice: nothing re-sends. */
    struct bhd_box *cut[256];
    size_t n_cut = 0;
    for (struct session *s = sessions; s; s = s->next) {
        if (s->in_flight > 0 && n_cut < BH_ARRAY_SIZE(cut)) {
            s->handover_cut = true;
            cut[n_cut++] = s->box;
        }
    }
    pthread_mutex_unlock(&lock);
    for (size_t i = 0; i < n_cut; i++)
        bhd_box_end_keeper(cut[i], 'R');
    /* every request taken gets its answer before we go */
    for (int i = 0; i < 3000 && atomic_load(&active_requests) > 0; i++)
        usleep(10000);
    connections_stop_reading();
    pthread_mutex_lock(&lock);
    struct warm *w = NULL;
    struct session *all = sessions_take_locked(&w);
    pthread_cond_broadcast(&cond);
    pthread_mutex_unlock(&lock);
    size_t kept = 0;
    for (struct session *s = all; s; s = s->next)
        if (!s->handover_cut)
            kept++;
    /* closing our ends without 'X' leaves each sandbox to its keeper */
    sessions_free(all);
    warm_pool_destroy(w);
    audit_line(json_pack("{s:s, s:I, s:I}", "event", "handover", "sessions", (json_int_t)kept,
                         "cut", (json_int_t)n_cut));
}

static bool rec_int(json_t *r, const char *k, int64_t lo, int64_t hi, int64_t *v)
{
    json_t *x = json_object_get(r, k);
    if (!json_is_integer(x) || json_integer_value(x) < lo || json_integer_value(x) > hi)
        return false;
    *v = json_integer_value(x);
    return true;
}

/* A session from a keeper's record, checked like any input from outside;
 * NULL with why filled. */
static struct session *session_from_record(json_t *r, const char *fp, const char **why)
{
    const char *owner = json_string_value(json_object_get(r, "owner"));
    const char *conv = json_string_value(json_object_get(r, "conversation"));
    const char *digest = json_string_value(json_object_get(r, "last_digest"));
    const char *tier = json_string_value(json_object_get(r, "tier"));
    const char *rfp = json_string_value(json_object_get(r, "fp"));
    int64_t uid, opened_unix, opened_ms, last_used, expires, idle, calls;
    *why = NULL;
    if (rfp == NULL || strcmp(rfp, fp) != 0)
        return *why = "the record names another session", NULL;
    if (owner == NULL || strlen(owner) == 0 || strlen(owner) > MAX_OWNER_BYTES ||
        !bhd_utf8_valid(owner, strlen(owner)))
        return *why = "the owner is not valid", NULL;
    if (conv == NULL || strlen(conv) > 1024 || !bhd_utf8_valid(conv, strlen(conv)))
        return *why = "the conversation is not valid", NULL;
    if (digest == NULL || (digest[0] != '\0' && !bh_sha256_hex_valid(digest)))
        return *why = "the record chain head is not valid", NULL;
    if (tier == NULL || strcmp(tier, bh_tier_name(bhd_cfg.tier)) != 0)
        return *why = "it was made at another tier than this daemon serves", NULL;
    if (!rec_int(r, "uid", 0, UINT32_MAX - 1, &uid) ||
        !rec_int(r, "opened_unix", 0, INT64_MAX, &opened_unix) ||
        !rec_int(r, "opened_ms", 0, INT64_MAX, &opened_ms) ||
        !rec_int(r, "last_used_ms", 0, INT64_MAX, &last_used) ||
        !rec_int(r, "expires_ms", 0, INT64_MAX, &expires) ||
        !rec_int(r, "idle_ms", 1, INT64_MAX, &idle) || !rec_int(r, "calls", 0, INT64_MAX, &calls))
        return *why = "a number in it is missing or out of range", NULL;
    struct session *s = bhd_xcalloc(1, sizeof(*s));
    memcpy(s->fp, fp, BH_SHA256_HEX);
    snprintf(s->owner, sizeof(s->owner), "%s", owner);
    owner_digest(s->owner, (uid_t)uid, s->owner_fp);
    s->conversation = bhd_xstrdup(conv);
    s->uid = (uid_t)uid;
    s->tier = bhd_cfg.tier;
    s->refs = 1;
    s->opened_unix = opened_unix;
    s->opened_ms = opened_ms;
    s->last_used_ms = last_used;
    s->expires_ms = expires;
    s->idle_ms = idle;
    s->calls = (uint64_t)calls;
    snprintf(s->last_digest, sizeof(s->last_digest), "%s", digest);
    s->fresh_sandbox_pending = json_is_true(json_object_get(r, "fresh_pending"));
    return s;
}

/* The record a keeper left in the state directory, or NULL. */
static json_t *read_record(const char *fp)
{
    char name[BH_SHA256_HEX + 8];
    snprintf(name, sizeof(name), "%s.json", fp);
    int fd = openat(state_fd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return NULL;
    char buf[64 * 1024];
    ssize_t n = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    if (n <= 0)
        return NULL;
    return json_loadb(buf, (size_t)n, 0, NULL);
}

static void unlink_record(const char *fp)
{
    char name[BH_SHA256_HEX + 8];
    snprintf(name, sizeof(name), "%s.sock", fp);
    unlinkat(state_fd, name, 0);
    snprintf(name, sizeof(name), "%s.json", fp);
    unlinkat(state_fd, name, 0);
}

/* A session whose sandbox is gone (its keeper died, refused, or a cell was
 * cut) goes on under the same id on a new sandbox: its next call says
 * fresh_sandbox and fresh_interpreter, the record chain continues. */
static int session_rebuild(struct session *s)
{
    struct bh_error err = {0};
    struct bhd_box *box = NULL;
    if (bhd_box_create(bhd_prestart(), &box, &err) < 0) {
        bhd_log("session %.12s cannot be rebuilt: %s", s->fp, err.msg);
        return -1;
    }
    Bulkhead__Control__TierReport rep;
    enum bh_tier tier = bhd_box_verify(box, &rep);
    bhd_tier_report_free(&rep);
    if (tier < bhd_cfg.tier) {
        bhd_log("session %.12s cannot be rebuilt: its sandbox verified as `%s`", s->fp,
                bh_tier_name(tier));
        bhd_box_destroy(box);
        return -1;
    }
    s->box = box;
    s->fresh_sandbox_pending = true;
    return 0;
}

static void adopt_one(const char *fp)
{
    struct bh_error err = {0};
    struct bhd_box *box = NULL;
    json_t *rec = NULL;
    json_t *file_rec = read_record(fp);
    int rc = bhd_box_adopt(state_fd, fp, &box, &rec, &err);
    if (rc < 0 && err.code == ETIMEDOUT) {
        /* held by a live daemon, or hung: not ours to take or end */
        bhd_log("%s", err.msg);
        json_decref(file_rec);
        return;
    }
    const char *why = NULL;
    struct session *s = NULL;
    if (rc == 1) {
        s = session_from_record(rec, fp, &why);
        if (s != NULL && json_is_true(json_object_get(rec, "busy"))) {
            /* a cell was out when its daemon ended: the channel may hold
             * half an answer, so the sandbox is not trusted with another */
            bhd_log("session %.12s had a cell running when its daemon ended: it goes on with a "
                    "fresh sandbox",
                    fp);
            bhd_box_destroy(box);
            box = NULL;
        } else if (s == NULL) {
            bhd_log("session %.12s is not adopted: %s; it ends", fp, why);
            bhd_box_destroy(box);
            box = NULL;
        }
    } else {
        if (rc < 0 && err.code != EPROTO) {
            bhd_log("%s", err.msg);
            json_decref(file_rec);
            return;
        }
        if (rc < 0) {
            bhd_log("%s; the session goes on with a fresh sandbox", err.msg);
            /* the refused keeper removes its files as it ends */
            char name[BH_SHA256_HEX + 8];
            snprintf(name, sizeof(name), "%s.sock", fp);
            for (int i = 0; i < 1000 && faccessat(state_fd, name, F_OK, AT_SYMLINK_NOFOLLOW) == 0;
                 i++)
                usleep(10000);
        }
        if (file_rec != NULL) {
            /* its keeper is gone: its sentry died with it (PDEATHSIG), its
             * cgroup may remain */
            bhd_box_remove_remains(bhd_cfg.tier,
                                   json_string_value(json_object_get(file_rec, "sandbox")));
            s = session_from_record(file_rec, fp, &why);
            if (s == NULL)
                bhd_log("session %.12s cannot be rebuilt: %s", fp, why);
        }
        unlink_record(fp);
    }
    json_decref(rec);
    json_decref(file_rec);
    if (s == NULL)
        return;
    if (box != NULL) {
        s->box = box;
        n_adopted++;
    } else if (session_rebuild(s) == 0) {
        n_adopted_fresh++;
    } else {
        free(s->conversation);
        free(s);
        return;
    }
    pthread_mutex_lock(&lock);
    s->next = sessions;
    sessions = s;
    pthread_mutex_unlock(&lock);
    session_tell(s, false);
    audit_line(json_pack("{s:s, s:s, s:s, s:b}", "event", "session_adopted", "owner", s->owner_fp,
                         "session", s->fp, "fresh_sandbox", s->fresh_sandbox_pending));
}

/* The state directory must be ours alone: anyone else who could write there
 * could offer a sandbox of their own making as one of our sessions. */
static int state_dir_open(struct bh_error *err)
{
    const char *dir = bhd_cfg.state_dir;
    if (strncmp(dir, BHD_STATE_ROOT "/", strlen(BHD_STATE_ROOT) + 1) == 0) {
        mkdir("/run/bulkhead", 0755);
        mkdir(BHD_STATE_ROOT, 0700);
    }
    if (mkdir(dir, 0700) < 0 && errno != EEXIST)
        return bh_error_errno(err, errno, "make the state directory `%s`", dir);
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return bh_error_errno(err, errno, "open the state directory `%s`", dir);
    struct stat st;
    if (fstat(fd, &st) < 0 || st.st_uid != geteuid() || (st.st_mode & 077) != 0) {
        close(fd);
        return bh_error_set(err, EPERM,
                            "the state directory `%s` must belong to uid %u with mode 0700 (it "
                            "is uid %u, mode %03o): sessions are not kept in or adopted from a "
                            "place others can write; fix it or give --state-dir",
                            dir, (unsigned)geteuid(), (unsigned)st.st_uid,
                            (unsigned)(st.st_mode & 0777));
    }
    return fd;
}

int bhd_adopt_sessions(struct bh_error *err)
{
    state_fd = state_dir_open(err);
    if (state_fd < 0)
        return -1;
    int64_t t0 = bh_now_ms();
    int dfd = dup(state_fd);
    DIR *d = dfd >= 0 ? fdopendir(dfd) : NULL;
    if (d == NULL) {
        if (dfd >= 0)
            close(dfd);
        return bh_error_errno(err, errno, "read the state directory `%s`", bhd_cfg.state_dir);
    }
    /* names first: adopting writes new records into the same directory */
    char(*fps)[BH_SHA256_HEX] = NULL;
    size_t n = 0, cap = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        size_t len = strlen(e->d_name);
        if (len != BH_SHA256_HEX - 1 + 5 || strcmp(e->d_name + BH_SHA256_HEX - 1, ".json") != 0)
            continue;
        char fp[BH_SHA256_HEX];
        snprintf(fp, sizeof(fp), "%.*s", BH_SHA256_HEX - 1, e->d_name);
        if (!bh_sha256_hex_valid(fp))
            continue;
        if (n == cap) {
            cap = cap ? cap * 2 : 64;
            char(*more)[BH_SHA256_HEX] = realloc(fps, cap * sizeof(*fps));
            if (more == NULL)
                break; /* adopt what was listed; the rest waits out its grace */
            fps = more;
        }
        memcpy(fps[n++], fp, BH_SHA256_HEX);
    }
    closedir(d);
    for (size_t i = 0; i < n; i++)
        adopt_one(fps[i]);
    free(fps);
    bhd_describe.adopted_sessions = n_adopted;
    bhd_describe.adopted_fresh = n_adopted_fresh;
    if (n > 0)
        bhd_log("adopted %u sessions (%u on a fresh sandbox) from %s in %lld ms", n_adopted,
                n_adopted_fresh, bhd_cfg.state_dir, (long long)(bh_now_ms() - t0));
    return 0;
}
