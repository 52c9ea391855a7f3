/* pinload._pinload: the log queue, filled by the library's threads,
 * drained under the GIL (pinload_py.h). */
#include "pinload_py.h"

#define LOGQ_CAP 4096 /* messages kept between two drains; more are counted */

typedef struct logmsg {
    struct logmsg *next;
    int level;
    char text[];
} logmsg;

struct logq {
    pthread_mutex_t mu;
    logmsg *head, *tail;
    size_t n;
    uint64_t dropped;
};

void logq_push(void *ctx, pl_log_level level, const char *msg)
{
    logq *q = ctx;
    const size_t len = strlen(msg);
    logmsg *m = NULL;
    pthread_mutex_lock(&q->mu);
    if (q->n < LOGQ_CAP)
        m = malloc(sizeof *m + len + 1);
    if (!m) {
        q->dropped++;
        pthread_mutex_unlock(&q->mu);
        return;
    }
    m->next = NULL;
    m->level = (int)level;
    memcpy(m->text, msg, len + 1);
    if (q->tail)
        q->tail->next = m;
    else
        q->head = m;
    q->tail = m;
    q->n++;
    pthread_mutex_unlock(&q->mu);
}

/* cb raised: reported as unraisable, as a log call must not fail the
 * call that drains it, except a KeyboardInterrupt: Ctrl-C landing while
 * the callback ran (Python's logging, say) is the user's, so it is armed
 * again, to be raised at the next check of the main thread, never lost. */
static void callback_failed(PyObject *cb)
{
    if (PyErr_ExceptionMatches(PyExc_KeyboardInterrupt)) {
        PyErr_Clear();
        PyErr_SetInterrupt();
        return;
    }
    PyErr_WriteUnraisable(cb);
}

/* Hand every queued message to cb(level, text); with the GIL, and with no
 * exception set (callback_failed: what one raised by cb becomes). */
void logq_drain(logq *q, PyObject *cb)
{
    if (!q)
        return;
    pthread_mutex_lock(&q->mu);
    logmsg *m = q->head;
    const uint64_t dropped = q->dropped;
    q->head = q->tail = NULL;
    q->n = 0;
    q->dropped = 0;
    pthread_mutex_unlock(&q->mu);
    while (m) {
        logmsg *next = m->next;
        if (cb && cb != Py_None) {
            PyObject *text = PyUnicode_DecodeUTF8(
                m->text, (Py_ssize_t)strlen(m->text), "backslashreplace");
            PyObject *r =
                text ? PyObject_CallFunction(cb, "iO", m->level, text) : NULL;
            Py_XDECREF(text);
            if (r)
                Py_DECREF(r);
            else
                callback_failed(cb);
        }
        free(m);
        m = next;
    }
    if (dropped && cb && cb != Py_None) {
        PyObject *r = PyObject_CallFunction(
            cb, "is", (int)PL_LOG_WARNING,
            "log messages were dropped: more than 4096 queued between two "
            "calls into the loader");
        if (r)
            Py_DECREF(r);
        else
            callback_failed(cb);
    }
}

logq *logq_new(void)
{
    logq *q = calloc(1, sizeof *q);
    if (q)
        pthread_mutex_init(&q->mu, NULL);
    return q;
}

void logq_free(logq *q)
{
    if (!q)
        return;
    for (logmsg *m = q->head, *next; m; m = next) {
        next = m->next;
        free(m);
    }
    pthread_mutex_destroy(&q->mu);
    free(q);
}
