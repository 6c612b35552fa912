/* The compiled SQLite reader: streams a LangGraph checkpoint database lineage by lineage and judges each
   row where SQLite holds it, so the blobs never become Python objects.

   It runs the same two ordered queries as store/sqlite.py's Python reader, on its own read-only connection
   (the URI store/sqlite.py built, in one read transaction), and returns per lineage what that reader would
   build: a finished CheckpointRecord when both judges vouch for the row (made by calling the class with
   the fields store/sqlite.py names, in its order), and otherwise the row exactly as Python's sqlite3 module
   returns it, for record_from_row.
   Write rows are matched to their checkpoint and counted here; a write the value judge cannot vouch for
   is handed back whole, and Python decodes it and adds what it holds. Key columns must have TEXT
   affinity (store/sqlite.py checks the schema), so they hold only NULL, TEXT or BLOB.
   Asked to (verify-shape --deep), it also hands over per lineage the rows the deep proof would read again
   (store/history.py): each stored messages value's checkpoint and each `messages` write, as that reader
   selects them, within a budget of bytes per thread (the scan holds a thread's lineages until it has read
   them all), past which the proof reads the rest of the thread again itself. Only lineages whose keys and
   checkpoint ids are TEXT (a namespace may be NULL) are handed over: those are the ones the proof finds again
   by key, so handed over or read again, the proof sees the same rows.

   Built only where libsqlite3's header is found (setup.py); tests/test_sqlite_native.py compares the
   records with the Python reader's on every fixture. */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <sqlite3.h>
#include <stdint.h>
#include <string.h>

#include "_inert.h"

#define BUSY_TIMEOUT_MS 5000 /* what Python's sqlite3.connect waits by default */
#define SIGNAL_CHECK_ROWS 4096

/* The columns of store/sqlite.py's _CHECKPOINTS_SQL and _WRITES_SQL. */
enum { CK_THREAD, CK_NS, CK_ID, CK_PARENT, CK_TYPE, CK_DATA, CK_METADATA, CK_COLUMNS };
enum { WR_THREAD, WR_NS, WR_CHECKPOINT, WR_TASK, WR_CHANNEL, WR_TYPE, WR_VALUE, WR_TASK_PATH, WR_IDX };

/* The CheckpointRecord fields this reader fills: its leading fields, as store/sqlite.py's COMPILED_RECORD_FIELDS. */
enum {
    R_THREAD, R_NS, R_ID, R_PARENT, R_STEP, R_SOURCE, R_MODE, R_UPDATES, R_SUPERSTEPS, R_MESSAGES, R_VERSION,
    R_SEED_EMPTY, R_WRITE_ROWS, R_WRITE_TASKS, R_WRITE_BYTES, R_WRITE_ITEMS, R_ITEM_BYTES, R_OTHER_ROWS,
    R_OTHER_BYTES, R_OVERWRITE, R_REMOVAL, R_CHECKPOINT_BYTES, R_METADATA_BYTES, R_SNAPSHOT_BYTES, R_FIELDS
};
#define WRITE_COUNTS (R_REMOVAL - R_WRITE_ROWS + 1)

static PyObject *ReadError;
static const unsigned char no_bytes[1] = {0};

/* A column's storage class and bytes, valid until its statement steps. */
typedef struct {
    int type;
    const unsigned char *bytes;
    size_t size;
} Key;

/* One checkpoint of the lineage being read. */
typedef struct {
    PyObject *fields; /* the record's fields when `clean` (write counts still None), else the raw row */
    int clean;
    int id_type;
    size_t id_offset, id_size; /* the checkpoint id's bytes in the arena */
    Py_ssize_t counts[WRITE_COUNTS - 2];
    int overwrite, removal;
} Entry;

typedef struct {
    PyObject_HEAD
    sqlite3 *db;
    sqlite3_stmt *checkpoints, *writes;
    int checkpoint_row, write_row; /* 1 while the statement holds a row not yet consumed */
    int started;                   /* both statements have stepped to their first row */
    PyObject *shapes[4];           /* MessagesShape members by judge kind */
    PyObject *record_type;         /* CheckpointRecord */
    Entry *entries;
    size_t entry_count, entry_capacity;
    unsigned char *arena; /* the lineage key and the checkpoint ids of the lineage */
    size_t arena_size, arena_capacity;
    size_t *slots; /* open-addressing table of entry index + 1 by checkpoint id */
    size_t slot_mask;
    unsigned char *task; /* the last task counted as writing messages */
    size_t task_size, task_capacity;
    int task_type;
    Py_ssize_t counted_entry;
    unsigned long rows;
    /* The handover to the deep proof (budget 0: none asked): a value past value_limit goes as None and its
       size; a lineage whose rows would take the thread's handover past budget is handed as None, and the proof
       reads it again. `handed_bytes` is the thread's so far (values, keys and row_cost a row). */
    Py_ssize_t value_limit, budget, row_cost, handed_bytes;
    PyObject *stored, *message_writes; /* this lineage's handover so far; NULL once dropped */
    unsigned char *budget_thread;      /* the thread the budget is counting */
    size_t budget_thread_size, budget_thread_capacity;
    int budget_thread_type;
} Stream;

static int read_failed(Stream *s, int code) {
    PyErr_Format(ReadError, "%s", code == SQLITE_NOMEM ? "out of memory" : sqlite3_errmsg(s->db));
    return -1;
}

