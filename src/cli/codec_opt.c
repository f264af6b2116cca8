/* --codec NAME[:LEVEL] for fuse, stitch, import and simulate. */
#include "cli/cli.h"

bool cli_codec_level(const char *cmd, const char *text, ts_codec *out, int *level) {
    ts_error err;
    if (ts_codec_parse(text, out, level, &err) == TS_OK) return true;
    cli_usage_error(cmd, "--codec: %s", err.message);
    return false;
}
