/* tessera: entry point and subcommand dispatch. */
#include "cli/cli.h"

#include <stdio.h>
#include <string.h>

static const struct {
    const char *name;
    int (*fn)(int, char **);
    const char *summary;
} COMMANDS[] = {
    {"simulate", cmd_simulate, "write a synthetic plate with ground-truth tile positions"},
    {"estimate", cmd_estimate, "register neighbouring tiles and solve tile positions (shifts YAML)"},
    {"solve", cmd_solve, "re-solve tile positions from the pairwise measurements of a shifts file"},
    {"fuse", cmd_fuse, "blend tiles at their positions into an OME-Zarr mosaic"},
    {"stitch", cmd_stitch, "estimate, then fuse"},
    {"info", cmd_info, "describe a plate or mosaic store"},
    {"preview", cmd_preview, "write a downsampled PNG of a mosaic"},
};
#define NCOMMANDS (sizeof COMMANDS / sizeof COMMANDS[0])

static void usage(FILE *f) {
    fprintf(f, "usage: tessera <command> [options]\n\n"
               "Stitch tiled microscope scans into OME-Zarr mosaics.\n\ncommands:\n");
    for (size_t i = 0; i < NCOMMANDS; i++) fprintf(f, "  %-9s %s\n", COMMANDS[i].name, COMMANDS[i].summary);
    fprintf(f, "\n'tessera <command> --help' describes a command's options.\n"
               "'tessera --version' prints the version.\n");
}

int main(int argc, char **argv) {
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
    for (size_t i = 0; i < NCOMMANDS; i++)
        if (strcmp(argv[1], COMMANDS[i].name) == 0) return COMMANDS[i].fn(argc - 1, argv + 1);
    fprintf(stderr, "tessera: unknown command '%s' (see 'tessera --help')\n", argv[1]);
    return CLI_USAGE;
}
