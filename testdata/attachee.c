// attachee: runs steps when asked, so that a test attaches, traces and
// detaches between steps it chose: each line "N" on stdin runs the next N
// steps, each allocating, computing and printing its checksum ("i sum"),
// so a trace shows calls and a detach that broke something shows wrong
// output. At the end of stdin, given the argument "check", it compares
// every executable file mapping of its own with the file (the code rtrace
// patched and restored after a detach) and says whether they are intact.
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

__attribute__((noinline)) static unsigned long step(int i) {
	unsigned long *v = malloc(64 * sizeof *v);
	unsigned long sum = 0;
	for (int k = 0; k < 64; k++)
		v[k] = (unsigned long)i * k + 7;
	for (int k = 0; k < 64; k++)
		sum = sum * 31 + v[k];
	free(v);
	return sum;
}

static int check_text(void) {
	FILE *maps = fopen("/proc/self/maps", "r");
	char line[512];
	int bad = 0, n = 0;
	while (fgets(line, sizeof line, maps)) {
		unsigned long lo, hi, off;
		char perms[8], path[256] = "";
		if (sscanf(line, "%lx-%lx %7s %lx %*s %*s %255s", &lo, &hi, perms, &off, path) < 4)
			continue;
		if (perms[2] != 'x' || path[0] != '/')
			continue;
		FILE *f = fopen(path, "rb");
		if (!f)
			continue;
		size_t len = hi - lo;
		char *buf = malloc(len);
		fseek(f, off, SEEK_SET);
		size_t got = fread(buf, 1, len, f);
		fclose(f);
		n++;
		if (memcmp(buf, (void *)lo, got) != 0) {
			for (size_t k = 0; k < got; k++)
				if (buf[k] != ((char *)lo)[k]) {
					printf("text differs: %s at file offset %#lx\n", path, off + k);
					break;
				}
			bad++;
		}
		free(buf);
	}
	fclose(maps);
	if (!bad)
		printf("text intact (%d mappings)\n", n);
	return bad;
}

int main(int argc, char **argv) {
	char line[64];
	int i = 0;
	printf("pid %d\n", getpid());
	fflush(stdout);
	// fgets restarts after a signal rtrace intercepts (the kernel restarts
	// the read: the program never sees the signal).
	while (fgets(line, sizeof line, stdin)) {
		for (int n = atoi(line); n > 0; n--, i++)
			printf("%d %lu\n", i, step(i));
		fflush(stdout);
	}
	return argc > 1 && strcmp(argv[1], "check") == 0 ? check_text() : 0;
}
