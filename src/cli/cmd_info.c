/* tessera info: describe a plate or mosaic store (text, or JSON with --json).
 * The text is rendered from the same JSON the library returns, so the two
 * never disagree. What does not read (the JSON's "errors") is shown in the
 * description and makes the exit status 1, with one line on stderr. */
#include "cli/cli.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *CMD = "info";

static void help(void) {
    printf("usage: tessera info STORE [--json] [--wells-all]\n"
           "       tessera info --devices [--json]\n\n"
           "Describe an OME-Zarr plate (input tiles or fused mosaic) or image: format version,\n"
           "wells, positions per well, tile shape and dtype, channels, codecs, chunk and shard\n"
           "layout of each resolution level. Exit status 1 when part of the store does not\n"
           "read (an image's metadata, a level's array): the description shows it, and\n"
           "--json lists it under \"errors\".\n\n"
           "options:\n"
           "  --json        print the description as JSON\n"
           "  --wells-all   list every well in the text output (default: the first 20\n"
           "                with metadata)\n"
           "  --devices     whether --device gpu can run here (docs/gpu.md): the CUDA\n"
           "                device, or why there is none; exit status 1 when none\n");
}

static void print_ints(json_t *a, const char *sep) {
    size_t i;
    json_t *v;
    json_array_foreach(a, i, v) printf("%s%" JSON_INTEGER_FORMAT, i ? sep : "", json_integer_value(v));
}

static void print_codecs(json_t *a) {
    size_t i;
    json_t *c;
    if (json_array_size(a) == 0) printf("none");
    json_array_foreach(a, i, c) {
        const char *name = json_string_value(json_object_get(c, "name"));
        printf("%s%s", i ? " + " : "", name ? name : "?");
        json_t *lv = json_object_get(c, "level");
        json_t *cn = json_object_get(c, "cname");
        if (cn) printf("(%s, clevel %" JSON_INTEGER_FORMAT ", %s)", json_string_value(cn),
                       json_integer_value(json_object_get(c, "clevel")),
                       json_string_value(json_object_get(c, "shuffle")));
        else if (lv) printf("(level %" JSON_INTEGER_FORMAT ")", json_integer_value(lv));
    }
}

static void print_image(json_t *img, const char *indent) {
    json_t *e = json_object_get(img, "error");
    if (e) {
        printf("%simage metadata: ERROR %s\n", indent, json_string_value(e));
        return;
    }
    printf("%saxes: %s", indent, json_string_value(json_object_get(img, "axes")));
    json_t *sc = json_object_get(img, "scale");
    printf("   scale:");
    size_t i;
    json_t *v;
    json_array_foreach(sc, i, v) printf(" %g", json_number_value(v));
    json_t *unit = json_object_get(img, "space_unit");
    if (unit) printf(" (%s)", json_string_value(unit));
    printf("\n");
    json_t *ts = json_object_get(img, "tile_shape");
    if (ts)
        printf("%sshape (y, x): %" JSON_INTEGER_FORMAT " x %" JSON_INTEGER_FORMAT "   dtype: %s\n",
               indent, json_integer_value(json_array_get(ts, 0)),
               json_integer_value(json_array_get(ts, 1)),
               json_string_value(json_object_get(img, "dtype")));
    json_t *chs = json_object_get(img, "channels");
    printf("%schannels (%zu):", indent, json_array_size(chs));
    json_array_foreach(chs, i, v) {
        json_t *col = json_object_get(v, "color");
        printf("%s %s", i ? "," : "", json_string_value(json_object_get(v, "label")));
        if (col) printf(" [#%s]", json_string_value(col));
    }
    printf("\n");
    json_t *levels = json_object_get(img, "levels");
    json_array_foreach(levels, i, v) {
        printf("%slevel %s: ", indent, json_string_value(json_object_get(v, "path")));
        json_t *err = json_object_get(v, "error");
        if (err) {
            printf("ERROR %s\n", json_string_value(err));
            continue;
        }
        printf("zarr v%" JSON_INTEGER_FORMAT " shape ", json_integer_value(json_object_get(v, "zarr_format")));
        print_ints(json_object_get(v, "shape"), "x");
        printf(" %s, chunks ", json_string_value(json_object_get(v, "dtype")));
        print_ints(json_object_get(v, "chunk_shape"), "x");
        if (json_is_true(json_object_get(v, "sharded"))) {
            printf(" in shards ");
            print_ints(json_object_get(v, "shard_shape"), "x");
        }
        printf(" (%" JSON_INTEGER_FORMAT " %s), codecs ",
               json_integer_value(json_object_get(v, "blocks")),
               json_is_true(json_object_get(v, "sharded")) ? "shards" : "chunks");
        print_codecs(json_object_get(v, "codecs"));
        printf("\n");
    }
    json_t *labels = json_object_get(img, "labels");
    if (json_array_size(labels) == 0) return;
    printf("%slabels:", indent);
    json_array_foreach(labels, i, v) {
        json_t *dt = json_object_get(v, "dtype");
        printf("%s %s", i ? "," : "", json_string_value(json_object_get(v, "name")));
        if (dt) printf(" (%s, %" JSON_INTEGER_FORMAT " levels)", json_string_value(dt),
                       json_integer_value(json_object_get(v, "levels")));
        else printf(" (ERROR %s)", json_string_value(json_object_get(v, "error")));
    }
    printf("\n");
}

