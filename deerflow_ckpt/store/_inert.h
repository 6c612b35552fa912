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
PyObject *inert_metadata_summary(PyObject *module, PyObject *arg);

#endif
