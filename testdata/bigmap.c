// bigmap: memory the leak scan must not read whole: an 8 GiB
// reservation (MAP_NORESERVE: no memory until touched) holding, 4 GiB
// in, the only pointer to a block of 100 bytes (still reachable, if the
// scan finds that page), and a 100 GiB one, untouched (not scanned: the
// scan says so). Prints "bigmap done".
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>

int main(void) {
	size_t gib = 1UL << 30;
	// One reservation, a page kept inaccessible between the two parts:
	// two mappings the kernel does not merge.
	char *all = mmap(NULL, 108 * gib + 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	char *eight = all, *hundred = all + 8 * gib + 4096;
	if (all == MAP_FAILED || mprotect(eight, 8 * gib, PROT_READ | PROT_WRITE) || mprotect(hundred, 100 * gib, PROT_READ | PROT_WRITE)) {
		perror("mmap");
		return 1;
	}
	*(void **)(eight + 4 * gib) = malloc(100); // LINE:kept
	hundred[0] = 1;
	printf("bigmap done\n");
	return 0;
}
