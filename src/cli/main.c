/* tessera: entry point and subcommand dispatch; MPI set-up when launched by
 * mpirun (docs/mpi.md). */
#include "cli/cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef __GLIBC__
#include <malloc.h>
#endif

#ifdef TESSERA_HAVE_MPI
#include <mpi.h>
#endif

static const struct {
    const char *name;
    int (*fn)(int, char **);
    const char *summary;
    bool distributed; /* splits its work over MPI ranks */
} COMMANDS[] = {
    {"simulate", cmd_simulate, "write a synthetic plate with ground-truth tile positions", false},
    {"import", cmd_import, "make a plate from a folder of TIFF tiles named by grid position", false},
    {"estimate", cmd_estimate, "register neighbouring tiles and solve tile positions (shifts YAML)", true},
    {"solve", cmd_solve, "re-solve tile positions from the pairwise measurements of a shifts file", false},
    {"fuse", cmd_fuse, "blend tiles at their positions into an OME-Zarr mosaic", true},
    {"stitch", cmd_stitch, "estimate, then fuse", true},
    {"info", cmd_info, "describe a plate or mosaic store", false},
    {"preview", cmd_preview, "write a downsampled PNG of a mosaic", false},
    {"verify", cmd_verify, "read back every chunk and shard of a store, report what is damaged", false},
};
#define NCOMMANDS (sizeof COMMANDS / sizeof COMMANDS[0])

static void usage(FILE *f) {
    fprintf(f, "usage: tessera <command> [options]\n\n"
               "Stitch tiled microscope scans into OME-Zarr mosaics.\n\ncommands:\n");
    for (size_t i = 0; i < NCOMMANDS; i++) fprintf(f, "  %-9s %s\n", COMMANDS[i].name, COMMANDS[i].summary);
    fprintf(f, "\n'tessera <command> --help' describes a command's options; each takes its value\n"
               "as the next argument or after '=' (--overlap=10%%).\n"
               "'tessera --version' prints the version.\n"
               "estimate, fuse and stitch split their work over the ranks of 'mpirun -n N tessera ...'.\n");
}

/* The ranks of this run; NULL in one process. */
static ts_dist *g_dist;

const ts_dist *cli_dist(void) { return g_dist; }

/* Processes in the job that launched this one, from the launcher's
 * environment (Open MPI, PMIx, MPICH/Hydra and Slurm's PMI); 0 when not
 * launched by one. Read here, never in the library. */
static int launcher_size(void) {
    static const char *const vars[] = {"OMPI_COMM_WORLD_SIZE", "PMIX_SIZE", "PMI_SIZE"};
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
        const char *v = getenv(vars[i]);
        if (v && *v) return atoi(v) > 0 ? atoi(v) : 1;
    }
    if (getenv("PMIX_RANK") || getenv("PMI_RANK")) return 1;
    return 0;
}

static int run_command(size_t i, int argc, char **argv) {
    cli_progress_command(COMMANDS[i].name);
    int n = 0;
    char **args = cli_split_options(argc - 1, argv + 1, &n); /* --opt=value */
    int code = COMMANDS[i].fn(n, args);
    cli_split_free();
    return code;
}

#ifdef TESSERA_HAVE_MPI
/* Under mpirun: one MPI job. Only the first rank prints (stdout and
 * stderr of the others go to /dev/null: every failure is agreed on by all
 * ranks, so the first rank has the message to print). Commands that are
 * not distributed run on the first rank alone. Every rank exits with the
 * first rank's status. */
static int run_mpi(size_t cmd, int argc, char **argv) {
    int provided = 0;
    if (MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS) {
        fprintf(stderr, "tessera: MPI_Init failed\n");
        return CLI_FAIL;
    }
    int rank = 0, size = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (rank != 0) {
        if (!freopen("/dev/null", "w", stdout) || !freopen("/dev/null", "w", stderr)) {
            /* printing twice is better than not running */
        }
    }
    int code = CLI_FAIL;
    ts_error err;
    MPI_Comm world = MPI_COMM_WORLD;
    if (!COMMANDS[cmd].distributed) {
        if (rank == 0) code = run_command(cmd, argc, argv);
    } else {
        /* Every rank learns whether every rank has its ts_dist before any
         * runs the command (one that could not would leave the others
         * waiting in its first collective). */
        int ok = ts_dist_mpi_create(&world, &g_dist, &err) == TS_OK, all_ok = 0;
        MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
        if (all_ok) {
            code = run_command(cmd, argc, argv);
        } else {
            if (ok) {
                err.code = TS_ERR_NOMEM;
                snprintf(err.message, sizeof err.message, "another rank could not set up MPI");
            }
            code = cli_fail(COMMANDS[cmd].name, &err);
        }
        ts_dist_free(g_dist);
        g_dist = NULL;
    }
    MPI_Bcast(&code, 1, MPI_INT, 0, MPI_COMM_WORLD);
    MPI_Finalize();
    return code;
}
#endif

/* Freed buffers stay with the process for the next tile. glibc's defaults
 * map every buffer of 128 KiB or more afresh (a tile's raw samples,
 * compressed file and zstd context: 256^2 tiles qualify) and hand a free
 * heap top of more than 128 KiB back at once, so each tile read faulted
 * its pages in again; on this project's VM a page's first touch costs
 * about as much as decoding into it. Set explicitly, buffers up to 32 MiB
 * come from the heap and up to 64 MiB of free heap top is kept (setting
 * them also stops glibc's own adjustment, which raised the mapping
 * threshold only after the first free of each size). estimate's page
 * faults: 2971 -> 2178 on register_bench's 10x10 plate of 256^2 tiles,
 * 19,720 -> 16,449 on its 3x3 plate of 2048^2 (perf stat). */
static void keep_freed_memory(void) {
#ifdef __GLIBC__
    mallopt(M_MMAP_THRESHOLD, 32 << 20);
    mallopt(M_TRIM_THRESHOLD, 64 << 20);
#endif
}

int main(int argc, char **argv) {
    keep_freed_memory();
    if (argc < 2) {
        usage(stderr);
        return CLI_USAGE;
    }
    if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "help") == 0) {
        usage(stdout);
        return CLI_OK;
    }
    if (strcmp(argv[1], "--version") == 0 || strcmp(argv[1], "-V") == 0) {
        printf("tessera %s\n", ts_version());
        return CLI_OK;
    }
    for (size_t i = 0; i < NCOMMANDS; i++) {
        if (strcmp(argv[1], COMMANDS[i].name) != 0) continue;
        int ranks = launcher_size();
#ifdef TESSERA_HAVE_MPI
        if (ranks > 0) return run_mpi(i, argc, argv);
#else
        /* Every rank would do the whole job and write the same files. */
        if (ranks > 1) {
            fprintf(stderr, "tessera: launched as %d MPI processes but built without MPI "
                            "(configure with -DTESSERA_MPI=ON), or run one process\n", ranks);
            return CLI_FAIL;
        }
#endif
        return run_command(i, argc, argv);
    }
    fprintf(stderr, "tessera: unknown command '%s' (see 'tessera --help')\n", argv[1]);
    return CLI_USAGE;
}
