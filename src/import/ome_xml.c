/* OME-XML of OME-TIFF files through libxml2 (see ome_xml.h). Elements are
 * matched by local name whatever the schema namespace (2008 to 2016-06 all
 * name them alike). The parser never touches the network and substitutes no
 * entities (an XML file cannot pull in other files or expand itself); its
 * messages go into ts_error, never to stderr. */
#include "import/ome_xml.h"

#include <libxml/parser.h>
#include <libxml/tree.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"

void ti_ome_init(void) { xmlInitParser(); }

double ti_ome_unit_um(const char *u) {
    static const struct {
        const char *sym;
        double um;
    } UNITS[] = {{"pm", 1e-6}, {"\xc3\x85", 1e-4} /* Å */, {"\xe2\x84\xab", 1e-4} /* Angstrom sign */,
                 {"nm", 1e-3}, {"\xc2\xb5m", 1} /* micro sign */, {"\xce\xbcm", 1} /* Greek mu */,
                 {"um", 1},    {"mm", 1e3}, {"cm", 1e4}, {"dm", 1e5}, {"m", 1e6}, {"km", 1e9}};
    for (size_t i = 0; i < sizeof UNITS / sizeof UNITS[0]; i++)
        if (!strcmp(u, UNITS[i].sym)) return UNITS[i].um;
    return 0;
}

static bool named(const xmlNode *n, const char *name) {
    return n && n->type == XML_ELEMENT_NODE && !strcmp((const char *)n->name, name);
}

static const xmlNode *child(const xmlNode *n, const char *name) {
    for (const xmlNode *c = n ? n->children : NULL; c; c = c->next)
        if (named(c, name)) return c;
    return NULL;
}

/* An attribute's value copied into out (size bytes), cut to fit on a
 * whole UTF-8 character (out goes into JSON labels, which take no broken
 * one); false when absent. */
static bool attr(const xmlNode *n, const char *name, char *out, size_t size) {
    xmlChar *v = xmlGetProp((xmlNode *)n, (const xmlChar *)name);
    if (!v) return false;
    size_t len = strlen((const char *)v);
    if (len >= size) {
        len = size - 1;
        while (len > 0 && (v[len] & 0xC0) == 0x80) len--; /* v[len] starts the character left out */
    }
    memcpy(out, v, len);
    out[len] = '\0';
    xmlFree(v);
    return true;
}

/* An integer attribute read whole (not its first digits); dflt when
 * absent, -1 when not an integer. */
static long attr_long(const xmlNode *n, const char *name, long dflt) {
    xmlChar *text = xmlGetProp((xmlNode *)n, (const xmlChar *)name);
    if (!text) return dflt;
    char *end;
    errno = 0;
    long v = strtol((const char *)text, &end, 10);
    bool ok = end != (char *)text && !*end && !errno;
    xmlFree(text);
    return ok ? v : -1;
}

/* A length attribute (PhysicalSizeX, PositionY, ...) and its unit attribute
 * in micrometres. *found false when the attribute is absent. */
static ts_status length_um(const char *path, const xmlNode *n, const char *name, const char *dflt_unit,
                           bool positive, double *um, bool *found, bool *unit_assumed, ts_error *err) {
    char text[64], unit[64], unit_name[80];
    *found = false;
    /* Parsed whole: the first 63 bytes of a long value can spell another
     * number (its exponent cut off). text: the value as messages show it. */
    xmlChar *whole = xmlGetProp((xmlNode *)n, (const xmlChar *)name);
    if (!whole) return TS_OK;
    size_t wl = strlen((const char *)whole);
    if (wl < 48) snprintf(text, sizeof text, "%s", (const char *)whole);
    else snprintf(text, sizeof text, "...%s", (const char *)whole + wl - 44); /* its end: the exponent */
    char *end;
    double v = strtod((const char *)whole, &end);
    bool bad = end == (char *)whole || *end;
    xmlFree(whole);
    if (bad || !isfinite(v) || (positive && !(v > 0)))
        return ts_fail(err, TS_ERR_FORMAT, "%s: OME-XML %s %s=\"%s\" is not a %snumber", path,
                       (const char *)n->name, name, text, positive ? "positive " : "");
    snprintf(unit_name, sizeof unit_name, "%sUnit", name);
    if (!attr(n, unit_name, unit, sizeof unit)) snprintf(unit, sizeof unit, "%s", dflt_unit);
    double f = ti_ome_unit_um(unit);
    if (f == 0 && unit_assumed && !strcmp(unit, "reference frame")) {
        f = 1, *unit_assumed = true;
    }
    if (f == 0)
        return ts_fail(err, TS_ERR_FORMAT, "%s: OME-XML %s %s=\"%s\" is not a length unit (pm to km)",
                       path, (const char *)n->name, unit_name, unit);
    *um = v * f;
    if (!isfinite(*um))
        return ts_fail(err, TS_ERR_FORMAT, "%s: OME-XML %s %s=\"%s\" %s is beyond any length in micrometres",
                       path, (const char *)n->name, name, text, unit);
    *found = true;
    return TS_OK;
}

/* How well an Image's TiffData says it is this file's first IFD: 2 with a
 * UUID FileName naming the file, 1 without UUID (this file), 0 not. */
static int image_rank(const xmlNode *pixels, const char *file_name) {
    int best = 0;
    for (const xmlNode *td = pixels ? pixels->children : NULL; td; td = td->next) {
        if (!named(td, "TiffData") || attr_long(td, "IFD", 0) != 0) continue;
        const xmlNode *uuid = child(td, "UUID");
        char fn[4096];
        if (!uuid) best = best > 1 ? best : 1;
        else if (file_name && attr(uuid, "FileName", fn, sizeof fn) && !strcmp(fn, file_name)) best = 2;
    }
    return best;
}

