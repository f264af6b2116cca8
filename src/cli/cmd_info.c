/* tessera info: placeholder until the stage lands (replaced by its implementation). */
#include "cli/cli.h"
#include <stdio.h>

int cmd_info(int argc, char **argv) {
    (void)argc;
    (void)argv;
    fprintf(stderr, "tessera info: not implemented yet\n");
    return CLI_FAIL;
}
