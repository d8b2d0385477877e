// Fixture for tracer/unwind: main -> top -> mid -> leaf, then leaf ->
// qsort (libc) -> cmp, then leaf -> raise (libc) -> signal frame -> onsig.
// stopme is an int3 at a function entry: when it traps, rsp points at the
// return address into its caller, as at a breakpoint that rtrace plants on
// a function's first instruction. Each of the three stops in stopme.
#include <signal.h>
#include <stdlib.h>

void stopme(void);
__asm__(".text\n"
	".globl stopme\n"
	".type stopme, @function\n"
	"stopme:\n"
	"\tint3\n"
	"\tret\n"
	".size stopme, .-stopme\n");

static volatile int sink;
static int stopped;

__attribute__((noinline, noclone)) static int cmp(const void *a, const void *b)
{
	int x = *(const int *)a, y = *(const int *)b;
	if (!stopped) {
		stopped = 1;
		stopme(); /* second stop: cmp <- libc qsort <- leaf <- ... */
	}
	sink += x;
	return (x > y) - (x < y);
}

__attribute__((noinline, noclone)) static void onsig(int sig)
{
	sink += sig;
	stopme(); /* third stop: onsig <- __restore_rt <- raise <- leaf <- ... */
	sink += sig;
}

__attribute__((noinline, noclone)) int leaf(int n)
{
	volatile int v[64];
	int a[8] = {5, 3, 8, 1, 9, 2, 7, 4};
	for (int i = 0; i < 64; i++)
		v[i] = i * n;
	stopme(); /* first stop: leaf <- mid <- top <- main */
	qsort(a, 8, sizeof a[0], cmp);
	signal(SIGUSR1, onsig);
	raise(SIGUSR1);
	return v[n & 63] + a[0] + sink;
}

__attribute__((noinline, noclone)) int mid(int n)
{
	volatile int w = n * 3;
	int r = leaf(w + 1);
	sink += r;
	return r + w;
}

__attribute__((noinline, noclone)) int top(int n)
{
	char *p = malloc(32 + n);
	int r = mid(n + 2);
	p[0] = (char)r;
	sink += p[0];
	free(p);
	return r + 1;
}

int main(int argc, char **argv)
{
	(void)argv;
	int r = top(argc);
	sink += r;
	return 0;
}
