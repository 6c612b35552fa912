/* A compiled fast path for the inert msgpack judge in store/peek.py.

   It walks LangGraph's msgpack without building Python objects and answers one question: is this value
   well formed and does every ext in it name a trusted LangChain/LangGraph type? When the answer is a
   certain yes it returns a small summary; on anything else (garbage, an untrusted or unusual type, a
   shape it does not know, deep nesting, trailing bytes) it returns None and the caller runs the Python
   decoder, which judges and reports the value exactly as before. So this file may only ever be
   stricter than peek.InertDecoder, never more lenient: tests/test_native_peek.py compares the two.

   Safety: every read is bounds-checked against the end of the buffer, recursion is capped, nothing is
   allocated per value, and no Python object is built from the bytes except the messages version. */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#include "_inert.h"

/* Nesting caps, well below ormsgpack's recursion limit (about 1000) and peek.MAX_EXT_DEPTH (32). */
#define MAX_DEPTH 64
#define MAX_EXT_DEPTH 8
#define MAX_NAMES 8
#define MAX_TRUSTED 128
#define MAX_NAME_BYTES 96

/* LangGraph's ext codes: the ones that name a type to construct, and the delta snapshot. */
#define EXT_METHOD_SINGLE_ARG 3
#define EXT_DELTA_SNAPSHOT 7


typedef struct {
    const char *text;
    Py_ssize_t size;
} Span;

/* Set once by configure() from store/peek.py's own tables, so the trust rule has one source: the exact
   (module, name) pairs LangGraph's strict loader constructs. */
static char trusted_modules[MAX_TRUSTED][MAX_NAME_BYTES];
static Py_ssize_t trusted_module_sizes[MAX_TRUSTED];
static char trusted_names[MAX_TRUSTED][MAX_NAME_BYTES];
static Py_ssize_t trusted_name_sizes[MAX_TRUSTED];
static int trusted_count = -1; /* -1: not configured, every summary is None */
static char flagged_modules[MAX_NAMES][MAX_NAME_BYTES];
static Py_ssize_t flagged_module_sizes[MAX_NAMES];
static char flagged_names[MAX_NAMES][MAX_NAME_BYTES];
static Py_ssize_t flagged_name_sizes[MAX_NAMES];
static int flagged_count = 0;

typedef struct {
    const unsigned char *at;
    const unsigned char *end;
    int depth;
    int ext_depth;
} Cursor;

/* The (module, name) an ext value names, when the caller wants to compare it with the flagged types. */
typedef struct {
    int found;
    Span module;
    Span name;
} ExtName;

static int span_equals(Span span, const char *text, Py_ssize_t size) {
    return span.size == size && memcmp(span.text, text, (size_t)size) == 0;
}

int inert_valid_utf8(const unsigned char *s, size_t n) {
    size_t i = 0;
    while (i < n) {
        /* Message text is mostly ASCII: test eight bytes at a time while no high bit is set. */
        if (n - i >= 8) {
            uint64_t word;
            memcpy(&word, s + i, 8);
            if ((word & UINT64_C(0x8080808080808080)) == 0) {
                i += 8;
                continue;
            }
        }
        unsigned char c = s[i];
        if (c < 0x80) {
            i++;
            continue;
        }
        if (c >= 0xC2 && c <= 0xDF) {
            if (n - i < 2 || (s[i + 1] & 0xC0) != 0x80) return 0;
            i += 2;
        } else if (c >= 0xE0 && c <= 0xEF) {
            unsigned char lo = c == 0xE0 ? 0xA0 : 0x80, hi = c == 0xED ? 0x9F : 0xBF;
            if (n - i < 3 || s[i + 1] < lo || s[i + 1] > hi || (s[i + 2] & 0xC0) != 0x80) return 0;
            i += 3;
        } else if (c >= 0xF0 && c <= 0xF4) {
            unsigned char lo = c == 0xF0 ? 0x90 : 0x80, hi = c == 0xF4 ? 0x8F : 0xBF;
            if (n - i < 4 || s[i + 1] < lo || s[i + 1] > hi || (s[i + 2] & 0xC0) != 0x80 ||
                (s[i + 3] & 0xC0) != 0x80)
                return 0;
            i += 4;
        } else {
            return 0;
        }
    }
    return 1;
}

static size_t remaining(const Cursor *c) { return (size_t)(c->end - c->at); }

