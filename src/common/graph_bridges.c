/* Graph bridges by one iterative depth-first search (graph_bridges.h). */
#include "common/graph_bridges.h"

#include <stdlib.h>
#include <string.h>

bool ts_graph_bridges(int64_t nvert, int64_t nedges, const int64_t (*ends)[2], const unsigned char *use,
                      unsigned char *bridge) {
    const size_t nv = (size_t)(nvert ? nvert : 1);
    int64_t *start = calloc(nv + 1, sizeof *start), *adj = malloc((size_t)(2 * nedges + 1) * sizeof *adj);
    int64_t *disc = malloc(nv * sizeof *disc), *low = malloc(nv * sizeof *low), *up = malloc(nv * sizeof *up);
    int64_t *next = malloc(nv * sizeof *next), *stack = malloc(nv * sizeof *stack);
    const bool ok = start && adj && disc && low && up && next && stack;
    if (ok) {
        memset(bridge, 0, (size_t)nedges);
        for (int64_t i = 0; i < nedges; i++)
            if (use[i]) start[ends[i][0] + 1]++, start[ends[i][1] + 1]++;
        for (int64_t t = 0; t < nvert; t++) start[t + 1] += start[t];
        for (int64_t t = 0; t < nvert; t++) next[t] = start[t];
        for (int64_t i = 0; i < nedges; i++) /* adjacency entries are edge indices */
            if (use[i]) adj[next[ends[i][0]]++] = i, adj[next[ends[i][1]]++] = i;
        for (int64_t t = 0; t < nvert; t++) disc[t] = -1, next[t] = start[t];
        int64_t clock = 0;
        for (int64_t root = 0; root < nvert; root++) {
            if (disc[root] >= 0) continue;
            int64_t depth = 0;
            stack[depth++] = root, disc[root] = low[root] = clock++, up[root] = -1;
            while (depth) {
                const int64_t v = stack[depth - 1];
                if (next[v] < start[v + 1]) {
                    const int64_t e = adj[next[v]++];
                    if (e == up[v]) continue; /* the edge we came by (a parallel one is a cycle) */
                    const int64_t u = ends[e][0] == v ? ends[e][1] : ends[e][0];
                    if (disc[u] < 0) {
                        up[u] = e, disc[u] = low[u] = clock++;
                        stack[depth++] = u;
                    } else if (disc[u] < low[v]) {
                        low[v] = disc[u];
                    }
                    continue;
                }
                depth--;
                if (depth) {
                    const int64_t w = stack[depth - 1];
                    if (low[v] < low[w]) low[w] = low[v];
                    if (low[v] > disc[w]) bridge[up[v]] = 1;
                }
            }
        }
    }
    free(start), free(adj), free(disc), free(low), free(up), free(next), free(stack);
    return ok;
}
