/* sigtick: a 100 µs timer's handler calls tick() while main calls fib()
 * as fast as it can, so signals land inside rtrace's stubs too. Every
 * handler call is in the trace. With a second argument, every 8th handler
 * leaves by siglongjmp, and main goes on tracing. */
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
		struct itimerval it = { { 0, 100 }, { 0, 100 } };
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
