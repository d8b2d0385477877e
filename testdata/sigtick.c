/* sigtick: a 1 ms timer's handler calls tick() while main calls fib()
 * as fast as it can, so signals land inside rtrace's stubs too. Every
 * handler call is in the trace. With a second argument, every 8th handler
 * leaves by siglongjmp, and main goes on tracing. The period leaves main
 * room to run under the int3 engine's 4 stops per handler: at 100 µs, on
 * a machine where a stop took 25-50 µs, the handlers ran back to back,
 * main never ran, and with siglongjmp (which delivers the pending signal
 * as it unblocks it, before it leaves the handler's stack) the nested
 * handlers overflowed the stack. */
#include <setjmp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/time.h>

static volatile sig_atomic_t ticks, jumps;
static sigjmp_buf env;
static int jump;

__attribute__((noinline)) void tick(void) { ticks++; }
__attribute__((noinline)) int fib(int n) { return n < 2 ? n : fib(n - 1) + fib(n - 2); }
__attribute__((noinline)) void done(void) { }

static void handler(int sig)
{
	(void)sig;
	tick();
	if (jump && ticks % 8 == 0) {
		jumps++;
		siglongjmp(env, 1);
	}
}

int main(int argc, char **argv)
{
	int want = argc > 1 ? atoi(argv[1]) : 200;
	jump = argc > 2;
	struct sigaction sa = { .sa_handler = handler };
	sigaction(SIGALRM, &sa, 0);
	/* The timer starts once env is saved: a tick that jumped to it before
	 * (or while sigsetjmp filled it) crashed, or left SIGALRM blocked. */
	if (sigsetjmp(env, 1) == 0) {
		struct itimerval it = { { 0, 1000 }, { 0, 1000 } };
		setitimer(ITIMER_REAL, &it, 0);
	}
	while (ticks < want)
		fib(12);
	struct itimerval off = { 0 };
	setitimer(ITIMER_REAL, &off, 0);
	done();
	printf("ticks %d jumps %d\n", (int)ticks, (int)jumps);
	return 0;
}
