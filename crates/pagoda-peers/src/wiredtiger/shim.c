/* Flat C entry points over WiredTiger's method tables (WT_CONNECTION, WT_SESSION and
 * WT_CURSOR are structs of function pointers). Compiled against the installed wiredtiger.h,
 * so the struct layouts always match the library that is linked; the Rust side
 * (wiredtiger/ffi.rs) declares only these functions. Keys and values are raw byte strings
 * (key_format=u, value_format=u): WT_ITEMs built here from a pointer and a length. */
#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <wiredtiger.h>

const int PGWT_NOTFOUND = WT_NOTFOUND;
const int PGWT_ROLLBACK = WT_ROLLBACK;
const int PGWT_EBUSY = EBUSY;

const char *pgwt_strerror(int code) { return wiredtiger_strerror(code); }

void pgwt_version(int *major, int *minor, int *patch) { (void)wiredtiger_version(major, minor, patch); }

int pgwt_open(const char *home, const char *config, WT_CONNECTION **conn) {
    return wiredtiger_open(home, NULL, config, conn);
}

int pgwt_close(WT_CONNECTION *conn) { return conn->close(conn, NULL); }

int pgwt_session(WT_CONNECTION *conn, WT_SESSION **session) {
    return conn->open_session(conn, NULL, NULL, session);
}

int pgwt_session_close(WT_SESSION *s) { return s->close(s, NULL); }

int pgwt_create(WT_SESSION *s, const char *uri, const char *config) {
    return s->create(s, uri, config);
}

int pgwt_begin(WT_SESSION *s, const char *config) { return s->begin_transaction(s, config); }

int pgwt_commit(WT_SESSION *s) { return s->commit_transaction(s, NULL); }

int pgwt_rollback(WT_SESSION *s) { return s->rollback_transaction(s, NULL); }

int pgwt_checkpoint(WT_SESSION *s) { return s->checkpoint(s, NULL); }

int pgwt_log_flush(WT_SESSION *s) { return s->log_flush(s, "sync=on"); }

int pgwt_cursor(WT_SESSION *s, const char *uri, const char *config, WT_CURSOR **c) {
    return s->open_cursor(s, uri, NULL, config, c);
}

int pgwt_cursor_close(WT_CURSOR *c) { return c->close(c); }

int pgwt_cursor_reset(WT_CURSOR *c) { return c->reset(c); }

static void set_key(WT_CURSOR *c, const void *k, size_t kl) {
    WT_ITEM item;
    memset(&item, 0, sizeof item);
    item.data = k;
    item.size = kl;
    c->set_key(c, &item);
}

/* The value of `k`; WT_NOTFOUND when absent. The value is valid until the cursor moves. */
int pgwt_search(WT_CURSOR *c, const void *k, size_t kl, const void **v, size_t *vl) {
    WT_ITEM val;
    int r;
    set_key(c, k, kl);
    if ((r = c->search(c)) != 0)
        return r;
    if ((r = c->get_value(c, &val)) != 0)
        return r;
    *v = val.data;
    *vl = val.size;
    return 0;
}

/* Inserts or replaces (cursors are opened with overwrite=true, WiredTiger's default). */
int pgwt_insert(WT_CURSOR *c, const void *k, size_t kl, const void *v, size_t vl) {
    WT_ITEM val;
    memset(&val, 0, sizeof val);
    val.data = v;
    val.size = vl;
    set_key(c, k, kl);
    c->set_value(c, &val);
    return c->insert(c);
}

int pgwt_remove(WT_CURSOR *c, const void *k, size_t kl) {
    set_key(c, k, kl);
    return c->remove(c);
}

int pgwt_search_near(WT_CURSOR *c, const void *k, size_t kl, int *exact) {
    set_key(c, k, kl);
    return c->search_near(c, exact);
}

int pgwt_next(WT_CURSOR *c) { return c->next(c); }

int pgwt_prev(WT_CURSOR *c) { return c->prev(c); }

/* The pair the cursor is on; valid until it moves. */
int pgwt_current(WT_CURSOR *c, const void **k, size_t *kl, const void **v, size_t *vl) {
    WT_ITEM key, val;
    int r;
    if ((r = c->get_key(c, &key)) != 0)
        return r;
    if ((r = c->get_value(c, &val)) != 0)
        return r;
    *k = key.data;
    *kl = key.size;
    *v = val.data;
    *vl = val.size;
    return 0;
}

/* The key of a "metadata:" cursor (a string). */
int pgwt_meta_key(WT_CURSOR *c, const char **key) { return c->get_key(c, key); }

/* Connection statistics the adapter reports, in this order (see wiredtiger/ffi.rs). */
static const int STATS[] = {
    WT_STAT_CONN_TXN_COMMIT,
    WT_STAT_CONN_TXN_ROLLBACK,
    WT_STAT_CONN_LOG_SYNC,
    WT_STAT_CONN_LOG_WRITES,
    WT_STAT_CONN_LOG_SLOT_CLOSES,
    WT_STAT_CONN_LOG_BYTES_WRITTEN,
    WT_STAT_CONN_CACHE_BYTES_INUSE,
    WT_STAT_CONN_TXN_CHECKPOINT,
};

int pgwt_stats_len(void) { return (int)(sizeof STATS / sizeof STATS[0]); }

/* Fills out[0..pgwt_stats_len()) from a statistics cursor (statistics=(fast) must be on). */
int pgwt_stats(WT_SESSION *s, int64_t *out) {
    WT_CURSOR *c;
    const char *desc, *pvalue;
    int64_t value;
    int r, i;
    if ((r = s->open_cursor(s, "statistics:", NULL, NULL, &c)) != 0)
        return r;
    for (i = 0; i < pgwt_stats_len(); i++) {
        c->set_key(c, STATS[i]);
        if ((r = c->search(c)) != 0 || (r = c->get_value(c, &desc, &pvalue, &value)) != 0) {
            (void)c->close(c);
            return r;
        }
        out[i] = value;
    }
    return c->close(c);
}
