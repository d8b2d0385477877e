// memtransfer: memory transfers through the C library's functions, called
// through the PLT (built with -fno-builtin: gcc would inline them), for
// the memtransfer module. It prints each call's expected size and the
// address the module reports (the source, or memset's destination).
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <wchar.h>

static char src[64] = "a string of 28 characters...";
static char dst[128];
static wchar_t wsrc[16] = L"wide: 10 c";
static wchar_t wdst[16];

int main(void) {
	memcpy(dst, src, 40);
	printf("memcpy 40 %p\n", (void *)src);
	memset(dst, 0, 100);
	printf("memset 100 %p\n", (void *)dst);
	strcpy(dst, src);
	printf("strcpy %zu %p\n", strlen(src), (void *)src);
	char *d = strdup(src);
	printf("strdup %zu %p\n", strlen(src), (void *)src);
	wcscpy(wdst, wsrc);
	printf("wcscpy %zu %p\n", wcslen(wsrc) * sizeof(wchar_t), (void *)wsrc);
	free(d);
	return 0;
}
