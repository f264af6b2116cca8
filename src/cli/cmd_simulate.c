/* tessera simulate: placeholder until the stage lands (replaced by its implementation). */
#include "cli/cli.h"
#include <stdio.h>

int cmd_simulate(int argc, char **argv) {
    (void)argc;
    (void)argv;
    fprintf(stderr, "tessera simulate: not implemented yet\n");
    return CLI_FAIL;
}
