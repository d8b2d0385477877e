/* slow: slow() sleeps 20 ms, the rest returns at once; a time filter of a
 * few milliseconds keeps main and slow and drops the others. */
#include <stdio.h>
#include <unistd.h>

volatile int sink;

int fast(int x) { return x + 1; }
void slow(int x) { sink = fast(x); usleep(20000); }
int mid(int x) { return fast(x) * 2; }

int main(void)
{
	sink = mid(1);
	slow(2);
	sink = fast(3);
	slow(4);
	printf("slow %d\n", mid(5));
	return 0;
}
