/* The compiled fast path for reading checkpoint metadata (JSON text in SQLite's metadata column).

   metadata_summary() reads the four keys the scan needs without building the rest. Like the msgpack
   judge it may only agree with Python (json.loads of the UTF-8 text, in store/sqlite.py) or abstain: any text
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
        /* Eight plain characters at a time: no quote, backslash, control character or non-ASCII byte. */
        while (t->end - t->at >= 8) {
            uint64_t word = inert_word(t->at);
            uint64_t quote = word ^ (INERT_ONES * '"'), backslash = word ^ (INERT_ONES * '\\');
            uint64_t special = (word - INERT_ONES * 0x20) | (quote - INERT_ONES) | (backslash - INERT_ONES);
            special &= ~word & ~quote & ~backslash & INERT_HIGHS;
            if ((word & INERT_HIGHS) != 0 || special != 0) break;
            t->at += 8;
        }
        /* Then one byte at a time up to the next character that needs a look. */
        while (t->at < t->end && *t->at >= 0x20 && *t->at < 0x80 && *t->at != '"' && *t->at != '\\') t->at++;
        if (t->at >= t->end) break;
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

/* Called for each member of an object (`key` set, without escapes when the caller asked for plain keys)
   or each item of an array (`key` NULL), with the cursor on the value. */
typedef int (*PartReader)(Text *t, const Value *key, size_t index, void *state);

