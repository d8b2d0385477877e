// leakkinds: blocks of each of memcheck's leak kinds at exit, in known
// numbers (TestLeakKinds compares rtrace's with memcheck's):
//   definitely lost: the head of a 4-node list (3 indirectly lost behind
//     it), one of a 2-block cycle (the other indirectly lost), a plain
//     block, a block only an interior pointer in another lost block
//     points into (indirectly lost: memcheck does not tell start from
//     interior pointers among lost blocks);
//   possibly lost: a block only an interior pointer in a global points at;
//   still reachable: a block a global points at, and its child.
// Pointers to the lost blocks are scrubbed off the stack before exit.
#include <stdlib.h>

struct node {
	struct node *next;
	char pad[24];
};

void *reach;      // still reachable, and its child
char *interior;   // points 8 bytes into a block: possibly lost
void *volatile x; // keeps the compiler from dropping the stores

__attribute__((noinline)) static void list(int n) {
	struct node *head = NULL;
	for (int i = 0; i < n; i++) {
		struct node *p = malloc(sizeof *p); // LINE:list
		p->next = head;
		head = p;
	}
	x = head;
}

__attribute__((noinline)) static void cycle(void) {
	struct node *a = malloc(sizeof *a); // LINE:cycle
	struct node *b = malloc(sizeof *b);
	a->next = b;
	b->next = a;
	x = a;
}

__attribute__((noinline)) static void plain(void) {
	x = malloc(10); // LINE:plain
}

__attribute__((noinline)) static void inner(void) {
	char **outer = malloc(16); // LINE:outer
	outer[0] = (char *)malloc(48) + 16;
	outer[1] = NULL;
	x = outer;
}

__attribute__((noinline)) static void kept(void) {
	void **r = malloc(2 * sizeof(void *)); // LINE:reach
	r[0] = malloc(64);
	r[1] = NULL;
	reach = r;
	interior = (char *)malloc(40) + 8; // LINE:possible
}

// scrub overwrites the stack the calls above used.
__attribute__((noinline)) static void scrub(void) {
	volatile char buf[8192]; // volatile: the stores stay
	for (int i = 0; i < (int)sizeof buf; i++)
		buf[i] = 0;
}

int main(void) {
	list(4);
	cycle();
	plain();
	inner();
	kept();
	x = NULL;
	scrub();
	return 0;
}
