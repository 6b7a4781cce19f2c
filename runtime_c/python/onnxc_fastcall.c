/* InferenceSession.run()'s hot path in C: a CPython extension compiled once per Python, numpy and
 * compiler (onnxc/fastcall.py), never part of a generated library. On small models the Python
 * glue around the C entry point costs more than the model (about 12 Python-level steps of
 * 100-150 ns each); here it is one call. It handles exactly the feeds the Python fast path
 * handles (every required input, exact ndarrays of the right dtype, C-contiguous, a cached plan
 * for these shapes) and answers None for anything else, so the Python code keeps every check
 * and every error message.
 *
 * run(state, feed) -> list of outputs | None (take the Python path) | int (the run's error code)
 *   state = (names, descrs, plans, fn, threads, n_absent, pool, dummy)
 *     names   tuple of str: the required inputs, in C order
 *     descrs  tuple of numpy dtypes, one per name
 *     plans   dict: shape (one input) or tuple of shapes -> plan
 *     fn      int: address of onnxc_run
 *     threads int; n_absent int: NULL inputs appended (overridable initializers not fed)
 *     pool    list of arenas (pointer, bytes, owner, address): popped by one call at a time
 *     dummy   int: address of the arena of a call that needs none
 *   plan = (outs, dims, need, keepalive)
 *     outs    tuple per output: (0, shape, dtype) a new array, or
 *                               (1, keys, rows, classes) ZipMap: a list of dicts {key: float}
 *     dims    int: address of the C dims array; need: arena bytes
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#define NPY_NO_DEPRECATED_API NPY_1_7_API_VERSION
#include <numpy/arrayobject.h>
#include <stdint.h>

typedef int (*onnxc_run_fn)(void *const *, void *const *, int64_t *, void *, int);

#define MAX_IO 64   /* more inputs or outputs than this: the Python path */

static PyObject *zipmap(const float *p, PyObject *keys, Py_ssize_t rows, Py_ssize_t nc)
{
    PyObject *list = PyList_New(rows);
    if (!list) return NULL;
    for (Py_ssize_t r = 0; r < rows; r++) {
        PyObject *d = PyDict_New();
        if (!d) { Py_DECREF(list); return NULL; }
        PyList_SET_ITEM(list, r, d);
        for (Py_ssize_t c = 0; c < nc; c++) {
            PyObject *v = PyFloat_FromDouble((double)p[r * nc + c]);
            if (!v || PyDict_SetItem(d, PyTuple_GET_ITEM(keys, c), v) < 0) {
                Py_XDECREF(v);
                Py_DECREF(list);
                return NULL;
            }
            Py_DECREF(v);
        }
    }
    return list;
}