/* Read a big-endian unsigned length of `width` bytes; 0 when the buffer is too short. */
static int read_length(Cursor *c, int width, size_t *out) {
    if (remaining(c) < (size_t)width) return 0;
    size_t value = 0;
    for (int i = 0; i < width; i++) value = (value << 8) | c->at[i];
    c->at += width;
    *out = value;
    return 1;
}

static int take(Cursor *c, size_t n, const unsigned char **out) {
    if (remaining(c) < n) return 0;
    *out = c->at;
    c->at += n;
    return 1;
}

/* Read one str header and its bytes, validated; 0 when the next value is not a valid str. */
static int read_str(Cursor *c, Span *out) {
    if (remaining(c) < 1) return 0;
    unsigned char marker = *c->at++;
    size_t size;
    if (marker >= 0xA0 && marker <= 0xBF) {
        size = marker & 0x1F;
    } else if (marker == 0xD9 || marker == 0xDA || marker == 0xDB) {
        if (!read_length(c, 1 << (marker - 0xD9), &size)) return 0;
    } else {
        return 0;
    }
    const unsigned char *bytes;
    if (!take(c, size, &bytes) || !inert_valid_text(bytes, size)) return 0;
    out->text = (const char *)bytes;
    out->size = (Py_ssize_t)size;
    return 1;
}

/* Read an ext header: its code and payload. `c` must sit on an ext marker. */
static int read_ext(Cursor *c, int *code, const unsigned char **payload, size_t *size) {
    unsigned char marker = *c->at++;
    if (marker >= 0xD4 && marker <= 0xD8) {
        *size = (size_t)1 << (marker - 0xD4);
    } else {
        int width = marker == 0xC7 ? 1 : marker == 0xC8 ? 2 : 4;
        if (!read_length(c, width, size)) return 0;
    }
    if (remaining(c) < 1) return 0;
    *code = (signed char)*c->at++;
    return take(c, *size, payload);
}

static int is_ext_marker(unsigned char marker) {
    return (marker >= 0xD4 && marker <= 0xD8) || marker == 0xC7 || marker == 0xC8 || marker == 0xC9;
}

static int walk(Cursor *c, ExtName *name);

/* Walk `count` values: the items of an array, or keys and values of a map when `pairs` is set. */
static int walk_items(Cursor *c, size_t count, int pairs) {
    if (c->depth >= MAX_DEPTH) return 0;
    c->depth++;
    for (size_t i = 0; i < count; i++) {
        Span key;
        if (pairs && !read_str(c, &key)) return 0; /* store/peek.py allows other keys; they take the slow path */
        if (!walk(c, NULL)) return 0;
    }
    c->depth--;
    return 1;
}

static int type_is_trusted(Span module, Span type_name) {
    for (int i = 0; i < trusted_count; i++) {
        if (span_equals(module, trusted_modules[i], trusted_module_sizes[i]) &&
            span_equals(type_name, trusted_names[i], trusted_name_sizes[i]))
            return 1;
    }
    return 0;
}

static int is_array_marker(unsigned char marker) {
    return (marker >= 0x90 && marker <= 0x9F) || marker == 0xDC || marker == 0xDD;
}

/* Read an array or map header at the cursor; 0 when the value there is neither. */
static int read_container(Cursor *c, int *is_map, size_t *count) {
    if (remaining(c) < 1) return 0;
    unsigned char marker = *c->at++;
    if (marker >= 0x90 && marker <= 0x9F) {
        *is_map = 0;
        *count = marker & 0x0F;
        return 1;
    }
    if (marker >= 0x80 && marker <= 0x8F) {
        *is_map = 1;
        *count = marker & 0x0F;
        return 1;
    }
    *is_map = marker == 0xDE || marker == 0xDF;
    if (marker == 0xDC || marker == 0xDE) return read_length(c, 2, count);
    if (marker == 0xDD || marker == 0xDF) return read_length(c, 4, count);
    return 0;
}

/* An ext that names a type: a payload array [module, name, ...] naming one of the trusted types. */
static int walk_named_ext(Cursor *outer, const unsigned char *payload, size_t size, ExtName *name) {
    if (outer->ext_depth >= MAX_EXT_DEPTH || outer->depth >= MAX_DEPTH) return 0;
    Cursor c = {payload, payload + size, outer->depth + 1, outer->ext_depth + 1};
    size_t count;
    int is_map;
    if (!read_container(&c, &is_map, &count) || is_map) return 0;
    Span module, type_name;
    if (count < 2 || !read_str(&c, &module) || !read_str(&c, &type_name) || !type_is_trusted(module, type_name))
        return 0;
    if (!walk_items(&c, count - 2, 0) || c.at != c.end) return 0;
    if (name != NULL) {
        name->found = 1;
        name->module = module;
        name->name = type_name;
    }
    return 1;
}

