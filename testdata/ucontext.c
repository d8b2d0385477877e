/* ucontext: a coroutine on a stack of its own, switched to and from with
 * swapcontext(3) (makecontext, uc_link back to main at its end). Under a
 * tracer that hijacked swapcontext's return, the return came in the other
 * context and the program looped or crashed; it prints the same lines
 * traced or not. */
#include <stdio.h>
#include <ucontext.h>

static ucontext_t main_ctx, co_ctx;
static char stack[64 * 1024];

__attribute__((noinline)) int work(int i) { return i * 2 + 1; }

__attribute__((noinline)) void coroutine(void)
{
	for (int i = 0; i < 3; i++) {
		printf("co %d %d\n", i, work(i));
		swapcontext(&co_ctx, &main_ctx);
	}
}

int main(void)
{
	getcontext(&co_ctx);
	co_ctx.uc_stack.ss_sp = stack;
	co_ctx.uc_stack.ss_size = sizeof stack;
	co_ctx.uc_link = &main_ctx;
	makecontext(&co_ctx, coroutine, 0);
	for (int i = 0; i < 4; i++) {
		printf("main %d\n", i);
		swapcontext(&main_ctx, &co_ctx);
	}
	printf("done\n");
	return 0;
}
