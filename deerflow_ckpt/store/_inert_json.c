/* The compiled fast path for reading checkpoint metadata (JSON text in SQLite's metadata column).

   metadata_summary() reads the four keys the scan needs without building the rest. Like the msgpack
   judge it may only agree with Python (json.loads of the UTF-8 text, in sqlite.py) or abstain: any text
   Python would reject, and anything this reader does not handle simply (escapes in the strings it
   returns or in keys it matches, fractions where an integer is wanted, integers beyond 64 bits, deep
   nesting, repeated keys it reads) returns None, and the caller parses the metadata in Python. */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#include "_inert.h"

#define MAX_JSON_DEPTH 64

typedef struct {
    const unsigned char *at;
    const unsigned char *end;
    int depth;
} Text;

/* What one top-level key's value turned out to be. */
typedef enum { VALUE_OTHER, VALUE_INTEGER, VALUE_PLAIN_STRING, VALUE_ESCAPED_STRING } ValueKind;

typedef struct {
    ValueKind kind;
    long long integer;
    const unsigned char *text; /* VALUE_PLAIN_STRING: the bytes between the quotes, no escapes */
    size_t size;
} Value;

static void skip_space(Text *t) {
    while (t->at < t->end && (*t->at == ' ' || *t->at == '\t' || *t->at == '\n' || *t->at == '\r')) t->at++;
}

static int is_hex(unsigned char c) { return (c >= '0' && c <= '9') || ((c | 0x20) >= 'a' && (c | 0x20) <= 'f'); }

/* A string at the cursor (on its opening quote), validated as Python's json module would read it.
   `escaped` tells whether it held a backslash escape; its raw bytes are returned when it did not. */
static int read_string(Text *t, Value *value, int *escaped) {
    t->at++;
    const unsigned char *start = t->at;
    *escaped = 0;
    while (t->at < t->end) {
        unsigned char c = *t->at;
        if (c == '"') {
            value->kind = VALUE_PLAIN_STRING;
            value->text = start;
            value->size = (size_t)(t->at - start);
            t->at++;
            return 1;
        }
        if (c < 0x20) return 0; /* a raw control character: json.loads (strict) rejects it */
        if (c == '\\') {
            *escaped = 1;
            if (t->end - t->at < 2) return 0;
            unsigned char e = t->at[1];
            if (e == 'u') {
                if (t->end - t->at < 6 || !is_hex(t->at[2]) || !is_hex(t->at[3]) || !is_hex(t->at[4]) ||
                    !is_hex(t->at[5]))
                    return 0;
                t->at += 6;
            } else if (e != 0 && strchr("\"\\/bfnrt", e) != NULL) {
                t->at += 2;
            } else {
                return 0;
            }
            continue;
        }
        if (c < 0x80) {
            t->at++;
            continue;
        }
        /* Non-ASCII: one well-formed UTF-8 sequence (the whole text is decoded as UTF-8 first). */
        const unsigned char *sequence = t->at;
        size_t length = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : 2;
        if ((size_t)(t->end - sequence) < length || !inert_valid_utf8(sequence, length)) return 0;
        t->at += length;
    }
    return 0;
}

static int digits(Text *t) {
    const unsigned char *start = t->at;
    while (t->at < t->end && *t->at >= '0' && *t->at <= '9') t->at++;
    return t->at > start;
}

/* A JSON number (the grammar json.loads accepts, without NaN or Infinity); an integer if it is one. */
static int read_number(Text *t, Value *value) {
    const unsigned char *start = t->at;
    if (*t->at == '-') t->at++;
    if (t->at >= t->end) return 0;
    if (*t->at == '0') {
        t->at++;
    } else if (!digits(t)) {
        return 0;
    }
    int integer = 1;
    if (t->at < t->end && *t->at == '.') {
        t->at++;
        if (!digits(t)) return 0;
        integer = 0;
    }
    if (t->at < t->end && (*t->at == 'e' || *t->at == 'E')) {
        t->at++;
        if (t->at < t->end && (*t->at == '+' || *t->at == '-')) t->at++;
        if (!digits(t)) return 0;
        integer = 0;
    }
    value->kind = VALUE_OTHER;
    size_t size = (size_t)(t->at - start);
    if (integer) {
        /* 18 digits always fit in 64 bits; longer integers are left to Python's arbitrary precision. */
        if (size - (*start == '-') > 18) return 0;
        long long number = 0;
        for (const unsigned char *d = start + (*start == '-'); d < t->at; d++) number = number * 10 + (*d - '0');
        value->kind = VALUE_INTEGER;
        value->integer = *start == '-' ? -number : number;
    }
    return 1;
}

