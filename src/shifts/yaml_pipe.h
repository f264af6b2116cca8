/* libyaml's event parser on a second thread: the shifts reader spends about
 * half its time in libyaml (tokenising, UTF-8 decoding) and half on the
 * events (checks, numbers, name lookups), so the two overlap. Events come
 * out in the parser's order, with the parser's error where it stopped:
 * the reader sees exactly what yaml_parser_parse would have given it. */
#ifndef TS_SHIFTS_YAML_PIPE_H
#define TS_SHIFTS_YAML_PIPE_H

#include <yaml.h>

typedef struct ts_yaml_pipe ts_yaml_pipe;

/* Starts parsing with parser (initialised, input set; the pipe's thread
 * owns it until ts_yaml_pipe_stop). NULL when no thread could be started
 * (then parse directly). */
ts_yaml_pipe *ts_yaml_pipe_start(yaml_parser_t *parser);

/* The next event, as yaml_parser_parse: returns 1 and fills ev (the caller
 * deletes it), or 0 on a parse error, with the parser's problem, context
 * and problem_mark copied out. After the stream end: YAML_NO_EVENT. */
int ts_yaml_pipe_next(ts_yaml_pipe *p, yaml_event_t *ev, const char **problem, const char **context,
                      yaml_mark_t *problem_mark);

/* Stops the thread (also mid-stream) and frees the events not taken. */
void ts_yaml_pipe_stop(ts_yaml_pipe *p);

#endif