static const xmlNode *pick_pixels(const xmlNode *root, const char *file_name) {
    const xmlNode *first = NULL, *best = NULL;
    int best_rank = 0;
    for (const xmlNode *im = root->children; im; im = im->next) {
        if (!named(im, "Image")) continue;
        const xmlNode *px = child(im, "Pixels");
        if (!px) continue;
        if (!first) first = px;
        int r = image_rank(px, file_name);
        if (r > best_rank) best = px, best_rank = r;
    }
    return best ? best : first;
}

static ts_status read_pixels(const char *path, const xmlNode *px, ti_ome_meta *m, ts_error *err) {
    ts_status st;
    if ((st = length_um(path, px, "PhysicalSizeX", "\xc2\xb5m", true, &m->size_x_um, &m->has_size_x, NULL,
                        err)) != TS_OK ||
        (st = length_um(path, px, "PhysicalSizeY", "\xc2\xb5m", true, &m->size_y_um, &m->has_size_y, NULL,
                        err)) != TS_OK)
        return st;
    for (const xmlNode *c = px->children; c; c = c->next) {
        if (!named(c, "Channel")) continue;
        if (m->nchannels == TI_OME_MAX_CHANNELS) break;
        attr(c, "Name", m->channel_names[m->nchannels], sizeof m->channel_names[0]);
        m->nchannels++;
    }
    /* The stage position of the field: the first plane's (C = Z = T = 0)
     * when it has one, else the first plane that has both coordinates. */
    const xmlNode *chosen = NULL;
    for (const xmlNode *p = px->children; p; p = p->next) {
        if (!named(p, "Plane")) continue;
        xmlChar *x = xmlGetProp((xmlNode *)p, (const xmlChar *)"PositionX");
        xmlChar *y = xmlGetProp((xmlNode *)p, (const xmlChar *)"PositionY");
        bool both = x && y;
        xmlFree(x);
        xmlFree(y);
        if (!both) continue;
        bool origin = attr_long(p, "TheC", 0) == 0 && attr_long(p, "TheZ", 0) == 0 && attr_long(p, "TheT", 0) == 0;
        if (!chosen || origin) chosen = p;
        if (origin) break;
    }
    if (chosen) {
        bool fx = false, fy = false;
        if ((st = length_um(path, chosen, "PositionX", "reference frame", false, &m->pos_x_um, &fx,
                            &m->position_unit_assumed, err)) != TS_OK ||
            (st = length_um(path, chosen, "PositionY", "reference frame", false, &m->pos_y_um, &fy,
                            &m->position_unit_assumed, err)) != TS_OK)
            return st;
        m->has_position = fx && fy;
    }
    return TS_OK;
}

/* OME-XML starts with the XML declaration or the OME element, after
 * optional white space (and a byte-order mark). */
static bool looks_like_ome(const char *text, size_t len) {
    size_t i = 0;
    if (len >= 3 && !memcmp(text, "\xef\xbb\xbf", 3)) i = 3;
    while (i < len && (text[i] == ' ' || text[i] == '\t' || text[i] == '\r' || text[i] == '\n')) i++;
    if (i >= len || text[i] != '<') return false;
    /* the root element is OME (with or without a namespace prefix) */
    const char *end = text + len;
    for (const char *p = text + i; p + 4 <= end; p++) {
        p = memchr(p, '<', (size_t)(end - p));
        if (!p || p + 4 > end) return false;
        if (p[1] == '?' || p[1] == '!') continue;
        const char *q = p + 1, *name = q;
        while (q < end && *q != ' ' && *q != '>' && *q != '/' && *q != '\t' && *q != '\r' && *q != '\n') {
            if (*q == ':') name = q + 1;
            q++;
        }
        return q - name == 3 && !memcmp(name, "OME", 3);
    }
    return false;
}

ts_status ti_ome_parse(const char *path, const char *file_name, const char *text, size_t len,
                       ti_ome_meta *out, ts_error *err) {
    memset(out, 0, sizeof *out);
    if (!text || !looks_like_ome(text, len)) return TS_OK;
    if (len > (size_t)INT32_MAX)
        return ts_fail(err, TS_ERR_FORMAT, "%s: OME-XML of %zu bytes is too long", path, len);
    xmlParserCtxtPtr ctx = xmlNewParserCtxt();
    if (!ctx) return ts_fail(err, TS_ERR_NOMEM, "%s: out of memory parsing the OME-XML", path);
    xmlDocPtr doc = xmlCtxtReadMemory(ctx, text, (int)len, NULL, NULL,
                                      XML_PARSE_NONET | XML_PARSE_NOERROR | XML_PARSE_NOWARNING |
                                          XML_PARSE_NOCDATA);
    ts_status st = TS_OK;
    if (!doc) {
        const xmlError *e = xmlCtxtGetLastError(ctx);
        char msg[200] = "";
        if (e && e->message) snprintf(msg, sizeof msg, "%s", e->message);
        size_t n = strlen(msg);
        while (n && msg[n - 1] == '\n') msg[--n] = '\0';
        st = ts_fail(err, TS_ERR_FORMAT, "%s: the ImageDescription is OME-XML that does not parse (line %d: %s)",
                     path, e ? e->line : 0, msg[0] ? msg : "unknown error");
        xmlFreeParserCtxt(ctx);
        return st;
    }
    const xmlNode *root = xmlDocGetRootElement(doc);
    if (named(root, "OME")) {
        out->is_ome = true;
        const xmlNode *px = pick_pixels(root, file_name);
        if (px) st = read_pixels(path, px, out, err);
    }
    xmlFreeDoc(doc);
    xmlFreeParserCtxt(ctx);
    return st;
}
