#ifndef CNETREACH_ZLIB_H
#define CNETREACH_ZLIB_H

// zlib (Debian's zlib1g-dev, which SwiftNIO's compression already needs) for decoding
// `Content-Encoding: gzip` and `deflate` bodies in bounded pieces.
#include <zlib.h>

/// inflateInit2, a macro in zlib.h (it passes the header's version and struct size), as a
/// function Swift can call. `window_bits`: 15 + 16 for gzip, 15 for zlib, -15 for raw deflate.
static inline int cnr_inflate_init2(z_streamp stream, int window_bits) {
    return inflateInit2(stream, window_bits);
}

#endif
