/* tessera verify: read back every stored piece of a store and report each
 * missing, truncated or corrupt one by array path and key. Exit 0 when all
 * is well, 1 when anything is wrong (or the store cannot be read), 2 on
 * bad usage. */
#include "cli/cli.h"

#include <jansson.h>
#include <stdio.h>
#include <string.h>

static const char *CMD = "verify";

static void help(void) {
    printf("usage: tessera verify STORE [--json] [--threads N] [--require-chunks] [--max-problems N]\n\n"
           "Read back every array of a store and check each stored piece: every level of every\n"
           "image a plate lists (the tiles of an input plate, the mosaics of a fuse output), an\n"
           "OME image, the arrays under a zarr group, or one zarr array. Each chunk is decoded\n"
           "through its codec chain and its size checked; each shard's index is checked\n"
           "(CRC32C, entries inside the file and not overlapping, empty sentinels) and every\n"
           "inner chunk decoded. A listed well, image or level whose metadata is absent is an\n"
           "error. An absent chunk or shard reads as the fill value in zarr (tessera writes\n"
           "none that is all fill), so it is counted, not an error, unless --require-chunks.\n"
           "Memory: one stored piece per thread.\n\n"
           "options:\n"
           "  --json               print a one-line JSON summary, with the problems listed\n"
           "  --progress MODE      auto (bar on a terminal, else log), bar, log[:SECONDS], none\n"
           "  --threads N          threads (default 0 = all cores)\n"
           "  --require-chunks     an absent chunk or shard is an error (stores known to be dense)\n"
           "  --max-problems N     problems listed (the first, in store order; default 1000);\n"
           "                       all are counted\n\n"
           "exit status: 0 no problem, 1 problems found or the store unreadable, 2 bad usage\n");
}

static void print_json(const char *store, const ts_verify_result *r, double seconds) {
    json_t *errors = json_array();
    for (int i = 0; i < r->nlisted; i++) {
        const ts_verify_problem *p = &r->problems[i];
        json_t *e = json_pack("{s:o, s:o}", "path", cli_json_path(p->path), "key", cli_json_path(p->key));
        if (p->inner >= 0) json_object_set_new(e, "inner", json_integer((json_int_t)p->inner));
        json_object_set_new(e, "kind", json_string(ts_verify_kind_name(p->kind)));
        json_object_set_new(e, "reason", cli_json_path(p->reason));
        json_array_append_new(errors, e);
    }
    cli_json_emit(CMD, store, NULL,
                  json_pack("{s:o, s:b, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:i, s:f, s:I, s:o}", "store",
                            cli_json_path(store), "ok", r->nproblems == 0, "images", (json_int_t)r->images, "arrays",
                            (json_int_t)r->arrays, "blocks", (json_int_t)r->blocks, "chunks", (json_int_t)r->chunks,
                            "empty", (json_int_t)r->empty, "absent", (json_int_t)r->absent, "bytes_read",
                            (json_int_t)r->bytes_read, "bytes_decoded", (json_int_t)r->bytes_decoded, "threads",
                            r->threads, "seconds", seconds, "nerrors", (json_int_t)r->nproblems, "errors", errors));
}

static void print_text(const char *store, const ts_verify_result *r, double seconds) {
    for (int i = 0; i < r->nlisted; i++) {
        const ts_verify_problem *p = &r->problems[i];
        printf("%s: %s%s%s", ts_verify_kind_name(p->kind), p->path[0] ? p->path : "(store)", p->key[0] ? " " : "",
               p->key);
        if (p->inner >= 0) printf(" inner chunk %lld", (long long)p->inner);
        printf(": %s\n", p->reason);
    }
    if (r->nproblems > r->nlisted)
        printf("... %lld more problem%s not listed (--max-problems)\n", (long long)(r->nproblems - r->nlisted),
               r->nproblems - r->nlisted == 1 ? "" : "s");
    printf("%s: %lld array%s", store, (long long)r->arrays, r->arrays == 1 ? "" : "s");
    if (r->images) printf(" in %lld image%s", (long long)r->images, r->images == 1 ? "" : "s");
    printf(", %lld chunk%s decoded from %lld file%s (%.1f MB read, %.1f MB decoded) in %.2f s, %d thread%s\n",
           (long long)r->chunks, r->chunks == 1 ? "" : "s", (long long)r->blocks, r->blocks == 1 ? "" : "s",
           (double)r->bytes_read / 1e6, (double)r->bytes_decoded / 1e6, seconds, r->threads,
           r->threads == 1 ? "" : "s");
    if (r->absent || r->empty)
        printf("read as the fill value: %lld absent chunk/shard file%s, %lld empty inner chunk%s\n",
               (long long)r->absent, r->absent == 1 ? "" : "s", (long long)r->empty, r->empty == 1 ? "" : "s");
    if (r->nproblems) printf("%lld problem%s\n", (long long)r->nproblems, r->nproblems == 1 ? "" : "s");
    else printf("ok\n");
}

int cmd_verify(int argc, char **argv) {
    ts_verify_options o;
    ts_verify_options_init(&o);
    bool json = false;
    const char *pos[1];
    int npos = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            help();
            return CLI_OK;
        } else if (!strcmp(a, "--json")) {
            json = true;
        } else if (!strcmp(a, "--progress")) {
            if (!(v = cli_value(CMD, argc, argv, &i)) || !cli_progress_mode(CMD, v)) return CLI_USAGE;
        } else if (!strcmp(a, "--require-chunks")) {
            o.require_chunks = true;
        } else if (!strcmp(a, "--threads")) {
            if (!(v = cli_value(CMD, argc, argv, &i)) || !cli_int(CMD, a, v, 0, 4096, &o.threads)) return CLI_USAGE;
        } else if (!strcmp(a, "--max-problems")) {
            if (!(v = cli_value(CMD, argc, argv, &i)) || !cli_int(CMD, a, v, 0, 100000000, &o.max_problems))
                return CLI_USAGE;
        } else if (cli_positional(CMD, a, pos, &npos, 1) != CLI_OK) {
            return CLI_USAGE;
        }
    }
    if (npos != 1) return cli_usage_error(CMD, "missing STORE");
    o.store = pos[0];
    o.progress = cli_progress;
    ts_verify_result r;
    ts_error err = {0};
    double t0 = cli_now();
    if (ts_verify(&o, &r, &err) != TS_OK) return cli_fail(CMD, &err);
    double seconds = cli_now() - t0;
    if (json) print_json(o.store, &r, seconds);
    else print_text(o.store, &r, seconds);
    int code = r.nproblems ? CLI_FAIL : CLI_OK;
    /* the failure's one line on stderr, as every command gives */
    if (r.nproblems) {
        fprintf(stderr, "tessera verify: %lld problem%s in %s", (long long)r.nproblems, r.nproblems == 1 ? "" : "s",
                o.store);
        if (r.nlisted)
            fprintf(stderr, " (first: %s %s%s%s)", ts_verify_kind_name(r.problems[0].kind),
                    r.problems[0].path[0] ? r.problems[0].path : "(store)", r.problems[0].key[0] ? " " : "",
                    r.problems[0].key);
        fputc('\n', stderr);
    }
    ts_verify_result_free(&r);
    return code;
}