/* Room for `needed` items; a buffer is always allocated, so copies of zero bytes never target NULL. */
static int grow(void **buffer, size_t *capacity, size_t needed, size_t item) {
    if (needed <= *capacity && *buffer != NULL) return 0;
    size_t capacity_now = *capacity ? *capacity : 64;
    while (capacity_now < needed) capacity_now *= 2;
    void *grown = PyMem_Realloc(*buffer, capacity_now * item);
    if (grown == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    *buffer = grown;
    *capacity = capacity_now;
    return 0;
}

/* The column as a Key: its stored bytes. Text need not be UTF-8: store/sqlite.py reads text losslessly
   (store/sqlite_text.py), and key_value decodes it the same way. */
static int column_key(sqlite3_stmt *statement, int column, Key *key) {
    key->type = sqlite3_column_type(statement, column);
    if (key->type == SQLITE_NULL) {
        *key = (Key){SQLITE_NULL, no_bytes, 0};
        return 0;
    }
    if (key->type == SQLITE_TEXT) {
        key->bytes = sqlite3_column_text(statement, column);
    } else if (key->type == SQLITE_BLOB) {
        key->bytes = sqlite3_column_blob(statement, column);
    } else {
        PyErr_Format(ReadError, "column %s holds a number although its type is TEXT",
                     sqlite3_column_name(statement, column));
        return -1;
    }
    key->size = (size_t)sqlite3_column_bytes(statement, column);
    if (key->bytes == NULL) {
        if (key->size != 0) return PyErr_NoMemory(), -1;
        key->bytes = no_bytes;
    }
    return 0;
}

/* checkpoint_ns as store/sqlite.py keys lineages: `ns or ""`, so NULL and empty values are the empty text. */
static void normalize_ns(Key *key) {
    if (key->size == 0) *key = (Key){SQLITE_TEXT, no_bytes, 0};
}

static int keys_equal(const Key *a, const Key *b) {
    return a->type == b->type && a->size == b->size && memcmp(a->bytes, b->bytes, a->size) == 0;
}

/* SQLite's ORDER BY for NULL, TEXT and BLOB under the BINARY collation. */
static int compare_keys(const Key *a, const Key *b) {
    if (a->type != b->type) {
        int rank_a = a->type == SQLITE_NULL ? 0 : a->type == SQLITE_TEXT ? 1 : 2;
        int rank_b = b->type == SQLITE_NULL ? 0 : b->type == SQLITE_TEXT ? 1 : 2;
        return rank_a < rank_b ? -1 : 1;
    }
    size_t common = a->size < b->size ? a->size : b->size;
    int order = common ? memcmp(a->bytes, b->bytes, common) : 0;
    if (order != 0) return order;
    return a->size < b->size ? -1 : a->size > b->size;
}

static int is_text(const Key *key, const char *text, size_t size) {
    return key->type == SQLITE_TEXT && key->size == size && memcmp(key->bytes, text, size) == 0;
}

/* A key column as Python holds it: None, str or bytes; text as sqlite_text.lossless_text reads it (bytes that
   are not UTF-8 become surrogate escapes, so the str gives back exactly the stored bytes). */
static PyObject *key_value(const Key *key) {
    if (key->type == SQLITE_NULL) return Py_NewRef(Py_None);
    if (key->type == SQLITE_TEXT)
        return PyUnicode_DecodeUTF8((const char *)key->bytes, (Py_ssize_t)key->size, "surrogateescape");
    return PyBytes_FromStringAndSize((const char *)key->bytes, (Py_ssize_t)key->size);
}

/* A key as records hold it (records.key_text): text as it is, a BLOB as x'<hex>', NULL as None. The savers'
   schema lets a BLOB into a key column; reports and parent lookups need text. */
static PyObject *key_text_value(const Key *key) {
    if (key->type != SQLITE_BLOB) return key_value(key);
    PyObject *text = PyUnicode_New((Py_ssize_t)(key->size * 2 + 3), 127);
    if (text == NULL) return NULL;
    Py_UCS1 *out = PyUnicode_1BYTE_DATA(text);
    static const char digits[] = "0123456789abcdef";
    out[0] = 'x';
    out[1] = '\'';
    for (size_t i = 0; i < key->size; i++) {
        out[2 + 2 * i] = (Py_UCS1)digits[key->bytes[i] >> 4];
        out[3 + 2 * i] = (Py_UCS1)digits[key->bytes[i] & 0x0F];
    }
    out[2 + 2 * key->size] = '\'';
    return text;
}

static PyObject *column_key_text(sqlite3_stmt *statement, int column) {
    Key key;
    return column_key(statement, column, &key) < 0 ? NULL : key_text_value(&key);
}

/* The value Python's sqlite3 module returns for a column. */
static PyObject *column_value(sqlite3_stmt *statement, int column) {
    int type = sqlite3_column_type(statement, column);
    if (type == SQLITE_INTEGER) return PyLong_FromLongLong(sqlite3_column_int64(statement, column));
    if (type == SQLITE_FLOAT) return PyFloat_FromDouble(sqlite3_column_double(statement, column));
    Key key;
    return column_key(statement, column, &key) < 0 ? NULL : key_value(&key);
}

static int step(Stream *s, sqlite3_stmt *statement, int *has_row) {
    int code = sqlite3_step(statement);
    if (code == SQLITE_ROW) {
        *has_row = 1;
        return 0;
    }
    *has_row = 0;
    return code == SQLITE_DONE ? 0 : read_failed(s, code);
}

/* The bytes of a payload column (CAST to BLOB in the query): 0 when NULL. */
static int payload(sqlite3_stmt *statement, int column, const unsigned char **bytes, size_t *size) {
    if (sqlite3_column_type(statement, column) == SQLITE_NULL) return 0;
    *bytes = sqlite3_column_blob(statement, column);
    *size = (size_t)sqlite3_column_bytes(statement, column);
    if (*bytes == NULL) *bytes = no_bytes;
    return 1;
}

static PyObject *raw_row(sqlite3_stmt *statement) {
    PyObject *row = PyTuple_New(CK_COLUMNS);
    for (int column = 0; row != NULL && column < CK_COLUMNS; column++) {
        PyObject *value = column_value(statement, column);
        if (value == NULL) Py_CLEAR(row);
        else PyTuple_SET_ITEM(row, column, value);
    }
    return row;
}

/* Store `value` (a new reference) as a record's `field` in the tuple of its fields. */
static void put(PyObject *fields, int field, PyObject *value) {
    PyObject *none = PyTuple_GET_ITEM(fields, field);
    PyTuple_SET_ITEM(fields, field, value);
    Py_DECREF(none);
}

/* The fields of a record, each None until set. */
static PyObject *new_fields(void) {
    PyObject *fields = PyTuple_New(R_FIELDS);
    for (int i = 0; fields != NULL && i < R_FIELDS; i++) PyTuple_SET_ITEM(fields, i, Py_NewRef(Py_None));
    return fields;
}

/* The fields of a row both judges vouch for, write counts unset; NULL with no error when one abstains. */
static PyObject *clean_fields(Stream *s, PyObject *thread, PyObject *ns) {
    sqlite3_stmt *st = s->checkpoints;
    Key kind;
    const unsigned char *data, *metadata;
    size_t data_size, metadata_size;
    if (column_key(st, CK_TYPE, &kind) < 0) return NULL;
    if (!is_text(&kind, "msgpack", 7) || !payload(st, CK_DATA, &data, &data_size) ||
        !payload(st, CK_METADATA, &metadata, &metadata_size))
        return NULL;
    InertCheckpointFacts facts;
    if (!inert_judge_checkpoint(data, data_size, &facts)) return NULL;
    PyObject *read[5];
    int metadata_read = inert_metadata_facts(metadata, metadata_size, read);
    if (metadata_read <= 0) return NULL;
    PyObject *fields = new_fields();
    if (fields == NULL) {
        for (int i = 0; i < 5; i++) Py_DECREF(read[i]);
        return NULL;
    }
    put(fields, R_THREAD, Py_NewRef(thread));
    put(fields, R_NS, Py_NewRef(ns));
    for (int i = 0; i < 5; i++) put(fields, R_STEP + i, read[i]);
    put(fields, R_MESSAGES, Py_NewRef(s->shapes[facts.kind]));
    int empty = facts.kind == MESSAGES_LIST ? facts.count == 0 : facts.kind == MESSAGES_SNAPSHOT && facts.empty;
    put(fields, R_SEED_EMPTY, Py_NewRef(empty ? Py_True : Py_False));
    PyObject *values[] = {
        column_key_text(st, CK_ID),
        column_key_text(st, CK_PARENT),
        facts.version ? PyUnicode_DecodeUTF8(facts.version, facts.version_size, "strict") : Py_NewRef(Py_None),
        PyLong_FromSize_t(data_size),
        PyLong_FromSize_t(metadata_size),
        PyLong_FromSize_t(facts.kind == MESSAGES_SNAPSHOT ? facts.count : 0),
    };
    int positions[] = {R_ID, R_PARENT, R_VERSION, R_CHECKPOINT_BYTES, R_METADATA_BYTES, R_SNAPSHOT_BYTES};
    int failed = 0;
    for (int i = 0; i < 6; i++) {
        if (values[i] == NULL) failed = 1;
        else put(fields, positions[i], values[i]);
    }
    if (failed) Py_CLEAR(fields);
    return fields;
}

/* Drop this lineage's handover: past the budget, the proof reads the lineage again instead. */
static void drop_handover(Stream *s) {
    Py_CLEAR(s->stored);
    Py_CLEAR(s->message_writes);
}

/* (value, size) as store/history.py selects a payload column: the bytes, None past value_limit; size None for
   NULL. `bytes` of `size` when `has_data`; `object` (borrowed, may be NULL): a bytes object holding them already;
   `keys`: the bytes of the row's other values. 1, with nothing made, where the row would take the thread's
   handover past its budget: the lineage's is dropped. */
static int handed_value(Stream *s, int has_data, const unsigned char *bytes, size_t size, PyObject *object,
                        size_t keys, PyObject **value, PyObject **length) {
    size_t kept = has_data && size <= (size_t)s->value_limit ? size : 0;
    size_t cost = kept + keys + (size_t)s->row_cost;
    if (cost > (size_t)(s->budget - s->handed_bytes)) {
        drop_handover(s); /* before a copy is made: the proof reads the lineage again, one row at a time */
        return 1;
    }
    s->handed_bytes += (Py_ssize_t)cost;
    if (!has_data) {
        *value = Py_NewRef(Py_None);
        *length = Py_NewRef(Py_None);
        return 0;
    }
    *length = PyLong_FromSize_t(size);
    if (*length == NULL) return -1;
    if (size > (size_t)s->value_limit) {
        *value = Py_NewRef(Py_None);
        return 0;
    }
    *value = object != NULL ? Py_NewRef(object) : PyBytes_FromStringAndSize((const char *)bytes, (Py_ssize_t)size);
    if (*value == NULL) {
        Py_CLEAR(*length);
        return -1;
    }
    return 0;
}

/* Append `row` (a new reference, NULL on failure) to `list`. */
static int hand(PyObject *list, PyObject *row) {
    if (row == NULL) return -1;
    int failed = PyList_Append(list, row);
    Py_DECREF(row);
    return failed;
}

/* The checkpoint id of an entry, borrowed: as records hold it (key_text) when clean, else as the row holds it. */
static PyObject *entry_id(const Entry *entry) { return PyTuple_GET_ITEM(entry->fields, entry->clean ? R_ID : CK_ID); }

/* Hand over the checkpoint of `entry` where it may store a messages value: judged to (clean), or not judged
   here (a raw row, which Python classifies: it picks the ones it wants). */
static int hand_stored(Stream *s, Entry *entry) {
    PyObject *kind, *value, *length;
    int handed;
    if (entry->clean) {
        if (PyTuple_GET_ITEM(entry->fields, R_MESSAGES) == s->shapes[MESSAGES_ABSENT]) return 0;
        const unsigned char *bytes = NULL;
        size_t size = 0;
        int has_data = payload(s->checkpoints, CK_DATA, &bytes, &size);
        kind = column_value(s->checkpoints, CK_TYPE);
        handed = kind == NULL ? -1 : handed_value(s, has_data, bytes, size, NULL, 0, &value, &length);
    } else {
        PyObject *data = PyTuple_GET_ITEM(entry->fields, CK_DATA); /* bytes, or None for NULL (a BLOB cast) */
        if (data != Py_None && !PyBytes_Check(data)) {
            drop_handover(s); /* never from the scan's query; the proof would read the lineage again */
            return 0;
        }
        int has_data = data != Py_None;
        kind = Py_NewRef(PyTuple_GET_ITEM(entry->fields, CK_TYPE));
        handed = handed_value(s, has_data, NULL, has_data ? (size_t)PyBytes_GET_SIZE(data) : 0, data, 0, &value,
                              &length);
    }
    if (handed != 0) {
        Py_XDECREF(kind);
        return handed < 0 ? -1 : 0;
    }
    return hand(s->stored, Py_BuildValue("(ONNN)", entry_id(entry), kind, value, length));
}

static int add_checkpoint(Stream *s, PyObject *thread, PyObject *ns) {
    sqlite3_stmt *st = s->checkpoints;
    Key id;
    if (column_key(st, CK_ID, &id) < 0) return -1;
    if (grow((void **)&s->entries, &s->entry_capacity, s->entry_count + 1, sizeof(Entry)) < 0 ||
        grow((void **)&s->arena, &s->arena_capacity, s->arena_size + id.size, 1) < 0)
        return -1;
    Entry *entry = &s->entries[s->entry_count];
    memset(entry, 0, sizeof *entry);
    entry->id_type = id.type;
    entry->id_offset = s->arena_size;
    entry->id_size = id.size;
    memcpy(s->arena + s->arena_size, id.bytes, id.size);
    s->arena_size += id.size;
    /* A key the proof could not find again by its text (a checkpoint id, or a namespace read as '' that is an
       empty BLOB): read again, the lineage is what it proves. */
    if (s->stored != NULL && (id.type != SQLITE_TEXT || sqlite3_column_type(st, CK_NS) == SQLITE_BLOB))
        drop_handover(s);
    entry->fields = clean_fields(s, thread, ns);
    if (entry->fields != NULL) {
        entry->clean = 1;
    } else {
        if (PyErr_Occurred()) return -1;
        entry->fields = raw_row(st);
        if (entry->fields == NULL) return -1;
    }
    s->entry_count++;
    if (s->stored != NULL) return hand_stored(s, entry);
    return 0;
}

static uint64_t key_hash(int type, const unsigned char *bytes, size_t size) {
    uint64_t hash = 1469598103934665603ULL ^ (uint64_t)type;
    for (size_t i = 0; i < size; i++) hash = (hash ^ bytes[i]) * 1099511628211ULL;
    return hash;
}

static int entry_has_key(const Stream *s, const Entry *entry, const Key *key) {
    return entry->id_type == key->type && entry->id_size == key->size &&
           memcmp(s->arena + entry->id_offset, key->bytes, key->size) == 0;
}

/* The slot for `key`: the one holding it, or the empty one where it belongs. */
static size_t *slot_for(Stream *s, const Key *key) {
    size_t at = (size_t)key_hash(key->type, key->bytes, key->size) & s->slot_mask;
    while (s->slots[at] != 0 && !entry_has_key(s, &s->entries[s->slots[at] - 1], key)) at = (at + 1) & s->slot_mask;
    return &s->slots[at];
}

/* Index the lineage's checkpoints by id; a repeated id maps to its last row, as a dict would. */
static int index_entries(Stream *s) {
    size_t size = 16;
    while (size < s->entry_count * 2) size *= 2;
    size_t *slots = PyMem_Realloc(s->slots, size * sizeof(size_t));
    if (slots == NULL) return PyErr_NoMemory(), -1;
    memset(slots, 0, size * sizeof(size_t));
    s->slots = slots;
    s->slot_mask = size - 1;
    for (size_t i = 0; i < s->entry_count; i++) {
        Entry *entry = &s->entries[i];
        Key key = {entry->id_type, s->arena + entry->id_offset, entry->id_size};
        *slot_for(s, &key) = i + 1;
    }
    return 0;
}

/* msgpack's array header length, as peek.array_header_size: what a list write adds around its items. */
static size_t array_header_size(size_t items) { return items < 16 ? 1 : items < 65536 ? 3 : 5; }

/* A write row's text columns after the lineage key, read (and so checked) as Python's sqlite3 module
   reads every row it fetches, whether or not the row is folded. */
typedef struct {
    Key checkpoint, task, channel, kind;
} WriteKeys;

static int write_keys(sqlite3_stmt *st, WriteKeys *keys) {
    return column_key(st, WR_CHECKPOINT, &keys->checkpoint) < 0 || column_key(st, WR_TASK, &keys->task) < 0 ||
                   column_key(st, WR_CHANNEL, &keys->channel) < 0 || column_key(st, WR_TYPE, &keys->kind) < 0
               ? -1
               : 0;
}

/* Fold one write row of the lineage into its checkpoint's counts, as writes.WriteFolder.add does. */
static int fold_write(Stream *s, const WriteKeys *keys, PyObject *deferred) {
    sqlite3_stmt *st = s->writes;
    Key checkpoint = keys->checkpoint, task = keys->task, channel = keys->channel, kind = keys->kind;
    /* A messages write under keys the proof would match by their text, or not at all, where this reader matches
       stored bytes. */
    if (s->message_writes != NULL && is_text(&channel, "messages", 8) &&
        (checkpoint.type != SQLITE_TEXT || sqlite3_column_type(st, WR_NS) == SQLITE_BLOB))
        drop_handover(s);
    size_t slot = *slot_for(s, &checkpoint);
    if (slot == 0) return 0; /* a write of a checkpoint this lineage does not have */
    Entry *entry = &s->entries[slot - 1];
    const unsigned char *data = NULL;
    size_t size = 0;
    int has_data = payload(st, WR_VALUE, &data, &size);
    if (s->message_writes != NULL && is_text(&channel, "messages", 8)) {
        PyObject *value, *length;
        size_t keys = task.size + (size_t)sqlite3_column_bytes(st, WR_TASK_PATH);
        int handed = handed_value(s, has_data, data, size, NULL, keys, &value, &length);
        if (handed < 0) return -1;
        if (handed == 0) {
            PyObject *row = Py_BuildValue("(ONNNNNN)", entry_id(entry), column_value(st, WR_TASK),
                                          column_value(st, WR_TASK_PATH), column_value(st, WR_IDX),
                                          column_value(st, WR_TYPE), value, length);
            if (hand(s->message_writes, row) < 0) return -1;
        }
    }
    /* Writes of None are read only for the handover (its query selects the messages ones): nothing to count. */
    if (is_text(&kind, "null", 4)) return 0;
    InertValueFacts facts;
    int judged = has_data && is_text(&kind, "msgpack", 7) && inert_judge_value(data, size, &facts);
    if (!judged) {
        PyObject *row = Py_BuildValue("(nNNNN)", (Py_ssize_t)(slot - 1), column_value(st, WR_TASK),
                                      column_value(st, WR_CHANNEL), column_value(st, WR_TYPE),
                                      column_value(st, WR_VALUE));
        if (row == NULL || PyList_Append(deferred, row) < 0) {
            Py_XDECREF(row);
            return -1;
        }
        Py_DECREF(row);
    }
    Py_ssize_t *counts = entry->counts;
    if (!is_text(&channel, "messages", 8)) {
        counts[R_OTHER_ROWS - R_WRITE_ROWS]++;
        counts[R_OTHER_BYTES - R_WRITE_ROWS] += (Py_ssize_t)size;
        return 0;
    }
    counts[0]++;
    /* A task's rows are adjacent (the query orders by checkpoint, task, idx): count each task once. */
    Py_ssize_t index = (Py_ssize_t)(slot - 1);
    int same_checkpoint = s->counted_entry == index || (s->counted_entry < 0 && checkpoint.type == SQLITE_NULL);
    int same_task = task.type == s->task_type && task.size == s->task_size &&
                    (task.size == 0 || memcmp(task.bytes, s->task, task.size) == 0);
    if (!same_checkpoint || !same_task) {
        if (grow((void **)&s->task, &s->task_capacity, task.size, 1) < 0) return -1;
        if (task.size) memcpy(s->task, task.bytes, task.size);
        s->task_size = task.size;
        s->task_type = task.type;
        s->counted_entry = index;
        counts[R_WRITE_TASKS - R_WRITE_ROWS]++;
    }
    counts[R_WRITE_BYTES - R_WRITE_ROWS] += (Py_ssize_t)size;
    if (!judged) return 0; /* Python adds what the value holds */
    size_t items = facts.is_list ? facts.items : 1;
    counts[R_WRITE_ITEMS - R_WRITE_ROWS] += (Py_ssize_t)items;
    counts[R_ITEM_BYTES - R_WRITE_ROWS] += (Py_ssize_t)(facts.is_list ? size - array_header_size(items) : size);
    if (facts.flags & 1) entry->overwrite = 1;
    if (facts.flags & 2) entry->removal = 1;
    return 0;
}

/* (thread_id, checkpoint_ns) of the current row of `statement`, checkpoint_ns normalized. */
static int lineage_key(sqlite3_stmt *statement, Key *thread, Key *ns) {
    if (column_key(statement, 0, thread) < 0 || column_key(statement, 1, ns) < 0) return -1;
    normalize_ns(ns);
    return 0;
}

static int compare_lineages(const Key *thread_a, const Key *ns_a, const Key *thread_b, const Key *ns_b) {
    int order = compare_keys(thread_a, thread_b);
    return order != 0 ? order : compare_keys(ns_a, ns_b);
}

/* An entry's write counts as new references, in field order from R_WRITE_ROWS. */
static int count_values(const Entry *entry, PyObject *values[WRITE_COUNTS]) {
    for (int i = 0; i < WRITE_COUNTS - 2; i++) {
        values[i] = PyLong_FromSsize_t(entry->counts[i]);
        if (values[i] == NULL) {
            while (i-- > 0) Py_DECREF(values[i]);
            return -1;
        }
    }
    values[WRITE_COUNTS - 2] = Py_NewRef(entry->overwrite ? Py_True : Py_False);
    values[WRITE_COUNTS - 1] = Py_NewRef(entry->removal ? Py_True : Py_False);
    return 0;
}

static void clear_entries(Stream *s) {
    for (size_t i = 0; i < s->entry_count; i++) Py_CLEAR(s->entries[i].fields);
    s->entry_count = 0;
    s->arena_size = 0;
}

/* The lineage's list of records: clean ones made with their counts, raw rows as (row, counts). */
static PyObject *finish_entries(Stream *s) {
    PyObject *records = PyList_New((Py_ssize_t)s->entry_count);
    if (records == NULL) return NULL;
    for (size_t i = 0; i < s->entry_count; i++) {
        Entry *entry = &s->entries[i];
        PyObject *item;
        PyObject *counts[WRITE_COUNTS];
        if (count_values(entry, counts) < 0) goto failed;
        if (entry->clean) {
            PyObject *arguments[R_FIELDS];
            for (int field = 0; field < R_FIELDS; field++) arguments[field] = PyTuple_GET_ITEM(entry->fields, field);
            for (int field = 0; field < WRITE_COUNTS; field++) arguments[R_WRITE_ROWS + field] = counts[field];
            item = PyObject_Vectorcall(s->record_type, arguments, R_FIELDS, NULL);
            for (int field = 0; field < WRITE_COUNTS; field++) Py_DECREF(counts[field]);
            if (item == NULL) goto failed;
            Py_DECREF(entry->fields);
        } else {
            PyObject *counted = PyTuple_New(WRITE_COUNTS);
            if (counted == NULL) {
                for (int field = 0; field < WRITE_COUNTS; field++) Py_DECREF(counts[field]);
                goto failed;
            }
            for (int field = 0; field < WRITE_COUNTS; field++) PyTuple_SET_ITEM(counted, field, counts[field]);
            item = PyTuple_Pack(2, entry->fields, counted);
            Py_DECREF(counted);
            if (item == NULL) goto failed;
            Py_DECREF(entry->fields);
        }
        entry->fields = NULL;
        PyList_SET_ITEM(records, (Py_ssize_t)i, item);
    }
    return records;
failed:
    Py_DECREF(records);
    return NULL;
}

static PyObject *next_lineage(Stream *s) {
    /* The first rows are read here, not at open: a page that cannot be read fails as a read, as in Python. */
    if (s->db != NULL && !s->started) {
        s->started = 1;
        if (step(s, s->checkpoints, &s->checkpoint_row) < 0 || step(s, s->writes, &s->write_row) < 0) return NULL;
    }
    if (s->db == NULL || !s->checkpoint_row) return NULL; /* StopIteration */
    Key thread, ns;
    if (lineage_key(s->checkpoints, &thread, &ns) < 0) return NULL;
    PyObject *thread_value = key_text_value(&thread), *ns_value = key_text_value(&ns), *deferred = PyList_New(0);
    PyObject *records = NULL, *result = NULL;
    if (thread_value == NULL || ns_value == NULL || deferred == NULL) goto done;
    /* The key is kept at the start of the arena: the statement's own bytes go with the next step. */
    size_t key_size = thread.size + ns.size;
    clear_entries(s);
    if (grow((void **)&s->arena, &s->arena_capacity, key_size, 1) < 0) goto done;
    memcpy(s->arena, thread.bytes, thread.size);
    memcpy(s->arena + thread.size, ns.bytes, ns.size);
    s->arena_size = key_size;
    drop_handover(s);
    if (s->budget > 0 && thread.type == SQLITE_TEXT && ns.type == SQLITE_TEXT) {
        Key counted = {s->budget_thread_type, s->budget_thread, s->budget_thread_size};
        if (s->budget_thread == NULL || !keys_equal(&thread, &counted)) { /* a new thread: a new budget */
            if (grow((void **)&s->budget_thread, &s->budget_thread_capacity, thread.size, 1) < 0) goto done;
            if (thread.size) memcpy(s->budget_thread, thread.bytes, thread.size);
            s->budget_thread_size = thread.size;
            s->budget_thread_type = thread.type;
            s->handed_bytes = 0;
        }
        s->stored = PyList_New(0);
        s->message_writes = PyList_New(0);
        if (s->stored == NULL || s->message_writes == NULL) goto done;
    }
    int thread_type = thread.type, ns_type = ns.type;
    size_t thread_size = thread.size, ns_size = ns.size;
    for (;;) {
        if (add_checkpoint(s, thread_value, ns_value) < 0 || step(s, s->checkpoints, &s->checkpoint_row) < 0) goto done;
        if (++s->rows % SIGNAL_CHECK_ROWS == 0 && PyErr_CheckSignals() < 0) goto done;
        if (!s->checkpoint_row) break;
        Key next_thread, next_ns;
        if (lineage_key(s->checkpoints, &next_thread, &next_ns) < 0) goto done;
        Key lineage_thread = {thread_type, s->arena, thread_size}, lineage_ns = {ns_type, s->arena + thread_size, ns_size};
        if (!keys_equal(&next_thread, &lineage_thread) || !keys_equal(&next_ns, &lineage_ns)) break;
    }
    if (index_entries(s) < 0) goto done;
    s->task_type = SQLITE_NULL;
    s->task_size = 0;
    s->counted_entry = -1;
    while (s->write_row) {
        Key write_thread, write_ns;
        WriteKeys keys;
        if (lineage_key(s->writes, &write_thread, &write_ns) < 0 || write_keys(s->writes, &keys) < 0) goto done;
        Key lineage_thread = {thread_type, s->arena, thread_size}, lineage_ns = {ns_type, s->arena + thread_size, ns_size};
        int order = compare_lineages(&write_thread, &write_ns, &lineage_thread, &lineage_ns);
        if (order > 0) break;
        if (order == 0 && fold_write(s, &keys, deferred) < 0) goto done;
        if (step(s, s->writes, &s->write_row) < 0) goto done;
        if (++s->rows % SIGNAL_CHECK_ROWS == 0 && PyErr_CheckSignals() < 0) goto done;
    }
    records = finish_entries(s);
    if (records != NULL) {
        PyObject *handover = s->stored != NULL ? PyTuple_Pack(2, s->stored, s->message_writes) : Py_NewRef(Py_None);
        if (handover != NULL) result = PyTuple_Pack(5, thread_value, ns_value, records, deferred, handover);
        Py_XDECREF(handover);
    }
done:
    drop_handover(s);
    clear_entries(s);
    Py_XDECREF(thread_value);
    Py_XDECREF(ns_value);
    Py_XDECREF(deferred);
    Py_XDECREF(records);
    return result;
}

static void close_stream(Stream *s) {
    drop_handover(s);
    clear_entries(s);
    sqlite3_finalize(s->checkpoints);
    sqlite3_finalize(s->writes);
    s->checkpoints = s->writes = NULL;
    if (s->db != NULL) sqlite3_close_v2(s->db); /* a read transaction just ends; nothing was written */
    s->db = NULL;
    s->checkpoint_row = s->write_row = 0;
}

static PyObject *stream_close(PyObject *self, PyObject *unused) {
    (void)unused;
    close_stream((Stream *)self);
    Py_RETURN_NONE;
}

static void stream_dealloc(PyObject *self) {
    Stream *s = (Stream *)self;
    close_stream(s);
    for (int i = 0; i < 4; i++) Py_CLEAR(s->shapes[i]);
    Py_CLEAR(s->record_type);
    PyMem_Free(s->entries);
    PyMem_Free(s->arena);
    PyMem_Free(s->slots);
    PyMem_Free(s->task);
    PyMem_Free(s->budget_thread);
    Py_TYPE(self)->tp_free(self);
}

static PyObject *stream_next(PyObject *self) { return next_lineage((Stream *)self); }

static PyMethodDef stream_methods[] = {
    {"close", stream_close, METH_NOARGS, "Finish the read transaction and close the connection."},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject StreamType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "deerflow_ckpt.native._inert.LineageStream",
    .tp_basicsize = sizeof(Stream),
    .tp_dealloc = stream_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Lineages of a checkpoint database, from open_lineages().",
    .tp_iter = PyObject_SelfIter,
    .tp_iternext = stream_next,
    .tp_methods = stream_methods,
};

static int prepare(Stream *s, const char *sql, PyObject *parameters, sqlite3_stmt **statement) {
    int code = sqlite3_prepare_v2(s->db, sql, -1, statement, NULL);
    if (code != SQLITE_OK) return read_failed(s, code);
    if (PyTuple_GET_SIZE(parameters) != sqlite3_bind_parameter_count(*statement)) {
        PyErr_SetString(PyExc_ValueError, "parameter count does not match the query");
        return -1;
    }
    /* As Python's sqlite3 module binds: str as UTF-8 text, bytes as a BLOB (a key that is not UTF-8 comes as
       its bytes, cast to TEXT in the query: store/sqlite_text.py). */
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(parameters); i++) {
        PyObject *parameter = PyTuple_GET_ITEM(parameters, i);
        if (PyBytes_Check(parameter)) {
            code = sqlite3_bind_blob64(*statement, (int)i + 1, PyBytes_AS_STRING(parameter),
                                       (sqlite3_uint64)PyBytes_GET_SIZE(parameter), SQLITE_TRANSIENT);
        } else {
            Py_ssize_t size;
            const char *text = PyUnicode_AsUTF8AndSize(parameter, &size);
            if (text == NULL) return -1;
            code = sqlite3_bind_text64(*statement, (int)i + 1, text, (sqlite3_uint64)size, SQLITE_TRANSIENT,
                                       SQLITE_UTF8);
        }
        if (code != SQLITE_OK) return read_failed(s, code);
    }
    return 0;
}