/* The object or array at the cursor, each member or item handed to `read`. */
static int read_container(Text *t, PartReader read, void *state, int plain_keys) {
    if (t->at >= t->end || (*t->at != '{' && *t->at != '[') || t->depth >= MAX_JSON_DEPTH) return 0;
    int object = *t->at == '{';
    unsigned char close = object ? '}' : ']';
    t->depth++;
    t->at++;
    skip_space(t);
    if (t->at < t->end && *t->at == close) {
        t->at++;
        t->depth--;
        return 1;
    }
    for (size_t index = 0;; index++) {
        Value key;
        if (object) {
            int escaped;
            if (t->at >= t->end || *t->at != '"' || !read_string(t, &key, &escaped) || (escaped && plain_keys))
                return 0;
            skip_space(t);
            if (t->at >= t->end || *t->at != ':') return 0;
            t->at++;
            skip_space(t);
        }
        /* Readers may look at the value's first byte: there must be one. */
        if (t->at >= t->end || !read(t, object ? &key : NULL, index, state)) return 0;
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

static int skip_part(Text *t, const Value *key, size_t index, void *state) {
    (void)key, (void)index, (void)state;
    Value ignored;
    return read_value(t, &ignored);
}

/* Any JSON value at the cursor (after whitespace); containers are validated and skipped. */
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
    if (c == '{' || c == '[') return read_container(t, skip_part, NULL, 0);
    if (c == '-' || (c >= '0' && c <= '9')) return read_number(t, value);
    return read_literal(t, "true") || read_literal(t, "false") || read_literal(t, "null");
}

static int key_is(const Value *key, const char *name) {
    return key->size == strlen(name) && memcmp(key->text, name, key->size) == 0;
}

/* counters_since_delta_snapshot["messages"]: [updates, supersteps, ...]. */
typedef struct {
    size_t count;
    Value first[2];
} CounterItems;

static int read_counter_item(Text *t, const Value *key, size_t index, void *state) {
    (void)key;
    CounterItems *items = state;
    Value item;
    if (!read_value(t, &item)) return 0;
    if (index < 2) items->first[index] = item;
    items->count = index + 1;
    return 1;
}

typedef struct {
    int seen_messages;
    Value updates, supersteps;
} Counters;

static int read_counter_member(Text *t, const Value *key, size_t index, void *state) {
    Counters *counters = state;
    if (!key_is(key, "messages")) return skip_part(t, key, index, state);
    if (counters->seen_messages++) return 0; /* Python keeps the last of repeated keys */
    if (*t->at != '[') return skip_part(t, key, index, state);
    CounterItems items = {0, {{VALUE_OTHER, 0, NULL, 0}, {VALUE_OTHER, 0, NULL, 0}}};
    if (!read_container(t, read_counter_item, &items, 0)) return 0;
    if (items.count >= 2) {
        counters->updates = items.first[0];
        counters->supersteps = items.first[1];
    }
    return 1;
}

typedef struct {
    int seen_step, seen_source, seen_mode, seen_counters;
    Value step, source, mode;
    Counters counters;
} Metadata;

/* A top-level key read once; a repeated one makes Python keep the last copy, so this abstains. */
static int read_once(Text *t, int *seen, Value *value) { return !(*seen)++ && read_value(t, value); }

static int read_metadata_member(Text *t, const Value *key, size_t index, void *state) {
    Metadata *metadata = state;
    if (key_is(key, "step")) return read_once(t, &metadata->seen_step, &metadata->step);
    /* A string with escapes would need decoding here: Python reads those. */
    if (key_is(key, "source"))
        return read_once(t, &metadata->seen_source, &metadata->source) &&
               metadata->source.kind != VALUE_ESCAPED_STRING;
    if (key_is(key, "deerflow_checkpoint_channel_mode"))
        return read_once(t, &metadata->seen_mode, &metadata->mode) && metadata->mode.kind != VALUE_ESCAPED_STRING;
    if (key_is(key, "counters_since_delta_snapshot")) {
        if (metadata->seen_counters++) return 0;
        if (*t->at == '{') return read_container(t, read_counter_member, &metadata->counters, 1);
    }
    return skip_part(t, key, index, state);
}

static PyObject *integer_or_none(const Value *value) {
    if (value->kind == VALUE_INTEGER) return PyLong_FromLongLong(value->integer);
    return Py_NewRef(Py_None);
}

/* The str of a plain string value. `cache` keeps the last one built: sources and modes repeat row
   after row ("loop", "delta"), and comparing bytes is cheaper than building a str. */
static PyObject *string_or_none(const Value *value, PyObject **cache) {
    if (value->kind != VALUE_PLAIN_STRING) return Py_NewRef(Py_None);
    if (*cache != NULL) {
        Py_ssize_t size;
        const char *cached = PyUnicode_AsUTF8AndSize(*cache, &size);
        if (cached != NULL && (size_t)size == value->size && memcmp(cached, value->text, value->size) == 0)
            return Py_NewRef(*cache);
    }
    PyObject *text = PyUnicode_DecodeUTF8((const char *)value->text, (Py_ssize_t)value->size, "strict");
    if (text != NULL) Py_XSETREF(*cache, Py_NewRef(text));
    return text;
}

static PyObject *last_source, *last_mode;

int inert_metadata_facts(const unsigned char *data, size_t size, PyObject *facts[5]) {
    Text t = {data, data + size, 0};
    Metadata metadata;
    memset(&metadata, 0, sizeof metadata);
    skip_space(&t);
    int ok = t.at < t.end && *t.at == '{' && read_container(&t, read_metadata_member, &metadata, 1);
    skip_space(&t);
    if (!ok || t.at != t.end) return 0;
    facts[0] = integer_or_none(&metadata.step);
    facts[1] = string_or_none(&metadata.source, &last_source);
    facts[2] = string_or_none(&metadata.mode, &last_mode);
    facts[3] = integer_or_none(&metadata.counters.updates);
    facts[4] = integer_or_none(&metadata.counters.supersteps);
    if (facts[0] && facts[1] && facts[2] && facts[3] && facts[4]) return 1;
    for (int i = 0; i < 5; i++) Py_CLEAR(facts[i]);
    return -1;
}

PyObject *inert_metadata_summary(PyObject *module, PyObject *arg) {
    (void)module;
    Py_buffer view;
    if (inert_get_buffer(arg, &view) < 0) return NULL;
    PyObject *facts[5];
    /* The strings are built while the buffer is held: they point into it. */
    int read = inert_metadata_facts(view.buf, (size_t)view.len, facts);
    inert_release_buffer(&view);
    if (read <= 0) return read < 0 ? NULL : Py_NewRef(Py_None);
    PyObject *result = PyTuple_Pack(5, facts[0], facts[1], facts[2], facts[3], facts[4]);
    for (int i = 0; i < 5; i++) Py_DECREF(facts[i]);
    return result;
}