static int walk(Cursor *c, ExtName *name);

/* A _DeltaSnapshot's payload: the message list LangGraph's loader constructs on read, judged like any
   value (well formed, only trusted types), to its last byte. */
static int walk_snapshot_payload(const Cursor *outer, const unsigned char *payload, size_t size) {
    if (outer->ext_depth >= MAX_EXT_DEPTH || outer->depth >= MAX_DEPTH) return 0;
    Cursor inner = {payload, payload + size, outer->depth + 1, outer->ext_depth + 1};
    return walk(&inner, NULL) && inner.at == inner.end;
}

/* Walk one value; 1 when it is well formed and names only trusted types. */
static int walk(Cursor *c, ExtName *name) {
    if (remaining(c) < 1) return 0;
    unsigned char marker = *c->at;
    size_t size;
    const unsigned char *bytes;
    if (marker <= 0x7F || marker >= 0xE0 || marker == 0xC0 || marker == 0xC2 || marker == 0xC3) {
        c->at++; /* fixint, nil, false, true */
        return 1;
    }
    if (marker >= 0xA0 && marker <= 0xBF) {
        Span text;
        return read_str(c, &text);
    }
    if (marker >= 0x90 && marker <= 0x9F) {
        c->at++;
        return walk_items(c, marker & 0x0F, 0);
    }
    if (marker >= 0x80 && marker <= 0x8F) {
        c->at++;
        return walk_items(c, marker & 0x0F, 1);
    }
    if (is_ext_marker(marker)) {
        int code;
        if (!read_ext(c, &code, &bytes, &size)) return 0;
        if (code == EXT_DELTA_SNAPSHOT) return walk_snapshot_payload(c, bytes, size);
        if (code < 0 || code > 5 || code == EXT_METHOD_SINGLE_ARG) return 0;
        return walk_named_ext(c, bytes, size, name);
    }
    c->at++;
    switch (marker) {
        case 0xC4: case 0xC5: case 0xC6: /* bin 8/16/32 */
            return read_length(c, 1 << (marker - 0xC4), &size) && take(c, size, &bytes);
        case 0xCA: return take(c, 4, &bytes); /* float 32 */
        case 0xCB: return take(c, 8, &bytes); /* float 64 */
        case 0xCC: case 0xD0: return take(c, 1, &bytes);
        case 0xCD: case 0xD1: return take(c, 2, &bytes);
        case 0xCE: case 0xD2: return take(c, 4, &bytes);
        case 0xCF: case 0xD3: return take(c, 8, &bytes);
        case 0xD9: case 0xDA: case 0xDB:
            c->at--;
            {
                Span text;
                return read_str(c, &text);
            }
        case 0xDC: case 0xDD:
            return read_length(c, marker == 0xDC ? 2 : 4, &size) && walk_items(c, size, 0);
        case 0xDE: case 0xDF:
            return read_length(c, marker == 0xDE ? 2 : 4, &size) && walk_items(c, size, 1);
        default:
            return 0; /* 0xC1, never used */
    }
}


static int flags_of(const ExtName *name) {
    int flags = 0;
    if (!name->found) return 0;
    for (int i = 0; i < flagged_count; i++) {
        if (span_equals(name->module, flagged_modules[i], flagged_module_sizes[i]) &&
            span_equals(name->name, flagged_names[i], flagged_name_sizes[i]))
            flags |= 1 << i;
    }
    return flags;
}

int inert_get_buffer(PyObject *arg, Py_buffer *view) {
    if (PyBytes_CheckExact(arg)) {
        view->obj = NULL;
        view->buf = PyBytes_AS_STRING(arg);
        view->len = PyBytes_GET_SIZE(arg);
        return 0;
    }
    return PyObject_GetBuffer(arg, view, PyBUF_SIMPLE);
}

void inert_release_buffer(Py_buffer *view) {
    if (view->obj != NULL) PyBuffer_Release(view);
}