static int execute(Stream *s, const char *sql) {
    int code = sqlite3_exec(s->db, sql, NULL, NULL, NULL);
    return code == SQLITE_OK ? 0 : read_failed(s, code);
}

PyObject *inert_open_lineages(PyObject *module, PyObject *args) {
    (void)module;
    const char *uri, *checkpoints_sql, *writes_sql;
    PyObject *parameters, *shapes, *record_type;
    Py_ssize_t value_limit = 0, budget = 0, row_cost = 0;
    if (!PyArg_ParseTuple(args, "sssO!O!O!|nnn", &uri, &checkpoints_sql, &writes_sql, &PyTuple_Type, &parameters,
                          &PyTuple_Type, &shapes, &PyType_Type, &record_type, &value_limit, &budget, &row_cost))
        return NULL;
    if (value_limit < 0 || budget < 0 || row_cost < 0 || row_cost > budget)
        return PyErr_Format(PyExc_ValueError, "limits must not be negative, nor a row's cost past the budget");
    if (PyTuple_GET_SIZE(shapes) != 4) return PyErr_Format(PyExc_ValueError, "four shapes are needed");
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(parameters); i++)
        if (!PyUnicode_Check(PyTuple_GET_ITEM(parameters, i)) && !PyBytes_Check(PyTuple_GET_ITEM(parameters, i)))
            return PyErr_Format(PyExc_TypeError, "parameters must be str or bytes");
    Stream *s = PyObject_New(Stream, &StreamType);
    if (s == NULL) return NULL;
    memset((char *)s + sizeof(PyObject), 0, sizeof(Stream) - sizeof(PyObject));
    for (int i = 0; i < 4; i++) s->shapes[i] = Py_NewRef(PyTuple_GET_ITEM(shapes, i));
    s->record_type = Py_NewRef(record_type);
    s->value_limit = value_limit;
    s->budget = budget;
    s->row_cost = row_cost;
    /* NOMUTEX: only the thread holding the GIL ever uses this connection, so SQLite's own locking is waste. */
    /* Through the read-ahead layer (_readahead.c) where it could be registered, else the default VFS. */
    const char *vfs = inert_readahead_vfs();
    int code = sqlite3_open_v2(uri, &s->db, SQLITE_OPEN_READONLY | SQLITE_OPEN_URI | SQLITE_OPEN_NOMUTEX, vfs);
    if (code != SQLITE_OK) {
        if (s->db == NULL) PyErr_NoMemory();
        else read_failed(s, code);
        goto failed;
    }
    sqlite3_busy_timeout(s->db, BUSY_TIMEOUT_MS);
    /* One read transaction: a consistent snapshot while a live writer carries on. */
    /* The layer hands SQLite its pages in place only once mmap_size is set; it answers that setting itself,
       so no file is mapped. Without the layer it is 0, whatever SQLite's build default: the default VFS would
       map the file. (The value is store/sqlite.py's LEND_PAGES.) */
    const char *mmap_size = vfs != NULL ? "PRAGMA mmap_size = 1099511627776" : "PRAGMA mmap_size = 0";
    if (execute(s, mmap_size) < 0 || execute(s, "PRAGMA query_only = 1") < 0 || execute(s, "BEGIN") < 0 ||
        prepare(s, checkpoints_sql, parameters, &s->checkpoints) < 0 ||
        prepare(s, writes_sql, parameters, &s->writes) < 0)
        goto failed;
    if (sqlite3_column_count(s->checkpoints) != CK_COLUMNS ||
        sqlite3_column_count(s->writes) != (budget > 0 ? WR_IDX + 1 : WR_VALUE + 1)) {
        PyErr_SetString(PyExc_ValueError, "the queries do not select the columns this reader reads");
        goto failed;
    }
    return (PyObject *)s;
failed:
    Py_DECREF(s);
    return NULL;
}

PyObject *inert_readahead_vfs_py(PyObject *module, PyObject *unused) {
    (void)module;
    (void)unused;
    const char *name = inert_readahead_vfs();
    if (name == NULL) Py_RETURN_NONE;
    return PyUnicode_FromString(name);
}

PyObject *inert_readahead_counts_py(PyObject *module, PyObject *unused) {
    (void)module;
    (void)unused;
    unsigned long long refills, served, lent;
    inert_readahead_counts(&refills, &served, &lent);
    return Py_BuildValue("(KKK)", refills, served, lent);
}

int inert_add_sqlite_reader(PyObject *module) {
    if (PyType_Ready(&StreamType) < 0) return -1;
    ReadError = PyErr_NewException("deerflow_ckpt.native._inert.ReadError", NULL, NULL);
    if (ReadError == NULL) return -1;
    if (PyModule_AddObjectRef(module, "ReadError", ReadError) < 0) return -1;
    return PyModule_AddObjectRef(module, "LineageStream", (PyObject *)&StreamType);
}
