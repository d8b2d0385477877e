/* byvalue: long doubles and structs passed and returned by value, with the
 * arguments after them. Each call is printed as uftrace replay shows it
 * (floats with %f, structs as NAME{...}), so a test can hold rtrace's
 * trace against what the program itself passed and got back. */
#include <stdio.h>

struct pt { int x, y; };                 /* one integer register */
struct mix { double d; long n; };        /* xmm, then an integer register */
struct fl { float a, b; double c; };     /* two xmm registers */
struct big { long a, b, c; };            /* memory */
struct empty { };

long double ld_div(long long a, long double b, int c) { return a / b + c; }
long double ld_two(float f, long double a, long double b, double d) { return a * b + f + d; }
long seventh(long a, long b, long c, long d, long e, long f, long g, long double h) { return a + g + (long)h; }
int pt_sum(struct pt p, int k) { return p.x + p.y + k; }
double mix_use(int i, struct mix m, double s) { return m.d * s + m.n + i; }
float fl_use(struct fl f, int k) { return f.a + f.b + f.c + k; }
long big_use(struct big b, long k, double s) { return b.a + b.c + k + (long)s; }
struct pt pt_make(int x, int y) { struct pt p = {x, y}; return p; }
struct big big_make(long a, long b) { struct big r = {a, b, a + b}; return r; }
struct mix mix_make(double d, long n) { struct mix m = {d, n}; return m; }
int empty_use(struct empty e, int k) { return k; }

int main(void)
{
	struct pt p = {1, 2};
	struct mix m = {0.5, 7};
	struct fl f = {1.5f, 2.5f, 3.0};
	struct big b = {10, 20, 30};
	struct empty e;

	printf("ld_div(4, %Lf, 3) = %Lf\n", -0.000002L, ld_div(4, -0.000002L, 3));
	printf("ld_two(%f, %Lf, %Lf, %f) = %Lf\n", 0.25f, 1.5L, -3.0L, 2.0, ld_two(0.25f, 1.5L, -3.0L, 2.0));
	printf("seventh(1, 2, 3, 4, 5, 6, 7, %Lf) = %ld\n", 8.5L, seventh(1, 2, 3, 4, 5, 6, 7, 8.5L));
	printf("pt_sum(pt{...}, 3) = %d\n", pt_sum(p, 3));
	printf("mix_use(2, mix{...}, %f) = %f\n", 4.0, mix_use(2, m, 4.0));
	printf("fl_use(fl{...}, 1) = %f\n", fl_use(f, 1));
	printf("big_use(big{...}, 5, %f) = %ld\n", 6.0, big_use(b, 5, 6.0));
	printf("pt_make(3, 4) = pt{...} %d\n", pt_make(3, 4).y);
	printf("big_make(5, 6) = big{...} %ld\n", big_make(5, 6).c);
	printf("mix_make(%f, 9) = mix{...} %ld\n", 1.25, mix_make(1.25, 9).n);
	printf("empty_use(empty{}, 1) = %d\n", empty_use(e, 1));
	return 0;
}
