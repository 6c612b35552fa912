/* Shared between the compiled judge's two files: _inert.c (msgpack, the module) and _inert_json.c. */
#ifndef DEERFLOW_CKPT_INERT_H
#define DEERFLOW_CKPT_INERT_H

#include <Python.h>
#include <stddef.h>

#include <stdint.h>
#include <string.h>

/* Well-formed UTF-8 exactly as Unicode's table 3-7 (and Rust's str::from_utf8) define it. */
int inert_valid_utf8(const unsigned char *s, size_t n);

#define INERT_ONES UINT64_C(0x0101010101010101)
#define INERT_HIGHS UINT64_C(0x8080808080808080)

/* Eight bytes from `s`, unaligned. */
static inline uint64_t inert_word(const unsigned char *s) {
    uint64_t word;
    memcpy(&word, s, 8);
    return word;
}

/* inert_valid_utf8, with the common all-ASCII case decided inline a word at a time: keys, versions and
   message text are mostly ASCII, and this runs for every string of every row. */
static inline int inert_valid_text(const unsigned char *s, size_t n) {
    uint64_t high = 0;
    if (n >= 8) {
        size_t i = 0;
        for (; i + 8 <= n; i += 8) high |= inert_word(s + i);
        high |= inert_word(s + n - 8); /* the tail, overlapping the last full word */
    } else {
        for (size_t i = 0; i < n; i++) high |= s[i];
    }
    return (high & INERT_HIGHS) == 0 || inert_valid_utf8(s, n);
}
/* The bytes of a bytes-like object; bytes objects skip the buffer protocol. */
int inert_get_buffer(PyObject *arg, Py_buffer *view);
void inert_release_buffer(Py_buffer *view);

/* Summary kinds of a checkpoint's messages value (see checkpoint_summary). */
#define MESSAGES_ABSENT 0
#define MESSAGES_LIST 1
#define MESSAGES_SNAPSHOT 2
#define MESSAGES_OTHER 3

/* The judges on raw bytes: 1 and the facts when the value is well formed and names only trusted types,
   0 when only the Python decoder can tell (the caller then hands it the bytes). */
typedef struct {
    int is_list;
    size_t items;
    int flags;
} InertValueFacts;
int inert_judge_value(const unsigned char *data, size_t size, InertValueFacts *facts);

typedef struct {
    int kind;
    size_t count;
    int empty;
    const char *version; /* channel_versions["messages"] inside the judged bytes; NULL when absent */
    Py_ssize_t version_size;
} InertCheckpointFacts;
int inert_judge_checkpoint(const unsigned char *data, size_t size, InertCheckpointFacts *facts);

/* metadata_summary's five objects (new references) into `facts`: 1 when read, 0 to abstain, -1 on a
   Python error. */
int inert_metadata_facts(const unsigned char *data, size_t size, PyObject *facts[5]);
PyObject *inert_metadata_summary(PyObject *module, PyObject *arg);

#ifdef INERT_SQLITE
/* The compiled SQLite reader (_inert_sqlite.c), built where libsqlite3's header is found. */
PyObject *inert_open_lineages(PyObject *module, PyObject *args);
int inert_add_sqlite_reader(PyObject *module);
/* The read-ahead VFS (_readahead.c): its name once registered, NULL where SQLite's default VFS is too old. */
const char *inert_readahead_vfs(void);
/* Windows read ahead, reads served from them, and of those the pages lent in place (xFetch), by every
   connection of this process so far. */
void inert_readahead_counts(unsigned long long *refills, unsigned long long *served, unsigned long long *lent);
PyObject *inert_readahead_counts_py(PyObject *module, PyObject *unused);
PyObject *inert_readahead_vfs_py(PyObject *module, PyObject *unused);
#endif

#endif