static PyObject *fast_run(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    if (nargs != 2 || !PyTuple_CheckExact(args[0]) || PyTuple_GET_SIZE(args[0]) != 8
            || !PyDict_CheckExact(args[1])) {
        PyErr_SetString(PyExc_TypeError, "run(state, feed)");
        return NULL;
    }
    PyObject *st = args[0], *feed = args[1];
    PyObject *names = PyTuple_GET_ITEM(st, 0), *descrs = PyTuple_GET_ITEM(st, 1);
    PyObject *plans = PyTuple_GET_ITEM(st, 2), *pool = PyTuple_GET_ITEM(st, 6);
    Py_ssize_t n_in = PyTuple_GET_SIZE(names);
    Py_ssize_t n_absent = PyLong_AsSsize_t(PyTuple_GET_ITEM(st, 5));
    if (n_in < 1 || n_in + n_absent > MAX_IO || PyDict_GET_SIZE(feed) != n_in)
        Py_RETURN_NONE;

    void *ins[MAX_IO];
    PyArrayObject *arrays[MAX_IO];
    for (Py_ssize_t i = 0; i < n_in; i++) {
        PyObject *v = PyDict_GetItemWithError(feed, PyTuple_GET_ITEM(names, i));
        if (!v) {
            if (PyErr_Occurred()) return NULL;
            Py_RETURN_NONE;
        }
        if (!PyArray_CheckExact(v) || !PyArray_ISCARRAY((PyArrayObject *)v)
                || !PyArray_EquivTypes(PyArray_DESCR((PyArrayObject *)v),
                                       (PyArray_Descr *)PyTuple_GET_ITEM(descrs, i)))
            Py_RETURN_NONE;
        arrays[i] = (PyArrayObject *)v;
        ins[i] = PyArray_DATA((PyArrayObject *)v);
    }
    for (Py_ssize_t i = 0; i < n_absent; i++)
        ins[n_in + i] = NULL;

    /* the plan for these shapes: the same key as the Python path's */
    PyObject *key;
    if (n_in == 1) {
        key = PyObject_GetAttrString((PyObject *)arrays[0], "shape");
    } else {
        key = PyTuple_New(n_in);
        for (Py_ssize_t i = 0; key && i < n_in; i++) {
            PyObject *s = PyObject_GetAttrString((PyObject *)arrays[i], "shape");
            if (!s) { Py_CLEAR(key); break; }
            PyTuple_SET_ITEM(key, i, s);
        }
    }
    if (!key) return NULL;
    PyObject *plan = PyDict_GetItemWithError(plans, key);
    Py_DECREF(key);
    if (!plan) {
        if (PyErr_Occurred()) return NULL;
        Py_RETURN_NONE;          /* the Python path makes the plan */
    }
    PyObject *outs = PyTuple_GET_ITEM(plan, 0);
    int64_t *dims = (int64_t *)PyLong_AsVoidPtr(PyTuple_GET_ITEM(plan, 1));
    long long need = PyLong_AsLongLong(PyTuple_GET_ITEM(plan, 2));
    Py_ssize_t n_out = PyTuple_GET_SIZE(outs);
    if (n_out > MAX_IO || PyErr_Occurred())
        Py_RETURN_NONE;

    PyObject *result = PyList_New(n_out);
    if (!result) return NULL;
    void *optr[MAX_IO];
    float *zip_buf[MAX_IO];
    float small[MAX_IO][8];     /* ZipMap rows of a batch-1 call: no allocation */
    int rc = 0;
    for (Py_ssize_t j = 0; j < n_out; j++)
        zip_buf[j] = NULL;
    for (Py_ssize_t j = 0; j < n_out; j++) {
        PyObject *o = PyTuple_GET_ITEM(outs, j);
        if (PyLong_AsLong(PyTuple_GET_ITEM(o, 0)) == 0) {
            PyObject *shape = PyTuple_GET_ITEM(o, 1);
            int nd = (int)PyTuple_GET_SIZE(shape);
            npy_intp d[NPY_MAXDIMS];
            for (int k = 0; k < nd && k < NPY_MAXDIMS; k++)
                d[k] = (npy_intp)PyLong_AsSsize_t(PyTuple_GET_ITEM(shape, k));
            PyObject *descr = PyTuple_GET_ITEM(o, 2);
            Py_INCREF(descr);   /* PyArray_Empty steals it */
            PyObject *a = PyArray_Empty(nd, d, (PyArray_Descr *)descr, 0);
            if (!a) goto fail;
            PyList_SET_ITEM(result, j, a);
            optr[j] = PyArray_DATA((PyArrayObject *)a);
        } else {
            Py_ssize_t n = PyLong_AsSsize_t(PyTuple_GET_ITEM(o, 2)) * PyLong_AsSsize_t(PyTuple_GET_ITEM(o, 3));
            float *b = n <= 8 ? small[j] : PyMem_Malloc((size_t)(n > 0 ? n : 1) * sizeof(float));
            if (!b) { PyErr_NoMemory(); goto fail; }
            zip_buf[j] = b;
            Py_INCREF(Py_None);
            PyList_SET_ITEM(result, j, Py_None);
            optr[j] = b;
        }
    }

    /* the arena: one no other call holds meanwhile (as the Python path) */
    PyObject *arena = NULL;
    void *arena_ptr = PyLong_AsVoidPtr(PyTuple_GET_ITEM(st, 7));
    if (need > 0) {
        Py_ssize_t np_ = PyList_GET_SIZE(pool);
        if (np_ > 0) {
            arena = PyList_GET_ITEM(pool, np_ - 1);
            Py_INCREF(arena);
            if (PyList_SetSlice(pool, np_ - 1, np_, NULL) < 0) { Py_DECREF(arena); goto fail; }
            if (!PyTuple_CheckExact(arena) || PyTuple_GET_SIZE(arena) < 4
                    || PyLong_AsLongLong(PyTuple_GET_ITEM(arena, 1)) < need) {
                /* too small: back to the pool; the Python path makes a bigger one */
                int e = PyList_Append(pool, arena);
                Py_DECREF(arena);
                if (e < 0) goto fail;
                Py_DECREF(result);
                for (Py_ssize_t j = 0; j < n_out; j++)
                    if (zip_buf[j] && zip_buf[j] != small[j]) PyMem_Free(zip_buf[j]);
                Py_RETURN_NONE;
            }
            arena_ptr = PyLong_AsVoidPtr(PyTuple_GET_ITEM(arena, 3));
        } else {
            Py_DECREF(result);
            for (Py_ssize_t j = 0; j < n_out; j++)
                if (zip_buf[j] && zip_buf[j] != small[j]) PyMem_Free(zip_buf[j]);
            Py_RETURN_NONE;
        }
    }
    if (PyErr_Occurred()) { Py_XDECREF(arena); goto fail; }

    onnxc_run_fn fn = (onnxc_run_fn)PyLong_AsVoidPtr(PyTuple_GET_ITEM(st, 3));
    int threads = (int)PyLong_AsLong(PyTuple_GET_ITEM(st, 4));
    /* the feed dict may change while the GIL is released: keep the inputs alive */
    for (Py_ssize_t i = 0; i < n_in; i++) Py_INCREF(arrays[i]);
    Py_BEGIN_ALLOW_THREADS
    rc = fn(ins, optr, dims, arena_ptr, threads);
    Py_END_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < n_in; i++) Py_DECREF(arrays[i]);
    if (arena) {
        int e = PyList_Append(pool, arena);
        Py_DECREF(arena);
        if (e < 0) goto fail;
    }
    if (rc) {
        Py_DECREF(result);
        for (Py_ssize_t j = 0; j < n_out; j++)
            if (zip_buf[j] && zip_buf[j] != small[j]) PyMem_Free(zip_buf[j]);
        return PyLong_FromLong(rc);
    }
    for (Py_ssize_t j = 0; j < n_out; j++) {
        if (!zip_buf[j]) continue;
        PyObject *o = PyTuple_GET_ITEM(outs, j);
        PyObject *lst = zipmap(zip_buf[j], PyTuple_GET_ITEM(o, 1), PyLong_AsSsize_t(PyTuple_GET_ITEM(o, 2)),
                               PyLong_AsSsize_t(PyTuple_GET_ITEM(o, 3)));
        if (zip_buf[j] != small[j]) PyMem_Free(zip_buf[j]);
        zip_buf[j] = NULL;
        if (!lst) goto fail;
        PyList_SetItem(result, j, lst);
    }
    return result;

fail:
    Py_DECREF(result);
    for (Py_ssize_t j = 0; j < n_out; j++)
        if (zip_buf[j] && zip_buf[j] != small[j]) PyMem_Free(zip_buf[j]);
    return NULL;
}

static PyMethodDef methods[] = {
    {"run", (PyCFunction)(void (*)(void))fast_run, METH_FASTCALL, "run(state, feed): see the source"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "onnxc_fastcall", NULL, -1, methods};

PyMODINIT_FUNC PyInit_onnxc_fastcall(void)
{
    import_array();
    return PyModule_Create(&module);
}
