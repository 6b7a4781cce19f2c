#ifndef ONNXC_IMAGE_JPEG_H
#define ONNXC_IMAGE_JPEG_H
static int onnxc_jpeg_probe(const uint8_t *d, int64_t n, int64_t *h, int64_t *w, int64_t *work)
{ (void)d; (void)n; *h = *w = *work = 0; return ONNXC_IMG_UNSUPPORTED; }
static int onnxc_jpeg_decode(const uint8_t *d, int64_t n, int64_t h, int64_t w, uint8_t *rgb, uint8_t *ws, int64_t work)
{ (void)d; (void)n; (void)h; (void)w; (void)rgb; (void)ws; (void)work; return ONNXC_IMG_UNSUPPORTED; }
#endif
