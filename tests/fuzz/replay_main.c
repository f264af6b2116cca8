/*
 * Replays saved fuzz inputs through a target without libFuzzer (the normal
 * gcc build and the sanitizer build link this main with the target's own
 * source). Arguments: files or directories (every regular file directly
 * inside, in name order). Fails when an argument cannot be read or when no
 * input was found at all, so a moved corpus cannot pass by replaying nothing;
 * an input that breaks an invariant aborts in the target.
 */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#if defined(__SANITIZE_ADDRESS__)
#define REPLAY_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define REPLAY_ASAN 1
#endif
#endif

/* Address space for the replay, as libFuzzer's -rss_limit_mb/malloc limit
 * is for the fuzzer: an allocation sized from what a small file claims
 * (over 2 GiB) then fails, and the target's out-of-memory check reports it,
 * instead of succeeding on a machine that overcommits. Not under ASan,
 * which reserves terabytes of shadow memory (and reports such requests). */
#define REPLAY_MAX_AS ((rlim_t)2 << 30)

static void limit_memory(void) {
#ifndef REPLAY_ASAN
    struct rlimit rl;
    if (getrlimit(RLIMIT_AS, &rl) == 0 && (rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur > REPLAY_MAX_AS)) {
        rl.rlim_cur = REPLAY_MAX_AS;
        setrlimit(RLIMIT_AS, &rl);
    }
#endif
}

static int replay_file(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) { fprintf(stderr, "replay: cannot open %s\n", path); return -1; }
    size_t cap = 1 << 16, n = 0;
    uint8_t *buf = malloc(cap);
    size_t got;
    while (buf && (got = fread(buf + n, 1, cap - n, f)) > 0) {
        n += got;
        if (n == cap) {
            uint8_t *nb = realloc(buf, cap * 2);
            if (!nb) { free(buf); buf = NULL; break; }
            buf = nb;
            cap *= 2;
        }
    }
    int bad = ferror(f) || !buf;
    fclose(f);
    if (bad) { free(buf); fprintf(stderr, "replay: cannot read %s\n", path); return -1; }
    /* A private copy of exactly n bytes, as libFuzzer gives: reads past the
     * end of the input are caught by ASan in the sanitizer build. */
    uint8_t *in = malloc(n ? n : 1);
    if (!in) { free(buf); return -1; }
    memcpy(in, buf, n);
    free(buf);
    LLVMFuzzerTestOneInput(in, n);
    free(in);
    return 1;
}

static int by_name(const struct dirent **a, const struct dirent **b) {
    return strcmp((*a)->d_name, (*b)->d_name);
}

int main(int argc, char **argv) {
    limit_memory();
    long total = 0;
    for (int i = 1; i < argc; i++) {
        struct stat sb;
        if (stat(argv[i], &sb) != 0) { fprintf(stderr, "replay: no such input %s\n", argv[i]); return 1; }
        if (!S_ISDIR(sb.st_mode)) {
            if (replay_file(argv[i]) < 0) return 1;
            total++;
            continue;
        }
        struct dirent **list = NULL;
        int n = scandir(argv[i], &list, NULL, by_name);
        if (n < 0) { fprintf(stderr, "replay: cannot list %s\n", argv[i]); return 1; }
        long here = 0;
        int rc = 0;
        for (int k = 0; k < n; k++) {
            char path[4096];
            snprintf(path, sizeof path, "%s/%s", argv[i], list[k]->d_name);
            if (list[k]->d_name[0] != '.' && stat(path, &sb) == 0 && S_ISREG(sb.st_mode)) {
                if (replay_file(path) < 0) rc = 1;
                here++;
            }
            free(list[k]);
        }
        free(list);
        if (rc) return 1;
        printf("replay: %ld inputs from %s\n", here, argv[i]);
        total += here;
    }
    if (total == 0) { fprintf(stderr, "replay: no inputs\n"); return 1; }
    printf("replay: %ld inputs passed\n", total);
    return 0;
}