static int read_literal(Text *t, const char *word) {
    size_t size = strlen(word);
    if ((size_t)(t->end - t->at) < size || memcmp(t->at, word, size) != 0) return 0;
    t->at += size;
    return 1;
}

static int read_value(Text *t, Value *value);

/* An object or array at the cursor: every member validated, none kept. */
static int skip_container(Text *t) {
    unsigned char close = *t->at == '{' ? '}' : ']';
    int object = close == '}';
    if (t->depth >= MAX_JSON_DEPTH) return 0;
    t->depth++;
    t->at++;
    skip_space(t);
    if (t->at < t->end && *t->at == close) {
        t->at++;
        t->depth--;
        return 1;
    }
    for (;;) {
        Value ignored;
        int escaped;
        if (object) {
            if (t->at >= t->end || *t->at != '"' || !read_string(t, &ignored, &escaped)) return 0;
            skip_space(t);
            if (t->at >= t->end || *t->at != ':') return 0;
            t->at++;
            skip_space(t);
        }
        if (!read_value(t, &ignored)) return 0;
        skip_space(t);
        if (t->at >= t->end) return 0;
        if (*t->at == close) {
            t->at++;
            t->depth--;
            return 1;
        }
        if (*t->at != ',') return 0;
        t->at++;
        skip_space(t);
    }
}

/* Any JSON value at the cursor (after whitespace). Strings with escapes read as VALUE_OTHER. */
static int read_value(Text *t, Value *value) {
    value->kind = VALUE_OTHER;
    if (t->at >= t->end) return 0;
    unsigned char c = *t->at;
    if (c == '"') {
        int escaped;
        if (!read_string(t, value, &escaped)) return 0;
        if (escaped) value->kind = VALUE_ESCAPED_STRING;
        return 1;
    }
    if (c == '{' || c == '[') return skip_container(t);
    if (c == '-' || (c >= '0' && c <= '9')) return read_number(t, value);
    return read_literal(t, "true") || read_literal(t, "false") || read_literal(t, "null");
}

/* The members of an object at the cursor: calls `member` for each key (without escapes, else abstain). */
typedef int (*MemberReader)(Text *t, const unsigned char *key, size_t size, void *state);

static int read_object(Text *t, MemberReader member, void *state) {
    if (t->at >= t->end || *t->at != '{' || t->depth >= MAX_JSON_DEPTH) return 0;
    t->depth++;
    t->at++;
    skip_space(t);
    if (t->at < t->end && *t->at == '}') {
        t->at++;
        t->depth--;
        return 1;
    }
    for (;;) {
        Value key;
        int escaped;
        if (t->at >= t->end || *t->at != '"' || !read_string(t, &key, &escaped) || escaped) return 0;
        skip_space(t);
        if (t->at >= t->end || *t->at != ':') return 0;
        t->at++;
        skip_space(t);
        if (!member(t, key.text, key.size, state)) return 0;
        skip_space(t);
        if (t->at >= t->end) return 0;
        if (*t->at == '}') {
            t->at++;
            t->depth--;
            return 1;
        }
        if (*t->at != ',') return 0;
        t->at++;
        skip_space(t);
    }
}

static int key_is(const unsigned char *key, size_t size, const char *name) {
    return size == strlen(name) && memcmp(key, name, size) == 0;
}

typedef struct {
    int seen_messages;
    Value updates, supersteps;
} Counters;