/* A tuple of three small ints, built without Py_BuildValue's format parsing. */
static PyObject *int_triple(Py_ssize_t first, Py_ssize_t second, Py_ssize_t third) {
    PyObject *items[3] = {PyLong_FromSsize_t(first), PyLong_FromSsize_t(second), PyLong_FromSsize_t(third)};
    PyObject *tuple = PyTuple_New(3);
    for (int i = 0; i < 3; i++) {
        if (items[i] == NULL || tuple == NULL) {
            for (int j = 0; j < 3; j++) Py_XDECREF(items[j]);
            Py_XDECREF(tuple);
            return NULL;
        }
    }
    for (int i = 0; i < 3; i++) PyTuple_SET_ITEM(tuple, i, items[i]);
    return tuple;
}


int inert_judge_value(const unsigned char *data, size_t size, InertValueFacts *facts) {
    if (trusted_count < 0) return 0;
    Cursor c = {data, data + size, 0, 0};
    int ok, is_list = 0, flags = 0;
    size_t count = 0;
    if (size > 0 && is_array_marker(data[0])) {
        int is_map;
        ok = read_container(&c, &is_map, &count) && count <= (size_t)PY_SSIZE_T_MAX;
        is_list = 1;
        c.depth = 1;
        for (size_t i = 0; ok && i < count; i++) {
            ExtName name = {0};
            ok = walk(&c, &name);
            flags |= flags_of(&name);
        }
    } else {
        ExtName name = {0};
        ok = walk(&c, &name);
        flags = flags_of(&name);
    }
    if (!ok || c.at != c.end) return 0;
    *facts = (InertValueFacts){is_list, count, flags};
    return 1;
}

PyDoc_STRVAR(value_summary_doc,
             "value_summary(data) -> (is_list, items, flags) | None\n\n"
             "For one msgpack value that is well formed and names only trusted types: whether it is an array,\n"
             "its length, and a bit per configured flagged type named by the value itself or by one of its\n"
             "items. None when only the full inert decoder can judge it.");

static PyObject *value_summary(PyObject *module, PyObject *arg) {
    (void)module;
    Py_buffer view;
    if (inert_get_buffer(arg, &view) < 0) return NULL;
    InertValueFacts facts;
    int ok = inert_judge_value(view.buf, (size_t)view.len, &facts);
    inert_release_buffer(&view);
    if (!ok) Py_RETURN_NONE;
    return int_triple(facts.is_list, (Py_ssize_t)facts.items, facts.flags);
}

/* The messages value of channel_values: its kind, a count (list length or snapshot payload size) and
   whether it holds nothing. */
static int classify_messages(Cursor *c, int *kind, size_t *count, int *empty) {
    if (remaining(c) < 1) return 0;
    unsigned char marker = *c->at;
    if (is_ext_marker(marker)) {
        Cursor probe = *c;
        int code;
        const unsigned char *payload;
        size_t size;
        if (!read_ext(&probe, &code, &payload, &size)) return 0;
        if (code == EXT_DELTA_SNAPSHOT) {
            if (!walk_snapshot_payload(c, payload, size)) return 0;
            *kind = MESSAGES_SNAPSHOT;
            *count = size;
            *empty = size == 1 && payload[0] == 0x90;
            *c = probe;
            return 1;
        }
    }
    if (is_array_marker(marker)) {
        int is_map;
        if (!read_container(c, &is_map, count) || !walk_items(c, *count, 0)) return 0;
        *kind = MESSAGES_LIST;
        *empty = *count == 0;
        return 1;
    }
    *kind = MESSAGES_OTHER;
    return walk(c, NULL);
}


int inert_judge_checkpoint(const unsigned char *data, size_t size, InertCheckpointFacts *facts) {
    if (trusted_count < 0) return 0;
    Cursor c = {data, data + size, 0, 0};
    int kind = MESSAGES_ABSENT, empty = 0, is_map, seen_values = 0, seen_versions = 0, seen_version = 0;
    size_t count = 0, entries, fields;
    Span version = {NULL, 0};
    int ok = read_container(&c, &is_map, &fields) && is_map;
    c.depth = 1;
    for (size_t i = 0; ok && i < fields; i++) {
        Span key;
        ok = read_str(&c, &key);
        if (!ok) break;
        int values = span_equals(key, "channel_values", 14), versions = span_equals(key, "channel_versions", 16);
        if (!values && !versions) {
            ok = walk(&c, NULL);
            continue;
        }
        /* A repeated key would make Python keep the last copy: leave such rows to the full decoder. */
        if ((values && seen_values++) || (versions && seen_versions++)) return 0;
        ok = read_container(&c, &is_map, &entries) && is_map;
        c.depth = 2;
        for (size_t j = 0; ok && j < entries; j++) {
            Span channel;
            ok = read_str(&c, &channel);
            if (!ok) break;
            if (!span_equals(channel, "messages", 8)) {
                ok = walk(&c, NULL);
            } else if (values) {
                ok = kind == MESSAGES_ABSENT && classify_messages(&c, &kind, &count, &empty);
            } else {
                ok = !seen_version++ && read_str(&c, &version);
            }
        }
        c.depth = 1;
    }
    if (!ok || c.at != c.end || count > (size_t)PY_SSIZE_T_MAX) return 0;
    *facts = (InertCheckpointFacts){kind, count, empty, version.text, version.size};
    return 1;
}

