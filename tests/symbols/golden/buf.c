#include <stdlib.h>
#include "buf.h"

struct buf {
    char *data;
    size_t len;
};

typedef struct {
    int x;
} point;

enum mode { READ, WRITE };

static int grow(struct buf *b, size_t n)
{
    return 0;
}

char *buf_data(struct buf *b)
{
    return b->data;
}

int buf_len(const struct buf *b);
