// pages: a block whose pages the page map tells apart, for rtrace
// pagemap. malloc(256 KiB) is a mapping of its own (glibc maps blocks of
// 128 KiB or more: mallopt(3), M_MMAP_THRESHOLD), 65 pages with its
// 16-byte header: pages 0-15 written with ones (dirty), pages 16-31
// written with zeros (dirty zero pages), pages 32-64 never touched. It
// is never freed: the density report sees it whole.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

char *block; // not static: the block stays

int main(void) {
	block = malloc(256 * 1024); // LINE:block
	if (!block)
		return 1;
	memset(block, 1, 16 * 4096 - 16);
	memset(block + 16 * 4096 - 16, 0, 16 * 4096);
	printf("pages block %p\n", (void *)block);
	return 0;
}
