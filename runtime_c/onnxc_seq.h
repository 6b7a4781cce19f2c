/* Sequences and optionals (onnxc_seq, onnxc_item: onnxc_runtime.h): items are made on the run's
 * heap and never written afterwards, so sequences share them freely. */
#ifndef ONNXC_SEQ_H
#define ONNXC_SEQ_H

static inline int64_t onnxc_item_numel(const onnxc_item *it)
{
    int64_t n = 1;
    for (int64_t k = 0; k < it->rank; ++k)
        n *= it->dims[k];
    return n;
}

/* A new items array for n items (NULL: the heap is full). */
static inline onnxc_item *onnxc_items_new(onnxc_heap *H, int64_t n)
{
    return (onnxc_item *)onnxc_halloc(H, (n > 0 ? n : 1) * (int64_t)sizeof(onnxc_item));
}

/* *it = a heap copy of a tensor of the given dims; -1 when the heap is full. */
static inline int onnxc_item_copy(onnxc_heap *H, onnxc_item *it, const void *data, int64_t rank,
                                  const int64_t *dims, int64_t itemsize)
{
    int64_t n = 1;
    for (int64_t k = 0; k < rank; ++k) {
        it->dims[k] = dims[k];
        n *= dims[k];
    }
    void *p = onnxc_halloc(H, n * itemsize);
    if (!p)
        return -1;
    if (n > 0)
        memcpy(p, data, (size_t)(n * itemsize));
    it->data = p;
    it->rank = rank;
    return 0;
}

/* Position `pos` of a sequence of n, Python-style negative allowed; -1 when outside
 * [-n, n - 1] (or [-n, n] with end_ok: an insertion point). */
static inline int64_t onnxc_seq_pos(int64_t pos, int64_t n, int end_ok)
{
    if (pos < -n || pos > n || (pos == n && !end_ok))
        return -1;
    return pos < 0 ? pos + n : pos;
}

#endif
