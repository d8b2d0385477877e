/* usdt: USDT probes with and without a semaphore, with arguments of
 * several kinds (stack slots or registers depending on -O, an immediate, a
 * char, a string pointer). app:guarded has a semaphore: the program
 * evaluates it only while a tracer has bumped the counter. */
#define _SDT_HAS_SEMAPHORES 1
#include <stdio.h>
#include <sys/sdt.h>

unsigned short app_guarded_semaphore __attribute__((section(".probes")));

volatile long sink;

void guarded(int i, char c)
{
	if (__builtin_expect(app_guarded_semaphore, 0))
		DTRACE_PROBE2(app, guarded, i, c);
}

/* The probes below have no semaphore. */
#undef _SDT_NOTE_SEMAPHORE_USE
#define _SDT_NOTE_SEMAPHORE_USE(provider, name)
#undef _SDT_SEMAPHORE
#define _SDT_SEMAPHORE(p, n) _SDT_ASM_1(_SDT_ASM_ADDR 0)

int step(int i, long acc, const char *tag)
{
	DTRACE_PROBE3(app, step, i, acc, tag);
	return i * 2;
}

int main(void)
{
	long acc = 0;
	DTRACE_PROBE(app, start);
	for (int i = 0; i < 3; i++) {
		acc += step(i, acc, "loop");
		guarded(i, 'a' + i);
	}
	DTRACE_PROBE1(app, done, -5);
	/* A global: its operand is a symbol (sink(%rip)), which rtrace does
	 * not decode: the probe is recorded without it, with one warning. */
	DTRACE_PROBE2(app, global, sink, 7);
	sink = acc;
	printf("usdt %ld\n", acc);
	return 0;
}
