/* See yaml_pipe.h. A ring of batches of events: the parser thread fills a
 * free batch and publishes it, the reader takes batches in order; batching
 * keeps the locking to one per EVENTS_PER_BATCH events. */
#include "shifts/yaml_pipe.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#define EVENTS_PER_BATCH 1024
#define BATCHES 8

typedef struct batch {
    yaml_event_t ev[EVENTS_PER_BATCH];
    int n;
    bool failed; /* the parser failed after these events */
    const char *problem, *context;
    yaml_mark_t mark;
} batch;

struct ts_yaml_pipe {
    yaml_parser_t *parser;
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t changed;
    batch *ring;
    int head, count; /* the reader's batch, and how many are published */
    int taken;       /* events of ring[head] already handed out */
    bool producer_done, stop;
};

static void *parse_main(void *arg) {
    ts_yaml_pipe *p = arg;
    int tail = 0;
    bool done = false;
    while (!done) {
        pthread_mutex_lock(&p->lock);
        while (p->count == BATCHES && !p->stop) pthread_cond_wait(&p->changed, &p->lock);
        bool stop = p->stop;
        pthread_mutex_unlock(&p->lock);
        if (stop) break;
        batch *b = &p->ring[tail]; /* free: only this thread writes it now */
        b->n = 0;
        b->failed = false;
        while (b->n < EVENTS_PER_BATCH) {
            yaml_event_t *ev = &b->ev[b->n];
            if (!yaml_parser_parse(p->parser, ev)) {
                b->failed = true;
                b->problem = p->parser->problem;
                b->context = p->parser->context;
                b->mark = p->parser->problem_mark;
                done = true;
                break;
            }
            b->n++;
            if (ev->type == YAML_STREAM_END_EVENT) {
                done = true;
                break;
            }
        }
        pthread_mutex_lock(&p->lock);
        p->count++;
        pthread_cond_broadcast(&p->changed);
        pthread_mutex_unlock(&p->lock);
        tail = (tail + 1) % BATCHES;
    }
    pthread_mutex_lock(&p->lock);
    p->producer_done = true;
    pthread_cond_broadcast(&p->changed);
    pthread_mutex_unlock(&p->lock);
    return NULL;
}

ts_yaml_pipe *ts_yaml_pipe_start(yaml_parser_t *parser) {
    ts_yaml_pipe *p = calloc(1, sizeof *p);
    if (!p) return NULL;
    p->parser = parser;
    p->ring = malloc(BATCHES * sizeof *p->ring);
    if (!p->ring) {
        free(p);
        return NULL;
    }
    pthread_mutex_init(&p->lock, NULL);
    pthread_cond_init(&p->changed, NULL);
    if (pthread_create(&p->thread, NULL, parse_main, p) != 0) {
        pthread_mutex_destroy(&p->lock);
        pthread_cond_destroy(&p->changed);
        free(p->ring);
        free(p);
        return NULL;
    }
    return p;
}

int ts_yaml_pipe_next(ts_yaml_pipe *p, yaml_event_t *ev, const char **problem, const char **context,
                      yaml_mark_t *problem_mark) {
    for (;;) {
        pthread_mutex_lock(&p->lock);
        while (p->count == 0 && !p->producer_done) pthread_cond_wait(&p->changed, &p->lock);
        bool have = p->count > 0;
        pthread_mutex_unlock(&p->lock);
        if (!have) { /* after the stream end (or the error, already reported) */
            memset(ev, 0, sizeof *ev);
            ev->type = YAML_NO_EVENT;
            return 1;
        }
        batch *b = &p->ring[p->head];
        if (p->taken < b->n) {
            *ev = b->ev[p->taken++];
            return 1;
        }
        if (b->failed) {
            *problem = b->problem;
            *context = b->context;
            *problem_mark = b->mark;
            memset(ev, 0, sizeof *ev);
            return 0; /* stays at this batch: a later call fails again */
        }
        /* this batch is used up: hand it back */
        p->taken = 0;
        p->head = (p->head + 1) % BATCHES;
        pthread_mutex_lock(&p->lock);
        p->count--;
        pthread_cond_broadcast(&p->changed);
        pthread_mutex_unlock(&p->lock);
    }
}

void ts_yaml_pipe_stop(ts_yaml_pipe *p) {
    if (!p) return;
    pthread_mutex_lock(&p->lock);
    p->stop = true;
    pthread_cond_broadcast(&p->changed);
    pthread_mutex_unlock(&p->lock);
    pthread_join(p->thread, NULL);
    /* the events published and not handed out */
    for (int k = 0, h = p->head; k < p->count; k++, h = (h + 1) % BATCHES) {
        batch *b = &p->ring[h];
        for (int i = k == 0 ? p->taken : 0; i < b->n; i++) yaml_event_delete(&b->ev[i]);
    }
    pthread_mutex_destroy(&p->lock);
    pthread_cond_destroy(&p->changed);
    free(p->ring);
    free(p);
}
