/* autotypes: one function per kind of parameter and return type, for -a. */
#include <stdbool.h>
enum color { RED, GREEN = 5 };
struct pt { int x, y; };
typedef unsigned long ulong_t;
int fi(int a, unsigned b, long c, unsigned long d, short e, unsigned short f) { return a; }
char fc(char a, unsigned char b, signed char c, bool d) { return a; }
const char *fs(const char *a, char *b, const unsigned char *c) { return a; }
double fd(float a, double b, long double c) { return b; }
float ff(float a) { return a; }
void *fp(void *a, int *b, int (*cb)(int), struct pt *p) { return a; }
enum color fe(enum color c) { return c; }
struct pt fst(struct pt p) { return p; }
ulong_t ft(ulong_t x) { return x; }
void fv(void) {}
int cb(int x) { return x; }
int main(void) {
	struct pt p = {1, 2};
	fi(1,2,3,4,5,6); fc('a','b','c',1); fs("x","y",(const unsigned char*)"z"); fd(1,2,3); ff(1); fp(0,0,cb,&p); fe(GREEN); fst(p); ft(9); fv();
	return 0;
}

/* A struct too big for registers comes back through a hidden pointer in rdi. */
struct big { long a, b, c, d; };
struct big mk(long x, long y) { struct big r = {x, y, x + y, x * y}; return r; }
long use_mk(void) { return mk(3, 4).d; }