static void print_text(json_t *root, bool all_wells) {
    const char *kind = json_string_value(json_object_get(root, "kind"));
    printf("%s: OME-Zarr %s %s (zarr v%s)\n", json_string_value(json_object_get(root, "store")),
           json_string_value(json_object_get(root, "format")), kind ? kind : "?",
           strcmp(json_string_value(json_object_get(root, "format")), "0.4") == 0 ? "2" : "3");
    if (kind && strcmp(kind, "plate") == 0) {
        const char *name = json_string_value(json_object_get(root, "name"));
        if (name && *name) printf("name: %s\n", name);
        json_t *wells = json_object_get(root, "wells");
        size_t i, nmissing = 0, shown = 0;
        json_t *w;
        json_array_foreach(wells, i, w) nmissing += json_is_true(json_object_get(w, "metadata_missing"));
        printf("wells: %" JSON_INTEGER_FORMAT "   positions: %" JSON_INTEGER_FORMAT
               "   field_count: %" JSON_INTEGER_FORMAT "\n",
               json_integer_value(json_object_get(root, "nwells")),
               json_integer_value(json_object_get(root, "npositions")),
               json_integer_value(json_object_get(root, "field_count")));
        if (nmissing)
            printf("(%zu listed well%s without well metadata on disk%s)\n", nmissing,
                   nmissing == 1 ? "" : "s", all_wells ? "" : ", not shown");
        json_array_foreach(wells, i, w) {
            bool missing = json_is_true(json_object_get(w, "metadata_missing"));
            if (missing && !all_wells) continue;
            if (!all_wells && shown++ >= 20) {
                printf("  ... more wells (--wells-all lists them)\n");
                break;
            }
            printf("  %-6s %6" JSON_INTEGER_FORMAT " position%s", json_string_value(json_object_get(w, "path")),
                   json_integer_value(json_object_get(w, "positions")),
                   json_integer_value(json_object_get(w, "positions")) == 1 ? "" : "s");
            json_t *g = json_object_get(w, "grid_xxxyyy");
            if (g)
                printf("  grid x %" JSON_INTEGER_FORMAT "..%" JSON_INTEGER_FORMAT
                       ", y %" JSON_INTEGER_FORMAT "..%" JSON_INTEGER_FORMAT,
                       json_integer_value(json_array_get(json_object_get(g, "x"), 0)),
                       json_integer_value(json_array_get(json_object_get(g, "x"), 1)),
                       json_integer_value(json_array_get(json_object_get(g, "y"), 0)),
                       json_integer_value(json_array_get(json_object_get(g, "y"), 1)));
            else if (json_object_get(w, "first"))
                printf("  (%s .. %s)", json_string_value(json_object_get(w, "first")),
                       json_string_value(json_object_get(w, "last")));
            if (json_is_true(json_object_get(w, "metadata_missing")))
                printf("  (well metadata missing)");
            printf("\n");
        }
        json_t *img = json_object_get(root, "image");
        if (img) {
            printf("image %s:\n", json_string_value(json_object_get(img, "path")));
            print_image(img, "  ");
        }
    } else {
        json_t *img = json_object_get(root, "image");
        json_t *path = img ? json_object_get(img, "path") : NULL;
        if (path) printf("image %s:\n", json_string_value(path));
        if (img) print_image(img, "  ");
    }
}

int cmd_info(int argc, char **argv) {
    const char *store = NULL;
    bool json = false, all_wells = false, devices = false;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            help();
            return CLI_OK;
        } else if (!strcmp(argv[i], "--json")) {
            json = true;
        } else if (!strcmp(argv[i], "--wells-all")) {
            all_wells = true;
        } else if (!strcmp(argv[i], "--devices")) {
            devices = true;
        } else if (cli_stray_value(CMD, argv[i])) {
            return CLI_USAGE;
        } else if (argv[i][0] == '-' && argv[i][1]) {
            return cli_usage_error(CMD, "unknown option '%s'", argv[i]);
        } else if (!store) {
            store = argv[i];
        } else {
            return cli_usage_error(CMD, "one STORE only (got '%s' and '%s')", store, argv[i]);
        }
    }
    if (devices) {
        if (store) return cli_usage_error(CMD, "--devices takes no STORE (got '%s')", store);
        char why[512];
        bool gpu = ts_gpu_info(why, sizeof why);
        if (json) {
            json_t *j = json_pack("{s:b, s:s}", "gpu", gpu, "description", why);
            char *t = json_dumps(j, JSON_INDENT(2));
            if (t) puts(t);
            free(t);
            json_decref(j);
        } else {
            printf("gpu: %s\n", why);
        }
        return gpu ? CLI_OK : CLI_FAIL;
    }
    if (!store) return cli_usage_error(CMD, "missing STORE");
    char *text = NULL;
    ts_error err = {0};
    if (ts_info_json(store, &text, &err) != TS_OK) return cli_fail(CMD, &err);
    json_t *root = json_loads(text, 0, NULL);
    if (!root) {
        free(text);
        return cli_fail(CMD, &(ts_error){TS_ERR_INTERNAL, "the store's description is not valid JSON"});
    }
    if (json) cli_json_emit(CMD, store, NULL, json_incref(root));
    else print_text(root, all_wells);
    free(text);
    json_t *errors = json_object_get(root, "errors");
    size_t nerrors = json_array_size(errors);
    if (nerrors) {
        fflush(stdout);
        fprintf(stderr, "tessera %s: %s", CMD, json_string_value(json_array_get(errors, 0)));
        if (nerrors > 1) fprintf(stderr, " (and %zu more error%s)", nerrors - 1, nerrors > 2 ? "s" : "");
        fputc('\n', stderr);
    }
    json_decref(root);
    return nerrors ? CLI_FAIL : CLI_OK;
}
