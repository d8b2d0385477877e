/* skip: odd() starts with jrcxz, which has only a rel8 form and cannot be
 * relocated out of line: rtrace skips it, says so, and traces the rest. */
#include <stdio.h>

__asm__(".text\n"
	".globl odd\n"
	".type odd, @function\n"
	"odd:\n"
	"	jrcxz 1f\n"
	"1:	mov %edi, %eax\n"
	"	ret\n"
	".size odd, .-odd\n");

int odd(int x);
int even(int x) { return odd(x) + 1; }

int main(void)
{
	printf("skip %d\n", even(41));
	return 0;
}
