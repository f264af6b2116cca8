/* tessera preview: placeholder until the stage lands (replaced by its implementation). */
#include "cli/cli.h"
#include <stdio.h>

int cmd_preview(int argc, char **argv) {
    (void)argc;
    (void)argv;
    fprintf(stderr, "tessera preview: not implemented yet\n");
    return CLI_FAIL;
}
