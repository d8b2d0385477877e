// keeper: runs steps when asked, as attachee.c does ("N" on stdin runs
// the next N steps, each printing "i ..."), and each step leaves two
// blocks allocated: 100 bytes kept on a global list (still reachable)
// and 50 bytes whose last pointer is dropped (definitely lost). A window
// toggled around N steps ends with N of each.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct node {
	struct node *next;
	char pad[92];
};

struct node *kept; // the list: roots in .bss

__attribute__((noinline)) static void keep(void) {
	struct node *n = malloc(sizeof *n); // LINE:keep
	memset(n, 0, sizeof *n);
	n->next = kept;
	kept = n;
}

__attribute__((noinline)) static unsigned lose(int i) {
	char *volatile p = malloc(50); // LINE:lose
	memset(p, i, 50);
	unsigned sum = 0;
	for (int k = 0; k < 50; k++)
		sum += (unsigned char)p[k];
	p = NULL;
	return sum;
}

int main(void) {
	char line[64];
	int i = 0;
	printf("pid %d\n", getpid());
	fflush(stdout);
	while (fgets(line, sizeof line, stdin)) {
		for (int n = atoi(line); n > 0; n--, i++) {
			keep();
			printf("%d %u\n", i, lose(i));
		}
		fflush(stdout);
	}
	return 0;
}
