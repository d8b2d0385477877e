// abi: parameters whose placement the SysV x86-64 ABI decides from more
// than the members debug/dwarf lists: static members (one of the struct's
// own type), bit-fields, base classes, a long double member, a destructor,
// an empty class (with a destructor: by reference), a class with bases
// returned (through rdi). resolver's TestAutoSpecsABI holds -a's specs to
// the ABI.
struct Vec2 { float x, y; static const Vec2 zero; };
const Vec2 Vec2::zero = {0, 0};
struct Bits { double d; unsigned f : 1; };
struct Bits2 { long a; int b : 3; };
struct Base { int a, b; };
struct Derived : Base {};
struct LD { long double x; };
struct Dtor { long a; ~Dtor() {} };
struct Defaulted { double a; ~Defaulted() = default; };
struct EmptyDtor { ~EmptyDtor() {} };
struct Empty {};
struct BigBase { long a, b, c; };
struct Big : BigBase {};

float v2(Vec2 v, int k) { return v.x + k; }
double bits(Bits b, int k) { return b.d + b.f + k; }
long bits2(Bits2 b, int k) { return b.a + b.b + k; }
int derived(Derived d, int k) { return d.a + k; }
long ld7(long a, long b, long c, long d, long e, long f, long h, LD s) { return a + h + (long)s.x; }
LD ldret(int k) { LD r = {(long double)k}; return r; }
long dtor(Dtor d, int k) { return d.a + k; }
Empty emptyret(int k) { return Empty(); }
long defaulted(Defaulted d, int k) { return (long)d.a + k; }
int emptydtor(EmptyDtor e, int k) { return k; }
Big bigret(long a, long b) { Big r; r.a = a; r.b = b; r.c = a + b; return r; }

int main()
{
	Bits b = {1, 1};
	Bits2 b2 = {1, 1};
	Derived d;
	d.a = 1;
	Dtor t;
	t.a = 2;
	LD s = {3};
	emptyret(0);
	Defaulted df = {4};
	EmptyDtor ed;
	long extra = defaulted(df, 1) + emptydtor(ed, 2) + bigret(1, 2).c;
	return (int)(v2(Vec2::zero, 1) + bits(b, 1) + bits2(b2, 1) + derived(d, 1) + ld7(1, 2, 3, 4, 5, 6, 7, s) + (long)ldret(2).x + dtor(t, 1) + extra) & 1;
}
