/* Graph bridges: the edges of an undirected graph that lie in no cycle,
 * whose removal splits their connected group. Estimate's quality check
 * names the tiles that hang on one weak such pair; its stage pass refuses
 * a confident pair far outside the stage's window only where no loop of
 * pairs can check it. */
#ifndef TS_COMMON_GRAPH_BRIDGES_H
#define TS_COMMON_GRAPH_BRIDGES_H

#include <stdbool.h>
#include <stdint.h>

/* Marks bridge[i] (0/1) for the edges ends[i] = {u, v} (vertices in
 * [0, nvert)) with use[i] set that are graph bridges of the graph of the
 * used edges; unused edges get 0. One iterative depth-first search
 * (Tarjan), O(nvert + nedges). False: out of memory (bridge untouched). */
bool ts_graph_bridges(int64_t nvert, int64_t nedges, const int64_t (*ends)[2], const unsigned char *use,
                      unsigned char *bridge);

#endif