PyDoc_STRVAR(checkpoint_summary_doc,
             "checkpoint_summary(data) -> (kind, count, empty, messages_version) | None\n\n"
             "For a msgpack checkpoint mapping that is well formed and names only trusted types: what its\n"
             "channel_values['messages'] holds (0 absent, 1 list, 2 snapshot, 3 other), the list length or\n"
             "snapshot payload size, whether that holds no message, and channel_versions['messages'] when it\n"
             "is a string. None when only the full inert decoder can judge it.");

static PyObject *checkpoint_summary(PyObject *module, PyObject *arg) {
    (void)module;
    Py_buffer view;
    if (inert_get_buffer(arg, &view) < 0) return NULL;
    InertCheckpointFacts facts;
    PyObject *result = NULL;
    if (!inert_judge_checkpoint(view.buf, (size_t)view.len, &facts)) {
        result = Py_NewRef(Py_None);
    } else {
        /* The version is read from the buffer, so it is built before the buffer is released. */
        PyObject *version_value = facts.version != NULL
                                      ? PyUnicode_DecodeUTF8(facts.version, facts.version_size, "strict")
                                      : Py_NewRef(Py_None);
        PyObject *kind_value = PyLong_FromLong(facts.kind);
        PyObject *count_value = PyLong_FromSsize_t((Py_ssize_t)facts.count);
        if (version_value != NULL && kind_value != NULL && count_value != NULL)
            result = PyTuple_Pack(4, kind_value, count_value, facts.empty ? Py_True : Py_False, version_value);
        Py_XDECREF(version_value);
        Py_XDECREF(kind_value);
        Py_XDECREF(count_value);
    }
    inert_release_buffer(&view);
    return result;
}

static int copy_name(PyObject *text, char *into, Py_ssize_t *size) {
    const char *utf8 = PyUnicode_AsUTF8AndSize(text, size);
    if (utf8 == NULL) return 0;
    if (*size >= MAX_NAME_BYTES) {
        PyErr_SetString(PyExc_ValueError, "name too long for the native judge");
        return 0;
    }
    memcpy(into, utf8, (size_t)*size);
    return 1;
}

PyDoc_STRVAR(configure_doc,
             "configure(trusted_types, flagged_types) -> None\n\n"
             "Set the (module, name) pairs that are trusted and the (module, name) pairs that\n"
             "value_summary reports as flag bits, in order. Until called, every summary is None.");

static PyObject *configure(PyObject *module, PyObject *args) {
    (void)module;
    PyObject *trusted, *flagged;
    if (!PyArg_ParseTuple(args, "O!O!", &PyTuple_Type, &trusted, &PyTuple_Type, &flagged)) return NULL;
    if (PyTuple_GET_SIZE(trusted) > MAX_TRUSTED || PyTuple_GET_SIZE(flagged) > MAX_NAMES) {
        PyErr_SetString(PyExc_ValueError, "too many names for the native judge");
        return NULL;
    }
    trusted_count = -1;
    flagged_count = 0;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(trusted); i++) {
        PyObject *pair = PyTuple_GET_ITEM(trusted, i), *module_name, *type_name;
        if (!PyArg_ParseTuple(pair, "UU", &module_name, &type_name)) return NULL;
        if (!copy_name(module_name, trusted_modules[i], &trusted_module_sizes[i]) ||
            !copy_name(type_name, trusted_names[i], &trusted_name_sizes[i]))
            return NULL;
    }
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(flagged); i++) {
        PyObject *pair = PyTuple_GET_ITEM(flagged, i), *module_name, *type_name;
        if (!PyArg_ParseTuple(pair, "UU", &module_name, &type_name)) return NULL;
        if (!copy_name(module_name, flagged_modules[i], &flagged_module_sizes[i]) ||
            !copy_name(type_name, flagged_names[i], &flagged_name_sizes[i]))
            return NULL;
    }
    flagged_count = (int)PyTuple_GET_SIZE(flagged);
    trusted_count = (int)PyTuple_GET_SIZE(trusted);
    Py_RETURN_NONE;
}

