/* Shared between the compiled judge's two files: _inert.c (msgpack, the module) and _inert_json.c. */
#ifndef DEERFLOW_CKPT_INERT_H
#define DEERFLOW_CKPT_INERT_H

#include <Python.h>
#include <stddef.h>

/* Well-formed UTF-8 exactly as Unicode's table 3-7 (and Rust's str::from_utf8) define it. */
int inert_valid_utf8(const unsigned char *s, size_t n);
/* The bytes of a bytes-like object; bytes objects skip the buffer protocol. */
int inert_get_buffer(PyObject *arg, Py_buffer *view);
void inert_release_buffer(Py_buffer *view);
PyObject *inert_metadata_summary(PyObject *module, PyObject *arg);

#endif
