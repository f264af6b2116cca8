/* Structure checks on the YAML event stream of a shifts (or guess) file,
 * applied to every event the reader sees, skipped nodes included:
 *
 * - nesting depth: the format nests 5 deep (confidence: WELL: {id: [[xa, ya], ...]});
 *   deeper files are refused at the first event past TS_YAML_MAX_DEPTH.
 *   libyaml's cost per event grows with the depth (80 KB of '[' took 7 s,
 *   400 KB over a minute), so the cap bounds the time as well.
 * - repeated keys: YAML forbids them, and the reader would let the later
 *   one win silently (a second total_translation replaced the first).
 *   Every mapping's keys are kept in a hash set while it is open.
 */
#ifndef TS_SHIFTS_YAML_GUARD_H
#define TS_SHIFTS_YAML_GUARD_H

#include <stdbool.h>
#include <stddef.h>
#include <yaml.h>

#define TS_YAML_MAX_DEPTH 32

typedef enum {
    TS_YAML_GUARD_OK = 0,
    TS_YAML_GUARD_BAD, /* the file is at fault: msg says why */
    TS_YAML_GUARD_NOMEM,
} ts_yaml_guard_result;

struct yaml_guard_frame;

typedef struct ts_yaml_guard {
    int depth;                       /* open collections */
    struct yaml_guard_frame *frames; /* TS_YAML_MAX_DEPTH of them */
} ts_yaml_guard;

bool ts_yaml_guard_init(ts_yaml_guard *g);
void ts_yaml_guard_free(ts_yaml_guard *g);

/* Checks one event (in stream order). On TS_YAML_GUARD_BAD, msg (n bytes)
 * says what is wrong, without the position (the event's mark has it). */
ts_yaml_guard_result ts_yaml_guard_event(ts_yaml_guard *g, const yaml_event_t *ev, char *msg, size_t n);

#endif