/* Whether `needle` occurs in `data`, for a scan's cheap "can this value hold X at all" test before it
   reads any item (store/messages.py, tool_outputs): one memmem over the buffer, without the copy a
   bytes object would need for a slice such as msgspec.Raw, and several times faster than bytes.__contains__
   on long text. It answers exactly what `needle in bytes(data)` answers (tests/test_native_peek.py). */
static int holds_bytes(const char *data, Py_ssize_t size, const char *needle, Py_ssize_t needle_size) {
    if (needle_size == 0) return 1;
    if (needle_size > size) return 0;
#if defined(_WIN32)
    for (Py_ssize_t at = 0; at + needle_size <= size; at++) {
        if (data[at] == needle[0] && memcmp(data + at, needle, (size_t)needle_size) == 0) return 1;
    }
    return 0;
#else
    return memmem(data, (size_t)size, needle, (size_t)needle_size) != NULL;
#endif
}

PyDoc_STRVAR(holds_doc,
             "holds(data, needle) -> bool\n\n"
             "Whether `needle` occurs in `data` (any bytes-like object), as `needle in bytes(data)`.");

static PyObject *holds(PyObject *module, PyObject *args) {
    Py_buffer data, needle;
    if (!PyArg_ParseTuple(args, "y*y*", &data, &needle)) return NULL;
    int found = holds_bytes((const char *)data.buf, data.len, (const char *)needle.buf, needle.len);
    PyBuffer_Release(&data);
    PyBuffer_Release(&needle);
    return PyBool_FromLong(found);
}

PyDoc_STRVAR(metadata_summary_doc,
             "metadata_summary(data) -> (step, source, mode, updates, supersteps) | None\n\n"
             "For checkpoint metadata JSON that Python's json module reads as an object: step, source,\n"
             "deerflow_checkpoint_channel_mode and counters_since_delta_snapshot['messages'][0:2], each None\n"
             "unless an integer (step, counters) or a string (source, mode). None when only Python can tell.");

#ifdef INERT_SQLITE
PyDoc_STRVAR(open_lineages_doc,
             "open_lineages(uri, checkpoints_sql, writes_sql, parameters, shapes, record_type\n"
             "              [, value_limit, budget, row_cost]) -> LineageStream\n\n"
             "Open `uri` read-only in one read transaction and stream its lineages as\n"
             "(thread_id, checkpoint_ns, records, deferred_writes, handover); with a budget, handover holds the rows\n"
             "the deep proof reads (None past the budget); see _inert_sqlite.c.");
PyDoc_STRVAR(readahead_vfs_doc,
             "readahead_vfs() -> str | None\n\n"
             "The read-ahead layer's VFS name, registered on first call; None where SQLite's default VFS is too old.");
PyDoc_STRVAR(readahead_counts_doc,
             "readahead_counts() -> (windows read, reads served from them, pages of those lent in place)\n\n"
             "Over every connection through the layer in this process so far; see _readahead.c.");
#endif

static PyMethodDef methods[] = {
    {"configure", configure, METH_VARARGS, configure_doc},
    {"value_summary", value_summary, METH_O, value_summary_doc},
    {"checkpoint_summary", checkpoint_summary, METH_O, checkpoint_summary_doc},
    {"metadata_summary", inert_metadata_summary, METH_O, metadata_summary_doc},
    {"holds", holds, METH_VARARGS, holds_doc},
#ifdef INERT_SQLITE
    {"open_lineages", inert_open_lineages, METH_VARARGS, open_lineages_doc},
    {"readahead_counts", inert_readahead_counts_py, METH_NOARGS, readahead_counts_doc},
    {"readahead_vfs", inert_readahead_vfs_py, METH_NOARGS, readahead_vfs_doc},
#endif
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_definition = {
    PyModuleDef_HEAD_INIT, "_inert", "Compiled fast path for the inert msgpack judge.", -1, methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__inert(void) {
    PyObject *module = PyModule_Create(&module_definition);
#ifdef INERT_SQLITE
    if (module != NULL && inert_add_sqlite_reader(module) < 0) Py_CLEAR(module);
#endif
    return module;
}