static int read_counter_member(Text *t, const unsigned char *key, size_t size, void *state) {
    Counters *counters = state;
    Value ignored;
    if (!key_is(key, size, "messages")) return read_value(t, &ignored);
    if (counters->seen_messages++) return 0; /* Python keeps the last of repeated keys */
    if (*t->at != '[') return read_value(t, &ignored);
    /* [updates, supersteps, ...]: the first two items, when there are at least two. */
    if (t->depth >= MAX_JSON_DEPTH) return 0;
    t->depth++;
    t->at++;
    skip_space(t);
    Value items[2] = {{VALUE_OTHER, 0, NULL, 0}, {VALUE_OTHER, 0, NULL, 0}};
    size_t count = 0;
    if (t->at < t->end && *t->at == ']') {
        t->at++;
        t->depth--;
        return 1;
    }
    for (;;) {
        Value item;
        if (!read_value(t, &item)) return 0;
        if (count < 2) items[count] = item;
        count++;
        skip_space(t);
        if (t->at >= t->end) return 0;
        if (*t->at == ']') {
            t->at++;
            break;
        }
        if (*t->at != ',') return 0;
        t->at++;
        skip_space(t);
    }
    t->depth--;
    if (count >= 2) {
        counters->updates = items[0];
        counters->supersteps = items[1];
    }
    return 1;
}

typedef struct {
    int seen_step, seen_source, seen_mode, seen_counters;
    Value step, source, mode;
    Counters counters;
} Metadata;

static int read_metadata_member(Text *t, const unsigned char *key, size_t size, void *state) {
    Metadata *metadata = state;
    Value ignored;
    if (key_is(key, size, "step")) return !metadata->seen_step++ && read_value(t, &metadata->step);
    /* A string with escapes would need decoding here: Python reads those. */
    if (key_is(key, size, "source"))
        return !metadata->seen_source++ && read_value(t, &metadata->source) &&
               metadata->source.kind != VALUE_ESCAPED_STRING;
    if (key_is(key, size, "deerflow_checkpoint_channel_mode"))
        return !metadata->seen_mode++ && read_value(t, &metadata->mode) && metadata->mode.kind != VALUE_ESCAPED_STRING;
    if (key_is(key, size, "counters_since_delta_snapshot")) {
        if (metadata->seen_counters++) return 0;
        if (t->at < t->end && *t->at == '{') return read_object(t, read_counter_member, &metadata->counters);
    }
    return read_value(t, &ignored);
}

static PyObject *integer_or_none(const Value *value) {
    if (value->kind == VALUE_INTEGER) return PyLong_FromLongLong(value->integer);
    return Py_NewRef(Py_None);
}

static PyObject *string_or_none(const Value *value) {
    if (value->kind == VALUE_PLAIN_STRING) return PyUnicode_DecodeUTF8((const char *)value->text, (Py_ssize_t)value->size, "strict");
    return Py_NewRef(Py_None);
}

PyObject *inert_metadata_summary(PyObject *module, PyObject *arg) {
    (void)module;
    Py_buffer view;
    if (inert_get_buffer(arg, &view) < 0) return NULL;
    const unsigned char *start = view.buf;
    Text t = {start, start + view.len, 0};
    Metadata metadata;
    memset(&metadata, 0, sizeof metadata);
    skip_space(&t);
    int ok = read_object(&t, read_metadata_member, &metadata);
    skip_space(&t);
    ok = ok && t.at == t.end;
    PyObject *result = NULL;
    if (!ok) {
        result = Py_NewRef(Py_None);
    } else {
        /* Built before the buffer is released: the strings point into it. */
        PyObject *items[5] = {
            integer_or_none(&metadata.step),
            string_or_none(&metadata.source),
            string_or_none(&metadata.mode),
            integer_or_none(&metadata.counters.updates),
            integer_or_none(&metadata.counters.supersteps),
        };
        if (items[0] && items[1] && items[2] && items[3] && items[4])
            result = PyTuple_Pack(5, items[0], items[1], items[2], items[3], items[4]);
        for (int i = 0; i < 5; i++) Py_XDECREF(items[i]);
    }
    inert_release_buffer(&view);
    return result;
}
